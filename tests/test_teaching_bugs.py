"""Bugs that other teaching implementations of the Transformer shipped, pinned here as property tests.

Each property is checked on random small shapes (hypothesis) against torch, in float64:
- (a) boolean mask polarity: True = may attend, as torch SDPA's boolean attn_mask;
- (b) causal alignment when the queries are fewer than the keys: bottom-right (the queries are the
  last positions, as with a KV cache), torch's `causal_lower_right`; cached attention after a
  prefill, in chunks of any size, equals full causal attention's last rows;
- (c) a sliding window across the cache boundary when several new tokens arrive at once;
- (d) a paged cache whose sequence ends exactly on a block boundary (and the token after it);
- (e) RoPE's sign and layout: rotate-half equals HF's `apply_rotary_pos_emb`, interleaved equals
  the complex-number form (Meta's `torch.polar`), and q·k after RoPE depends only on m - n.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import transformer as T

torch = pytest.importorskip("torch")
from torch.nn.attention.bias import causal_lower_right, causal_upper_left  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None)
TOL = dict(rtol=1e-10, atol=1e-12)  # float64 on both sides: only rounding differs


def randn(rng, *shape):
    return rng.standard_normal(shape)  # float64


def torch_sdpa(q, k, v, mask=None):  # [b, h, n_q, d_h], [b, h_kv, n_k, d_h] × 2, bool [.., n_q, n_k] -> [b, h, n_q, d_h]
    """The reference: torch's SDPA (boolean mask: True = takes part), GQA by repeating KV heads."""
    q, k, v = (torch.from_numpy(a) for a in (q, k, v))
    n_rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # query head i reads KV head i // n_rep
    m = None if mask is None else (mask if isinstance(mask, torch.Tensor) else torch.from_numpy(np.asarray(mask)))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m).numpy()


@st.composite
def heads(draw):  # -> (b, h, h_kv, d_h) with h_kv ∈ {h, a divisor, 1}
    h_kv = draw(st.integers(1, 3))
    return draw(st.integers(1, 2)), h_kv * draw(st.integers(1, 3)), h_kv, draw(st.sampled_from([2, 4, 8]))


# ---------------------------------------------------------------- (a) mask polarity

@SETTINGS
@given(heads(), st.integers(1, 7), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_boolean_mask_true_means_may_attend_as_in_torch(shape, n_q, n_k, seed):
    """A random "may attend" mask (every row keeps one key at least) gives torch's output for the
    same boolean attn_mask; the negated mask is a different attention (polarity matters)."""
    b, h, h_kv, d_h = shape
    rng = np.random.default_rng(seed)
    q, k, v = randn(rng, b, h, n_q, d_h), randn(rng, b, h_kv, n_k, d_h), randn(rng, b, h_kv, n_k, d_h)
    mask = rng.random((b, h, n_q, n_k)) < 0.5
    mask[..., rng.integers(n_k)] = True  # torch gives NaN for a row with no key; ours zeros (tested elsewhere)
    np.testing.assert_allclose(T.scaled_dot_product_attention(q, k, v, mask), torch_sdpa(q, k, v, mask), **TOL)
    additive = torch.where(torch.from_numpy(mask), 0.0, -torch.inf).double()  # the float form: 0 keeps, -inf drops
    np.testing.assert_allclose(T.scaled_dot_product_attention(q, k, v, mask), torch_sdpa(q, k, v, additive), **TOL)


# ---------------------------------------------------------------- (b) causal alignment, KV cache

@SETTINGS
@given(st.integers(1, 12), st.integers(0, 12))
def test_causal_mask_is_bottom_right_when_queries_are_fewer(n_q, extra):
    """causal_mask(n_q, n_k): the n_q queries are the last positions (torch's causal_lower_right);
    offset=0 puts them first (torch's causal_upper_left, what is_causal=True does)."""
    n_k = n_q + extra
    assert np.array_equal(T.causal_mask(n_q, n_k), causal_lower_right(n_q, n_k)._materialize().numpy())
    assert np.array_equal(T.causal_mask(n_q, n_k, offset=0), causal_upper_left(n_q, n_k)._materialize().numpy())
    assert T.causal_mask(1, n_k).all()  # the single decode row sees every key, itself included


@st.composite
def chunks(draw, max_n=14):  # -> token counts of a prefill and the decode calls after it, each ≥ 1
    n = draw(st.integers(2, max_n))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), min_size=1, max_size=4)))
    return [e - s for s, e in zip([0] + cuts, cuts + [n])]


def cached_attention(q, k, v, sizes, mask_for):  # -> [b, h, n, d_h]: chunk by chunk through a KVCache
    """Feed the sequence to a KVCache in chunks of `sizes` tokens (prefill, then several at once);
    each chunk's queries attend to every key stored so far through mask_for(t, n_k)."""
    b, h_kv, n, d_h = k.shape
    cache = T.KVCache(1, b, h_kv, n, d_h, dtype=np.float64)
    outs, start = [], 0
    for t in sizes:
        K, V = cache.update(0, k[:, :, start:start + t], v[:, :, start:start + t])  # [b, h_kv, start + t, d_h]
        cache.advance(t)
        outs.append(T.scaled_dot_product_attention(q[:, :, start:start + t], K, V, mask_for(t, start + t)))
        start += t
    return np.concatenate(outs, axis=2)


@SETTINGS
@given(heads(), chunks(), st.integers(0, 2**32 - 1))
def test_kv_cache_in_chunks_equals_full_causal_attention(shape, sizes, seed):
    """Prefill, then decode t ≥ 1 tokens at a time with the cache: every chunk's rows equal the
    rows of full causal attention over the whole sequence (torch, is_causal on the square)."""
    b, h, h_kv, d_h = shape
    n = sum(sizes)
    rng = np.random.default_rng(seed)
    q, k, v = randn(rng, b, h, n, d_h), randn(rng, b, h_kv, n, d_h), randn(rng, b, h_kv, n, d_h)
    want = torch_sdpa(q, k, v, np.tril(np.ones((n, n), dtype=bool)))
    np.testing.assert_allclose(cached_attention(q, k, v, sizes, lambda t, n_k: T.causal_mask(t, n_k)), want, **TOL)


# ---------------------------------------------------------------- (c) sliding window across the cache boundary

@SETTINGS
@given(heads(), chunks(), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_sliding_window_across_the_cache_boundary(shape, sizes, w, seed):
    """Several new tokens at once with a window of w: query i sees keys i - w < j ≤ i, also where the
    window reaches back past the chunk into the cache; equal to full sliding-window attention."""
    b, h, h_kv, d_h = shape
    n = sum(sizes)
    rng = np.random.default_rng(seed)
    q, k, v = randn(rng, b, h, n, d_h), randn(rng, b, h_kv, n, d_h), randn(rng, b, h_kv, n, d_h)
    ones = torch.ones(n, n, dtype=torch.bool)
    band = ones.tril() & ~ones.tril(-w)  # j ≤ i and not j ≤ i - w
    want = torch_sdpa(q, k, v, band)
    got = cached_attention(q, k, v, sizes, lambda t, n_k: T.sliding_window_mask(t, w, n_k))
    np.testing.assert_allclose(got, want, **TOL)


# ---------------------------------------------------------------- (d) paged cache on a block boundary

@SETTINGS
@given(st.integers(1, 3), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 3, 4]), st.integers(1, 4),
       st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_paged_cache_ending_on_a_block_boundary_equals_contiguous(h_kv, n_rep, bs, n_blocks, n_q, seed):
    """A sequence of exactly n_blocks·block_size tokens, written in two parts while a second sequence
    takes blocks in between (so its table is not 0, 1, 2, …): paged attention of its last n_q queries
    equals torch's attention on the contiguous K, V (bottom-right causal), and so does the token
    after the boundary, which needs a new block."""
    h, d_h = h_kv * n_rep, 4
    n = n_blocks * bs  # ends exactly on a block boundary
    n_q = min(n_q, n)
    rng = np.random.default_rng(seed)
    k, v = randn(rng, h_kv, n + 1, d_h), randn(rng, h_kv, n + 1, d_h)
    q = randn(rng, h, n + 1, d_h)
    cache = T.PagedKVCache(1, 1, h_kv, n + 1 + 2 * bs, d_h, block_size=bs, n_blocks=2 * (n_blocks + 2),
                           dtype=np.float64)
    seq, other = cache.batch[0], cache.add_sequence()
    first = int(rng.integers(1, n + 1))  # the first part: any length, the second part ends on the boundary
    for lo, hi in ((0, first), (first, n)):
        if hi > lo:
            cache.write(seq, 0, k[:, lo:hi], v[:, lo:hi])
            cache.extend(seq, hi - lo)
        cache.write(other, 0, randn(rng, h_kv, bs, d_h), randn(rng, h_kv, bs, d_h))  # a block for the other
        cache.extend(other, bs)
    assert len(cache.tables[seq]) == n_blocks  # no block taken beyond the boundary
    for length in (n, n + 1):
        if length == n + 1:  # the next token opens a new block
            cache.write(seq, 0, k[:, n:], v[:, n:])
            cache.extend(seq, 1)
        got = T.paged_attention(q[:, length - n_q:length], cache.k[0], cache.v[0], cache.tables[seq], length)
        mask = causal_lower_right(n_q, length)._materialize()
        want = torch_sdpa(q[None, :, length - n_q:length], k[None, :, :length], v[None, :, :length], mask)[0]
        np.testing.assert_allclose(got, want, **TOL)
        K, V = cache.gather(seq, 0)  # read back through the table: the contiguous arrays, exactly
        assert np.array_equal(K, k[:, :length]) and np.array_equal(V, v[:, :length])


# ---------------------------------------------------------------- (e) RoPE: sign and layout

def torch_angles(positions, d_h, base):  # -> [n, d_h/2] float64: θ_{m,i} = m · base^(-2i/d_h)
    inv_freq = 1.0 / base ** (torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)
    return torch.outer(torch.as_tensor(positions, dtype=torch.float64), inv_freq)


rope_cases = st.tuples(st.integers(1, 6), st.sampled_from([2, 4, 8, 16]), st.sampled_from([10000.0, 500000.0]),
                       st.integers(0, 2**32 - 1))


@SETTINGS
@given(rope_cases)
def test_rope_half_equals_hf_apply_rotary_pos_emb(case):
    """Rotate-half RoPE (HF checkpoints) = HF's apply_rotary_pos_emb with cos, sin = [cos θ, cos θ], [sin θ, sin θ]."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    n, d_h, base, seed = case
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.choice(4096, size=n, replace=False))
    x = randn(rng, 2, 3, n, d_h)  # [b, h, n, d_h]
    cos, sin = T.rope_cos_sin(positions, d_h, base, dtype=np.float64)  # [n, d_h/2] each
    a = torch_angles(positions, d_h, base)
    emb = torch.cat([a, a], dim=-1)[None]  # [1, n, d_h], as LlamaRotaryEmbedding returns it
    xt = torch.from_numpy(x)
    want, _ = apply_rotary_pos_emb(xt, xt, emb.cos(), emb.sin())
    np.testing.assert_allclose(T.apply_rope_half(x, cos, sin), want.numpy(), rtol=1e-9, atol=1e-9)


@SETTINGS
@given(rope_cases)
def test_rope_interleaved_equals_the_complex_form(case):
    """Interleaved RoPE = (x_{2i} + i·x_{2i+1}) · e^{iθ} (Meta's torch.polar form), and the two layouts
    are the same rotation up to the permutation of the dimensions."""
    n, d_h, base, seed = case
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.choice(4096, size=n, replace=False))
    x = randn(rng, 3, n, d_h)  # [h, n, d_h]
    cos, sin = T.rope_cos_sin(positions, d_h, base, dtype=np.float64)
    a = torch_angles(positions, d_h, base)
    z = torch.view_as_complex(torch.from_numpy(x).reshape(3, n, d_h // 2, 2).contiguous())  # [h, n, d_h/2]
    want = torch.view_as_real(z * torch.polar(torch.ones_like(a), a)).reshape(3, n, d_h)
    got = T.apply_rope_interleaved(x, cos, sin)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-9, atol=1e-9)
    p = T.interleaved_to_half_permutation(d_h)
    np.testing.assert_allclose(T.apply_rope_half(x[..., p], cos, sin), got[..., p], rtol=1e-12, atol=1e-12)


@SETTINGS
@given(st.sampled_from(["interleaved", "half"]), st.sampled_from([2, 4, 8, 16]), st.integers(0, 2000),
       st.integers(0, 2000), st.integers(-500, 500), st.integers(0, 2**32 - 1))
def test_rope_score_depends_only_on_the_position_difference(layout, d_h, m, n, shift, seed):
    """⟨RoPE(q, m), RoPE(k, n)⟩ = Re Σ_i q_i · conj(k_i) · e^{i(m - n)θ_i} (pairs as complex numbers):
    the same for (m + s, n + s), and with the sign of m - n that the complex form gives."""
    shift = max(shift, -min(m, n))  # positions stay ≥ 0
    rng = np.random.default_rng(seed)
    q, k = randn(rng, 1, d_h), randn(rng, 1, d_h)
    rope = T.apply_rope_interleaved if layout == "interleaved" else T.apply_rope_half

    def score(pm, pn):
        cq, sq = T.rope_cos_sin(np.array([pm]), d_h, dtype=np.float64)
        ck, sk = T.rope_cos_sin(np.array([pn]), d_h, dtype=np.float64)
        return float((rope(q, cq, sq) @ rope(k, ck, sk).T)[0, 0])

    half = d_h // 2
    if layout == "interleaved":
        zq, zk = q[0, 0::2] + 1j * q[0, 1::2], k[0, 0::2] + 1j * k[0, 1::2]
    else:
        zq, zk = q[0, :half] + 1j * q[0, half:], k[0, :half] + 1j * k[0, half:]
    theta = 10000.0 ** (-np.arange(0, d_h, 2) / d_h)
    want = float(np.real(np.sum(zq * np.conj(zk) * np.exp(1j * (m - n) * theta))))
    scale = float(np.abs(q).sum() * np.abs(k).sum())  # a bound on the terms summed: tolerance relative to it
    assert score(m, n) == pytest.approx(want, abs=1e-9 * scale)
    assert score(m + shift, n + shift) == pytest.approx(want, abs=1e-9 * scale)
