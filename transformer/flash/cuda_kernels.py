"""The host side of the CUDA kernels as pure functions: tile sizes, shared memory, register
layouts, launch plans and packed-row arguments (NumPy only, so all is tested without a GPU).

    block_k, block_threads               Bc and threads a block, per kernel and d_h
    shared_memory_buffers, *_shared_bytes what one block keeps in shared memory
    mma_fragment_layout                  where mma.sync keeps each operand element in a warp
    tf32_round, split_tf32               TF32 rounding, and float32 as two TF32 parts ("3xTF32")
    auto_kernel, launch_plan             which kernel, how many blocks, which -D constants
    packed_row_args, key_tiles_read      the packed rows' document spans and the key tiles read
    backward_*                           the same for the backward kernels ("simt", "mma", "mma_tf32")
    backward_rows, sum_query_groups      the arrays around the backward kernel (any backend)

The table of kernels is `kernel_table.py`; compiling and launching is `cuda.py`.
Each public function with a refusal checks its input at the door (`cuda_kernels_checks.py`, same name).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import cuda_kernels_checks as checks
from ..backend import get_xp, to_numpy
from ..require import checked_by
from .kernel_table import BACKWARD, BACKWARD_KERNELS, HEAD_SIZES, KERNEL_DIR, KERNELS, Kernel

__all__ = ["Kernel", "KERNELS", "BACKWARD", "BACKWARD_KERNELS", "HEAD_SIZES", "KERNEL_DIR", "block_k", "block_threads",
           "shared_memory_buffers", "mma_fragment_layout", "tf32_round", "split_tf32", "simt_shared_bytes",
           "dynamic_shared_bytes", "LaunchPlan", "auto_kernel", "launch_plan", "packed_row_args",
           "key_tiles_read", "backward_block", "backward_tiles", "backward_shared_bytes", "backward_auto_kernel",
           "backward_launch_plan", "backward_rows",
           "sum_query_groups"]


def block_k(kernel: str, d_h: int) -> int:
    """Bc, keys per K/V tile. Halved at d_h = 128 for "simt" (its tiles must fit 48 KiB of static
    shared memory) and "mma_tf32" (its float32 tiles, double-buffered, would take 169 KiB: more
    than an A100 gives a block)."""
    halve = d_h > 64 and kernel in ("simt", "mma_tf32")
    return KERNELS[kernel].block_k // 2 if halve else KERNELS[kernel].block_k


def block_threads(kernel: str, d_h: int) -> int:
    """Threads per block. "mma" gives a warp two 16-row tiles of queries where the registers hold
    them (d_h ≤ 64: 4 warps of 32 rows) and one at d_h = 128 (8 warps of 16 rows)."""
    return 256 if kernel == "mma" and d_h > 64 else KERNELS[kernel].threads


def shared_memory_buffers(kernel: str, d_h: int) -> dict[str, int]:
    """Bytes of each buffer one block of `kernel` keeps in shared memory: the layouts of the .cu files.

    SIMT: the Q tile (stored transposed) and K_j, V_j, float32. Tensor cores: K_j, V_j, P in
    float16 and S, O, the row corrections in float32, rows padded by 8 halves / 4 floats against
    bank conflicts; the Q tile passes once through S's space on its way into registers.
    mma: the Q tile and two buffers each of K_j and V_j (the next tile lands while this one is
    used), float16, rows padded by 8 halves; S, P and O live in registers. mma_tf32: the same
    buffers in float32, rows padded by 4 floats. "backward" (the SIMT backward kernel, float32
    tiles of Bc rows): K_j, V_j, the Q tile Q_i, dO_i, dS_ij (rows padded by one float), L_i and
    D_i. "backward_mma": K_j, V_j, two buffers each of Q_i and dO_i (float16, rows padded by 8
    halves: tile i+1 lands while tile i is used), dS_ijᵀ (Bc keys × Br queries, float16, padded
    by 8), and two of L_i, D_i (float32). "backward_mma_tf32": the same in float32, rows padded by
    4 floats.
    """
    if kernel == "backward":
        bc = backward_block(d_h)
        tile = 4 * bc * d_h
        return {"K_j": tile, "V_j": tile, "Q tile": tile, "dO_i": tile, "dS_ij": 4 * bc * (bc + 1), "L_i, D_i": 8 * bc}
    if kernel in ("backward_mma", "backward_mma_tf32"):
        br, bc = backward_tiles(kernel.removeprefix("backward_"), d_h)
        size, pad = (2, 8) if kernel == "backward_mma" else (4, 4)  # bytes per element, elements of padding a row
        kv, qo = size * bc * (d_h + pad), size * br * (d_h + pad)
        return {"K_j": kv, "V_j": kv, "Q_i": qo, "Q_i+1": qo, "dO_i": qo, "dO_i+1": qo,
                "dS_ijᵀ": size * bc * (br + pad), "L_i, D_i": 2 * 4 * br, "L_i+1, D_i+1": 2 * 4 * br}
    if kernel == "simt":
        br, bc = KERNELS["simt"].block_q, block_k("simt", d_h)
        return {"Q tile": 4 * d_h * br, "K_j": 4 * bc * d_h, "V_j": 4 * bc * d_h}
    if kernel in ("mma", "mma_tf32"):
        br, bc = KERNELS[kernel].block_q, block_k(kernel, d_h)
        size, pad = (2, 8) if kernel == "mma" else (4, 4)  # bytes per element, elements of padding a row
        kv = size * bc * (d_h + pad)
        return {"Q tile": size * br * (d_h + pad), "K_j": kv, "V_j": kv, "K_j+1": kv, "V_j+1": kv}
    br, bc = KERNELS["tensor_cores"].block_q, KERNELS["tensor_cores"].block_k
    return {"K_j": 2 * bc * (d_h + 8), "V_j": 2 * bc * (d_h + 8),
            "S (Q tile first)": max(4 * br * (bc + 4), 2 * br * (d_h + 8)),
            "P": 2 * br * (bc + 8), "O": 4 * br * (d_h + 4), "e^(m - m_new)": 4 * br}


@checked_by(checks.mma_fragment_layout)
def mma_fragment_layout(operand: str, shape: str = "m16n8k16"):
    """Where `mma.sync` keeps each element of an operand across a warp (the PTX ISA's tables).

    Returns (lane, reg, half), integer arrays shaped like the operand. shape "m16n8k16" (float16):
    A (16×16) and B (16×8, k × n) hold two halves to a 32-bit register (half 0: the low 16 bits);
    lane 4g + t holds rows g and g + 8 of A, columns 2t and 2t + 1 of each 8-column block; of B,
    column g and rows 2t, 2t + 1 of each 8-row block. shape "m16n8k8" (TF32): A (16×8) and B (8×8)
    hold one element a register (half 0); lane 4g + t holds A[g][t], A[g+8][t], A[g][t+4],
    A[g+8][t+4] and B[t][g], B[t+4][g]. C/D (16×8) are float32 for both, one a register: rows g
    and g + 8, columns 2t and 2t + 1.

    >>> lane, reg, _ = mma_fragment_layout("C")
    >>> int(lane[9, 3]), int(reg[9, 3])    # row 9 = g + 8 with g = 1; column 3 = 2t + 1 with t = 1
    (5, 3)
    """
    if operand == "C":
        r, c = np.indices((16, 8))
        return 4 * (r % 8) + c // 2, 2 * (r // 8) + c % 2, np.zeros_like(r)
    if operand == "A" and shape == "m16n8k16":
        r, c = np.indices((16, 16))
        return 4 * (r % 8) + (c % 8) // 2, r // 8 + 2 * (c // 8), c % 2
    if operand == "B" and shape == "m16n8k16":
        k, col = np.indices((16, 8))
        return 4 * col + (k % 8) // 2, k // 8, k % 2
    if operand == "A":
        r, c = np.indices((16, 8))
        return 4 * (r % 8) + c % 4, r // 8 + 2 * (c // 4), np.zeros_like(r)
    k, col = np.indices((8, 8))  # operand "B" of m16n8k8
    return 4 * col + k % 4, k // 4, np.zeros_like(k)


def tf32_round(x):
    """float32 numbers rounded to TF32, the tensor cores' float32 input: 10 of the 23 mantissa bits
    kept, to nearest, ties away from zero (PTX `cvt.rna.tf32.f32`), as float32. NumPy, on the host.

    >>> float(tf32_round(1 + 2**-11))   # half-way between 1 and 1 + 2^-10: away from zero
    1.0009765625
    """

    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)  # inf and NaN pass through
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)  # half of the last kept bit, then cut
    return np.where(finite, rounded, bits).view(np.float32)


def split_tf32(x):
    """x = hi + lo with hi, lo both TF32 (hi = tf32(x), lo = tf32(x - hi)): 21 of float32's 24 bits,
    so hi·hi' + hi·lo' + lo·hi' on tensor cores is nearly a float32 product ("3xTF32")."""

    x = np.asarray(x, dtype=np.float32)
    hi = tf32_round(x)
    return hi, tf32_round(x - hi)


def simt_shared_bytes(d_h: int) -> int:
    """Static shared memory per block of the SIMT kernel (must stay within 48 KiB)."""
    return sum(shared_memory_buffers("simt", d_h).values())


def dynamic_shared_bytes(kernel: str, d_h: int) -> int:
    """Dynamic shared memory per block of a kernel other than "simt": its buffers, each
    rounded up to 128 bytes as the kernels lay them out (their static_asserts check this covers
    their layout)."""
    return sum(-(-nbytes // 128) * 128 for nbytes in shared_memory_buffers(kernel, d_h).values())

@dataclass(frozen=True)
class LaunchPlan:
    """Everything the GPU needs besides the arrays."""
    kernel: Kernel
    options: tuple[str, ...]  # compiler flags: -D constants of this specialisation
    grid: tuple[int, int]     # (Tr, b·h): query tiles × (batch·head)
    block: tuple[int]         # threads per block
    shared_bytes: int         # dynamic shared memory per block (0: the kernel's is static)
    scalars: tuple            # n_q, n_k, h, h_kv, scale, causal as the kernel's int/float types
    tile: int = 0             # backward: Bc, the positions of a tile in packed rows' spans (packed_row_args)


def auto_kernel(dtype_name: str, compute_capability: int | None = None, wmma_headers: bool = True) -> str:
    """The kernel `kernel="auto"` stands for: the fastest one the GPU takes, as measured on an H100
    (benchmarks/results/gpu.md). From compute capability 8.0 (A100, H100), the register kernels:
    "mma" for float16, "mma_tf32" for float32. Before that, for float16 the WMMA kernel where the
    GPU has tensor cores (7.0) and CUDA's <mma.h> can be compiled (`wmma_headers`); else "simt".
    compute_capability None: a GPU new enough for every kernel.

    >>> auto_kernel("float16", 90), auto_kernel("float32", 90), auto_kernel("float16", 75), auto_kernel("float16", 60)
    ('mma', 'mma_tf32', 'tensor_cores', 'simt')
    """
    cc = 1000 if compute_capability is None else compute_capability
    if register_kernel := _register_kernel(dtype_name, cc, KERNELS):
        return register_kernel
    if dtype_name == "float16" and cc >= KERNELS["tensor_cores"].min_compute_capability and wmma_headers:
        return "tensor_cores"
    return "simt"


def _register_kernel(dtype_name: str, cc: int, table: dict) -> str | None:
    """The register kernel of `table` (KERNELS or BACKWARD_KERNELS) for dtype_name, "mma" for float16
    and "mma_tf32" for float32, where a GPU of compute capability cc takes it; else None."""
    name = {"float16": "mma", "float32": "mma_tf32"}.get(dtype_name)
    return name if name and cc >= table[name].min_compute_capability else None


@checked_by(checks.launch_plan)
def launch_plan(q_shape, k_shape, dtype_name: str, *, causal: bool, scale: float | None,
                kernel: str = "auto", compute_capability: int | None = None,
                wmma_headers: bool = True) -> LaunchPlan:
    """How to launch attention for q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) of dtype_name
    (kernel "auto": `auto_kernel` for that GPU and those headers)."""
    b, h, n_q, d_h = q_shape
    h_kv, n_k = k_shape[1], k_shape[2]
    if kernel == "auto":
        kernel = auto_kernel(dtype_name, compute_capability, wmma_headers)
    kern = KERNELS[kernel]
    if kernel == "simt":
        scalar = {"float32": "float", "float16": "__half"}[dtype_name]
        options = (f"-DD_H={d_h}", f"-DBR={kern.block_q}", f"-DBC={block_k(kernel, d_h)}", f"-DSCALAR_T={scalar}",
                   "-std=c++14")
        shared = 0
    else:
        shared = dynamic_shared_bytes(kernel, d_h)
        options = (f"-DD_H={d_h}", f"-DSMEM_BYTES={shared}", "-std=c++17")
        if kernel == "mma_tf32":
            options += (f"-DBC={block_k(kernel, d_h)}",)
        if kernel == "mma":  # its block size depends on d_h: the kernel checks it is the one launched
            options += (f"-DBLOCK_THREADS={block_threads(kernel, d_h)}",)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    return LaunchPlan(kernel=kern, options=options,
                      grid=(math.ceil(n_q / kern.block_q), b * h),  # Tr = ⌈n_q / Br⌉
                      block=(block_threads(kernel, d_h),), shared_bytes=shared,
                      scalars=(np.int32(n_q), np.int32(n_k), np.int32(h), np.int32(h_kv),
                               np.float32(scale), np.int32(bool(causal))))


@checked_by(checks.packed_row_args)
def packed_row_args(doc, block_q: int):  # [b, n] -> DOC [b, n], DOC_KEYS [b, Tr, 2], both int32
    """The kernels' DOC and DOC_KEYS (kernels/packed_rows.cuh) for packed rows, on the host.

    doc (b, n): the document index of each position, -1 for padding (`packing.pack_documents`).
    DOC numbers the documents of all rows 0, 1, … in order of their indices, so that any integer
    indices fit int32; padding stays -1. DOC_KEYS[r, t] = [first, end): the keys that the
    documents of query tile t (rows t·block_q … t·block_q + block_q − 1) span in batch row r,
    from the first position of any of them to one past the last; [n, 0), no key, for a tile of
    padding only.

    >>> doc = np.array([[0, 0, 0, 1, 1, 2, -1, -1]])       # three documents, two padding slots
    >>> packed_row_args(doc, 4)[1].tolist()                # tile 0: docs 0, 1; tile 1: docs 1, 2
    [[[0, 5], [3, 6]]]
    """
    doc = np.asarray(to_numpy(doc))  # a CuPy doc comes to the host: the spans are worked out there
    b, n = doc.shape
    n_tiles = -(-n // block_q)  # Tr = ⌈n / Br⌉
    # Runs: stretches of slots of one document (or of padding). Packing makes one run a document,
    # so the work below is on a few runs, not on every slot.
    starts = np.ones((b, n), dtype=bool)  # [b, n]: a run begins here
    starts[:, 1:] = doc[:, 1:] != doc[:, :-1]
    begin = np.flatnonzero(starts)  # [R] each run's first slot, as a flat index
    stop = np.append(begin[1:], b * n)  # [R] one past each run's last slot
    run = np.repeat(np.arange(len(begin)), stop - begin).reshape(b, n)  # [b, n]: the run of each slot
    row, run_doc = begin // n, doc.reshape(-1)[begin]  # [R], [R]
    lo, hi = begin % n, stop - row * n  # [R]: the run is slots [lo, hi) of its row
    # Documents numbered 0, 1, … in order of their indices (any integer fits int32 then); padding -1.
    ids, rank = np.unique(run_doc, return_inverse=True)  # [U], [R]
    rank = np.where(run_doc >= 0, rank - np.count_nonzero(ids < 0), -1)  # [R]
    dense = rank[run].astype(np.int32)  # [b, n]
    # A document's span in its row: from its first run's start to its last run's end (one run when
    # packed). Group the runs by (row, document) and take the least lo and the greatest hi.
    order = np.lexsort((rank, row))  # [R] runs by row, then document
    new = np.ones(len(order), dtype=bool)  # [R] in that order: a (row, document) group begins
    new[1:] = (row[order][1:] != row[order][:-1]) | (rank[order][1:] != rank[order][:-1])
    group = np.empty(len(order), dtype=np.int64)
    group[order] = np.cumsum(new) - 1  # [R]: the group of each run
    heads = np.flatnonzero(new)
    first = np.minimum.reduceat(lo[order], heads)[group]  # [R]: the span of each run's document
    end = np.maximum.reduceat(hi[order], heads)[group]
    first = np.where(rank >= 0, first, n).astype(np.int32)  # [R] padding: no key, [n, 0)
    end = np.where(rank >= 0, end, 0).astype(np.int32)
    lo_q = np.full((b, n_tiles * block_q), n, dtype=np.int32)  # [b, Tr·Br]: where each query's document starts,
    hi_q = np.zeros((b, n_tiles * block_q), dtype=np.int32)  # and one past where it ends; rows past n: padding
    lo_q[:, :n], hi_q[:, :n] = first[run], end[run]
    spans = np.stack([lo_q.reshape(b, n_tiles, block_q).min(axis=2),  # [b, Tr, 2]
                      hi_q.reshape(b, n_tiles, block_q).max(axis=2)], axis=-1)
    return dense, spans


@checked_by(checks.key_tiles_read)
def key_tiles_read(n: int, block_q: int, block_k: int, *, causal: bool, doc=None):  # -> [b, Tr, Tc] bool
    """Which key tiles the kernels read, as their loops bound them: [r, t, j] is True where the
    block of queries t·block_q … t·block_q + block_q − 1 in batch row r reads keys j·block_k …
    j·block_k + block_k − 1 (self-attention over n positions; b = 1 without doc). A block reads
    the key tiles from the one holding its documents' first key (`packed_row_args`; key 0
    without doc) up to the one holding its last visible key, which, causal, is no later than
    its own last row.

    >>> key_tiles_read(4, 2, 2, causal=True)[0].astype(int).tolist()     # the causal staircase
    [[1, 0], [1, 1]]
    >>> doc = np.array([[0, 0, 1, 1]])                                    # two documents of 2
    >>> key_tiles_read(4, 2, 2, causal=True, doc=doc)[0].astype(int).tolist()
    [[1, 0], [0, 1]]
    """
    n_q_tiles, n_k_tiles = -(-n // block_q), -(-n // block_k)  # Tr, Tc
    if doc is None:
        spans = np.tile([0, n], (1, n_q_tiles, 1))  # [1, Tr, 2]: every key a candidate
    else:
        _, spans = packed_row_args(doc, block_q)  # [b, Tr, 2]; doc was checked at this door
    first, end = spans[..., 0], spans[..., 1]  # [b, Tr]
    if causal:  # no key past the block's last row
        end = np.minimum(end, np.minimum(n, block_q * (np.arange(n_q_tiles) + 1)))  # [b, Tr]
    j = np.arange(n_k_tiles)  # [Tc]
    return ((j >= (first // block_k)[..., None]) & (j * block_k < end[..., None]))  # [b, Tr, Tc]


def backward_block(d_h: int) -> int:
    """Bc = Br of the backward kernel: 32 keys (and query rows) a tile; 16 at d_h = 128, so that
    its tiles fit the 48 KiB of static shared memory a block has."""
    return BACKWARD.block_k // 2 if d_h > 64 else BACKWARD.block_k


def backward_tiles(kernel: str, d_h: int) -> tuple[int, int]:
    """(Br, Bc) of a backward kernel: query rows a tile, keys a block. "simt": Br = Bc =
    `backward_block`. "mma": Bc = 64 keys, 16 a warp; Br = 64 query rows, 32 at d_h = 128, where a
    warp's rows of dK_j and dV_j already take 128 registers a lane. "mma_tf32": Bc = 64, Br = 32
    (float32 tiles: two blocks a multiprocessor at d_h = 64)."""
    if kernel == "simt":
        return backward_block(d_h), backward_block(d_h)
    kern = BACKWARD_KERNELS[kernel]
    return (kern.block_q // 2 if kernel == "mma" and d_h > 64 else kern.block_q), kern.block_k


def backward_shared_bytes(d_h: int, kernel: str = "simt") -> int:
    """Shared memory per block of a backward kernel. "simt", static: K_j, V_j, Q_i, dO_i (Bc × d_h
    float32 each), dS_ij (Bc × (Bc + 1), padded against bank conflicts), L_i and D_i. "mma" and
    "mma_tf32", dynamic: `shared_memory_buffers("backward_" + kernel, d_h)`, each rounded up to 128 bytes."""
    if kernel == "simt":
        return sum(shared_memory_buffers("backward", d_h).values())
    return dynamic_shared_bytes("backward_" + kernel, d_h)


def backward_auto_kernel(dtype_name: str, compute_capability: int | None = None) -> str:
    """The backward kernel `kernel="auto"` stands for: from compute capability 8.0 the tensor-core
    ones, "mma" for float16 and "mma_tf32" for float32; else "simt". compute_capability None: a GPU
    new enough for every kernel.

    >>> backward_auto_kernel("float16", 90), backward_auto_kernel("float32", 90), backward_auto_kernel("float16", 75)
    ('mma', 'mma_tf32', 'simt')
    """
    cc = 1000 if compute_capability is None else compute_capability
    return _register_kernel(dtype_name, cc, BACKWARD_KERNELS) or "simt"


@checked_by(checks.backward_launch_plan)
def backward_launch_plan(q_shape, k_shape, dtype_name: str, *, causal: bool, scale: float | None,
                         kernel: str = "auto", compute_capability: int | None = None) -> LaunchPlan:
    """How to launch a backward kernel for q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h): one block
    per (key tile of Bc keys, batch·head); "simt" with Bc threads, "mma" and "mma_tf32" with 4 warps. `tile` is
    Bc, the positions a tile of packed rows' spans covers (`packed_row_args(doc, plan.tile)`).
    kernel "auto": `backward_auto_kernel` for that GPU."""
    b, h, n_q, d_h = q_shape
    h_kv, n_k = k_shape[1], k_shape[2]
    if kernel == "auto":
        kernel = backward_auto_kernel(dtype_name, compute_capability)
    kern = BACKWARD_KERNELS[kernel]
    _, bc = backward_tiles(kernel, d_h)
    if kernel == "simt":
        scalar = {"float32": "float", "float16": "__half"}[dtype_name]
        options, shared, threads = (f"-DD_H={d_h}", f"-DBC={bc}", f"-DSCALAR_T={scalar}", "-std=c++14"), 0, bc
    else:
        shared = backward_shared_bytes(d_h, kernel)
        options, threads = (f"-DD_H={d_h}", f"-DSMEM_BYTES={shared}", "-std=c++17"), kern.threads
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    return LaunchPlan(kernel=kern, options=options,
                      grid=(math.ceil(n_k / bc), b * h),  # Tc = ⌈n_k / Bc⌉
                      block=(threads,), shared_bytes=shared,
                      scalars=(np.int32(n_q), np.int32(n_k), np.int32(h), np.int32(h_kv),
                               np.float32(scale), np.int32(bool(causal))), tile=bc)


def backward_rows(dout, out, lse):  # [b, h, n_q, d_h] ×2, [b, h, n_q] -> L, D [b, h, n_q] float32
    """What the backward kernel reads per query row besides Q, K, V, dO: L = lse with -∞ (a row
    that saw no key) as +∞, so that its P = e^(s - L) is 0, and D = rowsum(dO ∘ O). Any backend."""
    xp = get_xp(dout, out, lse)
    L = xp.astype(lse, xp.float32)
    L = xp.where(L == -math.inf, math.inf, L)  # [b, h, n_q]
    D = xp.sum(xp.astype(dout, xp.float32) * xp.astype(out, xp.float32), axis=-1)  # [b, h, n_q]
    return L, D


def sum_query_groups(g, h_kv: int):  # [b, h, n_k, d_h] -> [b, h_kv, n_k, d_h]
    """dK or dV per query head -> per key/value head: the h / h_kv query heads that read one
    key/value head (GQA/MQA) each add their part."""
    xp = get_xp(g)
    b, h, n_k, d_h = g.shape
    return xp.sum(xp.reshape(g, (b, h_kv, h // h_kv, n_k, d_h)), axis=2)
