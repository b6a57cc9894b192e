"""Compile CUDA C with NVRTC, the compiler CuPy runs, on a machine without a GPU (tests only).

NVRTC is a library: it needs no driver and no device. `compile_cuda(source, options)` hands it a
kernel's text as CuPy does for `cupy.RawKernel` (CuPy adds `-ftz=true`, `-arch=sm_XX` for the
device and `--device-as-default-execution-space`, and the CUDA headers' folder), and returns
(ok, log). NVRTC differs from nvcc where it matters here: no <math.h> (so no INFINITY) and no host
code. The library comes from the `nvidia-cuda-nvrtc` wheel and the headers from
`nvidia-cuda-runtime` and `nvidia-cuda-crt` (the folder CuPy itself uses when NVRTC is a wheel),
else from a CUDA toolkit; `available()` says whether both were found.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

CUPY_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")


def _wheel_files(name: str, suffix: str) -> list[Path]:
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        return []
    return [Path(dist.locate_file(f)) for f in dist.files or () if str(f).endswith(suffix)]


@lru_cache(maxsize=None)
def _library():
    """libnvrtc, its builtins loaded first so that NVRTC's own dlopen of them finds them."""
    libs = _wheel_files("nvidia-cuda-nvrtc", ".so.13") + _wheel_files("nvidia-cuda-nvrtc", ".so.13.0")
    main = [p for p in libs if p.name.startswith("libnvrtc.so")]
    builtins = [p for p in libs if p.name.startswith("libnvrtc-builtins.so")]
    try:
        if main and builtins:
            ctypes.CDLL(str(builtins[0]), mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(str(main[0]))
        found = ctypes.util.find_library("nvrtc")
        return ctypes.CDLL(found) if found else None
    except OSError:
        return None


@lru_cache(maxsize=None)
def include_dirs() -> tuple[str, ...]:
    """Folders holding cuda_fp16.h and crt/mma.h: the wheels' shared include folder, else a toolkit's."""
    headers = _wheel_files("nvidia-cuda-runtime", "include/cuda_fp16.h")
    candidates = [p.parent for p in headers]
    candidates += [Path(os.environ.get("CUDA_PATH", "/usr/local/cuda")) / "include"]
    for folder in candidates:
        if (folder / "cuda_fp16.h").is_file() and (folder / "crt" / "mma.h").is_file():
            return (str(folder),)
    return ()


def available() -> bool:
    return _library() is not None and bool(include_dirs())


def compile_cuda(source: str, options, name: str = "kernel.cu", includes=None) -> tuple[bool, str]:
    """NVRTC's verdict on `source` with `options` (CuPy's own and the include folders added:
    `includes`, by default `include_dirs()`, after `options`, as CuPy puts its CUDA folder last)."""
    lib = _library()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    folders = include_dirs() if includes is None else includes
    opts = [o.encode() for o in (*options, *CUPY_OPTIONS, *(f"-I{d}" for d in folders))]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return status == 0, log.value.decode(errors="replace")
