"""The one Llama forward with `saved=` and its backward (`llama_backward.forward_backward`) against torch autograd
in float64, in SmolLM2's interleaved RoPE layout (the trained decoder's rotate-half layout is held to torch in
test_train_decoder.py): every weight's gradient, with GQA and MQA, d ≠ h·d_h, tied and untied heads, packed
rows with restarted positions; and the forward's inference path unchanged by keeping activations."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer as T
from transformer.models import llama as llama_mod
from transformer.models.llama_params import params_from_weights

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py: one torch thread
REL = 1e-9  # float64: relative to each array's largest entry


def tiny(h_kv, tied, seed=0):  # a Llama of random float64 weights, d = 40 ≠ h·d_h = 32
    cfg = llama_mod.LlamaConfig(L=2, d=40, h=4, h_kv=h_kv, d_h=8, d_ff=24, v=29, n_ctx=32, rope_base=100.0,
                                tied=tied)
    m = T.random_llama(cfg, seed=seed, std=0.5)
    w = m.weights
    for lw in w.layers:  # gains away from 1, so that their gradients are not all alike
        lw.attn_norm, lw.ffn_norm = 1 + 0.3 * np.cos(np.arange(cfg.d)), 1 - 0.2 * np.sin(np.arange(cfg.d))
    for lw in w.layers:
        for name, a in vars(lw).items():
            setattr(lw, name, np.asarray(a, np.float64))
    w.W_E, w.norm = np.asarray(w.W_E, np.float64), np.asarray(w.norm, np.float64)
    w.W_out = None if tied else np.asarray(w.W_out, np.float64)
    return cfg, w


def torch_logits(cfg, named, ids, positions, mask):  # independent: torch's own rms_norm, SDPA (GQA), SiLU
    b, n = ids.shape
    inv_freq = cfg.rope_base ** (-torch.arange(0, cfg.d_h, 2, dtype=torch.float64) / cfg.d_h)
    ang = torch.tensor(np.asarray(positions), dtype=torch.float64)[:, None, :, None] * inv_freq  # [b, 1, n, d_h/2]
    cos, sin = ang.cos(), ang.sin()

    def rope(x):  # interleaved pairs (x_2i, x_2i+1) as complex numbers, turned by e^{iθ}
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], cfg.d_h // 2, 2).contiguous())
        return torch.view_as_real(z * torch.complex(cos, sin)).flatten(-2)

    x = F.embedding(torch.as_tensor(ids), named["W_E"])
    for l in range(cfg.L):
        p = lambda k: named[f"layers.{l}.{k}"]  # noqa: E731
        a = F.rms_norm(x, (cfg.d,), p("norm1"), eps=cfg.eps)
        q = rope((a @ p("W_q")).view(b, n, cfg.h, cfg.d_h).transpose(1, 2))
        k = rope((a @ p("W_k")).view(b, n, cfg.h_kv, cfg.d_h).transpose(1, 2))
        v = (a @ p("W_v")).view(b, n, cfg.h_kv, cfg.d_h).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(np.array(mask)), enable_gqa=True)
        x = x + o.transpose(1, 2).reshape(b, n, cfg.h * cfg.d_h) @ p("W_o")
        f = F.rms_norm(x, (cfg.d,), p("norm2"), eps=cfg.eps)
        x = x + (F.silu(f @ p("W_gate")) * (f @ p("W_up"))) @ p("W_down")
    x = F.rms_norm(x, (cfg.d,), named["norm"], eps=cfg.eps)
    return x @ (named["W_E"].T if cfg.tied else named["W_out"])


def assert_rel(ours, ref, what, rel=REL):
    ref = np.asarray(ref)
    err, scale = np.max(np.abs(np.asarray(ours) - ref)), np.max(np.abs(ref))
    assert err <= rel * scale, f"{what}: max error {err:.3g} > {rel:g}·{scale:.3g}"


@pytest.mark.parametrize("h_kv, tied, packed", [(4, True, False), (2, False, False), (1, True, True)],
                         ids=["mha-tied", "gqa-untied", "mqa-packed"])
def test_every_gradient_equals_torch_autograd(h_kv, tied, packed):
    cfg, w = tiny(h_kv, tied)
    rng = np.random.default_rng(1)
    b, n = 2, 9
    ids = rng.integers(0, cfg.v, (b, n))
    if packed:  # two documents in row 0, positions restarting at the second
        doc = np.array([[0] * 4 + [1] * 5, [0] * 9])
        positions = np.array([list(range(4)) + list(range(5)), list(range(9))])
        mask = T.document_mask(doc, causal=True)  # [b, 1, n, n]
    else:
        positions, mask = np.broadcast_to(np.arange(n), (b, n)), T.causal_mask(n)
    cos, sin = T.rope_cos_sin(np.arange(cfg.n_ctx), cfg.d_h, cfg.rope_base, np.float64)
    saved = {}
    logits = T.llama_forward(ids, w, cfg, cos, sin, positions=positions, mask=mask, saved=saved)  # [b, n, v]
    R = rng.standard_normal(logits.shape)  # loss = Σ R ∘ logits: ∂loss/∂logits = R
    grads = params_from_weights(T.llama_forward_backward(R, saved, w, cfg))

    named = {k: torch.tensor(a, requires_grad=True) for k, a in params_from_weights(w).items()}
    ref = torch_logits(cfg, named, ids, positions, np.broadcast_to(mask, (b, 1, n, n)))
    (ref * torch.as_tensor(R)).sum().backward()
    assert_rel(logits, ref.detach().numpy(), "logits")
    assert list(grads) == list(named)
    for k, t in named.items():
        assert_rel(grads[k], t.grad.numpy(), f"d{k}")


def test_keeping_activations_leaves_the_logits_as_they_were():
    """saved= changes what is kept, not what is computed: the same logits, bit for bit, as generation's pass."""
    cfg, w = tiny(2, True)
    ids = np.random.default_rng(2).integers(0, cfg.v, (2, 7))
    cos, sin = T.rope_cos_sin(np.arange(cfg.n_ctx), cfg.d_h, cfg.rope_base, np.float64)
    saved = {}
    kept = T.llama_forward(ids, w, cfg, cos, sin, saved=saved)
    np.testing.assert_array_equal(kept, T.llama_forward(ids, w, cfg, cos, sin))
    assert {"ids", "cos", "sin", "x_final", "h", "layers.1.P", "layers.1.f"} <= set(saved)


@pytest.mark.parametrize("call, err, match", [
    (lambda: llama_mod.LlamaConfig(L=1, d=8, h=2, h_kv=1, d_h=4, d_ff=8, v=5, n_ctx=8, rope_layout="pairs"),
     ValueError, "^rope_layout must be 'interleaved' or 'half', got rope_layout='pairs'$"),
    (lambda: T.llama_forward_backward(np.zeros((1, 3, 29)), {"ids": np.zeros((1, 3), int)}, *tiny(1, True)[::-1]),
     TypeError, r"^saved must be the dict that forward\(..., saved=saved\) filled$"),
])
def test_bad_input_is_refused_in_one_line(call, err, match):
    with pytest.raises(err, match=match):
        call()
