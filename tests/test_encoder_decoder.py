"""The original Transformer's layers against PyTorch: T.seq2seq_encoder_layer against
torch.nn.TransformerEncoderLayer and T.seq2seq_decoder_layer against torch.nn.TransformerDecoderLayer,
both post-norm (norm_first=False), batch_first, float64, with the torch layer's weights copied in."""
import numpy as np
import pytest
import torch

import transformer as T
from conftest import asarray

D, H, D_FF = 12, 3, 20


def attention_from_torch(p, prefix, xp=np):  # torch's packed in_proj (3d, d) -> W_q, W_k, W_v (d, d), x @ W
    W, b = p[prefix + "in_proj_weight"], p[prefix + "in_proj_bias"]
    a = lambda t: asarray(xp, t)  # noqa: E731
    return T.AttentionWeights(W_q=a(W[:D].T), W_k=a(W[D:2 * D].T), W_v=a(W[2 * D:].T),
                              W_o=a(p[prefix + "out_proj.weight"].T), b_q=a(b[:D]), b_k=a(b[D:2 * D]),
                              b_v=a(b[2 * D:]), b_o=a(p[prefix + "out_proj.bias"]))


def torch_layer(cls, activation):
    torch.manual_seed(0)
    layer = cls(D, H, D_FF, dropout=0.0, activation=activation, batch_first=True, norm_first=False,
                dtype=torch.float64).eval()
    with torch.no_grad():  # LayerNorm γ = 1, β = 0 at initialisation: move them so a swap would show
        for name, t in layer.named_parameters():
            if name.startswith("norm"):
                t.add_(0.3 * torch.randn_like(t))
    return layer, {k: v.detach().numpy() for k, v in layer.state_dict().items()}


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(activation, rng):
    layer, p = torch_layer(torch.nn.TransformerEncoderLayer, activation)
    lw = T.Seq2SeqEncoderLayer(self_attn=attention_from_torch(p, "self_attn."), W_1=p["linear1.weight"].T,
                               W_2=p["linear2.weight"].T, b_1=p["linear1.bias"], b_2=p["linear2.bias"],
                               ln1_g=p["norm1.weight"], ln1_b=p["norm1.bias"], ln2_g=p["norm2.weight"],
                               ln2_b=p["norm2.bias"])
    x = rng.standard_normal((2, 5, D))
    lengths = np.array([5, 3])  # the second row has two padded positions
    pad = np.arange(5)[None, :] >= lengths[:, None]  # (b, n) True = padding, torch's convention
    with torch.no_grad():
        ref = layer(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    act = {"relu": T.relu, "gelu": T.gelu}[activation]
    ours, w = T.seq2seq_encoder_layer(x, lw, H, mask=T.padding_mask(lengths, 5), activation=act)
    tol = 1e-10 if activation == "relu" else 1e-6  # T.erf is a polynomial, |error| ≤ 1.5e-7
    np.testing.assert_allclose(ours[0], ref[0], rtol=tol, atol=tol)
    np.testing.assert_allclose(ours[1, :3], ref[1, :3], rtol=tol, atol=tol)  # torch leaves pad rows unspecified
    np.testing.assert_allclose(w[1, :, :, 3:], 0, atol=0)  # no weight on a padded key


def test_decoder_layer_matches_torch(xp, rng):
    """Masked self-attention, cross-attention to a padded source, FFN; every sub-layer post-norm."""
    layer, p = torch_layer(torch.nn.TransformerDecoderLayer, "relu")
    a = lambda t: asarray(xp, t)  # noqa: E731
    lw = T.Seq2SeqDecoderLayer(self_attn=attention_from_torch(p, "self_attn.", xp),
                               cross_attn=attention_from_torch(p, "multihead_attn.", xp),
                               W_1=a(p["linear1.weight"].T), W_2=a(p["linear2.weight"].T), b_1=a(p["linear1.bias"]),
                               b_2=a(p["linear2.bias"]), ln1_g=a(p["norm1.weight"]), ln1_b=a(p["norm1.bias"]),
                               ln2_g=a(p["norm2.weight"]), ln2_b=a(p["norm2.bias"]), ln3_g=a(p["norm3.weight"]),
                               ln3_b=a(p["norm3.bias"]))
    n_dec, n_enc = 4, 6
    y, z = rng.standard_normal((2, n_dec, D)), rng.standard_normal((2, n_enc, D))
    src_len = np.array([6, 4])
    src_pad = np.arange(n_enc)[None, :] >= src_len[:, None]  # (b, n_enc) True = padding (torch)
    future = np.triu(np.ones((n_dec, n_dec), dtype=bool), 1)  # True = may NOT attend (torch)
    with torch.no_grad():
        ref = layer(torch.from_numpy(y), torch.from_numpy(z), tgt_mask=torch.from_numpy(future),
                    memory_key_padding_mask=torch.from_numpy(src_pad)).numpy()
    cross_keep = a(~src_pad[:, None, None, :])  # (b, 1, 1, n_enc) True = may attend (ours)
    ours, w_self, w_cross = T.seq2seq_decoder_layer(a(y), a(z), lw, H, cross_mask=cross_keep)
    np.testing.assert_allclose(T.to_numpy(ours), ref, rtol=1e-10, atol=1e-12)
    w_self, w_cross = T.to_numpy(w_self), T.to_numpy(w_cross)
    assert w_self.shape == (2, H, n_dec, n_dec) and w_cross.shape == (2, H, n_dec, n_enc)
    np.testing.assert_array_equal(w_self[..., future], 0)  # the future is hidden exactly
    np.testing.assert_array_equal(w_cross[1, ..., 4:], 0)  # so is the padded source


def test_decoder_layer_uncausal_and_extra_mask_match_torch(rng):
    """causal=False with a self_mask of our own: the same as torch given that mask alone."""
    layer, p = torch_layer(torch.nn.TransformerDecoderLayer, "relu")
    lw = T.Seq2SeqDecoderLayer(self_attn=attention_from_torch(p, "self_attn."),
                               cross_attn=attention_from_torch(p, "multihead_attn."),
                               W_1=p["linear1.weight"].T, W_2=p["linear2.weight"].T, b_1=p["linear1.bias"],
                               b_2=p["linear2.bias"], ln1_g=p["norm1.weight"], ln1_b=p["norm1.bias"],
                               ln2_g=p["norm2.weight"], ln2_b=p["norm2.bias"], ln3_g=p["norm3.weight"],
                               ln3_b=p["norm3.bias"])
    y, z = rng.standard_normal((1, 5, D)), rng.standard_normal((1, 3, D))
    keep = T.sliding_window_mask(5, 2) | (np.arange(5) == 0)[None, :]  # window 2 or token 0, in both directions
    keep = keep | keep.T
    with torch.no_grad():
        ref = layer(torch.from_numpy(y), torch.from_numpy(z), tgt_mask=torch.from_numpy(~keep)).numpy()
    ours, _, _ = T.seq2seq_decoder_layer(y, z, lw, H, causal=False, self_mask=keep)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)
    both, _, _ = T.seq2seq_decoder_layer(y, z, lw, H, self_mask=keep)  # & causal: torch given keep & causal
    with torch.no_grad():
        ref2 = layer(torch.from_numpy(y), torch.from_numpy(z),
                     tgt_mask=torch.from_numpy(~(keep & np.tril(np.ones((5, 5), dtype=bool))))).numpy()
    np.testing.assert_allclose(both, ref2, rtol=1e-10, atol=1e-12)


def test_bad_input_names_the_value(rng):
    layer, p = torch_layer(torch.nn.TransformerDecoderLayer, "relu")
    lw = T.Seq2SeqDecoderLayer(self_attn=attention_from_torch(p, "self_attn."),
                               cross_attn=attention_from_torch(p, "multihead_attn."),
                               W_1=p["linear1.weight"].T, W_2=p["linear2.weight"].T, ln1_g=p["norm1.weight"],
                               ln2_g=p["norm2.weight"], ln3_g=p["norm3.weight"])
    y = rng.standard_normal((1, 4, D))
    with pytest.raises(ValueError, match=r"z must be \(b, n, d=12\)"):
        T.seq2seq_decoder_layer(y, rng.standard_normal((1, 3, D + 1)), lw, H)
    with pytest.raises(ValueError, match="batch b=1"):
        T.seq2seq_decoder_layer(y, rng.standard_normal((2, 3, D)), lw, H)
    with pytest.raises(ValueError, match="d=12 must be a multiple of the heads h=5"):
        T.seq2seq_decoder_layer(y, rng.standard_normal((1, 3, D)), lw, 5)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\)"):
        T.seq2seq_decoder_layer(y, rng.standard_normal((1, 3, D)), lw, H, cross_mask=np.ones((4, 4), bool))
