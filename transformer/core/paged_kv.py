"""Paged KV cache (PagedAttention, note 003): the cache in fixed-size blocks, like virtual memory.

A contiguous cache reserves n_max positions for every sequence up front, although most
requests stop far earlier. The paged cache keeps one pool of blocks of `block_size`
positions; each sequence owns a *block table* (its list of block ids, in order), takes a
block from the free list when its last block is full, and gives all of them back when it
finishes. Waste is limited to the unfilled end of each sequence's last block.

    position p of a sequence lives in block table[p // block_size], slot p % block_size

Pool per layer: K and V of shape (n_blocks, h_kv, block_size, d_h); block id i indexes
every layer's pool (one table serves all layers).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from . import checks
from ..backend import compute_dtype, get_xp, namespace, nbytes, to_numpy
from ..require import require_bool, require_float, require_int
from ..flash.tiled import _exp_minus  # e^(x - m) that is 0, not NaN, while m is still -inf
from .kv_cache import _check_layer, _check_new_kv, _check_written

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

    def __init__(self, n_layers: int, b: int, h_kv: int, n_max: int, d_h: int, *,
                 block_size: int = 16, n_blocks: int | None = None, dtype=None, xp=None):
        xp = namespace(xp)
        dtype = xp.float32 if dtype is None else dtype
        require_int(n_layers=n_layers, h_kv=h_kv, n_max=n_max, d_h=d_h, block_size=block_size, low=1)
        require_int(b=b)  # b = 0: sequences come one by one through add_sequence
        n_layers, b, h_kv, n_max, d_h, block_size = (int(s) for s in (n_layers, b, h_kv, n_max, d_h, block_size))
        if n_blocks is None:
            n_blocks = b * math.ceil(n_max / block_size)  # 0 when b = 0: then n_blocks must be given
        require_int(n_blocks=n_blocks, low=1)
        n_blocks = int(n_blocks)
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

    def free_sequence(self, seq: int):
        """A finished request gives its blocks back to the free list."""
        self._check_seq(seq)
        self.free.extend(reversed(self.tables.pop(seq)))
        del self.lengths[seq], self.written[seq]
        if seq in self.batch:
            self.batch.remove(seq)

    def _check_seq(self, seq):
        if seq not in self.tables:
            raise ValueError(f"unknown sequence id {seq!r}: open ones are {sorted(self.tables)}")

    def _reserve(self, seq: int, n_tokens: int):
        """Grow seq's block table until it covers n_tokens positions."""
        if n_tokens > self.n_max:
            raise ValueError(f"KV cache overflow: sequence {seq} would hold {n_tokens} tokens > n_max={self.n_max}")
        table = self.tables[seq]
        need = math.ceil(n_tokens / self.block_size) - len(table)
        if need > len(self.free):  # refused before taking any block, so a failed write holds none
            raise RuntimeError(f"KV block pool exhausted: all {self.n_blocks} blocks of {self.block_size} "
                               "positions are in use; free finished sequences or allocate more blocks")
        for _ in range(need):
            table.append(self.free.pop())

    def write(self, seq: int, layer: int, k_new, v_new):  # [h_kv, t, d_h] × 2
        """Store t new positions of one layer at [length, length + t) of sequence seq.

        Blocks are taken from the free list on the first layer that needs them; the other
        layers find them already in the table. Call `extend(seq, t)` after the last layer.
        """
        self._check_seq(seq)
        self._check_new(layer, k_new, v_new)
        self._write(seq, layer, k_new, v_new)

    def _write(self, seq, layer, k_new, v_new):  # write() on checked input: [h_kv, t, d_h] × 2
        t = k_new.shape[1]
        start = self.lengths[seq]
        self._reserve(seq, start + t)
        table, bs = self.tables[seq], self.block_size
        p = start
        while p < start + t:  # copy block by block: a run of positions inside one block at a time
            blk, off = table[p // bs], p % bs
            m = min(bs - off, start + t - p)  # positions that fit in this block
            self.k[layer][blk, :, off:off + m, :] = k_new[:, p - start:p - start + m, :]
            self.v[layer][blk, :, off:off + m, :] = v_new[:, p - start:p - start + m, :]
            p += m
        self.written[seq][layer] = start + t

    def extend(self, seq: int, t: int):
        """All layers of seq hold t more positions."""
        self._check_extend(seq, t)
        self.lengths[seq] += t

    def _check_extend(self, seq, t):
        self._check_seq(seq)
        _check_written(f"extend(seq={seq}, t={t})", t, self.lengths[seq], self.written[seq], f"sequence {seq}",
                       "write(seq, layer, k, v)")

    def gather(self, seq: int, layer: int, n: int | None = None):  # -> 2 × [h_kv, n, d_h]
        """K and V of seq's first n positions (default: all stored), copied out block by block."""
        self._check_seq(seq)
        _check_layer(layer, self.n_layers)
        n = self.lengths[seq] if n is None else n
        require_int(n=n)
        if n > self.written[seq][layer]:
            raise ValueError(f"gather(seq={seq}, layer={layer}, n={n}): only {self.written[seq][layer]} positions "
                             f"of sequence {seq} are written in layer {layer}")
        return self._gather(seq, layer, n)

    def _gather(self, seq, layer, n):  # gather() on checked input: -> 2 × [h_kv, n, d_h]
        xp = self.xp
        nb = math.ceil(n / self.block_size)
        idx = xp.asarray(self.tables[seq][:nb], dtype=xp.int64)  # [nb]
        out = []
        for pool in (self.k[layer], self.v[layer]):
            blocks = xp.take(pool, idx, axis=0)  # [nb, h_kv, bs, d_h]
            blocks = xp.permute_dims(blocks, (1, 0, 2, 3))  # [h_kv, nb, bs, d_h]
            flat = xp.reshape(blocks, (self.h_kv, nb * self.block_size, self.d_h))  # [h_kv, nb·bs, d_h]
            out.append(flat[:, :n, :])  # [h_kv, n, d_h]
        return out[0], out[1]

    def _check_new(self, layer, k_new, v_new, **lead):  # lead: b=… for the batch interface
        """k_new, v_new of one shape, ending in (h_kv, t, d_h) of this cache, checked before any block is taken."""
        _check_layer(layer, self.n_layers)
        _check_new_kv(k_new, v_new, **lead, h_kv=self.h_kv, t=None, d_h=self.d_h)

    # ------------------------------------------------------------ KVCache interface (batch)

    @property
    def length(self) -> int:
        """Positions stored in the batch's sequences (they advance together)."""
        return self.lengths[self.batch[0]] if self.batch else 0

    def update(self, layer: int, k_new, v_new):  # [b, h_kv, t, d_h] -> 2 × [b, h_kv, length + t, d_h]
        """Write the t new positions of `layer` for each sequence of the batch and return
        K, V of all positions so far, read back through the block tables."""
        self._check_new(layer, k_new, v_new, b=len(self.batch))  # the whole batch, once
        xp = self.xp
        n = self.length + k_new.shape[2]
        ks, vs = [], []
        for i, seq in enumerate(self.batch):
            self._write(seq, layer, k_new[i, ...], v_new[i, ...])
            k, v = self._gather(seq, layer, n)  # [h_kv, n, d_h] each
            ks.append(k)
            vs.append(v)
        return xp.stack(ks, axis=0), xp.stack(vs, axis=0)  # [b, h_kv, n, d_h]

    def advance(self, t: int):
        """All layers hold the t new positions: move every batch sequence on."""
        for seq in self.batch:  # all checked before any moves on
            self._check_extend(seq, t)
        for seq in self.batch:
            self.lengths[seq] += t  # extend(seq, t), already checked

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
    table = _check_paged(q, k_pool, v_pool, block_table, n_tokens, causal, scale)
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
        s = xp.where(allowed, qc @ xp.matrix_transpose(kb), -math.inf)  # [h, n_q, bs]
        m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # [h, n_q, 1]
        p = _exp_minus(s, m_new)  # [h, n_q, bs], 0 where masked (and for a row with no key yet)
        corr = _exp_minus(m, m_new)  # [h, n_q, 1], rescales what was summed so far
        l = l * corr + xp.sum(p, axis=-1, keepdims=True)
        o = o * corr + p @ vb  # [h, n_q, d_h]
        m = m_new
    out = o / xp.where(l == 0, 1.0, l)  # [h, n_q, d_h]; no key: o = 0 -> zeros (a NaN row stays NaN)
    return xp.astype(out, q.dtype)


def _check_paged(q, k_pool, v_pool, block_table, n_tokens, causal, scale):  # -> block ids as Python ints
    for name, t in (("q", q), ("k_pool", k_pool), ("v_pool", v_pool)):
        require_float(name, t)
    if q.ndim != 3:
        raise ValueError(f"q must be (h, n_q, d_h) for one sequence, got shape {tuple(q.shape)}")
    if k_pool.ndim != 4 or tuple(k_pool.shape) != tuple(v_pool.shape):
        raise ValueError(f"k_pool and v_pool must both be (n_blocks, h_kv, block_size, d_h), got shapes "
                         f"{tuple(k_pool.shape)} and {tuple(v_pool.shape)}")
    h, n_q, d_h = q.shape
    n_blocks, h_kv, bs, d_k = k_pool.shape
    if d_h == 0 or d_h != d_k:
        raise ValueError(f"q's head size d_h={d_h} must be ≥ 1 and equal the pool's d_h={d_k}")
    if h_kv == 0 or h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    require_int(n_tokens=n_tokens)
    require_bool(causal=causal)
    checks.optional_scale(scale)
    # the table is a host list (one per sequence, a few ids): an array is copied to one, which on a GPU waits
    table = to_numpy(block_table).tolist() if hasattr(block_table, "shape") else block_table
    if isinstance(table, (str, bytes)) or not isinstance(table, Sequence):
        raise TypeError(f"block_table must be a list of block ids, got {type(block_table).__name__}")
    bad = [b for b in table if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not 0 <= b < n_blocks]
    if bad:
        raise ValueError(f"block_table must hold integer block ids in [0, {n_blocks}), got {bad}")
    if n_q == 0:
        raise ValueError(f"q's query count n_q must be ≥ 1, got n_q={n_q}")
    if not n_q <= n_tokens <= len(table) * bs:  # the queries are the last n_q of the positions the table holds
        raise ValueError(f"n_tokens must lie in [n_q, blocks · block_size] = [{n_q}, {len(table)} · {bs}], "
                         f"got n_tokens={n_tokens}")
    return table if all(type(b) is int for b in table) else [int(b) for b in table]  # NumPy ints -> Python ints
