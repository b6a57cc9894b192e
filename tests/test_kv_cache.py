"""The contiguous KV cache: concatenation of past keys/values, written by slice; bytes vs formula."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer as T
from conftest import asarray


@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_cache_reads_back_the_concatenation_of_everything_written(xp, rng, h_kv):
    L, b, d_h = 2, 2, 4
    cache = T.KVCache(L, b, h_kv, 10, d_h, dtype=xp.float64, xp=xp)
    chunks = [rng.standard_normal((b, h_kv, t, d_h)) for t in (4, 1, 1, 3)]  # prefill, then decode steps
    for step, c in enumerate(chunks):
        for layer in range(L):
            k, v = cache.update(layer, asarray(xp, c), asarray(xp, 2 * c))
        cache.advance(c.shape[2])
        want = np.concatenate(chunks[:step + 1], axis=2)  # note 004: K_cache = concat(K_past, k_new)
        np.testing.assert_array_equal(T.to_numpy(k), want)
        np.testing.assert_array_equal(T.to_numpy(v), 2 * want)
    assert cache.length == 9


@pytest.mark.parametrize("h_kv", [9, 3, 1])  # SmolLM2-135M has h = 9 query heads and h_kv = 3
def test_cache_bytes_equal_formula(xp, h_kv):
    L, b, n_max, d_h = 30, 2, 128, 64  # SmolLM2-135M's L, d_h
    cache = T.KVCache(L, b, h_kv, n_max, d_h, dtype=xp.float32, xp=xp)
    assert cache.nbytes == 2 * L * b * h_kv * n_max * d_h * 4  # K and V · layers · batch · heads · tokens · dim · fp32


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_cached_attention_of_last_token_equals_full_causal_attention(xp, rng, h, h_kv):
    """Decode reads the cache: the new token's output equals the last row of full causal
    attention, computed by torch SDPA (enable_gqa) on the whole sequence."""
    n, d_h = 6, 8
    q, k, v = (rng.standard_normal((1, hh, n, d_h)) for hh in (h, h_kv, h_kv))
    full = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True,
                                          enable_gqa=True).numpy()
    cache = T.KVCache(1, 1, h_kv, n, d_h, dtype=xp.float64, xp=xp)
    cache.update(0, asarray(xp, k[:, :, :-1]), asarray(xp, v[:, :, :-1]))
    cache.advance(n - 1)
    kk, vv = cache.update(0, asarray(xp, k[:, :, -1:]), asarray(xp, v[:, :, -1:]))
    step = T.scaled_dot_product_attention(asarray(xp, q[:, :, -1:]), kk, vv, T.causal_mask(1, n, xp=xp))
    np.testing.assert_allclose(T.to_numpy(step), full[:, :, -1:], rtol=1e-12, atol=1e-14)


def test_overflow_and_bad_sizes_are_refused():
    cache = T.KVCache(1, 1, 1, 4, 2)
    cache.update(0, np.zeros((1, 1, 3, 2), np.float32), np.zeros((1, 1, 3, 2), np.float32))
    cache.advance(3)
    with pytest.raises(ValueError, match=r"3 cached \+ 2 new tokens > n_max=4"):
        cache.update(0, np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="h_kv=0"):
        T.KVCache(1, 1, 0, 4, 2)
