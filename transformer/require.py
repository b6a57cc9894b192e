"""The door of every public function: argument checks that name the bad value.

A formula file shows the formula. Its refusals of bad input live in a `checks` module beside
it, one check per public function and of the same name, and one decorator line at the door joins
them:

    @checked_by(checks.softmax)
    def softmax(x, axis=-1, mask=None): ...

Calling `softmax(...)` runs `checks.softmax(...)` on the same arguments first. The bare formula
stays reachable as `softmax.unchecked` for a model's hot path, where the inputs were checked
once (at load, or by the caller) and a check would cost as much as the formula itself.
"""
from __future__ import annotations

import functools
import math
import numbers
import operator

import numpy as np
import array_api_compat

from .backend import get_xp, is_floating

__all__ = ["checked_by", "require_named_weights", "require_float", "require_vector", "require_array", "require_int", "require_real",
           "require_bool", "broadcastable_to"]


def checked_by(check):
    """Decorator: run `check(*args, **kwargs)` before the formula; `formula.unchecked` skips it.

    >>> def positive(x): 
    ...     if x <= 0: raise ValueError(f"x must be > 0, got x={x}")
    >>> @checked_by(positive)
    ... def log2(x): return x.bit_length() - 1
    >>> log2(8), log2.unchecked(8)
    (3, 3)
    >>> log2(0)
    Traceback (most recent call last):
    ValueError: x must be > 0, got x=0
    """
    def door(formula):
        @functools.wraps(formula)
        def checked(*args, **kwargs):
            check(*args, **kwargs)
            return formula(*args, **kwargs)
        checked.unchecked = formula
        checked.check = check
        return checked
    return door


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


def require_vector(name: str, p, size: int, dim: str | None = None):
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


def require_named_weights(params, shapes: dict):
    """params is a dict holding exactly the names of `shapes` (a config's name -> shape), each a floating
    array of its shape, all of W_E's dtype (the training's weight dicts)."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of name -> array, got {type(params).__name__}")
    missing, unknown = sorted(set(shapes) - set(params)), sorted(set(params) - set(shapes))
    if missing or unknown:
        raise ValueError(f"params do not fit the config: missing {missing[:4]}, unexpected {unknown[:4]}")
    dtype = params["W_E"].dtype
    for name, shape in shapes.items():
        require_float(f"params[{name!r}]", params[name])
        if tuple(params[name].shape) != shape:
            raise ValueError(f"params[{name!r}] must have shape {shape}, got {tuple(params[name].shape)}")
        if params[name].dtype != dtype:
            raise TypeError(f"params[{name!r}] has dtype {params[name].dtype}, W_E {dtype}: one dtype for all")
