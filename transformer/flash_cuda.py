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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .backend import _cupy

__all__ = ["flash_attention_cuda", "KERNEL_SOURCE", "BLOCK_Q", "BLOCK_K", "HEAD_SIZES", "kernel_options",
           "check_inputs", "launch_plan", "LaunchPlan"]

KERNEL_SOURCE = Path(__file__).with_name("kernels") / "flash_attention_fwd.cu"
BLOCK_Q = 64   # Br: query rows per thread block = threads per block (one row each)
BLOCK_K = 32   # Bc: keys per shared-memory tile; s[Bc] and acc[d_h] stay in registers
HEAD_SIZES = (32, 64, 128)  # d_h compiled as a constant so the inner loops unroll


def kernel_options(d_h: int, dtype_name: str) -> tuple[str, ...]:
    """The -D flags that specialise the kernel for one head size and element type."""
    scalar = {"float32": "float", "float16": "__half"}[dtype_name]
    return (f"-DD_H={d_h}", f"-DBR={BLOCK_Q}", f"-DBC={BLOCK_K}", f"-DSCALAR_T={scalar}", "-std=c++14")


@lru_cache(maxsize=None)
def _kernel(options: tuple[str, ...]):
    cupy = _cupy()
    module = cupy.RawModule(code=KERNEL_SOURCE.read_text(), options=options)
    return module.get_function("flash_attention_fwd")


def check_inputs(q_shape, k_shape, v_shape, dtypes) -> None:
    """Clear errors for shapes and dtypes the kernel cannot take (the arrays' own checks aside)."""
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
        raise ValueError(f"the kernel is compiled for d_h in {HEAD_SIZES}, got d_h={d_h}")


@dataclass(frozen=True)
class LaunchPlan:
    """Everything the GPU needs besides the arrays: which kernel, how many blocks, the scalars."""
    options: tuple[str, ...]  # -D flags: the compiled specialisation
    grid: tuple[int, int]     # (Tr, b·h): query tiles × (batch·head)
    block: tuple[int]         # (Br,): one thread per query row
    scalars: tuple            # n_q, n_k, h, h_kv, scale, causal as the kernel's int/float types


def launch_plan(q_shape, k_shape, dtype_name: str, *, causal: bool, scale: float | None) -> LaunchPlan:
    """The launch of `kernels/flash_attention_fwd.cu` for q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h)."""
    import numpy as np

    b, h, n_q, d_h = q_shape
    h_kv, n_k = k_shape[1], k_shape[2]
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    return LaunchPlan(options=kernel_options(d_h, dtype_name),
                      grid=(math.ceil(n_q / BLOCK_Q), b * h),  # Tr = ⌈n_q / Br⌉
                      block=(BLOCK_Q,),
                      scalars=(np.int32(n_q), np.int32(n_k), np.int32(h), np.int32(h_kv),
                               np.float32(scale), np.int32(bool(causal))))


def flash_attention_cuda(q, k, v, *, causal: bool = False, scale: float | None = None,
                         return_lse: bool = False):
    """softmax(Q Kᵀ/√d_h [+ causal mask]) V on the GPU without forming the n×n matrix.

    q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h) CuPy arrays -> out (b, h, n_q, d_h) in q's dtype,
    and lse (b, h, n_q) float32 = log Σ_j e^(s_ij) if return_lse. Causal uses the offset
    n_k - n_q (queries are the last positions), as `transformer.causal_mask` does.
    """
    cupy = _cupy()
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, cupy.ndarray):
            raise TypeError(f"{name} must be a CuPy array on the GPU, got {type(t).__name__}")
    check_inputs(q.shape, k.shape, v.shape, (q.dtype, k.dtype, v.dtype))
    b, h, n_q, d_h = q.shape
    q, k, v = (cupy.ascontiguousarray(t) for t in (q, k, v))
    out = cupy.empty_like(q)  # [b, h, n_q, d_h]
    lse = cupy.empty((b, h, n_q), dtype=cupy.float32)  # [b, h, n_q]
    if n_q == 0 or b * h == 0:
        return (out, lse) if return_lse else out
    plan = launch_plan(q.shape, k.shape, q.dtype.name, causal=causal, scale=scale)
    _kernel(plan.options)(plan.grid, plan.block, (q, k, v, out, lse, *plan.scalars))
    return (out, lse) if return_lse else out
