"""Counting what attention costs in slow memory: IO formulas, counters and peak bytes (notes 001, 002).

A GPU has a large slow memory (HBM, tens of GB) and a small fast one next to the
compute units (SRAM, tens of MB in total, about 100–200 KB per streaming
multiprocessor). Attention is memory-bound: its run time is set by how many
elements cross from HBM to SRAM and back, not by its FLOPs. This module states
that traffic as formulas, in *elements* (multiply by the item size for bytes):

    standard attention   Θ(n·d + n²)       writes S and P (n × n) to HBM and reads them back
    FlashAttention       Θ(n²·d² / M)      with a fast memory of M elements; never writes n × n

The tiled loops in `tiled.py` and `backward.py` carry an `IOCounter` that adds up every element
they load and store; the tests check it equals the exact formulas below.
All counts are for every (batch, query head) pair, as if each ran its own kernel,
as on a GPU: with grouped-query attention a K/V tile is loaded once per query head.

Peak memory is the other half: `measure_peak_bytes` runs a function under
`tracemalloc` (NumPy reports its buffers to it) and returns the highest extra
allocation, to set beside the `*_peak_bytes` formulas.
"""
from __future__ import annotations

import math
import tracemalloc
from dataclasses import dataclass, field

from . import io_count_checks as checks
from ..require import checked_by

__all__ = [
    "IOCounter", "paper_block_sizes", "standard_attention_io", "flash1_io", "flash2_io",
    "naive_io_bound", "flash_io_bound", "visible_key_tiles",
    "standard_attention_peak_bytes", "flash_attention_peak_bytes", "measure_peak_bytes",
    "measure_peak_bytes_gpu",
]


# --- the instrument ----------------------------------------------------------------------------

@dataclass
class IOCounter:
    """Elements loaded from and stored to slow memory (HBM), per array name.

    >>> io = IOCounter(); io.load("Q", 64); io.store("O", 64); io.total
    128
    """
    loads: dict = field(default_factory=dict)  # name -> elements read from HBM
    stores: dict = field(default_factory=dict)  # name -> elements written to HBM

    def load(self, name: str, elements: int):
        self.loads[name] = self.loads.get(name, 0) + int(elements)

    def store(self, name: str, elements: int):
        self.stores[name] = self.stores.get(name, 0) + int(elements)

    @property
    def total_loads(self) -> int:
        return sum(self.loads.values())

    @property
    def total_stores(self) -> int:
        return sum(self.stores.values())

    @property
    def total(self) -> int:
        return self.total_loads + self.total_stores


# --- block sizes from the fast-memory size -------------------------------------------------------

@checked_by(checks.paper_block_sizes)
def paper_block_sizes(M: int, d_h: int) -> tuple[int, int]:  # -> (Br, Bc)
    """FlashAttention's choice for a fast memory of M elements: Bc = ⌈M / 4d⌉, Br = min(Bc, d).

    Four blocks of Bc × d (K_j, V_j, and Q_i, O_i of Br ≤ Bc rows) then fit in M.
    >>> paper_block_sizes(100_000 // 4, 64)  # ~100 KB of float32
    (64, 98)
    """
    Bc = math.ceil(M / (4 * d_h))
    return min(Bc, d_h), Bc


# --- IO formulas (elements, all heads) -----------------------------------------------------------

@checked_by(checks.standard_attention_io)
def standard_attention_io(n_q: int, n_k: int, d_h: int, heads: int = 1) -> dict:
    """Standard attention, three passes through HBM (FlashAttention paper, Algorithm 0):

        read Q, K      → write S = Q Kᵀ          n_q·d + n_k·d  |  n_q·n_k
        read S         → write P = softmax(S)    n_q·n_k        |  n_q·n_k
        read P, V      → write O = P V           n_q·n_k + n_k·d|  n_q·d
    """
    loads = n_q * d_h + 2 * n_k * d_h + 2 * n_q * n_k
    stores = 2 * n_q * n_k + n_q * d_h
    return {"loads": heads * loads, "stores": heads * stores, "total": heads * (loads + stores)}


@checked_by(checks.visible_key_tiles)
def visible_key_tiles(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool) -> list[int]:
    """For each query block i, how many key blocks it computes (the rest are skipped).

    Query row r sits at position r + (n_k - n_q) (queries are the last n_q positions).
    Query block i ends at position p_i = r1 - 1 + n_k - n_q; key block j starts at
    j·Bc, so blocks j = 0 … ⌊p_i / Bc⌋ are needed: ⌊p_i / Bc⌋ + 1 of them (none if p_i < 0).
    """
    Tr, Tc = math.ceil(n_q / block_q), math.ceil(n_k / block_k)
    if not causal:
        return [Tc] * Tr
    counts = []
    for i in range(Tr):
        p = min(n_q, (i + 1) * block_q) - 1 + n_k - n_q  # position of the block's last query
        counts.append(0 if p < 0 else min(Tc, p // block_k + 1))
    return counts


def _rows(n: int, block: int) -> list[int]:  # rows in each block: [B, B, …, remainder]
    return [min(block, n - s) for s in range(0, n, block)]


@checked_by(checks.flash1_io)
def flash1_io(n_q, n_k, d_h, block_q, block_k, causal=False, heads=1) -> dict:
    """FlashAttention-1 order (outer loop over K/V blocks), paper Algorithm 1, exactly:

        initialise O, l, m in HBM                       stores n_q·(d + 2)
        each K_j, V_j loaded once                       loads  2·n_k·d
        each computed tile (i, j): read Q_i, O_i, l_i, m_i, write O_i, l_i, m_i
                                                        loads  Br_i·(2d + 2), stores Br_i·(d + 2)
    Non-causal: Tc tiles per query block, so Tc·n_q·(3d + 4) ≈ n²d²/M for Bc ≈ M/4d.
    """
    tiles = visible_key_tiles(n_q, n_k, block_q, block_k, causal)  # checked at this door
    rows_x_tiles = sum(r * t for r, t in zip(_rows(n_q, block_q), tiles))  # Σ_i Br_i · (tiles of i)
    loads = 2 * n_k * d_h + rows_x_tiles * (2 * d_h + 2)
    stores = n_q * (d_h + 2) + rows_x_tiles * (d_h + 2)
    return {"loads": heads * loads, "stores": heads * stores, "total": heads * (loads + stores)}


@checked_by(checks.flash2_io)
def flash2_io(n_q, n_k, d_h, block_q, block_k, causal=False, heads=1) -> dict:
    """FlashAttention-2 order (outer loop over Q blocks), exactly:

        each Q_i loaded once, O_i and L_i = m + log l stored once    n_q·d | n_q·(d + 1)
        query block i streams the first t_i key blocks: K and V      2·d·min(n_k, t_i·Bc)
    Non-causal: Tr·2·n_k·d ≈ 2n²d/Br, again Θ(n²d²/M) for Br ≈ M/4d.
    """
    tiles = visible_key_tiles(n_q, n_k, block_q, block_k, causal)  # checked at this door
    keys = sum(min(n_k, t * block_k) for t in tiles)  # Σ_i keys streamed by query block i
    loads = n_q * d_h + 2 * d_h * keys
    stores = n_q * (d_h + 1)
    return {"loads": heads * loads, "stores": heads * stores, "total": heads * (loads + stores)}


@checked_by(checks.naive_io_bound)
def naive_io_bound(n: int, d_h: int) -> int:
    """The order of standard attention's HBM traffic: n·d + n² (Theorem 2 of the paper)."""
    return n * d_h + n * n


@checked_by(checks.flash_io_bound)
def flash_io_bound(n: int, d_h: int, M: int) -> float:
    """The order of FlashAttention's HBM traffic: n²·d² / M (Theorem 2 of the paper)."""
    return n * n * d_h * d_h / M


# --- peak memory formulas (bytes) -----------------------------------------------------------------

@checked_by(checks.standard_attention_peak_bytes)
def standard_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, causal=False) -> int:
    """Peak extra bytes of `tiled.standard_attention`: two n_q × n_k buffers per head.

    At the peak S and exp(S - m) are alive together (and S - m needs old and new S for a
    moment), with the row max m (heads·n_q). A causal mask adds one n_q × n_k boolean
    (1 byte, shared by all heads). The output, O(n·d), is made after S is freed.
    """
    heads = b * h
    scores = 2 * heads * n_q * n_k * itemsize  # S and P
    mask = n_q * n_k if causal else 0  # True = may attend, one byte per pair
    return scores + mask + heads * n_q * itemsize  # + m


@checked_by(checks.flash_attention_peak_bytes)
def flash_attention_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, out_itemsize=None,
                               h_kv=None) -> int:
    """Peak extra bytes of the tiled forward (FA2 order): no n × n term at all.

        output O and log-sum-exp L (written in place, tile by tile)    heads·n_q·(d + 1)
        four Br × Bc tiles at once: S_ij, S_ij - m, the new P̃_ij,
        and the previous step's P̃_ij, still bound until replaced       4·heads·Br·Bc
        (three when a single key block covers n_k: there is no previous step)
        Q_i·scale, O_i                                                 2·heads·Br·d
        K_j, V_j (only the h_kv key/value heads: GQA shares them)      2·b·h_kv·Bc·d
    in the compute dtype's item size `itemsize` (4 for float16 inputs, accumulated in
    float32). out_itemsize (the input's, if smaller): the output is cast back at the end,
    after the last tile is freed, so the copy competes with the tiles instead of adding to them.
    h_kv defaults to h (multi-head attention).
    """
    h_kv = h if h_kv is None else h_kv
    heads = b * h
    Br, Bc = min(block_q, n_q), min(block_k, n_k)
    out = heads * n_q * (d_h + 1)
    live_tiles = 4 if n_k > Bc else 3
    tiles = live_tiles * heads * Br * Bc + 2 * heads * Br * d_h + 2 * b * h_kv * Bc * d_h
    cast = heads * n_q * d_h * out_itemsize if out_itemsize and out_itemsize != itemsize else 0
    return out * itemsize + max(tiles * itemsize, cast)


# --- the measurement --------------------------------------------------------------------------------

def measure_peak_bytes(fn, *args, **kwargs):  # -> (fn's result, peak extra bytes)
    """Run fn(*args, **kwargs) and return (result, the peak of newly allocated bytes).

    Host (NumPy) memory is measured with `tracemalloc`, which NumPy informs of every
    buffer it allocates; bytes alive before the call are not counted, the result is.
    GPU (CuPy) memory: `measure_peak_bytes_gpu`.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        result = fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak - base


def measure_peak_bytes_gpu(fn, *args, **kwargs):  # -> (fn's result, peak extra bytes on the GPU)
    """The same measurement for CuPy arrays: the peak of bytes handed out by CuPy's memory pool.

    A memory hook sees every block the pool hands out (malloc) and takes back (free), with
    its rounded size, so the running total and its peak are the device bytes the call held
    beyond what was alive before it. The GPU work is synchronised before reading the peak.
    """
    from ..backend import import_cupy

    cupy = import_cupy()

    class PeakHook(cupy.cuda.MemoryHook):
        name = "PeakHook"

        def __init__(self):
            self.current = self.peak = 0

        def malloc_postprocess(self, **kw):
            self.current += kw["mem_size"]
            self.peak = max(self.peak, self.current)

        def free_postprocess(self, **kw):
            self.current -= kw["mem_size"]

    cupy.cuda.Device().synchronize()
    hook = PeakHook()
    with hook:
        result = fn(*args, **kwargs)
        cupy.cuda.Device().synchronize()
    return result, hook.peak
