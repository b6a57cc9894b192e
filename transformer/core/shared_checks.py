"""Pieces of the refusals that several check modules share: a mask's shape, a scale, attention's
shapes (which `flash/` checks too), a gradient's shape, and the caches' layer index, new keys and
values, and dtype (`kv_cache.py` and `paged_kv.py`).

A backward pass multiplies and sums arrays whose shapes must agree exactly: a gradient dY of the
wrong shape would often broadcast, or reshape into the right number of rows, and give a wrong
gradient in silence. The checks of each `f_backward` name the bad shape first (`same_shape`).
"""
from __future__ import annotations

import numpy as np

from ..backend import available_bytes, get_xp, namespace
from ..require import broadcastable_to, require_array, require_float, require_int, require_real


def mask_against(mask, target, what):
    """A boolean mask (True = may attend) that broadcasts to `target`, named `what` in the message."""
    require_array("mask", mask)
    xp = get_xp(mask)
    if mask.dtype != xp.bool:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    if not broadcastable_to(mask.shape, target):
        raise ValueError(f"mask of shape {tuple(mask.shape)} is not broadcastable to {what} = {target}")


def optional_scale(scale):
    """None (1/√d_h) or a finite real number."""
    if scale is not None:
        require_real(scale=scale)


def attention_shapes(q, k, v, mask):
    """q (b, h, n_q, d_h), k and v (b, h_kv, n_k, d_h) with h a multiple of h_kv; the mask broadcasts."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_float(name, t)
        if t.ndim != 4:
            raise ValueError(f"{name} must have 4 dims (b, heads, n, d_h), got shape {tuple(t.shape)}")
    b, h, n_q, d_h = q.shape
    bk, h_kv, n_k, d_k = k.shape
    if n_k == 0:
        raise ValueError(f"n_k must be ≥ 1 (no keys to attend to), got n_k=0: k has shape {tuple(k.shape)}")
    if d_h == 0:
        raise ValueError(f"d_h must be ≥ 1 (q and k have no features to score with), got d_h=0: "
                         f"q has shape {tuple(q.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in (b, h_kv, n_k)")
    if b != bk:
        raise ValueError(f"batch sizes differ: q b={b}, k b={bk}")
    if h_kv == 0 or h % h_kv != 0:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    if mask is not None:
        mask_against(mask, (b, h, n_q, n_k), "(b, h, n_q, n_k)")


def same_shape(name, t, like_name, like):
    """t is a floating-point array of exactly `like`'s shape (a gradient and what it is of)."""
    require_float(name, t)
    if tuple(t.shape) != tuple(like.shape):
        raise ValueError(f"{name} must have the shape of {like_name} {tuple(like.shape)}, got {tuple(t.shape)}")


def cache_layer(layer, n_layers):
    """layer must index one of the cache's n_layers layers."""
    require_int(layer=layer)
    if layer >= n_layers:
        raise ValueError(f"layer={layer} is out of range: the cache holds {n_layers} layers")


def new_kv(k_new, v_new, *, into=None, **dims):  # dims: name -> size in order, None for any (t, or b)
    """k_new and v_new float arrays of one shape, of rank len(dims), matching every size given; with
    `into` (the cache's dtype) narrower than theirs, every finite value within its range."""
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        require_float(name, x)
        if x.ndim != len(dims) or any(s is not None and n != s for n, s in zip(x.shape, dims.values())):
            names, sizes = ", ".join(dims), ", ".join(d if s is None else str(s) for d, s in dims.items())
            raise ValueError(f"{name} must be ({names}) = ({sizes}), got shape {tuple(x.shape)}")
        if into is not None:
            within_range(name, x, into)
    if tuple(k_new.shape) != tuple(v_new.shape):
        raise ValueError(f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} must have one shape")


def within_range(name, x, dtype):
    """x would round to ±inf when stored as dtype: 70,000 in a float16 cache. Only looked at when dtype
    is narrower than x's (a float32 cache of float32 values costs nothing)."""
    xp = get_xp(x)
    if itemsize(dtype, xp) >= itemsize(x.dtype, xp):
        return
    a = xp.abs(xp.reshape(x, (-1,)))
    a = a[a < float("inf")]  # NaN and inf left out: they are what they were, not made by the cast
    top = float(xp.max(a)) if a.shape[0] else 0.0
    with np.errstate(over="ignore"):  # the overflow is the question asked, not a warning
        cast = xp.asarray(top, dtype=dtype)
    if bool(xp.isinf(cast)):  # the cast decides: 65,519 -> float16's 65,504, 65,520 -> inf
        into, have = dtype_name(dtype), dtype_name(x.dtype)
        raise ValueError(f"{name} holds {top:.4g}, more than {into} can hold: stored in the {into} cache it "
                         f"would be inf; keep the cache in {have} (dtype=) or scale the values")


def dtype_name(dtype) -> str:  # 'float16' for np.float16, dtype('float16'), ml_dtypes' bfloat16, array_api_strict's
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype).rsplit(".", 1)[-1]


def written_ahead(call, t, length, written, holder, fill):
    """Moving on by t positions needs every layer written up to length + t."""
    require_int(t=t)
    short = [i for i, w in enumerate(written) if w < length + t]
    if short:
        i = short[0]
        raise ValueError(f"{call} past what was written: {holder} holds {length} positions, layer {i} has only "
                         f"{written[i]} written; call {fill} on every layer with the new positions first")


def float_dtype(dtype, xp, what: str = "keys and values are real numbers"):
    """None (float32) or a real floating type: an integer cache would round every key and value, an
    integer table of positions every sine and cosine to 0 or 1. `what` says why, in the message."""
    if dtype is None:
        return
    try:
        ok = namespace(xp).isdtype(dtype, "real floating")
    except (TypeError, ValueError, AttributeError):  # a string, a Python type, NumPy's bfloat16
        try:
            ok = np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"
        except TypeError:
            ok = False
    if not ok:
        raise TypeError(f"dtype must be a floating-point type (float16, bfloat16, float32, float64): {what}, "
                        f"got dtype={getattr(dtype, '__name__', dtype)!r}")


def seed_or_rng(name: str, value, *, none_ok: bool = True):
    """None (where allowed), a np.random.Generator, or a seed: an integer ≥ 0 (NumPy's SeedSequence refused
    "abc", -1 and 1.5 from deep inside)."""
    if (value is None and none_ok) or isinstance(value, np.random.Generator):
        return
    try:
        require_int(**{name: value})
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a np.random.Generator or an integer seed ≥ 0, got {name}={value!r:.60}") from None


def itemsize(dtype, xp=None) -> int:
    """Bytes of one entry of a floating dtype: None is float32; NumPy's, CuPy's, ml_dtypes' bfloat16 and the
    array API's (array_api_strict.float64, which NumPy cannot read) alike."""
    if dtype is None:
        return 4
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return namespace(xp).finfo(dtype).bits // 8


def cache_fits(what: str, n_layers, positions, h_kv, d_h, dtype, xp):
    """A floating dtype, and K and V of n_layers × positions × h_kv × d_h in it within the memory available."""
    float_dtype(dtype, xp)
    fits_in_memory(what, 2 * itemsize(dtype, xp) * int(n_layers) * int(positions) * int(h_kv) * int(d_h), xp)


CHECKED_FROM = 1 << 30  # bytes: an array smaller than this is not checked against the memory available


def fits_in_memory(what: str, n_bytes: int, xp=None):
    """Refuse, before NumPy tries, an array larger than the host memory the system has available:
    causal_mask(10**6) asked NumPy for 931 GiB and failed inside it. CuPy's arrays live on the GPU,
    whose own out-of-memory error stands."""
    if n_bytes < CHECKED_FROM or "cupy" in getattr(namespace(xp), "__name__", ""):
        return  # a mask of each decode step reads no /proc/meminfo
    free = available_bytes()
    if free is not None and n_bytes > free:
        raise ValueError(f"{what} would take {n_bytes / 1e9:,.1f} GB, more than the {free / 1e9:,.1f} GB of memory "
                         "available")
