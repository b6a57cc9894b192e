"""Every refusal of the core's public functions, one check per function and of the same name.

A formula in `core/` names its check at the door (`@checked_by(checks.softmax)`); the check
receives every argument by keyword, the formula's defaults filled in (it states none), and raises
a one-line error naming the bad value, or returns None.
Checks shared by several doors (a mask's shape, a scale, a cache's layer index) are the small
functions at the top of the file, or of the section whose doors share them.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..backend import get_xp, is_floating, namespace, to_numpy
from ..require import (broadcastable_to, require_array, require_bool, require_float, require_int, require_real,
                       require_vector, stand_in)
# The doors of kv_cache.py, paged_kv.py, packing.py and sampling.py: checks of state and host-side lists
from .decoding_checks import (
    kv_cache_init, kv_cache_update, kv_cache_advance, paged_kv_cache_init,
    paged_kv_cache_free_sequence, paged_kv_cache_write, paged_kv_cache_extend,
    paged_kv_cache_gather, paged_kv_cache_update, paged_kv_cache_advance, paged_attention,
    pack_documents, unpack, packing_report, check_sampling, logits_row_max, step_logits, greedy, filter_logits,
    next_token_probs, sample_next)


# --- shared pieces --------------------------------------------------------------------------
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


# --- attention.py ---------------------------------------------------------------------------
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


def repeat_kv(x, n_rep):
    require_array("x", x)
    require_int(n_rep=n_rep, low=1)


def attention_scores(q, k, scale):
    for name, t in (("q", q), ("k", k)):
        require_float(name, t)
        if t.ndim < 2 or t.shape[-1] == 0:
            raise ValueError(f"{name} must be (..., n, d_h) with d_h ≥ 1, got shape {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    optional_scale(scale)


def scaled_dot_product_attention(q, k, v, mask, *, scale, return_weights):
    attention_shapes(q, k, v, mask)
    optional_scale(scale)


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
    if rng is not None and not isinstance(rng, np.random.Generator):
        require_int(rng=rng)  # a seed
    if training and p > 0 and mask is None and rng is None:
        raise ValueError("dropout in training needs rng= (a np.random.Generator or an int seed) or mask=: "
                         "the entries dropped must be reproducible")


def additive_scores(q, k, W_q, W_k, w):
    for name, t in (("q", q), ("k", k), ("W_q", W_q), ("W_k", W_k), ("w", w)):
        require_float(name, t)
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(f"q and k must be (..., n, d) arrays, got shapes {tuple(q.shape)} and {tuple(k.shape)}")
    if W_q.ndim != 2 or W_k.ndim != 2 or w.ndim != 1:
        raise ValueError(f"need W_q (d_q, d_a), W_k (d_k, d_a), w (d_a,), got shapes {tuple(W_q.shape)}, "
                         f"{tuple(W_k.shape)}, {tuple(w.shape)}")
    if W_q.shape[0] != q.shape[-1] or W_k.shape[0] != k.shape[-1]:
        raise ValueError(f"W_q {tuple(W_q.shape)} must start with q's size d_q={q.shape[-1]} and W_k "
                         f"{tuple(W_k.shape)} with k's size d_k={k.shape[-1]}")
    if not W_q.shape[1] == W_k.shape[1] == w.shape[0]:
        raise ValueError(f"W_q {tuple(W_q.shape)}, W_k {tuple(W_k.shape)} and w {tuple(w.shape)} must share d_a")


def additive_attention(q, k, v, W_q, W_k, w, mask, *, return_weights):
    require_float("v", v)
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in all but the last dim")
    additive_scores(q, k, W_q, W_k, w)
    batch = np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]))
    softmax(stand_in(q, (*batch, q.shape[-2], k.shape[-2])), -1, mask)  # the scores e [..., n_q, n_k] and the mask


def additive_peak_bytes(n_q, n_k, d_a, itemsize):
    require_int(n_q=n_q, n_k=n_k, d_a=d_a, itemsize=itemsize)


# --- heads.py -------------------------------------------------------------------------------
def split_heads(x, h):
    require_array("x", x)
    if x.ndim != 3:
        raise ValueError(f"split_heads needs x of shape (b, n, h·d_h), got shape {tuple(x.shape)}")
    require_int(h=h, low=1)
    if x.shape[-1] % h:
        raise ValueError(f"d={x.shape[-1]} must be divisible by the number of heads h={h}")


def merge_heads(x):
    require_array("x", x)
    if x.ndim != 4:
        raise ValueError(f"merge_heads needs x of shape (b, h, n, d_h), got shape {tuple(x.shape)}")


def optional_bias(w, name, size):
    """The bias `name` of the weights w: None, or a floating-point vector of `size` numbers."""
    bias = getattr(w, name)
    if bias is not None:
        require_vector(name, bias, size)


def projections(x, w, h, h_kv, context):
    """Shapes of x, context and the q/k/v projections, each named, before any matmul."""
    require_float("x", x)
    if x.ndim != 3:
        raise ValueError(f"x must be (b, n, d), got shape {tuple(x.shape)}")
    require_int(h=h, h_kv=h_kv, low=1)
    b, d = x.shape[0], x.shape[-1]
    if d % h:
        raise ValueError(f"d={d} must be divisible by the number of heads h={h}")
    if h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    d_c = d
    if context is not None:
        require_float("context", context)
        if context.ndim != 3 or context.shape[0] != b:
            raise ValueError(f"context must be (b, n_k, d_c) with b={b}, got shape {tuple(context.shape)}")
        d_c = context.shape[-1]
    for name in ("W_q", "W_k", "W_v"):
        require_float(name, getattr(w, name))
        if getattr(w, name).ndim != 2:
            raise ValueError(f"{name} must be a matrix, got shape {tuple(getattr(w, name).shape)}")
    if w.W_q.shape[0] != d:
        raise ValueError(f"W_q has {w.W_q.shape[0]} input rows but x has d={d}")
    if w.W_q.shape[1] % h or w.W_q.shape[1] == 0:
        raise ValueError(f"W_q's {w.W_q.shape[1]} columns do not split into h={h} heads")
    d_h = w.W_q.shape[1] // h
    if w.W_k.shape[1] != h_kv * d_h or w.W_v.shape[1] != h_kv * d_h:
        raise ValueError(f"W_k/W_v need h_kv·d_h = {h_kv}·{d_h} = {h_kv * d_h} columns, "
                         f"got {w.W_k.shape[1]} and {w.W_v.shape[1]}")
    if w.W_k.shape[0] != d_c or w.W_v.shape[0] != d_c:
        src = "x" if context is None else "context"
        raise ValueError(f"W_k/W_v need {src}'s {d_c} input rows, got shapes {tuple(w.W_k.shape)} and "
                         f"{tuple(w.W_v.shape)}")
    optional_bias(w, "b_q", h * d_h)
    optional_bias(w, "b_k", h_kv * d_h)
    optional_bias(w, "b_v", h_kv * d_h)


def qkv_heads(x, w, h, h_kv, context):
    projections(x, w, h, h_kv, context)


def multi_head_attention(x, w, h, h_kv, *, mask, context, return_weights):
    h_kv = h if h_kv is None else h_kv
    projections(x, w, h, h_kv, context)
    h_d_h = w.W_q.shape[1]  # h·d_h, the columns of W_q
    require_float("W_o", w.W_o)
    if w.W_o.ndim != 2 or w.W_o.shape[0] != h_d_h:
        raise ValueError(f"W_o must be (h·d_h, d) with h·d_h = {h_d_h} rows, got shape {tuple(w.W_o.shape)}")
    optional_bias(w, "b_o", w.W_o.shape[1])
    n_k = x.shape[1] if context is None else context.shape[1]  # keys and values come from x or context
    if n_k == 0:
        raise ValueError(f"n_k must be ≥ 1 (no keys to attend to), got n_k=0: "
                         f"{'x' if context is None else 'context'} has no positions")
    if mask is not None:
        mask_against(mask, (x.shape[0], h, x.shape[1], n_k), "(b, h, n_q, n_k)")


# --- masks.py -------------------------------------------------------------------------------
def query_key_positions(n_q, n_k, offset):
    """Sizes n_q, n_k ≥ 0 and an offset that puts no query before the first key."""
    require_int(n_q=n_q)
    if n_k is None:
        n_k = n_q
    require_int(n_k=n_k)
    if offset is None:
        offset = n_k - n_q  # queries are the last n_q positions (cached decoding)
    require_int(offset=offset, low=None)
    if offset < 0:
        raise ValueError(f"offset must be ≥ 0 (queries after no key), got offset={offset} with n_q={n_q}, n_k={n_k}")


def causal_mask(n_q, n_k, offset, *, xp):
    query_key_positions(n_q, n_k, offset)


def bidirectional_mask(n_q, n_k, *, xp):
    require_int(n_q=n_q, n_k=n_q if n_k is None else n_k)


def padding_mask(lengths, n, *, xp):
    xp = namespace(xp) if not hasattr(lengths, "shape") else get_xp(lengths)
    lengths = xp.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D (one per sequence), got shape {tuple(lengths.shape)}")
    if lengths.shape[0] == 0 and n is None:
        raise ValueError("lengths is empty: no sequence to take the padded length n from; give n")
    if lengths.shape[0] and not xp.isdtype(lengths.dtype, "integral"):
        raise TypeError(f"lengths must be integer token counts, got dtype {lengths.dtype}")
    if n is not None:
        require_int(n=n)
    n = int(xp.max(lengths)) if n is None else n
    if lengths.shape[0] and (int(xp.min(lengths)) < 0 or int(xp.max(lengths)) > n):
        raise ValueError(f"lengths must lie in [0, {n}], got {lengths.tolist() if hasattr(lengths, 'tolist') else lengths}")


def sliding_window_mask(n_q, w, n_k, offset, *, causal, xp):
    require_int(w=w, low=1)
    query_key_positions(n_q, n_k, offset)


def strided_mask(n, stride, *, xp):
    require_int(stride=stride, low=1)
    query_key_positions(n, n, 0)


def fixed_mask(n, block, c, *, xp):
    require_int(block=block, c=c, low=1)
    if c > block:
        raise ValueError(f"c must be ≤ block={block} (summary cells of a block), got c={c}")
    query_key_positions(n, n, 0)


def positions(name, values):
    """A 1-D array or sequence of integer positions (never floats, which would be truncated)."""
    if hasattr(values, "dtype"):
        if values.ndim != 1 or not get_xp(values).isdtype(values.dtype, "integral"):
            raise TypeError(f"{name} must be a 1-D integer array, got dtype {values.dtype}, "
                            f"shape {tuple(values.shape)}")
        return
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of positions, got {type(values).__name__} {values!r}")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise TypeError(f"{name} must hold integer positions, got {bad}")


def global_mask(n, global_tokens, *, xp):
    require_int(n=n)
    positions("global_tokens", global_tokens)
    values = to_numpy(global_tokens).tolist() if hasattr(global_tokens, "dtype") else global_tokens
    bad = [int(t) for t in values if not 0 <= t < n]
    if bad:
        raise ValueError(f"global token positions must lie in [0, {n}), got {bad}")


def random_mask(n, k, *, seed, causal, xp):
    require_int(n=n, k=k)


def same_document(doc_q, doc_k):
    require_array("doc_q", doc_q)
    require_array("doc_k", doc_k)
    if doc_q.ndim != 2 or doc_k.ndim != 2 or doc_q.shape[0] != doc_k.shape[0]:
        raise ValueError(f"doc_q and doc_k must be (b, n_q) and (b, n_k), got shapes {tuple(doc_q.shape)} "
                         f"and {tuple(doc_k.shape)}")


def document_mask(doc, *, causal):
    require_array("doc", doc)
    if doc.ndim != 2 or not get_xp(doc).isdtype(doc.dtype, "integral"):
        raise TypeError(f"doc must be a (b, n) integer array of document indices, got dtype {doc.dtype}, "
                        f"shape {tuple(doc.shape)}")


def attended_pairs(mask):
    require_array("mask", mask)


# --- embedding.py ---------------------------------------------------------------------------
def embed(ids, W_E):
    require_array("ids", ids)
    require_float("W_E", W_E)
    xp = get_xp(ids, W_E)
    if not xp.isdtype(ids.dtype, "integral"):
        raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
    if W_E.ndim != 2:
        raise ValueError(f"W_E must be a (v, d) table, got shape {tuple(W_E.shape)}")
    v = W_E.shape[0]
    if bool(xp.any((ids < 0) | (ids >= v))):  # one device -> host transfer (a GPU would wrap a bad id silently)
        raise ValueError(f"token ids must lie in [0, {v}), got min {int(xp.min(ids))}, max {int(xp.max(ids))}")


def lm_head(x, W_E, *, W_out):
    if (W_E is None) == (W_out is None):
        raise ValueError("lm_head needs exactly one of W_E (tied) or W_out (untied)")
    require_float("x", x)
    name, W, d_axis = ("W_E", W_E, 1) if W_out is None else ("W_out", W_out, 0)
    require_float(name, W)
    want = "(v, d)" if W_out is None else "(d, v)"
    if W.ndim != 2 or x.ndim < 1 or W.shape[d_axis] != x.shape[-1]:
        raise ValueError(f"{name} must be {want} with d = x's last size {x.shape[-1] if x.ndim else None}, "
                         f"got shape {tuple(W.shape)}")


# --- positions.py ---------------------------------------------------------------------------
def pairs(name, size, where=""):
    """Sinusoidal positions and RoPE work on (sin, cos) pairs of features: size even, ≥ 2."""
    if size < 2 or size % 2:
        raise ValueError(f"{name} must be even and ≥ 2 (features come in sin/cos pairs), got {name}={size}{where}")


def sinusoidal_positions(n, d, *, base, xp, dtype):
    require_int(n=n, d=d)
    pairs("d", d)
    require_real(base=base, positive=True)


def learned_positions(n, W_pos, offset):
    require_int(n=n, offset=offset)
    require_array("W_pos", W_pos)
    if W_pos.ndim != 2:
        raise ValueError(f"W_pos must be an (n_positions, d) table, got shape {tuple(W_pos.shape)}")
    if offset + n > W_pos.shape[0]:
        raise ValueError(f"positions {offset}…{offset + n - 1} exceed the table's {W_pos.shape[0]} rows")


def rope_angles(positions, d_h, base):
    require_array("positions", positions)
    if positions.ndim != 1:
        raise ValueError(f"positions must be 1-D (one per token), got shape {tuple(positions.shape)}")
    require_int(d_h=d_h)
    pairs("d_h", d_h)
    require_real(base=base, positive=True)


def rope_cos_sin(positions, d_h, base, dtype):
    rope_angles(positions, d_h, base)


def apply_rope_interleaved(x, cos, sin):
    require_float("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must be (..., n, d_h), got shape {tuple(x.shape)}")
    d_h = x.shape[-1]
    pairs("d_h", d_h, f" in x of shape {tuple(x.shape)}")
    target = (*x.shape[:-1], d_h // 2)
    for name, t in (("cos", cos), ("sin", sin)):
        require_float(name, t)
        if not broadcastable_to(t.shape, target):
            raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to x's (..., n, d_h/2) = {target}")


def apply_rope_half(x, cos, sin):
    apply_rope_interleaved(x, cos, sin)  # the same pairs, laid out differently


def interleaved_to_half_permutation(d_h):
    require_int(d_h=d_h)


# --- layers.py ------------------------------------------------------------------------------
def norm_input(x, eps, **params):
    """x floating-point (an integer x would come back rounded to integers), γ and β of shape (d,)."""
    require_float("x", x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"x must be (..., d) with d ≥ 1, got shape {tuple(x.shape)}")
    for name, p in params.items():
        if p is not None:
            require_vector(name, p, x.shape[-1], "d")
    require_real(eps=eps)
    if eps < 0:
        raise ValueError(f"eps must be ≥ 0, got eps={eps}")


def layer_norm(x, gamma, beta, eps):
    norm_input(x, eps, gamma=gamma, beta=beta)


def rms_norm(x, gamma, eps):
    norm_input(x, eps, gamma=gamma)


def gelu(x, approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


def ffn_shapes(x, down, b1=None, b2=None, **W_in):  # down: (name, (d_ff, d_out) matrix)
    """Shapes named before any matmul: each W_in (d, d_ff), the down projection (d_ff, d_out)."""
    require_float("x", x)
    for name, W in W_in.items():
        require_float(name, W)
    d = x.shape[-1] if x.ndim else 0
    d_ff = next(iter(W_in.values())).shape[-1]
    for name, W in W_in.items():
        if tuple(W.shape) != (d, d_ff):
            raise ValueError(f"{name} must be (d, d_ff) = ({d}, {d_ff}) for x of shape {tuple(x.shape)}, "
                             f"got {tuple(W.shape)}")
    name, W = down
    require_float(name, W)
    if W.ndim != 2 or W.shape[0] != d_ff:
        raise ValueError(f"{name} must be (d_ff, d) with d_ff = {d_ff}, got shape {tuple(W.shape)}")
    for b_name, b, size in (("b1", b1, d_ff), ("b2", b2, W.shape[1])):
        if b is not None:
            require_vector(b_name, b, size)


def ffn(x, W1, W2, b1, b2, activation):
    ffn_shapes(x, ("W2", W2), b1, b2, W1=W1)


def glu_ffn(x, W_gate, W_up, W_down, activation):
    ffn_shapes(x, ("W_down", W_down), W_gate=W_gate, W_up=W_up)


def swiglu_ffn(x, W_gate, W_up, W_down):
    ffn_shapes(x, ("W_down", W_down), W_gate=W_gate, W_up=W_up)
