"""Norms, activations, feed-forward networks and the residual block (notes 000 §2.1–2.3, 002, 003).

Original Transformer (post-norm):  x = LayerNorm(x + Sublayer(x))
Llama / GPT-2 style (pre-norm):    x = x + Sublayer(Norm(x))

Each public function that can refuse its input checks it at the door (`layers_checks.py`, same name);
`f.unchecked` is the bare formula. The elementwise activations take any array and refuse nothing.
"""
from __future__ import annotations

import math

from . import layers_checks as checks
from ..backend import compute_dtype, get_xp
from ..require import checked_by

__all__ = [
    "linear", "layer_norm", "rms_norm", "relu", "gelu", "erf", "silu", "sigmoid",
    "ffn", "glu_ffn", "swiglu_ffn", "residual",
    # training: each backward beside its forward (notation: dY = ∂loss/∂Y, same shape as Y)
    "linear_backward", "layer_norm_backward", "rms_norm_backward", "relu_backward", "gelu_backward",
    "silu_backward", "sigmoid_backward", "ffn_backward", "swiglu_ffn_backward",
]


@checked_by(checks.linear)
def linear(x, W, b=None):  # [..., d_in], [d_in, d_out] -> [..., d_out]
    """Y = X W + b: every projection of the model (W_q, W_o, W_up, …) in the notes' orientation."""
    y = x @ W  # [..., d_out]
    return y if b is None else y + b


@checked_by(checks.linear_backward)
def linear_backward(dY, x, W, has_bias: bool = False):  # [..., d_out], [..., d_in], [d_in, d_out] -> dx, dW, db
    """Gradients of Y = X W + b. Saved: the input X.

        dX = dY Wᵀ                     [..., d_out] @ [d_out, d_in]
        dW = Σ_rows Xᵀ dY              every leading position (batch, sequence) adds its outer product
        db = Σ_rows dY                 (None when the layer has no bias)

    >>> import numpy as np
    >>> dx, dW, db = linear_backward(np.ones((2, 1)), np.array([[1.0], [2.0]]), np.array([[3.0]]), True)
    >>> dx.ravel().tolist(), dW.tolist(), db.tolist()
    ([3.0, 3.0], [[3.0]], [2.0])
    """
    xp = get_xp(dY, x, W)
    d_in, d_out = W.shape
    X = xp.reshape(x, (-1, d_in))  # [rows, d_in], rows = all leading positions
    G = xp.reshape(dY, (-1, d_out))  # [rows, d_out]
    dx = xp.reshape(G @ W.mT, (*dY.shape[:-1], d_in))  # [..., d_in]: one product over all rows (NumPy
    # runs a stacked [..., d_out] @ Wᵀ 1.7× slower than the same rows as one matrix)
    dW = X.mT @ G  # [d_in, d_out]
    db = xp.sum(G, axis=0) if has_bias else None  # [d_out]
    return dx, dW, db


@checked_by(checks.layer_norm)
def layer_norm(x, gamma, beta=None, eps: float = 1e-5):  # [..., d], [d], [d] -> [..., d]
    """LayerNorm(x) = (x - mean) / √(var + eps) · γ + β, over the last axis (biased variance)."""
    xp = get_xp(x)
    ct = compute_dtype(xp, x.dtype)
    xc = xp.astype(x, ct, copy=False)  # float16/bfloat16: the mean and variance in float32
    mu = xp.mean(xc, axis=-1, keepdims=True)  # [..., 1]
    var = xp.mean((xc - mu) ** 2, axis=-1, keepdims=True)  # [..., 1]
    y = (xc - mu) / xp.sqrt(var + eps) * gamma  # [..., d]
    if beta is not None:
        y = y + beta
    return xp.astype(y, x.dtype, copy=False)


@checked_by(checks.rms_norm)
def rms_norm(x, gamma, eps: float = 1e-6):  # [..., d], [d] -> [..., d]
    """RMSNorm(x) = x / √(mean(x²) + eps) · γ: LayerNorm without centring or bias (Llama)."""
    xp = get_xp(x)
    ct = compute_dtype(xp, x.dtype)
    xc = xp.astype(x, ct, copy=False)  # float16/bfloat16: the mean square in float32
    ms = xp.mean(xc * xc, axis=-1, keepdims=True)  # [..., 1]
    return xp.astype(xc / xp.sqrt(ms + eps) * gamma, x.dtype, copy=False)  # [..., d]


def _sum_rows(t):  # [..., d] -> [d]: a gain's gradient sums over every position that used it
    xp = get_xp(t)
    return xp.sum(xp.reshape(t, (-1, t.shape[-1])), axis=0)


@checked_by(checks.layer_norm_backward)
def layer_norm_backward(dY, x, gamma, eps: float = 1e-5, has_beta: bool = True):  # [..., d] ×2, [d] -> dx, dγ, dβ
    """Gradients of Y = γ ∘ x̂ + β, x̂ = (x − μ)/σ, σ = √(var + eps), over the last axis. Saved: x
    (μ and σ are recomputed from it, one pass over d).

        g   = dY ∘ γ                                    the gradient reaching x̂
        dX  = (g − mean(g) − x̂ ∘ mean(g ∘ x̂)) / σ      x̂ depends on x through μ and σ as well
        dγ  = Σ_rows dY ∘ x̂,   dβ = Σ_rows dY           (dβ None when has_beta is False)

    The two means remove the parts of g that the normalisation cancels: a shift of x (all of μ)
    and a scaling of x (along x̂), so dX is orthogonal to 1 and to x̂ in each row.

    >>> import numpy as np
    >>> dx, dg, db = layer_norm_backward(np.array([[1.0, 1.0]]), np.array([[0.0, 2.0]]), np.ones(2), eps=0.0)
    >>> dx.tolist(), dg.tolist(), db.tolist()
    ([[0.0, 0.0]], [-1.0, 1.0], [1.0, 1.0])
    """
    xp = get_xp(dY, x, gamma)
    ct = compute_dtype(xp, x.dtype)
    xc, g = xp.astype(x, ct, copy=False), xp.astype(dY * gamma, ct, copy=False)  # [..., d] each
    mu = xp.mean(xc, axis=-1, keepdims=True)  # [..., 1]
    inv_sigma = 1.0 / xp.sqrt(xp.mean((xc - mu) ** 2, axis=-1, keepdims=True) + eps)  # [..., 1]
    x_hat = (xc - mu) * inv_sigma  # [..., d]
    dx = (g - xp.mean(g, axis=-1, keepdims=True) - x_hat * xp.mean(g * x_hat, axis=-1, keepdims=True)) * inv_sigma
    dgamma = _sum_rows(dY * xp.astype(x_hat, dY.dtype, copy=False))  # [d]
    dbeta = _sum_rows(dY) if has_beta else None  # [d]
    return xp.astype(dx, x.dtype, copy=False), dgamma, dbeta


@checked_by(checks.rms_norm_backward)
def rms_norm_backward(dY, x, gamma, eps: float = 1e-6):  # [..., d] ×2, [d] -> dx [..., d], dγ [d]
    """Gradients of Y = γ ∘ x̂, x̂ = x / r, r = √(mean(x²) + eps). Saved: x (r is recomputed).

        g   = dY ∘ γ
        dX  = (g − x̂ ∘ mean(g ∘ x̂)) / r               LayerNorm's without the mean of g: no centring
        dγ  = Σ_rows dY ∘ x̂

    >>> import numpy as np
    >>> dx, dg = rms_norm_backward(np.array([[1.0, 0.0]]), np.array([[3.0, 4.0]]), np.ones(2), eps=0.0)
    >>> np.round(dx, 4).tolist(), np.round(dg, 4).tolist()
    ([[0.181, -0.1358]], [0.8485, 0.0])
    """
    xp = get_xp(dY, x, gamma)
    ct = compute_dtype(xp, x.dtype)
    xc, g = xp.astype(x, ct, copy=False), xp.astype(dY * gamma, ct, copy=False)  # [..., d] each
    inv_r = 1.0 / xp.sqrt(xp.mean(xc * xc, axis=-1, keepdims=True) + eps)  # [..., 1]
    x_hat = xc * inv_r  # [..., d]
    dx = (g - x_hat * xp.mean(g * x_hat, axis=-1, keepdims=True)) * inv_r  # [..., d]
    dgamma = _sum_rows(dY * xp.astype(x_hat, dY.dtype, copy=False))  # [d]
    return xp.astype(dx, x.dtype, copy=False), dgamma


@checked_by(checks.relu)
def relu(x):
    xp = get_xp(x)
    return xp.maximum(x, 0.0)


@checked_by(checks.relu_backward)
def relu_backward(dY, x):  # [...], [...] -> [...]
    """dX = dY ∘ 1[x > 0]. Saved: x. At x = 0 the gradient is taken as 0, as torch does."""
    xp = get_xp(dY, x)
    return xp.where(x > 0, dY, 0.0)


@checked_by(checks.sigmoid)
def sigmoid(x):
    xp = get_xp(x)
    return 1.0 / (1.0 + xp.exp(-x))


@checked_by(checks.sigmoid_backward)
def sigmoid_backward(dY, x):  # [...], [...] -> [...]
    """dX = dY ∘ σ(x)(1 − σ(x)). Saved: x."""
    s = sigmoid(x)
    return dY * s * (1.0 - s)


@checked_by(checks.silu)
def silu(x):
    """SiLU / Swish: x · σ(x)."""
    return x * sigmoid(x)


@checked_by(checks.silu_backward)
def silu_backward(dY, x):  # [...], [...] -> [...]
    """d/dx [x σ(x)] = σ(x) + x σ(x)(1 − σ(x)) = σ(x)(1 + x(1 − σ(x))), so
    dX = dY ∘ σ(x)(1 + x(1 − σ(x))). Saved: x."""
    s = sigmoid(x)
    return dY * s * (1.0 + x * (1.0 - s))


# Abramowitz & Stegun 7.1.26: |error| ≤ 1.5e-7 for all x, below float32's resolution.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


@checked_by(checks.erf)
def erf(x):
    """erf(x) = 1 - (a₁t + a₂t² + … + a₅t⁵)·e^(-x²), t = 1/(1 + p|x|), odd in x.

    The Array API has no erf, so it is written out (max abs error 1.5e-7).
    """
    xp = get_xp(x)
    ax = xp.abs(x)
    t = 1.0 / (1.0 + _ERF_P * ax)
    poly = 0.0
    for a in reversed(_ERF_A):  # Horner: t·(a₁ + t·(a₂ + … ))
        poly = (poly + a) * t
    y = 1.0 - poly * xp.exp(-ax * ax)
    return xp.where(x < 0, -y, y)


@checked_by(checks.gelu)
def gelu(x, approximate: str = "none"):
    """GELU(x) = x·Φ(x) = ½x(1 + erf(x/√2)) (BERT, GPT).

    approximate="tanh": ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (GPT-2's fast form).
    """
    xp = get_xp(x)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


@checked_by(checks.gelu_backward)
def gelu_backward(dY, x, approximate: str = "none"):  # [...], [...] -> [...]
    """Gradient of GELU. Saved: x.

    Exact form, GELU = x Φ(x):   dX = dY ∘ (Φ(x) + x φ(x)),  φ(x) = e^(−x²/2) / √(2π)
        (Φ through the written-out erf, so within ~1.5e-7 of the true derivative).
    tanh form, ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³):
        dX = dY ∘ (½(1 + tanh u) + ½x (1 − tanh² u) √(2/π)(1 + 3·0.044715x²))
    """
    xp = get_xp(dY, x)
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        # float16 in float32: 3·0.044715x² overflows past |x| ≈ 700, where 1 − tanh² u is 0 already: 0·inf = NaN
        xc = xp.astype(x, compute_dtype(xp, x.dtype), copy=False)
        t = xp.tanh(c * (xc + 0.044715 * xc ** 3))
        dgelu = 0.5 * (1.0 + t) + 0.5 * xc * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * xc * xc)
        return dY * xp.astype(dgelu, x.dtype, copy=False)
    cdf = 0.5 * (1.0 + erf(x / math.sqrt(2.0)))  # Φ(x)
    pdf = xp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)  # φ(x)
    return dY * (cdf + x * pdf)


@checked_by(checks.ffn)
def ffn(x, W1, W2, b1=None, b2=None, activation=relu):  # [..., d], [d, d_ff], [d_ff, d] -> [..., d]
    """Position-wise feed-forward: g(x W₁ + b₁) W₂ + b₂ (note 000: channel mixing).

    activation: the function g, or its name as ffn_backward takes it ("relu", "gelu", "gelu_tanh", "silu").
    """
    g = _ACTIVATIONS[activation][0] if isinstance(activation, str) else activation
    hdn = x @ W1  # [..., d_ff]
    if b1 is not None:
        hdn = hdn + b1
    out = g(hdn) @ W2  # [..., d]
    return out if b2 is None else out + b2


_ACTIVATIONS = {  # name -> (g, g's backward), for the backward passes that take the activation by name
    "relu": (relu, relu_backward),
    "gelu": (gelu, gelu_backward),
    "gelu_tanh": (lambda z: gelu(z, "tanh"), lambda dA, z: gelu_backward(dA, z, "tanh")),
    "silu": (silu, silu_backward),
}


@checked_by(checks.ffn_backward)
def ffn_backward(dY, x, W1, W2, b1=None, b2=None, activation: str = "relu"):
    # [..., d], [..., d], [d, d_ff], [d_ff, d] -> dx [..., d], dW1, dW2, db1 | None, db2 | None
    """Gradients of Y = g(Z) W₂ + b₂, Z = X W₁ + b₁. Saved: X (Z is recomputed, one matmul, rather
    than kept: [..., d_ff] is the largest activation of the block). activation names g:
    "relu", "gelu", "gelu_tanh" or "silu".

        dA = dY W₂ᵀ,   dW₂ = Σ_rows Aᵀ dY,   db₂ = Σ_rows dY        A = g(Z)
        dZ = g'(Z) ∘ dA
        dX = dZ W₁ᵀ,   dW₁ = Σ_rows Xᵀ dZ,   db₁ = Σ_rows dZ
    Returns (dx, dW1, dW2, db1, db2), a bias gradient None where the bias is None.
    """
    g, g_backward = _ACTIVATIONS[activation]
    z = linear(x, W1, b1)  # [..., d_ff] recomputed
    dA, dW2, db2 = linear_backward(dY, g(z), W2, b2 is not None)  # dA [..., d_ff]
    dZ = g_backward(dA, z)  # [..., d_ff]
    dx, dW1, db1 = linear_backward(dZ, x, W1, b1 is not None)  # dx [..., d]
    return dx, dW1, dW2, db1, db2


@checked_by(checks.glu_ffn)
def glu_ffn(x, W_gate, W_up, W_down, activation=sigmoid):  # [..., d] -> [..., d]
    """Gated linear unit FFN: (g(x W_gate) ∘ x W_up) W_down. With g = σ this is GLU."""
    return (activation(x @ W_gate) * (x @ W_up)) @ W_down  # [..., d_ff] ∘ [..., d_ff] @ [d_ff, d] -> [..., d]


@checked_by(checks.swiglu_ffn)
def swiglu_ffn(x, W_gate, W_up, W_down):  # [..., d] -> [..., d]
    """SwiGLU (Llama): (SiLU(x W_gate) ∘ x W_up) W_down."""
    return glu_ffn(x, W_gate, W_up, W_down, activation=silu)  # [..., d], checked at this door


@checked_by(checks.swiglu_ffn_backward)
def swiglu_ffn_backward(dY, x, W_gate, W_up, W_down):
    # [..., d], [..., d], [d, d_ff] ×2, [d_ff, d] -> dx [..., d], dW_gate, dW_up, dW_down
    """Gradients of Y = (SiLU(A) ∘ U) W_down, A = X W_gate, U = X W_up. Saved: X (A and U are
    recomputed, two matmuls, rather than kept as two [..., d_ff] arrays).

        H = SiLU(A) ∘ U
        dH = dY W_downᵀ,   dW_down = Σ_rows Hᵀ dY
        dA = SiLU'(A) ∘ U ∘ dH,   dU = SiLU(A) ∘ dH                 the product rule on the gate
        dX = dA W_gateᵀ + dU W_upᵀ                                   X feeds both branches: they add
        dW_gate = Σ_rows Xᵀ dA,   dW_up = Σ_rows Xᵀ dU
    """
    A, U = x @ W_gate, x @ W_up  # [..., d_ff] each, recomputed
    s = sigmoid(A)  # [..., d_ff]: σ(A) once, for SiLU and for its derivative
    S = A * s  # SiLU(A) = A σ(A)
    dH, dW_down, _ = linear_backward(dY, S * U, W_down)  # dH [..., d_ff]
    dA = dH * U * s * (1.0 + A * (1.0 - s))  # SiLU'(A) = σ(A)(1 + A(1 − σ(A))), as silu_backward
    dx_gate, dW_gate, _ = linear_backward(dA, x, W_gate)  # [..., d]
    dx_up, dW_up, _ = linear_backward(dH * S, x, W_up)  # [..., d]
    return dx_gate + dx_up, dW_gate, dW_up, dW_down


def residual(x, sublayer, norm, *, pre_norm: bool = True):  # [..., d] -> [..., d]
    """One residual sub-block.

    pre_norm=True:  x + sublayer(norm(x))   (GPT-2, Llama: the residual stream is never normalised)
    pre_norm=False: norm(x + sublayer(x))   (the original Transformer and BERT)

    Backward: the gradient of Y = X + f(X) is dX = dY + (∂f/∂X)ᵀ dY: the identity path hands dY
    down unchanged and the sublayer's backward adds its own part. No function is needed for it;
    a pre-norm model writes `dx = dY + norm_backward(sublayer_backward(dY))`, and through L blocks
    dY reaches the embedding undiminished, which is why deep pre-norm stacks train.
    """
    if pre_norm:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))
