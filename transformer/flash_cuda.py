"""FlashAttention's forward pass as a real GPU kernel (CuPy), the tiles in shared memory.

`flash_attention_cuda(q, k, v, causal=...)` takes CuPy arrays with the shapes of
`scaled_dot_product_attention` — q (b, h, n_q, d_h), k and v (b, h_kv, n_k, d_h) — and runs
`kernels/flash_attention_fwd.cu`: one thread block per (batch·head, tile of Br query rows),
K/V tiles of Bc keys staged through shared memory (SRAM), the online-softmax statistics m
and l and the output row in registers, causal tiles above the diagonal skipped. float32 and
float16 inputs, float32 accumulation, any n. It mirrors `transformer.flash` (FA-2 loop order).

Only this module is CuPy-specific: the kernel is CUDA C and needs a GPU. Everything else in
the package runs on CuPy arrays through the same `xp` code as on NumPy.
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from .backend import _cupy

__all__ = ["flash_attention_cuda", "KERNEL_SOURCE", "BLOCK_Q", "BLOCK_K", "HEAD_SIZES", "kernel_options"]

KERNEL_SOURCE = Path(__file__).with_name("kernels") / "flash_attention_fwd.cu"
BLOCK_Q = 64   # Br: query rows per thread block = threads per block (one row each)
BLOCK_K = 32   # Bc: keys per shared-memory tile; s[Bc] and acc[d_h] stay in registers
HEAD_SIZES = (32, 64, 128)  # d_h compiled as a constant so the inner loops unroll


def kernel_options(d_h: int, dtype_name: str) -> tuple[str, ...]:
    """The -D flags that specialise the kernel for one head size and element type."""
    scalar = {"float32": "float", "float16": "__half"}[dtype_name]
    return (f"-DD_H={d_h}", f"-DBR={BLOCK_Q}", f"-DBC={BLOCK_K}", f"-DSCALAR_T={scalar}", "-std=c++14")


@lru_cache(maxsize=None)
def _kernel(d_h: int, dtype_name: str):
    cupy = _cupy()
    module = cupy.RawModule(code=KERNEL_SOURCE.read_text(), options=kernel_options(d_h, dtype_name))
    return module.get_function("flash_attention_fwd")


def _check(q, k, v):
    cupy = _cupy()
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, cupy.ndarray):
            raise TypeError(f"{name} must be a CuPy array on the GPU, got {type(t).__name__}")
        if t.ndim != 4:
            raise ValueError(f"{name} must have 4 dims (b, heads, n, d_h), got shape {tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype.name not in ("float32", "float16"):
        raise TypeError(f"q, k, v must all be float32 or all float16, got {q.dtype}, {k.dtype}, {v.dtype}")
    b, h, n_q, d_h = q.shape
    _, h_kv, n_k, _ = k.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d_h:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must be (b={b}, h_kv, n_k, d_h={d_h})")
    if h_kv < 1 or h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    if d_h not in HEAD_SIZES:
        raise ValueError(f"the kernel is compiled for d_h in {HEAD_SIZES}, got d_h={d_h}")


def flash_attention_cuda(q, k, v, *, causal: bool = False, scale: float | None = None,
                         return_lse: bool = False):
    """softmax(Q Kᵀ/√d_h [+ causal mask]) V on the GPU without forming the n×n matrix.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) CuPy arrays -> out (b, h, n_q, d_h) in q's dtype,
    and lse (b, h, n_q) float32 = log Σ_j e^(s_ij) if return_lse. Causal uses the offset
    n_k - n_q (queries are the last positions), as `transformer.causal_mask` does.
    """
    _check(q, k, v)
    cupy = _cupy()
    import numpy as np

    b, h, n_q, d_h = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    q, k, v = (cupy.ascontiguousarray(t) for t in (q, k, v))
    out = cupy.empty_like(q)  # [b, h, n_q, d_h]
    lse = cupy.empty((b, h, n_q), dtype=cupy.float32)  # [b, h, n_q]
    if n_q == 0 or b * h == 0:
        return (out, lse) if return_lse else out
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    grid = (math.ceil(n_q / BLOCK_Q), b * h)  # Tr query tiles × (batch·head)
    _kernel(d_h, q.dtype.name)(grid, (BLOCK_Q,), (q, k, v, out, lse, np.int32(n_q), np.int32(n_k),
                                                   np.int32(h), np.int32(h_kv), np.float32(scale),
                                                   np.int32(bool(causal))))
    return (out, lse) if return_lse else out
