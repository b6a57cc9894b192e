"""Array backends: one codebase for NumPy, CuPy and any Array-API library.

Every function in `transformer/` takes its namespace `xp` from its inputs
(`xp = get_xp(x)`) and writes the maths with `xp.*` functions of the Array API
standard, so the same lines run on NumPy arrays, CuPy arrays on a GPU, torch
tensors or the strict reference implementation used in the tests.
Functions that create arrays from nothing (masks, position tables) take `xp=`.
"""
from __future__ import annotations

import ctypes
import os
import sys

import numpy as np
import array_api_compat

__all__ = ["get_xp", "namespace", "import_cupy", "to_numpy", "to_host", "is_floating", "compute_dtype", "nbytes",
           "reuse_freed_memory", "progress_enabled"]

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
HEAP_BELOW = 64 << 20  # bytes: a block smaller than this comes from the heap, not from its own mmap
KEEP_FREED = 256 << 20  # bytes of free memory the heap keeps at its top before giving it back to the OS


def reuse_freed_memory() -> bool:
    """Let a freed NumPy temporary serve the next one, instead of giving its pages back to the OS.

    glibc's malloc serves a block of 128 KiB or more (a [64, 32, 128] float32 activation is 1 MiB)
    with a fresh mmap and returns it by munmap when freed: the next array of that size is new
    memory, and the kernel zero-fills each of its 4 KiB pages at first touch. A training step makes
    hundreds of such temporaries. With this, a block under HEAP_BELOW comes from the heap and up to
    KEEP_FREED of freed heap is kept: the induction run's step took 53 ms without, 33 ms with (2
    cores). Process-wide; the peak memory is unchanged, but up to KEEP_FREED more stays held after
    it. Returns False, changing nothing, where malloc is not glibc's.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl, or no libc.so.6
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_BELOW)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_FREED))


def namespace(xp=None):
    """Normalise a namespace argument: None/"numpy"/numpy -> NumPy; "cupy"/cupy -> CuPy.

    >>> namespace().__name__
    'array_api_compat.numpy'
    """
    if xp is None or xp is np or xp == "numpy":
        return array_api_compat.array_namespace(np.empty(0))
    if xp == "cupy" or getattr(xp, "__name__", "") == "cupy":
        return array_api_compat.array_namespace(import_cupy().empty(0))
    if isinstance(xp, str):
        raise ValueError(f"unknown backend {xp!r}: use 'numpy' or 'cupy'")
    # xp=1 failed later, as "'int' object has no attribute 'arange'"; a namespace is not probed here, as the
    # workbook's checker passes one that notes each name a function reads from it
    if isinstance(xp, (int, float, complex, bytes, list, tuple, dict, set, np.ndarray, np.generic)):
        raise TypeError(f"xp must be an array namespace (numpy, cupy, an Array API module) or its name, "
                        f"got {type(xp).__name__} {xp!r:.40}")
    return xp


def import_cupy():
    """Import CuPy and check a GPU is there, with one clear error if not."""
    try:
        import cupy
    except ImportError as e:
        raise RuntimeError(
            "backend 'cupy' needs CuPy and an NVIDIA GPU: pip install 'cupy-cuda13x[ctk]' "
            "('cupy-cuda12x[ctk]' where nvidia-smi shows CUDA 12) "
            f"(import failed: {e})") from None
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError when no driver or no device
        raise RuntimeError(f"backend 'cupy' found no usable GPU: {e}") from None
    return cupy


_NAMESPACE_OF: dict = {}  # frozenset of array types -> their namespace (it depends on the types alone)


def get_xp(*arrays):
    """The Array-API namespace of the given arrays (None entries are ignored).

    The answer depends only on the arrays' types, so it is remembered per set of types: a
    decode step asks a few hundred times, and array_api_compat's lookup costs ~1–2 µs each.
    """
    arrays = [a for a in arrays if a is not None]
    types = frozenset(map(type, arrays))
    xp = _NAMESPACE_OF.get(types)
    if xp is None:
        xp = array_api_compat.array_namespace(*arrays)  # raises for mixed or unknown types: never stored
        _NAMESPACE_OF[types] = xp
    return xp


def to_numpy(x):
    """Copy any backend's array to a NumPy array (for plots and asserts only)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # NumPy has no bfloat16 of its own: widen (exactly) to float32
            x = x.float()
        return x.numpy()
    try:
        return np.from_dlpack(x)
    except Exception:
        return np.asarray(x)


def to_host(x):  # [...] any backend -> [...] NumPy, at least float32
    """x as a NumPy array, float16 and bfloat16 widened to float32 on the host (exactly: float32 holds
    every value of both). NumPy's bfloat16 (ml_dtypes) is no np.floating, and host-side arithmetic
    such as sampling's filters wants a full-size float."""
    x = np.asarray(to_numpy(x))
    if x.dtype.itemsize < 4 and (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        x = x.astype(np.float32)
    return x


def is_floating(x) -> bool:
    """Whether x holds real floating-point numbers: float16/32/64 and bfloat16, on any backend."""
    if getattr(x.dtype, "kind", None) == "f":  # NumPy and CuPy float16/32/64: no namespace lookup per call
        return True
    try:
        return get_xp(x).isdtype(x.dtype, "real floating")
    except (TypeError, ValueError):  # NumPy's bfloat16 (ml_dtypes) is no NumPy dtype to the namespace
        return getattr(x.dtype, "name", "") == "bfloat16"


def compute_dtype(xp, dtype):
    """float16/bfloat16 are accumulated in float32; float32/float64 stay as they are."""
    if dtype == xp.float32 or dtype == xp.float64:
        return dtype
    return xp.float32


def nbytes(x) -> int:
    """Bytes held by an array's elements, on any backend (size × bytes per element)."""
    if hasattr(x, "nbytes"):
        return int(x.nbytes)
    xp = get_xp(x)
    kind = xp.finfo if xp.isdtype(x.dtype, "real floating") else xp.iinfo
    bits = 8 if x.dtype == xp.bool else kind(x.dtype).bits
    return int(x.size) * bits // 8


def available_bytes() -> int | None:
    """The host memory the system reports available (Linux: MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def progress_enabled(progress: bool = True) -> bool:
    """Whether a progress bar is drawn: unless progress=False or the environment sets TQDM_DISABLE (to anything
    but 0/false), the test suite and batch jobs silencing every bar at once that way. Every bar of the package
    passes tqdm disable=not progress_enabled(…): an explicit disable= overrides tqdm's own reading of TQDM_DISABLE."""
    quiet = os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false")
    return progress and not quiet
