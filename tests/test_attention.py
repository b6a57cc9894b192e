"""Softmax and scaled dot-product attention against PyTorch and against their defining properties."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings, strategies as st

import transformer as T
from conftest import asarray

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _qkv(rng, b, h, h_kv, n_q, n_k, d_h, dtype=np.float64):
    q = rng.standard_normal((b, h, n_q, d_h)).astype(dtype)
    k = rng.standard_normal((b, h_kv, n_k, d_h)).astype(dtype)
    v = rng.standard_normal((b, h_kv, n_k, d_h)).astype(dtype)
    return q, k, v


# --- softmax ---------------------------------------------------------------------------------

def test_softmax_hand_worked(xp):
    # softmax([0, ln 2, ln 3]) = [1, 2, 3] / 6
    x = asarray(xp, [0.0, math.log(2), math.log(3)])
    np.testing.assert_allclose(T.to_numpy(T.softmax(x)), [1 / 6, 2 / 6, 3 / 6], rtol=1e-12)


def test_softmax_equals_torch(xp, rng):
    x = rng.standard_normal((3, 4, 7)) * 5
    ours = T.to_numpy(T.softmax(asarray(xp, x), axis=-1))
    np.testing.assert_allclose(ours, torch.softmax(torch.from_numpy(x), dim=-1).numpy(), rtol=1e-12, atol=1e-15)


@SETTINGS
@given(n=st.integers(1, 12), c=st.floats(-1e3, 1e3), seed=st.integers(0, 2**16))
def test_softmax_invariant_to_row_constant(xp, n, c, seed):
    x = np.random.default_rng(seed).standard_normal((3, n))
    a = T.to_numpy(T.softmax(asarray(xp, x)))
    b = T.to_numpy(T.softmax(asarray(xp, x + c)))
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_huge_logits_stay_finite(dtype):
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, 1e4]], dtype=dtype)
    p = T.softmax(x)
    assert p.dtype == dtype and np.isfinite(p).all()
    np.testing.assert_allclose(p.astype(np.float64), [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_softmax_low_precision_rounds_once_like_torch(dtype):
    """float16/bfloat16 rows of 1000 logits: summed in float32 and rounded once, as torch's CPU
    softmax: every probability within one ulp of torch's (float16 sums would drift ~6× further),
    and the dtype kept (NumPy's bfloat16 comes from ml_dtypes)."""
    import torch
    if dtype == "bfloat16":
        low = pytest.importorskip("ml_dtypes").bfloat16
        eps = 2.0 ** -7  # one ulp relative, 8 significant bits
    else:
        low, eps = np.float16, 2.0 ** -10
    x = (np.random.default_rng(3).standard_normal((50, 1000)) * 3).astype(np.float32).astype(low)
    p = T.softmax(x)
    assert p.dtype == low
    ref = torch.softmax(torch.from_numpy(x.astype(np.float32)).to(getattr(torch, dtype)), dim=-1).float().numpy()
    ours = p.astype(np.float32)
    big = ref > 1e-3  # above float16's subnormals, where one ulp is relative
    np.testing.assert_allclose(ours[big], ref[big], rtol=eps, atol=0)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=eps * 1e-3 + 2.0 ** -24)


def test_softmax_of_integers_is_float64():
    p = T.softmax(np.array([0, 1, 2]))
    e = np.exp([0.0, 1.0, 2.0])
    assert p.dtype == np.float64
    np.testing.assert_allclose(p, e / e.sum(), rtol=1e-15)


def test_softmax_all_masked_row_is_zero(xp):
    x = asarray(xp, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = asarray(xp, [[True, False, True], [False, False, False]])
    p = T.to_numpy(T.softmax(x, mask=mask))
    e = np.exp([1.0, 3.0])
    np.testing.assert_allclose(p, [[e[0] / e.sum(), 0, e[1] / e.sum()], [0, 0, 0]], rtol=1e-12)


# --- scaled dot-product attention against torch -------------------------------------------------

@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1), (6, 3)])
@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_equals_torch(xp, rng, h, h_kv, masked):
    b, n_q, n_k, d_h = 2, 5, 7, 8
    q, k, v = _qkv(rng, b, h, h_kv, n_q, n_k, d_h)
    mask = np.tril(np.ones((n_q, n_k), bool), k=n_k - n_q) if masked else None
    ours = T.scaled_dot_product_attention(asarray(xp, q), asarray(xp, k), asarray(xp, v),
                                          None if mask is None else asarray(xp, mask))
    ref = F.scaled_dot_product_attention(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
        attn_mask=None if mask is None else torch.from_numpy(mask), enable_gqa=True)
    np.testing.assert_allclose(T.to_numpy(ours), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_sdpa_padding_mask_per_batch_equals_torch(xp, rng):
    b, h, n, d_h = 3, 2, 6, 4
    q, k, v = _qkv(rng, b, h, h, n, n, d_h)
    lengths = [6, 3, 1]
    mask = T.padding_mask(asarray(xp, np.array(lengths)), n)  # (b, 1, 1, n)
    ours = T.to_numpy(T.scaled_dot_product_attention(asarray(xp, q), asarray(xp, k), asarray(xp, v), mask))
    ref_mask = torch.from_numpy(np.arange(n)[None, None, None, :] < np.array(lengths)[:, None, None, None])
    ref = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                         attn_mask=ref_mask).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


def test_sdpa_custom_scale_equals_torch(rng):
    q, k, v = _qkv(rng, 1, 2, 2, 3, 3, 4)
    ours = T.scaled_dot_product_attention(q, k, v, scale=0.3)
    ref = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), scale=0.3).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


def test_sdpa_hand_worked():
    # One query [1, 0] against keys [1, 0] and [0, 1] with d_h = 2: scores 1/√2 and 0.
    q = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    k = np.array([[1.0, 0.0], [0.0, 1.0]]).reshape(1, 1, 2, 2)
    v = np.array([[10.0, 0.0], [0.0, 10.0]]).reshape(1, 1, 2, 2)
    out, w = T.scaled_dot_product_attention(q, k, v, return_weights=True)
    p0 = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    np.testing.assert_allclose(w.ravel(), [p0, 1 - p0], rtol=1e-12)
    np.testing.assert_allclose(out.ravel(), [10 * p0, 10 * (1 - p0)], rtol=1e-12)


# --- properties --------------------------------------------------------------------------------

shapes = st.tuples(st.integers(1, 2), st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2), (6, 3), (4, 4)]),
                   st.integers(1, 9), st.integers(1, 9), st.sampled_from([1, 2, 4, 8]))


@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2**16), p_keep=st.floats(0.0, 1.0))
def test_weights_rows_sum_to_one_and_masked_weights_are_exactly_zero(xp, shape, seed, p_keep):
    b, (h, h_kv), n_q, n_k, d_h = shape
    rng = np.random.default_rng(seed)
    q, k, v = _qkv(rng, b, h, h_kv, n_q, n_k, d_h)
    mask = rng.random((b, 1, n_q, n_k)) < p_keep
    _, w = T.scaled_dot_product_attention(asarray(xp, q), asarray(xp, k), asarray(xp, v), asarray(xp, mask),
                                          return_weights=True)
    w = T.to_numpy(w)
    assert np.all(w[np.broadcast_to(~mask, w.shape)] == 0.0)
    sums = w.sum(-1)
    has_key = np.broadcast_to(mask.any(-1), sums.shape)
    np.testing.assert_allclose(sums[has_key], 1.0, rtol=1e-12)
    assert np.all(sums[~has_key] == 0.0)  # a query that may see nothing gets zero weights, not NaN


@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_gqa_equals_mha_with_heads_repeated_by_hand(xp, shape, seed):
    b, (h, h_kv), n_q, n_k, d_h = shape
    q, k, v = _qkv(np.random.default_rng(seed), b, h, h_kv, n_q, n_k, d_h)
    g = h // h_kv
    k_full = np.stack([k[:, i // g] for i in range(h)], axis=1)  # query head i reads KV head i // g
    v_full = np.stack([v[:, i // g] for i in range(h)], axis=1)
    gqa = T.scaled_dot_product_attention(asarray(xp, q), asarray(xp, k), asarray(xp, v))
    mha = T.scaled_dot_product_attention(asarray(xp, q), asarray(xp, k_full), asarray(xp, v_full))
    np.testing.assert_allclose(T.to_numpy(gqa), T.to_numpy(mha), rtol=1e-12, atol=1e-14)


@SETTINGS
@given(h=st.sampled_from([1, 2, 3, 4]), n=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_mqa_is_each_query_head_against_the_one_kv_head(xp, h, n, seed):
    q, k, v = _qkv(np.random.default_rng(seed), 1, h, 1, n, n, 4)
    mqa = T.to_numpy(T.scaled_dot_product_attention(asarray(xp, q), asarray(xp, k), asarray(xp, v)))
    for i in range(h):  # h single-head attentions sharing K and V
        one = T.to_numpy(T.scaled_dot_product_attention(asarray(xp, q[:, i:i + 1]), asarray(xp, k), asarray(xp, v)))
        np.testing.assert_allclose(mqa[:, i:i + 1], one, rtol=1e-12, atol=1e-14)


@SETTINGS
@given(n=st.integers(1, 12), extra=st.integers(0, 5), seed=st.integers(0, 2**16))
def test_sliding_window_at_least_n_equals_causal(xp, n, extra, seed):
    q, k, v = (asarray(xp, a) for a in _qkv(np.random.default_rng(seed), 1, 2, 2, n, n, 4))
    a = T.scaled_dot_product_attention(q, k, v, T.sliding_window_mask(n, n + extra, xp=xp))
    b = T.scaled_dot_product_attention(q, k, v, T.causal_mask(n, xp=xp))
    np.testing.assert_array_equal(T.to_numpy(a), T.to_numpy(b))


# --- dtypes and edge cases ---------------------------------------------------------------------

def test_float32_stays_float32(xp, rng):
    q, k, v = (asarray(xp, a, np.float32) for a in _qkv(rng, 1, 2, 1, 3, 3, 4))
    out, w = T.scaled_dot_product_attention(q, k, v, return_weights=True)
    assert out.dtype == xp.float32 and w.dtype == xp.float32


def test_float16_inputs_match_torch_float32(rng):
    q, k, v = (a.astype(np.float16) for a in _qkv(rng, 1, 2, 2, 16, 16, 32))
    out = T.scaled_dot_product_attention(q, k, v, T.causal_mask(16))
    assert out.dtype == np.float16
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a.astype(np.float32)) for a in (q, k, v)),
                                         is_causal=True).numpy()
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=2e-3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_huge_logits_give_finite_attention(dtype):
    q = np.full((1, 1, 2, 4), 100.0, dtype)  # q·k/√d = 1e4 / 2 · … : far past exp's float range
    k = np.stack([np.full(4, 100.0), np.full(4, -100.0)])[None, None].astype(dtype)
    v = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])[None, None].astype(dtype)
    out = T.scaled_dot_product_attention(q, k, v)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0, 0].astype(np.float64), np.tile([1.0, 2, 3, 4], (2, 1)), atol=1e-3)


def test_all_masked_rows_return_zeros(xp, rng):
    q, k, v = _qkv(rng, 1, 2, 2, 3, 4, 4)
    mask = np.array([[True, True, False, False], [False] * 4, [True] * 4])
    out = T.to_numpy(T.scaled_dot_product_attention(*(asarray(xp, a) for a in (q, k, v, mask))))
    assert np.isfinite(out).all() and np.all(out[:, :, 1] == 0.0)
    # the rows that see something are ordinary attention: torch SDPA (rows 0 and 2; what torch
    # returns for a row that sees nothing, NaN or zeros, has changed across versions)
    ref = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), attn_mask=torch.from_numpy(mask)).numpy()
    np.testing.assert_allclose(out[:, :, [0, 2]], ref[:, :, [0, 2]], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_bfloat16_torch_tensors_match_torch_float32(h, h_kv):
    """bfloat16 has no NumPy dtype: torch tensors go through the same code (Array API). Computed
    in float32, then rounded once to bfloat16 (8 significant bits): within half an ulp, 2⁻⁸ relative."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, hh, 9, 16, generator=g).to(torch.bfloat16) for hh in (h, h_kv, h_kv))
    mask = torch.rand(2, 1, 9, 9, generator=g) < 0.7
    mask[..., 0] = True  # torch gives NaN on a row that sees nothing
    out = T.scaled_dot_product_attention(q, k, v, mask)
    assert out.dtype == torch.bfloat16
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, enable_gqa=True)
    err = (out.float() - ref).abs()  # measured max err / |ref| ≈ 3.4e-3 < 2⁻⁸ ≈ 3.9e-3
    assert (err <= (2 ** -8 + 1e-5) * ref.abs() + 2 ** -12).all(), err.max()  # + float32 differences


# --- bad input ---------------------------------------------------------------------------------

def test_bad_inputs_name_the_values(rng):
    q, k, v = _qkv(rng, 1, 4, 2, 3, 5, 8)
    with pytest.raises(ValueError, match=r"h=4.*h_kv=3"):
        T.scaled_dot_product_attention(q, *_qkv(rng, 1, 4, 3, 3, 5, 8)[1:])
    with pytest.raises(ValueError, match=r"d_h=8.*d_h=6"):
        T.scaled_dot_product_attention(q, k[..., :6], v)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(1, 4, 3, 5\)"):
        T.scaled_dot_product_attention(q, k, v, np.ones((3, 4), bool))
    with pytest.raises(TypeError, match="mask must be boolean"):
        T.scaled_dot_product_attention(q, k, v, np.ones((3, 5)))
    with pytest.raises(TypeError, match=r"q must be a floating-point array, got dtype int64"):
        T.scaled_dot_product_attention(q.astype(np.int64), k, v)
    with pytest.raises(ValueError, match=r"4 dims.*\(3, 8\)"):
        T.scaled_dot_product_attention(q[0, 0], k, v)
    with pytest.raises(ValueError, match=r"batch sizes differ: q b=1, k b=2"):
        T.scaled_dot_product_attention(q, np.concatenate([k, k]), np.concatenate([v, v]))
