"""The refusals of `flash/io_count.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..core.shared_checks import fits_in_memory
from ..require import require_bool, require_int


def paper_block_sizes(M, d_h):
    require_int(M=M, d_h=d_h, low=1)


def standard_attention_io(n_q, n_k, d_h, heads):
    require_int(n_q=n_q, n_k=n_k, d_h=d_h, heads=heads)


def visible_key_tiles(n_q, n_k, block_q, block_k, causal):
    require_int(n_q=n_q, n_k=n_k)
    require_int(block_q=block_q, block_k=block_k, low=1)
    require_bool(causal=causal)
    Tr = -(-int(n_q) // int(block_q))  # a count a query block, in a list: n_q=2**40 ran out of memory
    fits_in_memory(f"a list of Tr = {Tr:,} query blocks' counts", 36 * Tr)


def flash1_io(n_q, n_k, d_h, block_q, block_k, causal, heads):
    require_int(d_h=d_h, heads=heads)
    visible_key_tiles(n_q, n_k, block_q, block_k, causal)


def flash2_io(n_q, n_k, d_h, block_q, block_k, causal, heads):
    flash1_io(n_q, n_k, d_h, block_q, block_k, causal, heads)


def naive_io_bound(n, d_h):
    require_int(n=n, d_h=d_h)


def flash_io_bound(n, d_h, M):
    require_int(n=n, d_h=d_h)
    require_int(M=M, low=1)


def standard_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, causal):
    require_int(b=b, h=h, n_q=n_q, n_k=n_k, d_h=d_h, itemsize=itemsize)
    require_bool(causal=causal)  # "no" is truthy


def flash_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, out_itemsize, h_kv):
    h_kv = h if h_kv is None else h_kv  # multi-head attention unless given
    require_int(b=b, h=h, h_kv=h_kv, n_q=n_q, n_k=n_k, d_h=d_h, itemsize=itemsize)
    require_int(block_q=block_q, block_k=block_k, low=1)
