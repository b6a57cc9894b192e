"""Mask builders against their definitions written as plain Python loops."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import transformer as T
from conftest import asarray

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def loop_mask(n_q, n_k, allow):
    return np.array([[allow(i, j) for j in range(n_k)] for i in range(n_q)], dtype=bool)


@SETTINGS
@given(n_q=st.integers(1, 10), extra=st.integers(0, 6))
def test_causal_with_cache_offset(xp, n_q, extra):
    n_k = n_q + extra  # `extra` cached tokens come before the n_q new queries
    ours = T.to_numpy(T.causal_mask(n_q, n_k, xp=xp))
    np.testing.assert_array_equal(ours, loop_mask(n_q, n_k, lambda i, j: j <= i + extra))


def test_causal_matches_torch_is_causal_convention():
    import torch
    # torch's is_causal uses the top-left diagonal; for n_q == n_k both agree with tril.
    np.testing.assert_array_equal(T.causal_mask(5), torch.ones(5, 5, dtype=torch.bool).tril().numpy())
    np.testing.assert_array_equal(T.causal_mask(1, 6), np.ones((1, 6), bool))  # the decode row sees all


def test_bidirectional_and_padding(xp):
    assert T.to_numpy(T.bidirectional_mask(3, 4, xp=xp)).all()
    pad = T.to_numpy(T.padding_mask(asarray(xp, np.array([2, 4, 0])), 4))
    assert pad.shape == (3, 1, 1, 4)
    np.testing.assert_array_equal(pad[:, 0, 0], [[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        T.padding_mask(np.array([5]), 3)


@SETTINGS
@given(n=st.integers(1, 12), w=st.integers(1, 14))
def test_sliding_window(xp, n, w):
    np.testing.assert_array_equal(T.to_numpy(T.sliding_window_mask(n, w, xp=xp)),
                                  loop_mask(n, n, lambda i, j: i - w < j <= i))
    np.testing.assert_array_equal(T.to_numpy(T.sliding_window_mask(n, w, causal=False, xp=xp)),
                                  loop_mask(n, n, lambda i, j: abs(i - j) < w))


@SETTINGS
@given(n=st.integers(1, 20), stride=st.integers(1, 6))
def test_strided_sparse_transformer(xp, n, stride):
    # Child et al. 2019: A1 = {j : i - j < l}, A2 = {j : (i - j) mod l = 0}, both causal.
    ref = loop_mask(n, n, lambda i, j: j <= i and (i - j < stride or (i - j) % stride == 0))
    np.testing.assert_array_equal(T.to_numpy(T.strided_mask(n, stride, xp=xp)), ref)


@SETTINGS
@given(n=st.integers(1, 20), block=st.integers(1, 6), c=st.integers(1, 6))
def test_fixed_sparse_transformer(xp, n, block, c):
    if c > block:
        with pytest.raises(ValueError, match=f"c must be ≤ block={block}.*got c={c}"):
            T.fixed_mask(n, block, c, xp=xp)
        return
    # A1 = {j : ⌊j/l⌋ = ⌊i/l⌋}, A2 = {j : j mod l ∈ {l-c, …, l-1}}, both causal.
    ref = loop_mask(n, n, lambda i, j: j <= i and (j // block == i // block or j % block >= block - c))
    np.testing.assert_array_equal(T.to_numpy(T.fixed_mask(n, block, c, xp=xp)), ref)


def test_global_tokens(xp):
    g = [0, 5]
    ref = loop_mask(7, 7, lambda i, j: i in g or j in g)
    np.testing.assert_array_equal(T.to_numpy(T.global_mask(7, g, xp=xp)), ref)
    assert not T.to_numpy(T.global_mask(3, [], xp=xp)).any()
    with pytest.raises(ValueError, match=r"\[0, 7\).*\[9\]"):
        T.global_mask(7, [1, 9])


def test_random_is_seeded_and_has_k_per_row(xp):
    a = T.to_numpy(T.random_mask(10, 3, seed=1, xp=xp))
    assert (a.sum(1) == 3).all()
    np.testing.assert_array_equal(a, T.to_numpy(T.random_mask(10, 3, seed=1, xp=xp)))
    assert not np.array_equal(a, T.to_numpy(T.random_mask(10, 3, seed=2, xp=xp)))
    c = T.to_numpy(T.random_mask(10, 3, seed=0, causal=True, xp=xp))
    assert not np.triu(c, 1).any() and (c.sum(1) == np.minimum(np.arange(1, 11), 3)).all()


def test_combinations_and_cost(xp):
    n = 16
    big_bird = T.sliding_window_mask(n, 3, causal=False, xp=xp) | T.global_mask(n, [0], xp=xp) \
        | T.random_mask(n, 2, seed=0, xp=xp)
    causal_local = T.causal_mask(n, xp=xp) & T.sliding_window_mask(n, 4, causal=False, xp=xp)
    np.testing.assert_array_equal(T.to_numpy(causal_local), T.to_numpy(T.sliding_window_mask(n, 4, xp=xp)))
    assert T.attended_pairs(T.causal_mask(n, xp=xp)) == n * (n + 1) // 2
    assert T.attended_pairs(T.bidirectional_mask(n, xp=xp)) == n * n
    assert T.attended_pairs(big_bird) == int(T.to_numpy(big_bird).sum())


def test_bad_mask_arguments():
    with pytest.raises(ValueError, match="w=0"):
        T.sliding_window_mask(4, 0)
    with pytest.raises(ValueError, match="stride=0"):
        T.strided_mask(4, 0)
    with pytest.raises(ValueError, match="offset=-2"):
        T.causal_mask(4, 2)
