"""The CUDA kernels of `flash/kernels/`, as a table: their files, names, tile sizes and needs.

One row per kernel: the .cu file, its extern "C" function, Br (query rows a block), Bc (keys a
K/V tile), threads a block, the dtypes it takes and the oldest GPU it runs on. The arithmetic
on this table (tile sizes per d_h, shared memory, launch plans) is in `cuda_kernels.py`; the
compiling and launching in `cuda.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Kernel", "KERNELS", "BACKWARD", "BACKWARD_KERNELS", "HEAD_SIZES", "KERNEL_DIR"]

KERNEL_DIR = Path(__file__).with_name("kernels")  # the .cu files and their .cuh headers
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
    "simt": Kernel(KERNEL_DIR / "flash_attention_fwd.cu", "flash_attention_fwd", 64, 32, 64, ("float32", "float16"), 50),
    "tensor_cores": Kernel(KERNEL_DIR / "flash_attention_fwd_tc.cu", "flash_attention_fwd_tc", 64, 64, 128, ("float16",), 70),
    "mma": Kernel(KERNEL_DIR / "flash_attention_fwd_mma.cu", "flash_attention_fwd_mma", 128, 64, 128, ("float16",), 80),
    "mma_tf32": Kernel(KERNEL_DIR / "flash_attention_fwd_mma_tf32.cu", "flash_attention_fwd_mma_tf32", 64, 64, 128,
                       ("float32",), 80),
}


# The backward pass: one block per key tile, which owns dK_j and dV_j and loops over the query
# tiles. "simt", the readable one: a thread per key row (Br = Bc). "mma": 4 warps of 16 keys on
# tensor cores (mma.sync.m16n8k16), query tiles of 64 rows (32 at d_h = 128). "mma_tf32": the same
# for float32 in TF32 (mma.sync.m16n8k8, three products a product: "3xTF32"), query tiles of 32 rows.
BACKWARD_KERNELS = {
    "simt": Kernel(KERNEL_DIR / "flash_attention_bwd.cu", "flash_attention_bwd", 32, 32, 32, ("float32", "float16"), 50),
    "mma": Kernel(KERNEL_DIR / "flash_attention_bwd_mma.cu", "flash_attention_bwd_mma", 64, 64, 128, ("float16",), 80),
    "mma_tf32": Kernel(KERNEL_DIR / "flash_attention_bwd_mma_tf32.cu", "flash_attention_bwd_mma_tf32", 32, 64, 128,
                       ("float32",), 80),
}
BACKWARD = BACKWARD_KERNELS["simt"]
