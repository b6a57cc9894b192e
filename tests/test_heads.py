"""Multi-head attention (MHA, GQA, MQA; self and cross) against torch.nn.MultiheadAttention."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer as T
from conftest import asarray


def test_split_merge_round_trip_and_layout(xp, rng):
    x = rng.standard_normal((2, 5, 12))
    heads = T.split_heads(asarray(xp, x), 4)  # (b, n, d) -> (b, h, n, d_h)
    assert tuple(heads.shape) == (2, 4, 5, 3)
    # head i holds features i·d_h … (i+1)·d_h - 1
    np.testing.assert_array_equal(T.to_numpy(heads)[:, 1], x[:, :, 3:6])
    np.testing.assert_array_equal(T.to_numpy(T.merge_heads(heads)), x)
    with pytest.raises(ValueError, match=r"d=12.*h=5"):
        T.split_heads(asarray(xp, x), 5)


def _torch_mha(d, h, kdim=None, seed=0):
    torch.manual_seed(seed)
    return torch.nn.MultiheadAttention(d, h, batch_first=True, kdim=kdim, vdim=kdim, dtype=torch.float64).eval()


def _weights_from_torch(m, xp):
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    d = m.embed_dim
    if "in_proj_weight" in sd:
        Wq, Wk, Wv = (sd["in_proj_weight"][i * d:(i + 1) * d].T for i in range(3))
    else:
        Wq, Wk, Wv = sd["q_proj_weight"].T, sd["k_proj_weight"].T, sd["v_proj_weight"].T
    bq, bk, bv = (sd["in_proj_bias"][i * d:(i + 1) * d] for i in range(3))
    a = lambda t: asarray(xp, t)  # noqa: E731
    return T.AttentionWeights(a(Wq), a(Wk), a(Wv), a(sd["out_proj.weight"].T), a(bq), a(bk), a(bv),
                              a(sd["out_proj.bias"]))


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_equals_torch_multihead_attention(xp, rng, causal):
    d, h, n = 12, 3, 6
    m = _torch_mha(d, h)
    x = rng.standard_normal((2, n, d))
    mask = np.tril(np.ones((n, n), bool)) if causal else None
    out, w = T.multi_head_attention(asarray(xp, x), _weights_from_torch(m, xp), h,
                                    mask=None if mask is None else asarray(xp, mask), return_weights=True)
    with torch.no_grad():
        ref, ref_w = m(*(torch.from_numpy(x),) * 3, attn_mask=None if mask is None else torch.from_numpy(~mask),
                       need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(T.to_numpy(out), ref.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(T.to_numpy(w), ref_w.numpy(), rtol=1e-10, atol=1e-12)  # per-head weights


def test_cross_attention_equals_torch(xp, rng):
    d, d_c, h = 8, 5, 2
    m = _torch_mha(d, h, kdim=d_c)
    x, ctx = rng.standard_normal((1, 4, d)), rng.standard_normal((1, 7, d_c))
    out = T.multi_head_attention(asarray(xp, x), _weights_from_torch(m, xp), h, context=asarray(xp, ctx))
    with torch.no_grad():
        ref, _ = m(torch.from_numpy(x), torch.from_numpy(ctx), torch.from_numpy(ctx))
    np.testing.assert_allclose(T.to_numpy(out), ref.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_gqa_layer_equals_torch_sdpa_with_enable_gqa(xp, rng, h, h_kv):
    d, d_h, n = 16, 4, 5
    x = rng.standard_normal((2, n, d))
    Wq, Wk, Wv = rng.standard_normal((d, h * d_h)), rng.standard_normal((d, h_kv * d_h)), rng.standard_normal((d, h_kv * d_h))
    Wo = rng.standard_normal((h * d_h, d))
    w = T.AttentionWeights(*(asarray(xp, a) for a in (Wq, Wk, Wv, Wo)))
    ours = T.to_numpy(T.multi_head_attention(asarray(xp, x), w, h, h_kv, mask=T.causal_mask(n, xp=xp)))
    tx = torch.from_numpy(x)
    split = lambda t, k: t.reshape(2, n, k, d_h).transpose(1, 2)  # noqa: E731
    q, k, v = split(tx @ torch.from_numpy(Wq), h), split(tx @ torch.from_numpy(Wk), h_kv), split(tx @ torch.from_numpy(Wv), h_kv)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = (o.transpose(1, 2).reshape(2, n, h * d_h) @ torch.from_numpy(Wo)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1)])
def test_gqa_cross_attention_equals_torch_sdpa(xp, rng, h, h_kv):
    """Queries from x (b, n, d), keys and values from a context of another length and width
    (b, n_k, d_c) with h_kv heads, a padding mask on the context; biases on every projection."""
    b, n, n_k, d, d_c, d_h = 2, 4, 7, 16, 5, 4
    x, ctx = rng.standard_normal((b, n, d)), rng.standard_normal((b, n_k, d_c))
    Wq, Wo = rng.standard_normal((d, h * d_h)), rng.standard_normal((h * d_h, d))
    Wk, Wv = rng.standard_normal((2, d_c, h_kv * d_h))  # the context's width d_c, not d
    bq, bk, bv, bo = (rng.standard_normal(m) for m in (h * d_h, h_kv * d_h, h_kv * d_h, d))
    keep = np.arange(n_k)[None, None, None, :] < np.array([7, 3])[:, None, None, None]  # (b, 1, 1, n_k)
    w = T.AttentionWeights(*(asarray(xp, a) for a in (Wq, Wk, Wv, Wo, bq, bk, bv, bo)))
    ours = T.multi_head_attention(asarray(xp, x), w, h, h_kv, context=asarray(xp, ctx), mask=asarray(xp, keep))
    t = torch.from_numpy
    split = lambda y, k: y.reshape(b, -1, k, d_h).transpose(1, 2)  # noqa: E731
    q = split(t(x) @ t(Wq) + t(bq), h)
    k, v = split(t(ctx) @ t(Wk) + t(bk), h_kv), split(t(ctx) @ t(Wv) + t(bv), h_kv)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=t(keep), enable_gqa=True)
    ref = (o.transpose(1, 2).reshape(b, n, h * d_h) @ t(Wo) + t(bo)).numpy()
    np.testing.assert_allclose(T.to_numpy(ours), ref, rtol=1e-10, atol=1e-12)


def test_bad_layer_shapes(rng):
    x = rng.standard_normal((1, 3, 12))
    w = T.AttentionWeights(np.zeros((12, 12)), np.zeros((12, 6)), np.zeros((12, 6)), np.zeros((12, 12)))
    with pytest.raises(ValueError, match=r"h=4.*h_kv=3"):
        T.multi_head_attention(x, w, 4, 3)
    with pytest.raises(ValueError, match=r"d=12.*h=5"):
        T.multi_head_attention(x, w, 5, 1)
    with pytest.raises(ValueError, match=r"h_kv·d_h = 4·3 = 12.*6 and 6"):
        T.multi_head_attention(x, w, 4, 4)
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        T.multi_head_attention(x.astype(int), w, 4, 2)
    with pytest.raises(ValueError, match=r"\(b, n, d\).*\(3, 12\)"):
        T.multi_head_attention(x[0], w, 4, 2)
