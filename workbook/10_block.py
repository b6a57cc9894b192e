"""Workbook, lesson 10 · The Transformer block (`lessons/10_block.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 10

Shapes use the course's dimension names: d model width; `...` stands for any leading axes
such as (b, n); d_ff is the feed-forward network's hidden width.
"""
from __future__ import annotations

import math

import numpy as np

from transformer import erf  # erf(x) of an array (NumPy has none; math.erf takes one number)
from transformer import relu  # ReLU(x) = max(x, 0): ffn's default activation


def layer_norm(x, gamma, beta=None, eps: float = 1e-5):  # [..., d], [d], [d] -> [..., d]
    """LayerNorm over the last axis: centre, scale to unit variance, then the learned γ and β.

        μ = mean(x),   σ² = mean((x − μ)²)          over the d features (biased variance: ÷ d)
        LayerNorm(x) = (x − μ) / √(σ² + eps) · γ + β

    x (..., d); gamma (d,); beta (d,) or None (no shift)  ->  (..., d), in x's dtype.
    Example: x = [1, 2, 3], γ = 1, no β: ≈ [−1.2247, 0, 1.2247].

    After trying: the package's version is `transformer/core/layers.py`, `layer_norm`.
    """
    raise NotImplementedError(
        "layer_norm: start with the mean over the last axis, with keepdims=True so it stays (..., 1) and "
        "broadcasts against x; the variance is a mean too. Compare with the example before adding γ and β.")


def rms_norm(x, gamma, eps: float = 1e-6):  # [..., d], [d] -> [..., d]
    """RMSNorm (Llama): LayerNorm without the centring and without β.

        RMSNorm(x) = x / √(mean(x²) + eps) · γ          mean over the d features

    x (..., d); gamma (d,)  ->  (..., d), in x's dtype.
    Example: x = [3, 4], γ = 1: mean(x²) = 12.5, so ≈ [0.8485, 1.1314].

    After trying: the package's version is `transformer/core/layers.py`, `rms_norm`.
    """
    raise NotImplementedError(
        "rms_norm: start with mean(x²) over the last axis, kept as (..., 1) with keepdims=True; "
        "it is one line away from your layer_norm.")


def gelu(x, approximate: str = "none"):  # [...] -> [...]
    """GELU (BERT, GPT-2): x weighted by the probability that a standard normal variable is below it.

        GELU(x) = x · Φ(x) = ½ x (1 + erf(x / √2))                              approximate="none"
        GELU(x) ≈ ½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))                     approximate="tanh"

    Φ is the normal distribution's CDF. x of any shape, such as an FFN's hidden layer
    (b, n, d_ff)  ->  the same shape, elementwise. Example: GELU(1) = Φ(1) = 0.8413,
    GELU(−1) = −0.1587, and the tanh form gives 0.8412 and −0.1588.

    After trying: the package's version is `transformer/core/layers.py`, `gelu`.
    """
    raise NotImplementedError(
        "gelu: start with the exact form, Φ(x) = ½(1 + erf(x / √2)) with the erf imported above, and check "
        "GELU(1) = 0.8413; then the tanh form, when approximate == 'tanh'.")


def ffn(x, W1, W2, b1=None, b2=None, activation=relu):  # [..., d], [d, d_ff], [d_ff, d] -> [..., d]
    """The position-wise feed-forward network of the original Transformer and BERT: widen each
    position to d_ff, apply g, and bring it back to d (the same weights at every position).

        FFN(x) = g(x W₁ + b₁) W₂ + b₂

    x (..., d); W1 (d, d_ff); W2 (d_ff, d); b1 (d_ff,) and b2 (d,) the biases, each None where the
    layer has none; activation the function g (ReLU by default; GELU for BERT and GPT-2)  ->  (..., d).
    Example, d = d_ff = 1: x = [[−1], [2]], W1 = [[1]], W2 = [[3]], b1 = [0.5], b2 = [1], ReLU:
    g(x W₁ + b₁) = [[0], [2.5]], so FFN(x) = [[1], [8.5]]. (The package also takes the activation
    by its name, "gelu"; here it is always a function.)

    After trying: the package's version is `transformer/core/layers.py`, `ffn`.
    """
    raise NotImplementedError(
        "ffn: start with h = x @ W1 and check its shape (..., d_ff); then add b1 if there is one, apply the "
        "activation, and go back to d with W2.")


def swiglu_ffn(x, W_gate, W_up, W_down):  # [..., d] -> [..., d]
    """SwiGLU feed-forward network (Llama): a gated SiLU between two projections.

        FFN(x) = (SiLU(x W_gate) ∘ (x W_up)) W_down,      SiLU(z) = z · σ(z) = z / (1 + e^(−z))

    ∘ is the elementwise product. x (..., d); W_gate and W_up (d, d_ff); W_down (d_ff, d)
    ->  (..., d). The gate x W_gate and the "up" x W_up are both (..., d_ff).

    After trying: the package's version is `transformer/core/layers.py`, `swiglu_ffn`.
    """
    raise NotImplementedError(
        "swiglu_ffn: start with the two (..., d_ff) projections x @ W_gate and x @ W_up and print their "
        "shapes; SiLU goes on one of them only, the gate.")


def residual(x, sublayer, norm, *, pre_norm: bool = True):  # [..., d] -> [..., d]
    """One residual sub-block: a sublayer (attention or the FFN) with a norm and the skip path.

        pre_norm=True:   x + sublayer(norm(x))    GPT-2, Llama: the residual stream is never normalised
        pre_norm=False:  norm(x + sublayer(x))    the original Transformer, BERT: the sum is normalised

    x (..., d); sublayer and norm are functions (..., d) -> (..., d) that hold their own weights
    (norm = lambda t: layer_norm(t, gamma, beta))  ->  (..., d).
    Example, with norm(t) = t / 2 and sublayer(t) = 3t: x = [[2]] gives [[2 + 3·1]] = [[5]] with
    pre_norm=True, and [[(2 + 6) / 2]] = [[4]] with pre_norm=False.

    After trying: the package's version is `transformer/core/layers.py`, `residual`.
    """
    raise NotImplementedError(
        "residual: write the two formulas of the docstring as two lines, one for each value of pre_norm, and "
        "check both on the example.")
