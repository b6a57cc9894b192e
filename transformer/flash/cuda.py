"""FlashAttention's forward pass as real GPU kernels (CuPy), the tiles in shared memory.

`flash_attention_cuda(q, k, v, causal=...)` takes CuPy arrays with the shapes of
`scaled_dot_product_attention` — q (b, h, n_q, d_h), k and v (b, h_kv, n_k, d_h) — and runs
one of four CUDA kernels, all FlashAttention-2's loop order as in `transformer.flash`:

  "simt"          `kernels/flash_attention_fwd.cu`, the readable one: one thread per query
                  row on the ordinary cores (Br = 64 rows a block), K/V tiles of Bc = 32 keys
                  (16 for d_h = 128) in shared memory, m, l and the output row in registers.
                  float32 and float16.
  "tensor_cores"  `kernels/flash_attention_fwd_tc.cu`: 4 warps a block, each computing
                  S = Q Kᵀ and P V for 16 query rows on tensor cores (WMMA, 16×16×16 tiles),
                  K/V tiles of Bc = 64 keys; S and O pass through shared memory each tile,
                  since a WMMA fragment's layout is unspecified. float16 only.
  "mma"           `kernels/flash_attention_fwd_mma.cu`, built as FlashAttention-2 is: the PTX
                  instruction mma.sync.m16n8k16, whose fragment layout is documented, so S, P
                  and O stay in registers; Br = 128 rows a block, 32 a warp (16 at d_h = 128);
                  K/V tiles double-buffered with cp.async. float16, GPUs of compute
                  capability 8.0 (A100) or later.
  "mma_tf32"      `kernels/flash_attention_fwd_mma_tf32.cu`: the same for float32, on tensor
                  cores in TF32 (mma.sync.m16n8k8) with each number split into two TF32 parts
                  and three products per product ("3xTF32"), which keeps float32's accuracy.
                  Bc = 64 keys (32 for d_h = 128). Compute capability 8.0 or later.

"auto" (the default) takes the fastest kernel the GPU runs, as measured on an H100: "mma" for
float16 and "mma_tf32" for float32 from compute capability 8.0; before that, for float16,
"tensor_cores" where the GPU (7.0 or later) and the CUDA headers allow it; else "simt"
(`auto_kernel` is the rule as a pure function). All
accumulate in float32, skip causal tiles above the diagonal, handle any n, n_q ≠ n_k and
GQA/MQA, and take packed rows (doc=, kernels/packed_rows.cuh: `packed_row_args` gives each
block the keys its documents span, and only key tiles inside it are read). `launch_plan` is the host side as a pure function (what to compile, how many blocks,
how much shared memory), so it is tested without a GPU; the kernels themselves are tested on
the CPU by running their CUDA C on threads (tests/cuda_emulator.py) and on a GPU where there is one.

Only this module is CuPy-specific: the kernels are CUDA C and need a GPU. Everything else in
the package runs on CuPy arrays through the same `xp` code as on NumPy.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..core import checks as core_checks
from ..backend import import_cupy, get_xp, to_numpy
from ..require import require_array, require_bool, require_int
from .tiled import _check_backward, _check_doc

__all__ = ["flash_attention_cuda", "flash_attention_backward_cuda", "KERNELS", "BACKWARD", "backward_block", "block_threads",
           "backward_shared_bytes", "backward_launch_plan", "HEAD_SIZES", "check_inputs", "launch_plan", "LaunchPlan",
           "block_k", "shared_memory_buffers", "packed_row_args", "key_tiles_read", "simt_shared_bytes", "dynamic_shared_bytes", "kernel_source", "check_device", "mma_fragment_layout",
           "tf32_round", "split_tf32", "header_options", "toolkit_include_dirs", "auto_kernel",
           "wmma_include"]

_DIR = Path(__file__).with_name("kernels")
NULL = np.uint64(0)  # a null pointer as a kernel argument: DOC and DOC_KEYS without packed rows
HEAD_SIZES = (32, 64, 128)  # d_h is compiled in as a constant so the inner loops unroll


@dataclass(frozen=True)
class Kernel:
    source: Path
    name: str        # the extern "C" function in the source
    block_q: int     # Br: query rows per block
    block_k: int     # Bc: keys per K/V tile (halved for d_h = 128 where `block_k()` says)
    threads: int     # threads per block
    dtypes: tuple[str, ...]
    min_compute_capability: int  # 50: any GPU CUDA 12 builds for; 70: WMMA; 80: cp.async, mma.m16n8k16


KERNELS = {
    "simt": Kernel(_DIR / "flash_attention_fwd.cu", "flash_attention_fwd", 64, 32, 64, ("float32", "float16"), 50),
    "tensor_cores": Kernel(_DIR / "flash_attention_fwd_tc.cu", "flash_attention_fwd_tc", 64, 64, 128, ("float16",), 70),
    "mma": Kernel(_DIR / "flash_attention_fwd_mma.cu", "flash_attention_fwd_mma", 128, 64, 128, ("float16",), 80),
    "mma_tf32": Kernel(_DIR / "flash_attention_fwd_mma_tf32.cu", "flash_attention_fwd_mma_tf32", 64, 64, 128,
                       ("float32",), 80),
}


# The backward pass (one kernel, SIMT): one block per key tile, a thread per key row.
BACKWARD = Kernel(_DIR / "flash_attention_bwd.cu", "flash_attention_bwd", 32, 32, 32, ("float32", "float16"), 50)


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
    buffers in float32, rows padded by 4 floats. "backward" (the backward kernel, float32 tiles
    of Bc rows): K_j, V_j, the Q tile Q_i, dO_i, dS_ij (rows padded by one float), L_i and D_i.
    """
    if kernel == "backward":
        bc = backward_block(d_h)
        tile = 4 * bc * d_h
        return {"K_j": tile, "V_j": tile, "Q tile": tile, "dO_i": tile, "dS_ij": 4 * bc * (bc + 1), "L_i, D_i": 8 * bc}
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

    if shape not in ("m16n8k16", "m16n8k8"):
        raise ValueError(f"shape must be 'm16n8k16' (float16) or 'm16n8k8' (TF32), got {shape!r}")
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
    if operand == "B":
        k, col = np.indices((8, 8))
        return 4 * col + k % 4, k // 4, np.zeros_like(k)
    raise ValueError(f"operand must be 'A', 'B' or 'C', got {operand!r}")


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


def check_inputs(q_shape, k_shape, v_shape, dtypes, kernel: str = "auto") -> None:
    """Clear errors for shapes, dtypes and kernel choices the kernels cannot take."""
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(shape) != 4:
            raise ValueError(f"{name} must have 4 dims (b, heads, n, d_h), got shape {tuple(shape)}")
    names = [str(d) for d in dtypes]
    if len(set(names)) != 1 or names[0] not in ("float32", "float16"):
        raise TypeError(f"q, k, v must all be float32 or all float16, got {', '.join(names)}")
    b, h, n_q, d_h = q_shape
    _, h_kv, n_k, _ = k_shape
    if tuple(k_shape) != tuple(v_shape) or k_shape[0] != b or k_shape[3] != d_h:
        raise ValueError(f"k {tuple(k_shape)} and v {tuple(v_shape)} must be (b={b}, h_kv, n_k, d_h={d_h})")
    if h_kv < 1 or h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    if d_h not in HEAD_SIZES:
        raise ValueError(f"the kernels are compiled for d_h in {HEAD_SIZES}, got d_h={d_h}")
    _check_kernel_name(kernel)
    if kernel != "auto":
        if names[0] not in KERNELS[kernel].dtypes:
            raise TypeError(f"kernel={kernel!r} takes {' or '.join(KERNELS[kernel].dtypes)}, got {names[0]}")


@dataclass(frozen=True)
class LaunchPlan:
    """Everything the GPU needs besides the arrays."""
    kernel: Kernel
    options: tuple[str, ...]  # compiler flags: -D constants of this specialisation
    grid: tuple[int, int]     # (Tr, b·h): query tiles × (batch·head)
    block: tuple[int]         # threads per block
    shared_bytes: int         # dynamic shared memory per block (0: the kernel's is static)
    scalars: tuple            # n_q, n_k, h, h_kv, scale, causal as the kernel's int/float types


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
    register_kernel = {"float16": "mma", "float32": "mma_tf32"}.get(dtype_name)
    if register_kernel and cc >= KERNELS[register_kernel].min_compute_capability:
        return register_kernel
    if dtype_name == "float16" and cc >= KERNELS["tensor_cores"].min_compute_capability and wmma_headers:
        return "tensor_cores"
    return "simt"


def _check_plan_options(causal, scale, kernel):
    """The host-side options, as the CPU `flash_attention` checks them."""
    require_bool(causal=causal)
    core_checks.optional_scale(scale)
    _check_kernel_name(kernel)


def _check_kernel_name(kernel):
    if kernel != "auto" and kernel not in KERNELS:
        raise ValueError(f"kernel={kernel!r}: use 'auto', {', '.join(repr(k) for k in KERNELS)}")


def launch_plan(q_shape, k_shape, dtype_name: str, *, causal: bool, scale: float | None,
                kernel: str = "auto", compute_capability: int | None = None,
                wmma_headers: bool = True) -> LaunchPlan:
    """How to launch attention for q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) of dtype_name
    (kernel "auto": `auto_kernel` for that GPU and those headers)."""

    _check_plan_options(causal, scale, kernel)
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
    require_array("doc", doc)
    require_int(block_q=block_q, low=1)
    doc = np.asarray(to_numpy(doc))  # a CuPy doc comes to the host: the spans are worked out there
    if doc.ndim != 2 or not np.issubdtype(doc.dtype, np.integer):
        raise ValueError(f"doc must be a (b, n) integer array of document indices, got dtype {doc.dtype}, "
                         f"shape {doc.shape}")
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
    require_int(n=n, block_q=block_q, block_k=block_k, low=1)
    require_bool(causal=causal)
    n_q_tiles, n_k_tiles = -(-n // block_q), -(-n // block_k)  # Tr, Tc
    if doc is None:
        spans = np.tile([0, n], (1, n_q_tiles, 1))  # [1, Tr, 2]: every key a candidate
    else:
        dense, spans = packed_row_args(doc, block_q)  # [b, n], [b, Tr, 2]
        if dense.shape[1] != n:
            raise ValueError(f"doc must hold n={n} positions a row, got shape {dense.shape}")
    first, end = spans[..., 0], spans[..., 1]  # [b, Tr]
    if causal:  # no key past the block's last row
        end = np.minimum(end, np.minimum(n, block_q * (np.arange(n_q_tiles) + 1)))  # [b, Tr]
    j = np.arange(n_k_tiles)  # [Tc]
    return ((j >= (first // block_k)[..., None]) & (j * block_k < end[..., None]))  # [b, Tr, Tc]


def backward_block(d_h: int) -> int:
    """Bc = Br of the backward kernel: 32 keys (and query rows) a tile; 16 at d_h = 128, so that
    its tiles fit the 48 KiB of static shared memory a block has."""
    return BACKWARD.block_k // 2 if d_h > 64 else BACKWARD.block_k


def backward_shared_bytes(d_h: int) -> int:
    """Static shared memory per block of the backward kernel: K_j, V_j, Q_i, dO_i (Bc × d_h
    float32 each), dS_ij (Bc × (Bc + 1), padded against bank conflicts), L_i and D_i."""
    return sum(shared_memory_buffers("backward", d_h).values())


def backward_launch_plan(q_shape, k_shape, dtype_name: str, *, causal: bool, scale: float | None) -> LaunchPlan:
    """How to launch the backward kernel for q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h): one
    block of Bc threads per (key tile, batch·head)."""
    _check_plan_options(causal, scale, "auto")
    b, h, n_q, d_h = q_shape
    h_kv, n_k = k_shape[1], k_shape[2]
    bc = backward_block(d_h)
    scalar = {"float32": "float", "float16": "__half"}[dtype_name]
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    return LaunchPlan(kernel=BACKWARD, options=(f"-DD_H={d_h}", f"-DBC={bc}", f"-DSCALAR_T={scalar}", "-std=c++14"),
                      grid=(math.ceil(n_k / bc), b * h),  # Tc = ⌈n_k / Bc⌉
                      block=(bc,), shared_bytes=0,
                      scalars=(np.int32(n_q), np.int32(n_k), np.int32(h), np.int32(h_kv),
                               np.float32(scale), np.int32(bool(causal))))


def _backward_rows(dout, out, lse):  # [b, h, n_q, d_h] ×2, [b, h, n_q] -> L, D [b, h, n_q] float32
    """What the backward kernel reads per query row besides Q, K, V, dO: L = lse with -∞ (a row
    that saw no key) as +∞, so that its P = e^(s - L) is 0, and D = rowsum(dO ∘ O). Any backend."""
    xp = get_xp(dout, out, lse)
    L = xp.astype(lse, xp.float32)
    L = xp.where(L == -math.inf, math.inf, L)  # [b, h, n_q]
    D = xp.sum(xp.astype(dout, xp.float32) * xp.astype(out, xp.float32), axis=-1)  # [b, h, n_q]
    return L, D


def _sum_query_groups(g, h_kv: int):  # [b, h, n_k, d_h] -> [b, h_kv, n_k, d_h]
    """dK or dV per query head -> per key/value head: the h / h_kv query heads that read one
    key/value head (GQA/MQA) each add their part."""
    xp = get_xp(g)
    b, h, n_k, d_h = g.shape
    return xp.sum(xp.reshape(g, (b, h_kv, h // h_kv, n_k, d_h)), axis=2)


def kernel_source(source: Path, headers: Path | None = None) -> str:
    """A kernel's CUDA C with its local headers (`#include "x.cuh"`, from the folder `headers`,
    by default the source's own) pasted in, so the text handed to the compiler, and so CuPy's
    cache key, changes whenever a header does."""
    folder = source.parent if headers is None else headers
    pasted = set()

    def paste(text):  # text with its local headers' texts in place of their #include lines
        return re.sub(r'^#include "([\w.]+)"$', header, text, flags=re.M)

    def header(match):  # its text with its own headers, once (`#pragma once`, which is dropped)
        if match.group(1) in pasted:
            return ""
        pasted.add(match.group(1))
        return paste(re.sub(r"^#pragma once\n", "", (folder / match.group(1)).read_text(), flags=re.M))
    return paste(source.read_text())


def check_device(kernel: Kernel, compute_capability: int) -> None:
    """A clear error where the GPU is too old for `kernel` (compute capability as 80 for 8.0)."""
    need = kernel.min_compute_capability
    if compute_capability < need:
        raise RuntimeError(f"{kernel.source.name} needs a GPU of compute capability {need // 10}.{need % 10} or later, "
                           f"this one is {compute_capability // 10}.{compute_capability % 10}")


def toolkit_include_dirs() -> list[Path]:
    """CUDA header folders besides CuPy's own: $CUDA_PATH, $CUDA_HOME, /usr/local/cuda, and the
    `nvidia-cuda-crt` wheel's (found through its metadata, never imported)."""
    import os
    from importlib.metadata import PackageNotFoundError, distribution

    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    folders = [Path(r) / "include" for r in roots if r]
    try:
        crt = distribution("nvidia-cuda-crt")
        folders += [Path(crt.locate_file(f)).parent.parent for f in crt.files or ()
                    if str(f).endswith("include/crt/mma.h")]
    except PackageNotFoundError:
        pass
    return folders


def wmma_include(cuda_include: Path | None, candidates) -> tuple[str, ...] | None:
    """What NVRTC needs to compile CUDA's <mma.h> (the WMMA kernel): it reads crt/mma.h, which the
    CUDA wheels that `pip install cupy-cuda13x[ctk]` brings leave out (it ships in `nvidia-cuda-crt`).
    () where CuPy's own header folder `cuda_include` has it; else `-I` the first of `candidates`
    that does; None where none does."""
    def has_crt(folder) -> bool:
        return folder is not None and (Path(folder) / "crt" / "mma.h").is_file()

    if has_crt(cuda_include):
        return ()
    return next(((f"-I{folder}",) for folder in candidates if has_crt(folder)), None)


def header_options(source: str, cuda_include: Path | None, candidates) -> tuple[str, ...]:
    """`-I` options NVRTC needs beyond CuPy's own CUDA headers (the folder `cuda_include`) to
    compile `source`: only a kernel that includes <mma.h> may need one (`wmma_include`); where
    no folder has what it needs, a RuntimeError that says what to install."""
    if "#include <mma.h>" not in source:
        return ()
    found = wmma_include(cuda_include, candidates)
    if found is not None:
        return found
    raise RuntimeError(
        f"kernel='tensor_cores' includes <mma.h>, which needs crt/mma.h, and CuPy's CUDA headers "
        f"({cuda_include}) lack it: pip install nvidia-cuda-crt (CUDA 13; it is in requirements-dev.txt), "
        f"or set CUDA_PATH to a CUDA toolkit, or use kernel='mma'")


def _cupy_include(cupy) -> Path | None:
    """The CUDA header folder CuPy compiles with."""
    cuda_path = cupy.cuda.get_cuda_path()
    return Path(cuda_path) / "include" if cuda_path else None


@lru_cache(maxsize=None)
def _device_facts(device_id: int) -> tuple[int, bool]:
    """This GPU's compute capability (as 90 for 9.0) and whether <mma.h> compiles here."""
    cupy = import_cupy()
    found = wmma_include(_cupy_include(cupy), toolkit_include_dirs())
    return int(cupy.cuda.Device(device_id).compute_capability), found is not None


@lru_cache(maxsize=None)
def _compiled(kernel: Kernel, options: tuple[str, ...], shared_bytes: int, device_id: int):
    cupy = import_cupy()
    check_device(kernel, _device_facts(device_id)[0])  # once, before the first build
    source = kernel_source(kernel.source)
    options += header_options(source, _cupy_include(cupy), toolkit_include_dirs())
    fn = cupy.RawKernel(source, kernel.name, options=options)
    fn.compile()  # now, so that a compile error surfaces here and not at the first launch
    if shared_bytes > 48 * 1024:  # past the portable 48 KiB a kernel must opt in
        fn.max_dynamic_shared_size_bytes = shared_bytes
    return fn


def flash_attention_cuda(q, k, v, *, causal: bool = False, scale: float | None = None,
                         return_lse: bool = False, kernel: str = "auto", doc=None):
    """softmax(Q Kᵀ/√d_h [+ causal mask]) V on the GPU without forming the n×n matrix.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) CuPy arrays -> out (b, h, n_q, d_h) in q's dtype,
    and lse (b, h, n_q) float32 = log Σ_j e^(s_ij) if return_lse. Causal uses the offset
    n_k - n_q (queries are the last positions), as `transformer.causal_mask` does.
    kernel: "auto", "simt", "tensor_cores", "mma" (those two float16 only) or "mma_tf32" (float32
    only); see the module docstring. A NaN or ∞ in q or k gives NaN in the rows torch's softmax
    makes NaN (never a silent 0); a NaN in v reaches the rows whose blocks read its key tile, also
    where a mask hides the key (0 · NaN; torch's dense P V: every row). A row whose scores are all
    -∞ counts as one that saw no key (O = 0, lse = -∞). With "mma_tf32" (float32's "auto" from
    compute capability 8.0) an ∞ input makes every row that sees it NaN.
    doc: packed rows, as in `flash_attention`: (b, n) document index of each position (-1 =
    padding, n = n_q = n_k); a query reads only keys of its own document, key tiles outside its
    tile's documents are skipped (`packed_row_args`), and padding rows get zeros, lse = -∞.
    """
    cupy = import_cupy()
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, cupy.ndarray):
            raise TypeError(f"{name} must be a CuPy array on the GPU, got {type(t).__name__}")
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), kernel)
    b, h, n_q, d_h = q.shape
    docs = _check_doc(doc, b, n_q, k.shape[2])  # None or (on the host, as given)
    # contiguous, and 16-byte aligned for the tensor-core kernel's 16-byte loads
    q, k, v = (t if t.flags.c_contiguous and t.data.ptr % 16 == 0 else t.copy() for t in (q, k, v))
    out = cupy.empty_like(q)  # [b, h, n_q, d_h]
    lse = cupy.empty((b, h, n_q), dtype=cupy.float32)  # [b, h, n_q]
    if n_q == 0 or b * h == 0:
        return (out, lse) if return_lse else out
    device_id = cupy.cuda.get_device_id()
    compute_capability, wmma_headers = _device_facts(device_id)
    plan = launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale, kernel=kernel,
                       compute_capability=compute_capability, wmma_headers=wmma_headers)
    fn = _compiled(plan.kernel, plan.options, plan.shared_bytes, device_id)
    packed = (NULL, NULL) if docs is None else tuple(cupy.asarray(a) for a in packed_row_args(docs[0], plan.kernel.block_q))
    fn(plan.grid, plan.block, (q, k, v, out, lse, *plan.scalars, *packed), shared_mem=plan.shared_bytes)
    return (out, lse) if return_lse else out


def flash_attention_backward_cuda(dout, q, k, v, out, lse, *, causal: bool = False, scale: float | None = None,
                                  doc=None):
    """The gradients of `flash_attention_cuda` on the GPU, by recomputation (kernels/flash_attention_bwd.cu).

    dout, q, out (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) CuPy arrays, float32 or float16, and
    lse (b, h, n_q) float32 from `flash_attention_cuda(..., return_lse=True)` -> dq (b, h, n_q, d_h),
    dk, dv (b, h_kv, n_k, d_h) in q's dtype. The same formulas as `flash_attention_backward`: P is
    rebuilt tile by tile from the saved lse, never whole; accumulation in float32.
    doc: the packed rows' document indices given to the forward pass (see `flash_attention_cuda`);
    a key tile then visits only the query tiles of its documents.
    """
    cupy = import_cupy()
    for name, t in (("dout", dout), ("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse)):
        if not isinstance(t, cupy.ndarray):
            raise TypeError(f"{name} must be a CuPy array on the GPU, got {type(t).__name__}")
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype), "simt")
    _check_backward(q, k, v, causal, scale, dout=dout, out=out, lse=lse)
    if dout.dtype != q.dtype:
        raise TypeError(f"dout must have q's dtype {q.dtype}, got {dout.dtype}")
    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    docs = _check_doc(doc, b, n_q, n_k)  # None or (on the host, as given)
    q, k, v, dout = (t if t.flags.c_contiguous else cupy.ascontiguousarray(t) for t in (q, k, v, dout))
    L, D = _backward_rows(dout, out, lse)  # [b, h, n_q] float32 each
    dq = cupy.zeros((b, h, n_q, d_h), dtype=cupy.float32)  # [b, h, n_q, d_h] the blocks add to it
    dk = cupy.zeros((b, h, n_k, d_h), dtype=cupy.float32)  # [b, h, n_k, d_h] per query head
    dv = cupy.zeros((b, h, n_k, d_h), dtype=cupy.float32)
    if n_q and n_k and b * h:
        plan = backward_launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale)
        device_id = cupy.cuda.get_device_id()
        fn = _compiled(plan.kernel, plan.options, 0, device_id)
        packed = (NULL, NULL) if docs is None else tuple(cupy.asarray(a) for a in packed_row_args(docs[0], plan.block[0]))
        fn(plan.grid, plan.block, (q, k, v, dout, cupy.ascontiguousarray(L), cupy.ascontiguousarray(D),
                                   dq, dk, dv, *plan.scalars, *packed))
    return (dq.astype(q.dtype), _sum_query_groups(dk, h_kv).astype(k.dtype),  # [b, h_kv, n_k, d_h]
            _sum_query_groups(dv, h_kv).astype(v.dtype))
