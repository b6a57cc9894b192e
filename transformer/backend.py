"""Array backends: one codebase for NumPy, CuPy and any Array-API library.

Every function in `transformer/` takes its namespace `xp` from its inputs
(`xp = get_xp(x)`) and writes the maths with `xp.*` functions of the Array API
standard, so the same lines run on NumPy arrays, CuPy arrays on a GPU, torch
tensors or the strict reference implementation used in the tests.
Functions that create arrays from nothing (masks, position tables) take `xp=`.
"""
from __future__ import annotations

import numpy as np
import array_api_compat

__all__ = ["get_xp", "namespace", "to_numpy", "is_floating", "require_float", "compute_dtype", "nbytes"]


def namespace(xp=None):
    """Normalise a namespace argument: None/"numpy"/numpy -> NumPy; "cupy"/cupy -> CuPy.

    >>> namespace().__name__
    'array_api_compat.numpy'
    """
    if xp is None or xp is np or xp == "numpy":
        return array_api_compat.array_namespace(np.empty(0))
    if xp == "cupy" or getattr(xp, "__name__", "") == "cupy":
        return array_api_compat.array_namespace(_cupy().empty(0))
    if isinstance(xp, str):
        raise ValueError(f"unknown backend {xp!r}: use 'numpy' or 'cupy'")
    return xp


def _cupy():
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


def get_xp(*arrays):
    """The Array-API namespace of the given arrays (None entries are ignored)."""
    return array_api_compat.array_namespace(*[a for a in arrays if a is not None])


def to_numpy(x):
    """Copy any backend's array to a NumPy array (for plots and asserts only)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    try:
        return np.from_dlpack(x)
    except Exception:
        return np.asarray(x)


def is_floating(x) -> bool:
    xp = get_xp(x)
    return xp.isdtype(x.dtype, "real floating")


def require_float(name: str, x):
    """Raise TypeError naming `name` unless x holds real floating-point numbers."""
    if not hasattr(x, "dtype"):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if not is_floating(x):
        raise TypeError(f"{name} must be a floating-point array, got dtype {x.dtype}")


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
