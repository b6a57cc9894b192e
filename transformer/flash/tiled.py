"""FlashAttention's forward pass from the ground up (notes 000 §3.2, 001, 002).

Standard attention writes the n × n scores S = Q Kᵀ/√d_h and probabilities
P = softmax(S) to slow memory and reads them back: O(n²) memory, and its speed is
set by memory traffic. FlashAttention never forms S or P whole. It cuts Q into
Tr blocks of Br rows and K, V into Tc blocks of Bc rows, and keeps per query row
a running maximum m and a running sum l of the softmax (the online softmax,
`core/online_softmax.py`). When a new block of scores raises the maximum, the earlier
partial sums are rescaled by e^(m_old - m_new), so after the last block the result
equals softmax(S) V exactly.

Contents, read top-down:
    the tiles           `tile_kind`: which tiles are computed, masked or skipped
    teaching trace      `FlashTrace` / `TileStep`: m, l and the fate of every tile
    standard attention  `standard_attention` (three passes, counted) — the slow path
    tiled forward       `flash_attention(..., version=1 | 2)` — the fast path
The backward pass, by recomputation, is in `backward.py` beside this file.

Shapes are those of `scaled_dot_product_attention`: q (b, h, n_q, d_h), k and v
(b, h_kv, n_k, d_h); query head i reads key/value head i // (h // h_kv). Inside, q
is viewed as (b, h_kv, g, n_q, d_h) with g = h // h_kv and k, v as (b, h_kv, 1, n_k, d_h),
so the heads of a group share their K/V tile by broadcasting instead of copying it.
`...` in shape comments stands for those leading (b, h_kv, g) axes.
Causal: queries are the last n_q positions (query row r sits at r + n_k - n_q), as
in `masks.causal_mask`; with n_q > n_k the first rows see no key and return zeros.
Packed rows (`packing.pack_documents`): doc (b, n) gives each position's document, and a
query reads only keys of its own document (`masks.document_mask`); tiles that hold no
such pair are skipped like the tiles above a causal diagonal.
Each public function checks its input at the door (`tiled_checks.py`, same name).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import tiled_checks as checks
from ..backend import compute_dtype, get_xp, to_numpy
from ..core.masks import same_document
from ..core.online_softmax import exp_minus, merge_softmax_stats
from ..require import checked_by
from .io_count import IOCounter

__all__ = [
    "standard_attention", "flash_attention", "tile_kind", "tile_mask", "tile_plan", "TileStep", "FlashTrace",
    "DEFAULT_BLOCK", "block_sizes", "packed_docs", "grouped",
]

# A 128 × 128 float32 score tile is 64 KiB per head: it stays in a CPU core's L2 cache, and is
# large enough that the Python loop over tiles costs little next to the matrix products.
DEFAULT_BLOCK = 128

# --- the tiles: which are needed, which are masked ---------------------------------------------

def tile_kind(r0: int, r1: int, c0: int, c1: int, offset: int, causal: bool) -> str:
    """Classify the tile of query rows r0:r1 and key columns c0:c1 ("full", "diagonal", "skipped").

    Query row r sits at position r + offset and may see keys j ≤ r + offset.
    skipped:  even the last query comes before the first key, c0 > r1 - 1 + offset
    full:     even the first query sees the last key, c1 - 1 ≤ r0 + offset: no mask needed
    diagonal: the causal boundary crosses the tile, which is masked inside
    """
    if not causal:
        return "full"
    if c0 > r1 - 1 + offset:
        return "skipped"
    if c1 - 1 <= r0 + offset:
        return "full"
    return "diagonal"


def tile_mask(xp, r0, r1, c0, c1, offset):  # -> [Br, Bc], True = may attend
    i = xp.arange(r0, r1)[:, None] + offset  # [Br, 1] query positions
    j = xp.arange(c0, c1)[None, :]  # [1, Bc] key positions
    return j <= i  # [Br, Bc]


def _doc_tile_mask(xp, doc, r0, r1, c0, c1, causal):  # [b, n] -> [b, Br, Bc], True = may attend
    """`masks.document_mask`'s tile: same document, not padding, and j ≤ i when causal."""
    keep = same_document(doc[:, r0:r1], doc[:, c0:c1])  # [b, Br, Bc], doc checked at the door
    return keep & tile_mask(xp, r0, r1, c0, c1, 0)[None, :, :] if causal else keep


def tile_plan(xp, r0, r1, c0, c1, offset, causal, docs):  # -> kind, mask [..., Br, Bc] or None
    """What a tile needs: its kind ("full", "diagonal" = masked inside, "skipped") and, when
    masked inside, the mask to apply to S_ij. docs: None, or (doc on the host as NumPy, doc
    on the device) for packed rows; the host copy decides, so no device value is read back."""
    if docs is None:
        kind = tile_kind(r0, r1, c0, c1, offset, causal)
        return kind, (tile_mask(xp, r0, r1, c0, c1, offset) if kind == "diagonal" else None)
    host, dev = docs
    keep = _doc_tile_mask(np, host, r0, r1, c0, c1, causal)  # [b, Br, Bc] on the host
    if not keep.any():
        return "skipped", None  # no query of this block shares a document with a key of that one
    if keep.all():
        return "full", None
    return "diagonal", _doc_tile_mask(xp, dev, r0, r1, c0, c1, causal)[:, None, None, :, :]  # [b, 1, 1, Br, Bc]


# --- the teaching trace ----------------------------------------------------------------------------

@dataclass
class TileStep:
    """One step of the tiled loop: tile (i, j) of the Tr × Tc grid, in execution order."""
    step: int  # 0, 1, 2, … in the order the loop visited the tiles
    i: int  # query block (row of the grid), rows r0:r1 = `rows`
    j: int  # key/value block (column of the grid), columns c0:c1 = `cols`
    kind: str  # "full", "diagonal" (masked inside) or "skipped" (never loaded or computed)
    rows: tuple  # (r0, r1)
    cols: tuple  # (c0, c1)
    m: np.ndarray | None  # [r1 - r0] running row max after the step (watched head); None if skipped
    l: np.ndarray | None  # [r1 - r0] running row sum after the step; None if skipped
    loads: int  # elements read from HBM during the step (all heads)
    stores: int  # elements written to HBM during the step (all heads)


@dataclass
class FlashTrace:
    """A record of a tiled forward pass for plots and animations.

    Pass one to `flash_attention(..., trace=FlashTrace(batch=0, head=0))`; the loop
    fills `steps` (one `TileStep` per visited tile) and the run's parameters below.
    `m` and `l` are copied for the single watched (batch, head) pair only.

        grid()          [Tr, Tc] int: the step at which each tile was computed, -1 if skipped
        kinds()         [Tr, Tc] str: "full" / "diagonal" / "skipped"
        computed()      [Tr, Tc] bool: the tile was loaded and computed
        partial()       [Tr, Tc] bool: computed with a causal mask inside (the diagonal)
        history("m")    [n_steps, n_q] the running m of every row after each step
                        (NaN before the row's first tile); history("l") likewise
        row_history(r)  (j [T], m [T], l [T]): query row r's m and l after each key block it saw
    Each step's `loads`/`stores` count the tile's own traffic (K_j, V_j for version 2;
    Q_i, O_i, l_i, m_i for version 1); once-per-block traffic (Q_i and the final O_i in
    version 2, K_j and V_j in version 1) is only in the run's `IOCounter`.
    """
    batch: int = 0
    head: int = 0
    version: int = 0
    causal: bool = False
    n_q: int = 0
    n_k: int = 0
    Br: int = 0
    Bc: int = 0
    Tr: int = 0
    Tc: int = 0
    steps: list = field(default_factory=list)

    def grid(self) -> np.ndarray:  # -> [Tr, Tc]
        g = np.full((self.Tr, self.Tc), -1, dtype=np.int64)
        for s in self.steps:
            if s.kind != "skipped":
                g[s.i, s.j] = s.step
        return g

    def kinds(self) -> np.ndarray:  # -> [Tr, Tc]
        k = np.full((self.Tr, self.Tc), "skipped", dtype=object)
        for s in self.steps:
            k[s.i, s.j] = s.kind
        return k

    def computed(self) -> np.ndarray:  # -> [Tr, Tc] bool
        return self.grid() >= 0

    def partial(self) -> np.ndarray:  # -> [Tr, Tc] bool
        return self.kinds() == "diagonal"

    @checked_by(checks.flash_trace_row_history)
    def row_history(self, r: int):  # -> j [T], m [T], l [T]
        seen = [s for s in self.steps if s.kind != "skipped" and s.rows[0] <= r < s.rows[1]]
        j = np.array([s.j for s in seen], dtype=np.int64)
        m = np.array([s.m[r - s.rows[0]] for s in seen], dtype=np.float64)
        l = np.array([s.l[r - s.rows[0]] for s in seen], dtype=np.float64)
        return j, m, l

    @checked_by(checks.flash_trace_history)
    def history(self, name: str = "m") -> np.ndarray:  # -> [n_steps, n_q]
        h = np.full((len(self.steps), self.n_q), np.nan)
        row = np.full(self.n_q, np.nan)
        for t, s in enumerate(self.steps):
            if s.kind != "skipped":
                row[s.rows[0]:s.rows[1]] = getattr(s, name)
            h[t] = row
        return h


def _watch(trace, x, g):  # [b, h_kv, g, Br, 1] -> [Br] as NumPy, for the watched head
    return to_numpy(x[trace.batch, trace.head // g, trace.head % g, :, 0]).copy()


# --- what the formulas need from their arguments ---------------------------------------------------------

def block_sizes(block_q, block_k, n_q: int, n_k: int) -> tuple[int, int]:  # -> (Br, Bc)
    """The tile sizes: block_q and block_k (None: `DEFAULT_BLOCK`), never more than the sequence."""
    sizes = [DEFAULT_BLOCK if bsz is None else bsz for bsz in (block_q, block_k)]
    return max(1, min(sizes[0], n_q)), max(1, min(sizes[1], n_k))


def packed_docs(doc):  # [b, n] -> None or (host NumPy [b, n], device [b, n])
    """Packed rows' document indices twice: on the host, which decides each tile's kind without
    reading a device value back, and as given, for the masks applied on the device."""
    return None if doc is None else (np.asarray(to_numpy(doc)), doc)


def grouped(q, k, v):  # [b,h,n_q,d_h], [b,h_kv,n_k,d_h] ×2 -> [b,h_kv,g,n_q,d_h], [b,h_kv,1,n_k,d_h] ×2
    """View query heads as h_kv groups of g so each group broadcasts against its K/V head."""
    xp = get_xp(q, k, v)
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    q5 = xp.reshape(q, (b, h_kv, h // h_kv, n_q, d_h))  # head i = group i // g, member i % g
    k5 = xp.reshape(k, (b, h_kv, 1, n_k, d_h))
    v5 = xp.reshape(v, (b, h_kv, 1, n_k, d_h))
    return q5, k5, v5


# --- standard attention (the slow path, counted) ----------------------------------------------------

@checked_by(checks.standard_attention)
def standard_attention(q, k, v, *, causal=False, scale=None, return_lse=False, io=None):
    """softmax(Q Kᵀ/√d_h) V the standard way: S and P are whole n_q × n_k arrays in slow memory.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) -> out (b, h, n_q, d_h) [, lse (b, h, n_q)].
    The three passes of the paper's Algorithm 0 are counted in `io` (an IOCounter).
    Peak memory is two n_q × n_k buffers per head (see io_count.standard_attention_peak_bytes).
    """
    io = IOCounter() if io is None else io
    xp = get_xp(q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    b, h, n_q, d_h = q.shape
    n_k = k.shape[2]
    heads = b * h
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    Q, K, V = (xp.astype(t, ct, copy=False) for t in grouped(q, k, v))
    # pass 1: read Q, K; write S
    S = (Q * scale) @ K.mT  # [..., n_q, n_k] S = Q Kᵀ/√d_h
    io.load("Q", heads * n_q * d_h), io.load("K", heads * n_k * d_h), io.store("S", heads * n_q * n_k)
    if causal:
        S = xp.where(tile_mask(xp, 0, n_q, 0, n_k, n_k - n_q), S, -math.inf)  # [..., n_q, n_k]
    # pass 2: read S; write P = softmax(S)
    m = xp.max(S, axis=-1, keepdims=True)  # [..., n_q, 1] row max
    S = S - xp.where(m == -math.inf, 0.0, m)  # [..., n_q, n_k] shifted so the largest is 0 (NaN/+inf stay)
    P = xp.exp(S)  # [..., n_q, n_k] unnormalised probabilities
    del S
    l = xp.sum(P, axis=-1, keepdims=True)  # [..., n_q, 1] row sums
    io.load("S", heads * n_q * n_k), io.store("P", heads * n_q * n_k)
    # pass 3: read P, V; write O (the division by l is the softmax's, applied to the smaller side)
    O = (P @ V) / xp.where(l == 0, 1.0, l)  # [..., n_q, d_h]
    io.load("P", heads * n_q * n_k), io.load("V", heads * n_k * d_h), io.store("O", heads * n_q * d_h)
    out = xp.astype(xp.reshape(O, (b, h, n_q, d_h)), in_dtype, copy=False)  # [b, h, n_q, d_h]
    if not return_lse:
        return out
    return out, xp.reshape(_lse(m, l), (b, h, n_q))


def _lse(m, l):  # [..., 1], [..., 1] -> [..., 1]
    """log Σ e^s = m + log l; -inf for a row that saw no key (l = 0), NaN for a NaN row."""
    xp = get_xp(m, l)
    return xp.where(l == 0, -math.inf, m + xp.log(xp.where(l == 0, 1.0, l)))


# --- the tiled forward --------------------------------------------------------------------------

@checked_by(checks.flash_attention)
def flash_attention(q, k, v, *, causal=False, block_q=None, block_k=None, return_lse=False,
                    scale=None, version=2, io=None, trace=None, doc=None):
    """Exact attention, tile by tile, without ever forming the n_q × n_k matrix.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) -> out (b, h, n_q, d_h) [, lse (b, h, n_q)]
    block_q = Br query rows and block_k = Bc key rows per tile (default 128; any size,
    the last block may be shorter). version=2 (default) loops over query blocks outside
    (FlashAttention-2), version=1 over key/value blocks outside (FlashAttention-1).
    causal=True skips whole tiles above the diagonal. float16 inputs are accumulated in
    float32; out has the input dtype, lse = log Σ_j e^(s_ij) (float32 or float64).
    io: an `IOCounter` to add the HBM loads/stores to. trace: a `FlashTrace` to fill.
    doc: (b, n) document index of each position of packed rows (-1 = padding): a query
    reads only keys of its own document, as under `document_mask(doc, causal=causal)`,
    and tiles between documents are skipped. Padding rows return zeros and lse = -inf.

    >>> import numpy as np
    >>> from transformer import scaled_dot_product_attention as sdpa
    >>> x = np.random.default_rng(0).standard_normal((1, 2, 5, 4))
    >>> bool(np.allclose(flash_attention(x, x, x, block_q=2, block_k=3), sdpa(x, x, x)))
    True
    """
    b, h, n_q, d_h = q.shape
    n_k = k.shape[2]
    Br, Bc = block_sizes(block_q, block_k, n_q, n_k)
    docs = packed_docs(doc)
    xp = get_xp(q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    io = IOCounter() if io is None else io
    if trace is not None:
        trace.version, trace.causal, trace.n_q, trace.n_k = version, causal, n_q, n_k
        trace.Br, trace.Bc, trace.Tr, trace.Tc = Br, Bc, math.ceil(n_q / Br), math.ceil(n_k / Bc)
        trace.steps.clear()
    kernel = _flash2_forward if version == 2 else _flash1_forward
    O, L = kernel(*grouped(q, k, v), scale, causal, Br, Bc, ct, io, trace, docs)
    out = xp.astype(xp.reshape(O, (b, h, n_q, d_h)), in_dtype, copy=False)  # [b, h, n_q, d_h]
    if not return_lse:
        return out
    return out, xp.reshape(L, (b, h, n_q))  # [b, h, n_q]


def _flash2_forward(Q, K, V, scale, causal, Br, Bc, ct, io, trace, docs=None):
    # [..., n_q, d_h], [b, h_kv, 1, n_k, d_h] ×2 -> O [..., n_q, d_h], L [..., n_q, 1]
    """FlashAttention-2 order: each query block stays in fast memory while all K/V blocks stream by."""
    xp = get_xp(Q, K, V)
    *lead, n_q, d_h = Q.shape
    n_k = K.shape[-2]
    heads = math.prod(lead)  # b·h: every (batch, query head) pair is one kernel's work
    offset = n_k - n_q  # query row r sits at position r + offset
    Tr, Tc = math.ceil(n_q / Br), math.ceil(n_k / Bc)
    O = xp.zeros((*lead, n_q, d_h), dtype=ct)  # [..., n_q, d_h] output in HBM
    L = xp.zeros((*lead, n_q, 1), dtype=ct)  # [..., n_q, 1] log-sum-exp in HBM, for the backward
    step = 0
    for i in range(Tr):
        r0, r1 = i * Br, min(n_q, (i + 1) * Br)
        Q_i = xp.astype(Q[..., r0:r1, :], ct) * scale  # [..., Br, d_h] load Q_i; fold in 1/√d_h once
        io.load("Q", heads * (r1 - r0) * d_h)
        O_i = xp.zeros((*lead, r1 - r0, d_h), dtype=ct)  # [..., Br, d_h] unnormalised output
        l_i = xp.zeros((*lead, r1 - r0, 1), dtype=ct)  # [..., Br, 1] running sum  Σ e^(s - m)
        m_i = xp.full((*lead, r1 - r0, 1), -math.inf, dtype=ct)  # [..., Br, 1] running max
        for j in range(Tc):
            c0, c1 = j * Bc, min(n_k, (j + 1) * Bc)
            kind, mask = tile_plan(xp, r0, r1, c0, c1, offset, causal, docs)
            before = io.total_loads, io.total_stores
            if kind != "skipped":
                K_j = xp.astype(K[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load K_j
                V_j = xp.astype(V[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load V_j
                io.load("K", heads * (c1 - c0) * d_h), io.load("V", heads * (c1 - c0) * d_h)
                S_ij = Q_i @ K_j.mT  # [..., Br, Bc] S_ij = Q_i K_jᵀ/√d_h
                if mask is not None:  # the causal boundary or a document boundary crosses the tile
                    S_ij = xp.where(mask, S_ij, -math.inf)
                # online_attention_update's step, written inline so O_i's old buffer is freed as it is replaced
                m_new = xp.maximum(m_i, xp.max(S_ij, axis=-1, keepdims=True))  # [..., Br, 1] m = max(m, rowmax S_ij)
                P_ij = exp_minus(S_ij, m_new)  # [..., Br, Bc] P̃_ij = e^(S_ij - m_new), each ≤ 1
                alpha = exp_minus(m_i, m_new)  # [..., Br, 1] e^(m_old - m_new): shrink what came before
                l_i = alpha * l_i + xp.sum(P_ij, axis=-1, keepdims=True)  # l = α·l + rowsum P̃_ij
                O_i = alpha * O_i + P_ij @ V_j  # [..., Br, d_h] O = α·O + P̃_ij V_j
                m_i = m_new
            if trace is not None:
                _record(trace, step, i, j, kind, (r0, r1), (c0, c1), m_i, l_i, io, before, Q.shape[2])
            step += 1
        # after the last key block: normalise once, O_i = O_i / l_i, and keep L_i = m_i + log l_i
        O[..., r0:r1, :] = O_i / xp.where(l_i == 0, 1.0, l_i)  # store O_i; a row that saw nothing stays 0
        L[..., r0:r1, :] = _lse(m_i, l_i)  # store L_i
        io.store("O", heads * (r1 - r0) * d_h), io.store("L", heads * (r1 - r0))
    return O, L


def _flash1_forward(Q, K, V, scale, causal, Br, Bc, ct, io, trace, docs=None):
    # [..., n_q, d_h], [b, h_kv, 1, n_k, d_h] ×2 -> O [..., n_q, d_h], L [..., n_q, 1]
    """FlashAttention-1 order (paper Algorithm 1): each K/V block stays in fast memory while
    every query block passes by; O, l, m live in HBM and O is kept normalised after every step."""
    xp = get_xp(Q, K, V)
    *lead, n_q, d_h = Q.shape
    n_k = K.shape[-2]
    heads = math.prod(lead)
    offset = n_k - n_q
    Tr, Tc = math.ceil(n_q / Br), math.ceil(n_k / Bc)
    O = xp.zeros((*lead, n_q, d_h), dtype=ct)  # [..., n_q, d_h] in HBM, O = 0
    l = xp.zeros((*lead, n_q, 1), dtype=ct)  # [..., n_q, 1] in HBM, l = 0
    m = xp.full((*lead, n_q, 1), -math.inf, dtype=ct)  # [..., n_q, 1] in HBM, m = -inf
    io.store("O", heads * n_q * d_h), io.store("l", heads * n_q), io.store("m", heads * n_q)
    step = 0
    for j in range(Tc):
        c0, c1 = j * Bc, min(n_k, (j + 1) * Bc)
        K_j = xp.astype(K[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load K_j
        V_j = xp.astype(V[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load V_j
        io.load("K", heads * (c1 - c0) * d_h), io.load("V", heads * (c1 - c0) * d_h)
        for i in range(Tr):
            r0, r1 = i * Br, min(n_q, (i + 1) * Br)
            kind, mask = tile_plan(xp, r0, r1, c0, c1, offset, causal, docs)
            before = io.total_loads, io.total_stores
            if kind != "skipped":
                Q_i = xp.astype(Q[..., r0:r1, :], ct) * scale  # [..., Br, d_h] load Q_i
                O_i, l_i, m_i = O[..., r0:r1, :], l[..., r0:r1, :], m[..., r0:r1, :]  # load O_i, l_i, m_i
                io.load("Q", heads * (r1 - r0) * d_h), io.load("O", heads * (r1 - r0) * d_h)
                io.load("l", heads * (r1 - r0)), io.load("m", heads * (r1 - r0))
                S_ij = Q_i @ K_j.mT  # [..., Br, Bc] S_ij = Q_i K_jᵀ/√d_h
                if mask is not None:  # the causal boundary or a document boundary crosses the tile
                    S_ij = xp.where(mask, S_ij, -math.inf)
                m_t = xp.max(S_ij, axis=-1, keepdims=True)  # [..., Br, 1] m̃_ij = rowmax S_ij
                P_t = exp_minus(S_ij, m_t)  # [..., Br, Bc] P̃_ij = e^(S_ij - m̃_ij)
                l_t = xp.sum(P_t, axis=-1, keepdims=True)  # [..., Br, 1] l̃_ij = rowsum P̃_ij
                m_new, l_new = merge_softmax_stats(m_i, l_i, m_t, l_t)  # m_new = max(m_i, m̃), l_new = e^(m_i-m_new) l_i + e^(m̃-m_new) l̃
                # O_i ← diag(l_new)⁻¹ (diag(l_i) e^(m_i - m_new) O_i + e^(m̃ - m_new) P̃_ij V_j)
                O_new = (l_i * exp_minus(m_i, m_new) * O_i + exp_minus(m_t, m_new) * (P_t @ V_j))
                O[..., r0:r1, :] = O_new / xp.where(l_new > 0, l_new, 1.0)  # store O_i
                l[..., r0:r1, :], m[..., r0:r1, :] = l_new, m_new  # store l_i, m_i
                io.store("O", heads * (r1 - r0) * d_h), io.store("l", heads * (r1 - r0))
                io.store("m", heads * (r1 - r0))
            if trace is not None:
                _record(trace, step, i, j, kind, (r0, r1), (c0, c1), m[..., r0:r1, :],
                        l[..., r0:r1, :], io, before, Q.shape[2])
            step += 1
    return O, _lse(m, l)


def _record(trace, step, i, j, kind, rows, cols, m_i, l_i, io, before, g):
    done = kind != "skipped"
    trace.steps.append(TileStep(
        step=step, i=i, j=j, kind=kind, rows=rows, cols=cols,
        m=_watch(trace, m_i, g) if done else None, l=_watch(trace, l_i, g) if done else None,
        loads=io.total_loads - before[0], stores=io.total_stores - before[1]))
