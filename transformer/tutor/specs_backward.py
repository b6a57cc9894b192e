"""The checker's cases for lesson 18's backward of the model's other parts: lm_head_backward, rms_norm_backward,
swiglu_ffn_backward, apply_rope_half_backward and embed_backward (the attention's and the softmax's are in
specs_block.py)."""
from __future__ import annotations

import math

import numpy as np

from ..core.embedding import embed_backward, lm_head_backward
from ..core.layers import rms_norm_backward, sigmoid, swiglu_ffn_backward
from ..core.positions import apply_rope_half, apply_rope_half_backward
from .cases import Case, Mistake, Spec, fresh

__all__ = ["LM_HEAD_BACKWARD", "RMS_NORM_BACKWARD", "SWIGLU_BACKWARD", "ROPE_BACKWARD", "EMBED_BACKWARD"]


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
                                                                            g(16))), tags=frozenset({"float32"})),
            Case("x (3, 4) whose row 1 is all 0: r = √ε there, and its gradient is finite",
                 (r.standard_normal((3, 4)), np.vstack([x(1, 4), np.zeros((1, 4)), x(1, 4)]), g(4)),
                 tags=frozenset({"zero"}))]


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
              Mistake("use the `eps` argument in r = √(mean(x²) + ε)", tag="eps"),
              Mistake("a row of zeros has r = √ε, not 0: keep ε inside the root (√(mean(x²) + ε)), and compute x̂ as "
                      "x / r, never 0 / 0", tag="zero")],
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


# --- RoPE's backward: the rotation by −θ --------------------------------------------------------------------
def rope_backward_cases():
    r = _rng(188)

    def tables(n, half):  # cos θ, sin θ of random angles, [n, d_h/2] each
        theta = r.uniform(0, 2 * math.pi, (n, half))
        return np.cos(theta), np.sin(theta)
    return [Case("dY (1, 2, 5, 8): b=1, h=2, n=5, d_h=8", (r.standard_normal((1, 2, 5, 8)), *tables(5, 4))),
            Case("dY (2, 3, 4, 6): b=2, h=3, n=4, d_h=6", (r.standard_normal((2, 3, 4, 6)), *tables(4, 3))),
            Case("float32 dY (1, 1, 3, 4)", tuple(a.astype(np.float32) for a in (r.standard_normal((1, 1, 3, 4)),
                                                                                  *tables(3, 2))),
                 tags=frozenset({"float32"}))]


def _rope_grads(first, second):
    """apply_rope_half_backward with a slip: first(d1, d2, cos, sin) and second(…) the two halves of dX."""
    def backward(dY, cos, sin):
        half = dY.shape[-1] // 2
        d1, d2 = dY[..., :half], dY[..., half:]
        return np.concatenate([first(d1, d2, cos, sin), second(d1, d2, cos, sin)], axis=-1).astype(dY.dtype)
    return backward


def _rope_backward_interleaved(dY, cos, sin):  # the rotation by −θ of the pairs (2i, 2i + 1)
    pairs = dY.reshape(*dY.shape[:-1], -1, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    return np.stack([re * cos + im * sin, -re * sin + im * cos], axis=-1).reshape(dY.shape).astype(dY.dtype)


_RIGHT_FIRST = lambda d1, d2, c, s: d1 * c + d2 * s  # noqa: E731
ROPE_BACKWARD = Spec(
    "apply_rope_half_backward", apply_rope_half_backward, rope_backward_cases, "transformer/core/positions.py",
    dims=("…", "n", "d_h"),
    mistakes=[Mistake("the backward of a rotation is its transpose, the rotation by −θ: dX₁ = dY₁·cos θ + dY₂·sin θ, "
                      "dX₂ = −dY₁·sin θ + dY₂·cos θ — rotating dY by +θ again is the forward",
                      variant=lambda dY, cos, sin: apply_rope_half(dY, cos, sin)),
              Mistake("dX₂ = −dY₁·sin θ + dY₂·cos θ: the sign of its sin term is flipped (dX₁ is right)",
                      variant=_rope_grads(_RIGHT_FIRST, lambda d1, d2, c, s: d1 * s + d2 * c)),
              Mistake("dX₁ = dY₁·cos θ + dY₂·sin θ: the sign of its sin term is flipped (dX₂ is right)",
                      variant=_rope_grads(lambda d1, d2, c, s: d1 * c - d2 * s, lambda d1, d2, c, s: -d1 * s + d2 * c)),
              Mistake("each half of dX mixes both halves of dY, as each half of the forward mixes both halves of x: "
                      "dX₁ = dY₁·cos θ + dY₂·sin θ, dX₂ = −dY₁·sin θ + dY₂·cos θ",
                      variant=_rope_grads(lambda d1, d2, c, s: d1 * c, lambda d1, d2, c, s: d2 * c)),
              Mistake("rotate-half pairs dimension i with i + d_h/2 (the first and the second half), not 2i with "
                      "2i + 1 (that is the interleaved layout)", variant=_rope_backward_interleaved)],
    torch=lambda case: _torch_rope_backward(case))


def _torch_rope_backward(case):
    """torch's autograd through the rotate-half forward written in torch, in float64, cast back to dY's dtype."""
    import torch

    (dY, cos, sin), _ = fresh(case)
    x = torch.zeros(dY.shape, dtype=torch.float64, requires_grad=True)
    c, s = (torch.from_numpy(np.asarray(a, np.float64)) for a in (cos, sin))
    x1, x2 = x.chunk(2, dim=-1)
    torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).backward(torch.from_numpy(np.asarray(dY, np.float64)))
    return x.grad.numpy().astype(dY.dtype)


# --- the embedding's backward: a scatter-add ------------------------------------------------------------------
def embed_backward_cases():
    r = _rng(189)
    return [Case("ids (2, 5) with repeated tokens, v=7, d=3", (r.standard_normal((2, 5, 3)),
                                                                np.array([[3, 1, 3, 0, 3], [1, 6, 2, 2, 5]]), 7),
                 tags=frozenset({"repeats"})),
            Case("ids (1, 4), every token once, v=6, d=4", (r.standard_normal((1, 4, 4)), np.array([[5, 0, 2, 4]]), 6)),
            Case("ids (6,): one sequence without a batch axis, v=4, d=2", (r.standard_normal((6, 2)),
                                                                           np.array([0, 3, 3, 1, 3, 0]), 4),
                 tags=frozenset({"repeats", "one-axis"})),
            Case("float32 dX (2, 3, 5), v=5", (r.standard_normal((2, 3, 5)).astype(np.float32),
                                               np.array([[4, 4, 1], [0, 4, 2]]), 5),
                 tags=frozenset({"repeats", "float32"}))]


def _embed_grads(rule):
    """embed_backward with a slip: rule(dW (v, d) zeros, the ids flat, the rows (b·n, d)) fills dW."""
    def backward(dX, ids, v):
        rows, t = dX.reshape(-1, dX.shape[-1]), np.asarray(ids).reshape(-1)
        dW = np.zeros((v, dX.shape[-1]), dtype=dX.dtype)
        return rule(dW, t, rows)
    return backward


def _fancy_add(dW, t, rows):  # dW[ids] += dX: buffered, so each repeated id keeps one row (the last)
    dW[t] += rows
    return dW


def _mean_rows(dW, t, rows):
    np.add.at(dW, t, rows)
    counts = np.bincount(t, minlength=dW.shape[0])[:, None]
    return (dW / np.maximum(counts, 1)).astype(dW.dtype)


EMBED_BACKWARD = Spec(
    "embed_backward", embed_backward, embed_backward_cases, "transformer/core/embedding.py", dims=("v", "d"),
    mistakes=[Mistake("a token that occurs several times gets the SUM of its rows' gradients: dW[ids] += dX adds to "
                      "each repeated id once (NumPy buffers the fancy index: the last row wins) — np.add.at(dW, ids, "
                      "dX) adds every row", variant=_embed_grads(_fancy_add)),
              Mistake("dW_E[t] is the sum of the rows whose id is t, not their mean: each use of the token adds its "
                      "own gradient", variant=_embed_grads(_mean_rows)),
              Mistake("a token that occurs several times gets the SUM of its rows' gradients: every row must add to "
                      "its token's row of dW (np.add.at(dW, ids, dX))", tag="repeats"),
              Mistake("the ids can have any shape, (b, n) or (n,): flatten them and dX's leading axes first "
                      "(ids.reshape(-1), dX.reshape(-1, d))", raises=r"values to unpack", tag="one-axis"),
              Mistake("the ids and the rows of dX go together, one id a row: flatten both the same way "
                      "(ids.reshape(-1) and dX.reshape(-1, d)), or neither", raises=r"broadcast|mismatch")],
    torch=lambda case: _torch_embed_backward(case))


def _torch_embed_backward(case):
    """torch's autograd through F.embedding, in float64, cast back to dX's dtype."""
    import torch
    import torch.nn.functional as F

    (dX, ids, v), _ = fresh(case)
    W = torch.zeros((v, dX.shape[-1]), dtype=torch.float64, requires_grad=True)
    F.embedding(torch.from_numpy(np.asarray(ids)).long(), W).backward(torch.from_numpy(np.asarray(dX, np.float64)))
    return W.grad.numpy().astype(dX.dtype)


# --- the tied LM head's backward ------------------------------------------------------------------------------
def lm_head_backward_cases():
    r = _rng(190)
    return [Case("x (2, 3, 4): b=2, n=3, d=4, v=7", (r.standard_normal((2, 3, 7)), r.standard_normal((2, 3, 4)),
                                                      r.standard_normal((7, 4))), tags=frozenset({"batch"})),
            Case("x (5, 3): n=5, d=3, v=6, no batch axis", (r.standard_normal((5, 6)), r.standard_normal((5, 3)),
                                                             r.standard_normal((6, 3)))),
            Case("float32 x (1, 4, 8), v=10", tuple(a.astype(np.float32) for a in (
                r.standard_normal((1, 4, 10)), r.standard_normal((1, 4, 8)), r.standard_normal((10, 8)))),
                 tags=frozenset({"float32", "batch"}))]


def _head_per_batch(d_logits, x, W_E):  # dW_E left with the batch axis: one (v, d) a sequence
    return d_logits @ W_E, d_logits.swapaxes(-1, -2) @ x


def _head_transposed(d_logits, x, W_E):  # dW_E as Xᵀ d_logits: (d, v)
    v, d = W_E.shape
    return d_logits @ W_E, x.reshape(-1, d).T @ d_logits.reshape(-1, v)


LM_HEAD_BACKWARD = Spec(
    "lm_head_backward", lm_head_backward, lm_head_backward_cases, "transformer/core/embedding.py",
    dims=(("…", "d"), ("v", "d")), names=("dx", "dW_E"),
    mistakes=[Mistake("logits = X W_Eᵀ, so dX = d_logits W_E: (…, v) @ (v, d), W_E as it is, untransposed",
                      raises=r"mismatch|broadcast|not aligned"),
              Mistake("dW_E has W_E's shape (v, d): d_logitsᵀ X, where Xᵀ d_logits is its transpose (d, v)",
                      variant=_head_transposed),
              Mistake("W_E is shared by every position of every sequence: its gradient sums over all of them — "
                      "flatten the leading axes first (d_logits.reshape(-1, v), x.reshape(-1, d))",
                      variant=_head_per_batch)],
    torch=lambda case: _torch_head_backward(case))


def _torch_head_backward(case):
    """torch's autograd through X W_Eᵀ in float64, cast back to the inputs' dtype."""
    import torch

    (d_logits, x, W_E), _ = fresh(case)
    xt, Wt = (torch.from_numpy(np.asarray(a, np.float64)).requires_grad_(True) for a in (x, W_E))
    (xt @ Wt.T).backward(torch.from_numpy(np.asarray(d_logits, np.float64)))
    return xt.grad.numpy().astype(x.dtype), Wt.grad.numpy().astype(W_E.dtype)
