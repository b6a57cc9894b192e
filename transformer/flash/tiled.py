"""FlashAttention from the ground up (notes 000 §3.2, 001, 002).

Standard attention writes the n × n scores S = Q Kᵀ/√d_h and probabilities
P = softmax(S) to slow memory and reads them back: O(n²) memory, and its speed is
set by memory traffic. FlashAttention never forms S or P whole. It cuts Q into
Tr blocks of Br rows and K, V into Tc blocks of Bc rows, and keeps per query row
a running maximum m and a running sum l of the softmax (the online softmax). When
a new block of scores raises the maximum, the earlier partial sums are rescaled
by e^(m_old - m_new), so after the last block the result equals softmax(S) V exactly.

Contents, read top-down:
    online softmax      `online_softmax_stats`, `merge_softmax_stats`, `online_softmax`
    standard attention  `standard_attention` (three passes, counted) — the slow path
    tiled forward       `flash_attention(..., version=1 | 2)` — the fast path
    backward            `flash_attention_backward` (recomputes P tile by tile)
                        `attention_backward_naive` (forms P whole) — for comparison
    teaching trace      `FlashTrace` / `TileStep`: m, l and the fate of every tile

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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import checks as core_checks
from ..core.attention import softmax
from ..backend import compute_dtype, get_xp, to_numpy
from ..require import require_array, require_bool, require_float, require_int
from .io_count import IOCounter
from ..core.masks import _same_document

__all__ = [
    "online_softmax_stats", "merge_softmax_stats", "online_softmax", "online_softmax_history",
    "standard_attention", "flash_attention", "flash_attention_backward",
    "attention_backward_naive", "tile_kind", "TileStep", "FlashTrace", "DEFAULT_BLOCK",
]

# A 128 × 128 float32 score tile is 64 KiB per head: it stays in a CPU core's L2 cache, and is
# large enough that the Python loop over tiles costs little next to the matrix products.
DEFAULT_BLOCK = 128


def _check_shapes(q, k, v):
    """The checks of scaled_dot_product_attention, and d_v = d_h: the tiles here share one head size."""
    core_checks.attention_shapes(q, k, v, None)
    if v.shape[-1] != q.shape[-1]:
        raise ValueError(f"the tiled kernels need v's head size to equal q's: v d_h={v.shape[-1]}, "
                         f"q d_h={q.shape[-1]} (scaled_dot_product_attention accepts different sizes)")


def _exp_minus(x, m):  # [..., n], [..., 1] -> [..., n]
    """e^(x - m), where a row whose max m is still -inf (nothing seen yet) gives 0, not NaN.

    A max of NaN or +inf stays: the row turns NaN throughout, as softmax and torch give.
    """
    xp = get_xp(x, m)
    return xp.exp(x - xp.where(m == -math.inf, 0.0, m))  # x is -inf there too: e^-inf = 0


# --- 1. online softmax ----------------------------------------------------------------------------

def merge_softmax_stats(m_a, l_a, m_b, l_b):  # [..., 1] × 4 -> [..., 1], [..., 1]
    """Combine the (max, sum) of two parts of a row into those of the whole row.

        m = max(m_a, m_b)
        l = l_a·e^(m_a - m) + l_b·e^(m_b - m)      each partial sum rescaled to the common max

    >>> import numpy as np
    >>> m, l = merge_softmax_stats(np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([1.0]))
    >>> m.tolist(), l.tolist()
    ([0.0], [2.0])
    """
    xp = get_xp(m_a, l_a, m_b, l_b)
    m = xp.maximum(m_a, m_b)
    l = l_a * _exp_minus(m_a, m) + l_b * _exp_minus(m_b, m)
    return m, l


def online_softmax_stats(x, block: int = 1, history: list | None = None):  # [..., n] -> [..., 1], [..., 1]
    """Row max m and normaliser l = Σ_j e^(x_j - m) in ONE pass over x, `block` entries at a time.

    With block = 1 this is the recurrence of note 000 §3.2.2:
        m_new = max(m, x_j)
        l_new = l·e^(m - m_new) + e^(x_j - m_new)
    With block = B each step folds in a whole block's (max, sum) with `merge_softmax_stats`.
    If `history` is a list, (m, l) after each step are appended to it (as NumPy arrays).

    >>> import numpy as np
    >>> m, l = online_softmax_stats(np.log(np.array([1.0, 2.0, 3.0])))
    >>> round(float(np.exp(m[0]) * l[0]), 12)  # Σ e^x = 1 + 2 + 3
    6.0
    """
    require_float("x", x)
    if x.ndim < 1:
        raise ValueError(f"x must have at least one axis (..., n), got shape {tuple(x.shape)}")
    require_int(block=block, low=1)
    xp = get_xp(x)
    n = x.shape[-1]
    m = xp.full(x.shape[:-1] + (1,), -math.inf, dtype=x.dtype)  # [..., 1] max so far
    l = xp.zeros(x.shape[:-1] + (1,), dtype=x.dtype)  # [..., 1] Σ e^(x - m) so far
    for c0 in range(0, n, block):
        x_j = x[..., c0:min(n, c0 + block)]  # [..., B] the next block (the last may be shorter)
        m_j = xp.max(x_j, axis=-1, keepdims=True)  # [..., 1] the block's own max
        l_j = xp.sum(_exp_minus(x_j, m_j), axis=-1, keepdims=True)  # [..., 1] the block's own sum
        m, l = merge_softmax_stats(m, l, m_j, l_j)  # rescale the old sum if the max went up
        if history is not None:
            history.append((to_numpy(m)[..., 0].copy(), to_numpy(l)[..., 0].copy()))
    return m, l


def online_softmax_history(x, block: int = 1):  # [..., n] -> [T, ...], [T, ...] as NumPy
    """The running (m, l) after each of the T = ⌈n / block⌉ steps, stacked for plotting.

    The last step's values are the full row's max and Σ e^(x - max).
    """
    require_float("x", x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"x has no entries to take a softmax over: shape {tuple(x.shape)}")
    history = []
    online_softmax_stats(x, block, history)
    return np.stack([m for m, _ in history]), np.stack([l for _, l in history])


def online_softmax(x, block: int = 1):  # [..., n] -> [..., n]
    """softmax(x) from the one-pass statistics: e^(x - m) / l."""
    m, l = online_softmax_stats(x, block)
    return _exp_minus(x, m) / l


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


def _tile_mask(xp, r0, r1, c0, c1, offset):  # -> [Br, Bc], True = may attend
    i = xp.arange(r0, r1)[:, None] + offset  # [Br, 1] query positions
    j = xp.arange(c0, c1)[None, :]  # [1, Bc] key positions
    return j <= i  # [Br, Bc]


def _doc_tile_mask(xp, doc, r0, r1, c0, c1, causal):  # [b, n] -> [b, Br, Bc], True = may attend
    """`masks.document_mask`'s tile: same document, not padding, and j ≤ i when causal."""
    keep = _same_document(doc[:, r0:r1], doc[:, c0:c1])  # [b, Br, Bc]
    return keep & _tile_mask(xp, r0, r1, c0, c1, 0)[None, :, :] if causal else keep


def _tile_plan(xp, r0, r1, c0, c1, offset, causal, docs):  # -> kind, mask [..., Br, Bc] or None
    """What a tile needs: its kind ("full", "diagonal" = masked inside, "skipped") and, when
    masked inside, the mask to apply to S_ij. docs: None, or (doc on the host as NumPy, doc
    on the device) for packed rows; the host copy decides, so no device value is read back."""
    if docs is None:
        kind = tile_kind(r0, r1, c0, c1, offset, causal)
        return kind, (_tile_mask(xp, r0, r1, c0, c1, offset) if kind == "diagonal" else None)
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

    def row_history(self, r: int):  # -> j [T], m [T], l [T]
        if not 0 <= r < self.n_q:
            raise ValueError(f"row r must lie in [0, {self.n_q}), got r={r}")
        seen = [s for s in self.steps if s.kind != "skipped" and s.rows[0] <= r < s.rows[1]]
        j = np.array([s.j for s in seen], dtype=np.int64)
        m = np.array([s.m[r - s.rows[0]] for s in seen], dtype=np.float64)
        l = np.array([s.l[r - s.rows[0]] for s in seen], dtype=np.float64)
        return j, m, l

    def history(self, name: str = "m") -> np.ndarray:  # -> [n_steps, n_q]
        if name not in ("m", "l"):
            raise ValueError(f"history name must be 'm' or 'l', got {name!r}")
        h = np.full((len(self.steps), self.n_q), np.nan)
        row = np.full(self.n_q, np.nan)
        for t, s in enumerate(self.steps):
            if s.kind != "skipped":
                row[s.rows[0]:s.rows[1]] = getattr(s, name)
            h[t] = row
        return h


def _watch(trace, x, g):  # [b, h_kv, g, Br, 1] -> [Br] as NumPy, for the watched head
    return to_numpy(x[trace.batch, trace.head // g, trace.head % g, :, 0]).copy()


# --- checks shared by the public entry points ---------------------------------------------------------

def _check_options(causal, block_q, block_k, n_q, n_k):  # -> (Br, Bc)
    require_bool(causal=causal)
    sizes = []
    for name, bsz, n in (("block_q", block_q, n_q), ("block_k", block_k, n_k)):
        if bsz is None:
            bsz = DEFAULT_BLOCK
        require_int(**{name: bsz}, low=1)
        sizes.append(max(1, min(bsz, n)))  # a block never exceeds the sequence
    return tuple(sizes)


def _check_doc(doc, b, n_q, n_k):  # -> None or (host NumPy [b, n], device [b, n])
    if doc is None:
        return None
    require_array("doc", doc)
    xp = get_xp(doc)
    if n_q != n_k:
        raise ValueError(f"doc needs self-attention over one packed row, n_q = n_k, got n_q={n_q}, n_k={n_k}")
    if doc.ndim != 2 or not xp.isdtype(doc.dtype, "integral") or tuple(doc.shape) != (b, n_q):
        raise ValueError(f"doc must be a (b, n) = ({b}, {n_q}) integer array of document indices, got dtype "
                         f"{doc.dtype}, shape {tuple(doc.shape)}")
    return np.asarray(to_numpy(doc)), doc


def _grouped(q, k, v):  # [b,h,n_q,d_h], [b,h_kv,n_k,d_h] ×2 -> [b,h_kv,g,n_q,d_h], [b,h_kv,1,n_k,d_h] ×2
    """View query heads as h_kv groups of g so each group broadcasts against its K/V head."""
    xp = get_xp(q, k, v)
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    q5 = xp.reshape(q, (b, h_kv, h // h_kv, n_q, d_h))  # head i = group i // g, member i % g
    k5 = xp.reshape(k, (b, h_kv, 1, n_k, d_h))
    v5 = xp.reshape(v, (b, h_kv, 1, n_k, d_h))
    return q5, k5, v5


# --- 2. standard attention (the slow path, counted) ----------------------------------------------------

def standard_attention(q, k, v, *, causal=False, scale=None, return_lse=False, io=None):
    """softmax(Q Kᵀ/√d_h) V the standard way: S and P are whole n_q × n_k arrays in slow memory.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) -> out (b, h, n_q, d_h) [, lse (b, h, n_q)].
    The three passes of the paper's Algorithm 0 are counted in `io` (an IOCounter).
    Peak memory is two n_q × n_k buffers per head (see io_count.standard_attention_peak_bytes).
    """
    _check_shapes(q, k, v)
    _check_options(causal, 1, 1, q.shape[2], k.shape[2])
    core_checks.optional_scale(scale)
    io = IOCounter() if io is None else io
    xp = get_xp(q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    b, h, n_q, d_h = q.shape
    n_k = k.shape[2]
    heads = b * h
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    Q, K, V = (xp.astype(t, ct, copy=False) for t in _grouped(q, k, v))
    # pass 1: read Q, K; write S
    S = (Q * scale) @ xp.matrix_transpose(K)  # [..., n_q, n_k] S = Q Kᵀ/√d_h
    io.load("Q", heads * n_q * d_h), io.load("K", heads * n_k * d_h), io.store("S", heads * n_q * n_k)
    if causal:
        S = xp.where(_tile_mask(xp, 0, n_q, 0, n_k, n_k - n_q), S, -math.inf)  # [..., n_q, n_k]
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


# --- 3. the tiled forward --------------------------------------------------------------------------

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
    _check_shapes(q, k, v)
    b, h, n_q, d_h = q.shape
    n_k = k.shape[2]
    Br, Bc = _check_options(causal, block_q, block_k, n_q, n_k)
    core_checks.optional_scale(scale)
    if version not in (1, 2):
        raise ValueError(f"version must be 1 (FlashAttention-1 loop order) or 2, got version={version!r}")
    docs = _check_doc(doc, b, n_q, n_k)
    xp = get_xp(q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    io = IOCounter() if io is None else io
    if trace is not None:
        if not (0 <= trace.batch < b and 0 <= trace.head < h):
            raise ValueError(f"trace watches batch={trace.batch}, head={trace.head}, outside b={b}, h={h}")
        trace.version, trace.causal, trace.n_q, trace.n_k = version, causal, n_q, n_k
        trace.Br, trace.Bc, trace.Tr, trace.Tc = Br, Bc, math.ceil(n_q / Br), math.ceil(n_k / Bc)
        trace.steps.clear()
    kernel = _flash2_forward if version == 2 else _flash1_forward
    O, L = kernel(*_grouped(q, k, v), scale, causal, Br, Bc, ct, io, trace, docs)
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
            kind, mask = _tile_plan(xp, r0, r1, c0, c1, offset, causal, docs)
            before = io.total_loads, io.total_stores
            if kind != "skipped":
                K_j = xp.astype(K[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load K_j
                V_j = xp.astype(V[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load V_j
                io.load("K", heads * (c1 - c0) * d_h), io.load("V", heads * (c1 - c0) * d_h)
                S_ij = Q_i @ xp.matrix_transpose(K_j)  # [..., Br, Bc] S_ij = Q_i K_jᵀ/√d_h
                if mask is not None:  # the causal boundary or a document boundary crosses the tile
                    S_ij = xp.where(mask, S_ij, -math.inf)
                m_new = xp.maximum(m_i, xp.max(S_ij, axis=-1, keepdims=True))  # [..., Br, 1] m = max(m, rowmax S_ij)
                P_ij = _exp_minus(S_ij, m_new)  # [..., Br, Bc] P̃_ij = e^(S_ij - m_new), each ≤ 1
                alpha = _exp_minus(m_i, m_new)  # [..., Br, 1] e^(m_old - m_new): shrink what came before
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
            kind, mask = _tile_plan(xp, r0, r1, c0, c1, offset, causal, docs)
            before = io.total_loads, io.total_stores
            if kind != "skipped":
                Q_i = xp.astype(Q[..., r0:r1, :], ct) * scale  # [..., Br, d_h] load Q_i
                O_i, l_i, m_i = O[..., r0:r1, :], l[..., r0:r1, :], m[..., r0:r1, :]  # load O_i, l_i, m_i
                io.load("Q", heads * (r1 - r0) * d_h), io.load("O", heads * (r1 - r0) * d_h)
                io.load("l", heads * (r1 - r0)), io.load("m", heads * (r1 - r0))
                S_ij = Q_i @ xp.matrix_transpose(K_j)  # [..., Br, Bc] S_ij = Q_i K_jᵀ/√d_h
                if mask is not None:  # the causal boundary or a document boundary crosses the tile
                    S_ij = xp.where(mask, S_ij, -math.inf)
                m_t = xp.max(S_ij, axis=-1, keepdims=True)  # [..., Br, 1] m̃_ij = rowmax S_ij
                P_t = _exp_minus(S_ij, m_t)  # [..., Br, Bc] P̃_ij = e^(S_ij - m̃_ij)
                l_t = xp.sum(P_t, axis=-1, keepdims=True)  # [..., Br, 1] l̃_ij = rowsum P̃_ij
                m_new, l_new = merge_softmax_stats(m_i, l_i, m_t, l_t)  # m_new = max(m_i, m̃), l_new = e^(m_i-m_new) l_i + e^(m̃-m_new) l̃
                # O_i ← diag(l_new)⁻¹ (diag(l_i) e^(m_i - m_new) O_i + e^(m̃ - m_new) P̃_ij V_j)
                O_new = (l_i * _exp_minus(m_i, m_new) * O_i + _exp_minus(m_t, m_new) * (P_t @ V_j))
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


# --- 4. backward --------------------------------------------------------------------------------------

def _check_backward(q, k, v, causal, scale, **given):  # given: dout, and out, lse for the tiled backward
    _check_shapes(q, k, v)
    _check_options(causal, 1, 1, q.shape[2], k.shape[2])
    core_checks.optional_scale(scale)
    shapes = {"dout": q.shape, "out": q.shape, "lse": q.shape[:3]}
    for name, t in given.items():
        require_float(name, t)  # out=None or lse=None: "must be an array, got NoneType"
        if tuple(t.shape) != tuple(shapes[name]):
            raise ValueError(f"{name} must have shape {tuple(shapes[name])}, got {tuple(t.shape)}")


def attention_backward_naive(dout, q, k, v, *, causal=False, scale=None):
    """Gradients of O = softmax(Q Kᵀ·scale) V through the whole n_q × n_k matrix P.

    dout, q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) -> dq, dk, dv of the shapes of q, k, v.
        dV = Pᵀ dO,   dP = dO Vᵀ,   dS = P ∘ (dP - rowsum(P ∘ dP)),   dQ = dS K·scale,   dK = dSᵀ Q·scale
    (the softmax Jacobian applied to dP). Key/value heads shared by g query heads sum their g gradients.
    """
    _check_backward(q, k, v, causal, scale, dout=dout)
    xp = get_xp(dout, q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    Q, K, V = (xp.astype(t, ct, copy=False) for t in _grouped(q, k, v))
    dO = xp.astype(xp.reshape(dout, Q.shape), ct, copy=False)  # [..., n_q, d_h]
    S = (Q @ xp.matrix_transpose(K)) * scale  # [..., n_q, n_k]
    mask = _tile_mask(xp, 0, n_q, 0, n_k, n_k - n_q) if causal else None
    P = softmax(S, axis=-1, mask=mask)  # [..., n_q, n_k] the full probability matrix
    dV = xp.sum(xp.matrix_transpose(P) @ dO, axis=2, keepdims=True)  # [b, h_kv, 1, n_k, d_h]
    dP = dO @ xp.matrix_transpose(V)  # [..., n_q, n_k]
    dS = P * (dP - xp.sum(P * dP, axis=-1, keepdims=True))  # [..., n_q, n_k]
    dQ = (dS @ K) * scale  # [..., n_q, d_h]
    dK = xp.sum(xp.matrix_transpose(dS) @ Q, axis=2, keepdims=True) * scale  # [b, h_kv, 1, n_k, d_h]
    return (xp.astype(xp.reshape(dQ, (b, h, n_q, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dK, (b, h_kv, n_k, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dV, (b, h_kv, n_k, d_h)), in_dtype, copy=False))


def flash_attention_backward(dout, q, k, v, out, lse, *, causal=False, block_q=None, block_k=None,
                             scale=None, io=None, doc=None):
    """Gradients by recomputation: P is rebuilt one tile at a time from Q, K and the saved lse.

    dout, q, out (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h), lse (b, h, n_q) from
    `flash_attention(..., return_lse=True)` -> dq (b, h, n_q, d_h), dk, dv (b, h_kv, n_k, d_h).
        D    = rowsum(dO ∘ O)                  (= rowsum(P ∘ dP), so P is never needed whole)
        P_ij = e^(S_ij - L_i)                  exact probabilities, no second softmax pass
        dV_j += P_ijᵀ dO_i,  dP_ij = dO_i V_jᵀ,  dS_ij = P_ij ∘ (dP_ij - D_i)
        dQ_i += dS_ij K_j·scale,  dK_j += dS_ijᵀ Q_i·scale
    Memory beyond the inputs and gradients is O(Br·Bc) per head, never O(n_q·n_k).
    doc: the packed rows' document indices given to the forward pass (see `flash_attention`).
    """
    _check_backward(q, k, v, causal, scale, dout=dout, out=out, lse=lse)
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    Br, Bc = _check_options(causal, block_q, block_k, n_q, n_k)
    docs = _check_doc(doc, b, n_q, n_k)
    xp = get_xp(dout, q, k, v, out, lse)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    io = IOCounter() if io is None else io
    Q, K, V = _grouped(q, k, v)
    *lead, _, _ = Q.shape
    heads = b * h
    dO = xp.reshape(dout, Q.shape)  # [..., n_q, d_h]
    L = xp.reshape(xp.astype(lse, ct), (*lead, n_q, 1))  # [..., n_q, 1]
    L = xp.where(L == -math.inf, math.inf, L)  # a row that saw nothing: e^(s - inf) = 0 (NaN stays)
    D = xp.sum(xp.astype(dO, ct) * xp.astype(xp.reshape(out, Q.shape), ct), axis=-1, keepdims=True)  # [..., n_q, 1]
    io.load("dO", heads * n_q * d_h), io.load("O", heads * n_q * d_h), io.store("D", heads * n_q)
    dQ = xp.zeros((*lead, n_q, d_h), dtype=ct)  # [..., n_q, d_h] accumulated in HBM
    dK = xp.zeros((b, h_kv, 1, n_k, d_h), dtype=ct)  # [b, h_kv, 1, n_k, d_h]
    dV = xp.zeros((b, h_kv, 1, n_k, d_h), dtype=ct)
    offset = n_k - n_q
    Tr, Tc = math.ceil(n_q / Br), math.ceil(n_k / Bc)
    for j in range(Tc):
        c0, c1 = j * Bc, min(n_k, (j + 1) * Bc)
        K_j = xp.astype(K[..., c0:c1, :], ct)  # [b, h_kv, 1, Bc, d_h] load K_j, V_j
        V_j = xp.astype(V[..., c0:c1, :], ct)
        io.load("K", heads * (c1 - c0) * d_h), io.load("V", heads * (c1 - c0) * d_h)
        dK_j = xp.zeros(K_j.shape, dtype=ct)  # [b, h_kv, 1, Bc, d_h] in fast memory
        dV_j = xp.zeros(V_j.shape, dtype=ct)
        for i in range(Tr):
            r0, r1 = i * Br, min(n_q, (i + 1) * Br)
            kind, mask = _tile_plan(xp, r0, r1, c0, c1, offset, causal, docs)
            if kind == "skipped":
                continue
            Q_i = xp.astype(Q[..., r0:r1, :], ct)  # [..., Br, d_h] load Q_i, dO_i, L_i, D_i
            dO_i = xp.astype(dO[..., r0:r1, :], ct)
            L_i, D_i = L[..., r0:r1, :], D[..., r0:r1, :]  # [..., Br, 1]
            io.load("Q", heads * (r1 - r0) * d_h), io.load("dO", heads * (r1 - r0) * d_h)
            io.load("L", heads * (r1 - r0)), io.load("D", heads * (r1 - r0))
            S_ij = (Q_i @ xp.matrix_transpose(K_j)) * scale  # [..., Br, Bc] recompute S_ij
            if mask is not None:
                S_ij = xp.where(mask, S_ij, -math.inf)
            P_ij = xp.exp(S_ij - L_i)  # [..., Br, Bc] P_ij = e^(S_ij - L_i), already normalised
            if mask is not None:  # masked: exactly 0, also where L_i is NaN (e^(-inf - NaN) would be NaN)
                P_ij = xp.where(mask, P_ij, 0.0)
            dV_j = dV_j + xp.sum(xp.matrix_transpose(P_ij) @ dO_i, axis=2, keepdims=True)  # dV_j += P_ijᵀ dO_i
            dP_ij = dO_i @ xp.matrix_transpose(V_j)  # [..., Br, Bc] dP_ij = dO_i V_jᵀ
            dS_ij = P_ij * (dP_ij - D_i)  # [..., Br, Bc] dS_ij = P_ij ∘ (dP_ij - D_i)
            if mask is not None:  # masked: no gradient, also from a NaN row (0 · NaN would be NaN)
                dS_ij = xp.where(mask, dS_ij, 0.0)
            dQ[..., r0:r1, :] = dQ[..., r0:r1, :] + (dS_ij @ K_j) * scale  # read-modify-write dQ_i
            io.load("dQ", heads * (r1 - r0) * d_h), io.store("dQ", heads * (r1 - r0) * d_h)
            dK_j = dK_j + xp.sum(xp.matrix_transpose(dS_ij) @ Q_i, axis=2, keepdims=True) * scale
        dK[..., c0:c1, :], dV[..., c0:c1, :] = dK_j, dV_j  # store dK_j, dV_j
        io.store("dK", heads * (c1 - c0) * d_h), io.store("dV", heads * (c1 - c0) * d_h)
    return (xp.astype(xp.reshape(dQ, (b, h, n_q, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dK, (b, h_kv, n_k, d_h)), in_dtype, copy=False),
            xp.astype(xp.reshape(dV, (b, h_kv, n_k, d_h)), in_dtype, copy=False))
