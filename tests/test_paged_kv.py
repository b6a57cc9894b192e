"""The paged KV cache against the contiguous one: same keys/values, same attention, same
generated tokens; its reserved/used byte counts against the block formula."""
import math

import numpy as np
import pytest

import transformer as T
from transformer.models.configs import ModelConfig
from transformer.models.counting import paged_memory_report
from transformer.core.paged_kv import PagedKVCache, paged_attention

from conftest import BACKENDS, asarray, fresh_llama


def _to_np(a):
    return T.to_numpy(a)


@pytest.mark.parametrize("h_kv", [4, 2, 1])
@pytest.mark.parametrize("block_size", [3, 5, 16])
def test_update_returns_what_the_contiguous_cache_returns(xp, rng, h_kv, block_size):
    L, b, n_max, d_h = 2, 2, 23, 4
    dense = T.KVCache(L, b, h_kv, n_max, d_h, xp=xp)
    paged = PagedKVCache(L, b, h_kv, n_max, d_h, block_size=block_size, xp=xp)
    for t in (7, 1, 1, 4, 1):  # a prompt, then decode steps and a chunk
        for layer in range(L):
            k = asarray(xp, rng.standard_normal((b, h_kv, t, d_h)), np.float32)
            v = asarray(xp, rng.standard_normal((b, h_kv, t, d_h)), np.float32)
            kd, vd = dense.update(layer, k, v)
            kp, vp = paged.update(layer, k, v)
            np.testing.assert_array_equal(_to_np(kp), _to_np(kd))
            np.testing.assert_array_equal(_to_np(vp), _to_np(vd))
        dense.advance(t)
        paged.advance(t)
        assert paged.length == dense.length
    assert paged.blocks_in_use == b * math.ceil(paged.length / block_size)


def _interleaved_cache(xp, rng, lengths, h_kv, d_h, block_size, L=1, dtype=np.float32, spread=1.0):
    """Sequences written a few tokens at a time in turn, so their blocks interleave in the pool;
    also returns each sequence's K/V as plain contiguous arrays (the reference), holding the
    values as stored (rounded to dtype)."""
    cache = PagedKVCache(L, 0, h_kv, max(lengths), d_h, block_size=block_size, dtype=asarray(xp, 0, dtype).dtype,
                         n_blocks=sum(math.ceil(n / block_size) for n in lengths) + 2, xp=xp)
    seqs = [cache.add_sequence() for _ in lengths]
    ref = {s: [[(rng.standard_normal((h_kv, n, d_h)) * spread).astype(dtype).astype(np.float64) for _ in range(2)]
                for _ in range(L)] for s, n in zip(seqs, lengths)}
    pos = dict.fromkeys(seqs, 0)
    while any(pos[s] < n for s, n in zip(seqs, lengths)):
        for s, n in zip(seqs, lengths):
            t = min(3, n - pos[s])
            if t == 0:
                continue
            for layer in range(L):
                kr, vr = ref[s][layer]
                cache.write(s, layer, asarray(xp, kr[:, pos[s]:pos[s] + t], dtype),
                            asarray(xp, vr[:, pos[s]:pos[s] + t], dtype))
            cache.extend(s, t)
            pos[s] += t
    return cache, seqs, ref


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (6, 1)])
@pytest.mark.parametrize("block_size", [4, 7])
@pytest.mark.parametrize("n_q", [1, 5])
def test_paged_attention_equals_contiguous_attention(xp, rng, h, h_kv, block_size, n_q):
    d_h, lengths = 8, [19, 6, 33]
    cache, seqs, ref = _interleaved_cache(xp, rng, lengths, h_kv, d_h, block_size)
    assert any(t != sorted(t) or t[-1] - t[0] != len(t) - 1 for t in cache.tables.values() if len(t) > 1)
    for s, n in zip(seqs, lengths):
        kr, vr = ref[s][0]
        q = asarray(xp, rng.standard_normal((1, h, n_q, d_h)), np.float32)
        k, v = (asarray(xp, a[None], np.float32) for a in (kr, vr))  # [1, h_kv, n, d_h]
        for causal in (True, False):
            mask = T.causal_mask(n_q, n, xp=xp) if causal else None
            expect = T.scaled_dot_product_attention(q, k, v, mask)[0, ...]  # [h, n_q, d_h]
            got = paged_attention(q[0, ...], cache.k[0], cache.v[0], cache.tables[s], n, causal=causal)
            np.testing.assert_allclose(_to_np(got), _to_np(expect), rtol=1e-5, atol=1e-6)
        kg, vg = cache.gather(s, 0)  # reading through the table gives back the sequence
        np.testing.assert_allclose(_to_np(kg), kr, rtol=1e-6)
        np.testing.assert_allclose(_to_np(vg), vr, rtol=1e-6)


def _torch_attention_of_last(q, k, v, causal):  # [h, n_q, d_h], [h_kv, n, d_h] ×2 -> [h, n_q, d_h]
    """torch SDPA with the queries at the last n_q positions (torch's is_causal aligns them to
    the first), the mask built here from that definition."""
    import torch
    n_q, n = q.shape[1], k.shape[1]
    mask = torch.from_numpy(np.arange(n)[None, :] <= np.arange(n - n_q, n)[:, None]) if causal else None
    return torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=mask, enable_gqa=True).numpy()


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_paged_attention_large_logits_equal_torch(rng, h, h_kv):
    """Scores spread over more than 1e3 per row (e^1000 overflows even float64): each block is
    merged with the running max subtracted, so the result is still exact."""
    d_h, lengths = 8, [21, 9]
    cache, seqs, ref = _interleaved_cache(T.namespace(), rng, lengths, h_kv, d_h, 4, dtype=np.float64, spread=50.0)
    for s, n in zip(seqs, lengths):
        kr, vr = ref[s][0]
        q = rng.standard_normal((h, 5, d_h)) * 50.0
        scores = q @ np.repeat(kr, h // h_kv, axis=0).swapaxes(-1, -2) / math.sqrt(d_h)  # [h, 5, n]
        assert np.ptp(scores, axis=-1).min() > 1e3
        for causal in (True, False):
            got = paged_attention(q, cache.k[0], cache.v[0], cache.tables[s], n, causal=causal)
            assert np.isfinite(got).all()
            np.testing.assert_allclose(got, _torch_attention_of_last(q, kr, vr, causal), rtol=0, atol=1e-10)


def _torch_masked_fill_attention(q, k, v, causal):  # [h, n_q, d_h], [h_kv, n, d_h] ×2 -> [h, n_q, d_h]
    """As _torch_attention_of_last, with the masked scores filled by -inf (torch's SDPA adds its mask,
    and NaN + -inf is NaN: a masked NaN key would poison rows that never see it)."""
    import torch
    n_q, n = q.shape[1], k.shape[1]
    k, v = (torch.from_numpy(np.repeat(a, q.shape[0] // a.shape[0], axis=0)) for a in (k, v))
    s = torch.from_numpy(q) @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [h, n_q, n]
    if causal:
        s = s.masked_fill(~torch.from_numpy(np.arange(n)[None, :] <= np.arange(n - n_q, n)[:, None]), -math.inf)
    return (torch.softmax(s, dim=-1) @ v).numpy()


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_paged_attention_nan_or_inf_rows_equal_torch(rng, bad):
    """A NaN or inf in a query row, or in one cached key, gives the same NaN cells as torch SDPA."""
    h, h_kv, d_h, lengths = 4, 2, 8, [13, 7]
    cache, seqs, ref = _interleaved_cache(T.namespace(), rng, lengths, h_kv, d_h, 4, dtype=np.float64)
    s, n = seqs[0], lengths[0]
    kr, vr = (a.copy() for a in ref[s][0])
    q = rng.standard_normal((h, 3, d_h))
    q[1, 2, 0] = bad  # one query row of head 1
    pos = n - 2  # one cached key, seen by the last two queries only when causal
    block, slot = cache.tables[s][pos // 4], pos % 4
    cache.k[0][block, 0, slot, 3] = kr[0, pos, 3] = bad  # key/value head 0: query heads 0 and 1
    for causal in (True, False):
        with np.errstate(invalid="ignore"):
            got = paged_attention(q, cache.k[0], cache.v[0], cache.tables[s], n, causal=causal)
        expect = _torch_masked_fill_attention(q, kr, vr, causal)
        if causal and np.isnan(bad):  # the key at n - 2 is seen by the last two queries, not the first
            assert np.isnan(expect[0, 1:]).all() and not np.isnan(expect[0, 0]).any()
        assert np.isnan(expect).any()
        assert np.array_equal(np.isnan(got), np.isnan(expect))
        ok = ~np.isnan(expect)
        np.testing.assert_allclose(got[ok], expect[ok], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_freed_blocks_nan_does_not_reach_the_next_sequence(xp, bad):
    """A request whose keys and values went NaN (or inf) is freed; the next one takes its block and fills 3 of
    its 4 slots. paged_attention weighs the 4th slot by 0, and 0·NaN is NaN: the new request's output was
    NaN. Reference: torch's attention over the 3 positions written."""
    import torch
    cache = PagedKVCache(1, 0, 1, 8, 2, block_size=4, n_blocks=1, xp=xp)
    a = cache.add_sequence()
    poison = asarray(xp, np.full((1, 4, 2), bad), np.float32)
    cache.write(a, 0, poison, poison)
    cache.extend(a, 4)
    cache.free_sequence(a)
    b = cache.add_sequence()
    k, v = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]), np.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]])
    cache.write(b, 0, asarray(xp, k, np.float32), asarray(xp, v, np.float32))
    cache.extend(b, 3)
    q = np.array([[[0.5, -1.0]]])  # [h, n_q, d_h], the last position
    got = T.to_numpy(paged_attention(asarray(xp, q, np.float32), cache.k[0], cache.v[0], cache.tables[b], 3))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v))).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6)  # float32 cache


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "array_api_strict"])  # it has no float16
@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_paged_float16_cache_and_attention_equal_torch_float32(backend, rng, h, h_kv):
    """A float16 pool: it stores the float16 values bit for bit, holds 2 bytes per element, and
    paged_attention computes in float32 and rounds once to float16 (2⁻¹¹ relative)."""
    xp = T.namespace(backend)
    d_h, bs, lengths = 16, 5, [23, 11]
    cache, seqs, ref = _interleaved_cache(xp, rng, lengths, h_kv, d_h, bs, dtype=np.float16)
    assert cache.bytes_per_token == 2 * 1 * h_kv * d_h * 2  # K and V · L · h_kv · d_h · 2 bytes
    assert cache.nbytes == cache.n_blocks * bs * cache.bytes_per_token
    for s, n in zip(seqs, lengths):
        kr, vr = ref[s][0]
        kg, vg = cache.gather(s, 0)
        assert kg.dtype == xp.float16
        np.testing.assert_array_equal(_to_np(kg), kr)  # stored exactly: ref holds float16 values
        np.testing.assert_array_equal(_to_np(vg), vr)
        q = rng.standard_normal((h, 3, d_h)).astype(np.float16)
        for causal in (True, False):
            got = paged_attention(asarray(xp, q), cache.k[0], cache.v[0], cache.tables[s], n, causal=causal)
            assert got.dtype == xp.float16
            expect = _torch_attention_of_last(*(a.astype(np.float32) for a in (q, kr, vr)), causal)
            # float16 has 11 significant bits: half an ulp is 2⁻¹¹ relative; + float32 differences
            np.testing.assert_allclose(_to_np(got).astype(np.float32), expect, rtol=2 ** -11 + 1e-5, atol=1e-6)


def test_reserved_and_used_bytes_equal_the_formula(rng):
    L, h_kv, d_h, bs, n_max = 3, 2, 8, 16, 64
    lengths = [1, 16, 17, 40, 64, 5]
    cache, seqs, _ = _interleaved_cache(T.namespace(), rng, lengths, h_kv, d_h, bs, L=L)
    per_tok = 2 * L * h_kv * d_h * 4  # float32
    assert cache.used_bytes == sum(lengths) * per_tok
    assert cache.reserved_bytes == sum(-(-n // bs) for n in lengths) * bs * per_tok
    assert cache.nbytes == cache.n_blocks * bs * per_tok  # the pool arrays really hold this much
    cfg = ModelConfig(name="t", family="decoder", L=L, d=h_kv * d_h, h=h_kv, h_kv=h_kv, d_h=d_h, d_ff=8,
                      v=10, n_ctx=n_max)
    report = paged_memory_report(cfg, lengths, block_size=bs, n_max=n_max, dtype="float32")
    assert report["used"] == cache.used_bytes
    assert report["paged_reserved"] == cache.reserved_bytes
    measured = cache.memory_report()
    assert all(measured[k] == report[k] for k in ("requests", "tokens", "blocks", "used", "paged_waste"))
    contiguous = T.KVCache(L, len(lengths), h_kv, n_max, d_h, dtype=np.float32)
    assert report["contiguous_reserved"] == contiguous.nbytes
    # freeing a finished request returns exactly its blocks
    before = cache.blocks_in_use
    cache.free_sequence(seqs[3])
    assert cache.blocks_in_use == before - math.ceil(40 / bs)
    assert cache.used_bytes == (sum(lengths) - 40) * per_tok


def test_freed_blocks_are_reused_and_errors(rng):
    cache = PagedKVCache(1, 0, 1, 8, 2, block_size=4, n_blocks=2)
    a = cache.add_sequence()
    kv = np.ones((1, 8, 2), dtype=np.float32)
    cache.write(a, 0, kv, kv)
    cache.extend(a, 8)
    b = cache.add_sequence()
    with pytest.raises(RuntimeError, match="exhausted"):
        cache.write(b, 0, kv[:, :1], kv[:, :1])
    cache.free_sequence(a)
    cache.write(b, 0, 2 * kv[:, :3], 2 * kv[:, :3])
    cache.extend(b, 3)
    assert sorted(cache.tables[b]) == [0]  # a's first block, handed out again
    np.testing.assert_array_equal(cache.gather(b, 0)[0], 2 * kv[:, :3])
    with pytest.raises(ValueError, match="n_max=8"):
        cache.write(b, 0, kv, kv)
    with pytest.raises(ValueError, match="unknown sequence id 7"):
        cache.gather(7, 0)
    with pytest.raises(ValueError, match="block_size=0"):
        PagedKVCache(1, 1, 1, 8, 2, block_size=0)


# ---------------------------------------------------------------- generation: paged == contiguous

def _tiny_decoder(rng, c):
    w = lambda *s: rng.standard_normal(s) * 0.3  # noqa: E731
    layers = [dict(att=T.AttentionWeights(W_q=w(c.d, c.h * c.d_h), W_k=w(c.d, c.h_kv * c.d_h),
                                          W_v=w(c.d, c.h_kv * c.d_h), W_o=w(c.h * c.d_h, c.d)),
                   ffn=(w(c.d, c.d_ff), w(c.d, c.d_ff), w(c.d_ff, c.d)), g1=1 + w(c.d), g2=1 + w(c.d))
              for _ in range(c.L)]
    return w(c.v, c.d), layers


def _forward(c, emb, layers, ids, cache):  # [b, t] -> [b, t, v], writing t positions to the cache
    start, t = cache.length, ids.shape[1]
    x = T.embed(ids, emb)  # [b, t, d]
    cos, sin = T.rope_cos_sin(np.arange(start, start + t), c.d_h, dtype=np.float64)
    for i, p in enumerate(layers):
        q, k, v = T.qkv_heads(T.rms_norm(x, p["g1"]), p["att"], c.h, c.h_kv)
        q, k = T.apply_rope_half(q, cos, sin), T.apply_rope_half(k, cos, sin)
        k, v = cache.update(i, k, v)  # [b, h_kv, start + t, d_h]
        o = T.scaled_dot_product_attention(q, k, v, T.causal_mask(t, start + t))
        x = x + T.merge_heads(o) @ p["att"].W_o
        x = x + T.swiglu_ffn(T.rms_norm(x, p["g2"]), *p["ffn"])
    cache.advance(t)
    return T.lm_head(x, emb)


def _greedy(c, weights, prompt, n_new, cache):
    logits = _forward(c, *weights, prompt, cache)
    out = []
    for _ in range(n_new):
        nxt = np.argmax(logits[:, -1, :], axis=-1)[:, None]  # [b, 1]
        out.append(nxt)
        logits = _forward(c, *weights, nxt, cache)
    return np.concatenate(out, axis=1)


def test_greedy_generation_paged_equals_contiguous(rng):
    c = ModelConfig(name="tiny", family="decoder", L=2, d=24, h=6, h_kv=2, d_h=4, d_ff=32, v=41, n_ctx=64)
    weights = _tiny_decoder(rng, c)
    prompt = rng.integers(0, c.v, size=(2, 5))
    n_new = 12
    dense = T.KVCache(c.L, 2, c.h_kv, 5 + n_new, c.d_h, dtype=np.float64)
    paged = PagedKVCache(c.L, 2, c.h_kv, 5 + n_new, c.d_h, block_size=4, dtype=np.float64)
    ids_dense = _greedy(c, weights, prompt, n_new, dense)
    ids_paged = _greedy(c, weights, prompt, n_new, paged)
    np.testing.assert_array_equal(ids_paged, ids_dense)
    assert len(set(ids_dense.ravel().tolist())) > 1  # the comparison is not between two constants
    assert paged.used_bytes == 2 * (5 + n_new) * paged.bytes_per_token


def test_smollm2_generation_paged_equals_contiguous(smollm2_loaded):
    m = fresh_llama(smollm2_loaded)  # conftest.py: T.load_smollm2, once per worker
    prompt, n_new = "The capital of France is", 6
    contiguous = m.generate(prompt, max_new_tokens=n_new)  # default: a contiguous KVCache
    c = m.config
    n_max = len(m.encode(prompt)) + n_new
    paged = PagedKVCache(c.L, 1, c.h_kv, n_max, c.d_h, block_size=4, dtype=m.weights.W_E.dtype, xp=m.xp)
    assert m.generate(prompt, max_new_tokens=n_new, cache=paged) == contiguous
    # the last sampled token is never fed back, so n_max - 1 positions were stored
    assert paged.used_bytes == (n_max - 1) * paged.bytes_per_token
    assert paged.reserved_bytes == math.ceil((n_max - 1) / 4) * 4 * paged.bytes_per_token
