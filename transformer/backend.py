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
import operator

import numpy as np
import array_api_compat

__all__ = ["get_xp", "namespace", "to_numpy", "is_floating", "require_float", "require_array", "require_int",
           "require_real", "require_bool", "broadcastable_to", "compute_dtype", "nbytes"]


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


def is_floating(x) -> bool:
    """Whether x holds real floating-point numbers: float16/32/64 and bfloat16, on any backend."""
    if getattr(x.dtype, "kind", None) == "f":  # NumPy and CuPy float16/32/64: no namespace lookup per call
        return True
    try:
        return get_xp(x).isdtype(x.dtype, "real floating")
    except (TypeError, ValueError):  # NumPy's bfloat16 (ml_dtypes) is no NumPy dtype to the namespace
        return getattr(x.dtype, "name", "") == "bfloat16"


def _is_scalar_array(v) -> bool:  # a 0-d array: a CuPy reduction, a torch scalar
    return (not isinstance(v, numbers.Number) and getattr(v, "ndim", None) == 0
            and array_api_compat.is_array_api_obj(v))


def _as_int(v):  # -> the int v stands for, or None for a bool, a float or a 0-d array of either
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Number) or not get_xp(v).isdtype(v.dtype, "integral"):
        return None
    return operator.index(v)  # a 0-d integer array (on a GPU this waits for the value)


def _as_real(v):  # -> the float v stands for, or None for a bool, a complex or a 0-d array of either
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, numbers.Real):
        try:
            return float(v)
        except OverflowError:  # an int beyond float's range, 10**400: no finite number
            return math.inf
    if isinstance(v, numbers.Number) or not (is_floating(v) or get_xp(v).isdtype(v.dtype, "integral")):
        return None
    return float(v)  # a 0-d real array (on a GPU this waits for the value)


def require_float(name: str, x):
    """Raise TypeError naming `name` unless x holds real floating-point numbers."""
    if not hasattr(x, "dtype"):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if not is_floating(x):
        raise TypeError(f"{name} must be a floating-point array, got dtype {x.dtype}")


def _require_vector(name: str, p, size: int, dim: str | None = None):
    """Raise naming `name` unless p is a floating-point vector of shape (size,): a bias, a gain.
    dim names the size in the message, as in "(d,) = (4,)"."""
    require_float(name, p)
    if tuple(p.shape) != (size,):
        want = f"({size},)" if dim is None else f"({dim},) = ({size},)"
        raise ValueError(f"{name} must have shape {want}, got {tuple(p.shape)}")


def require_array(name: str, x):
    """Raise TypeError naming `name` unless x is an array of some backend (a list is not)."""
    if not array_api_compat.is_array_api_obj(x):
        raise TypeError(f"{name} must be an array (NumPy, CuPy, …), got {type(x).__name__}")


def require_int(*, low: int | None = 0, **values):
    """Raise a clear error naming the argument unless each value is an integer ≥ low.

    Python and NumPy integers and 0-d integer arrays (a CuPy reduction, a torch scalar) pass;
    a bool or a float (2.5, even 2.0) does not, so a size is never truncated in silence.
    low=None: any integer.

    >>> require_int(n=np.int64(3), block=np.array(4), low=1)
    >>> require_int(n=2.5)
    Traceback (most recent call last):
    ValueError: n must be an integer ≥ 0, got n=2.5
    """
    for name, v in values.items():
        if not isinstance(v, numbers.Number) and not _is_scalar_array(v):
            raise TypeError(f"{name} must be an integer, got {type(v).__name__} {name}={v!r}")
        i = _as_int(v)
        if i is None or (low is not None and i < low):
            bound = "" if low is None else f" ≥ {low}"
            raise ValueError(f"{name} must be an integer{bound}, got {name}={v!r}")


def require_real(*, positive: bool = False, **values):
    """Raise a clear error naming the argument unless each value is a finite real number
    (Python's or NumPy's, or a 0-d real array; not a bool), > 0 if positive."""
    for name, v in values.items():
        r = _as_real(v) if isinstance(v, numbers.Number) or _is_scalar_array(v) else None
        if r is None:
            raise TypeError(f"{name} must be a real number, got {type(v).__name__} {name}={v!r}")
        if not math.isfinite(r) or (positive and r <= 0):
            raise ValueError(f"{name} must be a finite{' positive' if positive else ''} number, got {name}={v!r}")


def require_bool(**values):
    """Raise TypeError naming the argument unless each value is True or False (a NumPy bool too;
    not 0 or 1, which would read as a count)."""
    for name, v in values.items():
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {name}={v!r}")


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
