"""The checker's cases for lessons 03 and 07: softmax, scaled dot-product attention, additive scores, repeat_kv."""
from __future__ import annotations

import math

import numpy as np

from ..core.additive import additive_scores
from ..core.attention import repeat_kv, scaled_dot_product_attention, softmax
from ..core.masks import causal_mask, padding_mask
from .cases import Case, Mistake, Spec
from .compare import Tolerance

__all__ = ["SOFTMAX", "SDPA", "ADDITIVE_SCORES", "REPEAT_KV", "SDPA_MISTAKES_SHARED"]

HEADS = ("b", "h", "n_q", "d_h")
WEIGHTS = ("b", "h", "n_q", "n_k")


def _rng(seed):
    return np.random.default_rng(seed)


# --- softmax ----------------------------------------------------------------------------------
def softmax_cases() -> list[Case]:
    r = _rng(0)
    empty_row = np.ones((3, 5), dtype=bool)
    empty_row[1] = False  # row 1 keeps nothing
    return [
        Case("x of shape (3, 5)", (r.standard_normal((3, 5)),)),
        Case("x of shape (2, 3, 7), batch > 1", (r.standard_normal((2, 3, 7)),), tags=frozenset({"batch"})),
        Case("axis=0 of a (4, 3) array", (r.standard_normal((4, 3)),), {"axis": 0}, frozenset({"axis"})),
        Case("huge logits [1000, 1001, 999]", (np.array([[1000.0, 1001.0, 999.0]]),), tags=frozenset({"huge"})),
        Case("rows of wide spread: [−1000, 0, 1000] and [−1400, −1000, −800]",
             (np.array([[-1000.0, 0.0, 1000.0], [-1400.0, -1000.0, -800.0]]),), tags=frozenset({"huge"})),
        Case("rows at different levels: [1000, 1001, 999] and [−1000, −999, −1001]",
             (np.array([[1000.0, 1001.0, 999.0], [-1000.0, -999.0, -1001.0]]),), tags=frozenset({"huge"})),
        Case("float32 x of shape (2, 9)", (r.standard_normal((2, 9)).astype(np.float32),),
             tags=frozenset({"float32"})),
        Case("float16 logits around 20", ((r.standard_normal((2, 6)) * 3 + 20).astype(np.float16),),
             tags=frozenset({"huge"})),
        Case("float16 rows of 1,000 logits (σ = 3), rounded once: within one float16 step",
             ((r.standard_normal((2, 1000)) * 3).astype(np.float16),), tags=frozenset({"fp16"}),
             tol=Tolerance((2.0 ** -10, 2.0 ** -24))),  # one ulp: float16 exps miss by ~3 (lesson 03)
        Case("a mask hiding two entries", (r.standard_normal((2, 4)),),
             {"mask": np.array([[True, False, True, True], [True, True, False, True]])}, frozenset({"mask"})),
        Case("a mask hiding every entry of row 1", (r.standard_normal((3, 5)),), {"mask": empty_row},
             frozenset({"mask", "empty-row"})),
    ]


def _softmax_no_max(x, axis=-1, mask=None):  # e^x / Σ e^x without subtracting the max
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(x) if mask is None else np.where(mask, np.exp(x), 0)
        z = e.sum(axis=axis, keepdims=True)
        return (e / np.where(z == 0, 1, z)).astype(x.dtype)  # wrong only where e^x overflows


def _softmax_in_dtype(x, axis=-1, mask=None):  # x − max and e^… in x's own dtype: float16 rounds every term
    x = x if mask is None else np.where(mask, x, -np.inf).astype(x.dtype)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0).astype(x.dtype))
    z = e.sum(axis=axis, keepdims=True)
    return e / np.where(z == 0, 1, z).astype(x.dtype)


def _softmax_shifted_by(shift, guarded=False):
    """e^(x − c) / Σ e^(x − c) with c = shift(x, axis), a number other than each row's max: the row's min or mean, or
    the max of the whole array. Right where nothing overflows or underflows: only the max keeps every e^… ≤ 1.
    guarded: a sum of 0 divided as 1 (zeros, not NaN). float16 is computed in float32, so that a float16 case
    that fails for its own reason is not put down to the shift."""
    def variant(x, axis=-1, mask=None):
        if mask is not None:
            raise ValueError("a variant of the shift alone")  # a variant that cannot run on a case says nothing
        xf = x.astype(np.float32) if x.dtype == np.float16 else x
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            e = np.exp(xf - shift(xf, axis))
            z = e.sum(axis=axis, keepdims=True)
            return (e / (np.where(z == 0, 1, z) if guarded else z)).astype(x.dtype)
    return variant


def _global_max(x, axis):
    return x.max()


def _softmax_whole_sum(x, axis=-1, mask=None):  # Σ over every entry of the array, not along the axis
    x = x if mask is None else np.where(mask, x, -np.inf)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return (e / e.sum()).astype(x.dtype)


def _softmax_mask_zero(x, axis=-1, mask=None):  # masked scores set to 0 instead of -inf
    return softmax(x if mask is None else np.where(mask, x, 0.0), axis=axis)


def _softmax_mask_inverted(x, axis=-1, mask=None):  # −inf where the mask is True
    return softmax(x, axis=axis, mask=None if mask is None else ~np.asarray(mask))


def _softmax_mask_1e9(x, axis=-1, mask=None):  # masked scores set to −1e9 instead of −inf
    return softmax(x if mask is None else np.where(mask, x, -1e9), axis=axis)


KEEPDIMS = Mistake("a row's max and sum must keep their axis (keepdims=True), so that they broadcast back over "
                   "the row", raises=r"could not be broadcast")
NO_MAX = Mistake("overflow: e^1000 is inf in float64 (e^12 in float16), so inf / inf = NaN — subtract the row "
                 "max before exp: softmax(x) = softmax(x − max x)", variant=_softmax_no_max)
EMPTY_ROW = Mistake("a row whose mask hides every entry must give zeros, not NaN and not equal weights: there the "
                    "sum of e^… is 0, so divide by 1 instead (np.where(z == 0, 1, z))", tag="empty-row")

SOFTMAX = Spec(
    "softmax", softmax, softmax_cases, "transformer/core/attention.py", dims=None,
    mistakes=[
        NO_MAX,
        Mistake("subtract each row's own max, x.max(axis, keepdims=True), not its min: e^(x − min) overflows on a row "
                "of wide spread; only the max makes every e^… at most 1", variant=_softmax_shifted_by(
                    lambda x, axis: x.min(axis=axis, keepdims=True))),
        Mistake("subtract each row's own max, x.max(axis, keepdims=True), not its mean: e^(x − mean) overflows on a "
                "row of wide spread; only the max makes every e^… at most 1", variant=_softmax_shifted_by(
                    lambda x, axis: x.mean(axis=axis, keepdims=True))),
        Mistake("subtract each row's own max, x.max(axis, keepdims=True), not the max of the whole array: a row far "
                "below it underflows to e^… = 0 everywhere, 0 / 0", variant=_softmax_shifted_by(_global_max)),
        Mistake("subtract each row's own max, x.max(axis, keepdims=True), not the max of the whole array: a row far "
                "below it underflows to e^… = 0 everywhere, and its weights come out 0", variant=_softmax_shifted_by(
                    _global_max, guarded=True)),
        Mistake("the sum runs over the whole array: divide by each row's own sum, e.sum(axis, keepdims=True), so that "
                "every row sums to 1", variant=_softmax_whole_sum),
        Mistake("overflow on large logits only: subtract the row max before exp", tag="huge"),
        Mistake("the sum runs over the wrong axis: use the `axis` argument (each slice along it must sum to 1)",
                tag="axis"),
        Mistake("masked scores set to a finite number (−1e9, 0) instead of −inf: a row whose mask hides every "
                "entry then gets equal weights, 1/n each, where it must give zeros — use −np.inf, and divide by 1 "
                "where the sum is 0", variant=_softmax_mask_1e9),
        Mistake("masked entries must get probability exactly 0: set their scores to −inf before exp "
                "(np.where(mask, x, -np.inf)), not to 0", variant=_softmax_mask_zero),
        Mistake("mask polarity: True means 'may attend', so keep the scores where the mask is True and put −inf "
                "where it is False (np.where(mask, x, -np.inf))", variant=_softmax_mask_inverted),
        Mistake("the mask is not applied: where mask is False the probability must be 0", tag="mask"),
        EMPTY_ROW,
        Mistake("x − max and e^… taken in float16 round every term (lesson 03): compute a float16 softmax in "
                "float32 (x.astype(np.float32)) and cast the result back to x.dtype once, at the end",
                variant=_softmax_in_dtype),
        Mistake("float16 fails alone: compute in float32 (x.astype(np.float32)) and cast the result back to x.dtype",
                tag="fp16"),
        KEEPDIMS,
    ],
    torch=lambda case: _torch_softmax(case))


def _torch_softmax(case):
    if "empty-row" in case.tags or case.args[0].dtype == np.float16:
        return None  # torch gives NaN on an empty row; its float16 softmax on the CPU rounds differently
    import torch
    x = torch.from_numpy(np.asarray(case.args[0]))
    mask = case.kwargs.get("mask")
    if mask is not None:
        x = x.masked_fill(~torch.from_numpy(mask), -math.inf)
    return torch.softmax(x, dim=case.kwargs.get("axis", -1)).numpy()


# --- scaled dot-product attention -----------------------------------------------------------
def _qkv(r, b, h, h_kv, n_q, n_k, d_h, dtype=np.float64, spread=1.0):
    q = (r.standard_normal((b, h, n_q, d_h)) * spread).astype(dtype)
    k = (r.standard_normal((b, h_kv, n_k, d_h)) * spread).astype(dtype)
    v = r.standard_normal((b, h_kv, n_k, d_h)).astype(dtype)
    return q, k, v


def sdpa_cases() -> list[Case]:
    r = _rng(1)
    one_empty = causal_mask(5).copy()
    one_empty[2] = False  # query 2 may attend to nothing
    return [
        Case("b=1, h=1, n_q=n_k=d_h=4, no mask", _qkv(r, 1, 1, 1, 4, 4, 4)),
        Case("b=2, h=3, n_q=n_k=5, d_h=8, no mask", _qkv(r, 2, 3, 3, 5, 5, 8), tags=frozenset({"batch"})),
        Case("causal mask, b=2, h=2, n_q=n_k=5, d_h=4", _qkv(r, 2, 2, 2, 5, 5, 4) + (causal_mask(5),),
             tags=frozenset({"mask"})),
        Case("padding mask (lengths 3 and 5), b=2, h=2, n=5, d_h=4",
             _qkv(r, 2, 2, 2, 5, 5, 4) + (padding_mask(np.array([3, 5])),), tags=frozenset({"mask"})),
        Case("one decode row: n_q=1, n_k=7, d_h=6", _qkv(r, 1, 2, 2, 1, 7, 6)),
        Case("GQA: h=4 query heads, h_kv=2, n=5, d_h=8, causal", _qkv(r, 2, 4, 2, 5, 5, 8) + (causal_mask(5),),
             tags=frozenset({"gqa", "mask"})),
        Case("MQA: h=3 query heads, h_kv=1, n_q=3, n_k=6", _qkv(r, 1, 3, 1, 3, 6, 4), tags=frozenset({"gqa"})),
        Case("query 2 may attend to no key (its mask row is all False)", _qkv(r, 1, 2, 2, 5, 5, 4) + (one_empty,),
             tags=frozenset({"mask", "empty-row"})),
        Case("float32, b=2, h=2, n=7, d_h=8", _qkv(r, 2, 2, 2, 7, 7, 8, np.float32), tags=frozenset({"float32"})),
        Case("float16, causal, n=6, d_h=16", _qkv(r, 1, 2, 2, 6, 6, 16, np.float16) + (causal_mask(6),),
             tags=frozenset({"fp16", "mask"})),
        Case("huge scores: q and k times 40", _qkv(r, 1, 2, 2, 5, 5, 4, spread=40.0), tags=frozenset({"huge"})),
        Case("scale=0.5 given", _qkv(r, 1, 2, 2, 4, 6, 4), {"scale": 0.5}, frozenset({"scale"})),
        Case("return_weights=True, causal", _qkv(r, 1, 2, 2, 4, 4, 4) + (causal_mask(4),),
             {"return_weights": True}, frozenset({"weights", "mask"})),
    ]


def _with_scale(scale_of):  # a variant with a wrong default scale
    def variant(q, k, v, mask=None, *, scale=None, return_weights=False):
        s = scale_of(q.shape[-1]) if scale is None else scale
        return scaled_dot_product_attention(q, k, v, mask, scale=s, return_weights=return_weights)
    return variant


def _inverted_mask(q, k, v, mask=None, *, scale=None, return_weights=False):
    if mask is None:
        raise ValueError("no mask to invert")
    return scaled_dot_product_attention(q, k, v, ~np.asarray(mask), scale=scale, return_weights=return_weights)


def _k_not_transposed(q, k, v, mask=None, *, scale=None, return_weights=False):
    s = (q @ k) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)  # K used as it is
    p = softmax(s, mask=mask)
    return (p @ v, p) if return_weights else p @ v


def _softmax_over_queries(q, k, v, mask=None, *, scale=None, return_weights=False):
    s = (q @ k.swapaxes(-1, -2)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    p = softmax(s, axis=-2, mask=mask)
    return (p @ v, p) if return_weights else p @ v


def _gqa_tiled(q, k, v, mask=None, *, scale=None, return_weights=False):  # K/V heads in the order 0, 1, 0, 1
    n_rep = q.shape[1] // k.shape[1]
    k, v = np.tile(k, (1, n_rep, 1, 1)), np.tile(v, (1, n_rep, 1, 1))
    return scaled_dot_product_attention(q, k, v, mask, scale=scale, return_weights=return_weights)


def _masked_scores(masking):
    """Attention whose masked scores are masking(mask, s) instead of −inf where the mask is False: −1e9, 0, or the
    boolean mask added to the scores (+1 on every key kept)."""
    def variant(q, k, v, mask=None, *, scale=None, return_weights=False):
        if mask is None:
            raise ValueError("no mask")
        n_rep = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)
        s = (q @ k.swapaxes(-1, -2)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
        p = softmax(masking(np.asarray(mask), s))
        out = (p @ v).astype(q.dtype)
        return (out, p.astype(q.dtype)) if return_weights else out
    return variant


_mask_1e9 = _masked_scores(lambda mask, s: np.where(mask, s, -1e9))


SDPA_MISTAKES_SHARED = [
    Mistake("the scores are divided by d_h: the formula divides by √d_h (math.sqrt(q.shape[-1]))",
            variant=_with_scale(lambda d_h: 1 / d_h)),
    Mistake("the scores are not scaled: divide Q Kᵀ by √d_h", variant=_with_scale(lambda d_h: 1.0)),
    Mistake("mask polarity: True means 'may attend', so keep the scores where the mask is True and put −inf where "
            "it is False (np.where(mask, scores, -np.inf))", variant=_inverted_mask),
    Mistake("K is not transposed: the scores are Q Kᵀ, (n_q, d_h) @ (d_h, n_k) — use k.swapaxes(-1, -2) or k.mT",
            variant=_k_not_transposed),
    Mistake("the scores are Q Kᵀ, (n_q, d_h) @ (d_h, n_k): swap K's last two axes, k.swapaxes(-1, -2) or k.mT (k.T "
            "reverses all four axes of a (b, h, n_k, d_h) array, and k as it is is not transposed)",
            raises=r"core dimension|mismatch in its core", tag=None),
    Mistake("the scores are divided by √n_k, the number of keys: the formula divides by √d_h, the head size "
            "(math.sqrt(q.shape[-1]))", variant=lambda q, k, v, mask=None, *, scale=None, return_weights=False:
            scaled_dot_product_attention(q, k, v, mask, scale=1 / math.sqrt(k.shape[-2]) if scale is None else scale,
                                         return_weights=return_weights)),
    Mistake("masked scores set to 0 instead of −inf: a score of 0 still gets weight e^0 / Σ — put −inf where the "
            "mask is False (np.where(mask, scores, -np.inf))",
            variant=_masked_scores(lambda mask, s: np.where(mask, s, 0.0))),
    Mistake("the mask is boolean (True = may attend), not a bias to add: scores + mask adds 1 to every key kept and "
            "hides none — use np.where(mask, scores, -np.inf)", variant=_masked_scores(lambda mask, s: s + mask)),
    Mistake("the softmax runs over the queries: it must run over the keys, the last axis, so that each query's "
            "weights sum to 1", variant=_softmax_over_queries),
    Mistake("the K/V heads are repeated in the order 0, 1, 0, 1: query head i reads K/V head i // (h / h_kv), so "
            "repeat each head h / h_kv times in a row (np.repeat(k, h // h_kv, axis=1), not np.tile)",
            variant=_gqa_tiled),
    Mistake("masked scores set to a finite number (−1e9) instead of −inf: a query whose mask row is all False "
            "then gets equal weights, so the mean of V, where it must get zeros — use −np.inf (and a softmax that "
            "gives 0 on such a row)", variant=_mask_1e9),
    Mistake("only the cases with h_kv < h fail: repeat each K/V head h / h_kv times along the head axis "
            "(np.repeat(k, h // h_kv, axis=1)) before the products; lesson 07 explains why", tag="gqa"),
    Mistake("only the cases with h_kv < h fail: repeat each K/V head h / h_kv times along the head axis "
            "(np.repeat(k, h // h_kv, axis=1)) before the products; lesson 07 explains why",
            raises=r"broadcast|core dimension", tag="gqa"),
    Mistake("only the masked cases fail: the scores where the mask is False must be −inf before the softmax "
            "(np.where(mask, scores, -np.inf)), so that their weights are exactly 0", tag="mask"),
    Mistake("a query whose mask row is all False has no key to read: its output must be zeros (its softmax row 0 "
            "everywhere), not NaN and not an average of V", tag="empty-row"),
    Mistake("overflow on large scores: subtract each row's max before exp (or call your softmax from above)",
            tag="huge"),
    Mistake("float16 fails alone: compute in float32 (astype(np.float32)) and cast the output back to q.dtype",
            tag="fp16"),
    Mistake("use the `scale` argument when it is given (1/√d_h only when scale is None)", tag="scale"),
    Mistake("with return_weights=True return (out, weights): the weights are the softmax P, (b, h, n_q, n_k)",
            tag="weights"),
]

SDPA = Spec(
    "scaled_dot_product_attention", scaled_dot_product_attention, sdpa_cases, "transformer/core/attention.py",
    dims=HEADS, tuple_dims=(HEADS, WEIGHTS), tuple_names=("out", "weights"), mistakes=SDPA_MISTAKES_SHARED,
    torch=lambda case: _torch_sdpa(case))


def _torch_sdpa(case):
    if case.tags & {"empty-row", "fp16"}:
        return None  # torch's math backend gives NaN on an empty row; float16 attention on the CPU differs
    import torch
    import torch.nn.functional as F
    q, k, v = (torch.from_numpy(np.asarray(t)) for t in case.args[:3])
    mask = case.args[3] if len(case.args) > 3 else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else torch.from_numpy(mask),
                                         scale=case.kwargs.get("scale"), enable_gqa=q.shape[1] != k.shape[1])
    if case.kwargs.get("return_weights"):
        return None  # torch's SDPA does not return the weights
    return out.numpy()


# --- additive scores (Bahdanau) ----------------------------------------------------------------
def additive_cases() -> list[Case]:
    r = _rng(31)
    w = lambda *s: r.standard_normal(s) / math.sqrt(s[0])  # noqa: E731 - a layer's initial weights
    return [Case("q (4, 3), k (5, 3), d_a=6: n_q=4, n_k=5", (r.standard_normal((4, 3)), r.standard_normal((5, 3)),
                                                             w(3, 6), w(3, 6), r.standard_normal(6))),
            Case("q and k of different sizes: d_q=2, d_k=5, d_a=4",
                 (r.standard_normal((3, 2)), r.standard_normal((6, 5)), w(2, 4), w(5, 4), r.standard_normal(4)),
                 tags=frozenset({"sizes"})),
            Case("batch and heads: q (2, 3, 4, 8), k (2, 3, 7, 8), d_a=5",
                 (r.standard_normal((2, 3, 4, 8)), r.standard_normal((2, 3, 7, 8)), w(8, 5), w(8, 5),
                  r.standard_normal(5)), tags=frozenset({"batch"})),
            Case("huge q and k (×1000): tanh saturates, |e_ij| ≤ ‖w‖₁", (r.standard_normal((3, 4)) * 1e3,
                                                                        r.standard_normal((2, 4)) * 1e3, w(4, 3),
                                                                        w(4, 3), r.standard_normal(3)))]


def _additive(hidden):
    """additive_scores with a slip in the hidden layer: hidden(q_a, k_a) -> (…, n_q, n_k, d_a), then · w."""
    def scores(q, k, W_q, W_k, w):
        return hidden(q @ W_q, k @ W_k) @ w
    return scores


def _pairs(q_a, k_a):  # [..., n_q, 1, d_a] + [..., 1, n_k, d_a]
    return q_a[..., :, None, :], k_a[..., None, :, :]


ADDITIVE_SCORES = Spec(
    "additive_scores", additive_scores, additive_cases, "transformer/core/additive.py", dims=("…", "n_q", "n_k"),
    mistakes=[Mistake("tanh goes on the sum, tanh(q_i W_q + k_j W_k): the network's hidden layer, before w",
                      variant=_additive(lambda q_a, k_a: sum(_pairs(q_a, k_a)))),
              Mistake("additive scores add the two projections, q_i W_q + k_j W_k, inside tanh: tanh(q W_q) + "
                      "tanh(k W_k) is two separate layers",
                      variant=_additive(lambda q_a, k_a: sum(np.tanh(t) for t in _pairs(q_a, k_a)))),
              Mistake("each pair (i, j) needs its own vector q_i W_q + k_j W_k: put the queries on a new axis -2 and "
                      "the keys on a new axis -3, q_a[..., :, None, :] + k_a[..., None, :, :], (…, n_q, n_k, d_a)",
                      raises=r"broadcast"),
              Mistake("the sum of q_i W_q and k_j W_k, not their product: additive attention scores a pair with a "
                      "small network, the dot product is the other score", variant=_additive(
                          lambda q_a, k_a: np.tanh(np.multiply(*_pairs(q_a, k_a))))),
              Mistake("tanh goes on each of the d_a hidden units, before w: wᵀ tanh(q_i W_q + k_j W_k), not "
                      "tanh(wᵀ(q_i W_q + k_j W_k))", variant=lambda q, k, W_q, W_k, w: np.tanh(
                          _additive(lambda q_a, k_a: sum(_pairs(q_a, k_a)))(q, k, W_q, W_k, w))),
              Mistake("the keys along the last axis of the scores: e has shape (…, n_q, n_k), row i the query's",
                      variant=lambda q, k, W_q, W_k, w: np.swapaxes(additive_scores(q, k, W_q, W_k, w), -1, -2))],
    torch=lambda case: _torch_additive(case))


def _torch_additive(case):
    """e_ij = wᵀ tanh(q_i W_q + k_j W_k) by torch's einsum over an explicit (n_q, n_k, d_a) hidden layer."""
    import torch
    q, k, W_q, W_k, w = (torch.from_numpy(np.asarray(t)) for t in case.args)
    hidden = torch.tanh((q @ W_q).unsqueeze(-2) + (k @ W_k).unsqueeze(-3))  # [..., n_q, n_k, d_a]
    return torch.einsum("...ija,a->...ij", hidden, w).numpy()


# --- repeat_kv (lesson 07) --------------------------------------------------------------------
def repeat_kv_cases() -> list[Case]:
    r = _rng(7)
    return [
        Case("h_kv=2 heads, n_rep=2 (4 query heads)", (r.standard_normal((2, 2, 3, 4)), 2)),
        Case("h_kv=3 heads, n_rep=3 (9 query heads, SmolLM2)", (r.standard_normal((1, 3, 2, 2)), 3)),
        Case("n_rep=1: nothing to repeat", (r.standard_normal((1, 2, 3, 2)), 1)),
        Case("MQA: h_kv=1, n_rep=4", (r.standard_normal((2, 1, 3, 2)), 4)),
    ]


REPEAT_KV = Spec(
    "repeat_kv", repeat_kv, repeat_kv_cases, "transformer/core/attention.py", dims=("b", "h", "n", "d_h"),
    mistakes=[Mistake("the heads come out in the order 0, 1, 0, 1: query head i reads K/V head i // n_rep, so each "
                      "head is repeated n_rep times in a row (np.repeat, not np.tile)",
                      variant=lambda x, n_rep: np.tile(x, (1, n_rep, 1, 1)))],
    torch=lambda case: __import__("torch").from_numpy(case.args[0]).repeat_interleave(case.args[1], dim=1).numpy())
