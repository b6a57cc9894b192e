"""Paged KV cache (PagedAttention, note 003): the cache in fixed-size blocks, like virtual memory.

A contiguous cache reserves n_max positions for every sequence up front, although most
requests stop far earlier. The paged cache keeps one pool of blocks of `block_size`
positions; each sequence owns a *block table* (its list of block ids, in order), takes a
block from the free list when its last block is full, and gives all of them back when it
finishes. Waste is limited to the unfilled end of each sequence's last block.

    position p of a sequence lives in block table[p // block_size], slot p % block_size

Pool per layer: K and V of shape (n_blocks, h_kv, block_size, d_h); block id i indexes
every layer's pool (one table serves all layers).
Each public function and method checks its input at the door (`paged_kv_checks.paged_kv_cache_write` for
`PagedKVCache.write`, …); `f.unchecked` is the bare formula.
"""
from __future__ import annotations

import math

from . import paged_kv_checks as checks
from ..backend import compute_dtype, get_xp, namespace, nbytes, to_numpy
from ..require import checked_by
from .online_softmax import exp_minus  # e^(x - m) that is 0, not NaN, while m is still -inf

__all__ = ["PagedKVCache", "paged_attention"]


class PagedKVCache:
    """Block pool + free list + per-sequence block tables.

    Same interface as the contiguous `KVCache` for a batch of b sequences advancing
    together (`update`, `advance`, `length`, `nbytes`, `n_max`), so a decoder can take either;
    plus a per-sequence interface for requests of different lengths (`add_sequence`,
    `write`, `extend`, `gather`, `free_sequence`) and the byte counts `reserved_bytes`
    (whole blocks handed out) and `used_bytes` (positions actually filled).

    n_blocks defaults to b · ⌈n_max / block_size⌉: enough for every sequence to reach n_max.
    """

    @checked_by(checks.paged_kv_cache_init)
    def __init__(self, n_layers: int, b: int, h_kv: int, n_max: int, d_h: int, *,
                 block_size: int = 16, n_blocks: int | None = None, dtype=None, xp=None):
        xp = namespace(xp)
        dtype = xp.float32 if dtype is None else dtype
        n_layers, b, h_kv, n_max, d_h, block_size = (int(s) for s in (n_layers, b, h_kv, n_max, d_h, block_size))
        n_blocks = b * math.ceil(n_max / block_size) if n_blocks is None else int(n_blocks)
        self.xp, self.dtype = xp, dtype
        self.n_layers, self.h_kv, self.d_h = n_layers, h_kv, d_h
        self.n_max, self.block_size, self.n_blocks = n_max, block_size, n_blocks
        shape = (n_blocks, h_kv, block_size, d_h)
        self.k = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [n_blocks, h_kv, bs, d_h]
        self.v = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [n_blocks, h_kv, bs, d_h]
        self.free = list(range(n_blocks - 1, -1, -1))  # a stack: block 0 is handed out first
        self.tables: dict[int, list[int]] = {}  # sequence id -> block ids, in position order
        self.lengths: dict[int, int] = {}  # sequence id -> positions stored
        self.written: dict[int, list[int]] = {}  # sequence id -> per layer, positions [0, written) written
        self._next_id = 0
        self.batch = [self.add_sequence() for _ in range(b)]  # the sequences update() serves

    # ------------------------------------------------------------ per-sequence interface

    def add_sequence(self) -> int:
        """Open an empty sequence (no blocks yet) and return its id."""
        seq = self._next_id
        self._next_id += 1
        self.tables[seq], self.lengths[seq], self.written[seq] = [], 0, [0] * self.n_layers
        return seq

    @checked_by(checks.paged_kv_cache_free_sequence)
    def free_sequence(self, seq: int):
        """A finished request gives its blocks back to the free list, zeroed: `paged_attention` reads a last
        block's slots past the length with weight 0, and 0·NaN (keys of a request that went NaN) is NaN."""
        blocks = self.tables.pop(seq)
        for pool in self.k + self.v:
            for blk in blocks:
                pool[blk, ...] = 0  # [h_kv, bs, d_h] as allocated
        self.free.extend(reversed(blocks))
        del self.lengths[seq], self.written[seq]
        if seq in self.batch:
            self.batch.remove(seq)

    def blocks_needed(self, seq: int, n_tokens: int) -> int:
        """Blocks seq must still take for its table to cover n_tokens positions."""
        return max(0, math.ceil(n_tokens / self.block_size) - len(self.tables[seq]))

    @checked_by(checks.paged_kv_cache_write)
    def write(self, seq: int, layer: int, k_new, v_new):  # [h_kv, t, d_h] × 2
        """Store t new positions of one layer at [length, length + t) of sequence seq.

        Blocks are taken from the free list on the first layer that needs them; the other
        layers find them already in the table. Call `extend(seq, t)` after the last layer.
        """
        t = k_new.shape[1]
        start = self.lengths[seq]
        table, bs = self.tables[seq], self.block_size
        for _ in range(self.blocks_needed(seq, start + t)):  # the door made sure the pool has them
            table.append(self.free.pop())
        p = start
        while p < start + t:  # copy block by block: a run of positions inside one block at a time
            blk, off = table[p // bs], p % bs
            m = min(bs - off, start + t - p)  # positions that fit in this block
            self.k[layer][blk, :, off:off + m, :] = k_new[:, p - start:p - start + m, :]  # [h_kv, m, d_h]
            self.v[layer][blk, :, off:off + m, :] = v_new[:, p - start:p - start + m, :]  # [h_kv, m, d_h]
            p += m
        self.written[seq][layer] = start + t

    @checked_by(checks.paged_kv_cache_extend)
    def extend(self, seq: int, t: int):
        """All layers of seq hold t more positions."""
        self.lengths[seq] += t

    @checked_by(checks.paged_kv_cache_gather)
    def gather(self, seq: int, layer: int, n: int | None = None):  # -> 2 × [h_kv, n, d_h]
        """K and V of seq's first n positions (default: all stored), copied out block by block."""
        xp = self.xp
        n = self.lengths[seq] if n is None else n
        nb = math.ceil(n / self.block_size)
        idx = xp.asarray(self.tables[seq][:nb], dtype=xp.int64)  # [nb]
        out = []
        for pool in (self.k[layer], self.v[layer]):
            blocks = xp.take(pool, idx, axis=0)  # [nb, h_kv, bs, d_h]
            blocks = xp.permute_dims(blocks, (1, 0, 2, 3))  # [h_kv, nb, bs, d_h]
            flat = xp.reshape(blocks, (self.h_kv, nb * self.block_size, self.d_h))  # [h_kv, nb·bs, d_h]
            out.append(flat[:, :n, :])  # [h_kv, n, d_h]
        return out[0], out[1]

    # ------------------------------------------------------------ KVCache interface (batch)

    @property
    def length(self) -> int:
        """Positions stored in the batch's sequences (they advance together)."""
        return self.lengths[self.batch[0]] if self.batch else 0

    @checked_by(checks.paged_kv_cache_update)
    def update(self, layer: int, k_new, v_new):  # [b, h_kv, t, d_h] -> 2 × [b, h_kv, length + t, d_h]
        """Write the t new positions of `layer` for each sequence of the batch and return
        K, V of all positions so far, read back through the block tables."""
        xp = self.xp
        n = self.length + k_new.shape[2]
        ks, vs = [], []
        for i, seq in enumerate(self.batch):  # the door checked the whole batch once
            self.write(seq, layer, k_new[i, ...], v_new[i, ...])  # [h_kv, t, d_h] × 2
            k, v = self.gather(seq, layer, n)  # [h_kv, n, d_h] each
            ks.append(k)
            vs.append(v)
        return xp.stack(ks, axis=0), xp.stack(vs, axis=0)  # [b, h_kv, n, d_h]

    @checked_by(checks.paged_kv_cache_advance)
    def advance(self, t: int):
        """All layers hold the t new positions: move every batch sequence on."""
        for seq in self.batch:
            self.lengths[seq] += t  # extend(seq, t), checked for every sequence at the door

    # ------------------------------------------------------------ memory

    @property
    def bytes_per_token(self) -> int:
        """2 (K and V) · L · h_kv · d_h · bytes per number."""
        return 2 * self.n_layers * self.h_kv * self.d_h * _itemsize(self.k[0])

    @property
    def blocks_in_use(self) -> int:
        return self.n_blocks - len(self.free)

    @property
    def reserved_bytes(self) -> int:
        """Bytes of the blocks handed out to sequences: whole blocks, filled or not."""
        return self.blocks_in_use * self.block_size * self.bytes_per_token

    @property
    def used_bytes(self) -> int:
        """Bytes of the positions actually stored."""
        return sum(self.lengths.values()) * self.bytes_per_token

    @property
    def nbytes(self) -> int:
        """Real bytes held by the pool arrays (every block, in use or free)."""
        return sum(nbytes(a) for a in self.k + self.v)

    def memory_report(self) -> dict:
        """Measured counts, in the keys of `counting.paged_memory_report` where they overlap."""
        return {"requests": len(self.tables), "tokens": sum(self.lengths.values()),
                "blocks": self.blocks_in_use, "free_blocks": len(self.free),
                "bytes_per_token": self.bytes_per_token, "used": self.used_bytes,
                "paged_reserved": self.reserved_bytes, "paged_waste": self.reserved_bytes - self.used_bytes,
                "pool": self.nbytes}


def _itemsize(a) -> int:
    return nbytes(a) // math.prod(a.shape)  # pools are never empty


def _block_ids(block_table) -> list[int]:
    """A block table as a host list of Python ints. The table is a host list (one per sequence, a
    few ids); an array is copied to one, which on a GPU waits for the device."""
    table = to_numpy(block_table).tolist() if hasattr(block_table, "shape") else block_table
    return table if all(type(b) is int for b in table) else [int(b) for b in table]  # NumPy ints -> ints


@checked_by(checks.paged_attention)
def paged_attention(q, k_pool, v_pool, block_table, n_tokens: int, *, causal: bool = True,
                    scale: float | None = None):  # [h, n_q, d_h] -> [h, n_q, d_h]
    """Attention of one sequence reading K/V block by block through its block table.

    q holds the queries of the last n_q of the n_tokens stored positions. Each block
    (h_kv, block_size, d_h) is fetched by id, its scores computed, and merged into the
    result with the online-softmax recurrence (running max m, running sum l):

        m' = max(m, rowmax(S_j))      l' = l·e^(m - m') + rowsum(e^(S_j - m'))
        O' = O·e^(m - m') + e^(S_j - m') V_j          out = O / l

    so K and V are never copied into one contiguous array. GQA: h_kv key/value heads are
    repeated for the h query heads after the block is read.

    block_table: the sequence's block ids in position order, a host list of ints (as
    `PagedKVCache.tables[seq]`): a handful of numbers, read on the host to pick each block.
    An array is accepted but copied to a list on every call (on a GPU, a wait for the device).
    """
    table = _block_ids(block_table)
    xp = get_xp(q, k_pool)
    h, n_q, d_h = q.shape
    h_kv, bs = k_pool.shape[1], k_pool.shape[2]
    ct = compute_dtype(xp, q.dtype)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    qc = xp.astype(q, ct) * scale  # [h, n_q, d_h]
    q_pos = xp.arange(n_tokens - n_q, n_tokens)[:, None]  # [n_q, 1]: queries are the last positions
    m = xp.full((h, n_q, 1), -math.inf, dtype=ct)  # running max
    l = xp.zeros((h, n_q, 1), dtype=ct)  # running sum of exponentials
    o = xp.zeros((h, n_q, d_h), dtype=ct)  # running unnormalised output
    for j in range(math.ceil(n_tokens / bs)):
        blk = table[j]
        kb = xp.repeat(xp.astype(k_pool[blk, ...], ct), h // h_kv, axis=0)  # [h, bs, d_h]
        vb = xp.repeat(xp.astype(v_pool[blk, ...], ct), h // h_kv, axis=0)  # [h, bs, d_h]
        k_pos = xp.arange(j * bs, (j + 1) * bs)[None, :]  # [1, bs]
        allowed = (k_pos < n_tokens) & ((k_pos <= q_pos) if causal else (k_pos >= 0))  # [n_q, bs]
        s = xp.where(allowed, qc @ kb.mT, -math.inf)  # [h, n_q, bs]
        m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # [h, n_q, 1]
        p = exp_minus(s, m_new)  # [h, n_q, bs], 0 where masked (and for a row with no key yet)
        corr = exp_minus(m, m_new)  # [h, n_q, 1], rescales what was summed so far
        l = l * corr + xp.sum(p, axis=-1, keepdims=True)
        o = o * corr + p @ vb  # [h, n_q, d_h]
        m = m_new
    out = o / xp.where(l == 0, 1.0, l)  # [h, n_q, d_h]; no key: o = 0 -> zeros (a NaN row stays NaN)
    return xp.astype(out, q.dtype)
