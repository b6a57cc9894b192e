"""FlashAttention-2's forward on the CPU, fast: `tiled.py`'s loop with every array allocated once.

`tiled.flash_attention` is the loop to read: one line per step of the paper's recurrence, each
line a new array. This module computes the same numbers in the same order, for NumPy arrays on
the CPU (the GPU has its own kernels, `cuda.py`), and changes only how the work is laid out:

1. No temporaries. Each step is one NumPy call for all heads at once that writes into a buffer
   allocated once per worker (`out=`): S_ij = Q_i K_jᵀ lands in the tile buffer, the row max
   and the running statistics in (…, Br, 1) buffers, and e^(S_ij - m) runs in place, so the tile
   buffer becomes P̃_ij without a second Br × Bc array. The g query heads that share a K/V head
   are stacked into one product (g·Br rows) instead of g.
2. Query blocks shared among threads. NumPy's element-wise calls (max, exp, sum) run on one
   core, and two BLAS threads meeting in each small product cost about what they save. FA2's
   query blocks are independent, so `threads` workers take them from a shared queue (the
   longest causal rows first) and each calls BLAS single-threaded; NumPy releases Python's
   lock inside its calls, so the workers run at once.
3. The block size from the cache (`fast_block_size`): the largest square tile whose one-head
   working set fits in the L2 cache of the CPU it runs on, read from Linux's sysfs.

    >>> import numpy as np
    >>> from transformer import scaled_dot_product_attention as sdpa
    >>> x = np.random.default_rng(0).standard_normal((1, 2, 5, 4))
    >>> bool(np.allclose(flash_attention_fast(x, x, x, block_q=2, block_k=3), sdpa(x, x, x)))
    True
"""
from __future__ import annotations

import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

from . import tiled_fast_checks as checks
from ..backend import compute_dtype, get_xp
from ..require import checked_by
from .tiled import grouped

__all__ = ["flash_attention_fast", "flash_attention_fast_peak_bytes", "fast_block_size", "cache_bytes",
           "blas_threads"]

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
# When neither sysfs nor sysconf knows: a common size for a core's own L2 (1 MiB on recent x86 servers).
FALLBACK_L2 = 2 ** 20


# --- the machine: cache sizes and BLAS threads --------------------------------------------------

@checked_by(checks.cache_bytes)
def cache_bytes(level: int = 2, root: Path = SYSFS_CACHE) -> int:
    """Bytes of one core's data (or unified) cache at `level`, as Linux reports it.

    Reads root/index*/{level,type,size} (size like "1024K"), then os.sysconf, else FALLBACK_L2
    for level 2 (0 for others). Example: a directory with index2/level = "2", type = "Unified",
    size = "1024K" gives cache_bytes(2, root) = 1048576.
    """
    units = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}
    for index in sorted(Path(root).glob("index*")):
        try:
            lvl, kind, size = ((index / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        if int(lvl) == level and kind in ("Data", "Unified"):
            return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    name = {1: "SC_LEVEL1_DCACHE_SIZE", 2: "SC_LEVEL2_CACHE_SIZE", 3: "SC_LEVEL3_CACHE_SIZE"}.get(level)
    try:
        value = os.sysconf(name) if name else 0
    except (ValueError, OSError):
        value = 0
    return value if value > 0 else (FALLBACK_L2 if level == 2 else 0)


@checked_by(checks.fast_block_size)
def fast_block_size(d_h: int, itemsize: int, l2: int | None = None) -> int:  # -> B = Br = Bc
    """The square tile B × B whose working set for one head fills a core's L2 cache.

    One worker, one head, one step touches the tile S_ij (B², read and written five times:
    the product, max, subtract, exp, sum, and read by P̃_ij V_j) and five B × d_h panels
    (Q_i, K_j, V_j, O_i and P̃_ij V_j). B is the largest power of two, at least 64, with
        (B² + 5·B·d_h) · itemsize ≤ L2
    Heads are processed together, so the whole call's tile is h times that and lives in L3;
    each head's slice is what one product and one pass touch at a time. Example: L2 = 1 MiB,
    d_h = 64, float32: B = 256 gives (65536 + 81920)·4 = 576 KiB ≤ 1 MiB, B = 512 gives 1.6 MiB:
    B = 256. Larger tiles also mean fewer Python steps (Tr·Tc), smaller ones less waste on the
    causal diagonal and less memory. On that CPU (n = 4096, h = 8, two workers) B = 512 runs
    as fast as 256 with twice the tile memory, and 128 runs 10–15 % slower; the benchmark
    times the fast path at each block beside the rule's (benchmarks/bench_flash.py).
    """
    l2 = cache_bytes(2) if l2 is None else l2
    B = 64
    while ((2 * B) ** 2 + 5 * 2 * B * d_h) * itemsize <= l2:
        B *= 2
    return B


@functools.cache
def _controller():  # threadpoolctl's view of the BLAS libraries loaded in this process (found once)
    return ThreadpoolController()


class SingleThreadedBlas:
    """A context in which NumPy's BLAS runs one thread, restored when the last user leaves.

    BLAS's thread count is one setting for the whole process. Two calls that each saved it and
    set 1 would restore in the wrong order when they overlap (threads): the second saves the
    first's 1 and puts it back last, for good. Here the first user to enter saves it and sets
    1, later users only count themselves in, and the last one out restores what the first saved,
    whatever the order of exits, and on an error or an interrupt too."""

    def __init__(self):
        self.lock = threading.Lock()
        self.users = 0
        self.limiter = None  # threadpoolctl's limiter, holding the original thread counts

    def __enter__(self):
        with self.lock:
            if self.users == 0:
                self.limiter = _controller().limit(limits=1, user_api="blas")
            self.users += 1
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.limiter.restore_original_limits()
                self.limiter = None
        return False


SINGLE_BLAS = SingleThreadedBlas()


def blas_threads() -> int:
    """The threads NumPy's BLAS was started with (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, …)."""
    found = [lib.num_threads for lib in _controller().lib_controllers if lib.user_api == "blas"]
    return max(found) if found else (os.cpu_count() or 1)


# --- the memory formula ----------------------------------------------------------------------------

@checked_by(checks.flash_attention_fast_peak_bytes)
def flash_attention_fast_peak_bytes(b, h, n_q, n_k, d_h, itemsize, block_q, block_k, threads=1,
                                    causal=False, h_kv=None, out_itemsize=None) -> int:
    """Peak extra bytes of `flash_attention_fast`: no n × n term, one set of buffers per worker.

        output O and log-sum-exp L, allocated once                     heads·n_q·(d_h + 1)
        per worker: the tile S_ij (P̃_ij after the exp, in place)      heads·Br·Bc
                    Q_i·scale, O_i, P̃_ij V_j                           3·heads·Br·d_h
                    m, m_new, α, l, rowsum                             5·heads·Br
                    K_j, V_j cast to the compute dtype (float16 in)    2·b·h_kv·Bc·d_h
                    NumPy's buffer for a broadcast operand (S - m, α·O)  np.getbufsize()
                    the causal mask of a diagonal tile                 Br·Bc bytes (bool)
    in the compute dtype's `itemsize` (4 for float16 inputs); heads = b·h, Br = min(block_q, n_q),
    workers = min(threads, Tr). out_itemsize (the input's, if different): the output is cast at
    the end, after the workers' buffers are freed.
    """
    h_kv = h if h_kv is None else h_kv
    heads = b * h
    Br, Bc = min(block_q, n_q), min(block_k, n_k)
    workers = min(threads, math.ceil(n_q / Br))
    cast = out_itemsize is not None and out_itemsize != itemsize
    per_worker = (heads * Br * Bc + 3 * heads * Br * d_h + 5 * heads * Br + (2 * b * h_kv * Bc * d_h if cast else 0)
                  + np.getbufsize())  # the ufunc buffer is freed after each call: one at a time
    mask = Br * Bc if causal else 0  # bytes
    out = heads * n_q * (d_h + 1) * itemsize
    cast_out = heads * n_q * d_h * out_itemsize if cast else 0
    return out + max(workers * (per_worker * itemsize + mask), cast_out)


# --- the fast forward ------------------------------------------------------------------------------

@checked_by(checks.flash_attention_fast)
def flash_attention_fast(q, k, v, *, causal=False, block_q=None, block_k=None, return_lse=False,
                         scale=None, threads=None):
    """`flash_attention` (FA2 order) for NumPy arrays, with preallocated buffers and threads.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) -> out (b, h, n_q, d_h) [, lse (b, h, n_q)]
    as `flash_attention`: GQA, any n, n_q ≠ n_k, causal tiles above the diagonal skipped, rows
    that see no key give zeros and lse = -inf; float16/bfloat16 accumulate in float32.
    block_q, block_k: Br and Bc (None: `fast_block_size` for this CPU's L2 cache).
    threads: workers sharing the query blocks (None: the threads NumPy's BLAS was started
    with); with more than one, BLAS runs single-threaded inside the call and is restored after
    (`SingleThreadedBlas`: when calls overlap, by the last one to end).
    """
    b, h, n_q, d_h = q.shape
    n_k = k.shape[2]
    in_dtype = q.dtype
    ct = np.dtype(compute_dtype(get_xp(q, k, v), in_dtype))
    if b == 0 or n_q == 0:  # no query row: an empty output, as the readable path and torch give
        out = np.zeros((b, h, n_q, d_h), dtype=in_dtype)  # [b, h, n_q, d_h] with a zero in it
        return (out, np.full((b, h, n_q), -np.inf, dtype=ct)) if return_lse else out
    B = fast_block_size(d_h, ct.itemsize)
    Br, Bc = min(block_q or B, n_q), min(block_k or B, n_k)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    Q, K, V = grouped(q, k, v)  # [b, h_kv, g, n_q, d_h], [b, h_kv, 1, n_k, d_h] ×2, views
    lead = Q.shape[:-2]
    O = np.zeros((*lead, n_q, d_h), dtype=ct)  # [..., n_q, d_h] output; stays 0 in rows that see no key
    L = np.full((*lead, n_q, 1), -np.inf, dtype=ct)  # [..., n_q, 1] log-sum-exp; -inf in those rows
    starts = list(range(0, n_q, Br))
    queue = iter(starts[::-1] if causal else starts)  # causal: the longest rows first, for balance
    work = functools.partial(_rows, Q, K, V, O, L, queue, threading.Lock(), causal, Br, Bc, scale)
    workers = min(blas_threads() if threads is None else threads, len(starts))
    if workers <= 1:
        work()
    else:
        with SINGLE_BLAS, ThreadPoolExecutor(workers) as pool:
            for f in [pool.submit(work) for _ in range(workers)]:
                f.result()  # re-raises a worker's error here
    out = O.reshape(b, h, n_q, d_h).astype(in_dtype, copy=False)  # [b, h, n_q, d_h]
    return (out, L.reshape(b, h, n_q)) if return_lse else out


def _rows(Q, K, V, O, L, queue, lock, causal, Br, Bc, scale):
    # [..., n_q, d_h], [b, h_kv, 1, n_k, d_h] ×2 -> fills O [..., n_q, d_h], L [..., n_q, 1]
    """One worker: takes query blocks from `queue` until it is empty. The steps are those of
    tiled._flash2_forward, each written into a buffer allocated here, once. Each buffer is flat
    and viewed at the tile's size, so the last, shorter blocks are contiguous arrays too (a strided
    view would make NumPy copy it through a buffer in every call)."""
    lead, (n_q, d_h), n_k, ct = Q.shape[:-2], Q.shape[-2:], K.shape[-2], O.dtype
    kv_lead = K.shape[:-2]  # (b, h_kv, 1)
    offset = n_k - n_q  # query row r sits at position r + offset
    heads = math.prod(lead)
    S_buf = np.empty(heads * Br * Bc, dtype=ct)  # S_ij, then P̃_ij in place
    Q_buf, O_buf, PV_buf = (np.empty(heads * Br * d_h, dtype=ct) for _ in range(3))
    m_buf, mn_buf, a_buf, l_buf, rs_buf = (np.empty(heads * Br, dtype=ct) for _ in range(5))
    cast = K.dtype != ct  # float16/bfloat16 in: each K_j, V_j converted once per tile
    K_buf, V_buf = (np.empty(math.prod(kv_lead) * Bc * d_h, dtype=ct) for _ in range(2 if cast else 0)) \
        if cast else (None, None)
    masks = {}  # (r0 + offset - c0, br, bc) -> [br, bc] True = hidden, one per distinct diagonal
    while True:
        with lock:
            r0 = next(queue, None)
        if r0 is None:
            return
        r1 = min(n_q, r0 + Br)
        br = r1 - r0
        Q_i, O_i, PV = (_view(t, (*lead, br, d_h)) for t in (Q_buf, O_buf, PV_buf))  # [..., br, d_h]
        m, m_new, alpha, l, rowsum = (_view(t, (*lead, br, 1)) for t in (m_buf, mn_buf, a_buf, l_buf, rs_buf))
        np.copyto(Q_i, Q[..., r0:r1, :])  # load Q_i (cast once if needed)
        Q_i *= scale  # fold 1/√d_h into Q_i once
        m.fill(np.finfo(ct).min)  # the lowest finite value, not -inf: S - m stays -inf or finite, never NaN
        l.fill(0)
        O_i.fill(0)
        c_end = min(n_k, r1 + offset) if causal else n_k  # key blocks at or right of c_end are all hidden
        for c0 in range(0, max(c_end, 0), Bc):
            c1 = min(n_k, c0 + Bc)
            bc = c1 - c0
            K_j, V_j = (X[..., c0:c1, :] if buf is None else _cast(buf, X[..., c0:c1, :])
                        for X, buf in ((K, K_buf), (V, V_buf)))  # [b, h_kv, 1, bc, d_h] load K_j, V_j
            S = _view(S_buf, (*lead, br, bc))  # [..., br, bc]
            np.matmul(_stacked(Q_i), K_j[:, :, 0].mT, out=_stacked(S))  # S_ij = Q_i K_jᵀ/√d_h
            if causal and c1 - 1 > r0 + offset:  # the diagonal crosses the tile
                np.copyto(S, -np.inf, where=_hidden(masks, r0 + offset - c0, br, bc))
            np.max(S, axis=-1, keepdims=True, out=m_new)  # rowmax S_ij
            np.maximum(m_new, m, out=m_new)  # m_new = max(m, rowmax S_ij)
            np.subtract(S, m_new, out=S)
            np.exp(S, out=S)  # P̃_ij = e^(S_ij - m_new), in place
            np.subtract(m, m_new, out=alpha)
            np.exp(alpha, out=alpha)  # α = e^(m - m_new)
            np.sum(S, axis=-1, keepdims=True, out=rowsum)
            l *= alpha
            l += rowsum  # l = α·l + rowsum P̃_ij
            O_i *= alpha
            np.matmul(_stacked(S), V_j[:, :, 0], out=_stacked(PV))
            O_i += PV  # O = α·O + P̃_ij V_j
            m, m_new = m_new, m  # the buffers swap roles: no copy
        # after the last key block: O_i = O_i / l_i and L_i = m_i + log l_i, where the row saw a key;
        # elsewhere O and L keep their initial 0 and -inf
        seen = l != 0  # [..., br, 1]; a NaN row (NaN or inf in q or k) counts, and its L_i is NaN as tiled's
        np.maximum(l, np.finfo(ct).tiny, out=rowsum)  # l, or any positive number where O_i = 0
        O_i /= rowsum
        np.copyto(O[..., r0:r1, :], O_i)  # store O_i
        np.log(l, out=L[..., r0:r1, :], where=seen)
        np.add(L[..., r0:r1, :], m, out=L[..., r0:r1, :], where=seen)  # store L_i


def _stacked(x):  # [b, h_kv, g, r, c] contiguous -> [b, h_kv, g·r, c], the same memory
    """The g query heads that share a K/V head, stacked: one product per K/V head instead of g
    (grouped-query attention), and one per head for g = 1."""
    return x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1])


def _view(buf, shape):  # flat buffer -> its first prod(shape) elements as a contiguous array of that shape
    return buf[:math.prod(shape)].reshape(shape)


def _cast(buf, X):  # [..., bc, d_h] in float16/bfloat16 -> the same in buf's float32, contiguous
    out = _view(buf, X.shape)
    np.copyto(out, X)
    return out


def _hidden(masks, shift, br, bc):  # -> [br, bc] bool, True where the key comes after the query
    """Key jj of the tile hides from query row ii when c0 + jj > r0 + ii + offset, i.e. jj > ii + shift.
    Built row by row, once per distinct diagonal: a broadcast comparison would pass through
    NumPy's int64 buffers, several times the mask's own bytes."""
    key = (shift, br, bc)
    if key not in masks:
        hidden = np.zeros((br, bc), dtype=bool)
        for ii in range(br):
            hidden[ii, max(0, ii + shift + 1):] = True
        masks[key] = hidden
    return masks[key]
