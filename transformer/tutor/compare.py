"""Compare a learner's answer with the expected one and say what is wrong in the legend's words.

Every message names the dimension (b, h, n_q, d_h …), the first entry that differs with both values,
and how many differ; it never shows the expected array itself, only the one entry. Where the whole answer
is the right one times a constant (a missing 1/√d) or the right values in other places (a reshape in the
wrong order), the message says so. When a function returns several values, it names the one that is wrong.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["Tolerance", "TOLERANCES", "tolerance_for", "Problem", "KEEP_DTYPE", "FLOAT32_DIGITS", "axis_names",
           "kind_of", "describe_shape", "first_difference", "compare"]

KEEP_DTYPE = "keep the input's dtype (compute in float32 if you need to, then cast back with .astype)"


class Problem(str):
    """What is wrong with an answer, in one sentence, with its `kind`: 'none', 'type', 'count' (how many values),
    'shape', 'dtype' or 'value' (the right kind of array with wrong entries)."""

    def __new__(cls, text: str, kind: str = "value", hint: str = ""):
        self = super().__new__(cls, text)
        self.kind, self.hint = kind, hint  # hint: a cause read from the answer itself (float32 rounding)
        return self


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


def axis_names(dims, ndim: int) -> tuple | None:
    """The name of each of `ndim` axes, or None when dims do not fit. A leading '…' stands for any number of
    leading axes, which get the name '': ('…', 'Br', '1') names a (2, 2, 3, 1) array ('', '', 'Br', '1')."""
    if not dims:
        return None
    dims = tuple(dims)
    if dims[0] in ("…", "..."):
        rest = dims[1:]
        return ("",) * (ndim - len(rest)) + rest if ndim >= len(rest) else None
    return dims if len(dims) == ndim else None


def _label(name) -> str:
    """An axis's name as a message says it: '' for an unnamed axis, one of size 1 ('1') or under a '…'."""
    return name if name and name not in ("1", "…") else ""


def describe_shape(shape, dims) -> str:
    """(2, 4, 5, 8) with dims (b, h, n_q, d_h) -> '(b, h, n_q, d_h) = (2, 4, 5, 8)'."""
    shape = tuple(int(s) for s in shape)
    if axis_names(dims, len(shape)):
        return f"({', '.join(dims)}) = {shape}"
    return str(shape)


def _index(idx, dims) -> str:  # (0, 1, 2) with dims (b, h, n) -> '[b=0, h=1, n=2]'
    names = axis_names(dims, len(idx)) or ("",) * len(idx)
    return "[" + ", ".join(f"{_label(d)}={i}" if _label(d) else str(i) for d, i in zip(names, idx)) + "]"


def _value(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    x = float(x)
    return repr(x) if not np.isfinite(x) else f"{x:.7g}"


def _both_values(expected, got) -> tuple[str, str]:
    """Both values with 7 digits, or with as many more as it takes for them to read differently."""
    e, g = _value(expected), _value(got)
    for digits in range(8, 18):
        if e != g or isinstance(expected, (bool, np.bool_)) or not np.isfinite(float(expected)):
            break
        e, g = f"{float(expected):.{digits}g}", f"{float(got):.{digits}g}"
    return e, g


FLOAT32_DIGITS = ("the answer agrees only to about 7 digits, as float32 arithmetic does: a float64 answer is computed "
                  "in float64 (cast to float32 only what is float16)")


FLOAT32_SPREAD = 2e-6  # float32 keeps 24 bits (6e-8); sums of tens of terms stay within ~2e-6 of the largest one


def _float32_rounding(g: np.ndarray, e: np.ndarray, tol: Tolerance) -> bool:
    """A float64 answer that float32 arithmetic made: nearly every entry is a float32 number (computed in float32,
    cast back at the end), and every difference is within a few float32 steps of the array's largest entry, while
    float64's tolerance is tighter. A float64 slip of the same size (an ε of 1e-6 outside the root) is not put down
    to rounding: its entries are not float32 numbers."""
    finite = np.isfinite(e)
    if tol.rtol >= TOLERANCES["float32"].rtol or not finite.any() or not np.array_equal(finite, np.isfinite(g)):
        return False
    with np.errstate(over="ignore"):
        as_float32 = g[finite].astype(np.float32).astype(np.float64) == g[finite]
    scale = np.abs(e[finite]).max()
    return bool(as_float32.mean() >= 0.9 and np.abs(g[finite] - e[finite]).max() <= FLOAT32_SPREAD * scale)


def _count_difference(got: float, expected: int) -> str:
    """A count (parameters, bytes) is exact: both values in full and their difference, which often names
    the part left out (576 fewer = d: a norm)."""
    if not np.isfinite(got) or got != int(got):
        return f"expected the whole number {expected:,}, got {_value(got)}"
    if expected == 0:  # "6 more" than none says nothing the 6 does not
        return f"expected 0, got {int(got):,}"
    diff = int(got) - expected
    ratio = f"; {int(got) / expected:.4g} × the expected" if got and abs(diff) > abs(expected) / 8 else ""
    return f"expected {expected:,}, got {int(got):,} ({abs(diff):,} {'more' if diff > 0 else 'fewer'}{ratio})"


def _as_array(got):  # -> a NumPy array, or None for what is not an array (a list of arrays, a string …)
    if isinstance(got, np.ndarray):
        return got
    if hasattr(got, "__array__") and hasattr(got, "shape"):  # CuPy, torch: to the host
        try:
            return np.asarray(got.get() if hasattr(got, "get") else got)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def _close(g: np.ndarray, e: np.ndarray, tol: Tolerance) -> np.ndarray:
    """Entry by entry: within tol, or the same inf or NaN (float64 arrays of one shape)."""
    same_special = (np.isnan(g) & np.isnan(e)) | ((g == e) & ~np.isfinite(e))  # inf where inf, NaN where NaN
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(g - e) <= tol.atol + tol.rtol * np.abs(e)
    return same_special | (close & np.isfinite(e) & np.isfinite(g))


def first_difference(got: np.ndarray, expected: np.ndarray, tol: Tolerance, dims=None) -> str | None:
    """None when the arrays agree within tol (inf and NaN must sit where they sit in expected),
    else one sentence with the first wrong entry (and how the whole answer is off, where it reads simply)."""
    pattern = ""
    if expected.dtype == bool or got.dtype == bool:
        wrong = got.astype(bool) != expected.astype(bool)
    else:
        g, e = got.astype(np.float64), expected.astype(np.float64)
        wrong = ~_close(g, e, tol)
        if wrong.any():
            pattern = "" if _float32_rounding(g, e, tol) else _pattern(g, e, tol, axis_names(dims, e.ndim))
    if not wrong.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(wrong)[0])
    count = f"{int(wrong.sum())} of {wrong.size} entries differ"
    e_text, g_text = _both_values(expected[idx], got[idx])
    return f"first wrong entry at {_index(idx, dims)}: expected {e_text}, got {g_text} ({count})" + (
        f"; {pattern}" if pattern else "")


def _pattern(g: np.ndarray, e: np.ndarray, tol: Tolerance, names) -> str:
    """How a wrong answer relates to the right one when it does simply: a constant factor, or a reordering."""
    if g.size < 2:
        return ""
    spread = max(10 * tol.rtol, 1e-6)  # how far the ratios may drift from one number and still be one factor
    finite = np.isfinite(e) & np.isfinite(g)
    big = finite & (np.abs(e) > 10 * tol.atol)  # entries whose ratio means something
    if finite.all() and big.sum() >= 2 and np.ptp(e[big]) > spread * np.abs(e[big]).max():  # not one value repeated
        ratio = g[big] / e[big]
        c = float(np.median(ratio))
        if (abs(c) > 1e-6 and abs(c - 1) > spread and np.all(np.abs(ratio - c) <= spread * abs(c))
                and np.all(np.abs(g[~big]) <= 10 * tol.atol * max(1.0, abs(c)))):
            named = names or ("",) * e.ndim
            return _factor(c, [(_label(n), size) for n, size in zip(named, e.shape)], spread)
    if g.shape[-1] > 1 and _close(np.sort(g, axis=-1), np.sort(e, axis=-1), tol).all():
        axis = (_label(names[-1]) if names else "") or "the last axis"
        return (f"each row along {axis} holds the right values in the wrong order: check the order of your "
                "reshape, transpose, concatenate or stack")
    if g.ndim > 1 and _close(np.sort(g, axis=None), np.sort(e, axis=None), tol).all():
        return ("the right values in the wrong places: check the order of your reshape, transpose, concatenate "
                "or stack")
    return ""


def _factor(c: float, axes: list, spread: float) -> str:
    """'every entry is 0.3536 × the expected one (1/√8 = 1/√d?)' for a constant factor c; axes: (name, size) of
    each axis, whose sizes are the factors worth naming (a missing 1/√d, a mean taken as a sum over n)."""
    if abs(c + 1) <= spread:
        return "every entry has the wrong sign (−1 × the expected one)"
    x = abs(c) if abs(c) >= 1 else 1 / abs(c)
    near = lambda v, k: 2 <= k <= 1_000_000 and abs(v - k) <= spread * k  # noqa: E731
    k, k2 = round(x), round(x * x)
    sizes = {size: name for name, size in reversed(axes)}  # the first axis of a size gives its name
    if near(x * x, k2) and (k2 in sizes or not near(x, k)):
        expr, name = f"√{k2}", sizes.get(k2, "")
        expr += f" = √{name}" if name else ""
    elif near(x, k) and k in sizes:
        expr, name = str(k), sizes[k]
        expr += f" = {name}" if name else ""
    else:
        expr = ""
    if expr and abs(c) < 1:
        expr = "1/" + expr.replace(" = ", " = 1/")
    if expr and c < 0:
        expr = "−" + expr.replace(" = ", " = −")
    digits = next(k for k in range(4, 17) if float(f"{c:.{k - 1}g}") != 1 or k == 16)  # 1.000005, not "1"
    return (f"every entry is {c:.{digits}g} × the expected one" + (f" ({expr}?)" if expr else "")
            + ": off by a constant factor")


def _kind(dtype) -> str:
    """A dtype's kind, signed and unsigned integers alike: "integer arrays" (a lane number 0 … 31) may be uint8."""
    return "i" if dtype.kind in "iu" else dtype.kind


def _pieces(items: list, most: int = 10) -> str:  # ['un', '##aff', …] shown whole up to `most` pieces
    shown = ", ".join(repr(p) for p in items[:most])
    return f"[{shown}{', …' if len(items) > most else ''}]"


def _compare_pieces(got, expected: list, what: str) -> Problem | None:
    """A list of strings (a tokenizer's pieces) against the expected one: the first piece that differs, with both
    lists (the first ten pieces of each)."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(g, str) for g in got):
        kind = f"a {type(got).__name__}" + (" holding something other than strings" if isinstance(got, (list, tuple))
                                            else "")
        return Problem(f"{what} should be a list of strings (the pieces), got {kind}", "type")
    got = list(got)
    if got == expected:
        return None
    i = next((k for k, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    first = (f"piece {i} is {got[i]!r} where {expected[i]!r} is expected" if i < min(len(got), len(expected))
             else f"{'it stops' if len(got) < len(expected) else 'it goes on'} after piece {i - 1}" if i
             else "it is empty" if not got else "it has pieces where none are expected")
    return Problem(f"{what}: expected {len(expected)} piece{'s' * (len(expected) != 1)} {_pieces(expected)}, got "
                   f"{len(got)} {_pieces(got)}: {first}")


def kind_of(got) -> str:
    """'an array of shape (4, 8)', 'a dict' …: what a call returned, in a few words."""
    shape = getattr(got, "shape", None)
    return f"an array of shape {tuple(shape)}" if shape is not None else f"a {type(got).__name__}"


def _compare_one(got, expected, dims, tol, what: str, rule: str, named: bool) -> Problem | None:
    """One array against one expected array, or None for a match. `named`: start a value's message with `what`
    (one of several returned values)."""
    if expected is None:  # a value that is not there: linear_backward's db without a bias, dropout's mask in evaluation
        return None if got is None else Problem(f"{what} should be None, got {kind_of(got)}", "type")
    if got is None:
        return Problem(f"{what} is None: did the function forget to `return` its result?", "none")
    if isinstance(expected, list) and all(isinstance(e, str) for e in expected):
        return _compare_pieces(got, expected, what)
    if isinstance(expected, numbers.Number) and not isinstance(expected, np.ndarray):
        try:
            g = float(got)
        except (TypeError, ValueError):
            return Problem(f"{what} should be a number, got {type(got).__name__}", "type")
        if isinstance(expected, numbers.Integral) and not isinstance(expected, (bool, np.bool_)):
            if g != int(expected):
                return Problem(f"{what}: {_count_difference(g, int(expected))}")
            whole = isinstance(got, numbers.Integral) or (isinstance(got, np.ndarray) and got.ndim == 0
                                                          and got.dtype.kind in "iu")  # a 0-d array of an int
            if not whole:  # the right count as a float: 23040.0 from a / b
                return Problem(f"{what} is the right count as a {type(got).__name__} ({got!r}): a count is a whole "
                               "number, an int — divide with // or convert with int(…)", "type")
            return None
        if not (np.isclose(g, float(expected), rtol=tol.rtol, atol=tol.atol) or g == float(expected)):
            e_text, g_text = _both_values(expected, g)
            return Problem(f"{what}: expected {e_text}, got {g_text}")
        return None
    arr = _as_array(got)
    if arr is not None and not isinstance(got, np.ndarray) and isinstance(expected, np.ndarray):
        return Problem(f"{what} should be a NumPy array, got a {type(got).__module__.split('.')[0]}."
                       f"{type(got).__name__}: build it with NumPy (or the `xp` given), or convert it at the end",
                       "type")
    if arr is None:
        kind = f"a {type(got).__name__}" + (f" of {len(got)}" if isinstance(got, (tuple, list)) else "")
        return Problem(f"{what} should be an array of shape {describe_shape(expected.shape, dims)}, got {kind}",
                       "type")
    if arr.shape != expected.shape:
        msg = f"wrong shape: {what} should be {describe_shape(expected.shape, dims)}, got {tuple(arr.shape)}"
        if sorted(arr.shape) == sorted(expected.shape) and axis_names(dims, arr.ndim):
            msg += " — the same sizes in another order: check which axis you transposed or reshaped"
        elif arr.ndim != expected.ndim:
            msg += f" — {arr.ndim} axes instead of {expected.ndim}"
        return Problem(msg, "shape")
    if expected.dtype != bool and arr.dtype != expected.dtype:
        if arr.dtype == bool or _kind(expected.dtype) != _kind(arr.dtype) or expected.dtype.kind == "f":
            values = ""
            if arr.dtype.kind in "fiu" and expected.dtype.kind in "fiu":  # said too, so that a cast hides no slip
                diff = first_difference(arr, expected, tolerance_for(expected.dtype), dims)
                values = " (its values are right)" if diff is None else f"; its values are wrong too: {diff}"
            return Problem(f"{what} has dtype {arr.dtype}, expected {expected.dtype}" + (f": {rule}" if rule else "")
                           + values, "dtype")
    if expected.dtype == bool and arr.dtype != bool:
        meaning = "True = kept" if what == "keep" else "True = may attend"  # dropout's mask, or a mask of attention
        return Problem(f"{what} has dtype {arr.dtype}, expected bool ({meaning})", "dtype")
    diff = first_difference(arr, expected, tol, dims)
    if diff is None:
        return None
    rounding = expected.dtype.kind == "f" and _float32_rounding(arr.astype(np.float64), expected.astype(np.float64),
                                                                tol)
    return Problem(f"{what}: {diff}" if named else diff, hint=FLOAT32_DIGITS if rounding else "")


def compare(got, expected, dims=None, tol: Tolerance | None = None, names=None,
            dtype_rule: str = KEEP_DTYPE) -> Problem | None:
    """None when got matches expected; else what is wrong, in one sentence (a `Problem`, a str with its kind).

    expected: an array, a number, a list of strings (a tokenizer's pieces), or a tuple of them (then `names` and
    per-item `dims` name each part, and the message starts with the name of the first wrong one: "m_new: first wrong
    entry …"), or a dict of them (its keys name the parts); None where the function must return None.
    dtype_rule: what the function's dtype should follow, said after a wrong dtype ('' for nothing).
    """
    if isinstance(expected, dict):  # named counts (forward_flops): the keys first, then each value under its key
        if not isinstance(got, dict):
            return Problem(f"should return a dict with the keys {', '.join(map(repr, expected))}, got "
                           f"{kind_of(got)}", "type")
        missing = [k for k in expected if k not in got]
        if missing:
            return Problem(f"the dict has no {', '.join(map(repr, missing))}: it should hold "
                           f"{', '.join(map(repr, expected))}", "count")
        for key, e in expected.items():
            if isinstance(e, dict):  # a dict of dicts (arithmetic_intensity's phases): its key leads the message
                problem = compare(got[key], e, tol=tol, dtype_rule=dtype_rule)
                if problem:
                    return Problem(f"{key!r}: {problem}", problem.kind, problem.hint)
                continue
            t = tol or tolerance_for(getattr(e, "dtype", np.float64))
            problem = _compare_one(got[key], e, None, t, repr(key), dtype_rule, named=True)
            if problem:
                return problem
        return None
    if isinstance(expected, tuple):
        names = names or tuple(f"item {i}" for i in range(len(expected)))
        dims = dims or (None,) * len(expected)
        if not isinstance(got, (tuple, list)):
            return Problem(f"should return {len(expected)} values ({', '.join(names)}), "
                           f"got one {type(got).__name__}", "count")
        if len(got) != len(expected):
            return Problem(f"should return {len(expected)} values ({', '.join(names)}), got {len(got)}", "count")
        for g, e, d, name in zip(got, expected, dims, names):
            t = tol or tolerance_for(getattr(e, "dtype", np.float64))
            problem = _compare_one(g, e, d, t, name, dtype_rule, named=True)
            if problem:
                return problem
        return None
    t = tol or tolerance_for(getattr(expected, "dtype", np.float64))
    return _compare_one(got, expected, dims, t, (names or ("the result",))[0] if names else "the result",
                        dtype_rule, named=False)
