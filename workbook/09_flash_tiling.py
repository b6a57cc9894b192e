"""Workbook, lesson 09 · FlashAttention: tiles, loop orders, memory traffic (`lessons/09_flash_tiling.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 09

The package's `flash_attention` has more options (FlashAttention-1's loop order, the log-sum-exp,
a trace, packed documents); here you write the heart of it: FlashAttention-2's forward loop, then
its backward by recomputation (section 7), which rebuilds each tile of P from the saved lse.
Shapes use the course's dimension names: b batch, h query heads, h_kv key/value heads, n_q
queries, n_k keys, d_h head size; Br and Bc are the tile sizes, Tr and Tc the numbers of tiles.
"""
from __future__ import annotations

import math

import numpy as np

from transformer import online_attention_update  # lesson 08's step; or write the update inline
from transformer import repeat_kv  # or your own from 07


def flash_attention(q, k, v, *, causal=False, block_q=None, block_k=None):
    # [b, h, n_q, d_h], [b, h_kv, n_k, d_h] ×2 -> [b, h, n_q, d_h]
    """Exact attention, tile by tile, without ever forming the n_q × n_k matrix of scores.

    Cut Q into Tr = ⌈n_q / Br⌉ blocks Q_i of Br rows and K, V into Tc = ⌈n_k / Bc⌉ blocks
    K_j, V_j of Bc rows (the last block of each may be shorter). FlashAttention-2 order:

        for each query block i:                    m_i = −inf, l_i = 0, O_i = 0   (Br, 1), (Br, 1), (Br, d_h)
            for each key block j:
                S_ij = Q_i K_jᵀ / √d_h              (Br, Bc)
                (m_i, l_i, O_i) = online_attention_update(m_i, l_i, O_i, S_ij, V_j)
            out_i = O_i / l_i                        divided once, at the end

    q (b, h, n_q, d_h); k and v (b, h_kv, n_k, d_h); query head i reads key/value head
    i // (h / h_kv).  ->  out (b, h, n_q, d_h) in q's dtype, equal to scaled_dot_product_attention's.
    block_q = Br and block_k = Bc, None: 128; never more than n_q and n_k.
    causal=True: the queries are the last n_q positions (row r sits at position r + n_k − n_q)
    and see keys j ≤ their position; scores above that are −inf. A tile whose keys all come
    after every query of its block can be skipped whole. A row that sees no key returns zeros.

    After trying: the package's version is `transformer/flash/tiled.py`, `flash_attention`.
    """
    raise NotImplementedError(
        "flash_attention: start with the two loops and no mask: for r0 in range(0, n_q, Br), and inside "
        "for c0 in range(0, n_k, Bc); q[..., r0:r0 + Br, :] is Q_i and k[..., c0:c0 + Bc, :] is K_j. Check "
        "against scaled_dot_product_attention with tile sizes that do not divide n, then add causal.")


def visible_key_tiles(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool) -> list[int]:
    """For each query block, how many key tiles a kernel computes; the others are skipped whole.

    The queries are the LAST n_q of the n_k positions: query row r sits at position r + (n_k − n_q).
    Query block i holds rows i·block_q … min(n_q, (i + 1)·block_q) − 1; its last query sits at

        p_i = min(n_q, (i + 1)·block_q) − 1 + (n_k − n_q)

    and with causal=True it sees the key tiles j = 0 … ⌊p_i / block_k⌋: ⌊p_i / block_k⌋ + 1 of them
    (at most Tc = ⌈n_k / block_k⌉; none when p_i < 0). Without the mask every block computes all Tc.
    ->  a list of Tr = ⌈n_q / block_q⌉ ints. Example: visible_key_tiles(8, 8, 2, 2, True) = [1, 2, 3, 4]:
    about half the (Tr, Tc) grid of tiles, as the causal mask hides about half of the (n_q, n_k) scores.

    After trying: the package's version is `transformer/flash/io_count.py`, `visible_key_tiles`.
    """
    raise NotImplementedError(
        "visible_key_tiles: start without the mask (every block computes all Tc); then, for causal=True, draw the "
        "(Tr, Tc) grid of the example on paper and write p_i for each row of it.")


def standard_attention_io(n_q: int, n_k: int, d_h: int, heads: int = 1) -> dict:
    """The numbers standard attention moves between HBM and the chip (the FlashAttention paper's
    Algorithm 0), in three passes, each reading what the one before wrote:

        read Q (n_q, d_h), K (n_k, d_h)   ->  write S = Q Kᵀ          (n_q, n_k)
        read S                             ->  write P = softmax(S)    (n_q, n_k)
        read P, V (n_k, d_h)               ->  write O = P V           (n_q, d_h)

    loads = everything read, stores = everything written, total = loads + stores, each for one
    head times heads.  ->  a dict of ints with the keys loads, stores and total.
    Example: n_q = 2, n_k = 3, d_h = 4: loads = 8 + 12 + 6 + 6 + 12 = 44 (Q, K, S, P, V), stores =
    6 + 6 + 8 = 20 (S, P, O), total = 64.

    After trying: the package's version is `transformer/flash/io_count.py`, `standard_attention_io`.
    """
    raise NotImplementedError(
        "standard_attention_io: start by writing the three passes as a table: what each reads and writes, and how "
        "many numbers that is; then add up each column.")


def flash2_io(n_q, n_k, d_h, block_q, block_k, causal=False, heads=1) -> dict:
    """The numbers FlashAttention-2's loop moves between HBM and the chip: S and P never leave it.

        each query block Q_i (Br, d_h) is loaded once; O_i and L_i = m + log l are stored once
                                                          n_q·d_h loads,  n_q·(d_h + 1) stores
        query block i streams its t_i key tiles, K_j and V_j (Bc, d_h) each
                                                          2·d_h·min(n_k, t_i·block_k) loads

    t_i = visible_key_tiles(n_q, n_k, block_q, block_k, causal)[i] (above; all Tc without the mask);
    min(n_k, …) because a last key tile shorter than block_k holds fewer keys. Each count is for one
    head, times heads.  ->  a dict of ints with the keys loads, stores and total.
    Example: n_q = n_k = 4, d_h = 2, blocks of 2, causal: t = [1, 2], 6 keys streamed, loads =
    8 + 2·2·6 = 32, stores = 4·3 = 12, total = 44 (without the mask: loads 40, total 52).

    After trying: the package's version is `transformer/flash/io_count.py`, `flash2_io`.
    """
    raise NotImplementedError(
        "flash2_io: start with the non-causal count, every query block streaming all n_k keys; then take t_i from "
        "your visible_key_tiles and check the example both ways.")


def flash_attention_backward(dout, q, k, v, out, lse, *, causal=False, block_q=None, block_k=None):
    # [b, h, n_q, d_h] ×2, [b, h_kv, n_k, d_h] ×2, [b, h, n_q, d_h], [b, h, n_q] -> dq, dk, dv
    """The gradients of attention by recomputation: P is rebuilt one tile at a time from Q, K and
    the forward's log-sum-exp L, never held whole. Before the loop, per row:

        D_i = rowsum(dO_i ∘ O_i)                      (b, h, n_q, 1): equals Σ_j P_ij dP_ij
    FlashAttention-2 order, key tiles outside:
        for each key block j:                         K_j, V_j (Bc, d_h)
            for each query block i:                   Q_i, dO_i (Br, d_h)
                S_ij = Q_i K_jᵀ / √d_h  (+ the causal mask: −inf)       (Br, Bc)
                P_ij = e^(S_ij − L_i)                 already normalised: no softmax of the tile
                dV_j += P_ijᵀ dO_i,     dP_ij = dO_i V_jᵀ
                dS_ij = P_ij ∘ (dP_ij − D_i)
                dQ_i += dS_ij K_j / √d_h,   dK_j += dS_ijᵀ Q_i / √d_h

    dout = dL/dO and q (b, h, n_q, d_h); k, v (b, h_kv, n_k, d_h); out (b, h, n_q, d_h) and
    lse (b, h, n_q) from the forward, `flash_attention(q, k, v, causal=…, return_lse=True)`.
    ->  dq (b, h, n_q, d_h), dk and dv (b, h_kv, n_k, d_h), in q's dtype. GQA: query head i read
    key/value head i // (h / h_kv), so dk and dv sum the gradients of each group of h / h_kv heads.
    block_q = Br, block_k = Bc (None: 128); causal as in `flash_attention`; a row that saw no key
    has lse = −inf: its P is 0 (use L = +inf there), so it adds nothing and its dq is 0.

    After trying: the package's version is `transformer/flash/backward.py`, `flash_attention_backward`.
    """
    raise NotImplementedError(
        "flash_attention_backward: start with no tiles at all (one tile: Br = n_q, Bc = n_k) and no mask, h_kv = h: "
        "P = e^(S − L) from lse[..., None], then each line of the loop body; compare with "
        "scaled_dot_product_attention_backward, then cut the loops into tiles.")
