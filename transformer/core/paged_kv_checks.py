"""The refusals of `core/paged_kv.py`, one check per public function and method (`paged_kv_cache_METHOD`).
They look at the cache's state: its open sequences, their lengths, the free blocks of the pool."""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from ..backend import namespace, to_numpy
from ..require import require_bool, require_float, require_int, require_real
from .shared_checks import cache_fits, cache_layer, new_kv, written_ahead


def paged_kv_cache_init(self, n_layers, b, h_kv, n_max, d_h, *, block_size, n_blocks, dtype, xp):
    namespace(xp)  # an unknown backend name is refused first
    require_int(n_layers=n_layers, h_kv=h_kv, n_max=n_max, d_h=d_h, block_size=block_size, low=1)
    require_int(b=b)  # b = 0: sequences come one by one through add_sequence
    if n_blocks is None:
        n_blocks = int(b) * math.ceil(int(n_max) / int(block_size))  # 0 when b = 0: then n_blocks must be given
    require_int(n_blocks=n_blocks, low=1)
    cache_fits(f"a paged KV cache of {n_layers} layers × {n_blocks} blocks of {block_size} positions "
               f"(h_kv={h_kv}, d_h={d_h}) × 2", n_layers, int(n_blocks) * int(block_size), h_kv, d_h, dtype, xp)


def open_sequence(cache, seq):
    """seq must be the id of an open sequence of the paged cache."""
    if seq not in cache.tables:
        raise ValueError(f"unknown sequence id {seq!r}: open ones are {sorted(cache.tables)}")


def room_for(cache, seqs, n_tokens):
    """Every sequence of seqs can grow to n_tokens positions: within n_max, and the pool holds the
    blocks they still need (refused before any block is taken, so a failed write holds none)."""
    for seq in seqs:
        if n_tokens > cache.n_max:
            raise ValueError(f"KV cache overflow: sequence {seq} would hold {n_tokens} tokens > n_max={cache.n_max}")
    if sum(cache.blocks_needed(seq, n_tokens) for seq in seqs) > len(cache.free):
        raise RuntimeError(f"KV block pool exhausted: all {cache.n_blocks} blocks of {cache.block_size} "
                           "positions are in use; free finished sequences or allocate more blocks")


def paged_kv_cache_free_sequence(self, seq):
    open_sequence(self, seq)


def paged_kv_cache_write(self, seq, layer, k_new, v_new):
    open_sequence(self, seq)
    cache_layer(layer, self.n_layers)
    new_kv(k_new, v_new, into=self.dtype, h_kv=self.h_kv, t=None, d_h=self.d_h)
    room_for(self, [seq], self.lengths[seq] + k_new.shape[1])


def paged_kv_cache_extend(self, seq, t):
    open_sequence(self, seq)
    written_ahead(f"extend(seq={seq}, t={t})", t, self.lengths[seq], self.written[seq], f"sequence {seq}",
                  "write(seq, layer, k, v)")


def paged_kv_cache_gather(self, seq, layer, n):
    open_sequence(self, seq)
    cache_layer(layer, self.n_layers)
    n = self.lengths[seq] if n is None else n
    require_int(n=n)
    if n > self.written[seq][layer]:
        raise ValueError(f"gather(seq={seq}, layer={layer}, n={n}): only {self.written[seq][layer]} positions "
                         f"of sequence {seq} are written in layer {layer}")


def paged_kv_cache_update(self, layer, k_new, v_new):
    cache_layer(layer, self.n_layers)
    new_kv(k_new, v_new, into=self.dtype, b=len(self.batch), h_kv=self.h_kv, t=None, d_h=self.d_h)  # the batch, once
    room_for(self, self.batch, self.length + k_new.shape[2])


def paged_kv_cache_advance(self, t):
    for seq in self.batch:  # all checked before any moves on
        paged_kv_cache_extend(self, seq, t)


def paged_attention(q, k_pool, v_pool, block_table, n_tokens, *, causal, scale):
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
    if scale is not None:  # None: 1/√d_h
        require_real(scale=scale)
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
