"""The refusals of `flash/tiled.py`, one check per public function and method (`flash_trace_METHOD`)."""
from __future__ import annotations

from ..core import shared_checks as core_checks
from ..require import require_bool
from .shared_checks import io_counter, packed_doc, tile_options, tiled_shapes


def flash_trace_row_history(self, r):
    if not 0 <= r < self.n_q:
        raise ValueError(f"row r must lie in [0, {self.n_q}), got r={r}")


def flash_trace_history(self, name):
    if name not in ("m", "l"):
        raise ValueError(f"history name must be 'm' or 'l', got {name!r}")


def standard_attention(q, k, v, *, causal, scale, return_lse, io):
    require_bool(return_lse=return_lse)
    tiled_shapes(q, k, v)
    tile_options(causal)
    core_checks.optional_scale(scale)
    io_counter(io)


def flash_attention(q, k, v, *, causal, block_q, block_k, return_lse, scale, version, io, trace, doc):
    require_bool(return_lse=return_lse)
    tiled_shapes(q, k, v)
    b, h, n_q, _ = q.shape
    tile_options(causal, block_q, block_k)
    core_checks.optional_scale(scale)
    if isinstance(version, bool) or version not in (1, 2):  # True == 1
        raise ValueError(f"version must be 1 (FlashAttention-1 loop order) or 2, got version={version!r}")
    packed_doc(doc, b, n_q, k.shape[2])
    io_counter(io)
    if trace is not None and not all(hasattr(trace, f) for f in ("batch", "head", "steps")):
        raise TypeError(f"trace must be None or a T.FlashTrace (it records the tiles), got {type(trace).__name__}")
    if trace is not None and not (0 <= trace.batch < b and 0 <= trace.head < h):
        raise ValueError(f"trace watches batch={trace.batch}, head={trace.head}, outside b={b}, h={h}")
