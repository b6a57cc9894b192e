"""Arguments a learner's function changed in place: each is copied before the call and compared after it.

A function of the workbook must leave its caller's arrays as they were (`y = x - m`, not `x -= m`), unless writing
into them is its job (KVCache.update, adamw_step, clip_by_global_norm): the checker then names the arguments changed.
"""
from __future__ import annotations

import copy
import inspect

import numpy as np

__all__ = ["watched", "argument_names", "in_place_message"]

_NO_COPY = object()


def _snapshot(value):
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - what cannot be copied cannot be compared: it is not watched
        return _NO_COPY


def _same(a, b) -> bool:
    """a equals its saved copy b, entry by entry (arrays, dicts, lists, tuples, objects' attributes)."""
    try:
        if isinstance(a, np.ndarray):
            return (isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype
                    and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
        if hasattr(a, "__dict__") and not isinstance(a, type) and not callable(a):
            return type(a) is type(b) and _same(vars(a), vars(b))
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a value that cannot be compared counts as unchanged
        return True


def watched(fn, changed: list):
    """fn, whose calls add to `changed` each argument (position or keyword) they changed in place.
    A class is returned as it is: its methods' writes are its state."""
    if isinstance(fn, type) or not callable(fn):
        return fn

    def call(*args, **kwargs):
        before = [(key, value, _snapshot(value)) for key, value in [*enumerate(args), *kwargs.items()]]
        result = fn(*args, **kwargs)
        for key, value, saved in before:
            if saved is not _NO_COPY and key not in changed and not _same(value, saved):
                changed.append(key)
        return result
    return call


def argument_names(fn, keys) -> list[str]:
    """The names of the arguments `keys` (positions or keywords) of fn, for the message."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    return [k if isinstance(k, str) else params[k] if k < len(params) else f"argument {k + 1}" for k in keys]


def in_place_message(names: list[str], a_list: str | None = None) -> str:
    """What to say when the learner's code changed the arguments `names` of its caller; a_list: the name of one of
    them that is a list (a word's symbols), changed by .append, del or a slice assignment, not by array arithmetic."""
    listed, one = " and ".join(f"`{n}`" for n in names), len(names) == 1
    how = (f"work on a copy, s = list({a_list}): s[i:i + 2] = …, .append and del change the caller's list" if a_list
           else "compute into new arrays (y = x - m, not x -= m, x[...] = … or np.exp(x, out=x))")
    return (f"your function changed its input{'' if one else 's'} {listed} in place: the caller's {listed} must "
            f"come back as {'it was' if one else 'they were'}, so {how}")
