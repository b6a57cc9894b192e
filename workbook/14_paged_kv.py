"""Workbook, lesson 14 · Serving memory: a paged KV cache (`lessons/14_paged_kv.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 14

Shapes use the course's dimension names: h query heads, h_kv key/value heads, n_q queries,
d_h head size. The cache is a pool of fixed-size blocks shared by every sequence; a sequence
owns a list of block ids, its block table, in position order.
"""
from __future__ import annotations

import numpy as np


def paged_attention(q, k_pool, v_pool, block_table, n_tokens: int, *, causal: bool = True,
                    scale: float | None = None):  # [h, n_q, d_h] -> [h, n_q, d_h]
    """Attention of one sequence whose keys and values sit in blocks of a shared pool.

        block j of the table holds positions j·block_size … (j + 1)·block_size − 1
        key at position p:  k_pool[block_table[p // block_size], :, p % block_size]
        out = softmax(q Kᵀ · scale + mask) V        scale = 1/√d_h unless given

    q (h, n_q, d_h): the queries of the LAST n_q of the sequence's n_tokens positions;
    k_pool, v_pool (blocks, h_kv, block_size, d_h): every sequence's blocks, in no order;
    block_table: this sequence's block ids, a list of ints;  ->  (h, n_q, d_h), in q's dtype.
    Only positions < n_tokens hold keys: the rest of the last block is left over from earlier use.
    causal: query i (at position n_tokens − n_q + i) sees the positions up to its own. GQA: query
    head i reads key/value head i // (h / h_kv).
    The package reads one block at a time and merges it into the result with lesson 08's online
    softmax, so K and V are never copied into one array; gathering the blocks first also passes.

    After trying: the package's version is `transformer/core/paged_kv.py`, `paged_attention`.
    """
    raise NotImplementedError(
        "paged_attention: start by reading the keys of block_table[0] and block_table[1] out of k_pool and "
        "printing their shapes; then write down the position of each key slot, and of each query.")
