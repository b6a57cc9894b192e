"""The checker's cases for lessons 01, 02, 04 and 05: embeddings, positions, heads, masks (06's KV cache is in
specs_cache.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..core.attention import scaled_dot_product_attention
from ..core.embedding import embed, lm_head
from ..core.heads import AttentionWeights, merge_heads, multi_head_attention, split_heads
from ..core.layers import linear
from ..core.masks import causal_mask, padding_mask, sliding_window_mask
from ..core.positions import (apply_rope_half, apply_rope_interleaved, learned_positions, rope_angles, rope_cos_sin,
                              sinusoidal_positions)
from .cases import Case, Mistake, NotingNamespace, Spec
from .compare import Tolerance

__all__ = ["EMBED", "LM_HEAD", "SINUSOIDAL", "LEARNED_POSITIONS", "ROPE_ANGLES", "ROPE_HALF", "ROPE_INTERLEAVED",
           "SPLIT_HEADS", "MERGE_HEADS", "MHA", "CAUSAL_MASK", "PADDING_MASK", "SLIDING_WINDOW_MASK"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 01: embed, lm_head ----------------------------------------------------------------
def embed_cases():
    r = _rng(11)
    W = r.standard_normal((7, 5))
    return [Case("ids (2, 3) into a (v, d) = (7, 5) table", (np.array([[1, 4, 6], [0, 0, 3]]), W)),
            Case("one token id, b=1, n=1", (np.array([[6]]), W)),
            Case("a float32 table (v, d) = (9, 4)", (np.array([[8, 0, 2]]), r.standard_normal((9, 4)).astype(
                np.float32)), tags=frozenset({"float32"})),  # n = 3 ≠ d: a factor of √d is not read as √n
            Case("id 7 in a table of v=7 rows", (np.array([[1, 7]]), W), tags=frozenset({"refuse"}),
                 refuses=ValueError, names=(7,), refusal="ids lie in [0, 7): there is no row 7"),
            Case("id −1: NumPy would read the last row", (np.array([[2, -1]]), W),
                 tags=frozenset({"refuse", "negative"}),
                 refuses=ValueError, names=(-1,), refusal="ids lie in [0, 7): −1 is no token, though W_E[-1] "
                 "quietly gives the last row")]


def lm_head_cases():
    r = _rng(12)
    return [Case("tied: x (2, 3, 5), W_E (7, 5)", (r.standard_normal((2, 3, 5)), r.standard_normal((7, 5))),
                 tags=frozenset({"tied"})),
            Case("untied: W_out (5, 7)", (r.standard_normal((1, 2, 5)),), {"W_out": r.standard_normal((5, 7))},
                 frozenset({"untied"}))]


EMBED = Spec("embed", embed, embed_cases, "transformer/core/embedding.py", dims=("b", "n", "d"),
             mistakes=[Mistake("look up rows of W_E: row ids[b, n] is the vector of that token (W_E[ids])",
                               raises=r"index|shapes"),
                       Mistake("ids count from 0: token id i is row i of W_E (W_E[ids]), no shift",
                               variant=lambda ids, W_E: W_E[ids - 1]),
                       Mistake("check the ids first: outside [0, v) raise ValueError naming the id (W_E[ids] "
                               "raises IndexError past the end, and reads from the end for a negative id)",
                               tag="refuse"),
                       Mistake("a negative id is no token either: check 0 ≤ id as well as id < v (W_E[-1] quietly "
                               "reads the last row)", tag="negative")],
             dtype_rule="the vectors keep W_E's dtype: W_E[ids] does, where a one-hot product or np.zeros(…) filled "
                        "in a loop is float64")
LM_HEAD = Spec("lm_head", lm_head, lm_head_cases, "transformer/core/embedding.py", dims=("b", "n", "v"),
               mistakes=[Mistake("the tied head reads the table backwards: logits = x W_Eᵀ, (d) @ (d, v)",
                                 raises=r"core dimension|mismatch", tag="tied"),
                         Mistake("W_out is (d, v) already: logits = x @ W_out, not W_out.T",
                                 raises=r"core dimension|mismatch", tag="untied"),
                         Mistake("the tied head is W_Eᵀ, a transpose: W_E.reshape(d, v) keeps the memory order and "
                                 "mixes the tokens' numbers (use W_E.T)",
                                 variant=lambda x, W_E=None, W_out=None: x @ (W_E.reshape(W_E.shape[::-1]) if W_out
                                                                              is None else W_out)),
                         Mistake("lm_head returns the logits, x W_Eᵀ, not probabilities: the softmax comes later, "
                                 "when a token is chosen", variant=lambda x, W_E=None, W_out=None:
                                 _softmax_last(lm_head(x, W_E, W_out=W_out) if W_out is not None else lm_head(x, W_E))),
                         Mistake("with W_out given (untied), logits = x W_out", tag="untied")])


def _softmax_last(z):  # [..., v] probabilities along the last axis
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# --- lesson 02: positions ---------------------------------------------------------------------
def sinusoidal_cases():
    return [Case("n=6, d=8", (6, 8)), Case("n=5, d=10", (5, 10)),
            Case("n=4, d=8, base=100", (4, 8), {"base": 100.0}, frozenset({"base"})),
            Case("n=3, d=4, dtype=float64: computed in float64", (3, 4), {"dtype": np.float64}, frozenset({"dtype"}),
                 tol=Tolerance((1e-12, 1e-12))),  # a table made in float32 and cast is off by ~1e-8
            Case("n=4, d=6, xp= a namespace to build it with", (4, 6), {"xp": NotingNamespace()}, frozenset({"xp"}))]


def _sin_then_cos(n, d, *, base=10000.0, xp=None, dtype=None):  # all sines first, then all cosines
    angle = np.arange(n)[:, None] * base ** (-np.arange(0, d, 2) / d)[None, :]
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=-1).astype(dtype or np.float32)


def _exponent_i(n, d, *, base=10000.0, xp=None, dtype=None):  # base^(i/d) with i the pair index
    angle = np.arange(n)[:, None] * base ** (-np.arange(d // 2) / d)[None, :]
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(n, d).astype(dtype or np.float32)


SINUSOIDAL = Spec(
    "sinusoidal_positions", sinusoidal_positions, sinusoidal_cases, "transformer/core/positions.py",
    dims=("n", "d"), dtype_rule="the table is float32 unless dtype= is given",
    mistakes=[Mistake("sin and cos alternate: PE[pos, 2i] = sin, PE[pos, 2i+1] = cos — not all sines first",
                      variant=_sin_then_cos),
              Mistake("the exponent is 2i/d with 2i the even column (0, 2, 4 …), not the pair index i",
                      variant=_exponent_i),
              Mistake("use the `base` argument in base^(2i/d)", tag="base"),
              Mistake("the table is float32 unless dtype= is given: .astype(dtype)", tag="dtype")])


def learned_cases():
    W = _rng(21).standard_normal((16, 6)).astype(np.float32)  # [n_ctx, d]: a trained table's rows
    past = "NumPy's slice would quietly give fewer rows"
    return [Case("n=5 from a (16, 6) table", (5, W)),
            Case("n=4, offset=3: positions 3 … 6", (4, W), {"offset": 3}, frozenset({"offset"})),
            Case("n=16: every row of the table", (16, W), tags=frozenset({"full"})),
            Case("n=1, offset=15: one decode step at the last position", (1, W, 15),
                 tags=frozenset({"offset", "full"})),
            Case("n=3, offset=2 of a float64 (8, 4) table", (3, _rng(22).standard_normal((8, 4))), {"offset": 2},
                 frozenset({"offset"})),
            Case("n=6, offset=12 of 16 rows: positions 12 … 17 run past the table", (6, W), {"offset": 12},
                 frozenset({"refuse"}), refuses=ValueError, names=(16, 17, 18),
                 refusal=f"positions 12 … 17 of a 16-row table ({past})"),
            Case("n=20 of 16 rows: a longer input than the table", (20, W), tags=frozenset({"refuse"}),
                 refuses=ValueError, names=(16, 20), refusal=f"20 positions of a 16-row table ({past})")]


def _learned(rows):
    """learned_positions with a slip: rows(n, offset) -> the slice of W_pos it reads, and no range check."""
    return lambda n, W_pos, offset=0: W_pos[rows(n, offset)]


LEARNED_POSITIONS = Spec(
    "learned_positions", learned_positions, learned_cases, "transformer/core/positions.py", dims=("n", "d"),
    mistakes=[Mistake("position i of the input is row offset + i of the table: W_pos[offset : offset + n] (a "
                      "decode step after 15 tokens reads row 15)", variant=_learned(lambda n, o: slice(0, n))),
              Mistake("the slice ENDS at offset + n: W_pos[offset : offset + n] holds n rows, W_pos[offset : n] "
                      "only n − offset", variant=_learned(lambda n, o: slice(o, n))),
              Mistake("a table has one row a position, (n_ctx, d): slice the rows, W_pos[offset : offset + n], "
                      "not the columns", variant=lambda n, W_pos, offset=0: W_pos[:, offset:offset + n]),
              Mistake("offset + n = n_ctx still fits: the last position, offset + n − 1, is the table's last row; "
                      "refuse only offset + n > W_pos.shape[0]", tag="full"),
              Mistake("check the range first: when offset + n > W_pos.shape[0] no row holds the last positions, "
                      "and a slice past the end quietly returns fewer rows: raise ValueError naming the numbers",
                      tag="refuse")])


# an angle's error is a rotation's error whatever the angle's size: 1e-9 radian, where float32 arithmetic at
# position 8191 leaves 2e-4 (float64 in another order of operations: 1e-12)
ANGLE_TOL = Tolerance((0.0, 1e-9))


def angle_cases():
    return [Case("positions 0 … 5, d_h=8", (np.arange(6), 8)),
            Case("positions 0, 5, 100, 8191, d_h=64 (SmolLM2's head size and context)",
                 (np.array([0, 5, 100, 8191]), 64), tags=frozenset({"far"}), tol=ANGLE_TOL),
            Case("base=100000 given (SmolLM2's θ base), positions 0 … 3, d_h=16", (np.arange(4), 16),
                 {"base": 100000.0}, frozenset({"base"})),
            Case("one decode position, 17, d_h=4", (np.array([17]), 4)),
            Case("positions as floats, 0.5 and 2.0, d_h=6", (np.array([0.5, 2.0]), 6), tags=frozenset({"float"}))]


def _angles(exponent):
    """rope_angles with a slip in the exponent of base: exponent(i, d_h), i the pair index."""
    def angles(positions, d_h, base=10000.0):
        i = np.arange(d_h // 2, dtype=np.float64)
        return np.asarray(positions, np.float64)[:, None] * base ** exponent(i, d_h)
    return angles


ROPE_ANGLES = Spec(
    "rope_angles", rope_angles, angle_cases, "transformer/core/positions.py", dims=("n", "d_h/2"),
    dtype_rule="the angles are float64: np.asarray(positions, dtype=np.float64) before the product, as the package "
               "computes RoPE's cos and sin in float64 and casts them after",
    mistakes=[Mistake("the exponent is −2i/d_h with i the pair index (0, 1, … d_h/2 − 1), or −j/d_h with j the even "
                      "column (0, 2, 4 …): not −i/d_h", variant=_angles(lambda i, d: -i / d)),
              Mistake("the frequencies fall from pair to pair: base^(−2i/d_h), a negative exponent (pair 0 turns by m "
                      "radians a position, the last pair slowest)", variant=_angles(lambda i, d: 2 * i / d)),
              Mistake("compute the angles in float64: in float32, position 8191 times a frequency near 1 keeps only "
                      "7 digits, an error of 2e-4 radian in where the pair points (np.asarray(positions, "
                      "dtype=np.float64))", tag="far"),
              Mistake("one angle per pair: d_h/2 columns, θ_{m,i} for i = 0 … d_h/2 − 1 (np.arange(0, d_h, 2) / d_h)",
                      raises=r"broadcast"),
              Mistake("use the `base` argument: SmolLM2 turns with base 100,000", tag="base")])


def rope_cases():
    r = _rng(21)
    cos, sin = rope_cos_sin(np.arange(5), 8, dtype=np.float64)
    cos3, sin3 = rope_cos_sin(np.arange(10, 13), 4, dtype=np.float64)
    return [Case("x (2, 3, 5, 8): b=2, h=3, n=5, d_h=8", (r.standard_normal((2, 3, 5, 8)), cos, sin)),
            Case("positions 10, 11, 12, d_h=4", (r.standard_normal((1, 1, 3, 4)), cos3, sin3))]


def _rotated_backwards(rope):  # the rotation by −θ
    return lambda x, cos, sin: rope(x, cos, -sin)


def _rope_evens_then_odds(x, cos, sin):  # the rotated pairs put back as [all evens | all odds]
    xe, xo = x[..., 0::2], x[..., 1::2]
    return np.concatenate([xe * cos - xo * sin, xe * sin + xo * cos], axis=-1)


def _rope_halves_interleaved(x, cos, sin):  # halves paired (the half layout's pairs), written to columns 2i, 2i+1
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).reshape(x.shape)


def _rope_widened(layout, widen):
    """x·cos + rotate(x)·sin with cos and sin widened to d_h columns by `widen` (the other layout's order)."""
    def rope(x, cos, sin):
        c, s_ = widen(cos), widen(sin)
        if layout == "half":
            half = x.shape[-1] // 2
            rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        else:
            rot = np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)
        return x * c + rot * s_
    return rope


def _rope_overwritten(x, cos, sin):  # x_2i overwritten by its rotation before x_2i+1's formula reads it
    out = x.copy()
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = out[..., 0::2] * sin + x[..., 1::2] * cos
    return out


SWAPPED_COS_SIN = ("sin and cos swapped: the rotation by θ is x·cos θ − y·sin θ, x·sin θ + y·cos θ (cos on the part "
                   "that stays, sin on the part that turns in)")


ROPE_DIMS = ("b", "h", "n", "d_h")
ROPE_HALF = Spec(
    "apply_rope_half", apply_rope_half, rope_cases, "transformer/core/positions.py", dims=ROPE_DIMS,
    mistakes=[Mistake("this is the interleaved layout, pairs (x_2i, x_2i+1); the half layout pairs x_i with "
                      "x_{i + d_h/2}: split the last axis into two halves", variant=apply_rope_interleaved),
              Mistake("the rotation goes the wrong way: first half x1·cos − x2·sin, second half x1·sin + x2·cos",
                      variant=_rotated_backwards(apply_rope_half)),
              Mistake("the half layout pairs x_i with x_{i + d_h/2}: x1, x2 = x[..., :d_h/2], x[..., d_h/2:], not the "
                      "even and odd columns", variant=_rope_evens_then_odds),
              Mistake("in the half layout cos and sin widen as [θ_0 … θ_{d/2−1}, θ_0 … θ_{d/2−1}] "
                      "(np.concatenate([cos, cos], -1)), not each angle twice in a row (np.repeat)",
                      variant=_rope_widened("half", lambda c: np.repeat(c, 2, axis=-1))),
              Mistake(SWAPPED_COS_SIN, variant=lambda x, cos, sin: apply_rope_half(x, sin, cos))])
ROPE_INTERLEAVED = Spec(
    "apply_rope_interleaved", apply_rope_interleaved, rope_cases, "transformer/core/positions.py", dims=ROPE_DIMS,
    mistakes=[Mistake("this is the half layout, pairs (x_i, x_{i + d_h/2}); the interleaved layout pairs "
                      "neighbours (x_2i, x_2i+1): x[..., 0::2] and x[..., 1::2]", variant=apply_rope_half),
              Mistake("the rotation goes the wrong way: out_2i = x_2i·cos − x_2i+1·sin, out_2i+1 = x_2i·sin + "
                      "x_2i+1·cos", variant=_rotated_backwards(apply_rope_interleaved)),
              Mistake("the rotated pairs go back where they came from, pair i to columns 2i and 2i+1: stack the two "
                      "halves on a new last axis and reshape (np.stack([...], axis=-1).reshape(x.shape)), not "
                      "np.concatenate, which puts every even column first", variant=_rope_evens_then_odds),
              Mistake("the interleaved layout pairs neighbours (x_2i, x_2i+1): read them as x[..., 0::2] and "
                      "x[..., 1::2], not as the two halves", variant=_rope_halves_interleaved),
              Mistake("in the interleaved layout each angle covers two neighbouring columns: widen cos and sin with "
                      "np.repeat(cos, 2, axis=-1), not np.tile", variant=_rope_widened("interleaved", lambda c: np.tile(
                          c, 2))),
              Mistake("x_2i is overwritten before the second formula reads it: x1 = out[..., 0::2] is a view of the "
                      "array you write, so compute both rotated columns from x before writing (or take copies)",
                      variant=_rope_overwritten),
              Mistake(SWAPPED_COS_SIN, variant=lambda x, cos, sin: apply_rope_interleaved(x, sin, cos))])


# --- lesson 04: heads -------------------------------------------------------------------------
def split_cases():
    r = _rng(41)
    return [Case("x (2, 5, 12) into h=3 heads of d_h=4", (r.standard_normal((2, 5, 12)), 3)),
            Case("x (1, 4, 8) into h=2 heads", (r.standard_normal((1, 4, 8)), 2)),
            Case("x (3, 2, 6) into h=1 head", (r.standard_normal((3, 2, 6)), 1)),
            Case("x (1, 3, 10) into h=4 heads: d=10 does not divide", (r.standard_normal((1, 3, 10)), 4),
                 tags=frozenset({"refuse"}), refuses=ValueError, names=(10,),
                 refusal="d=10 features do not split into h=4 heads of the same size")]


def merge_cases():
    r = _rng(42)
    return [Case("x (2, 3, 5, 4): b=2, h=3, n=5, d_h=4", (r.standard_normal((2, 3, 5, 4)),)),
            Case("x (1, 2, 4, 4)", (r.standard_normal((1, 2, 4, 4)),))]


def _split_reshape_only(x, h):
    b, n, d = x.shape
    return x.reshape(b, h, n, d // h)


def _merge_reshape_only(x):
    b, h, n, d_h = x.shape
    return x.reshape(b, n, h * d_h)


SPLIT_HEADS = Spec(
    "split_heads", split_heads, split_cases, "transformer/core/heads.py", dims=("b", "h", "n", "d_h"),
    mistakes=[Mistake("reshape alone mixes positions into heads: reshape to (b, n, h, d_h) first, then swap the n "
                      "and h axes (.swapaxes(1, 2))", variant=_split_reshape_only),
              Mistake("check first that h divides d (d % h == 0) and raise ValueError naming d and h: NumPy's "
                      "reshape error names neither", tag="refuse")])
MERGE_HEADS = Spec(
    "merge_heads", merge_heads, merge_cases, "transformer/core/heads.py", dims=("b", "n", "d"),
    mistakes=[Mistake("reshape alone mixes heads into positions: swap h and n back first (.swapaxes(1, 2)), then "
                      "reshape to (b, n, h·d_h)", variant=_merge_reshape_only)])


def attention_weights(r, d, h, h_kv, d_h, d_c=None, bias=False):
    """Random AttentionWeights for the cases: W_q (d, h·d_h), W_k and W_v (d_c, h_kv·d_h), W_o (h·d_h, d), biases
    (scale 0.1) when bias."""
    d_c = d if d_c is None else d_c
    m = lambda *s: r.standard_normal(s) / np.sqrt(s[0])  # noqa: E731
    b = (lambda n: r.standard_normal(n) * 0.1) if bias else (lambda n: None)
    return AttentionWeights(m(d, h * d_h), m(d_c, h_kv * d_h), m(d_c, h_kv * d_h), m(h * d_h, d),
                            b(h * d_h), b(h_kv * d_h), b(h_kv * d_h), b(d))


def mha_cases():
    r = _rng(43)
    x = lambda b, n, d: r.standard_normal((b, n, d))  # noqa: E731
    w = attention_weights
    return [
        Case("MHA: b=2, n=5, d=12, h=3", (x(2, 5, 12), w(r, 12, 3, 3, 4), 3)),
        Case("GQA: h=4, h_kv=2, causal", (x(1, 6, 16), w(r, 16, 4, 2, 4), 4, 2), {"mask": causal_mask(6)},
             frozenset({"gqa", "mask"})),
        Case("with biases b_q, b_k, b_v, b_o", (x(2, 3, 8), w(r, 8, 2, 2, 4, bias=True), 2),
             tags=frozenset({"bias"})),
        Case("cross-attention: context (b, n_k=7, d_c=6)", (x(1, 4, 8), w(r, 8, 2, 2, 4, d_c=6), 2),
             {"context": r.standard_normal((1, 7, 6))}, frozenset({"context"})),
        Case("return_weights=True", (x(1, 3, 8), w(r, 8, 2, 2, 4), 2), {"return_weights": True},
             frozenset({"weights"})),
        Case("a causal mask, h_kv = h = 2", (x(2, 4, 8), w(r, 8, 2, 2, 4), 2), {"mask": causal_mask(4)},
             frozenset({"mask"})),
    ]


def _mha_tiled(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):  # K/V heads as 0, 1, 0, 1
    h_kv = h if h_kv is None else h_kv
    c = x if context is None else context
    q = split_heads(linear(x, w.W_q, w.b_q), h)
    k, v = (np.tile(split_heads(linear(c, W, b), h_kv), (1, h // h_kv, 1, 1)) for W, b in ((w.W_k, w.b_k), (w.W_v, w.b_v)))
    res = scaled_dot_product_attention(q, k, v, mask, return_weights=return_weights)
    o, p = res if return_weights else (res, None)
    out = linear(merge_heads(o), w.W_o, w.b_o)
    return (out, p) if return_weights else out


def _mha_no_wo(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):
    h_kv = h if h_kv is None else h_kv
    c = x if context is None else context
    q, k, v = split_heads(linear(x, w.W_q, w.b_q), h), split_heads(linear(c, w.W_k, w.b_k), h_kv), \
        split_heads(linear(c, w.W_v, w.b_v), h_kv)
    res = scaled_dot_product_attention(q, k, v, mask, return_weights=return_weights)
    o, p = res if return_weights else (res, None)
    return (merge_heads(o), p) if return_weights else merge_heads(o)


def _mha_scaled_twice(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):  # q / √d_h, then SDPA
    d_h = w.W_q.shape[1] // h
    w2 = dataclasses.replace(w, W_q=w.W_q / np.sqrt(d_h), b_q=None if w.b_q is None else w.b_q / np.sqrt(d_h))
    return multi_head_attention(x, w2, h, h_kv, mask=mask, context=context, return_weights=return_weights)


def _mha_wo_transposed(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):  # W_o is d × d here
    return multi_head_attention(x, dataclasses.replace(w, W_o=w.W_o.T), h, h_kv, mask=mask, context=context,
                                return_weights=return_weights)


MHA = Spec(
    "multi_head_attention", multi_head_attention, mha_cases, "transformer/core/heads.py",
    dims=("b", "n", "d"), tuple_dims=(("b", "n", "d"), ("b", "h", "n", "n_k")), tuple_names=("out", "weights"),
    mistakes=[Mistake("the heads' outputs must be merged and projected: out = merge_heads(o) @ W_o (+ b_o)",
                      variant=_mha_no_wo),
              Mistake("the K/V heads are repeated in the order 0, 1, 0, 1: query head i reads K/V head i // (h / h_kv), "
                      "so repeat each head h / h_kv times in a row (np.repeat(k, h // h_kv, axis=1), not np.tile)",
                      variant=_mha_tiled),
              Mistake("only the cases with h_kv < h fail: K and V have h_kv heads (split k and v into h_kv, not h)",
                      tag="gqa"),
              Mistake("only the masked cases fail: pass mask= on to the attention", tag="mask"),
              Mistake("the scores are scaled once: scaled_dot_product_attention divides by √d_h already, so do not "
                      "divide q too", variant=_mha_scaled_twice),
              Mistake("W_o is (h·d_h, d): merged heads @ W_o as it is, not W_o.T", variant=_mha_wo_transposed),
              Mistake("add each bias (b_q, b_k, b_v, b_o) when it is not None", tag="bias"),
              Mistake("with context given (cross-attention), K and V come from context, Q from x", tag="context"),
              Mistake("with return_weights=True return (out, weights (b, h, n, n_k))", tag="weights")])


# --- lesson 05: masks -------------------------------------------------------------------------
def causal_cases():
    return [Case("n_q=4", (4,)), Case("n_q=3 new queries after 2 cached keys: n_k=5", (3, 5),
                                      tags=frozenset({"offset"})),
            Case("one decode row: n_q=1, n_k=6", (1, 6), tags=frozenset({"offset"})),
            Case("n_q=3, n_k=5, offset=0 given", (3, 5, 0), tags=frozenset({"offset-given"})),
            Case("n_q=3, xp= a namespace to build it with", (3,), {"xp": NotingNamespace()}, frozenset({"xp"}))]


def _positions(n_q, n_k, offset):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q if offset is None else offset
    return np.arange(n_q)[:, None] + offset, np.arange(n_k)[None, :]


def _causal_variant(rule, ignore_offset=False):
    def variant(n_q, n_k=None, offset=None, *, xp=None):
        i, j = _positions(n_q, n_k, 0 if ignore_offset else offset)
        return rule(i, j)
    return variant


MASK_DIMS = ("n_q", "n_k")
CAUSAL_MASK = Spec(
    "causal_mask", causal_mask, causal_cases, "transformer/core/masks.py", dims=MASK_DIMS,
    mistakes=[Mistake("the diagonal: a token may attend to itself, so key j ≤ i (not j < i)",
                      variant=_causal_variant(lambda i, j: j < i)),
              Mistake("mask polarity: True means 'may attend' — the allowed keys are j ≤ i",
                      variant=_causal_variant(lambda i, j: j > i)),
              Mistake("the triangle is the wrong way round: query i sees the keys before it and itself, j ≤ i "
                      "(np.tril keeps those; np.triu keeps the keys after it)",
                      variant=_causal_variant(lambda i, j: j >= i)),
              Mistake("with n_k > n_q the queries are the LAST n_q positions: query i sits at i + offset, "
                      "offset = n_k − n_q by default", variant=_causal_variant(lambda i, j: j <= i, True)),
              Mistake("with n_k > n_q the queries are the LAST n_q positions (offset = n_k − n_q by default)",
                      tag="offset"),
              Mistake("use the `offset` argument when it is given", tag="offset-given")])


def padding_cases():
    return [Case("lengths [3, 5]", (np.array([3, 5]),)),
            Case("lengths [2, 4] padded to n=6", (np.array([2, 4]), 6), tags=frozenset({"n"})),
            Case("one sequence of length 1", (np.array([1]),)),
            Case("lengths as a Python list [4, 1, 2]", ([4, 1, 2],), tags=frozenset({"list"})),
            Case("lengths as a list [2, 3], xp= a namespace to build it with", ([2, 3],), {"xp": NotingNamespace()},
                 frozenset({"xp", "list"}))]


def _padding_one_more(lengths, n=None, *, xp=None):  # j ≤ length: the first padded key counted as real
    lengths = np.asarray(lengths)
    n = int(lengths.max()) if n is None else n
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


PADDING_MASK = Spec(
    "padding_mask", padding_mask, padding_cases, "transformer/core/masks.py", dims=("b", "1", "1", "n"),
    mistakes=[Mistake("mask polarity: True marks a real key (j < length), False a padded one",
                      variant=lambda lengths, n=None, *, xp=None: ~padding_mask(lengths, n)),
              Mistake("one key too many: the real keys of a sequence of length 3 are 0, 1, 2, so j < length, "
                      "not j ≤ length", variant=_padding_one_more),
              Mistake("return shape (b, 1, 1, n) so the mask broadcasts over heads and queries: keep[:, None, None, :]",
                      variant=lambda lengths, n=None, *, xp=None: padding_mask(lengths, n)[:, 0, 0, :]),
              Mistake("use the `n` argument as the padded length when given (default: the longest)", tag="n"),
              Mistake("lengths may be a Python list: make it an array first (np.asarray(lengths))", tag="list"),
              Mistake("lengths may be a Python list: make it an array first (np.asarray(lengths))",
                      raises=r"list|tuple index|not supported between", tag="list")])


def window_cases():
    return [Case("n_q=6, w=3", (6, 3)), Case("n_q=6, w=1 (only itself)", (6, 1)),
            Case("w=10 ≥ n: the plain causal mask", (5, 10)),
            Case("decode: n_q=2 after 6 cached keys (n_k=8), w=3", (2, 3, 8), tags=frozenset({"offset"})),
            Case("causal=False: a band |i − j| < w", (6, 2), {"causal": False}, frozenset({"band"})),
            Case("causal=False, w=3: a band 5 keys wide", (7, 3), {"causal": False}, frozenset({"band"})),
            Case("n_q=4, w=2, xp= a namespace to build it with", (4, 2), {"xp": NotingNamespace()}, frozenset({"xp"}))]


def _window_variant(rule):
    def variant(n_q, w, n_k=None, offset=None, *, causal=True, xp=None):
        i, j = _positions(n_q, n_k, offset)
        return rule(i, j, w) if causal else np.abs(i - j) < w
    return variant


def _window_centred(n_q, w, n_k=None, offset=None, *, causal=True, xp=None):  # causal=False as |i − j| ≤ w // 2
    if causal:
        raise ValueError("the slip is in the band alone")  # a variant that cannot run on a case says nothing
    i, j = _positions(n_q, n_k, offset)
    return np.abs(i - j) <= w // 2


SLIDING_WINDOW_MASK = Spec(
    "sliding_window_mask", sliding_window_mask, window_cases, "transformer/core/masks.py", dims=MASK_DIMS,
    mistakes=[Mistake("the window holds w keys, the query itself included: i − w < j ≤ i",
                      variant=_window_variant(lambda i, j, w: (j <= i) & (j >= i - w))),
              Mistake("the window holds w keys, the query itself included: i − w < j ≤ i (not j < i)",
                      variant=_window_variant(lambda i, j, w: (j < i) & (j > i - w - 1))),
              Mistake("the queries are the last n_q positions: query i sits at i + offset, offset = n_k − n_q",
                      tag="offset"),
              Mistake("causal=False is a band of w keys on each side of the query, itself counted once: |i − j| < w, "
                      "2w − 1 keys in all (not a window of w keys centred on it)",
                      variant=_window_centred),
              Mistake("causal=False is a band around the query: |i − j| < w", tag="band")])
