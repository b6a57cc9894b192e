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


def decoder_layer_from_torch(p, xp=np):  # torch's TransformerDecoderLayer state -> Seq2SeqDecoderLayer
    a = lambda t: asarray(xp, t)  # noqa: E731
    return T.Seq2SeqDecoderLayer(self_attn=attention_from_torch(p, "self_attn.", xp),
                                 cross_attn=attention_from_torch(p, "multihead_attn.", xp),
                                 W_1=a(p["linear1.weight"].T), W_2=a(p["linear2.weight"].T), b_1=a(p["linear1.bias"]),
                                 b_2=a(p["linear2.bias"]), ln1_g=a(p["norm1.weight"]), ln1_b=a(p["norm1.bias"]),
                                 ln2_g=a(p["norm2.weight"]), ln2_b=a(p["norm2.bias"]), ln3_g=a(p["norm3.weight"]),
                                 ln3_b=a(p["norm3.bias"]))


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
    lw = decoder_layer_from_torch(p, xp)
    a = lambda t: asarray(xp, t)  # noqa: E731
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
    lw = decoder_layer_from_torch(p)
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
    with pytest.raises(TypeError, match="saved must be a dict"):
        T.seq2seq_decoder_layer(y, rng.standard_normal((1, 3, D)), lw, H, saved=[])


# --- the layers' backward (models/encoder_decoder_backward.py) against torch autograd -------------------
def grads_from_torch(layer, attentions):  # torch's .grad of every weight, in the orientation of our records
    g = {k: t.grad.numpy() for k, t in layer.named_parameters()}

    def attn(pre):
        W, b = g[pre + "in_proj_weight"], g[pre + "in_proj_bias"]
        return {"W_q": W[:D].T, "W_k": W[D:2 * D].T, "W_v": W[2 * D:].T, "W_o": g[pre + "out_proj.weight"].T,
                "b_q": b[:D], "b_k": b[D:2 * D], "b_v": b[2 * D:], "b_o": g[pre + "out_proj.bias"]}
    ref = {"W_1": g["linear1.weight"].T, "W_2": g["linear2.weight"].T, "b_1": g["linear1.bias"],
           "b_2": g["linear2.bias"]}
    ref.update({f"ln{k}_{s}": g[f"norm{k}.{t}"] for k in (1, 2, 3) if f"norm{k}.weight" in g
                for s, t in (("g", "weight"), ("b", "bias"))})
    for field, pre in attentions.items():
        ref.update({f"{field}.{name}": w for name, w in attn(pre).items()})
    return ref


def assert_grads(grads, ref, tol):
    for name, want in ref.items():
        record, _, field = name.rpartition(".")
        got = getattr(getattr(grads, record), field) if record else getattr(grads, field)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_backward_matches_torch_autograd(activation, rng):
    """seq2seq_encoder_layer with saved=, then its backward: dx and every weight's gradient (biases of the
    attention included) against torch autograd through TransformerEncoderLayer, float64, a padded row."""
    from transformer.models.encoder_decoder_backward import seq2seq_encoder_layer_backward
    layer, p = torch_layer(torch.nn.TransformerEncoderLayer, activation)
    lw = T.Seq2SeqEncoderLayer(self_attn=attention_from_torch(p, "self_attn."), W_1=p["linear1.weight"].T,
                               W_2=p["linear2.weight"].T, b_1=p["linear1.bias"], b_2=p["linear2.bias"],
                               ln1_g=p["norm1.weight"], ln1_b=p["norm1.bias"], ln2_g=p["norm2.weight"],
                               ln2_b=p["norm2.bias"])
    x, dy = rng.standard_normal((2, 5, D)), rng.standard_normal((2, 5, D))
    lengths = np.array([5, 3])
    x_t = torch.from_numpy(x).requires_grad_()
    pad = torch.from_numpy(np.arange(5)[None, :] >= lengths[:, None])  # with autograd on, torch's slow path: every row
    (layer(x_t, src_key_padding_mask=pad) * torch.from_numpy(dy)).sum().backward()
    saved = {}
    act = {"relu": T.relu, "gelu": T.gelu}[activation]
    T.seq2seq_encoder_layer(x, lw, H, mask=T.padding_mask(lengths, 5), activation=act, saved=saved)
    assert set(saved) == {"x", "self", "r1", "x1", "r2"} and set(saved["self"]) == {"q", "k", "v", "P", "o"}
    dx, grads = seq2seq_encoder_layer_backward(dy, lw, H, saved, activation=activation)
    tol = 1e-10 if activation == "relu" else 1e-6  # T.erf is a polynomial, |error| ≤ 1.5e-7
    np.testing.assert_allclose(dx, x_t.grad.numpy(), rtol=tol, atol=tol)
    assert_grads(grads, grads_from_torch(layer, {"self_attn": "self_attn."}), tol)


def test_decoder_layer_backward_matches_torch_autograd(rng):
    """seq2seq_decoder_layer with saved=, then its backward: dy, dz (cross-attention's keys and values)
    and every weight's gradient against torch autograd through TransformerDecoderLayer, float64."""
    from transformer.models.encoder_decoder_backward import seq2seq_decoder_layer_backward
    layer, p = torch_layer(torch.nn.TransformerDecoderLayer, "relu")
    lw = decoder_layer_from_torch(p)
    n_dec, n_enc = 4, 6
    y, z, dout = (rng.standard_normal((2, n, D)) for n in (n_dec, n_enc, n_dec))
    src_len = np.array([6, 4])
    src_pad = np.arange(n_enc)[None, :] >= src_len[:, None]  # (b, n_enc) True = padding (torch)
    future = np.triu(np.ones((n_dec, n_dec), dtype=bool), 1)  # True = may NOT attend (torch)
    y_t, z_t = torch.from_numpy(y).requires_grad_(), torch.from_numpy(z).requires_grad_()
    out = layer(y_t, z_t, tgt_mask=torch.from_numpy(future), memory_key_padding_mask=torch.from_numpy(src_pad))
    (out * torch.from_numpy(dout)).sum().backward()
    saved = {}
    T.seq2seq_decoder_layer(y, z, lw, H, cross_mask=~src_pad[:, None, None, :], saved=saved)
    assert set(saved) == {"y", "self", "r1", "y1", "cross", "r2", "y2", "r3"}
    dy, dz, grads = seq2seq_decoder_layer_backward(dout, z, lw, H, saved)
    np.testing.assert_allclose(dy, y_t.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dz, z_t.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(dz[1, 4:], 0)  # a padded source position was read by no query
    assert_grads(grads, grads_from_torch(layer, {"self_attn": "self_attn.", "cross_attn": "multihead_attn."}), 1e-10)


def test_a_trained_weight_dict_read_as_layers_is_the_same_arrays():
    """encoder_decoder_params.py: a layer of the dict as a record holds the dict's arrays themselves (an
    optimizer's in-place update is the layer's), and params_from_layer gives back exactly the layer's names."""
    from transformer.models.encoder_decoder_params import (params_from_layer, seq2seq_decoder_weights,
                                                           seq2seq_encoder_weights)
    cfg = T.Seq2SeqConfig(v=11, d=8, h=2, d_ff=12, L_enc=2, L_dec=2, n_max=8)
    params = T.init_seq2seq(cfg, 0)
    for prefix, view in (("enc.1.", seq2seq_encoder_weights(params, 1)),
                         ("dec.0.", seq2seq_decoder_weights(params, 0))):
        back = params_from_layer(view, prefix)
        assert sorted(back) == sorted(k for k in params if k.startswith(prefix))  # the layer's names, all of them
        assert all(back[k] is params[k] for k in back), prefix  # no copy
    lw = seq2seq_decoder_weights(params, 1)
    params["dec.1.cross.W_k"][0, 0] += 1.0  # an in-place update, as AdamW's
    assert lw.cross_attn.W_k[0, 0] == params["dec.1.cross.W_k"][0, 0]
