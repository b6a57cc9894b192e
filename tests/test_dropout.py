"""Dropout (core/attention.py) and attention-weight dropout in the tiny decoder.

The forward against torch's own dropout (its output tells which entries it kept), the backward
against torch autograd with the same mask and against finite differences, the expectation over
many draws, the identity in eval mode, the refusals; then the decoder's gradients with dropout on
against the torch twin (tests/support/torch_tiny.py) given the same keep-masks.
"""
import math

import numpy as np
import pytest
import torch

import transformer as T
from torch_tiny import TorchTinyDecoder


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py: one torch thread


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_forward_equals_torch_dropout_with_its_mask(p):
    torch.manual_seed(0)
    x = torch.rand(3, 5, 7, dtype=torch.float64) + 0.5  # no zeros: a zero of torch's output is a dropped entry
    y_torch = torch.nn.functional.dropout(x, p, training=True)
    keep = (y_torch != 0).numpy()
    y, mask = T.dropout(x.numpy(), p, mask=keep)
    np.testing.assert_array_equal(mask, keep)
    np.testing.assert_allclose(y, y_torch.numpy(), rtol=1e-15, atol=0)
    np.testing.assert_array_equal(y, (x * torch.as_tensor(keep) / (1 - p)).numpy())  # x · mask / (1 − p)


@pytest.mark.parametrize("p", [0.2, 0.6])
def test_backward_equals_autograd_and_finite_differences(p):
    rng = np.random.default_rng(1)
    x, dY = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    _, keep = T.dropout(x, p, rng=rng)
    dX = T.dropout_backward(dY, keep, p)
    xt = torch.tensor(x, requires_grad=True)
    (xt * torch.as_tensor(keep) / (1 - p) * torch.tensor(dY)).sum().backward()  # L = Σ dY ∘ Y: ∂L/∂Y = dY
    np.testing.assert_allclose(dX, xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    eps = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):  # the same mask in both evaluations: the loss is smooth in x
        e = np.zeros_like(x)
        e[idx] = eps
        fd[idx] = ((T.dropout(x + e, p, mask=keep)[0] - T.dropout(x - e, p, mask=keep)[0]) * dY).sum() / (2 * eps)
    np.testing.assert_allclose(dX, fd, rtol=1e-7, atol=1e-8)
    assert np.all(dX[~keep] == 0)  # a dropped entry passes no gradient back


def test_expectation_is_preserved():
    p, draws = 0.3, 4000
    x = np.linspace(0.5, 2.0, 50)
    rng = np.random.default_rng(2)
    ys, kept = np.zeros_like(x), 0
    for _ in range(draws):
        y, keep = T.dropout(x, p, rng=rng)
        ys += y
        kept += keep.sum()
    mean = ys / draws
    # each draw of entry i is x_i·Bernoulli(1 − p)/(1 − p): mean x_i, std x_i·√(p/(1 − p)); over N draws the
    # mean's std is x_i·√(p/((1 − p)N)): every entry within 5 of them (a miss somewhere in 50: < 3e-5)
    sigma = x * math.sqrt(p / ((1 - p) * draws))
    assert np.all(np.abs(mean - x) < 5 * sigma), np.max(np.abs(mean - x) / sigma)
    share = kept / (draws * x.size)  # binomial: std √(p(1 − p)/(N·n))
    assert abs(share - (1 - p)) < 5 * math.sqrt(p * (1 - p) / (draws * x.size))


def test_eval_mode_and_p_zero_are_the_identity():
    x = np.random.default_rng(3).normal(size=(2, 3)).astype(np.float32)
    for kw in ({"p": 0.5, "training": False}, {"p": 0.0, "rng": 0}, {"p": 0.0}):
        y, keep = T.dropout(x, **kw)
        assert y is x and keep is None
    dY = np.ones((2, 3), np.float32)
    assert T.dropout_backward(dY, None, 0.5) is dY
    y, keep = T.dropout(x, 0.25, rng=0)
    assert y.dtype == np.float32 and keep.dtype == bool  # the dtype is kept; the mask is boolean
    np.testing.assert_array_equal(T.dropout(x, 0.25, rng=0)[1], keep)  # same seed, same mask


@pytest.mark.parametrize("kw, err, message", [
    (dict(p=-0.1, rng=0), ValueError, r"p must be in \[0, 1\) .*got p=-0.1"),
    (dict(p=1.0, rng=0), ValueError, r"p must be in \[0, 1\) .*got p=1.0"),
    (dict(p=1.5, rng=0), ValueError, r"p must be in \[0, 1\)"),
    (dict(p=float("nan"), rng=0), ValueError, r"p must be a finite number, got p=nan"),
    (dict(p=float("inf"), rng=0), ValueError, r"p must be a finite number, got p=inf"),
    (dict(p="0.1", rng=0), TypeError, r"p must be a real number"),
    (dict(p=0.5), ValueError, r"dropout in training needs rng="),
    (dict(p=0.5, mask=np.ones((2, 2), bool)), ValueError, r"mask must have the shape of x \(2, 3\)"),
    (dict(p=0.5, mask=np.ones((2, 3))), TypeError, r"mask must be boolean"),
    (dict(p=0.5, rng=0, training=1), TypeError, r"training must be True or False"),
])
def test_bad_input_is_refused_in_one_line(kw, err, message):
    with pytest.raises(err, match=message) as e:
        T.dropout(np.zeros((2, 3)), **kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("p, err", [(-0.5, ValueError), (1.0, ValueError), (float("nan"), ValueError)])
def test_backward_refuses_bad_p(p, err):
    with pytest.raises(err, match=r"p must be") as e:
        T.dropout_backward(np.ones(3), np.ones(3, bool), p)
    assert "\n" not in str(e.value)


# --- attention-weight dropout in the tiny decoder ----------------------------------------------
def decoder_cfg(h_kv=2, dropout=0.3):
    return T.DecoderConfig(v=23, d=24, h=6, h_kv=h_kv, L=2, d_ff=20, n_max=16, rope_base=100.0, dropout=dropout)


def spread_params(cfg, seed=0):  # GPT-2's init × 10: 0.02 would leave near-uniform weights, a weak test
    return {k: w if "norm" in k else w * 10 for k, w in T.init_decoder(cfg, seed, dtype="float64").items()}


@pytest.mark.parametrize("h_kv", [6, 2, 1])
def test_decoder_gradients_with_dropout_equal_torch_with_the_same_masks(h_kv):
    cfg = decoder_cfg(h_kv)
    params = spread_params(cfg)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, cfg.v, (3, 11))
    targets = rng.integers(0, cfg.v, (3, 11))
    targets[0, :4] = -100
    logits, saved = T.decoder_forward(params, ids, cfg, training=True, rng=7)
    keep = {l: saved[f"layers.{l}.keep"] for l in range(cfg.L)}  # [b, h, n, n] each
    assert all(0.6 < k.mean() < 0.8 for k in keep.values())  # about 1 − p of the weights kept
    loss, grads = T.decoder_loss_and_grads(params, ids, targets, cfg, training=True, rng=7)  # same seed, same masks
    model = TorchTinyDecoder(cfg, params)
    ref_logits = model(ids, keep=keep)
    ref = torch.nn.functional.cross_entropy(ref_logits.reshape(-1, cfg.v), torch.as_tensor(targets).reshape(-1),
                                            ignore_index=-100)
    ref.backward()
    np.testing.assert_allclose(logits, ref_logits.detach().numpy(), rtol=0, atol=1e-12 * np.abs(logits).max())
    assert abs(loss - ref.item()) < 1e-12
    for name, w in model.named_weights().items():
        g_ref = w.grad.numpy()
        assert np.max(np.abs(grads[name] - g_ref)) <= 1e-10 * np.max(np.abs(g_ref)), name


def test_decoder_gradient_with_dropout_equals_finite_differences():
    cfg = decoder_cfg(2, dropout=0.5)
    params = spread_params(cfg, seed=1)
    rng = np.random.default_rng(5)
    ids, targets = rng.integers(0, cfg.v, (2, 9)), rng.integers(0, cfg.v, (2, 9))
    _, grads = T.decoder_loss_and_grads(params, ids, targets, cfg, training=True, rng=3)
    eps = 1e-6
    for name, idx in (("layers.0.W_q", (2, 5)), ("layers.1.W_k", (7, 1)), ("layers.0.W_v", (0, 3))):
        plus, minus = ({**params, name: params[name].copy()} for _ in range(2))
        plus[name][idx] += eps
        minus[name][idx] -= eps
        # rng=3 each time: the same keep-masks, so the loss is a smooth function of the weight
        fd = (T.decoder_loss_and_grads(plus, ids, targets, cfg, training=True, rng=3)[0]
              - T.decoder_loss_and_grads(minus, ids, targets, cfg, training=True, rng=3)[0]) / (2 * eps)
        assert abs(grads[name][idx] - fd) < 1e-6 * max(1.0, abs(fd)), (name, grads[name][idx], fd)


def test_decoder_eval_mode_and_default_config_are_unchanged_bit_for_bit():
    ids = np.random.default_rng(6).integers(0, 23, (2, 10))
    plain = decoder_cfg(dropout=0.0)
    params = T.init_decoder(plain, 0)
    ref, saved_ref = T.decoder_forward(params, ids, plain)
    assert T.DecoderConfig(**{**T.INDUCTION_SIZES}).dropout == 0.0
    for cfg, kw in ((plain, {"training": True, "rng": 0}), (decoder_cfg(dropout=0.5), {}),
                    (decoder_cfg(dropout=0.5), {"training": False, "rng": 0})):
        logits, saved = T.decoder_forward(params, ids, cfg, **kw)
        np.testing.assert_array_equal(logits, ref)
        assert saved.keys() == saved_ref.keys()  # no keep-mask saved: nothing was dropped
    train, _ = T.decoder_forward(params, ids, decoder_cfg(dropout=0.5), training=True, rng=0)
    assert np.abs(train - ref).max() > 1e-6  # training mode does drop


@pytest.mark.parametrize("cfg_kw, kw, err, message", [
    (dict(dropout=1.0), None, ValueError, r"dropout must be in \[0, 1\)"),
    (dict(dropout=-0.1), None, ValueError, r"dropout must be in \[0, 1\)"),
    (dict(dropout=float("nan")), None, ValueError, r"dropout must be a finite number"),
    (dict(dropout=0.1), dict(training=True), ValueError, r"needs rng="),
    (dict(dropout=0.1), dict(training=True, rng=0, attention="tiled"), ValueError, r"needs attention='plain'"),
    (dict(dropout=0.1), dict(training="yes", rng=0), TypeError, r"training must be True or False"),
])
def test_decoder_refuses_bad_dropout(cfg_kw, kw, err, message):
    with pytest.raises(err, match=message) as e:
        cfg = decoder_cfg(**cfg_kw)
        T.decoder_forward(T.init_decoder(cfg, 0), np.zeros((1, 4), np.int64), cfg, **kw)
    assert "\n" not in str(e.value)
