"""Workbook, lesson 10 · The Transformer block (`lessons/10_block.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 10

Shapes use the course's dimension names: d model width; `...` stands for any leading axes
such as (b, n); d_ff is the feed-forward network's hidden width.
"""
from __future__ import annotations

import numpy as np


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
