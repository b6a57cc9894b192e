"""The refusals of `core/attention.py`, one check per public function and of the same name."""
from __future__ import annotations

import numpy as np

from ..backend import get_xp, is_floating
from ..require import require_array, require_bool, require_float, require_int, require_real
from .shared_checks import (attention_shapes, fits_in_memory, itemsize, mask_against, optional_scale, same_shape,
                            seed_or_rng)


def softmax(x, axis, mask):
    require_array("x", x)
    if not (is_floating(x) or get_xp(x).isdtype(x.dtype, "integral")):
        raise TypeError(f"x must hold real numbers (floating point or integers), got dtype {x.dtype}")
    axes = axis if isinstance(axis, tuple) else (axis,)  # a tuple: one softmax over several axes at once
    for a in axes:
        require_int(axis=a, low=None)
        if not -x.ndim <= a < x.ndim:
            raise ValueError(f"axis={axis} is out of range for x of shape {tuple(x.shape)}")
    if len({int(a) % x.ndim for a in axes}) != len(axes):
        raise ValueError(f"axis={axis} names an axis twice")
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"softmax over an empty axis: x has shape {tuple(x.shape)}, axis={axis}")
    if mask is not None:
        mask_against(mask, tuple(x.shape), "x's shape")


def softmax_backward(dP, P):
    require_float("P", P)
    same_shape("dP", dP, "P", P)


def repeat_kv(x, n_rep):
    require_array("x", x)
    require_int(n_rep=n_rep, low=1)
    if x.ndim != 4:  # a 3-D array had its sequence axis repeated, in silence
        raise ValueError(f"x must be (b, h_kv, n, d_h): the heads are axis 1, got shape {tuple(x.shape)}")
    xp, (b, h_kv, n, d_h) = get_xp(x), x.shape  # n_rep=2**40 asked NumPy for 192 TiB
    fits_in_memory(f"x repeated n_rep={n_rep} times, ({b}, {h_kv}·{n_rep}, {n}, {d_h})",
                   b * h_kv * int(n_rep) * n * d_h * itemsize(x.dtype, xp), xp)


def repeat_kv_backward(dX, n_rep):
    require_float("dX", dX)
    require_int(n_rep=n_rep, low=1)
    if dX.ndim != 4 or dX.shape[1] % n_rep:
        raise ValueError(f"dX must be (b, h_kv·n_rep, n, d_h) with heads a multiple of n_rep={n_rep}, "
                         f"got shape {tuple(dX.shape)}")


def attention_scores(q, k, scale):
    for name, t in (("q", q), ("k", k)):
        require_float(name, t)
        if t.ndim < 2 or t.shape[-1] == 0:
            raise ValueError(f"{name} must be (..., n, d_h) with d_h ≥ 1, got shape {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    if q.shape[:-2] != k.shape[:-2]:  # (1, …) against (3, …) broadcast in silence; GQA repeats k first
        raise ValueError(f"q and k must agree in their leading axes (b, h): q {tuple(q.shape)}, k {tuple(k.shape)} "
                         "(with fewer key heads, repeat_kv(k, h // h_kv) first)")
    optional_scale(scale)


def scaled_dot_product_attention(q, k, v, mask, *, scale, return_weights):
    require_bool(return_weights=return_weights)  # "no" is truthy
    attention_shapes(q, k, v, mask)
    optional_scale(scale)


def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale):
    attention_shapes(q, k, v, None)
    optional_scale(scale)
    same_shape("dO", dO, "q", q)
    if v.shape[-1] != dO.shape[-1]:  # dO V^T: a matmul error from inside NumPy
        raise ValueError(f"v's head size must be dO's (the output's) d_h={dO.shape[-1]}, "
                         f"got v of shape {tuple(v.shape)}")
    require_float("P", P)
    want = (*q.shape[:3], k.shape[2])
    if tuple(P.shape) != want:
        raise ValueError(f"P must be the saved weights of shape (b, h, n_q, n_k) = {want}, got {tuple(P.shape)}")


def dropout_p(p):
    """The share of entries dropped: a real number with 0 ≤ p < 1 (p = 1 keeps nothing and divides by 0)."""
    require_real(p=p)  # a string, a bool, NaN or ±inf: refused here, naming p
    if not 0 <= float(p) < 1:
        raise ValueError(f"p must be in [0, 1) (the share of entries dropped; p = 1 would keep none and divide by 0), "
                         f"got p={p!r}")


def keep_mask(mask, x, x_name):
    """A dropout keep-mask: boolean, exactly x's shape (True = kept)."""
    require_array("mask", mask)
    if mask.dtype != get_xp(mask).bool:
        raise TypeError(f"mask must be boolean (True = kept), got dtype {mask.dtype}")
    if tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"mask must have the shape of {x_name} {tuple(x.shape)}, got {tuple(mask.shape)}")


def dropout(x, p, *, rng, mask, training):
    require_float("x", x)
    dropout_p(p)
    require_bool(training=training)
    if mask is not None:
        keep_mask(mask, x, "x")
    seed_or_rng("rng", rng)
    if training and p > 0 and mask is None and rng is None:
        raise ValueError("dropout in training needs rng= (a np.random.Generator or an int seed) or mask=: "
                         "the entries dropped must be reproducible")


def dropout_backward(dY, mask, p):
    require_float("dY", dY)
    dropout_p(p)
    if mask is not None:
        keep_mask(mask, dY, "dY")
