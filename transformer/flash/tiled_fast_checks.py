"""The refusals of `flash/tiled_fast.py`, one check per public function and of the same name."""
from __future__ import annotations

import numpy as np

from ..core import shared_checks as core_checks
from ..require import require_bool, require_int
from .io_count_checks import flash_attention_peak_bytes
from .shared_checks import tile_options, tiled_shapes


def cache_bytes(level, root):
    require_int(level=level, low=1)


def fast_block_size(d_h, itemsize, l2):
    require_int(d_h=d_h, itemsize=itemsize, low=1)
    if l2 is not None:
        require_int(l2=l2, low=1)


def flash_attention_fast_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, threads, causal,
                                    h_kv, out_itemsize):
    flash_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, out_itemsize, h_kv)
    require_int(n_q=n_q, low=1)  # its tiles of min(block_q, n_q) rows: n_q = 0 divided by 0
    require_int(threads=threads, low=1)
    require_bool(causal=causal)


def flash_attention_fast(q, k, v, *, causal, block_q, block_k, return_lse, scale, threads):
    require_bool(return_lse=return_lse)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, np.ndarray):
            raise TypeError(f"flash_attention_fast runs on NumPy arrays on the CPU, {name} is a {type(t).__name__}: "
                            "use flash_attention (any backend) or flash_attention_cuda")
    tiled_shapes(q, k, v)
    tile_options(causal, block_q, block_k)
    core_checks.optional_scale(scale)
    if threads is not None:
        require_int(threads=threads, low=1)
