"""The checker's cases for lesson 09's backward by recomputation: flash_attention_backward, FlashAttention-2's tile
loop that rebuilds each tile of P from the saved log-sum-exp, held to the values of the package's and torch's, and
to the memory of tiles."""
from __future__ import annotations

import math

import numpy as np

from ..core.masks import causal_mask
from ..flash.backward import flash_attention_backward
from ..flash.tiled import flash_attention
from .cases import Case, Mistake, Spec, fresh
from .specs_flash import MEMORY_N

__all__ = ["FLASH_BACKWARD"]


def _inputs(r, b, h, h_kv, n_q, n_k, d_h, dtype=np.float64, **kw):
    """(dout, q, k, v, out, lse): random inputs, and the forward's O and lse (the package's, return_lse=True)."""
    q = r.standard_normal((b, h, n_q, d_h)).astype(dtype)
    k, v = (r.standard_normal((b, h_kv, n_k, d_h)).astype(dtype) for _ in range(2))
    out, lse = flash_attention(q, k, v, causal=kw.get("causal", False), return_lse=True)
    return r.standard_normal(q.shape).astype(dtype), q, k, v, out, lse


def flash_backward_cases():
    r = np.random.default_rng(92)
    causal = {"causal": True}
    return [
        Case("n=8, tiles of 4 × 4, no mask", _inputs(r, 1, 2, 2, 8, 8, 4), {"block_q": 4, "block_k": 4}),
        Case("n=7, tiles of 3 × 2 that do not divide n", _inputs(r, 2, 2, 2, 7, 7, 4), {"block_q": 3, "block_k": 2},
             frozenset({"ragged"})),
        Case("causal, n=9, tiles of 4 × 3", _inputs(r, 1, 2, 2, 9, 9, 8, **causal),
             {**causal, "block_q": 4, "block_k": 3}, frozenset({"causal", "ragged"})),
        Case("causal, 3 queries after 5 cached keys (n_q=3, n_k=8)", _inputs(r, 1, 1, 1, 3, 8, 4, **causal),
             {**causal, "block_q": 2, "block_k": 3}, frozenset({"causal", "offset", "ragged"})),
        Case("GQA: h=4, h_kv=2, tiles of 2 × 5", _inputs(r, 1, 4, 2, 6, 6, 4), {"block_q": 2, "block_k": 5},
             frozenset({"gqa"})),
        Case("float32, default tiles (one tile: n < 128)", _inputs(r, 1, 2, 2, 10, 10, 8, np.float32),
             tags=frozenset({"float32"})),
        Case("causal, 6 queries over 4 keys (n_q > n_k): rows 0 and 1 see no key (lse = −inf), and get 0",
             _inputs(r, 1, 1, 1, 6, 4, 4, **causal), {**causal, "block_q": 4, "block_k": 2},
             frozenset({"causal", "no-key", "ragged"})),
        Case(f"n = {MEMORY_N:,}, tiles of 64 × 64: the peak memory of tiles, not of the whole P",
             _inputs(r, 1, 1, 1, MEMORY_N, MEMORY_N, 16), {"block_q": 64, "block_k": 64}, frozenset({"memory"}),
             max_bytes=MEMORY_N * MEMORY_N * 8 // 3,
             memory_note=f"one n_q × n_k matrix (S, P or dP) is {MEMORY_N * MEMORY_N * 8 / 1e6:.1f} MB in float64, "
                         "and the backward by recomputation never holds one — for each key tile, loop over the "
                         "query tiles and rebuild only that tile's P_ij = e^(S_ij − L_i)"),
    ]


def _tiles(n, B):
    return [(s, min(n, s + B)) for s in range(0, n, B)]


def _backward(dout, q, k, v, out, lse, *, causal=False, block_q=None, block_k=None, P_rule="lse", D_rule="row",
              scale_q=True, scale_k=True, sum_groups=True, transpose_p=True):
    """The tile loop, in float64, with a slip: P_rule 'tile' (a softmax over the tile's own keys); D_rule 'tile'
    (rowsum(P_ij ∘ dP_ij) of the tile), 'none' (no D); dQ or dK without the scale; dK, dV left with h heads;
    dV_j += P_ij dO_i (P not transposed, square tiles only)."""
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    n_rep, s = h // h_kv, 1 / math.sqrt(d_h)
    K, V = np.repeat(k, n_rep, axis=1).astype(np.float64), np.repeat(v, n_rep, axis=1).astype(np.float64)
    Q, dO, O = (a.astype(np.float64) for a in (q, dout, out))
    L = np.where(lse == -np.inf, np.inf, lse.astype(np.float64))[..., None]  # [b, h, n_q, 1]
    D = (dO * O).sum(-1, keepdims=True)  # [b, h, n_q, 1]
    # key j ≤ the query's position r + n_k − n_q (causal_mask refuses n_q > n_k, a case here)
    allowed = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + n_k - n_q if causal else np.ones((n_q, n_k), bool)
    dQ, dK, dV = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    for c0, c1 in _tiles(n_k, block_k or 128):
        for r0, r1 in _tiles(n_q, block_q or 128):
            S = Q[..., r0:r1, :] @ K[..., c0:c1, :].swapaxes(-1, -2) * s  # [b, h, Br, Bc]
            S = np.where(allowed[r0:r1, c0:c1], S, -np.inf)
            if P_rule == "lse":
                P = np.exp(S - L[..., r0:r1, :])
            else:  # the tile's own softmax, as written plainly: NaN on a row the mask empties in this tile
                e = np.exp(S - S.max(-1, keepdims=True))
                P = e / e.sum(-1, keepdims=True)
            if not transpose_p and P.shape[-1] != P.shape[-2]:
                raise ValueError("P @ dO needs a square tile")  # a variant that cannot run on a case says nothing
            dV[..., c0:c1, :] += (P.swapaxes(-1, -2) if transpose_p else P) @ dO[..., r0:r1, :]
            dP = dO[..., r0:r1, :] @ V[..., c0:c1, :].swapaxes(-1, -2)
            Di = {"row": D[..., r0:r1, :], "tile": (P * dP).sum(-1, keepdims=True), "none": 0.0}[D_rule]
            dS = P * (dP - Di)
            dQ[..., r0:r1, :] += dS @ K[..., c0:c1, :] * (s if scale_q else 1.0)
            dK[..., c0:c1, :] += dS.swapaxes(-1, -2) @ Q[..., r0:r1, :] * (s if scale_k else 1.0)
    if sum_groups:
        dK, dV = (g.reshape(b, h_kv, n_rep, n_k, d_h).sum(2) for g in (dK, dV))
    return tuple(g.astype(q.dtype) for g in (dQ, dK, dV))


def _slip(gqa_only=False, **knobs):
    """The backward with the slip `knobs` name; gqa_only: a slip that shows only where h_kv < h, which says nothing
    of the other cases."""
    def variant(dout, q, k, v, out, lse, **kwargs):
        if gqa_only and q.shape[1] == k.shape[1]:
            raise ValueError("no groups")
        return _backward(dout, q, k, v, out, lse, **kwargs, **knobs)
    return variant


FLASH_BACKWARD = Spec(
    "flash_attention_backward", flash_attention_backward, flash_backward_cases, "transformer/flash/backward.py",
    dims=(("b", "h", "n_q", "d_h"), ("b", "h_kv", "n_k", "d_h"), ("b", "h_kv", "n_k", "d_h")), names=("dq", "dk", "dv"),
    mistakes=[Mistake("P_ij = e^(S_ij − L_i) with the saved lse: it is already normalised over the WHOLE row, where a "
                      "softmax of one tile normalises over its Bc keys only (it is right only when one tile holds "
                      "every key)", variant=_slip(P_rule="tile")),
              Mistake("D_i = rowsum(dO_i ∘ O_i), taken before the loop: it equals Σ_j P_ij dP_ij over the WHOLE row, "
                      "where a tile's own rowsum(P_ij ∘ dP_ij) is only its part", variant=_slip(D_rule="tile")),
              Mistake("dS_ij = P_ij ∘ (dP_ij − D_i): the softmax's backward subtracts D_i = rowsum(dO_i ∘ O_i) "
                      "before multiplying by P", variant=_slip(D_rule="none")),
              Mistake("dQ and dK carry the scale: dQ_i += dS_ij K_j / √d_h and dK_j += dS_ijᵀ Q_i / √d_h",
                      variant=_slip(scale_q=False, scale_k=False)),
              Mistake("dQ carries the scale too: dQ_i += dS_ij K_j / √d_h", variant=_slip(scale_q=False)),
              Mistake("dK carries the scale too: dK_j += dS_ijᵀ Q_i / √d_h", variant=_slip(scale_k=False)),
              Mistake("dV_j += P_ijᵀ dO_i: key j collects the gradient of every query that read it, so P is "
                      "transposed", variant=_slip(transpose_p=False)),
              Mistake("dK and dV have h_kv heads, as K and V: sum the gradients of each group of h / h_kv query heads "
                      "(dk.reshape(b, h_kv, h // h_kv, n_k, d_h).sum(axis=2))",
                      variant=_slip(gqa_only=True, sum_groups=False)),
              Mistake("a row that saw no key has lse = −inf, and e^(S − L) is e^(−inf + inf) = NaN there: use L = +inf "
                      "where lse is −inf (np.where(lse == -np.inf, np.inf, lse)), so that its P is 0", tag="no-key"),
              Mistake("only causal fails: the recomputed S_ij needs the forward's mask (−inf on keys after the query, "
                      "key j > query row + n_k − n_q), or P_ij is not the forward's", tag="causal"),
              Mistake("with n_k > n_q the queries are the last n_q positions: query row r sits at r + n_k − n_q",
                      tag="offset"),
              Mistake("the last tile is shorter when the tile size does not divide n: slice up to min(n, start + B)",
                      tag="ragged"),
              Mistake("only the cases with h_kv < h fail: repeat each K/V head h / h_kv times for the products, and "
                      "sum dK and dV back over each group", tag="gqa"),
              Mistake("only the cases with h_kv < h fail: repeat each K/V head h / h_kv times (np.repeat axis=1)",
                      raises=r"broadcast|mismatch", tag="gqa")],
    torch=lambda case: _torch_flash_backward(case))


def _torch_flash_backward(case):
    """torch's autograd through SDPA in float64 (the causal mask aligned to the last queries, as the package's);
    None where a row sees no key (torch gives it NaN, the package 0)."""
    import torch
    import torch.nn.functional as F

    (dout, q, k, v, _, _), kw = fresh(case)
    n_q, n_k = q.shape[2], k.shape[2]
    if kw.get("causal") and n_q > n_k:
        return None
    qt, kt, vt = (torch.from_numpy(np.asarray(a, np.float64)).requires_grad_(True) for a in (q, k, v))
    mask = torch.from_numpy(causal_mask(n_q, n_k)) if kw.get("causal") else None
    F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1]).backward(
        torch.from_numpy(np.asarray(dout, np.float64)))
    return tuple(t.grad.numpy().astype(q.dtype) for t in (qt, kt, vt))
