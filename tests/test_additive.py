"""Additive (Bahdanau) attention against a hand-worked example, its definition as plain loops
with math.tanh, and the same network written in torch (nn.Linear layers, as Bahdanau
attention modules are usually written)."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import transformer as T
from conftest import asarray

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def loop_scores(q, k, W_q, W_k, w):  # (n_q, d_q), (n_k, d_k) -> (n_q, n_k), one pair at a time
    d_a = w.shape[0]
    return np.array([[sum(w[a] * math.tanh(sum(q[i, c] * W_q[c, a] for c in range(q.shape[1]))
                                            + sum(k[j, c] * W_k[c, a] for c in range(k.shape[1])))
                          for a in range(d_a))
                      for j in range(k.shape[0])] for i in range(q.shape[0])])


def test_hand_worked_example():
    """d_a = 1, W_q = W_k = 1, w = 2: e = 2·tanh(0.5 + 0.5) = 1.52318 and 2·tanh(0.5 − 0.5) = 0;
    softmax([1.52318, 0]) = [1 / (1 + e^−1.52318), …] = [1 / 1.21802, …] = [0.82101, 0.17899]."""
    one = np.ones((1, 1))
    q, k, v = np.array([[0.5]]), np.array([[0.5], [-0.5]]), np.array([[10.0], [20.0]])
    out, p = T.additive_attention(q, k, v, one, one, np.array([2.0]), return_weights=True)
    np.testing.assert_allclose(p, [[0.82101, 0.17899]], atol=1e-5)
    np.testing.assert_allclose(out, [[10 * 0.82101 + 20 * 0.17899]], atol=1e-4)


def test_scores_equal_the_loop_definition(rng):
    q, k = rng.standard_normal((3, 5)), rng.standard_normal((4, 2))  # d_q = 5 ≠ d_k = 2: allowed
    W_q, W_k, w = rng.standard_normal((5, 6)), rng.standard_normal((2, 6)), rng.standard_normal(6)
    np.testing.assert_allclose(T.additive_scores(q, k, W_q, W_k, w), loop_scores(q, k, W_q, W_k, w),
                               atol=1e-12)


@pytest.mark.parametrize("masked", [False, True])
def test_attention_equals_torch_linear_layers(rng, masked):
    """(b, h) leading dims, float32, with and without a causal mask, against torch."""
    torch = pytest.importorskip("torch")
    b, h, n, d_h, d_a = 2, 3, 5, 8, 7
    q, k, v = (rng.standard_normal((b, h, n, d_h)).astype(np.float32) for _ in range(3))
    W_q, W_k = (rng.standard_normal((d_h, d_a)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(d_a).astype(np.float32)
    mask = T.causal_mask(n) if masked else None
    ours, p = T.additive_attention(q, k, v, W_q, W_k, w, mask, return_weights=True)

    lin_q, lin_k, lin_w = (torch.nn.Linear(i, o, bias=False) for i, o in ((d_h, d_a), (d_h, d_a), (d_a, 1)))
    with torch.no_grad():
        lin_q.weight.copy_(torch.from_numpy(W_q.T)), lin_k.weight.copy_(torch.from_numpy(W_k.T))
        lin_w.weight.copy_(torch.from_numpy(w[None, :]))
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        e = lin_w(torch.tanh(lin_q(tq).unsqueeze(-2) + lin_k(tk).unsqueeze(-3))).squeeze(-1)  # (b, h, n, n)
        if masked:
            e = e.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        weights = torch.softmax(e, dim=-1)
        expected = weights @ tv
    np.testing.assert_allclose(p, weights.numpy(), atol=1e-6)
    np.testing.assert_allclose(ours, expected.numpy(), atol=1e-5)
    assert ours.dtype == np.float32


@SETTINGS
@given(scale=st.floats(1e-2, 1e4), d_k=st.sampled_from([4, 64, 1024]))
def test_scores_stay_within_the_l1_norm_of_w_however_large_q_and_k(scale, d_k):
    """tanh ∈ (−1, 1), so |e_ij| ≤ ‖w‖₁ for any q, k: the score cannot grow with d_k or with |q|."""
    rng = np.random.default_rng(d_k)
    q, k = scale * rng.standard_normal((3, d_k)), scale * rng.standard_normal((4, d_k))
    W_q, W_k, w = rng.standard_normal((d_k, 5)), rng.standard_normal((d_k, 5)), rng.standard_normal(5)
    e = T.additive_scores(q, k, W_q, W_k, w)
    assert np.all(np.isfinite(e)) and np.abs(e).max() <= np.abs(w).sum() + 1e-12


def test_on_each_backend_and_all_masked_rows(xp, rng):
    q, k, v = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 3, 4))
    W_q, W_k, w = rng.standard_normal((4, 5)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])  # row 1 sees nothing
    ref = T.additive_attention(q, k, v, W_q, W_k, w, mask)
    got = T.additive_attention(*(asarray(xp, a) for a in (q, k, v, W_q, W_k, w)), asarray(xp, mask))
    np.testing.assert_allclose(T.to_numpy(got), ref, atol=1e-12)
    assert (ref[..., 1, :] == 0).all()


def test_peak_bytes_formula_equals_tracemalloc(rng):
    """2 · n_q · n_k · d_a floats: the pair tensor and its tanh, alive together."""
    n, d, d_a = 96, 16, 24
    q, k = rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((n, d)).astype(np.float32)
    W = rng.standard_normal((d, d_a)).astype(np.float32)
    w = rng.standard_normal(d_a).astype(np.float32)
    T.measure_peak_bytes(T.additive_scores, q, k, W, W, w)  # first call: one-off buffers of NumPy itself
    _, peak = T.measure_peak_bytes(T.additive_scores, q, k, W, W, w)
    extra = 2 * n * d_a * 4  # the two projections (the (n, n) result comes once the sum is freed)
    assert T.additive_peak_bytes(n, n, d_a) == 2 * n * n * d_a * 4
    assert abs(peak - T.additive_peak_bytes(n, n, d_a) - extra) < 0.01 * peak


def test_bad_input_is_named(rng):
    q, k = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    W, w = rng.standard_normal((4, 6)), rng.standard_normal(6)
    with pytest.raises(ValueError, match=r"W_q \(3, 6\) must start with q's size d_q=4"):
        T.additive_scores(q, k, rng.standard_normal((3, 6)), W, w)
    with pytest.raises(ValueError, match=r"must share d_a"):
        T.additive_scores(q, k, W, W, rng.standard_normal(5))
    with pytest.raises(ValueError, match=r"need W_q \(d_q, d_a\), W_k \(d_k, d_a\), w \(d_a,\)"):
        T.additive_scores(q, k, W, W, W)
    with pytest.raises(TypeError, match="k must be a floating-point array, got dtype int64"):
        T.additive_scores(q, np.ones((5, 4), dtype=np.int64), W, W, w)
    with pytest.raises(ValueError, match=r"k \(5, 4\) and v \(4, 4\) must agree"):
        T.additive_attention(q, k, rng.standard_normal((4, 4)), W, W, w)
