"""Workbook, lesson 14 · Serving memory: a paged KV cache (`lessons/14_paged_kv.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 14

Shapes use the course's dimension names: h query heads, h_kv key/value heads, n_q queries,
d_h head size. The cache is a pool of fixed-size blocks shared by every sequence; a sequence
owns a list of block ids, its block table, in position order.

Here the class `PagedKVCache` is given whole except `write`: the pool and the free list are
allocated once (`__init__`), `add_sequence` opens a request, `extend` moves its length on,
`free_sequence` gives its blocks back and `gather` reads it out; you write `write`, which takes
blocks from the free list as a request grows and copies new keys and values into them. Then
`paged_attention` reads a sequence through its block table, and `paged_memory_report` counts what
paging saves against preallocating every request to the longest allowed.
"""
from __future__ import annotations

import math

import numpy as np

from transformer import namespace  # namespace(None) is NumPy; namespace(xp) the module xp names
from transformer import kv_cache_bytes_per_token  # bytes of K and V a token, for a config (yours is in lesson 13)


class PagedKVCache:
    """A pool of n_blocks blocks of block_size positions, per layer one K and one V array of shape
    (n_blocks, h_kv, block_size, d_h), shared by every sequence; a free list of the block ids no one
    holds (a stack: its last entry is handed out next, so block 0 goes first and a block just freed
    is reused first); per sequence a block table (its block ids, in position order) and a length.

        position p of a sequence:  block self.tables[seq][p // block_size],  slot p % block_size

    `write(seq, layer, k_new, v_new)` stores t new positions of one layer; `extend(seq, t)` moves
    the length on once every layer has them. The package's class also serves a batch of b
    sequences through `update` and `advance`, as `KVCache` does; this one keeps to the requests.
    """

    def __init__(self, n_layers: int, b: int, h_kv: int, n_max: int, d_h: int, *,
                 block_size: int = 16, n_blocks: int | None = None, dtype=None, xp=None):
        xp = namespace(xp)
        dtype = xp.float32 if dtype is None else dtype
        n_layers, b, h_kv, n_max, d_h, block_size = (int(s) for s in (n_layers, b, h_kv, n_max, d_h, block_size))
        n_blocks = b * math.ceil(n_max / block_size) if n_blocks is None else int(n_blocks)
        self.xp, self.dtype, self.n_layers, self.h_kv, self.d_h = xp, dtype, n_layers, h_kv, d_h
        self.n_max, self.block_size, self.n_blocks = n_max, block_size, n_blocks
        shape = (n_blocks, h_kv, block_size, d_h)
        self.k = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [n_blocks, h_kv, block_size, d_h]
        self.v = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [n_blocks, h_kv, block_size, d_h]
        self.free = list(range(n_blocks - 1, -1, -1))  # a stack: block 0 is handed out first
        self.tables: dict[int, list[int]] = {}  # sequence id -> block ids, in position order
        self.lengths: dict[int, int] = {}  # sequence id -> positions stored (every layer)
        self.written: dict[int, list[int]] = {}  # sequence id -> per layer, positions [0, written) written
        self._next_id = 0
        self.batch = [self.add_sequence() for _ in range(b)]

    def add_sequence(self) -> int:
        """Open an empty sequence (no blocks yet) and return its id."""
        seq = self._next_id
        self._next_id += 1
        self.tables[seq], self.lengths[seq], self.written[seq] = [], 0, [0] * self.n_layers
        return seq

    def free_sequence(self, seq: int):
        """A finished request gives its blocks back, zeroed, to the free list."""
        blocks = self.tables.pop(seq)
        for pool in self.k + self.v:
            for blk in blocks:
                pool[blk, ...] = 0
        self.free.extend(reversed(blocks))  # its first block is handed out next
        del self.lengths[seq], self.written[seq]
        if seq in self.batch:
            self.batch.remove(seq)

    def write(self, seq: int, layer: int, k_new, v_new):  # [h_kv, t, d_h] × 2
        """Store the t new positions of one layer at positions [length, length + t) of sequence seq.

        1. Blocks: the table must cover length + t positions, ⌈(length + t) / block_size⌉ blocks;
           take the missing ones from the free list (self.free.pop(), its last entry) and append
           them to self.tables[seq]. Only the first layer to write finds them missing: the other
           layers find them in the table. When the free list is empty, raise RuntimeError naming
           the pool's size (self.free.pop() would raise IndexError, which says nothing of the cache).
        2. Copy: position p goes to block self.tables[seq][p // block_size], slot p % block_size,
           of self.k[layer] and self.v[layer], written in place (by slice). The t positions can
           start inside a block that is partly full and run across one or more block boundaries.
        3. Record self.written[seq][layer] = length + t. Do not move self.lengths[seq]: `extend`
           does, once every layer has written.

        k_new, v_new (h_kv, t, d_h): t = the prompt's length at prefill, 1 at each decode step.
        Example, block_size = 4: a sequence of length 3 with table [5] writes t = 6 positions
        3 … 8: it takes 2 blocks (say 4 and 3: table [5, 4, 3]); position 3 goes to block 5,
        slot 3; positions 4–7 to block 4, slots 0–3; position 8 to block 3, slot 0.

        After trying: the package's version is `transformer/core/paged_kv.py`, `PagedKVCache.write`.
        """
        raise NotImplementedError(
            "PagedKVCache.write: start with the blocks: how many does the table need to cover "
            "self.lengths[seq] + t positions, and how many does it have? Then copy one position at a time "
            "(block self.tables[seq][p // block_size], slot p % block_size) before copying runs.")

    def extend(self, seq: int, t: int):
        """Every layer of seq holds t more positions."""
        self.lengths[seq] += t

    def gather(self, seq: int, layer: int, n: int | None = None):  # -> 2 × [h_kv, n, d_h]
        """K and V of seq's first n positions (default: all stored), copied out of its blocks."""
        n = self.lengths[seq] if n is None else n
        nb = math.ceil(n / self.block_size)
        out = []
        for pool in (self.k[layer], self.v[layer]):
            blocks = pool[self.tables[seq][:nb]]  # [nb, h_kv, block_size, d_h]
            flat = blocks.transpose(1, 0, 2, 3).reshape(self.h_kv, nb * self.block_size, self.d_h)
            out.append(flat[:, :n, :])  # [h_kv, n, d_h]
        return out[0], out[1]


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


def paged_memory_report(config, lengths, *, block_size: int = 16, n_max: int | None = None,
                        dtype="float16") -> dict:
    """KV memory for a batch of requests of the given lengths n_i, paged against contiguous, in bytes.

        bytes_per_token      = kv_cache_bytes_per_token(config, dtype)
        used                 = Σ n_i tokens                               (what is stored)
        paged_reserved       = Σ ⌈n_i / block_size⌉ · block_size tokens   (whole blocks only)
        contiguous_reserved  = b · n_max tokens   (a (b, n_max) grid of slots: every request preallocated
                                                   to the longest allowed; n_max = max(lengths) if not given)
        *_waste              = reserved − used;   *_utilisation = used / reserved (1.0 if nothing is reserved)

    Returns a dict with the keys "requests" (b), "tokens" (Σ n_i), "blocks" (Σ ⌈n_i / block_size⌉),
    "bytes_per_token", "used", "paged_reserved", "contiguous_reserved", "paged_waste",
    "contiguous_waste", "paged_utilisation", "contiguous_utilisation"; every count but the first three
    and the utilisations is in bytes. A request longer than n_max is refused: raise ValueError naming it.
    Example: lengths [100, 37] at block_size 16 take 7 + 3 = 10 blocks, 160 token slots for 137 tokens.

    After trying: the package's version is `transformer/models/counting.py`, `paged_memory_report`.
    """
    raise NotImplementedError(
        "paged_memory_report: start by counting the blocks of one request of 37 tokens at block_size 16, "
        "then the token slots they reserve; bytes come last, one multiplication.")
