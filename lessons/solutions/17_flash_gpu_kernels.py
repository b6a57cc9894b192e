"""Solutions to lesson 17's "Try it" (FlashAttention on the GPU)."""
import numpy as np


def exercise_1():
    """Which lane holds which score: the accumulator C of `mma.sync.m16n8k16` is a 16 × 8 tile of S
    (16 query rows, 8 keys). Lane 4g + t holds rows g and g + 8, columns 2t and 2t + 1, one float32 a
    register: c0, c1 for row g, c2, c3 for row g + 8. So score (i, j) sits in lane 4·(i mod 8) + ⌊j / 2⌋,
    register 2·⌊i / 8⌋ + (j mod 2). Score (9, 3): lane 4·1 + 1 = 5, register 2 + 1 = 3. Every lane
    holds 4 scores, from 2 rows: a row's max needs the four lanes 4g … 4g + 3."""
    i, j = np.indices((16, 8))  # (16, 8): row and column of each cell
    lane = 4 * (i % 8) + j // 2  # (16, 8)
    reg = 2 * (i // 8) + j % 2  # (16, 8)
    return {"lane": lane, "reg": reg, "lanes_per_row": len(set(lane[0].tolist()))}


def check_1(answer, T):
    lane, reg, _ = T.cuda_kernels.mma_fragment_layout("C")  # (16, 8) each, from the PTX tables
    np.testing.assert_array_equal(answer["lane"], lane)
    np.testing.assert_array_equal(answer["reg"], reg)
    assert answer["lanes_per_row"] == len(np.unique(lane[0])) == 4, answer["lanes_per_row"]


def exercise_2():
    """The 3xTF32 split of x = float32(1/3) = 11184811 / 2^25 = 0.3333333433, by hand. TF32 keeps 10
    mantissa bits: 1/3 = 1.0101010101|0101… × 2^-2, so hi = 1.0101010101₂ × 2^-2 = 1365 / 4096 =
    0.333251953125 (the cut-off bits start with 0: rounded down). What is left, x − hi =
    (11184811 − 1365·8192) / 2^25 = 2731 / 2^25, has 12 significant bits, 101010101011₂: one too many;
    the dropped bit is a tie, which TF32 rounds away from zero, so lo = 2732 / 2^25 = 8.142·10^-5.
    hi + lo misses x by 2^-25, 1e-7 of it, where hi alone misses it by 2.4·10^-4."""
    hi = 1365 / 4096
    lo = 2732 / 2 ** 25
    return hi, lo


def check_2(answer, T):
    hi, lo = T.cuda_kernels.split_tf32(np.array([1 / 3], dtype=np.float32))  # (1,), (1,)
    assert (answer[0], answer[1]) == (float(hi[0]), float(lo[0])), (answer, hi, lo)
