"""Norms, activations, feed-forward networks and residual blocks against PyTorch."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer as T
from conftest import asarray


def test_layer_norm_equals_torch(xp, rng):
    x = rng.standard_normal((2, 5, 16)) * 3 + 1
    g, b = rng.standard_normal(16), rng.standard_normal(16)
    ours = T.to_numpy(T.layer_norm(asarray(xp, x), asarray(xp, g), asarray(xp, b), eps=1e-12))
    ref = F.layer_norm(torch.from_numpy(x), (16,), torch.from_numpy(g), torch.from_numpy(b), eps=1e-12).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


def test_rms_norm_equals_torch(xp, rng):
    x = rng.standard_normal((2, 5, 16)) * 3
    g = rng.standard_normal(16)
    ours = T.to_numpy(T.rms_norm(asarray(xp, x), asarray(xp, g), eps=1e-5))
    ref = F.rms_norm(torch.from_numpy(x), (16,), torch.from_numpy(g), eps=1e-5).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_norms_in_float16_and_float32(norm, rng):
    x = (rng.standard_normal((3, 64)) * 100).astype(np.float16)  # squares overflow float16: computed in float32
    g = np.ones(64, np.float32)
    y = T.layer_norm(x, g) if norm == "layer" else T.rms_norm(x, g)
    assert y.dtype == np.float16 and np.isfinite(y).all()
    x32 = torch.from_numpy(x.astype(np.float32))
    ref = F.layer_norm(x32, (64,), eps=1e-5) if norm == "layer" else F.rms_norm(x32, (64,), eps=1e-6)
    np.testing.assert_allclose(y.astype(np.float32), ref.numpy(), atol=5e-3)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_norms_in_bfloat16_equal_torch_float32(norm):
    """bfloat16 torch tensors (no NumPy dtype) through the Array-API path: computed in float32,
    rounded once to bfloat16's 8 significant bits, so within 2⁻⁸ relative of torch in float32."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 7, 64, generator=g) * 50 + 3).to(torch.bfloat16)  # a mean to remove, a large scale
    gamma, beta = (torch.randn(64, generator=g).to(torch.bfloat16) for _ in range(2))
    if norm == "layer":
        y = T.layer_norm(x, gamma, beta)
        ref = F.layer_norm(x.float(), (64,), gamma.float(), beta.float(), eps=1e-5)
    else:
        y = T.rms_norm(x, gamma)
        ref = F.rms_norm(x.float(), (64,), gamma.float(), eps=1e-6)
    assert y.dtype == torch.bfloat16
    err = (y.float() - ref).abs()  # measured max err / |ref| ≈ 3.8e-3 < 2⁻⁸ ≈ 3.9e-3
    assert (err <= (2 ** -8 + 1e-5) * ref.abs() + 1e-6).all(), (err / ref.abs()).max()  # + float32 differences


def test_gelu_tanh_backward_of_large_float16_inputs_is_0_or_1_as_torch():
    """Far from 0 the tanh form's slope is 0 (left) or 1 (right). In float16 the x² of its second term
    overflowed past |x| ≈ 700 while 1 − tanh² u was already 0, and 0·inf gave NaN. Reference: torch
    autograd in float64 on the same float16 values."""
    x = np.array([-6e4, -1e4, -1e3, -50.0, 0.5, 50.0, 1e3, 1e4, 6e4], np.float16)
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    F.gelu(xt, approximate="tanh").backward(torch.ones_like(xt))
    dx = T.gelu_backward(np.ones_like(x), x, "tanh")
    assert dx.dtype == np.float16
    np.testing.assert_allclose(dx.astype(np.float64), xt.grad.numpy(), rtol=2 ** -10, atol=0)  # half a float16 ulp


def test_erf_against_math_erf(xp):
    x = np.linspace(-6, 6, 2001)
    ours = T.to_numpy(T.erf(asarray(xp, x)))
    np.testing.assert_allclose(ours, [math.erf(t) for t in x], atol=1.5e-7)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_equals_torch(xp, approximate):
    x = np.linspace(-8, 8, 1001)
    ours = T.to_numpy(T.gelu(asarray(xp, x), approximate=approximate))
    ref = F.gelu(torch.from_numpy(x), approximate=approximate).numpy()
    # exact form: erf's 1.5e-7 error scaled by |x|/2 ≤ 4
    np.testing.assert_allclose(ours, ref, atol=6e-7 if approximate == "none" else 1e-12)
    with pytest.raises(ValueError, match="'cubic'"):
        T.gelu(asarray(xp, x), approximate="cubic")


def test_relu_silu_sigmoid_equal_torch(xp):
    x = np.linspace(-10, 10, 101)
    tx = torch.from_numpy(x)
    for ours, ref in [(T.relu, F.relu), (T.silu, F.silu), (T.sigmoid, torch.sigmoid)]:
        np.testing.assert_allclose(T.to_numpy(ours(asarray(xp, x))), ref(tx).numpy(), rtol=1e-12, atol=1e-15)


def test_ffn_and_swiglu_equal_torch(xp, rng):
    d, d_ff = 8, 20
    x = rng.standard_normal((2, 3, d))
    W1, W2 = rng.standard_normal((d, d_ff)), rng.standard_normal((d_ff, d))
    b1, b2 = rng.standard_normal(d_ff), rng.standard_normal(d)
    tx, tW1, tW2, tb1, tb2 = map(torch.from_numpy, (x, W1, W2, b1, b2))
    ref = F.linear(F.relu(F.linear(tx, tW1.T, tb1)), tW2.T, tb2).numpy()
    ours = T.ffn(*(asarray(xp, a) for a in (x, W1, W2, b1, b2)))
    np.testing.assert_allclose(T.to_numpy(ours), ref, rtol=1e-10)

    Wg, Wu, Wd = rng.standard_normal((d, d_ff)), rng.standard_normal((d, d_ff)), rng.standard_normal((d_ff, d))
    tWg, tWu, tWd = map(torch.from_numpy, (Wg, Wu, Wd))
    ref = ((F.silu(tx @ tWg) * (tx @ tWu)) @ tWd).numpy()
    ours = T.swiglu_ffn(*(asarray(xp, a) for a in (x, Wg, Wu, Wd)))
    np.testing.assert_allclose(T.to_numpy(ours), ref, rtol=1e-10)
    ref_glu = F.glu(torch.cat([tx @ tWu, tx @ tWg], -1), dim=-1) @ tWd  # torch's GLU: a ⊗ σ(b)
    ours_glu = T.glu_ffn(*(asarray(xp, a) for a in (x, Wg, Wu, Wd)))
    np.testing.assert_allclose(T.to_numpy(ours_glu), ref_glu.numpy(), rtol=1e-10)


def test_pre_and_post_norm_residual_against_torch_encoder_layer(rng):
    """A torch TransformerEncoderLayer with copied weights: norm_first=False is post-norm, True pre-norm."""
    d, h, d_ff, n = 8, 2, 16, 5
    x = rng.standard_normal((1, n, d))
    for norm_first in (False, True):
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True,
                                                 norm_first=norm_first, dtype=torch.float64).eval()
        p = {k: v.detach().numpy() for k, v in layer.state_dict().items()}
        w = T.AttentionWeights(W_q=p["self_attn.in_proj_weight"][:d].T, W_k=p["self_attn.in_proj_weight"][d:2 * d].T,
                               W_v=p["self_attn.in_proj_weight"][2 * d:].T, W_o=p["self_attn.out_proj.weight"].T,
                               b_q=p["self_attn.in_proj_bias"][:d], b_k=p["self_attn.in_proj_bias"][d:2 * d],
                               b_v=p["self_attn.in_proj_bias"][2 * d:], b_o=p["self_attn.out_proj.bias"])

        def norm1(t):
            return T.layer_norm(t, p["norm1.weight"], p["norm1.bias"])

        def norm2(t):
            return T.layer_norm(t, p["norm2.weight"], p["norm2.bias"])

        y = T.residual(x, lambda t: T.multi_head_attention(t, w, h), norm1, pre_norm=norm_first)
        y = T.residual(y, lambda t: T.ffn(t, p["linear1.weight"].T, p["linear2.weight"].T,
                                          p["linear1.bias"], p["linear2.bias"]), norm2, pre_norm=norm_first)
        with torch.no_grad():
            ref = layer(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(y, ref, rtol=1e-9, atol=1e-10)
