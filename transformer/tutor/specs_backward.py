"""The checker's cases for lesson 18's backward of the block's other sub-layers: rms_norm_backward and
swiglu_ffn_backward (the attention's and the softmax's are in specs_block.py)."""
from __future__ import annotations

import math

import numpy as np

from ..core.layers import rms_norm_backward, sigmoid, swiglu_ffn_backward
from .cases import Case, Mistake, Spec, fresh

__all__ = ["RMS_NORM_BACKWARD", "SWIGLU_BACKWARD"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- RMSNorm -----------------------------------------------------------------------------------------------
def rms_backward_cases():
    r = _rng(186)
    x = lambda *s: r.standard_normal(s) * 2 + 1  # noqa: E731
    g = lambda d: r.uniform(0.5, 1.5, d)  # noqa: E731
    return [Case("x (2, 3, 8): b=2, n=3, d=8", (r.standard_normal((2, 3, 8)), x(2, 3, 8), g(8)),
                 tags=frozenset({"batch"})),
            Case("x (4, 6)", (r.standard_normal((4, 6)), x(4, 6), g(6))),
            Case("eps=0.5 given", (r.standard_normal((2, 5)), x(2, 5), g(5)), {"eps": 0.5}, frozenset({"eps"})),
            Case("float32 x (3, 16)", tuple(a.astype(np.float32) for a in (r.standard_normal((3, 16)), x(3, 16),
                                                                            g(16))), tags=frozenset({"float32"}))]


def _rms_grads(dx_rule, dgamma_rule=lambda dY, x_hat, x: dY * x_hat, times_gamma=True, mean=True):
    """rms_norm_backward with a slip: dx_rule(g, x̂, c, r) the input's gradient, c = mean(g ∘ x̂) (or its sum);
    dgamma_rule(dY, x̂, x) what is summed over the rows for dγ; γ left out of g."""
    def backward(dY, x, gamma, eps=1e-6):
        x64, dY64 = x.astype(np.float64), dY.astype(np.float64)
        r = np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps)  # [..., 1]
        x_hat = x64 / r  # [..., d]
        g = dY64 * gamma if times_gamma else dY64  # [..., d]
        c = (g * x_hat).mean(-1, keepdims=True) if mean else (g * x_hat).sum(-1, keepdims=True)  # [..., 1]
        dgamma = dgamma_rule(dY64, x_hat, x64).reshape(-1, x.shape[-1]).sum(0)  # [d]
        return dx_rule(g, x_hat, c, r).astype(x.dtype), dgamma.astype(gamma.dtype)
    return backward


_RIGHT_DX = lambda g, x_hat, c, r: (g - x_hat * c) / r  # noqa: E731

RMS_NORM_BACKWARD = Spec(
    "rms_norm_backward", rms_norm_backward, rms_backward_cases, "transformer/core/layers.py",
    dims=(("…", "d"), ("d",)), names=("dx", "dgamma"),
    mistakes=[Mistake("r depends on x too: x̂ = x / r moves when x moves through r, which adds the term "
                      "− x̂ ∘ mean(g ∘ x̂) — dX = (g − x̂ ∘ mean(g ∘ x̂)) / r, not g / r",
                      variant=_rms_grads(lambda g, x_hat, c, r: g / r)),
              Mistake("RMSNorm does not centre: no − mean(g) term (that is LayerNorm's backward, whose forward "
                      "subtracts the mean) — dX = (g − x̂ ∘ mean(g ∘ x̂)) / r",
                      variant=_rms_grads(lambda g, x_hat, c, r: (g - g.mean(-1, keepdims=True) - x_hat * c) / r)),
              Mistake("the gradient that reaches x̂ is g = dY ∘ γ: Y = γ ∘ x̂, so multiply dY by γ before the rest",
                      variant=_rms_grads(_RIGHT_DX, times_gamma=False)),
              Mistake("the correction is the MEAN of g ∘ x̂ over the d features (r is a root MEAN square), not its "
                      "sum", variant=_rms_grads(_RIGHT_DX, mean=False)),
              Mistake("divide by r at the end: dX = (g − x̂ ∘ mean(g ∘ x̂)) / r",
                      variant=_rms_grads(lambda g, x_hat, c, r: g - x_hat * c)),
              Mistake("dγ sums dY ∘ x̂, the normalised x, not dY ∘ x: Y = γ ∘ x̂",
                      variant=_rms_grads(_RIGHT_DX, lambda dY, x_hat, x: dY * x)),
              Mistake("dγ sums dY ∘ x̂ over EVERY row: γ is shared by all b·n positions, so sum every axis but the "
                      "last ((dY * x_hat).reshape(-1, d).sum(axis=0)), not only axis 0", tag="batch"),
              Mistake("use the `eps` argument in r = √(mean(x²) + ε)", tag="eps")],
    torch=lambda case: _torch_rms_backward(case))


def _torch_rms_backward(case):
    """torch's autograd through F.rms_norm in float64, cast back to the inputs' dtypes."""
    import torch
    import torch.nn.functional as F

    (dY, x, gamma), kwargs = fresh(case)
    xt, gt = (torch.from_numpy(np.asarray(a, np.float64)).requires_grad_(True) for a in (x, gamma))
    F.rms_norm(xt, xt.shape[-1:], gt, kwargs.get("eps", 1e-6)).backward(torch.from_numpy(np.asarray(dY, np.float64)))
    return xt.grad.numpy().astype(x.dtype), gt.grad.numpy().astype(gamma.dtype)


# --- the SwiGLU feed-forward -------------------------------------------------------------------------------
def swiglu_backward_cases():
    r = _rng(187)
    m = lambda *s: r.standard_normal(s) / math.sqrt(s[0])  # noqa: E731
    x32 = r.standard_normal((3, 8)).astype(np.float32)
    return [Case("x (2, 3, 6): b=2, n=3, d=6, d_ff=10",
                 (r.standard_normal((2, 3, 6)), r.standard_normal((2, 3, 6)), m(6, 10), m(6, 10), m(10, 6)),
                 tags=frozenset({"batch"})),
            Case("x (4, 8): d=8, d_ff=12", (r.standard_normal((4, 8)), r.standard_normal((4, 8)) * 2, m(8, 12),
                                             m(8, 12), m(12, 8))),
            Case("float32 x (3, 8), d_ff=16", (r.standard_normal((3, 8)).astype(np.float32), x32,
                                                *(a.astype(np.float32) for a in (m(8, 16), m(8, 16), m(16, 8)))),
                 tags=frozenset({"float32"}))]


def _swiglu_grads(silu_slope=lambda A, s: s * (1 + A * (1 - s)), gate=True, up=True, dU_gated=True,
                  dA_times_U=True, down_transposed=False):
    """swiglu_ffn_backward with a slip: silu_slope(A, σ(A)) for SiLU'(A); dX from the gate's branch or the up's
    alone; dU without SiLU(A); dA without U; dW_down as dYᵀ H."""
    def backward(dY, x, W_gate, W_up, W_down):
        d, d_ff = W_gate.shape
        X, dY2 = x.reshape(-1, d).astype(np.float64), dY.reshape(-1, W_down.shape[1]).astype(np.float64)
        A, U = X @ W_gate, X @ W_up  # [rows, d_ff]
        s = sigmoid(A)
        S = A * s  # SiLU(A)
        dH = dY2 @ W_down.T  # [rows, d_ff]
        dA = dH * (U if dA_times_U else 1.0) * silu_slope(A, s)
        dU = dH * S if dU_gated else dH
        dx = (dA @ W_gate.T if gate else 0.0) + (dU @ W_up.T if up else 0.0)
        dW_down = dY2.T @ (S * U) if down_transposed else (S * U).T @ dY2
        return (np.reshape(dx, x.shape).astype(x.dtype), (X.T @ dA).astype(W_gate.dtype),
                (X.T @ dU).astype(W_up.dtype), dW_down.astype(W_down.dtype))
    return backward


SWIGLU_BACKWARD = Spec(
    "swiglu_ffn_backward", swiglu_ffn_backward, swiglu_backward_cases, "transformer/core/layers.py",
    dims=(("…", "d"), ("d", "d_ff"), ("d", "d_ff"), ("d_ff", "d")), names=("dx", "dW_gate", "dW_up", "dW_down"),
    mistakes=[Mistake("SiLU'(a) is the product rule on a·σ(a): σ(a) + a·σ(a)(1 − σ(a)) = σ(a)(1 + a(1 − σ(a))), "
                      "not σ(a) alone", variant=_swiglu_grads(lambda A, s: s)),
              Mistake("SiLU'(a) = σ(a)(1 + a(1 − σ(a))): σ(a)(1 − σ(a)) is the sigmoid's own slope, and SiLU is "
                      "a·σ(a)", variant=_swiglu_grads(lambda A, s: s * (1 - s))),
              Mistake("x feeds both branches, so both gradients reach it: dX = dA W_gateᵀ + dU W_upᵀ (the up "
                      "branch's part is missing)", variant=_swiglu_grads(up=False)),
              Mistake("x feeds both branches, so both gradients reach it: dX = dA W_gateᵀ + dU W_upᵀ (the gate's "
                      "part is missing)", variant=_swiglu_grads(gate=False)),
              Mistake("the product rule on H = SiLU(A) ∘ U: dU = dH ∘ SiLU(A) — each factor's gradient is dH times "
                      "the other factor", variant=_swiglu_grads(dU_gated=False)),
              Mistake("the product rule on H = SiLU(A) ∘ U: dA = dH ∘ U ∘ SiLU'(A) — the gate's gradient is scaled "
                      "by the other factor, U", variant=_swiglu_grads(dA_times_U=False)),
              Mistake("dW_down = Hᵀ dY, of W_down's shape (d_ff, d); dYᵀ H is its transpose",
                      variant=_swiglu_grads(down_transposed=True)),
              *(Mistake("a weight is shared by every position: its gradient sums over all of them — flatten the "
                        "leading axes first (x.reshape(-1, d)) so that Xᵀ dA is one (d, d_ff) sum", tag="batch",
                        raises=raises)
                for raises in (r"core dimension|broadcast|mismatch|not aligned", None))],
    torch=lambda case: _torch_swiglu_backward(case))


def _torch_swiglu_backward(case):
    """torch's autograd through (SiLU(x W_gate) ∘ x W_up) W_down in float64, cast back to the inputs' dtypes."""
    import torch
    import torch.nn.functional as F

    (dY, *inputs), _ = fresh(case)
    x, W_gate, W_up, W_down = (torch.from_numpy(np.asarray(a, np.float64)).requires_grad_(True) for a in inputs)
    ((F.silu(x @ W_gate) * (x @ W_up)) @ W_down).backward(torch.from_numpy(np.asarray(dY, np.float64)))
    return tuple(t.grad.numpy().astype(a.dtype) for t, a in zip((x, W_gate, W_up, W_down), inputs))
