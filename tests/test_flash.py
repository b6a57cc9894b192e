"""FlashAttention against independent references.

Forward: the core's naive `scaled_dot_product_attention` (one softmax over the whole
score matrix) and torch's logsumexp for the saved statistics. Backward: PyTorch
autograd through `torch.nn.functional.scaled_dot_product_attention`, and central
finite differences in float64. Online softmax: the two-pass softmax.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings, strategies as st

import transformer as T
from transformer.core.online_softmax import (merge_softmax_stats, online_softmax, online_softmax_history,
                                             online_softmax_stats)
from transformer.flash.backward import attention_backward_naive, flash_attention_backward
from transformer.flash.tiled import FlashTrace, flash_attention, standard_attention, tile_kind
from conftest import asarray

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _qkv(rng, b, h, h_kv, n_q, n_k, d_h, dtype=np.float64, spread=1.0):
    q = rng.standard_normal((b, h, n_q, d_h)) * spread
    k = rng.standard_normal((b, h_kv, n_k, d_h)) * spread
    v = rng.standard_normal((b, h_kv, n_k, d_h))
    return q.astype(dtype), k.astype(dtype), v.astype(dtype)


def _causal(n_q, n_k):  # [n_q, n_k] bool, queries are the last n_q positions (any n_q, n_k)
    """Built here from the definition, j ≤ i + (n_k - n_q), so n_q > n_k is allowed too."""
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q)


def _reference(q, k, v, causal):  # the core's naive attention, with an explicit mask
    mask = _causal(q.shape[2], k.shape[2]) if causal else None
    return T.scaled_dot_product_attention(q, k, v, mask)


def _torch_lse(q, k, causal):  # [b, h, n_q] via torch.logsumexp of the masked scores
    n_rep = q.shape[1] // k.shape[1]
    tq = torch.from_numpy(np.asarray(q, np.float64))
    tk = torch.from_numpy(np.asarray(k, np.float64)).repeat_interleave(n_rep, dim=1)
    s = tq @ tk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.from_numpy(_causal(q.shape[2], k.shape[2])), -math.inf)
    return torch.logsumexp(s, dim=-1).numpy()


# --- online softmax ------------------------------------------------------------------------------

def test_online_softmax_hand_worked():
    # x = log [1, 2, 3]: max m = log 3, l = Σ e^(x - m) = (1 + 2 + 3) / 3 = 2
    m, l = online_softmax_stats(np.log(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose([m[0], l[0]], [math.log(3), 2.0], rtol=1e-14)
    # the recurrence step by step: (m, l) = (log 1, 1) → (log 2, 1/2 + 1) → (log 3, 3/2·2/3 + 1)
    ms, ls = online_softmax_history(np.log(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(np.exp(ms), [1, 2, 3], rtol=1e-14)
    np.testing.assert_allclose(ls, [1, 1.5, 2.0], rtol=1e-14)


@SETTINGS
@given(n=st.integers(1, 40), block=st.integers(1, 50), spread=st.sampled_from([1.0, 30.0, 1e3]),
       seed=st.integers(0, 2**16))
def test_online_softmax_equals_two_pass(xp, n, block, spread, seed):
    x = np.random.default_rng(seed).standard_normal((3, n)) * spread
    ours = T.to_numpy(online_softmax(asarray(xp, x), block))
    np.testing.assert_allclose(ours, T.to_numpy(T.softmax(asarray(xp, x))), rtol=1e-12, atol=1e-15)
    m, l = online_softmax_stats(asarray(xp, x), block)
    np.testing.assert_allclose(T.to_numpy(m)[:, 0], x.max(axis=-1), rtol=0, atol=0)
    np.testing.assert_allclose(T.to_numpy(l)[:, 0], np.exp(x - x.max(-1, keepdims=True)).sum(-1), rtol=1e-12)


@SETTINGS
@given(n=st.integers(2, 30), cut=st.integers(1, 29), seed=st.integers(0, 2**16))
def test_merge_of_two_parts_is_the_whole(n, cut, seed):
    x = np.random.default_rng(seed).standard_normal((4, n)) * 10
    cut = min(cut, n - 1)
    stats = [(p.max(-1, keepdims=True), np.exp(p - p.max(-1, keepdims=True)).sum(-1, keepdims=True))
             for p in (x[:, :cut], x[:, cut:])]
    m, l = merge_softmax_stats(*stats[0], *stats[1])
    np.testing.assert_allclose(m[:, 0], x.max(-1), rtol=0)
    np.testing.assert_allclose(l[:, 0], np.exp(x - x.max(-1, keepdims=True)).sum(-1), rtol=1e-12)


@pytest.mark.parametrize("Bc", [1, 3, 7])
def test_online_attention_update_over_tiles_equals_torch(Bc):
    """Folding the key tiles one by one, then O / l, equals torch's softmax(S) V; a row whose first
    tiles are all masked (-inf) stays 0 there, never NaN."""
    rng = np.random.default_rng(Bc)
    S = rng.standard_normal((2, 3, 4, 7)) * 4  # [b, h, Br, n_k]
    S[0, 0, 1, :4] = -np.inf  # this row sees nothing in its first tiles
    V = rng.standard_normal((2, 3, 7, 5))  # [b, h, n_k, d_h]
    m, l, O = np.full((2, 3, 4, 1), -np.inf), np.zeros((2, 3, 4, 1)), np.zeros((2, 3, 4, 5))
    for c0 in range(0, 7, Bc):
        m, l, O = T.online_attention_update(m, l, O, S[..., c0:c0 + Bc], V[..., c0:c0 + Bc, :])
        assert not np.isnan(O).any() and not np.isnan(l).any()
    expected = torch.softmax(torch.from_numpy(S), dim=-1) @ torch.from_numpy(V)
    np.testing.assert_allclose(O / l, expected.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m[..., 0], S.max(-1), rtol=0)


def test_online_attention_update_refuses_mismatched_tiles():
    m = l = np.zeros((4, 1))
    with pytest.raises(ValueError, match="V_j must be"):
        T.online_attention_update(m, l, np.zeros((4, 5)), np.zeros((4, 3)), np.zeros((2, 5)))


def test_online_softmax_history_max_never_falls_and_ends_at_the_row():
    x = np.random.default_rng(1).standard_normal((2, 23)) * 5
    ms, ls = online_softmax_history(x, block=4)
    assert ms.shape == ls.shape == (6, 2)
    assert np.all(np.diff(ms, axis=0) >= 0)
    np.testing.assert_allclose(ms[-1], x.max(-1))
    np.testing.assert_allclose(ls[-1], np.exp(x - x.max(-1, keepdims=True)).sum(-1), rtol=1e-12)


def test_online_softmax_masked_block_first_gives_no_nan():
    x = np.array([[-np.inf, -np.inf, 1.0, 2.0]])  # the first block (of 2) is entirely masked
    ours = online_softmax(x, block=2)
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(ours, [[0, 0, e[0] / e.sum(), e[1] / e.sum()]], rtol=1e-14)


@pytest.mark.parametrize("block", [1, 64])
def test_online_softmax_of_a_long_float16_row_is_summed_in_float32(block):
    """A float16 running sum of 5,000 terms near 1 stops growing at 2048 (each new 1 rounds away): the
    weights came out 2.4× too large. Summed in float32 and rounded once, as torch's float32 softmax is."""
    x = (np.random.default_rng(2).standard_normal((2, 5000)) * 0.1).astype(np.float16)
    ours = online_softmax(x, block)
    ref = torch.softmax(torch.from_numpy(x.astype(np.float32)), dim=-1).numpy()  # [2, 5000]
    assert ours.dtype == np.float16
    np.testing.assert_allclose(ours.astype(np.float32), ref, rtol=2.0 ** -10, atol=2.0 ** -24)  # one float16 step
    m, l = online_softmax_stats(x, block)
    assert l.dtype == np.float32
    np.testing.assert_allclose(l[:, 0], np.exp(x.astype(np.float64) - x.max(-1, keepdims=True)).sum(-1), rtol=1e-5)


def test_online_softmax_of_a_row_of_minus_inf_is_zeros_as_softmax_gives():
    x = np.array([[-np.inf] * 4, [0.0, 1.0, -np.inf, 2.0]])
    e = np.exp([0.0, 1.0, 2.0])
    for block in (1, 3):
        ours = online_softmax(x, block)
        np.testing.assert_allclose(ours, [[0, 0, 0, 0], [e[0] / e.sum(), e[1] / e.sum(), 0, e[2] / e.sum()]],
                                   rtol=1e-14, atol=0)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("where", [0, 3, 5])  # in the first block, a middle one, the last
def test_online_softmax_nan_or_inf_row_equals_torch(bad, where):
    """A NaN or +inf score turns its whole row NaN, as torch.softmax gives, block by block too."""
    x = np.array([[1.0, 2.0, -1.0, 3.0, 0.5, 0.2], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    x[0, where] = bad
    ref = torch.softmax(torch.from_numpy(x), dim=-1).numpy()
    for block in (1, 2, 4, 6):
        with np.errstate(invalid="ignore"):
            ours = online_softmax(x, block=block)
        assert np.array_equal(np.isnan(ours), np.isnan(ref)), block
        np.testing.assert_allclose(ours[1], ref[1], rtol=1e-14)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("version", [1, 2])
def test_nan_or_inf_in_q_or_k_equals_torch(bad, version):
    """A NaN or inf in q poisons its own query row; in k, every row that sees that key: the same
    NaN cells as torch in the output, the log-sum-exp (FlashAttention and the standard way) and
    the gradients of the tiled backward, the clean cells equal to torch."""
    rng = np.random.default_rng(7)
    q, k, v = _qkv(rng, 1, 2, 2, 9, 11, 4)
    dout = rng.standard_normal(q.shape)
    for which, at in (("q", (0, 0, 4, 1)), ("k", (0, 1, 6, 2))):
        q2, k2 = q.copy(), k.copy()
        (q2 if which == "q" else k2)[at] = bad
        for causal in (False, True):
            # torch's SDPA adds its boolean mask as -inf, and NaN + -inf is NaN: a masked NaN key
            # would still poison the row. Masked keys take no part here (nor in a tile that is
            # skipped), so the reference is torch with the masked scores filled, as in the paper.
            tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q2, k2, v))
            s = tq @ tk.transpose(-1, -2) / math.sqrt(4)
            if causal:
                s = s.masked_fill(~torch.from_numpy(_causal(9, 11)), -math.inf)
            ref = torch.softmax(s, dim=-1) @ tv
            ref.backward(torch.from_numpy(dout))
            ref = ref.detach().numpy()
            # torch's logsumexp of a row holding +inf is +inf; the saved lse of a row whose output
            # is NaN is NaN too (the backward then gives that row NaN gradients, as torch's does)
            ref_lse = np.where(np.isnan(ref).any(-1), np.nan, torch.logsumexp(s, dim=-1).detach().numpy())
            with np.errstate(invalid="ignore", over="ignore"):
                ours, lse = flash_attention(q2, k2, v, causal=causal, block_q=4, block_k=3, version=version,
                                            return_lse=True)
                std, std_lse = standard_attention(q2, k2, v, causal=causal, return_lse=True)
                grads = flash_attention_backward(dout, q2, k2, v, ours, lse, causal=causal, block_q=4, block_k=3)
            assert np.isnan(ref).any()
            pairs = [(ours, ref), (std, ref), (lse, ref_lse), (std_lse, ref_lse)]
            if not causal:  # masked pairs meet 0·NaN in a dense backward, not in a skipped tile: compare unmasked
                pairs += zip(grads, (tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()))
            for got, expect in pairs:
                assert np.array_equal(np.isnan(got), np.isnan(expect)), (which, causal)
                ok = ~np.isnan(expect)
                np.testing.assert_allclose(got[ok], expect[ok], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_fast_nan_or_inf_rows_keep_a_nan_lse_as_torch(bad):
    """flash_attention_fast: a row poisoned by a NaN or inf in q or k has lse NaN, as flash_attention's,
    not the -inf of a row that saw no key (which the backward turns into zero gradients, hiding the NaN).
    Reference: torch's softmax and logsumexp over the scores, masked ones filled as in the test above."""
    q, k, v = _qkv(np.random.default_rng(7), 1, 2, 2, 9, 11, 4)
    for which, at in (("q", (0, 0, 4, 1)), ("k", (0, 1, 6, 2))):
        q2, k2 = q.copy(), k.copy()
        (q2 if which == "q" else k2)[at] = bad
        for causal in (False, True):
            s = torch.from_numpy(q2) @ torch.from_numpy(k2).transpose(-1, -2) / math.sqrt(4)
            if causal:
                s = s.masked_fill(~torch.from_numpy(_causal(9, 11)), -math.inf)
            ref = (torch.softmax(s, dim=-1) @ torch.from_numpy(v)).numpy()
            ref_lse = np.where(np.isnan(ref).any(-1), np.nan, torch.logsumexp(s, dim=-1).numpy())
            with np.errstate(invalid="ignore", over="ignore"):
                out, lse = T.flash_attention_fast(q2, k2, v, causal=causal, block_q=4, block_k=3, return_lse=True,
                                                  threads=1)
            for got, expect in ((out, ref), (lse, ref_lse)):
                assert np.array_equal(np.isnan(got), np.isnan(expect)), (which, causal)
                ok = ~np.isnan(expect)
                np.testing.assert_allclose(got[ok], expect[ok], rtol=1e-9, atol=1e-11)


def test_backward_nan_query_leaves_keys_it_cannot_see_alone():
    """Causal, a NaN in feature 1 of query row 4 (position 6): keys 7..10 are masked for it, so its
    weights there are exactly 0, not e^(-inf - NaN): their dV stays finite (P_ijᵀ dO with P = 0),
    and their dK meets the NaN row only as 0·q (NaN in feature 1 at most). Rows 0..3 and the
    other head, which never see the bad query, keep torch's gradients."""
    rng = np.random.default_rng(7)
    q, k, v = _qkv(rng, 1, 2, 2, 9, 11, 4)
    dout = rng.standard_normal(q.shape)
    q[0, 0, 4, 1] = math.nan
    with np.errstate(invalid="ignore"):
        out, lse = flash_attention(q, k, v, causal=True, block_q=4, block_k=3, return_lse=True)
        dq, dk, dv = flash_attention_backward(dout, q, k, v, out, lse, causal=True, block_q=4, block_k=3)
    assert np.isnan(dv[0, 0, :7]).all() and np.isfinite(dv[0, 0, 7:]).all()
    assert np.isfinite(np.delete(dk[0, 0, 7:], 1, axis=-1)).all()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (np.nan_to_num(q), k, v))  # head 1 never reads head 0
    F.scaled_dot_product_attention(tq, tk, tv, is_causal=False,
                                   attn_mask=torch.from_numpy(_causal(9, 11))).backward(torch.from_numpy(dout))
    np.testing.assert_allclose(dq[0, 1], tq.grad[0, 1].numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(dk[0, 1], tk.grad[0, 1].numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(dv[0, 1], tv.grad[0, 1].numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(dq[0, 0, :4], tq.grad[0, 0, :4].numpy(), rtol=1e-9, atol=1e-11)  # rows before it


def test_scores_all_minus_inf_count_as_a_row_that_sees_no_key():
    """An inf in q can send every score of its row to -inf (each key's feature negative). Such a row
    is taken as fully masked — zeros and lse = -inf, as softmax's all-masked rows — where torch's
    softmax gives NaN: the one place the package departs from torch on purpose."""
    q = np.array([[[[math.inf, 0.0]]]])  # (1, 1, 1, 2)
    k = np.array([[[[-1.0, 0.5], [-2.0, 0.3]]]])  # every key's first feature < 0: scores -inf
    v = np.ones_like(k)
    for run in (lambda: flash_attention(q, k, v, block_q=1, block_k=1, return_lse=True),
                lambda: standard_attention(q, k, v, return_lse=True)):
        out, lse = run()
        assert np.all(out == 0) and np.all(lse == -math.inf)


def test_online_softmax_bad_block():
    with pytest.raises(ValueError, match="block"):
        online_softmax_stats(np.zeros(3), block=0)


# --- tiled forward ---------------------------------------------------------------------------------

SHAPES = st.tuples(st.integers(1, 2), st.sampled_from([(1, 1), (2, 2), (4, 2), (3, 1)]),
                   st.integers(1, 24), st.integers(1, 24), st.sampled_from([1, 3, 8]))


@SETTINGS
@given(shape=SHAPES, block_q=st.integers(1, 30), block_k=st.integers(1, 30), causal=st.booleans(),
       version=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_forward_equals_naive_float64(shape, block_q, block_k, causal, version, seed):
    b, (h, h_kv), n_q, n_k, d_h = shape
    q, k, v = _qkv(np.random.default_rng(seed), b, h, h_kv, n_q, n_k, d_h)
    out, lse = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k,
                               return_lse=True, version=version)
    np.testing.assert_allclose(out, _reference(q, k, v, causal), rtol=0, atol=1e-10)
    ref_lse = _torch_lse(q, k, causal)
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))  # rows that see no key
    ok = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[ok], ref_lse[ok], rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_forward_on_every_backend(xp, causal, version, h, h_kv):
    q, k, v = _qkv(np.random.default_rng(7), 2, h, h_kv, 11, 13, 4)
    out, lse = flash_attention(*(asarray(xp, t) for t in (q, k, v)), causal=causal, block_q=3,
                               block_k=5, version=version, return_lse=True)
    np.testing.assert_allclose(T.to_numpy(out), _reference(q, k, v, causal), rtol=0, atol=1e-10)
    np.testing.assert_allclose(T.to_numpy(lse), _torch_lse(q, k, causal), rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_q,n_k", [(64, 64), (37, 100), (1, 50)])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_float32_within_1e5(n_q, n_k, causal):
    q, k, v = _qkv(np.random.default_rng(3), 1, 4, 2, n_q, n_k, 16)
    out = flash_attention(*(t.astype(np.float32) for t in (q, k, v)), causal=causal, block_q=16, block_k=24)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, _reference(q, k, v, causal), rtol=0, atol=1e-5)


def test_forward_large_logits_stay_exact():
    # scores of size ~1e3: e^s overflows unless each tile subtracts the running max
    q, k, v = _qkv(np.random.default_rng(4), 1, 2, 2, 20, 30, 8, spread=15.0)
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v))).numpy()
    for version in (1, 2):
        out = flash_attention(q, k, v, block_q=7, block_k=6, version=version)
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)


def test_forward_custom_scale_equals_torch():
    q, k, v = _qkv(np.random.default_rng(5), 1, 2, 2, 9, 9, 8)
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v)), scale=0.3).numpy()
    np.testing.assert_allclose(flash_attention(q, k, v, scale=0.3, block_q=4, block_k=4), ref, atol=1e-12)


def test_decode_single_query_sees_every_key():
    # n_q = 1 with causal=True is one decode step: the query is the last position
    q, k, v = _qkv(np.random.default_rng(6), 1, 4, 1, 1, 33, 8)
    np.testing.assert_allclose(flash_attention(q, k, v, causal=True, block_k=8),
                               T.scaled_dot_product_attention(q, k, v), atol=1e-12)


@pytest.mark.parametrize("version", [1, 2])
def test_causal_more_queries_than_keys_gives_zero_rows(version):
    # n_q = 10 > n_k = 4: query r sits at position r - 6, so rows 0..5 see no key at all
    q, k, v = _qkv(np.random.default_rng(8), 1, 2, 2, 10, 4, 4)
    out, lse = flash_attention(q, k, v, causal=True, block_q=3, block_k=3, return_lse=True, version=version)
    assert np.all(out[:, :, :6] == 0) and np.all(np.isneginf(lse[:, :, :6]))
    np.testing.assert_allclose(out, _reference(q, k, v, True), atol=1e-12)


def test_float16_accumulates_in_float32():
    q, k, v = _qkv(np.random.default_rng(9), 1, 4, 2, 50, 70, 16, dtype=np.float16)
    out, lse = flash_attention(q, k, v, causal=True, block_q=16, block_k=16, return_lse=True)
    assert out.dtype == np.float16 and lse.dtype == np.float32
    ref = _reference(*(t.astype(np.float64) for t in (q, k, v)), True)
    # the only error left is rounding the output to float16: half an ulp, 2⁻¹¹ relative
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2 ** -10, atol=2 ** -14)


def test_bfloat16_torch_tensors():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 30, 16, generator=g, dtype=torch.float64) for _ in range(3))
    k, v = k[:, :2], v[:, :2]
    out = flash_attention(*(t.to(torch.bfloat16) for t in (q, k, v)), causal=True, block_q=8, block_k=8)
    assert out.dtype == torch.bfloat16
    ref = F.scaled_dot_product_attention(*(t.to(torch.bfloat16).double() for t in (q, k, v)),
                                         is_causal=True, enable_gqa=True)
    np.testing.assert_allclose(out.double().numpy(), ref.numpy(), rtol=2 ** -8, atol=2 ** -12)


def test_standard_attention_equals_naive(xp):
    q, k, v = _qkv(np.random.default_rng(10), 2, 4, 2, 9, 12, 4)
    for causal in (False, True):
        out, lse = standard_attention(*(asarray(xp, t) for t in (q, k, v)), causal=causal, return_lse=True)
        np.testing.assert_allclose(T.to_numpy(out), _reference(q, k, v, causal), atol=1e-12)
        np.testing.assert_allclose(T.to_numpy(lse), _torch_lse(q, k, causal), atol=1e-12)


# --- tiles and the trace -------------------------------------------------------------------------------

def test_tile_kind_hand_worked():
    # square causal (offset 0), 2 × 2 tiles: rows 2:4 against keys 0:2 all visible,
    # against keys 2:4 the diagonal, against keys 4:6 nothing
    assert tile_kind(2, 4, 0, 2, 0, True) == "full"
    assert tile_kind(2, 4, 2, 4, 0, True) == "diagonal"
    assert tile_kind(2, 4, 4, 6, 0, True) == "skipped"
    assert tile_kind(2, 4, 4, 6, 0, False) == "full"


@pytest.mark.parametrize("version", [1, 2])
def test_trace_causal_grid_and_order(version):
    # n = 8, B = 2: a 4 × 4 grid; causal computes the 4·5/2 = 10 tiles on and below the diagonal
    q, k, v = _qkv(np.random.default_rng(11), 1, 2, 1, 8, 8, 4)
    tr = FlashTrace(batch=0, head=1)
    flash_attention(q, k, v, causal=True, block_q=2, block_k=2, version=version, trace=tr)
    assert (tr.Tr, tr.Tc, len(tr.steps)) == (4, 4, 16)
    np.testing.assert_array_equal(tr.computed(), np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(tr.partial(), np.eye(4, dtype=bool))
    i, j = np.indices((4, 4))
    order = i * 4 + j if version == 2 else j * 4 + i  # FA2: rows outside; FA1: columns outside
    np.testing.assert_array_equal(tr.grid(), np.where(j <= i, order, -1))
    assert all(s.loads == 0 and s.m is None for s in tr.steps if s.kind == "skipped")


@pytest.mark.parametrize("version", [1, 2])
def test_trace_running_stats_end_at_the_row_statistics(version):
    q, k, v = _qkv(np.random.default_rng(12), 2, 4, 2, 10, 13, 4)
    tr = FlashTrace(batch=1, head=3)
    flash_attention(q, k, v, causal=True, block_q=4, block_k=3, version=version, trace=tr)
    s = q[1, 3] @ k[1, 1].T / 2.0  # head 3 reads kv head 3 // 2 = 1; √d_h = 2
    s = np.where(_causal(10, 13), s, -np.inf)
    for r in range(10):
        js, m, l = tr.row_history(r)
        np.testing.assert_array_equal(js, np.arange(len(js)))  # key blocks 0, 1, … in order
        assert np.all(np.diff(m) >= 0)
        np.testing.assert_allclose(m[-1], s[r].max(), rtol=1e-14)
        np.testing.assert_allclose(l[-1], np.exp(s[r] - s[r].max()).sum(), rtol=1e-13)
    hist = tr.history("m")
    assert hist.shape == (len(tr.steps), 10)
    np.testing.assert_allclose(hist[-1], s.max(-1), rtol=1e-14)


def test_trace_step_traffic_adds_up():
    # FA1 steps carry Q_i, O_i, l_i, m_i; the counter also has K, V and the initial O, l, m
    q, k, v = _qkv(np.random.default_rng(13), 1, 2, 2, 9, 9, 4)
    io, tr = T.IOCounter(), FlashTrace()
    flash_attention(q, k, v, block_q=4, block_k=4, version=1, io=io, trace=tr)
    assert sum(s.loads for s in tr.steps) == io.total_loads - io.loads["K"] - io.loads["V"]
    assert sum(s.stores for s in tr.steps) == io.total_stores - 2 * 9 * (4 + 2)


# --- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,err,word", [
    (dict(block_q=0), ValueError, "block_q"), (dict(block_k=2.5), ValueError, "block_k"),
    (dict(block_q=True), ValueError, "block_q"), (dict(causal="yes"), TypeError, "causal"),
    (dict(version=3), ValueError, "version"),
])
def test_bad_options(kwargs, err, word):
    q = np.zeros((1, 2, 4, 4))
    with pytest.raises(err, match=word):
        flash_attention(q, q, q, **kwargs)


def test_bad_arrays():
    q = np.zeros((1, 3, 4, 4))
    with pytest.raises(ValueError, match="h_kv"):
        flash_attention(q, np.zeros((1, 2, 4, 4)), np.zeros((1, 2, 4, 4)))
    with pytest.raises(TypeError, match="q"):
        flash_attention(q.astype(np.int64), q, q)
    with pytest.raises(ValueError, match="4 dims"):
        flash_attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="lse"):
        flash_attention_backward(q, q, q, q, q, np.zeros((1, 3, 5)))
    with pytest.raises(ValueError, match="trace"):
        flash_attention(q, q, q, trace=FlashTrace(head=3))


# --- backward --------------------------------------------------------------------------------------

def _torch_grads(dout, q, k, v, causal):  # autograd through torch SDPA, float64
    tq, tk, tv = (torch.tensor(t, requires_grad=True) for t in (q, k, v))
    mask = torch.from_numpy(_causal(q.shape[2], k.shape[2])) if causal else None
    out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask, enable_gqa=True)
    out.backward(torch.from_numpy(dout))
    return tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, block_q=st.integers(1, 30), block_k=st.integers(1, 30), causal=st.booleans(),
       seed=st.integers(0, 2**16))
def test_backward_equals_torch_autograd(shape, block_q, block_k, causal, seed):
    b, (h, h_kv), n_q, n_k, d_h = shape
    if causal:
        n_q = min(n_q, n_k)  # torch returns NaN for rows that see no key; those are tested below
    rng = np.random.default_rng(seed)
    q, k, v = _qkv(rng, b, h, h_kv, n_q, n_k, d_h)
    dout = rng.standard_normal(q.shape)
    out, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    ours = flash_attention_backward(dout, q, k, v, out, lse, causal=causal, block_q=block_q, block_k=block_k)
    naive = attention_backward_naive(dout, q, k, v, causal=causal)
    for a, n, r in zip(ours, naive, _torch_grads(dout, q, k, v, causal)):
        assert a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-10)
        np.testing.assert_allclose(n, r, rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal,n_q,n_k", [(False, 7, 9), (True, 9, 9), (True, 9, 5)])
def test_backward_equals_finite_differences(causal, n_q, n_k):
    # f(q, k, v) = Σ dO ∘ O; its directional derivative along u by central differences
    rng = np.random.default_rng(14)
    q, k, v = _qkv(rng, 1, 4, 2, n_q, n_k, 3)
    dout = rng.standard_normal(q.shape)
    out, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    grads = flash_attention_backward(dout, q, k, v, out, lse, causal=causal, block_q=4, block_k=2)
    eps = 1e-5
    for idx, g in enumerate(grads):
        u = rng.standard_normal(g.shape)

        def f(t):
            args = [q, k, v]
            args[idx] = args[idx] + t * u
            return np.sum(dout * flash_attention(*args, causal=causal, block_q=3, block_k=4))

        fd = (f(eps) - f(-eps)) / (2 * eps)  # error O(eps²) ≈ 1e-10, rounding ≈ 1e-16/eps ≈ 1e-11
        np.testing.assert_allclose(np.sum(g * u), fd, rtol=1e-7, atol=1e-8)


def test_backward_on_every_backend(xp):
    rng = np.random.default_rng(15)
    q, k, v = _qkv(rng, 1, 4, 2, 10, 12, 4)
    dout = rng.standard_normal(q.shape)
    ref = _torch_grads(dout, q, k, v, True)
    X = [asarray(xp, t) for t in (dout, q, k, v)]
    out, lse = flash_attention(*X[1:], causal=True, return_lse=True)
    for grads in (flash_attention_backward(*X, out, lse, causal=True, block_q=3, block_k=5),
                  attention_backward_naive(*X, causal=True)):
        for a, r in zip(grads, ref):
            np.testing.assert_allclose(T.to_numpy(a), r, atol=1e-10)


def test_backward_rows_that_see_nothing_get_zero_gradient():
    rng = np.random.default_rng(16)
    q, k, v = _qkv(rng, 1, 2, 2, 8, 3, 4)  # causal: rows 0..4 sit before the first key
    dout = rng.standard_normal(q.shape)
    out, lse = flash_attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = flash_attention_backward(dout, q, k, v, out, lse, causal=True, block_q=3, block_k=2)
    assert np.all(dq[:, :, :5] == 0) and np.all(np.isfinite(dk)) and np.all(np.isfinite(dv))
    # the remaining rows are an ordinary causal problem of 3 queries and 3 keys
    ref = _torch_grads(dout[:, :, 5:], q[:, :, 5:], k, v, True)
    for a, r in zip((dq[:, :, 5:], dk, dv), ref):
        np.testing.assert_allclose(a, r, atol=1e-10)


def test_backward_float16():
    rng = np.random.default_rng(17)
    q, k, v = _qkv(rng, 1, 2, 1, 40, 40, 8)
    dout = rng.standard_normal(q.shape)
    h16 = [t.astype(np.float16) for t in (dout, q, k, v)]
    out, lse = flash_attention(*h16[1:], causal=True, return_lse=True, block_q=16, block_k=16)
    grads = flash_attention_backward(*h16, out, lse, causal=True, block_q=16, block_k=16)
    ref = _torch_grads(*(t.astype(np.float64) for t in h16), True)
    for a, r in zip(grads, ref):
        assert a.dtype == np.float16
        # out is rounded to float16 before D = rowsum(dO ∘ O): a few float16 ulps of error
        np.testing.assert_allclose(a.astype(np.float64), r, rtol=0, atol=2e-2 * np.abs(r).max())


@pytest.mark.parametrize("causal", [False, True])
def test_backward_large_logits_equal_torch_autograd(causal):
    # every row's scores spread over more than 1e3 (e^1000 overflows even float64): P_ij =
    # e^(S_ij - L_i) needs the saved log-sum-exp to be exact, or the gradients overflow or vanish
    rng = np.random.default_rng(19)
    q, k, v = _qkv(rng, 1, 4, 2, 13, 17, 8, spread=30.0)
    s = np.einsum("bhqd,bhkd->bhqk", q, np.repeat(k, 2, axis=1)) / math.sqrt(8)
    assert np.ptp(s, axis=-1).min() > 1e3
    dout = rng.standard_normal(q.shape)
    out, lse = flash_attention(q, k, v, causal=causal, return_lse=True, block_q=5, block_k=6)
    grads = flash_attention_backward(dout, q, k, v, out, lse, causal=causal, block_q=5, block_k=6)
    for a, r in zip(grads, _torch_grads(dout, q, k, v, causal)):
        assert np.isfinite(a).all()
        # P is almost one-hot, so dQ and dK are ~1e-6 (dV ~ 1): measured |Δ| ≤ 5e-14 on dQ, dK
        # (rounding of dP - D ~ 1e-16, times |K|·scale ~ 30) and ≤ 3e-12 on dV
        np.testing.assert_allclose(a, r, rtol=1e-6, atol=1e-12)


def test_backward_float32_large_scores_rebuild_the_forwards_probabilities():
    """Scores up to ~4e3 in float32, P almost one-hot: P_ij = e^(S_ij − L_i) is 1 only if the backward
    rounds S_ij as the forward did, (Q·scale) Kᵀ. Rounded as (Q Kᵀ)·scale it was a few ulps of 4e3
    (5e-4 each) off the saved max, and dV off by 1.2e-3. Reference: torch autograd in float64."""
    rng = np.random.default_rng(19)
    q, k, v = _qkv(rng, 1, 4, 2, 13, 17, 8, dtype=np.float32, spread=30.0)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    out, lse = flash_attention(q, k, v, return_lse=True, block_q=5, block_k=6)
    dv = flash_attention_backward(dout, q, k, v, out, lse, block_q=5, block_k=6)[2]
    ref = _torch_grads(*(t.astype(np.float64) for t in (dout, q, k, v)), False)[2]
    # measured max |Δ| 3e-7 (float32 sums of dO), against |dV| ≤ 7.4
    np.testing.assert_allclose(dv, ref, rtol=0, atol=1e-6 * np.abs(ref).max())


def test_backward_bfloat16_torch_tensors():
    """bfloat16 torch tensors: every tile in float32, the gradients rounded once to bfloat16.
    Reference: torch autograd in float64 on the same bfloat16 values."""
    g = torch.Generator().manual_seed(1)
    dout, q, k, v = (torch.randn(1, h, 24, 16, generator=g, dtype=torch.float64).to(torch.bfloat16)
                     for h in (4, 4, 2, 2))
    out, lse = flash_attention(q, k, v, causal=True, block_q=8, block_k=8, return_lse=True)
    grads = flash_attention_backward(dout, q, k, v, out, lse, causal=True, block_q=8, block_k=8)
    ref = _torch_grads(*(t.double().numpy() for t in (dout, q, k, v)), True)
    for a, r in zip(grads, ref):
        assert a.dtype == torch.bfloat16
        # out is rounded to bfloat16 (2⁻⁹ relative) before D = rowsum(dO ∘ O), and the inputs of
        # every tile are bfloat16: measured max |Δ| ≈ 3e-3 of the largest gradient
        np.testing.assert_allclose(a.double().numpy(), r, rtol=0, atol=1e-2 * np.abs(r).max())


def test_backward_never_forms_the_score_matrix():
    n, heads = 1024, 2
    rng = np.random.default_rng(18)
    q, k, v = _qkv(rng, 1, heads, heads, n, n, 16)
    dout = rng.standard_normal(q.shape)
    out, lse = flash_attention(q, k, v, causal=True, return_lse=True)
    flash_attention_backward(dout, q, k, v, out, lse, causal=True)  # warm-up
    _, flash_peak = T.measure_peak_bytes(flash_attention_backward, dout, q, k, v, out, lse, causal=True)
    _, naive_peak = T.measure_peak_bytes(attention_backward_naive, dout, q, k, v, causal=True)
    one_matrix = heads * n * n * 8  # one n × n float64 array per head
    assert naive_peak >= 2 * one_matrix
    assert flash_peak < one_matrix / 4


def test_value_head_size_must_equal_query_head_size():
    q = np.zeros((1, 2, 5, 8))
    with pytest.raises(ValueError, match=r"v d_h=4, q d_h=8"):
        T.flash_attention(q, q, q[..., :4])


# --- the fast CPU forward (tiled_fast.py) ------------------------------------------------------------

def _torch_sdpa(q, k, v, causal):  # torch SDPA in float64, explicit mask for any n_q, n_k; a row that sees no key -> 0
    tq, tk, tv = (torch.from_numpy(np.asarray(t, np.float64)) for t in (q, k, v))
    mask = torch.from_numpy(_causal(q.shape[2], k.shape[2])) if causal else None
    out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask, enable_gqa=True)
    return torch.nan_to_num(out, nan=0.0).numpy()  # torch's math path gives NaN where the row is all masked


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n_q,n_k", [(77, 77), (50, 70), (70, 40)])  # not multiples of the blocks; 70 > 40: 30 empty rows
@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,atol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_fast_equals_torch_naive_and_readable(dtype, atol, causal, h, h_kv, n_q, n_k, threads):
    """The fast path against torch SDPA and the core's naive attention (both on the float64 values of
    the same inputs), and against the readable loop it rewrites, block for block. float32: each output
    is a weighted mean of values ~1, so the rounding of S, e^S and the sums leaves ~1e-7; 2e-6 is loose."""
    q, k, v = (t.astype(dtype) for t in _qkv(np.random.default_rng(20), 2, h, h_kv, n_q, n_k, 16))
    out, lse = T.flash_attention_fast(q, k, v, causal=causal, block_q=16, block_k=24, threads=threads,
                                      return_lse=True)
    assert out.dtype == lse.dtype == dtype and out.shape == q.shape and lse.shape == q.shape[:3]
    np.testing.assert_allclose(out, _torch_sdpa(q, k, v, causal), rtol=0, atol=atol)
    np.testing.assert_allclose(out, _reference(*(t.astype(np.float64) for t in (q, k, v)), causal), rtol=0, atol=atol)
    readable, readable_lse = flash_attention(q, k, v, causal=causal, block_q=16, block_k=24, return_lse=True)
    np.testing.assert_allclose(out, readable, rtol=0, atol=atol)
    ref_lse = _torch_lse(q, k, causal)
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse)) and np.array_equal(np.isneginf(lse),
                                                                                      np.isneginf(readable_lse))
    if causal and n_q > n_k:  # rows 0 … n_q - n_k - 1 sit before the first key
        assert np.all(out[:, :, :n_q - n_k] == 0) and np.all(np.isneginf(lse[:, :, :n_q - n_k]))
    ok = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[ok], ref_lse[ok], rtol=0, atol=atol * 4)  # lse ~ log n_k + max s ≈ 4


@SETTINGS
@given(shape=SHAPES, block_q=st.integers(1, 30), block_k=st.integers(1, 30), causal=st.booleans(),
       threads=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_fast_equals_readable_float64(shape, block_q, block_k, causal, threads, seed):
    b, (h, h_kv), n_q, n_k, d_h = shape
    q, k, v = _qkv(np.random.default_rng(seed), b, h, h_kv, n_q, n_k, d_h)
    out, lse = T.flash_attention_fast(q, k, v, causal=causal, block_q=block_q, block_k=block_k,
                                      threads=threads, return_lse=True)
    np.testing.assert_allclose(out, _reference(q, k, v, causal), rtol=0, atol=1e-12)
    readable, readable_lse = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k,
                                             return_lse=True)
    np.testing.assert_allclose(out, readable, rtol=0, atol=1e-13)
    assert np.array_equal(np.isneginf(lse), np.isneginf(readable_lse))
    ok = np.isfinite(readable_lse)
    np.testing.assert_allclose(lse[ok], readable_lse[ok], rtol=0, atol=1e-13)


def test_fast_large_logits_and_custom_scale():
    # scores ~1e3 overflow e^s unless each tile subtracts the running max
    q, k, v = _qkv(np.random.default_rng(21), 1, 4, 2, 40, 50, 8, spread=15.0)
    for causal in (False, True):
        out = T.flash_attention_fast(q, k, v, causal=causal, block_q=7, block_k=6, threads=2)
        np.testing.assert_allclose(out, _torch_sdpa(q, k, v, causal), rtol=0, atol=1e-10)
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v)), scale=0.3, enable_gqa=True)
    np.testing.assert_allclose(T.flash_attention_fast(q, k, v, scale=0.3, block_q=9), ref.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fast_half_precision_accumulates_in_float32(dtype):
    import ml_dtypes  # NumPy's bfloat16
    dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    q, k, v = (t.astype(dt) for t in _qkv(np.random.default_rng(22), 1, 4, 2, 50, 70, 16))
    out, lse = T.flash_attention_fast(q, k, v, causal=True, block_q=16, block_k=16, threads=2, return_lse=True)
    assert out.dtype == dt and lse.dtype == np.float32
    ref = _torch_sdpa(*(t.astype(np.float64) for t in (q, k, v)), True)
    # only the rounding of the output to the input's type is left: half an ulp, 2⁻¹¹ (float16) or 2⁻⁸ relative
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=ulp, atol=ulp / 16)


def test_fast_restores_the_blas_threads():
    from threadpoolctl import threadpool_info
    before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    q, k, v = _qkv(np.random.default_rng(23), 1, 2, 2, 64, 64, 8)
    T.flash_attention_fast(q, k, v, block_q=16, threads=2)
    assert [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"] == before


def test_cache_bytes_reads_sysfs(tmp_path):
    # a CPU as Linux describes it: the L1 instruction cache (64K here) must not be taken for the data one
    for i, (level, kind, size) in enumerate([("1", "Instruction", "64K"), ("1", "Data", "32K"),
                                             ("2", "Unified", "1024K"), ("3", "Unified", "32M")]):
        (tmp_path / f"index{i}").mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (tmp_path / f"index{i}" / name).write_text(text + "\n")
    assert [T.cache_bytes(lvl, tmp_path) for lvl in (1, 2, 3)] == [32 * 1024, 1024 * 1024, 32 * 1024 * 1024]
    assert T.cache_bytes(2, tmp_path / "absent") > 0  # sysconf, or the fallback


@pytest.mark.parametrize("d_h,itemsize,l2,B", [
    (64, 4, 2 ** 20, 256),   # (256² + 5·256·64)·4 = 576 KiB ≤ 1 MiB; 512 would need 1.6 MiB
    (64, 8, 2 ** 20, 128),   # float64: 256 needs 1.15 MiB
    (64, 4, 2 ** 19, 128),   # a 512 KiB L2
    (128, 4, 2 ** 21, 256),  # 512 needs (262144 + 327680)·4 = 2.25 MiB > 2 MiB
    (64, 4, 1024, 64),       # never below 64
])
def test_fast_block_size_hand_worked(d_h, itemsize, l2, B):
    assert T.fast_block_size(d_h, itemsize, l2) == B


def _fast_peak_vs_formula(n, h, d_h, block, threads, causal):
    q, k, v = (t.astype(np.float32) for t in _qkv(np.random.default_rng(24), 1, h, h, n, n, d_h))
    T.flash_attention_fast(q, k, v, causal=causal, block_q=block, block_k=block, threads=threads)  # warm-up
    _, peak = T.measure_peak_bytes(T.flash_attention_fast, q, k, v, causal=causal, block_q=block, block_k=block,
                                   threads=threads)
    return peak, T.flash_attention_fast_peak_bytes(1, h, n, n, d_h, 4, block, block, threads, causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_peak_memory_equals_formula_and_beats_naive(causal, threads):
    """tracemalloc's peak against the formula, and against the naive path's two n × n buffers, measured."""
    n, h, d_h = 1024, 4, 32
    peak, formula = _fast_peak_vs_formula(n, h, d_h, 128, threads, causal)
    # the formula is NumPy's buffers; Python's own objects (frames, the pool's threads) add a few KiB
    assert abs(peak - formula) < 0.01 * formula + 2 ** 16, (peak, formula)
    q = np.zeros((1, h, n, d_h), np.float32)
    _, naive = T.measure_peak_bytes(standard_attention, q, q, q, causal=causal)
    assert naive >= 2 * h * n * n * 4  # S and P whole
    assert peak < naive / 10


def test_fast_peak_memory_at_4096_is_under_2_percent_of_naive():
    """The benchmark's size (b = 1, h = 8, d_h = 64, float32, two workers) at the block the cache rule gives
    the benchmark's CPU (L2 = 1 MiB a core: B = 256; a CPU with 2 MiB takes B = 512 and twice the tile
    memory, 3 %): measured within 2 % of the formula, and at most 2 % of the naive path's peak (its formula,
    itself checked against tracemalloc in test_io_count.py; measuring it here would take 1 GiB)."""
    n, h, d_h = 4096, 8, 64
    block = T.fast_block_size(d_h, 4, l2=1 << 20)  # not this machine's L2: the bound is the benchmark's
    peak, formula = _fast_peak_vs_formula(n, h, d_h, block, 2, True)
    assert abs(peak / formula - 1) < 0.02, (peak, formula)
    assert peak <= 0.02 * T.standard_attention_peak_bytes(1, h, n, n, d_h, 4, causal=True), (block, peak)


def test_fast_bad_input():
    q = np.zeros((1, 2, 4, 4))
    with pytest.raises(TypeError, match="NumPy arrays"):
        T.flash_attention_fast(torch.zeros(1, 2, 4, 4), q, q)
    with pytest.raises(ValueError, match="threads"):
        T.flash_attention_fast(q, q, q, threads=0)
    with pytest.raises(ValueError, match="block_q"):
        T.flash_attention_fast(q, q, q, block_q=0)
    with pytest.raises(ValueError, match="h_kv"):
        T.flash_attention_fast(np.zeros((1, 3, 4, 4)), q, q)
