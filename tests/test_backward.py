"""Every backward pass of the core against torch autograd (float64, and one float32 run), central
finite differences along random directions, and its own forward on every backend.

Each case below names our forward, the same forward written in torch, the inputs (odd sizes:
d = 7, n = 5, d_ff = 11), which of them are differentiated, and our backward. A gradient dY is
drawn at random, so the scalar checked is ⟨f(x), dY⟩, whose gradient is the backward of dY.
"""
import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer as T
from conftest import asarray

TORCH_TOL = 1e-10  # float64, relative to the largest |gradient|: only rounding separates the two
FD_EPS, FD_TOL = 1e-6, 1e-7  # central differences: error ~ eps² f''' + 1e-16·|f|/eps
# GELU's forward writes erf as a polynomial (within 1.5e-7) whose own slope is within 5.3e-7 of the true
# one, which the backward uses: a finite difference of the forward sees that, torch does not (7e-8).
GELU_FD_TOL, GELU_TORCH_TOL = 1e-5, 3e-7
F32_TOL = 2e-5  # float32 (unit roundoff 6e-8) through a few products and sums of ≤ 40 terms


@dataclass
class Case:
    f: object  # ours: (*args) -> out
    tf: object  # torch: (*tensors) -> out
    args: list  # NumPy arrays (float64, ints, bools) and plain values, in f's order
    diff: tuple  # indices of the args whose gradient back returns
    back: object  # (dY, *args) -> one gradient per index of diff


def _causal_padded_mask(b, n_q, n_k, lengths):  # [b, 1, n_q, n_k]: causal and padded keys; row 0 of batch 1 sees nothing
    m = T.causal_mask(n_q, n_k)[None, None] & T.padding_mask(np.array(lengths), n_k)
    m = np.broadcast_to(m, (b, 1, n_q, n_k)).copy()
    m[-1, 0, 0, :] = False  # a fully masked row
    return m


def _torch_softmax(s, mask):  # the forward's semantics in torch: masked -> 0, a fully masked row -> 0 (not NaN)
    keep = torch.as_tensor(mask)
    m = torch.where(keep, s, -torch.inf).amax(-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m) * keep
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def _torch_attention(q, k, v, mask, scale=None):
    n_rep = q.shape[1] // k.shape[1]
    K, V = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    return _torch_softmax(q @ K.mT * scale, mask) @ V


def _torch_rope_half(x, cos, sin):
    h = x.shape[-1] // 2
    c, s = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    return x * c + torch.cat([-x[..., h:], x[..., :h]], -1) * s


def _torch_rope_interleaved(x, cos, sin):  # the complex form: (x₂ᵢ + i·x₂ᵢ₊₁)·(cos θ + i·sin θ)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(z * torch.complex(cos, sin)).reshape(x.shape)


def _sdpa_case(rng, h, h_kv, n_q, n_k, lengths, scale=None):
    b, d_h = len(lengths), 3
    q, k, v = rng.standard_normal((b, h, n_q, d_h)), rng.standard_normal((b, h_kv, n_k, d_h)), \
        rng.standard_normal((b, h_kv, n_k, d_h))
    mask = _causal_padded_mask(b, n_q, n_k, lengths)

    def back(dO, q, k, v, mask):
        _, P = T.scaled_dot_product_attention(q, k, v, mask, scale=scale, return_weights=True)
        return T.scaled_dot_product_attention_backward(dO, q, k, v, P, scale=scale)
    return Case(lambda q, k, v, mask: T.scaled_dot_product_attention(q, k, v, mask, scale=scale),
                lambda q, k, v, mask: _torch_attention(q, k, v, mask, scale), [q, k, v, mask], (0, 1, 2), back)


def _ffn_case(rng, activation, bias):
    x, W1, W2 = rng.standard_normal((2, 5, 7)), rng.standard_normal((7, 11)) / 2, rng.standard_normal((11, 6)) / 2
    b1, b2 = (rng.standard_normal(11), rng.standard_normal(6)) if bias else (None, None)
    ours = {"relu": T.relu, "gelu": T.gelu, "gelu_tanh": lambda z: T.gelu(z, "tanh"), "silu": T.silu}[activation]
    theirs = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
              "silu": F.silu}[activation]
    if bias:
        return Case(lambda x, W1, W2, b1, b2: T.ffn(x, W1, W2, b1, b2, activation=ours),
                    lambda x, W1, W2, b1, b2: theirs(x @ W1 + b1) @ W2 + b2, [x, W1, W2, b1, b2], (0, 1, 2, 3, 4),
                    lambda dY, *a: T.ffn_backward(dY, *a, activation=activation))
    return Case(lambda x, W1, W2: T.ffn(x, W1, W2, activation=ours), lambda x, W1, W2: theirs(x @ W1) @ W2,
                [x, W1, W2], (0, 1, 2), lambda dY, *a: T.ffn_backward(dY, *a, activation=activation)[:3])


def _cases():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 7)) * 2 + 0.5
    g, be = rng.standard_normal(7), rng.standard_normal(7)
    W, b = rng.standard_normal((7, 4)), rng.standard_normal(4)
    act = np.linspace(-5, 5, 20).reshape(4, 5)  # 0 excluded: relu's kink has no finite difference
    ids = np.array([[3, 1, 3, 0, 3], [1, 1, 7, 2, 3]])  # repeated ids; 4, 5, 6, 8 never occur
    W_E, W_pos = rng.standard_normal((9, 7)), rng.standard_normal((12, 7))
    pos = np.array([0, 3, 1, 7, 2])
    cos, sin = T.rope_cos_sin(pos, 6, base=10.0, dtype=np.float64)  # [5, 3]
    pos_b = np.array([[0, 1, 2, 0, 1], [4, 5, 6, 7, 8]])  # per-sequence positions (packing restarts them)
    cos_b, sin_b = (c.reshape(2, 1, 5, 3) for c in T.rope_cos_sin(pos_b.ravel(), 6, base=10.0, dtype=np.float64))
    S = rng.standard_normal((2, 3, 4, 6)) * 3
    s_mask = _causal_padded_mask(2, 4, 6, [6, 5])
    logits = rng.standard_normal((2, 5, 9)) * 3
    targets = np.array([[1, -100, 8, 0, 1], [-100, 4, 4, 2, -100]])  # ignored rows
    heads = rng.standard_normal((2, 3, 5, 2))
    return {
        "linear_bias": Case(T.linear, lambda x, W, b: x @ W + b, [x, W, b], (0, 1, 2),
                            lambda dY, x, W, b: T.linear_backward(dY, x, W, True)),
        "linear_4d": Case(T.linear, lambda x, W: x @ W, [rng.standard_normal((2, 3, 5, 7)), W], (0, 1),
                          lambda dY, x, W: T.linear_backward(dY, x, W)[:2]),
        "layer_norm": Case(lambda x, g, be: T.layer_norm(x, g, be, eps=1e-5),
                           lambda x, g, be: F.layer_norm(x, (7,), g, be, eps=1e-5), [x, g, be], (0, 1, 2),
                           lambda dY, x, g, be: T.layer_norm_backward(dY, x, g, 1e-5)),
        "layer_norm_no_beta": Case(lambda x, g: T.layer_norm(x, g, eps=1e-3),
                                   lambda x, g: F.layer_norm(x, (7,), g, eps=1e-3), [x, g], (0, 1),
                                   lambda dY, x, g: T.layer_norm_backward(dY, x, g, 1e-3, has_beta=False)[:2]),
        "rms_norm": Case(lambda x, g: T.rms_norm(x, g, eps=1e-5), lambda x, g: F.rms_norm(x, (7,), g, eps=1e-5),
                         [x, g], (0, 1), lambda dY, x, g: T.rms_norm_backward(dY, x, g, 1e-5)),
        "relu": Case(T.relu, F.relu, [act], (0,), lambda dY, x: (T.relu_backward(dY, x),)),
        "sigmoid": Case(T.sigmoid, torch.sigmoid, [act], (0,), lambda dY, x: (T.sigmoid_backward(dY, x),)),
        "silu": Case(T.silu, F.silu, [act], (0,), lambda dY, x: (T.silu_backward(dY, x),)),
        "gelu_tanh": Case(lambda x: T.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"), [act], (0,),
                          lambda dY, x: (T.gelu_backward(dY, x, "tanh"),)),
        "gelu": Case(T.gelu, F.gelu, [act], (0,), lambda dY, x: (T.gelu_backward(dY, x),)),
        **{f"ffn_{a}{'_bias' if bias else ''}": _ffn_case(rng, a, bias)
           for a, bias in [("relu", True), ("gelu", False), ("gelu_tanh", True), ("silu", False)]},
        "swiglu_ffn": Case(T.swiglu_ffn, lambda x, Wg, Wu, Wd: (F.silu(x @ Wg) * (x @ Wu)) @ Wd,
                           [x, rng.standard_normal((7, 11)) / 2, rng.standard_normal((7, 11)) / 2,
                            rng.standard_normal((11, 7)) / 2], (0, 1, 2, 3), T.swiglu_ffn_backward),
        "embed": Case(T.embed, lambda ids, W_E: F.embedding(ids, W_E), [ids, W_E], (1,),
                      lambda dX, ids, W_E: (T.embed_backward(dX, ids, 9),)),
        "lm_head": Case(T.lm_head, lambda x, W_E: x @ W_E.mT, [x, W_E], (0, 1), T.lm_head_backward),
        "learned_positions": Case(lambda W_pos: T.learned_positions(5, W_pos, 3), lambda W_pos: W_pos[3:8], [W_pos],
                                  (0,), lambda dP, W_pos: (T.learned_positions_backward(dP, 12, 3),)),
        "learned_positions_batch": Case(lambda x, W_pos: x + T.learned_positions(5, W_pos, 0),
                                        lambda x, W_pos: x + W_pos[:5], [x, W_pos], (0, 1),
                                        lambda dY, x, W_pos: (dY, T.learned_positions_backward(dY, 12))),
        "rope_half": Case(T.apply_rope_half, _torch_rope_half, [rng.standard_normal((2, 3, 5, 6)), cos, sin], (0,),
                          lambda dY, x, c, s: (T.apply_rope_half_backward(dY, c, s),)),
        "rope_half_batch_positions": Case(T.apply_rope_half, _torch_rope_half,
                                          [rng.standard_normal((2, 3, 5, 6)), cos_b, sin_b], (0,),
                                          lambda dY, x, c, s: (T.apply_rope_half_backward(dY, c, s),)),
        "rope_interleaved": Case(T.apply_rope_interleaved, _torch_rope_interleaved,
                                 [rng.standard_normal((2, 1, 5, 6)), cos, sin], (0,),
                                 lambda dY, x, c, s: (T.apply_rope_interleaved_backward(dY, c, s),)),
        "softmax_masked": Case(lambda s, m: T.softmax(s, mask=m), _torch_softmax, [S, s_mask], (0,),
                               lambda dP, s, m: (T.softmax_backward(dP, T.softmax(s, mask=m)),)),
        "repeat_kv": Case(lambda k: T.repeat_kv(k, 3), lambda k: k.repeat_interleave(3, 1),
                          [rng.standard_normal((2, 2, 5, 3))], (0,), lambda dX, k: (T.repeat_kv_backward(dX, 3),)),
        "sdpa_mha": _sdpa_case(rng, 6, 6, 5, 5, [5, 4]),
        "sdpa_gqa": _sdpa_case(rng, 6, 2, 5, 5, [5, 3]),
        "sdpa_mqa": _sdpa_case(rng, 6, 1, 5, 5, [4, 5]),
        "sdpa_gqa_cross_scaled": _sdpa_case(rng, 4, 2, 3, 7, [7, 6], scale=0.3),
        "split_heads": Case(lambda x: T.split_heads(x, 3), lambda x: x.reshape(2, 5, 3, 2).transpose(1, 2),
                            [rng.standard_normal((2, 5, 6))], (0,), lambda dY, x: (T.split_heads_backward(dY),)),
        "merge_heads": Case(T.merge_heads, lambda x: x.transpose(1, 2).reshape(2, 5, 6), [heads], (0,),
                            lambda dY, x: (T.merge_heads_backward(dY, 3),)),
        "cross_entropy": Case(T.cross_entropy, lambda z, t: F.cross_entropy(z.reshape(-1, 9), t.reshape(-1)),
                              [logits, targets], (0,), lambda dL, z, t: (dL * T.cross_entropy_backward(z, t),)),
    }


CASES = _cases()


def _is_float(a):
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _cast(args, dtype):
    return [a.astype(dtype) if _is_float(a) else a for a in args]


def _torch_grads(case, dY):  # -> out, grads of the diff args, by torch autograd
    ts = [torch.tensor(a, requires_grad=i in case.diff) if isinstance(a, np.ndarray) else a
          for i, a in enumerate(case.args)]
    out = case.tf(*ts)
    out.backward(torch.as_tensor(dY))
    return out.detach().numpy(), [ts[i].grad.numpy() for i in case.diff]


def _dY(case, seed=1):
    out = np.asarray(case.f(*case.args))
    return np.random.default_rng(seed).standard_normal(out.shape)


def _assert_close(ours, ref, tol, what):
    ours, ref = np.asarray(T.to_numpy(ours), np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    err = np.max(np.abs(ours - ref), initial=0.0)
    scale = max(1.0, np.max(np.abs(ref), initial=0.0))
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol:g}·{scale:.3g}"


@pytest.mark.parametrize("name", CASES)
def test_backward_equals_torch_autograd_float64(name):
    case = CASES[name]
    dY = _dY(case)
    out_ref, grads_ref = _torch_grads(case, dY)
    tol = GELU_TORCH_TOL if name in ("gelu", "ffn_gelu") else TORCH_TOL
    _assert_close(case.f(*case.args), out_ref, tol, f"{name} forward")
    grads = case.back(dY, *case.args)
    assert len(grads) == len(case.diff)
    for i, g, ref in zip(case.diff, grads, grads_ref):
        _assert_close(g, ref, tol, f"{name} d(arg {i})")


@pytest.mark.parametrize("name", CASES)
def test_backward_equals_finite_differences(name):
    """⟨∇f, u⟩ against (f(x + εu) − f(x − εu)) / 2ε for three random directions u per input."""
    case = CASES[name]
    dY = _dY(case)
    grads = case.back(dY, *case.args)
    rng = np.random.default_rng(3)
    tol = GELU_FD_TOL if name in ("gelu", "ffn_gelu") else FD_TOL

    def scalar(args):
        return float(np.sum(np.asarray(case.f(*args), np.float64) * dY))
    for i, g in zip(case.diff, grads):
        for _ in range(3):
            u = rng.standard_normal(case.args[i].shape)
            plus, minus = list(case.args), list(case.args)
            plus[i], minus[i] = case.args[i] + FD_EPS * u, case.args[i] - FD_EPS * u
            fd = (scalar(plus) - scalar(minus)) / (2 * FD_EPS)
            exact = float(np.sum(np.asarray(g) * u))
            assert abs(fd - exact) <= tol * max(1.0, abs(exact)), f"{name} arg {i}: fd {fd!r} vs {exact!r}"


@pytest.mark.parametrize("name", CASES)
def test_backward_in_float32(name):
    """Computed in float32 (and returned in float32), within F32_TOL of torch's float64 gradients."""
    case = CASES[name]
    dY = _dY(case)
    _, grads_ref = _torch_grads(case, dY)
    grads = case.back(dY.astype(np.float32), *_cast(case.args, np.float32))
    for i, g, ref in zip(case.diff, grads, grads_ref):
        assert g.dtype == np.float32, (name, i, g.dtype)
        _assert_close(g, ref, F32_TOL, f"{name} float32 d(arg {i})")


@pytest.mark.parametrize("name", CASES)
def test_backward_on_every_backend(name, xp):
    """The same lines on NumPy, array-api-strict (embed_backward takes its one-hot path there) and CuPy."""
    case = CASES[name]
    dY = _dY(case)
    ref = case.back(dY, *case.args)
    moved = [asarray(xp, a) if isinstance(a, np.ndarray) else a for a in case.args]
    for g, r in zip(case.back(asarray(xp, dY), *moved), ref):
        _assert_close(g, r, 1e-12, name)


# --- the edges the cases above do not reach -----------------------------------------------------

def test_fully_masked_row_gets_zero_gradient_not_nan():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 4, 3)) for _ in range(3))
    mask = np.ones((1, 1, 4, 4), bool)
    mask[0, 0, 2] = False
    _, P = T.scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    dq, dk, dv = T.scaled_dot_product_attention_backward(np.ones_like(q), q, k, v, P)
    assert np.isfinite(dq).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    assert (dq[:, :, 2] == 0).all()  # the query that saw nothing has no gradient
    assert (T.softmax_backward(np.ones((2, 3)), np.zeros((2, 3))) == 0).all()


def test_relu_gradient_at_zero_is_zero_as_in_torch():
    x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    F.relu(x).backward(torch.ones(3, dtype=torch.float64))
    np.testing.assert_array_equal(T.relu_backward(np.ones(3), x.detach().numpy()), x.grad.numpy())  # [0, 0, 1]


def test_cross_entropy_with_every_target_ignored_is_zero_not_nan():
    z = np.random.default_rng(0).standard_normal((2, 3, 5))
    t = np.full((2, 3), -100)
    assert float(T.cross_entropy(z, t)) == 0.0
    assert (T.cross_entropy_backward(z, t) == 0).all()
    # torch gives NaN here (0/0); with one kept target both agree
    t[1, 2] = 4
    ref = F.cross_entropy(torch.from_numpy(z).reshape(-1, 5), torch.from_numpy(t).reshape(-1))
    assert float(T.cross_entropy(z, t)) == pytest.approx(float(ref), rel=1e-12)


def test_cross_entropy_gradient_of_a_row_of_all_minus_inf_is_nan_as_its_loss():
    """A kept row whose logits are all −inf has a NaN loss; its gradient was a finite −1/N at the target (softmax
    gives such a row zeros). Reference: torch autograd in float64, on the kept rows. An ignored row counts for
    nothing, so its gradient stays 0, all −inf or not (torch's is NaN there, from its log-softmax's backward)."""
    z = np.array([[-np.inf] * 3, [0.0, 1.0, 2.0], [-np.inf] * 3])
    t = np.array([1, 2, -100])
    zt = torch.from_numpy(z).requires_grad_()
    loss = F.cross_entropy(zt, torch.from_numpy(t))
    loss.backward()
    with np.errstate(invalid="ignore"):
        assert np.isnan(float(T.cross_entropy(z, t))) and np.isnan(float(loss.detach()))
        d = T.cross_entropy_backward(z, t)
    np.testing.assert_allclose(d[:2], zt.grad.numpy()[:2], atol=1e-15)  # NaN where torch's is, on the kept rows
    assert (d[2] == 0).all()


def test_cross_entropy_is_stable_for_huge_logits():
    z = np.array([[1e4, 0.0, -1e4], [3e4, 3e4, 3e4]])
    t = np.array([1, 2])
    ref = F.cross_entropy(torch.from_numpy(z), torch.from_numpy(t))
    assert float(T.cross_entropy(z, t)) == pytest.approx(float(ref), rel=1e-12)
    zt = torch.from_numpy(z).requires_grad_()
    F.cross_entropy(zt, torch.from_numpy(t)).backward()
    np.testing.assert_allclose(T.cross_entropy_backward(z, t), zt.grad.numpy(), atol=1e-15)


@pytest.mark.parametrize("offset", [1e6, -1e6])
def test_cross_entropy_of_float32_logits_far_from_zero_keeps_its_digits(offset):
    """Logits near ±10⁶ lie 1/16 apart in float32: LSE(z) and z_t are both near 10⁶, and LSE(z) − z_t
    kept only that step (a loss off by ~4e-3). Reference: torch in float64 on the same float32 values."""
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((4, 7)) * 3 + offset).astype(np.float32)
    t = rng.integers(0, 7, 4)
    ref = F.cross_entropy(torch.from_numpy(z.astype(np.float64)), torch.from_numpy(t))
    assert float(T.cross_entropy(z, t)) == pytest.approx(float(ref), rel=1e-6)  # float32: a few ulps


def test_embedding_gradient_of_a_tied_table_is_the_sum_of_both_paths():
    """W_E used twice, as embedding and as head: torch's gradient of the tied table = ours summed."""
    rng = np.random.default_rng(1)
    W_E, ids = rng.standard_normal((6, 4)), np.array([[5, 0, 5, 2]])
    dlog = rng.standard_normal((1, 4, 6))
    x = T.embed(ids, W_E)
    dx, dW_head = T.lm_head_backward(dlog, x, W_E)  # logits = embed(ids) W_Eᵀ
    total = dW_head + T.embed_backward(dx, ids, 6)
    t = torch.from_numpy(W_E).requires_grad_()
    (F.embedding(torch.from_numpy(ids), t) @ t.mT).backward(torch.from_numpy(dlog))
    np.testing.assert_allclose(total, t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call,err,match", [
    (lambda: T.linear_backward(np.ones((2, 3, 5)), np.ones((2, 3, 4)), np.ones((4, 6))), ValueError,
     r"dY must have shape \(\.\.\., d_out\) = \(2, 3, 6\) for x \(2, 3, 4\), got \(2, 3, 5\)"),
    (lambda: T.linear(np.ones((2, 4)), np.ones((5, 6))), ValueError, r"W must be a \(d_in, d_out\) matrix with d_in = 4 \(x's last size\), got shape \(5, 6\)"),
    (lambda: T.rms_norm_backward(np.ones((1, 4)), np.ones((3, 4)), np.ones(4)), ValueError,
     r"dY must have the shape of x \(3, 4\), got \(1, 4\)"),
    (lambda: T.relu_backward(np.ones(3), np.ones((2, 3))), ValueError, r"dY must have the shape of x \(2, 3\)"),
    (lambda: T.scaled_dot_product_attention_backward(*(np.ones((1, 2, 3, 4)),) * 4, np.ones((1, 1, 3, 3))),
     ValueError, r"P must be the saved weights of shape \(b, h, n_q, n_k\) = \(1, 2, 3, 3\), got \(1, 1, 3, 3\)"),
    (lambda: T.repeat_kv_backward(np.ones((1, 4, 2, 2)), 3), ValueError, r"heads a multiple of n_rep=3"),
    (lambda: T.embed_backward(np.ones((1, 2, 3)), np.array([[0, 9]]), 5), ValueError,
     r"token ids must lie in \[0, 5\), got min 0, max 9"),
    (lambda: T.embed_backward(np.ones((1, 3, 3)), np.array([[0, 1]]), 5), ValueError, r"dX must have shape"),
    (lambda: T.lm_head_backward(np.ones((1, 2, 4)), np.ones((1, 2, 3)), np.ones((5, 3))), ValueError,
     r"d_logits must have shape \(\.\.\., v\) = \(1, 2, 5\), got \(1, 2, 4\)"),
    (lambda: T.learned_positions_backward(np.ones((4, 2)), 5, offset=2), ValueError, r"positions 2…5 exceed"),
    (lambda: T.cross_entropy(np.ones((2, 5)), np.array([1, 5])), ValueError,
     r"targets must lie in \[0, 5\) or equal ignore_index=-100, got min 1, max 5"),
    (lambda: T.cross_entropy_backward(np.ones((2, 5)), np.array([[1, 2]])), ValueError,
     r"targets must have shape logits.shape\[:-1\] = \(2,\), got \(1, 2\)"),
    (lambda: T.cross_entropy(np.ones((2, 5)), np.array([1.0, 2.0])), TypeError, r"targets must be integer token ids"),
    (lambda: T.ffn_backward(np.ones((2, 4)), np.ones((2, 4)), np.ones((4, 6)), np.ones((6, 4)), activation="tanh"),
     ValueError, r"activation must be 'relu', 'gelu', 'gelu_tanh' or 'silu', got 'tanh'"),
])
def test_bad_shapes_are_refused_in_one_line(call, err, match):
    with pytest.raises(err, match=match):
        call()
