"""FlashAttention's backward pass by recomputation, beside the naive one (notes 001, 002).

The forward pass (`tiled.py`) keeps only the output O and the row log-sum-exp L = m + log l.
The backward pass rebuilds each tile of P = e^(S - L) from Q, K and L when it needs it, so
it never stores an n_q × n_k matrix either: `flash_attention_backward`. For comparison,
`attention_backward_naive` forms P whole, as the textbook derivation does.

Shapes as in `tiled.py`: q, dout, out (b, h, n_q, d_h), k, v (b, h_kv, n_k, d_h), lse
(b, h, n_q); inside, q is viewed as (b, h_kv, g, n_q, d_h) and `...` in shape comments
stands for the leading (b, h_kv, g) axes.
Each public function checks its input at the door (`backward_checks.py`, same name).
"""
from __future__ import annotations

import math

from . import backward_checks as checks
from ..backend import compute_dtype, get_xp
from ..core.attention import softmax
from ..require import checked_by
from .io_count import IOCounter
from .tiled import block_sizes, grouped, packed_docs, tile_mask, tile_plan

__all__ = ["attention_backward_naive", "flash_attention_backward"]


@checked_by(checks.attention_backward_naive)
def attention_backward_naive(dout, q, k, v, *, causal=False, scale=None):
    """Gradients of O = softmax(Q Kᵀ·scale) V through the whole n_q × n_k matrix P.

    dout, q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) -> dq, dk, dv of the shapes of q, k, v.
        dV = Pᵀ dO,   dP = dO Vᵀ,   dS = P ∘ (dP - rowsum(P ∘ dP)),   dQ = dS K·scale,   dK = dSᵀ Q·scale
    (the softmax Jacobian applied to dP). Key/value heads shared by g query heads sum their g gradients.
    """
    xp = get_xp(dout, q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    Q, K, V = (xp.astype(t, ct, copy=False) for t in grouped(q, k, v))
    dO = xp.astype(xp.reshape(dout, Q.shape), ct, copy=False)  # [..., n_q, d_h]
    S = (Q @ K.mT) * scale  # [..., n_q, n_k]
    mask = tile_mask(xp, 0, n_q, 0, n_k, n_k - n_q) if causal else None
    P = softmax(S, axis=-1, mask=mask)  # [..., n_q, n_k] the full P; S is made here from checked inputs
    dV = xp.sum(P.mT @ dO, axis=2, keepdims=True)  # [b, h_kv, 1, n_k, d_h]
    dP = dO @ V.mT  # [..., n_q, n_k]
    dS = P * (dP - xp.sum(P * dP, axis=-1, keepdims=True))  # [..., n_q, n_k]
    dQ = (dS @ K) * scale  # [..., n_q, d_h]
    dK = xp.sum(dS.mT @ Q, axis=2, keepdims=True) * scale  # [b, h_kv, 1, n_k, d_h]
    return (xp.astype(xp.reshape(dQ, (b, h, n_q, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dK, (b, h_kv, n_k, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dV, (b, h_kv, n_k, d_h)), in_dtype, copy=False))


@checked_by(checks.flash_attention_backward)
def flash_attention_backward(dout, q, k, v, out, lse, *, causal=False, block_q=None, block_k=None,
                             scale=None, io=None, doc=None):
    """Gradients by recomputation: P is rebuilt one tile at a time from Q, K and the saved lse.

    dout, q, out (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h), lse (b, h, n_q) from
    `flash_attention(..., return_lse=True)` -> dq (b, h, n_q, d_h), dk, dv (b, h_kv, n_k, d_h).
        D    = rowsum(dO ∘ O)                  (= rowsum(P ∘ dP), so P is never needed whole)
        P_ij = e^(S_ij - L_i)                  exact probabilities, no second softmax pass
        dV_j += P_ijᵀ dO_i,  dP_ij = dO_i V_jᵀ,  dS_ij = P_ij ∘ (dP_ij - D_i)
        dQ_i += dS_ij K_j·scale,  dK_j += dS_ijᵀ Q_i·scale
    Memory beyond the inputs and gradients is O(Br·Bc) per head, never O(n_q·n_k).
    doc: the packed rows' document indices given to the forward pass (see `flash_attention`).
    """
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    Br, Bc = block_sizes(block_q, block_k, n_q, n_k)
    docs = packed_docs(doc)
    xp = get_xp(dout, q, k, v, out, lse)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    io = IOCounter() if io is None else io
    Q, K, V = grouped(q, k, v)
    *lead, _, _ = Q.shape
    heads = b * h
    dO = xp.reshape(dout, Q.shape)  # [..., n_q, d_h]
    L = xp.reshape(xp.astype(lse, ct), (*lead, n_q, 1))  # [..., n_q, 1]
    L = xp.where(L == -math.inf, math.inf, L)  # a row that saw nothing: e^(s - inf) = 0 (NaN stays)
    D = xp.sum(xp.astype(dO, ct) * xp.astype(xp.reshape(out, Q.shape), ct), axis=-1, keepdims=True)  # [..., n_q, 1]
    io.load("dO", heads * n_q * d_h), io.load("O", heads * n_q * d_h), io.store("D", heads * n_q)
    dQ = xp.zeros((*lead, n_q, d_h), dtype=ct)  # [..., n_q, d_h] accumulated in HBM
    dK = xp.zeros((b, h_kv, 1, n_k, d_h), dtype=ct)  # [b, h_kv, 1, n_k, d_h]
    dV = xp.zeros((b, h_kv, 1, n_k, d_h), dtype=ct)
    offset = n_k - n_q
    Tr, Tc = math.ceil(n_q / Br), math.ceil(n_k / Bc)
    for j in range(Tc):
        c0, c1 = j * Bc, min(n_k, (j + 1) * Bc)
        K_j = xp.astype(K[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load K_j, V_j
        V_j = xp.astype(V[..., c0:c1, :], ct)
        io.load("K", heads * (c1 - c0) * d_h), io.load("V", heads * (c1 - c0) * d_h)
        dK_j = xp.zeros(K_j.shape, dtype=ct)  # [b, h_kv, 1, Bc, d_h] in fast memory
        dV_j = xp.zeros(V_j.shape, dtype=ct)
        for i in range(Tr):
            r0, r1 = i * Br, min(n_q, (i + 1) * Br)
            kind, mask = tile_plan(xp, r0, r1, c0, c1, offset, causal, docs)
            if kind == "skipped":
                continue
            Q_i = xp.astype(Q[..., r0:r1, :], ct)  # [..., Br, d_h] load Q_i, dO_i, L_i, D_i
            dO_i = xp.astype(dO[..., r0:r1, :], ct)
            L_i, D_i = L[..., r0:r1, :], D[..., r0:r1, :]  # [..., Br, 1]
            io.load("Q", heads * (r1 - r0) * d_h), io.load("dO", heads * (r1 - r0) * d_h)
            io.load("L", heads * (r1 - r0)), io.load("D", heads * (r1 - r0))
            # recompute S_ij with the forward's roundings, (Q_i·scale) K_jᵀ: L_i holds the forward's own
            # max, and (Q_i K_jᵀ)·scale differs from it by a few ulps, e^(few ulps of 4e3) = 1 ± 1e-3 in float32
            S_ij = (Q_i * scale) @ K_j.mT  # [..., Br, Bc]
            if mask is not None:
                S_ij = xp.where(mask, S_ij, -math.inf)
            P_ij = xp.exp(S_ij - L_i)  # [..., Br, Bc] P_ij = e^(S_ij - L_i), already normalised
            if mask is not None:  # masked: exactly 0, also where L_i is NaN (e^(-inf - NaN) would be NaN)
                P_ij = xp.where(mask, P_ij, 0.0)
            dV_j = dV_j + xp.sum(P_ij.mT @ dO_i, axis=2, keepdims=True)  # dV_j += P_ijᵀ dO_i
            dP_ij = dO_i @ V_j.mT  # [..., Br, Bc] dP_ij = dO_i V_jᵀ
            dS_ij = P_ij * (dP_ij - D_i)  # [..., Br, Bc] dS_ij = P_ij ∘ (dP_ij - D_i)
            if mask is not None:  # masked: no gradient, also from a NaN row (0 · NaN would be NaN)
                dS_ij = xp.where(mask, dS_ij, 0.0)
            dQ[..., r0:r1, :] = dQ[..., r0:r1, :] + (dS_ij @ K_j) * scale  # read-modify-write dQ_i
            io.load("dQ", heads * (r1 - r0) * d_h), io.store("dQ", heads * (r1 - r0) * d_h)
            dK_j = dK_j + xp.sum(dS_ij.mT @ Q_i, axis=2, keepdims=True) * scale
        dK[..., c0:c1, :], dV[..., c0:c1, :] = dK_j, dV_j  # store dK_j, dV_j
        io.store("dK", heads * (c1 - c0) * d_h), io.store("dV", heads * (c1 - c0) * d_h)
    return (xp.astype(xp.reshape(dQ, (b, h, n_q, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dK, (b, h_kv, n_k, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dV, (b, h_kv, n_k, d_h)), in_dtype, copy=False))
