"""Norms, activations, feed-forward networks and the residual block (notes 000 §2.1–2.3, 002, 003).

Original Transformer (post-norm):  x = LayerNorm(x + Sublayer(x))
Llama / GPT-2 style (pre-norm):    x = x + Sublayer(Norm(x))

Each public function that can refuse its input checks it at the door (`checks.py`, same name);
`f.unchecked` is the bare formula. The elementwise activations take any array and refuse nothing.
"""
from __future__ import annotations

import math

from . import checks
from ..backend import compute_dtype, get_xp
from ..require import checked_by

__all__ = [
    "layer_norm", "rms_norm", "relu", "gelu", "erf", "silu", "sigmoid",
    "ffn", "glu_ffn", "swiglu_ffn", "residual",
]


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


def relu(x):
    xp = get_xp(x)
    return xp.maximum(x, 0.0)


def sigmoid(x):
    xp = get_xp(x)
    return 1.0 / (1.0 + xp.exp(-x))


def silu(x):
    """SiLU / Swish: x · σ(x)."""
    return x * sigmoid(x)


# Abramowitz & Stegun 7.1.26: |error| ≤ 1.5e-7 for all x, below float32's resolution.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


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


@checked_by(checks.ffn)
def ffn(x, W1, W2, b1=None, b2=None, activation=relu):  # [..., d], [d, d_ff], [d_ff, d] -> [..., d]
    """Position-wise feed-forward: g(x W₁ + b₁) W₂ + b₂ (note 000: channel mixing)."""
    hdn = x @ W1  # [..., d_ff]
    if b1 is not None:
        hdn = hdn + b1
    out = activation(hdn) @ W2  # [..., d]
    return out if b2 is None else out + b2


@checked_by(checks.glu_ffn)
def glu_ffn(x, W_gate, W_up, W_down, activation=sigmoid):  # [..., d] -> [..., d]
    """Gated linear unit FFN: (g(x W_gate) ∘ x W_up) W_down. With g = σ this is GLU."""
    return (activation(x @ W_gate) * (x @ W_up)) @ W_down  # [..., d_ff] ∘ [..., d_ff] @ [d_ff, d] -> [..., d]


@checked_by(checks.swiglu_ffn)
def swiglu_ffn(x, W_gate, W_up, W_down):  # [..., d] -> [..., d]
    """SwiGLU (Llama): (SiLU(x W_gate) ∘ x W_up) W_down."""
    return glu_ffn.unchecked(x, W_gate, W_up, W_down, activation=silu)  # [..., d], checked at this door


def residual(x, sublayer, norm, *, pre_norm: bool = True):  # [..., d] -> [..., d]
    """One residual sub-block.

    pre_norm=True:  x + sublayer(norm(x))   (GPT-2, Llama: the residual stream is never normalised)
    pre_norm=False: norm(x + sublayer(x))   (the original Transformer and BERT)
    """
    if pre_norm:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))
