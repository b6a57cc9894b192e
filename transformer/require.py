"""The door of every public function: argument checks that name the bad value.

A formula file shows the formula. Its refusals of bad input live in a check module beside it,
named after it (`core/attention.py` -> `core/attention_checks.py`, imported as `checks`), one check
per public function and of the same name, and one decorator line at the door joins them:

    @checked_by(checks.softmax)
    def softmax(x, axis=-1, mask=None): ...

The first door checks, the package's inner calls are trusted. Calling `softmax(...)` from outside
any door (a user, a lesson, a test, the CLI) binds the call to softmax's own signature, fills in its
defaults and runs `checks.softmax(x=…, axis=…, mask=…)` with every argument by keyword, so a check
states no defaults of its own; then the formula runs with the door's depth raised. A call made
while a door's formula is running (softmax inside `attention`) skips its check: the outer door
refused bad input already. The depth is a context variable, so each thread (`serve`'s requests)
counts its own. A generator returned through a door runs later, outside it: the calls it makes are
checked again, unless they name the bare formula, `softmax.unchecked`, where a check would cost
as much as the step (a comment there gives the measurement).
"""
from __future__ import annotations

import contextvars
import functools
import inspect
import math
import numbers
import operator

import numpy as np
import array_api_compat

from .backend import get_xp, is_floating

__all__ = ["checked_by", "require_named_weights", "require_float", "require_vector", "require_array", "require_int", "require_real",
           "require_bool", "broadcastable_to", "stand_in"]


# How many doors' formulas are running in this thread or context: > 0 means a package's own call.
_inside = contextvars.ContextVar("inside_a_door", default=0)


def checked_by(check):
    """Decorator: a call from outside any door runs `check` on the complete arguments first;
    a call from inside one runs the formula directly. `formula.unchecked` skips the check anywhere.

    Parse, then check: a check that had to parse an argument to judge it (a prompt tokenized to count
    its tokens) may return {name: parsed value}; the formula is then called with those in place of
    what was given, so nothing is parsed twice. A check that returns None changes nothing.

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
        by_name = None  # binder(formula): the signature is read once, on the first checked call

        @functools.wraps(formula)
        def checked(*args, **kwargs):
            nonlocal by_name
            if _inside.get():  # inside a door: the outer check covered this call
                return formula(*args, **kwargs)
            if by_name is None:
                by_name = binder(formula)
            arguments = by_name(args, kwargs)
            if arguments is None:  # an unknown keyword, a missing argument: Python's own TypeError, naming formula
                return formula(*args, **kwargs)
            parsed = check(**arguments)
            token = _inside.set(1)
            try:
                if parsed:  # the check's parse, handed on: every argument by name
                    return formula(**{**arguments, **parsed})
                return formula(*args, **kwargs)
            finally:
                _inside.reset(token)
        checked.unchecked = formula
        checked.check = check
        return checked
    return door


def binder(formula):
    """(args, kwargs) -> every argument of a call to `formula` by name, its defaults filled in (a
    **kwargs parameter spread among them), or None where Python would refuse the call.

    A signature of named parameters (every door's) is bound here as Python binds it, a few dict
    operations; others through inspect's Signature.bind, several times slower (a *args parameter
    then reaches the check as one tuple, by its name).

    >>> def f(x, y=2, *, z=3): ...
    >>> binder(f)((1,), {"z": 4}) == {"x": 1, "y": 2, "z": 4}
    True
    >>> binder(f)((1, 2, 3), {}), binder(f)((), {"y": 1}), binder(f)((1,), {"x": 1}), binder(f)((1,), {"w": 0})
    (None, None, None, None)
    """
    signature = inspect.signature(formula)
    params = list(signature.parameters.values())
    P = inspect.Parameter
    if any(p.kind not in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) for p in params):
        def by_inspect(args, kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return None
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            for p in params:
                if p.kind is P.VAR_KEYWORD:
                    arguments.update(arguments.pop(p.name))
            return arguments
        return by_inspect

    names = [p.name for p in params]
    known = set(names)
    n_positional = sum(p.kind is P.POSITIONAL_OR_KEYWORD for p in params)  # they come first
    defaults = [(p.name, p.default) for p in params if p.default is not P.empty]

    def by_hand(args, kwargs):
        if len(args) > n_positional:
            return None  # too many positional arguments
        arguments = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in arguments or name not in known:
                return None  # given twice, or unknown
            arguments[name] = value
        if len(arguments) < len(names):
            for name, default in defaults:
                arguments.setdefault(name, default)
            if len(arguments) < len(names):
                return None  # a required argument is missing
        return arguments
    return by_hand


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


def stand_in(like, shape):
    """Zeros of `shape` in like's dtype and backend, one element broadcast (no memory): what a formula
    will compute, so that an outer check can run an inner door's check on it before anything is computed.

    >>> stand_in(np.ones(3, dtype=np.float32), (2, 1000, 1000)).strides
    (0, 0, 0)
    """
    xp = get_xp(like)
    return xp.broadcast_to(xp.zeros((), dtype=like.dtype), tuple(shape))


def require_named_weights(params, shapes: dict):
    """params is a dict holding exactly the names of `shapes` (a config's name -> shape), each a floating
    array of its shape, all of W_E's dtype (the training's weight dicts)."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of name -> array, got {type(params).__name__}")
    missing, unknown = sorted(set(shapes) - set(params)), sorted(set(params) - set(shapes))
    if missing or unknown:
        raise ValueError(f"params do not fit the config: missing {missing[:4]}, unexpected {unknown[:4]}")
    require_float("params['W_E']", params["W_E"])  # its dtype is every weight's: a list has none
    dtype = params["W_E"].dtype
    for name, shape in shapes.items():
        require_float(f"params[{name!r}]", params[name])
        if tuple(params[name].shape) != shape:
            raise ValueError(f"params[{name!r}] must have shape {shape}, got {tuple(params[name].shape)}")
        if params[name].dtype != dtype:
            raise TypeError(f"params[{name!r}] has dtype {params[name].dtype}, W_E {dtype}: one dtype for all")
