"""Compare a learner's answer with the expected one and say what is wrong in the legend's words.

Every message names the dimension (b, h, n_q, d_h …), the first entry that differs with both values,
and how many differ; it never shows the expected array itself, only the one entry.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["Tolerance", "TOLERANCES", "tolerance_for", "describe_shape", "first_difference", "compare"]


class Tolerance(tuple):
    """(rtol, atol) for one dtype: float64 leaves room for a different order of sums, not for a slip."""

    @property
    def rtol(self):
        return self[0]

    @property
    def atol(self):
        return self[1]


TOLERANCES = {
    "float64": Tolerance((1e-7, 1e-9)),
    "float32": Tolerance((1e-4, 1e-5)),
    "float16": Tolerance((1e-2, 2e-3)),  # float16 keeps 11 bits: 1 part in 2048
}


def tolerance_for(dtype) -> Tolerance:
    return TOLERANCES.get(np.dtype(dtype).name, TOLERANCES["float64"])


def describe_shape(shape, dims) -> str:
    """(2, 4, 5, 8) with dims (b, h, n_q, d_h) -> '(b, h, n_q, d_h) = (2, 4, 5, 8)'."""
    shape = tuple(int(s) for s in shape)
    if dims and len(dims) == len(shape):
        return f"({', '.join(dims)}) = {shape}"
    return str(shape)


def _index(idx, dims) -> str:  # (0, 1, 2) with dims (b, h, n) -> '[b=0, h=1, n=2]'
    if dims and len(dims) == len(idx):
        return "[" + ", ".join(f"{d}={i}" for d, i in zip(dims, idx)) + "]"
    return "[" + ", ".join(str(i) for i in idx) + "]"


def _value(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    x = float(x)
    return repr(x) if not np.isfinite(x) else f"{x:.7g}"


def _as_array(got):  # -> a NumPy array, or None for what is not an array (a list of arrays, a string …)
    if isinstance(got, np.ndarray):
        return got
    if hasattr(got, "__array__") and hasattr(got, "shape"):  # CuPy, torch: to the host
        try:
            return np.asarray(got.get() if hasattr(got, "get") else got)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def first_difference(got: np.ndarray, expected: np.ndarray, tol: Tolerance, dims=None) -> str | None:
    """None when the arrays agree within tol (inf and NaN must sit where they sit in expected),
    else one sentence with the first wrong entry."""
    if expected.dtype == bool or got.dtype == bool:
        wrong = got.astype(bool) != expected.astype(bool)
    else:
        g, e = got.astype(np.float64), expected.astype(np.float64)
        same_special = (np.isnan(g) & np.isnan(e)) | ((g == e) & ~np.isfinite(e))  # inf where inf, NaN where NaN
        with np.errstate(invalid="ignore"):
            close = np.abs(g - e) <= tol.atol + tol.rtol * np.abs(e)
        wrong = ~(same_special | (close & np.isfinite(e) & np.isfinite(g)))
    if not wrong.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(wrong)[0])
    count = f"{int(wrong.sum())} of {wrong.size} entries differ"
    return (f"first wrong entry at {_index(idx, dims)}: expected {_value(expected[idx])}, "
            f"got {_value(got[idx])} ({count})")


def _compare_one(got, expected, dims, tol, what: str) -> str | None:
    """One array against one expected array, or None for a match."""
    if got is None:
        return f"{what} is None: did the function forget to `return` its result?"
    if isinstance(expected, numbers.Number) and not isinstance(expected, np.ndarray):
        try:
            g = float(got)
        except (TypeError, ValueError):
            return f"{what} should be a number, got {type(got).__name__}"
        if not (np.isclose(g, float(expected), rtol=tol.rtol, atol=tol.atol) or g == float(expected)):
            return f"{what}: expected {_value(expected)}, got {_value(g)}"
        return None
    arr = _as_array(got)
    if arr is None:
        kind = f"a {type(got).__name__}" + (f" of {len(got)}" if isinstance(got, (tuple, list)) else "")
        return f"{what} should be an array of shape {describe_shape(expected.shape, dims)}, got {kind}"
    if arr.shape != expected.shape:
        msg = f"wrong shape: {what} should be {describe_shape(expected.shape, dims)}, got {tuple(arr.shape)}"
        if sorted(arr.shape) == sorted(expected.shape) and dims and len(dims) == arr.ndim:
            msg += " — the same sizes in another order: check which axis you transposed or reshaped"
        elif arr.ndim != expected.ndim:
            msg += f" — {arr.ndim} axes instead of {expected.ndim}"
        return msg
    if expected.dtype != bool and arr.dtype != expected.dtype:
        if arr.dtype == bool or expected.dtype.kind != arr.dtype.kind or expected.dtype.kind == "f":
            return (f"{what} has dtype {arr.dtype}, expected {expected.dtype}: keep the input's dtype "
                    "(compute in float32 if you need to, then cast back with .astype)")
    if expected.dtype == bool and arr.dtype != bool:
        return f"{what} has dtype {arr.dtype}, expected bool (True = may attend)"
    return first_difference(arr, expected, tol, dims)


def compare(got, expected, dims=None, tol: Tolerance | None = None, names=None) -> str | None:
    """None when got matches expected; else what is wrong, in one sentence.

    expected: an array, a number, or a tuple of them (then `names` and per-item `dims` name each part).
    """
    if isinstance(expected, tuple):
        names = names or tuple(f"item {i}" for i in range(len(expected)))
        dims = dims or (None,) * len(expected)
        if not isinstance(got, (tuple, list)):
            return (f"should return {len(expected)} values ({', '.join(names)}), "
                    f"got one {type(got).__name__}")
        if len(got) != len(expected):
            return f"should return {len(expected)} values ({', '.join(names)}), got {len(got)}"
        for g, e, d, name in zip(got, expected, dims, names):
            t = tol or tolerance_for(getattr(e, "dtype", np.float64))
            problem = _compare_one(g, e, d, t, name)
            if problem:
                return problem
        return None
    t = tol or tolerance_for(getattr(expected, "dtype", np.float64))
    return _compare_one(got, expected, dims, t, (names or ("the result",))[0] if names else "the result")
