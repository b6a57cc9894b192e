"""Run a CUDA C kernel on the CPU (tests only): g++ compiles it against cuda_cpu/cuda_cpu.h.

    kernel = load(source_path, "flash_attention_fwd", options=("-DD_H=64",))
    kernel(grid=(2, 3), block=(64,), args=(q, k, v, out, lse, np.int32(n), ...))

NumPy arrays become device pointers (they must be C-contiguous: the kernel writes into them),
np.uint64(0) a null pointer (as CuPy passes it: 8 bytes of zeros), np.int32 / np.uint32 / np.float32
scalars int / unsigned / float arguments. One CUDA thread is one fiber on one CPU thread (cuda_cpu/cuda_cpu.h),
so this is for small shapes: it checks a kernel's results, not its speed.

Sanitizers (`sanitizer=`, or the environment variable CUDA_CPU_SANITIZER) build the kernel with
g++'s checkers of what a GPU would do wrong without saying so:
    "thread"   ThreadSanitizer: two threads of a block touch one address, one of them writing,
               with no barrier between them: a missing __syncthreads() or __syncwarp(), a race.
    "address"  AddressSanitizer and UndefinedBehaviorSanitizer: a read or write outside an input
               array, outside the shared memory the launch asked for, or outside a __shared__ array;
               signed overflow and other undefined arithmetic.
Their runtime must be in the process before Python starts: run such a kernel in a subprocess with
`sanitizer_env(name)` (tests/test_kernel_sanitizers.py does).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

SHIM = Path(__file__).with_name("cuda_cpu")
CXX = shutil.which("g++")
CACHE = Path(tempfile.gettempdir()) / "transformer-cuda-cpu"
SANITIZER_FLAGS = {
    "thread": ("-fsanitize=thread",),
    "address": ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"),
}
SANITIZER_RUNTIME = {"thread": "libtsan.so", "address": "libasan.so"}
SANITIZER_EXIT = 66  # the exit status of a process whose kernel a sanitizer caught


@functools.cache
def sanitizer_runtime(sanitizer: str) -> Path | None:
    """The sanitizer's runtime library that g++ links against, or None where it is not installed."""
    if CXX is None:
        return None
    name = SANITIZER_RUNTIME[sanitizer]
    found = subprocess.run([CXX, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    return Path(found) if os.path.isabs(found) and os.path.exists(found) else None  # else g++ echoes the name


PROBE = """#include <thread>
int main() { int x = 0; std::thread t([&] { x = 1; }); t.join(); return x - 1; }
"""


@functools.cache
def sanitizer_works(sanitizer: str) -> bool:
    """Whether g++ builds and runs a small threaded program under `sanitizer` on this machine (its
    runtime libraries installed, and able to start here)."""
    if sanitizer_runtime(sanitizer) is None:
        return False
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as folder:
        cpp, exe = Path(folder) / "probe.cpp", Path(folder) / "probe"
        cpp.write_text(PROBE)
        built = subprocess.run([CXX, "-std=c++20", "-pthread", *SANITIZER_FLAGS[sanitizer], "-o", str(exe), str(cpp)],
                               capture_output=True, text=True)
        if built.returncode:
            return False
        return subprocess.run([str(exe)], capture_output=True, env=sanitizer_env(sanitizer)).returncode == 0


def sanitizer_env(sanitizer: str) -> dict[str, str]:
    """Environment for a subprocess whose kernels run under `sanitizer`: its runtime preloaded,
    the first report ends the process with SANITIZER_EXIT."""
    runtime = sanitizer_runtime(sanitizer)
    if runtime is None:
        raise RuntimeError(f"g++'s {SANITIZER_RUNTIME[sanitizer]} is not installed")
    stop = f"halt_on_error=1 exitcode={SANITIZER_EXIT}"
    return {**os.environ, "LD_PRELOAD": str(runtime), "CUDA_CPU_SANITIZER": sanitizer,
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",  # no thread pools TSan cannot see into
            "TSAN_OPTIONS": f"{stop} report_signal_unsafe=0",
            "ASAN_OPTIONS": f"{stop} detect_leaks=0",  # Python's own allocations are not the kernel's
            "UBSAN_OPTIONS": f"{stop} print_stacktrace=1"}


def _arg_type(a) -> str:
    if isinstance(a, np.ndarray) or (isinstance(a, np.uint64) and a == 0):
        return "ptr"
    if isinstance(a, np.int32):
        return "int"
    if isinstance(a, np.uint32):
        return "uint"
    if isinstance(a, np.float32):
        return "float"
    raise TypeError(f"kernel arguments are NumPy arrays, np.uint64(0), np.int32, np.uint32 or np.float32, got {a!r}")


def _wrapper(source: str, name: str, types: tuple[str, ...], shared_bytes: int) -> str:
    cast = {"ptr": "cuda_cpu::AnyPtr{{args[{i}]}}", "int": "*static_cast<int*>(args[{i}])",
            "float": "*static_cast<float*>(args[{i}])", "uint": "*static_cast<unsigned*>(args[{i}])"}
    call = ", ".join(cast[t].format(i=i) for i, t in enumerate(types))
    return (f'#include "cuda_cpu.h"\n{source}\n'
            'extern "C" int emu_launch(unsigned gx, unsigned gy, unsigned gz,'
            ' unsigned bx, unsigned by, unsigned bz, void** args) {\n'
            f'    return cuda_cpu::launch(dim3(gx, gy, gz), dim3(bx, by, bz), {shared_bytes}, [&] {{ {name}({call}); }});\n}}\n')


def _dynamic_shared(source: str, shared_bytes: int) -> str:
    """`extern __shared__ T name[];` (sized at launch on a GPU) becomes a reference to an array of
    that size at cuda_cpu::dynamic_shared, a buffer of that size the shim fills with NaN before every block."""
    if shared_bytes > 256 * 1024:
        raise ValueError(f"the emulator gives a block 256 KiB of dynamic shared memory, asked for {shared_bytes}")

    def array(m):
        element = re.sub(r"__align__\(\d+\)", "", m.group(1)).strip()  # "unsigned char"
        size = f"{max(shared_bytes, 16)} / sizeof({element})"
        return f"auto& {m.group(2)} = *reinterpret_cast<{element}(*)[{size}]>(cuda_cpu::dynamic_shared);"
    return re.sub(r"extern\s+__shared__\s+(.*?)(\w+)\[\]\s*;", array, source)


CXX_FLAGS = ("-std=c++20", "-O1", "-U_FORTIFY_SOURCE", "-fPIC", "-pthread", "-fno-strict-aliasing", "-Wno-unknown-pragmas")
# (-U_FORTIFY_SOURCE: where g++ fortifies by default (Ubuntu), glibc's checked longjmp refuses the jump
# from one fiber's stack to another's)


def precompiled_shim(flags: tuple[str, ...], defines: tuple[str, ...]) -> Path | None:
    """A folder holding cuda_cpu.h.gch, cuda_cpu.h (and the C++ library it includes) parsed once by g++
    for these flags: put first on the include path, a kernel's build skips 0.6 s of parsing, most of
    the 1 s a build takes. The -D options the header tests (CUDA_CPU_THREADS) are part of its key; g++
    checks the rest itself and parses the header as usual where the file does not fit. None where g++
    could not make it (the builds then parse the header)."""
    header = SHIM / "cuda_cpu.h"
    text = header.read_text()
    own = tuple(d for d in defines if re.search(rf"\b{re.escape(d[2:].split('=')[0])}\b", text))
    digest = hashlib.sha1("\0".join((text, *flags, *own)).encode()).hexdigest()[:16]
    folder = CACHE / f"shim-{digest}"
    if not (folder / "cuda_cpu.h.gch").exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"cuda_cpu.h.gch.{os.getpid()}.tmp"
        res = subprocess.run([CXX, *flags, *own, f"-I{SHIM}", f"-I{SHIM / 'include'}", "-x", "c++-header",
                              "-o", str(tmp), str(header)], capture_output=True, text=True)
        if res.returncode:
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, folder / "cuda_cpu.h.gch")  # atomic: parallel test workers may make the same file
    return folder


def build_command(cpp: Path, out: Path, flags: tuple[str, ...], defines: tuple[str, ...], folders) -> list[str]:
    """g++'s command line that builds the kernel source `cpp` (the shim's header first) into the shared
    library `out`: `flags` the sanitizer's, `folders` the include path after the precompiled shim's."""
    flags = (*CXX_FLAGS, *flags)
    pch = precompiled_shim(flags, defines)
    return [CXX, *flags, "-shared", *(f"-I{f}" for f in ((pch,) if pch else ()) + tuple(folders)), *defines,
            "-o", str(out), str(cpp)]


class Kernel:
    def __init__(self, source: Path, name: str, options: tuple[str, ...], sanitizer: str | None = None):
        if sanitizer not in (None, *SANITIZER_FLAGS):
            raise ValueError(f"sanitizer must be one of {sorted(SANITIZER_FLAGS)} or None, got {sanitizer!r}")
        self.source, self.name = Path(source), name
        self.defines = tuple(o for o in options if o.startswith("-D"))
        self.flags = ("-g", *SANITIZER_FLAGS[sanitizer]) if sanitizer else ()
        self._libs: dict = {}

    def _lib(self, types: tuple[str, ...], shared_bytes: int):
        key = (types, shared_bytes)
        if key not in self._libs:
            src = _dynamic_shared(self.source.read_text(), shared_bytes)
            text = _wrapper(src, self.name, types, shared_bytes)
            # headers: the shim's, then the kernel's own folder (its pure-C++ headers; the shim's
            # stand-ins for PTX headers of the same name are found first)
            folders = (SHIM, SHIM / "include", self.source.parent)
            shim = "".join(p.read_text() for f in folders for p in sorted(f.glob("*")) if p.suffix in (".h", ".cuh"))
            digest = hashlib.sha1("\0".join((text, shim, *self.defines, *self.flags)).encode()).hexdigest()[:16]
            so = CACHE / f"{self.name}-{digest}.so"
            if not so.exists():
                CACHE.mkdir(parents=True, exist_ok=True)
                cpp = CACHE / f"{self.name}-{digest}-{os.getpid()}.cpp"
                cpp.write_text(text)
                tmp = so.with_suffix(f".{os.getpid()}.tmp")
                res = subprocess.run(build_command(cpp, tmp, self.flags, self.defines, folders), capture_output=True,
                                     text=True)
                cpp.unlink()
                if res.returncode:
                    raise RuntimeError(f"g++ could not build {self.source.name} for the CPU:\n{res.stderr}")
                os.replace(tmp, so)  # atomic: parallel test workers may build the same file
            lib = ctypes.CDLL(str(so))
            lib.emu_launch.argtypes = [ctypes.c_uint] * 6 + [ctypes.POINTER(ctypes.c_void_p)]
            lib.emu_launch.restype = ctypes.c_int
            self._libs[key] = lib
        return self._libs[key]

    def __call__(self, grid, block, args, shared_bytes: int = 0):
        types = tuple(_arg_type(a) for a in args)
        for a in args:
            if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
                raise ValueError("array arguments must be C-contiguous")
        scalars = []  # the int/float values live here until the launch returns; the kernel reads their addresses
        addresses = []
        for a, t in zip(args, types):
            if t == "ptr":
                addresses.append(a.ctypes.data if isinstance(a, np.ndarray) else None)  # None: NULL
            else:
                scalars.append({"int": ctypes.c_int, "uint": ctypes.c_uint}[t](int(a)) if t != "float"
                               else ctypes.c_float(float(a)))
                addresses.append(ctypes.addressof(scalars[-1]))
        argv = (ctypes.c_void_p * len(args))(*addresses)
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        if self._lib(types, shared_bytes).emu_launch(*g, *b, argv):
            raise RuntimeError(f"{self.name}: a block got stuck at __syncthreads/__syncwarp that not all of its "
                               "threads reach (a barrier inside a branch some threads skip)")


def load(source, name: str, options=(), sanitizer: str | None = None) -> Kernel:
    if CXX is None:
        raise RuntimeError("running CUDA kernels on the CPU needs g++")
    return Kernel(source, name, tuple(options), sanitizer or os.environ.get("CUDA_CPU_SANITIZER") or None)
