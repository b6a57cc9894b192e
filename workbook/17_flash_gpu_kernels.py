"""Workbook, lesson 17 · FlashAttention on the GPU: the CUDA kernels (`lessons/17_flash_gpu_kernels.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 17

No GPU is needed: the function is the table a kernel's indexing follows. A warp is 32 lanes;
`mma.sync` multiplies tiles whose elements are spread over the lanes' registers, and a kernel
must know which lane holds which score to take a row's max or write O back.
"""
from __future__ import annotations

import numpy as np


def mma_fragment_layout(operand: str, shape: str = "m16n8k16"):  # -> (lane, reg, half), each shaped like the operand
    """Where `mma.sync` keeps each element of an operand across a warp (the PTX ISA's tables).

    Returns (lane, reg, half): three integer arrays shaped like the operand, giving for each element
    the lane (0 … 31) that holds it, the register (0, 1, …) of that lane, and the half of the 32-bit
    register (0: the low 16 bits). With g = lane // 4 and t = lane % 4:

    shape "m16n8k16" (float16 A and B, two to a register):
        A (16, 16): lane 4g + t holds rows g and g + 8, columns 2t and 2t + 1 of each 8-column block;
                    registers a0: row g, a1: row g + 8 of columns 0 … 7, a2, a3: the same of columns 8 … 15;
                    the even column in the low half
        B (16, 8), k × n: lane 4g + t holds column g, rows 2t and 2t + 1 of each 8-row block;
                    b0: rows 0 … 7, b1: rows 8 … 15; the even row in the low half
    shape "m16n8k8" (TF32 A and B, one to a register, half 0):
        A (16, 8):  lane 4g + t holds A[g][t] (a0), A[g + 8][t] (a1), A[g][t + 4] (a2), A[g + 8][t + 4] (a3)
        B (8, 8):   lane 4g + t holds B[t][g] (b0) and B[t + 4][g] (b1)
    C (16, 8), the float32 result of both, one to a register, half 0: lane 4g + t holds rows g and
        g + 8, columns 2t and 2t + 1: c0, c1 in row g, c2, c3 in row g + 8. In the kernels, C is a tile of
        the scores S (n_q, n_k): 16 queries × 8 keys.
    Example: score (9, 3) of C: row 9 = g + 8 with g = 1, column 3 = 2t + 1 with t = 1: lane 5, register c3.

    After trying: the package's version is `transformer/flash/cuda_kernels.py`, `cuda_kernels.mma_fragment_layout`.
    """
    raise NotImplementedError(
        "mma_fragment_layout: start with operand C; np.indices of its shape gives every element's row and column "
        "at once: write g and t from them, then the lane and the register, and check score (9, 3).")
