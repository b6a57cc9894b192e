"""Array backends: one codebase for NumPy, CuPy and any Array-API library.

Every function in `transformer/` takes its namespace `xp` from its inputs
(`xp = get_xp(x)`) and writes the maths with `xp.*` functions of the Array API
standard, so the same lines run on NumPy arrays, CuPy arrays on a GPU, torch
tensors or the strict reference implementation used in the tests.
Functions that create arrays from nothing (masks, position tables) take `xp=`.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import array_api_compat

__all__ = ["get_xp", "namespace", "to_numpy", "is_floating", "require_float", "require_array", "require_int",
           "require_real", "broadcastable_to", "compute_dtype", "nbytes"]


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
    if getattr(x.dtype, "kind", None) == "f":  # NumPy and CuPy float16/32/64: no namespace lookup per call
        return True
    xp = get_xp(x)
    return xp.isdtype(x.dtype, "real floating")


def require_float(name: str, x):
    """Raise TypeError naming `name` unless x holds real floating-point numbers."""
    if not hasattr(x, "dtype"):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if not is_floating(x):
        raise TypeError(f"{name} must be a floating-point array, got dtype {x.dtype}")


def require_array(name: str, x):
    """Raise TypeError naming `name` unless x is an array of some backend (a list is not)."""
    if not array_api_compat.is_array_api_obj(x):
        raise TypeError(f"{name} must be an array (NumPy, CuPy, …), got {type(x).__name__}")


def require_int(*, low: int | None = 0, **values):
    """Raise a clear error naming the argument unless each value is an integer ≥ low.

    Python and NumPy integers pass; a bool or a float (2.5, even 2.0) does not, so a size
    is never truncated in silence. low=None: any integer.

    >>> require_int(n=np.int64(3), block=4, low=1)
    >>> require_int(n=2.5)
    Traceback (most recent call last):
    ValueError: n must be an integer ≥ 0, got n=2.5
    """
    for name, v in values.items():
        if not isinstance(v, numbers.Number):
            raise TypeError(f"{name} must be an integer, got {type(v).__name__} {name}={v!r}")
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or (low is not None and v < low):
            bound = "" if low is None else f" ≥ {low}"
            raise ValueError(f"{name} must be an integer{bound}, got {name}={v!r}")


def require_real(*, positive: bool = False, **values):
    """Raise a clear error naming the argument unless each value is a finite real number
    (Python's or NumPy's, not a bool), > 0 if positive."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(v).__name__} {name}={v!r}")
        if not math.isfinite(v) or (positive and v <= 0):
            raise ValueError(f"{name} must be a finite{' positive' if positive else ''} number, got {name}={v!r}")


def broadcastable_to(shape, target) -> bool:
    """Whether an array of `shape` broadcasts to exactly `target` (it never grows target)."""
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


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
