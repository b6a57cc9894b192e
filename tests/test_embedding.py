"""Embeddings, the LM head and positional encodings against hand formulas, torch and HF's RoPE."""
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import transformer as T
from conftest import asarray

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_embed_equals_torch_embedding(xp, rng):
    W = rng.standard_normal((11, 6))
    ids = np.array([[0, 3, 10], [5, 5, 1]])
    ours = T.to_numpy(T.embed(asarray(xp, ids), asarray(xp, W)))  # (b, n) -> (b, n, d)
    ref = torch.nn.functional.embedding(torch.from_numpy(ids), torch.from_numpy(W)).numpy()
    assert ours.shape == (2, 3, 6)
    np.testing.assert_array_equal(ours, ref)


def test_embed_bad_ids():
    W = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"\[0, 5\).*max 7"):
        T.embed(np.array([[1, 7]]), W)
    with pytest.raises(TypeError, match="integers.*float64"):
        T.embed(np.array([[1.0]]), W)


def test_lm_head_tied_and_untied_equal_torch_linear(xp, rng):
    W_E = rng.standard_normal((11, 6))
    x = rng.standard_normal((2, 3, 6))
    tied = T.to_numpy(T.lm_head(asarray(xp, x), asarray(xp, W_E)))  # (b, n, d) -> (b, n, v)
    ref = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(W_E)).numpy()
    np.testing.assert_allclose(tied, ref, rtol=1e-12)
    W_out = rng.standard_normal((6, 11))
    untied = T.to_numpy(T.lm_head(asarray(xp, x), W_out=asarray(xp, W_out)))
    np.testing.assert_allclose(untied, x @ W_out, rtol=1e-12)
    with pytest.raises(ValueError, match="exactly one"):
        T.lm_head(asarray(xp, x))


def test_sinusoidal_table_at_hand_computed_positions(xp):
    d = 8
    pe = T.to_numpy(T.sinusoidal_positions(50, d, xp=xp, dtype=xp.float64))
    for pos, i in [(0, 0), (1, 0), (7, 1), (49, 3), (13, 2)]:
        w = 1 / 10000 ** (2 * i / d)
        assert pe[pos, 2 * i] == pytest.approx(math.sin(pos * w), abs=1e-12)
        assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(pos * w), abs=1e-12)
    assert T.sinusoidal_positions(4, 6, xp=xp).dtype == xp.float32
    with pytest.raises(ValueError, match="d=5"):
        T.sinusoidal_positions(4, 5)


def test_learned_positions_are_table_rows(rng):
    W = rng.standard_normal((10, 4))
    np.testing.assert_array_equal(T.learned_positions(3, W, offset=2), W[2:5])
    with pytest.raises(ValueError, match="exceed the table's 10 rows"):
        T.learned_positions(5, W, offset=7)


def _complex_rope(x, positions, base):
    """Note 001's complex form in torch: view pairs as complex, multiply by e^{iθ}."""
    d_h = x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)
    angles = torch.outer(torch.as_tensor(positions, dtype=torch.float64), freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(torch.from_numpy(x).reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * freqs_cis).reshape(x.shape).numpy()


def test_rope_interleaved_equals_complex_multiplication(xp, rng):
    x = rng.standard_normal((2, 3, 5, 8))  # (b, h, n, d_h)
    pos = np.arange(5) + 4
    cos, sin = T.rope_cos_sin(asarray(xp, pos), 8, base=100.0, dtype=xp.float64)
    ours = T.to_numpy(T.apply_rope_interleaved(asarray(xp, x), cos, sin))
    np.testing.assert_allclose(ours, _complex_rope(x, pos, 100.0), rtol=1e-12, atol=1e-12)


def test_rope_half_equals_hf_llama_rotary(xp, rng):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    x = rng.standard_normal((1, 2, 6, 16))
    pos = np.arange(6)
    cos, sin = T.rope_cos_sin(asarray(xp, pos), 16, base=10000.0, dtype=xp.float64)
    ours = T.to_numpy(T.apply_rope_half(asarray(xp, x), cos, sin))
    c, s = T.to_numpy(cos), T.to_numpy(sin)
    cos_hf = torch.from_numpy(np.concatenate([c, c], -1))[None]  # HF repeats the table over both halves
    sin_hf = torch.from_numpy(np.concatenate([s, s], -1))[None]
    ref, _ = apply_rotary_pos_emb(torch.from_numpy(x), torch.from_numpy(x), cos_hf, sin_hf)
    np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-12, atol=1e-12)


def test_two_rope_conventions_equal_after_permutation(xp, rng):
    d_h = 12
    x = rng.standard_normal((1, 1, 7, d_h))
    p = T.interleaved_to_half_permutation(d_h)
    assert sorted(p) == list(range(d_h))
    cos, sin = T.rope_cos_sin(asarray(xp, np.arange(7)), d_h, dtype=xp.float64)
    inter = T.to_numpy(T.apply_rope_interleaved(asarray(xp, x), cos, sin))
    half = T.to_numpy(T.apply_rope_half(asarray(xp, x[..., p]), cos, sin))
    np.testing.assert_allclose(half, inter[..., p], rtol=1e-12, atol=1e-12)


@SETTINGS
@given(m=st.integers(0, 200), n=st.integers(0, 200), shift=st.integers(0, 500), seed=st.integers(0, 2**16))
def test_rope_score_depends_only_on_relative_position(xp, m, n, shift, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(16), rng.standard_normal(16)

    def score(pm, pn):
        cos, sin = T.rope_cos_sin(asarray(xp, np.array([pm, pn])), 16, dtype=xp.float64)
        both = T.to_numpy(T.apply_rope_interleaved(asarray(xp, np.stack([q, k])), cos, sin))
        return both[0] @ both[1]

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), rel=1e-9, abs=1e-9)
    if m == n:  # equal positions: the rotation cancels and the plain dot product remains
        assert score(m, n) == pytest.approx(q @ k, rel=1e-9, abs=1e-9)


def test_rope_preserves_norm_and_keeps_float32(rng):
    x = rng.standard_normal((1, 1, 9, 8)).astype(np.float32)
    cos, sin = T.rope_cos_sin(np.arange(9), 8)
    y = T.apply_rope_half(x, cos, sin)
    assert y.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    with pytest.raises(ValueError, match="d_h=7"):
        T.rope_cos_sin(np.arange(3), 7)
