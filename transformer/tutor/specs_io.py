"""The checker's cases for lesson 09's counts of HBM traffic: the key tiles a causal kernel computes
(visible_key_tiles), and the numbers standard attention and FlashAttention-2 read and write (standard_attention_io,
flash2_io), in the FlashAttention paper's model: every number of Q, K, V, S, P, O read from or written to HBM."""
from __future__ import annotations

import math

import numpy as np

from ..flash.io_count import flash2_io, standard_attention_io, visible_key_tiles
from .cases import Case, Mistake, Spec, call_plain

__all__ = ["VISIBLE_TILES", "STANDARD_IO", "FLASH2_IO"]


def call_counts(fn, case):
    """A list of counts as an int array, so that it is compared entry by entry (a wrong one is named)."""
    out = call_plain(fn, case)
    return np.asarray(out) if isinstance(out, (list, tuple)) else out


# --- the key tiles each query block computes -------------------------------------------------------------------
def tiles_cases():
    return [Case("n_q = n_k = 8, block_q = block_k = 4, not causal: every tile", (8, 8, 4, 4, False)),
            Case("n_q = n_k = 8, blocks of 2, causal", (8, 8, 2, 2, True), tags=frozenset({"causal"})),
            Case("n_q = n_k = 10, block_q = 4, block_k = 3, causal: blocks that do not divide n",
                 (10, 10, 4, 3, True), tags=frozenset({"causal", "ragged"})),
            Case("n_q = 3 queries, the last of n_k = 12 keys, block_q = 2, block_k = 4, causal",
                 (3, 12, 2, 4, True), tags=frozenset({"causal", "offset"})),
            Case("n_q = 9 > n_k = 5, blocks of 2, causal: the first queries see no key", (9, 5, 2, 2, True),
                 tags=frozenset({"causal", "offset", "none"})),
            Case("n_q = 7, n_k = 10, block_q = 3, block_k = 4, not causal", (7, 10, 3, 4, False),
                 tags=frozenset({"ragged"}))]


def _tiles(last=lambda i, bq, n_q: min(n_q, (i + 1) * bq) - 1, offset=True, count=lambda p, bk: p // bk + 1,
           tc=lambda n_k, bk: math.ceil(n_k / bk), guard=True):
    """visible_key_tiles with a slip: last(i, block_q, n_q) the row of the block's last query; offset: queries sit
    at the end of the keys; count(p, block_k) the tiles up to position p; tc the key blocks in all; guard: 0 for
    p < 0."""
    def tiles(n_q, n_k, block_q, block_k, causal):
        Tr, Tc = math.ceil(n_q / block_q), tc(n_k, block_k)
        if not causal:
            return [Tc] * Tr
        out = []
        for i in range(Tr):
            p = last(i, block_q, n_q) + (n_k - n_q if offset else 0)
            out.append(0 if (guard and p < 0) else min(Tc, count(p, block_k)))
        return out
    return tiles


VISIBLE_TILES = Spec(
    "visible_key_tiles", visible_key_tiles, tiles_cases, "transformer/flash/io_count.py", dims=("Tr",),
    call=call_counts, dtype_rule="",
    mistakes=[Mistake("the queries are the LAST n_q of the n_k positions: query row r sits at r + (n_k − n_q), so "
                      "with fewer queries than keys each sees the keys before it too", variant=_tiles(offset=False)),
              Mistake("a query block reaches as far as its LAST query, row min(n_q, (i + 1)·block_q) − 1, not its "
                      "first", variant=_tiles(last=lambda i, bq, n_q: i * bq)),
              Mistake("key blocks j = 0 … ⌊p / block_k⌋ hold a key at or before position p: ⌊p / block_k⌋ + 1 of "
                      "them (⌈p / block_k⌉ falls one short when p is a multiple of block_k)",
                      variant=_tiles(count=lambda p, bk: math.ceil(p / bk))),
              Mistake("a last key block shorter than block_k is still a tile: Tc = ⌈n_k / block_k⌉",
                      variant=_tiles(tc=lambda n_k, bk: n_k // bk)),
              Mistake("a query block whose last query sits before key 0 (p < 0) computes no tile: 0",
                      variant=_tiles(guard=False))])


# --- standard attention: S and P go through HBM ----------------------------------------------------------------
def standard_cases():
    return [Case("n_q = n_k = 6, d_h = 4", (6, 6, 4)), Case("n_q = 3, n_k = 10, d_h = 8", (3, 10, 8)),
            Case("n_q = n_k = 5, d_h = 2, heads = 3", (5, 5, 2), {"heads": 3}, frozenset({"heads"})),
            Case("n_q = 1 query, n_k = 7 keys, d_h = 16: a decode step", (1, 7, 16))]


def _standard(loads, stores, per_head=True):
    """standard_attention_io with a slip: loads(n_q, n_k, d) and stores(n_q, n_k, d) for one head."""
    def io(n_q, n_k, d_h, heads=1):
        h = heads if per_head else 1
        lo, st = loads(n_q, n_k, d_h), stores(n_q, n_k, d_h)
        return {"loads": h * lo, "stores": h * st, "total": h * (lo + st)}
    return io


_LOADS = lambda n_q, n_k, d: n_q * d + 2 * n_k * d + 2 * n_q * n_k  # noqa: E731 - Q, K, V; S read back; P read back
_STORES = lambda n_q, n_k, d: 2 * n_q * n_k + n_q * d  # noqa: E731 - S, P and O written

STANDARD_IO = Spec(
    "standard_attention_io", standard_attention_io, standard_cases, "transformer/flash/io_count.py",
    mistakes=[Mistake("the softmax reads S back from HBM: three passes, each reading what the one before wrote — "
                      "S and P are each written once and read once (2·n_q·n_k loads, 2·n_q·n_k stores)",
                      variant=_standard(lambda n_q, n_k, d: _LOADS(n_q, n_k, d) - n_q * n_k, _STORES)),
              Mistake("standard attention writes S AND P to HBM, each n_q × n_k: 2·n_q·n_k stores besides O",
                      variant=_standard(_LOADS, lambda n_q, n_k, d: n_q * n_k + n_q * d)),
              Mistake("S and P are n_q × n_k, written once and read once each: the loads count 2·n_q·n_k for them, "
                      "the stores 2·n_q·n_k",
                      variant=_standard(lambda n_q, n_k, d: n_q * d + 2 * n_k * d,
                                        lambda n_q, n_k, d: n_q * d)),
              Mistake("K and V have n_k rows each, Q and O n_q: the loads of Q, K, V are n_q·d_h + 2·n_k·d_h",
                      variant=_standard(lambda n_q, n_k, d: 3 * n_q * d + 2 * n_q * n_k, _STORES)),
              Mistake("every one of the heads reads and writes its own Q, K, V, S, P and O: multiply by heads",
                      variant=_standard(_LOADS, _STORES, per_head=False)),
              Mistake("loads are the reads (Q, K, V, S, P) and stores the writes (S, P, O): the two are swapped",
                      variant=_standard(_STORES, _LOADS))])


# --- FlashAttention-2: Q once, K and V streamed once per query block ------------------------------------------
def flash2_cases():
    return [Case("n_q = n_k = 8, d_h = 4, blocks of 4, not causal", (8, 8, 4, 4, 4)),
            Case("n_q = n_k = 8, d_h = 4, blocks of 2, causal", (8, 8, 4, 2, 2), {"causal": True},
                 frozenset({"causal"})),
            Case("n_q = n_k = 10, d_h = 8, block_q = 4, block_k = 3, causal: a last key block of 1",
                 (10, 10, 8, 4, 3), {"causal": True}, frozenset({"causal", "ragged"})),
            Case("n_q = 6, n_k = 10, d_h = 2, block_q = 3, block_k = 4, heads = 2, not causal", (6, 10, 2, 3, 4),
                 {"heads": 2}, frozenset({"heads", "ragged"})),
            Case("n_q = 4, n_k = 12, d_h = 4, block_q = 2, block_k = 4, causal: queries at the end", (4, 12, 4, 2, 4),
                 {"causal": True}, frozenset({"causal"}))]


def _flash2(keys=lambda tiles, bk, n_k: sum(min(n_k, t * bk) for t in tiles), kv=2, lse=True, causal_seen=True,
            q_per_tile=False, per_head=True):
    """flash2_io with a slip: keys(tiles, block_k, n_k) the keys streamed in all; kv the arrays streamed (K and V);
    lse: L stored beside O; causal_seen: the causal flag used; q_per_tile: Q read again for every key tile."""
    def io(n_q, n_k, d_h, block_q, block_k, causal=False, heads=1):
        tiles = visible_key_tiles(n_q, n_k, block_q, block_k, causal and causal_seen)
        q_reads = sum(min(block_q, n_q - i * block_q) * t for i, t in enumerate(tiles)) if q_per_tile else n_q
        loads = q_reads * d_h + kv * d_h * keys(tiles, block_k, n_k)
        stores = n_q * (d_h + (1 if lse else 0))
        h = heads if per_head else 1
        return {"loads": h * loads, "stores": h * stores, "total": h * (loads + stores)}
    return io


FLASH2_IO = Spec(
    "flash2_io", flash2_io, flash2_cases, "transformer/flash/io_count.py",
    mistakes=[Mistake("a last key block shorter than block_k streams only the keys it holds: min(n_k, t_i·block_k) "
                      "keys for query block i", variant=_flash2(keys=lambda tiles, bk, n_k: sum(t * bk for t in tiles))),
              Mistake("each query block streams K AND V through on-chip memory: 2·d_h numbers a key",
                      variant=_flash2(kv=1)),
              Mistake("besides O, each query row stores its log-sum-exp L = m + log l (for the backward): "
                      "n_q·(d_h + 1) stores", variant=_flash2(lse=False)),
              Mistake("FlashAttention-2's outer loop is over query blocks: Q_i is loaded once and stays on chip while "
                      "the key tiles stream past (FlashAttention-1 reads it for every tile)",
                      variant=_flash2(q_per_tile=True)),
              Mistake("with causal=True a query block streams only the key tiles it sees: t_i of them "
                      "(visible_key_tiles), not all Tc", variant=_flash2(causal_seen=False)),
              Mistake("every one of the heads reads its own Q, K, V and writes its own O and L: multiply by heads",
                      variant=_flash2(per_head=False))])
