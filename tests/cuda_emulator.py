"""Run a CUDA C kernel on the CPU (tests only): g++ compiles it against cuda_cpu/cuda_cpu.h.

    kernel = load(source_path, "flash_attention_fwd", options=("-DD_H=64",))
    kernel(grid=(2, 3), block=(64,), args=(q, k, v, out, lse, np.int32(n), ...))

NumPy arrays become device pointers (they must be C-contiguous: the kernel writes into them),
np.uint64(0) a null pointer (as CuPy passes it: 8 bytes of zeros), np.int32 / np.float32
scalars int / float arguments. One CUDA thread is one std::thread,
so this is for small shapes: it checks a kernel's results, not its speed.
"""
from __future__ import annotations

import ctypes
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


def _arg_type(a) -> str:
    if isinstance(a, np.ndarray) or (isinstance(a, np.uint64) and a == 0):
        return "ptr"
    if isinstance(a, np.int32):
        return "int"
    if isinstance(a, np.float32):
        return "float"
    raise TypeError(f"kernel arguments are NumPy arrays, np.uint64(0), np.int32 or np.float32, got {a!r}")


def _wrapper(source: str, name: str, types: tuple[str, ...]) -> str:
    cast = {"ptr": "cuda_cpu::AnyPtr{{args[{i}]}}", "int": "*static_cast<int*>(args[{i}])",
            "float": "*static_cast<float*>(args[{i}])"}
    call = ", ".join(cast[t].format(i=i) for i, t in enumerate(types))
    return (f'#include "cuda_cpu.h"\n{source}\n'
            'extern "C" void emu_launch(unsigned gx, unsigned gy, unsigned gz,'
            ' unsigned bx, unsigned by, unsigned bz, void** args) {\n'
            f'    cuda_cpu::launch(dim3(gx, gy, gz), dim3(bx, by, bz), [&] {{ {name}({call}); }});\n}}\n')


def _dynamic_shared(source: str, shared_bytes: int) -> str:
    """`extern __shared__ T name[];` (sized at launch on a GPU) becomes a reference to an array of
    that size in cuda_cpu::dynamic_shared, which the shim fills with NaN before every block."""
    if shared_bytes > 256 * 1024:
        raise ValueError(f"the emulator gives a block 256 KiB of dynamic shared memory, asked for {shared_bytes}")

    def array(m):
        element = re.sub(r"__align__\(\d+\)", "", m.group(1)).strip()  # "unsigned char"
        size = f"{max(shared_bytes, 16)} / sizeof({element})"
        return f"auto& {m.group(2)} = *reinterpret_cast<{element}(*)[{size}]>(cuda_cpu::dynamic_shared);"
    return re.sub(r"extern\s+__shared__\s+(.*?)(\w+)\[\]\s*;", array, source)


class Kernel:
    def __init__(self, source: Path, name: str, options: tuple[str, ...]):
        self.source, self.name = Path(source), name
        self.defines = tuple(o for o in options if o.startswith("-D"))
        self._libs: dict = {}

    def _lib(self, types: tuple[str, ...], shared_bytes: int):
        key = (types, shared_bytes)
        if key not in self._libs:
            src = _dynamic_shared(self.source.read_text(), shared_bytes)
            text = _wrapper(src, self.name, types)
            # headers: the shim's, then the kernel's own folder (its pure-C++ headers; the shim's
            # stand-ins for PTX headers of the same name are found first)
            folders = (SHIM, SHIM / "include", self.source.parent)
            shim = "".join(p.read_text() for f in folders for p in sorted(f.glob("*")) if p.suffix in (".h", ".cuh"))
            digest = hashlib.sha1("\0".join((text, shim, *self.defines)).encode()).hexdigest()[:16]
            so = CACHE / f"{self.name}-{digest}.so"
            if not so.exists():
                CACHE.mkdir(parents=True, exist_ok=True)
                cpp = CACHE / f"{self.name}-{digest}-{os.getpid()}.cpp"
                cpp.write_text(text)
                tmp = so.with_suffix(f".{os.getpid()}.tmp")
                cmd = [CXX, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-fno-strict-aliasing",
                       "-Wno-unknown-pragmas", *(f"-I{f}" for f in folders), *self.defines,
                       "-o", str(tmp), str(cpp)]
                res = subprocess.run(cmd, capture_output=True, text=True)
                cpp.unlink()
                if res.returncode:
                    raise RuntimeError(f"g++ could not build {self.source.name} for the CPU:\n{res.stderr}")
                os.replace(tmp, so)  # atomic: parallel test workers may build the same file
            lib = ctypes.CDLL(str(so))
            lib.emu_launch.argtypes = [ctypes.c_uint] * 6 + [ctypes.POINTER(ctypes.c_void_p)]
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
                scalars.append(ctypes.c_int(int(a)) if t == "int" else ctypes.c_float(float(a)))
                addresses.append(ctypes.addressof(scalars[-1]))
        argv = (ctypes.c_void_p * len(args))(*addresses)
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        self._lib(types, shared_bytes).emu_launch(*g, *b, argv)


def load(source, name: str, options=()) -> Kernel:
    if CXX is None:
        raise RuntimeError("running CUDA kernels on the CPU needs g++")
    return Kernel(source, name, tuple(options))
