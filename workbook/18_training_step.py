"""Workbook, lesson 18 · One training step, by hand (`lessons/18_training_step.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 18

Shapes use the course's dimension names: b batch, h query heads, h_kv key/value heads, n_q
queries, n_k keys, d_h head size; `...` stands for any leading axes. A gradient has the shape of
what it is the gradient of, and dX names the gradient of the loss with respect to X.
"""
from __future__ import annotations

import math

import numpy as np

from transformer import AdamWState  # the optimiser's memory: m, v (dicts of arrays) and the step t
from transformer import decays_by_default  # decays_by_default(name, p): True for matrices (p.ndim >= 2)
from transformer import repeat_kv  # or your own from 07


def softmax_backward(dP, P):  # [..., n], [..., n] -> [..., n]
    """Gradient of P = softmax(S) along the last axis. Saved from the forward: P itself (not S).

        ∂P_j/∂S_k = P_j (δ_jk − P_k),   so   dS = P ∘ (dP − rowsum(dP ∘ P))

    dP, P (..., n)  ->  dS (..., n). ∘ is the elementwise product, rowsum keeps its axis (..., 1).
    A masked entry has P = 0 and gets dS = 0; a fully masked row (all P = 0) gets 0 throughout.
    Example: dP = [1, 0, 5], P = [0.5, 0.5, 0] give dS = [0.25, −0.25, 0].

    After trying: the package's version is `transformer/core/attention.py`, `softmax_backward`.
    """
    raise NotImplementedError(
        "softmax_backward: start with the rowsum of dP ∘ P over the last axis with keepdims=True, (..., 1); "
        "check it on the example: 1·0.5 + 0·0.5 + 5·0 = 0.5.")


def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale=None):
    # [b, h, n_q, d_h], q, k/v [b, h_kv, n_k, d_h], P [b, h, n_q, n_k] -> dq, dk, dv
    """Gradients of O = P V, P = softmax(S), S = Q Kᵀ · scale (+ mask), scale = 1/√d_h unless given.
    Saved from the forward: q, k, v and the weights P (whose zeros already hold the mask).

        dV = Pᵀ dO                      (n_k, n_q) @ (n_q, d_h)  per head
        dP = dO Vᵀ                      (n_q, d_h) @ (d_h, n_k)
        dS = P ∘ (dP − rowsum(dP ∘ P))  softmax_backward
        dQ = dS K · scale,   dK = dSᵀ Q · scale

    dO (b, h, n_q, d_h); q (b, h, n_q, d_h); k, v (b, h_kv, n_k, d_h); P (b, h, n_q, n_k)
    ->  dq (b, h, n_q, d_h), dk and dv (b, h_kv, n_k, d_h).
    GQA (h_kv < h): the forward repeated each key/value head for its h / h_kv query heads, so
    dk and dv sum the gradients of those copies back into one head each.

    After trying: the package's version is `transformer/core/attention.py`, `scaled_dot_product_attention_backward`.
    """
    raise NotImplementedError(
        "scaled_dot_product_attention_backward: start with h_kv = h and write dV = Pᵀ dO with .swapaxes(-1, -2); "
        "check each gradient's shape against the docstring as you go. Leave GQA for last: then recall which "
        "query heads shared each key/value head (lesson 07).")


def adamw_step(params: dict, grads: dict, state: AdamWState, lr: float, *, betas=(0.9, 0.95), eps: float = 1e-8,
               weight_decay: float = 0.1, decay=None) -> None:
    """One AdamW update of every parameter, in place (decoupled weight decay, Loshchilov & Hutter).

    With g the gradient, t the step count after this step, η = lr, λ = weight_decay:

        θ ← θ − η·λ·θ                   only where decay(name) is True; never through m or v
        m ← β₁·m + (1 − β₁)·g
        v ← β₂·v + (1 − β₂)·g²
        m̂ = m / (1 − β₁ᵗ),   v̂ = v / (1 − β₂ᵗ)
        θ ← θ − η·m̂ / (√v̂ + ε)

    params, grads: name -> array, each gradient the shape of its parameter (a matrix (d, d),
    a vector (d,), …). state: `T.adamw_state(params)` (m and v zero, t = 0); this step adds 1
    to state.t and updates state.m, state.v and every params[name] in place. Returns None.
    decay(name) -> bool picks the decayed parameters; None means decays_by_default(name, p).
    Example: θ = [1, −2] (a vector: not decayed by default), g = [0.5, 0.5], lr = 0.1: at the first
    step m̂ = g and v̂ = g², so θ moves by η against the sign of g, to ≈ [0.9, −2.1], and state.t = 1.

    After trying: the package's version is `transformer/train/optim.py`, `adamw_step`.
    """
    raise NotImplementedError(
        "adamw_step: start by counting the step (state.t) and the two bias corrections 1 − β₁ᵗ and 1 − β₂ᵗ; "
        "then loop over params.items(). Write into the arrays (p -= …, m *= …), never rebind them: the "
        "caller must see the new values.")
