# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 17 · FlashAttention on the GPU: the CUDA kernels, tested without a GPU
#
# **What you will see.** The tiles of lesson 09 as CUDA kernels: how the NumPy loops map onto
# thread blocks, warps and lanes; which lane of a warp holds which score in the tensor-core
# instruction `mma.sync`, and why the scores can feed the next product without moving; how a
# float32 kernel keeps float32's accuracy on tensor cores that round to TF32; what one thread
# block holds in its shared memory, buffer by buffer, against an H100's limits; the backward
# kernel; the kernels' times and memory measured on an H200, against torch; and why a decode step
# of a small model is bound by kernel launches, not by bytes, until it runs as one CUDA graph.
# Everything but the GPU cells runs without a GPU: the layouts and launch plans are pure functions,
# and the kernels themselves are tested on the CPU by running their CUDA C.
#
# **Recap of lesson 09.** FlashAttention cuts $Q$ into blocks of $B_r$ rows and $K, V$ into
# blocks of $B_c$ rows; tile $S_{ij} = Q_i K_j^\top/\sqrt{d_h}$ lives only in fast memory and is
# folded into the running $(m, l, O_i)$ of its query rows by the online softmax of lesson 08.
# In FlashAttention-2's loop order, query blocks outside, every query block is independent, and
# tiles above a causal diagonal are skipped. The backward pass rebuilds each tile of
# $P_{ij} = e^{S_{ij} - L_i}$ from the saved log-sum-exp $L$ instead of storing $P$. Lesson 09
# counted what this saves in slow-memory traffic and in memory held; here the tiles sit in a
# GPU's fast memory for real.
#
# **The ideas behind it.** On a GPU attention waits on memory, not arithmetic: HBM is big and
# slow, a multiprocessor's SRAM small and fast; keeping the tiles in SRAM gave FlashAttention
# its 2–4× speed-ups. Builds on the tiles of lesson 09.

# %%
import json
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1: nothing to shrink here, the lesson computes layouts and plans
rng = np.random.default_rng(0)
CK = T.cuda_kernels  # the kernels' table, tile sizes, register layouts and launch plans: pure functions

# %% [markdown]
# ## 1. The same tiles as a GPU kernel
#
# Two words first: a GPU runs its threads in groups of 32 called a
# **warp**, which execute each instruction together, and a thread's place 0–31 in its warp
# is its **lane**. A **thread block** is a few warps that share one multiprocessor's fast
# memory.
#
# NumPy can only count what a GPU would move. `transformer/flash/kernels/` holds the forward pass
# written once more in CUDA C, where the tiles really sit in a streaming multiprocessor's
# shared memory (SRAM) and the running $(m, l)$ in registers; CuPy compiles and launches them
# through `T.flash_attention_cuda`. How lesson 09's loops map onto the GPU:
#
# | `flash_attention` in NumPy (FA-2 order) | the CUDA kernels |
# |---|---|
# | a Python loop over query blocks $Q_i$ | one thread block per (batch·head, $Q_i$), all running at once |
# | $K_j, V_j$ sliced from the arrays | copied by the block from HBM into `__shared__` arrays |
# | $S_{ij}$ and $\tilde P_{ij}$ as small arrays | one query row per thread, in registers (**SIMT** kernel); 16×16 tiles on tensor cores, passed through shared memory (**WMMA** kernel, float16); tensor-core tiles that never leave registers (**mma** kernel, float16; **mma_tf32**, the same for float32) |
# | $(m, l, O_i)$ carried from tile to tile | registers; the WMMA kernel keeps $O_i$ in shared memory, where it can rescale rows |
# | the next $K_j, V_j$ sliced after this one is used | the mma kernels copy $K_{j+1}, V_{j+1}$ in (`cp.async`) while the tensor cores work on $K_j, V_j$ |
#
# They differ in where $S$, $P$ and $O$ live, and each trip through shared memory is time
# the tensor cores wait. A WMMA tile's elements are spread over a warp's 32 threads in an
# undocumented way, so that kernel stores $S$ to shared memory to find each row's max, and
# rescales $O$ there. The PTX instruction `mma.sync.m16n8k16` documents its layout (thread
# $4g+t$ holds rows $g$ and $g+8$, columns $2t$ and $2t+1$ of each 16×8 tile), so each thread
# can do the softmax of the scores it holds, and the scores' tile, rounded to float16, is
# already the input of $\tilde P V$. That is FlashAttention-2's kernel design.
#
# ## 2. One warp's registers
#
# Here is one warp's view of 16 query rows × 16 keys, lane by lane, from the PTX tables
# (`T.cuda_kernels.mma_fragment_layout`, checked against the instruction by `tests/test_flash_cuda.py`):

# %%
lane_c, reg_c, _ = CK.mma_fragment_layout("C")        # [16, 8]: S for 8 keys, float32, one per register
lane_a, reg_a, half_a = CK.mma_fragment_layout("A")   # [16, 16]: P for 16 keys, float16, two per register
lane_b, reg_b, half_b = CK.mma_fragment_layout("B")   # [16, 8]: V for 16 keys × 8 columns of d_h
lane_s = np.concatenate([lane_c, lane_c], axis=1)     # [16, 16]: two 8-key S tiles side by side
assert (lane_s == lane_a).all()  # the lane that computed score (i, j) is the lane that feeds P[i, j] to P V
print("lanes holding S (two accumulator tiles) == lanes holding P as the A operand:", bool((lane_s == lane_a).all()))
print("lane 5 (g = 1, t = 1) holds rows", sorted(set(np.nonzero(lane_a == 5)[0].tolist())),
      "and keys", sorted(set(np.nonzero(lane_a == 5)[1].tolist())))

# %%
reg_s = np.concatenate([reg_c, reg_c], axis=1)  # [16, 16]: S's register of each cell
rows, keys = np.nonzero(lane_a == 5)  # lane 5 (g = 1, t = 1): its eight cells of the 16 × 16 tile


def cells_in(reg, r):  # "(i,j) (i,j)": lane 5's cells held by register r
    return " ".join(f"({i},{j})" for i, j in zip(rows, keys) if reg[i, j] == r)


note = ("lane 5 (row, key):  S " + ",  ".join(f"c{r} {cells_in(reg_s, r)}" for r in range(4)) + "\n"
        "        P̃ " + ",  ".join(f"a{r} {cells_in(reg_a, r)}" for r in range(4)) + "  (two float16 per register)")
print(note)
fig, axes = P.late.mma_lanes(lane_s, lane_b, lane=5, note=note)
P.save(fig, P.figure_path("17_mma_fragments.png"), colors=64)  # flat cells and labels: a palette keeps it small

# %% [markdown]
# One panel serves for $S$ and $\tilde P$, because their layouts are equal (asserted above): the
# lane that computed score $(i, j)$ holds $\tilde P_{ij}$ where the next product wants it, so rounding to float16 and packing pairs
# (`c0, c1` → `a0`) is all that happens between the two products. Each lane's row max and sum
# cover only its own cells; the four lanes $4g \ldots 4g+3$ share a row, so two shuffles finish
# the max. $V_j$ (right) is wanted by column: a lane needs keys $2t, 2t+1$ of column $g$, a row
# apart in the row-major tile, and `ldmatrix.trans` fetches them transposed in one
# instruction. A row there is $d_h + 8$ halves, not $d_h$: shared memory is cut into 32 banks
# of 4 bytes, and eight rows of exactly $d_h = 64$ halves (128 bytes) would all start in
# the same bank, so a read that touches them together would be served one row at a time.
# Eight halves (16 bytes) of padding per row put the eight row starts in different banks.
# The banks, counted from the kernel's own row size (`T.cuda_kernels.shared_memory_buffers`): a bank
# is byte address / 4 mod 32, and `ldmatrix` reads 16 bytes (4 banks) from each of 8 rows at once.

# %%
def banks_read(row_bytes):  # -> [8 rows, 4 words]: the bank of each 4-byte word one ldmatrix reads
    return (np.arange(8)[:, None] * row_bytes + np.arange(0, 16, 4)) // 4 % 32


for d_g in (64, 128):
    padded = CK.shared_memory_buffers("mma", d_g)["V_j"] // CK.block_k("mma", d_g)  # bytes a row of V_j
    for row_bytes in (2 * d_g, padded):  # d_h halves exactly, then the kernel's row
        banks = banks_read(row_bytes)
        print(f"d_h = {d_g:3d}, rows of {row_bytes} bytes: the 8 rows start in banks {banks[:, 0].tolist()}, "
              f"their 32 words fall in {len(np.unique(banks))} different banks")
    assert (banks_read(2 * d_g)[:, 0] == 0).all() and len(np.unique(banks_read(2 * d_g))) == 4, \
        "rows of exactly d_h halves all start in bank 0: each of 4 banks is asked 8 times, one row at a time"
    assert padded == 2 * (d_g + 8) and len(np.unique(banks_read(padded))) == 32, "d_h + 8 halves: no bank twice"

# %% [markdown]
# ## 3. float32 on tensor cores
#
# Tensor cores take float32 only as TF32: 10 mantissa bits instead
# of 23, the precision of float16 with float32's range. Rounding a number to TF32 moves it by up
# to $2^{-11}$ of its size, so a product of two rounded numbers can be off by about $2^{-10}$
# (the multiplication itself is exact; the inputs were rounded). The `mma_tf32` kernel keeps float32's accuracy by writing each
# number as two TF32 numbers, $x = x_{hi} + x_{lo}$ with $x_{hi} = \mathrm{tf32}(x)$ and
# $x_{lo} = \mathrm{tf32}(x - x_{hi})$, and multiplying
# $ab \approx a_{lo} b_{hi} + a_{hi} b_{lo} + a_{hi} b_{hi}$: three tensor-core products instead
# of one, still far more than the ordinary cores do. In NumPy, on one tile of scores, every
# version summed in float32 as the kernels do (the $a_{lo} b_{lo}$ term, left out, is
# below $2^{-22}$ of the product):

# %%
q_t, k_t = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
exact = q_t.astype(np.float64) @ k_t.T.astype(np.float64)        # [64, 64] S·√d_h, in float64
one = CK.tf32_round(q_t) @ CK.tf32_round(k_t).T                  # [64, 64] one TF32 product per product
(q_hi, q_lo), (k_hi, k_lo) = CK.split_tf32(q_t), CK.split_tf32(k_t)
three = q_lo @ k_hi.T + q_hi @ k_lo.T + q_hi @ k_hi.T              # [64, 64] 3xTF32, float32 sums
plain = q_t @ k_t.T                                                  # [64, 64] float32 on the ordinary cores
for name, got in (("TF32, 1 product", one), ("3xTF32", three), ("float32", plain)):
    print(f"{name:16s}: max |S - S_exact| / max |S| = {np.abs(got - exact).max() / np.abs(exact).max():.1e}")
err = {name: np.abs(got - exact).max() for name, got in (("one", one), ("three", three), ("plain", plain))}
assert err["three"] < err["one"] / 100 and err["three"] < 4 * err["plain"]  # 3xTF32 ≈ float32, far below TF32

# %% [markdown]
# The bounds of the paragraph above, measured on a million pairs $(a, b)$ of float32 numbers:

# %%
a, b = np.random.default_rng(17).standard_normal((2, 10 ** 6)).astype(np.float32)  # own generator: rng stays as it was
ab = a.astype(np.float64) * b  # the exact products: 24 + 24 bits fit float64's 53
(a_hi, a_lo), (b_hi, b_lo) = CK.split_tf32(a), CK.split_tf32(b)


def rel_err(got, want):  # |got − want| / |want|, in float64
    return np.abs(got.astype(np.float64) - want) / np.abs(want)


round_err = max(rel_err(a_hi, a).max(), rel_err(b_hi, b).max())
hi_exact = np.array_equal(a_hi * b_hi, a_hi.astype(np.float64) * b_hi)  # 11 + 11 bits fit float32's 24
prod_err = rel_err(a_hi * b_hi, ab).max()
lo_lo = (np.abs(a_lo.astype(np.float64) * b_lo) / np.abs(ab)).max()
print(f"rounding to TF32 moves a number by at most {round_err * 2 ** 11:.3f} · 2^-11 of itself")
print(f"a_hi·b_hi is exact in float32: {hi_exact}, and off from a·b by up to {prod_err * 2 ** 10:.2f} · 2^-10")
print(f"the term left out, a_lo·b_lo, is at most {lo_lo * 2 ** 22:.2f} · 2^-22 of a·b")
assert round_err <= 2 ** -11 and hi_exact and lo_lo <= 2 ** -22
assert 0.9 * 2 ** -10 < prod_err <= (1 + 2 ** -11) ** 2 - 1, "about 2^-10: two roundings of up to 2^-11 each"

# %% [markdown]
# The TF32 instruction (`mma.sync.m16n8k8`) has its own operand layout: lane $4g+t$ holds
# $A[g][t]$ and $A[g][t+4]$ (and rows $g+8$), while the scores' tile leaves it keys $2t$ and $2t+1$.
# A sum over keys does not care about their order, so the kernel feeds $\tilde P V_j$ the keys
# of each 8 in the order 0, 2, 4, 6, 1, 3, 5, 7, and reads $V_j$'s rows in that same order: then
# the scores sit exactly where the A operand wants them, and no value moves between lanes.

# %%
lane_a8, _, _ = CK.mma_fragment_layout("A", "m16n8k8")  # [16, 8]: P for 8 keys as TF32 A
order = [0, 2, 4, 6, 1, 3, 5, 7]                         # position t -> key 2t, t + 4 -> key 2t + 1
assert (lane_c[:, order] == lane_a8).all()  # S's lanes, keys reordered, are the A operand's lanes
print("lanes of S with keys in the order", order, "== lanes of the TF32 A operand:",
      bool((lane_c[:, order] == lane_a8).all()))

# %% [markdown]
# ## 4. What one thread block holds
#
# A block's fast memory is small and does not grow with $n$. Here it is, buffer by buffer, for
# the four forward kernels and the two backward ones (below) at $d_h = 64$ and $128$, against an
# H100's limits: 48 KiB per block unless the
# kernel opts in, 227 KiB if it does, and 228 KiB per multiprocessor for all the blocks it runs.
# (The WMMA kernel's S buffer does double duty: the Q tile passes through it once on its way
# into registers, then it holds the scores of every tile. Two buffers, the WMMA kernel's
# $e^{m - m_\text{new}}$ and the backward's $L_i, D_i$, are a few hundred bytes: too thin to
# draw, the figure names them under its legend. Hatched: the tile being copied in while the
# block works on the one before.)

# %%
b_g, h_g, n_g = 1, 16, 8192
forward_smem = []  # KiB a block, each kernel and head size
for d_g in (64, 128):
    for kern, dtype in (("simt", "float32"), ("tensor_cores", "float16"), ("mma", "float16"), ("mma_tf32", "float32")):
        plan = CK.launch_plan((b_g, h_g, n_g, d_g), (b_g, h_g, n_g, d_g), dtype, causal=True, scale=None, kernel=kern)
        smem = CK.simt_shared_bytes(d_g) if kern == "simt" else plan.shared_bytes
        small = CK.launch_plan((b_g, h_g, 256, d_g), (b_g, h_g, 256, d_g), dtype, causal=True, scale=None, kernel=kern)
        assert kern == "simt" or small.shared_bytes == plan.shared_bytes, "a block's shared memory does not grow with n"
        forward_smem.append(smem / 1024)
        print(f"d_h = {d_g:3d}, {kern:12s} ({dtype}): grid {plan.grid} = {plan.grid[0] * plan.grid[1]:5d} blocks "
              f"of {plan.block[0]:3d} threads, {smem / 1024:5.1f} KiB of shared memory each")
assert max(forward_smem) <= 227, "every forward block fits the 227 KiB one block may opt in to"
naive_S = n_g * n_g * 4  # one head's S in float32
print(f"standard attention at n = {n_g}: S alone is {naive_S / 2**20:.0f} MiB per head, in HBM")

# %%
buffer_colours = {"Q tile": P.LINE_COLORS[0], "K_j": P.LINE_COLORS[1], "V_j": P.LINE_COLORS[2],
                  "K_j+1": P.LINE_COLORS[1], "V_j+1": P.LINE_COLORS[2],  # hatched: the tile being copied in
                  "S (Q tile first)": P.LINE_COLORS[4], "P": P.LINE_COLORS[3], "O": P.LINE_COLORS[5],
                  "e^(m - m_new)": P.LINE_COLORS[7],
                  "dO_i": P.LINE_COLORS[6], "dS_ij": "#7f7f7f", "L_i, D_i": "#bcbd22",  # the backward's own
                  "Q_i": P.LINE_COLORS[0], "Q_i+1": P.LINE_COLORS[0], "dO_i+1": P.LINE_COLORS[6],
                  "dS_ijᵀ": "#7f7f7f", "L_i+1, D_i+1": "#bcbd22"}  # and the mma backward's
legend_names = {"S (Q tile first)": "S (holds the Q tile first)", "dS_ij": "dS_ij (backward; mma: dS_ijᵀ, float16)",
                "dS_ijᵀ": "dS_ij (backward; mma: dS_ijᵀ, float16)", "dO_i": "dO_i (backward)",
                "Q_i": "Q tile", "Q_i+1": "Q_i+1 (mma backward)", "dO_i+1": "dO_i+1 (mma backward)"}
bars = [(f"{name}, d_h = {d_g}", CK.shared_memory_buffers(kern, d_g)) for d_g in (64, 128)
        for name, kern in (("SIMT", "simt"), ("WMMA", "tensor_cores"), ("mma", "mma"), ("mma_tf32", "mma_tf32"),
                           ("backward (SIMT)", "backward"), ("backward (mma)", "backward_mma"))]
assert {label.split(",")[0] for label, parts in bars if "e^(m - m_new)" in parts} == {"WMMA"}  # O rescaled in SRAM
fig, ax = P.late.shared_memory_bars(
    bars, buffer_colours, legend_names,
    [(48, "48 KiB: a block's static limit "), (227, "227 KiB: the most one block\nmay opt in to ")],
    title=f"What one thread block holds in shared memory (H100); standard attention's S at "
          f"n = {n_g}: {naive_S / 2**20:.0f} MiB per head")
P.save(fig, P.figure_path("17_gpu_shared_memory.png"))

# %% [markdown]
# ## 5. The backward kernel
#
# The backward of lesson 09 (§7) is a kernel too, `T.flash_attention_backward_cuda(dout, q, k, v, out, lse)`
# (`transformer/flash/kernels/flash_attention_bwd.cu`), in FlashAttention-2's loop order for the
# backward: the outer loop over key tiles, so that a thread block owns $dK_j$ and $dV_j$ (a thread
# per key, its two rows in registers) and writes them once; the inner loop over query tiles,
# staging $Q_i$, $dO_i$, $L_i$ and $D_i$ in shared memory. Each thread recomputes
# $P_{ij} = e^{S_{ij} - L_i}$ for its key and adds to its rows of $dV_j$ and $dK_j$; $dQ_i$ needs
# every key of the tile, so the block writes $dS_{ij}$ to shared memory, each thread then takes
# one query row of $dS_{ij} K_j$, and adds it to $dQ$ in HBM with `atomicAdd`: the blocks of the
# other key tiles add to the same rows.
#
# That kernel is the readable one, and slow: a thread does every product of its key on the
# ordinary cores. The second backward kernel, `"mma"` (`flash_attention_bwd_mma.cu`, float16),
# keeps the same loops and does all five products on tensor cores, as the `"mma"` forward does
# (§1–2): a block of 4 warps owns 64 keys, 16 a warp, and each warp keeps its rows of $dK_j$ and
# $dV_j$ in mma accumulators. It works on transposes, its keys as the rows:
# $S^\top = K_w Q_i^\top$ and $dP^\top = V_w\, dO_i^\top$ come out as accumulators whose layout
# is already the A operand of the next products, $dV_w \mathrel{+}= P^\top dO_i$ and
# $dK_w \mathrel{+}= dS^\top Q_i$, so $P$ and $dS$ never leave registers for those.
# $dQ_i = dS_{ij} K_j$ needs all 64 keys, which four warps hold: each writes its $dS^\top$ (float16)
# to shared memory, and after a barrier each warp multiplies a 16-row slab of it by $K_j$ and adds
# the slab to $dQ$ with `atomicAdd`. `flash_attention_backward_cuda` takes it by default for
# float16 on GPUs of compute capability 8.0 or later (`kernel="auto"`), and for float32 its TF32
# twin `"mma_tf32"`, with three products a product as the `mma_tf32` forward (§3).

# %%
backward_smem = []  # KiB a block, each backward kernel and head size
for d_h_b in (64, 128):
    for kern, dtype in (("simt", "float16"), ("mma", "float16"), ("mma_tf32", "float32")):
        br, bc = CK.backward_tiles(kern, d_h_b)
        plan = CK.backward_launch_plan((1, 16, 8192, d_h_b), (1, 16, 8192, d_h_b), dtype, causal=True,
                                       scale=None, kernel=kern)
        print(f"backward {kern + ',':9s} d_h = {d_h_b:3d}: {bc} keys a block of {plan.block[0]:3d} threads, query tiles "
              f"of {br} rows, {CK.backward_shared_bytes(d_h_b, kern) / 1024:5.1f} KiB of shared memory a block")
        assert CK.backward_shared_bytes(d_h_b, kern) / 1024 <= 227, "every backward block fits the opt-in limit"
        backward_smem.append(CK.backward_shared_bytes(d_h_b, kern) / 1024)
kib = forward_smem + backward_smem
print(f"every kernel here, forward and backward: {min(kib):.0f} to {max(kib):.0f} KiB of shared memory a block")
assert (round(min(kib)), round(max(kib))) == (32, 142)  # the range the takeaways quote

# %% [markdown]
# ## 6. Tested without a GPU, run on one
#
# All the kernels are checked against standard attention and torch's autograd: on any machine
# by running their CUDA C on the CPU (`tests/test_flash_cuda.py`), and on a GPU directly.
# With a GPU and CuPy here, this cell runs them and compares with the NumPy tiles of lesson 09:

# %%
try:
    cp = T.namespace("cupy")  # raises with a clear message without CuPy or a GPU
except RuntimeError as e:  # the expected path on a machine without a GPU: say so, and why, on its own line
    print("This machine has no GPU that CuPy can use, so this cell ends here; with one it compares the kernels")
    print("with the NumPy tiles of lesson 09, and benchmarks/bench_gpu.py times them against torch.")
    print(f"(why: {str(e).splitlines()[0]})")
else:
    q, k, v = (rng.standard_normal((1, 4, 1000, 64)).astype(np.float32) for _ in range(3))
    ref = T.flash_attention(q, k, v, causal=True)
    for kern, dtype, tol in (("simt", np.float32, 1e-4), ("tensor_cores", np.float16, 5e-3), ("mma", np.float16, 5e-3),
                             ("mma_tf32", np.float32, 1e-4)):
        out = T.flash_attention_cuda(*(cp.asarray(t.astype(dtype)) for t in (q, k, v)), causal=True, kernel=kern)
        diff = float(np.abs(T.to_numpy(out).astype(np.float32) - ref).max())
        print(f"{kern:12s}: max |GPU kernel - NumPy tiles| = {diff:.1e}")
        assert diff < tol
    dout = rng.standard_normal(q.shape).astype(np.float32)
    out_np, lse_np = T.flash_attention(q, k, v, causal=True, return_lse=True)
    ref_grads = T.flash_attention_backward(dout, q, k, v, out_np, lse_np, causal=True)
    grads = T.flash_attention_backward_cuda(*(cp.asarray(t) for t in (dout, q, k, v, out_np, lse_np)), causal=True)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref_grads):
        diff = float(np.abs(T.to_numpy(g) - r).max() / max(1.0, np.abs(r).max()))
        print(f"backward {name}: max |GPU kernel - NumPy tiles| = {diff:.1e} of its largest entry")
        assert diff < 1e-4
    halves = [t.astype(np.float16) for t in (dout, q, k, v, out_np)]  # the mma backward: float16 on tensor cores
    grads = T.flash_attention_backward_cuda(*(cp.asarray(t) for t in halves), cp.asarray(lse_np), causal=True,
                                            kernel="mma")
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref_grads):
        diff = float(np.abs(T.to_numpy(g).astype(np.float32) - r).max() / max(1.0, np.abs(r).max()))
        print(f"backward (mma, float16) {name}: max |GPU kernel - NumPy tiles| = {diff:.1e} of its largest entry")
        assert diff < 5e-3

# %% [markdown]
# ## 7. Times and memory on an H200
#
# What the kernels do on a real GPU: `benchmarks/bench_gpu.py` times them against torch's
# `scaled_dot_product_attention` and standard attention on CuPy arrays, and measures the memory
# each call takes from the GPU's memory pool. Its results file from an H200 is part of the
# repository; drawn here, time (top) and extra memory, measured as dots and by formula as lines
# (bottom), for b = 1, h = 16, d_h = 64, no mask. Each time follows 10 untimed calls on a GPU kept
# busy for a second: with 2, an earlier run read torch's float16 at $n = 1024$ slower than at
# $2048$, a warm-up left in the measurement (the figure would mark such a point).

# %%
gpu_json = ROOT / "benchmarks" / "results" / "gpu.json"
if not gpu_json.is_file():
    print("no GPU results yet: on a GPU machine, run `python benchmarks/bench_gpu.py`")
else:
    gpu = json.loads(gpu_json.read_text(encoding="utf-8"))
    assert {(r["b"], r["h"], r["d_h"]) for r in gpu["attention"]} == {(1, 16, 64)}  # the sizes the text gives
    print(f"{gpu_json.relative_to(ROOT)}: {gpu['meta']['device']}, {gpu['meta']['date']}")
    for line in gpu["meta"]["summary"][:4]:
        print("  ", line)
    series = {"torch": "torch SDPA", "naive": "standard attention (CuPy)", "simt": "simt kernel",
              "tensor_cores": "tensor_cores kernel", "mma": "mma kernel", "mma_tf32": "mma_tf32 kernel"}
    fig, axes = P.late.gpu_timings(gpu["attention"], series, device=gpu["meta"]["device"].split(" (")[0])
    P.save(fig, P.figure_path("17_gpu_timings.png"))


# %% [markdown]
# ## 8. A decode step on the GPU: launch-bound, not byte-bound
#
# Generating one token at $b = 1$ multiplies one vector by every weight matrix: it reads all the
# weights once, $4 \cdot 134{,}515{,}008$ bytes = 538 MB for SmolLM2-135M in float32, and does
# 2 FLOPs per weight (lesson 13: far below any GPU's ridge point). At an H200's 4.8 TB/s that is
# 112 µs, a floor of ~8,900 tokens/s. Yet the package's readable path on CuPy decodes 15 tokens/s
# there (65 ms a token), slower than NumPy on the 16 CPU cores of such a GPU machine (42 tokens/s,
# measured beside an H100 in `benchmarks/results/gpu.json`). The bytes are not what takes
# the time: the step is many small array operations, each launched from Python, and the GPU
# waits for the host between them. First, how many: an array that counts every operation made on
# it (each would be one kernel launch on a GPU), fed through the readable step.

# %%
class Counted(np.ndarray):
    """An array that counts the array operations made on it: on a GPU, each is a kernel launch."""
    ops = 0

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        Counted.ops += 1
        plain = [a.view(np.ndarray) if isinstance(a, Counted) else a for a in inputs]
        if "out" in kw:
            kw["out"] = tuple(o.view(np.ndarray) if isinstance(o, Counted) else o for o in kw["out"])
        r = getattr(ufunc, method)(*plain, **kw)
        return r.view(Counted) if isinstance(r, np.ndarray) else r

    def __array_function__(self, func, types, args, kw):
        Counted.ops += 1
        return super().__array_function__(func, types, args, kw)


def readable_step_ops(L: int) -> int:  # array operations of one decode step of llama.forward, L layers
    m = T.random_llama(T.LlamaConfig(L=L, d=32, h=4, h_kv=2, d_h=8, d_ff=48, v=64, n_ctx=16), seed=0)
    w = m.weights
    w.W_E, w.norm = w.W_E.view(Counted), w.norm.view(Counted)
    for lw in w.layers:
        for name, a in vars(lw).items():
            setattr(lw, name, a.view(Counted))
    cache, (cos, sin) = m.new_cache(1, 8), m.rope_tables(8)
    T.through_cache(m.readable_engine, np.asarray([[1, 2, 3]]), cache, cos, sin)  # prefill
    Counted.ops = 0
    T.through_cache(m.readable_engine, np.asarray([[4]]), cache, cos, sin)  # one decode step
    return Counted.ops


per_layer = readable_step_ops(2) - readable_step_ops(1)  # the count depends on L, not on the widths
outside = readable_step_ops(1) - per_layer
assert 50 <= per_layer <= 60, "lesson 06 says 'about 55 a layer'"
smol = T.LlamaConfig()  # SmolLM2-135M: L = 30
readable_ops = outside + smol.L * per_layer
plan = T.step_kernels(T.DecodeSizes.of(smol, max_len=1024, max_new=64))
print(f"llama.forward, one decode step: {per_layer} array operations a layer + {outside} -> {readable_ops:,} "
      f"for SmolLM2 (at least: views and cache writes are not counted)")
print(f"the decode step as kernels (T.step_kernels): {len(plan)} = 5 a layer + 4")
assert len(plan) == T.kernels_per_step(smol.L) == 5 * smol.L + 4 < readable_ops

# %% [markdown]
# The kernels of `transformer/models/decode_kernels/` do a layer in 5 launches: RMSNorm fused into
# the product's prologue (each block recomputes $\sum x^2$ over 576 floats); $[W_q | W_k | W_v]$ as one
# matrix whose warps each compute a RoPE pair of rows, turn it and write $k$ and $v$ into the cache;
# attention over the cache split by ranges of keys (flash-decoding: 3 KV heads alone would keep 3 of
# 132 multiprocessors busy), the ranges merged by the online softmax of lesson 08 in whichever block
# of a KV head finishes last; the residual added in the product's epilogue; SwiGLU in the down
# projection's prologue. Fewer launches is half of it; the other half is who launches them. From
# Python each costs host time; a **CUDA graph** records the launches once and the GPU replays them
# from one host call. Then nothing a step needs may change on the host: the token, the position and
# the step live in device memory (`state`), the kernels read and advance them, and sampling happens
# on the device too. Measured on an H200 (`benchmarks/results/decode_gpu.md`): an empty kernel costs
# 6.8 µs launched from Python and 0.5 µs as a node of a graph; the readable path's 65 ms a token
# over its operations is ~39 µs each.

# %%
decode_json = ROOT / "benchmarks" / "results" / "decode_gpu.json"
run = json.loads(decode_json.read_text(encoding="utf-8"))  # the GPU run the text quotes (an H200)
micro, speed, peers = run["micro"], run["speed"], run["peers"]
eager_us, node_us = micro["eager_launch_us"], micro["graph_node_us"]
readable_tok_s = speed["cupy_readable_decode_tok_s_n64"]
readable_us = 1e6 / readable_tok_s / readable_ops  # a token's time, per operation
bandwidth = run["env"]["bandwidth_bytes_s"]  # the H200's HBM: 4.8 TB/s
bytes_us = 4 * T.count_parameters(smol) / bandwidth * 1e6  # the weights once
assert 4 * T.count_parameters(smol) == speed["weights_bytes"]  # the run read the weights this lesson counts
paths = [(f"readable CuPy: {per_layer} operations a layer", readable_ops, readable_us),
         ("the step's kernels, launched one by one", len(plan), eager_us),
         ("the same kernels, one CUDA graph", len(plan), node_us)]
graph_tok_s = speed["cupy_graph_decode_tok_s"]
hf_tok_s = peers["hf_static_compiled_decode_tok_s"]
measured_kernels = speed["kernels_per_step"]  # the step as measured: 5 kernels a layer and 4 more
measured = [(f"the graph, measured ({measured_kernels} kernels)", 1e6 / graph_tok_s),
            ("HF static cache + torch.compile, measured", 1e6 / hf_tok_s)]
fig, ax = P.late.launch_bound(paths, bytes_us=bytes_us, measured=measured,
                              title="SmolLM2-135M, one decode token on an H200, float32")
P.save(fig, P.figure_path("17_launch_bound.png"))
for label, n, cost in paths:
    print(f"{label:45s} launching {n * cost / 1e3:7.2f} ms   the weights once {bytes_us / 1e3:.2f} ms")
for label, us in measured:
    print(f"{label:45s} {us / 1e3:7.2f} ms a token = {1e6 / us:,.0f} tok/s")
readable_ms = 1e3 / readable_tok_s
print(f"readable CuPy, measured: {readable_tok_s:.0f} tok/s = {readable_ms:.1f} ms a token = {readable_us:.1f} µs "
      f"for each of its {readable_ops:,} operations, {readable_ms * 1e3 / bytes_us:.0f}× the bytes' time")
splits = run["splits"]
print("attention over the cache at position 512 (attend_split, its merge inside), a layer: "
      f"{splits['split256_pos512_us']:.1f} µs with 256 keys a block, {splits['split32_pos512_us']:.1f} µs with 32")
alone_us = sum(role["us_a_step"] for role in run["per_kernel"]["roles"].values())  # each kernel timed alone
print(f"the step's kernels each timed alone: {alone_us:.0f} µs a step; the graph's step: {1e6 / graph_tok_s:.0f} µs")
numpy_tok_s = json.loads(gpu_json.read_text(encoding="utf-8"))["model"]["numpy_decode_tok_s"]  # NumPy, 16 CPU cores
W_o = run["per_kernel"]["roles"]["W_o"]  # W_o and the residual: the "product over 1.3 MB of weights"
quoted = {  # what the text of this section and the takeaways says -> (that number, the same number from the files)
    "weights read once, MB": (538, round(speed["weights_bytes"] / 1e6)),
    "HBM bandwidth, TB/s": (4.8, round(bandwidth / 1e12, 1)),
    "the weights' time, µs": (112, round(bytes_us)),
    "the weights' time, ms": (0.1, round(bytes_us / 1e3, 1)),
    "the bandwidth floor, tokens/s": (8900, round(speed["bandwidth_floor_tok_s"], -2)),
    "readable CuPy, tokens/s": (15, round(readable_tok_s)),
    "readable CuPy, ms a token": (65, round(1e3 / readable_tok_s)),
    "NumPy on the CPUs, tokens/s": (42, round(numpy_tok_s)),
    "an empty kernel from Python, µs": (6.8, round(eager_us, 1)),
    "an empty kernel as a graph node, µs": (0.5, round(node_us, 1)),
    "readable CuPy, array operations a step": (1661, readable_ops),
    "readable CuPy, µs an operation": (39, round(readable_us)),
    "the product over 1.3 MB, MB": (1.3, round(W_o["GB_s"] * W_o["us"] / 1e3, 1)),
    "the product over 1.3 MB, µs": (2.5, round(W_o["us"], 1)),
    "multiprocessors": (132, run["env"]["sms"]),
    "kernels a step, measured": (154, measured_kernels),
    "kernels a layer, measured": (5, (measured_kernels - (len(plan) - 5 * smol.L)) / smol.L),  # same 4 outside
    "the kernels alone, µs a step": (773, round(alone_us)),
    "the graph, µs a token": (1191, round(1e6 / graph_tok_s)),
    "the graph, ms a token": (1.19, round(1e3 / graph_tok_s, 2)),
    "the graph, tokens/s": (840, round(graph_tok_s)),
}
wrong = {what: nums for what, nums in quoted.items() if nums[0] != nums[1]}
assert not wrong, f"the text quotes numbers its results files do not hold, (text, file): {wrong}"
assert readable_tok_s < numpy_tok_s  # "slower than NumPy on the CPUs"
assert len(plan) * node_us < 2 * bytes_us < len(plan) * eager_us  # in a graph, launching costs about the bytes
assert graph_tok_s > hf_tok_s and 1e6 / graph_tok_s > 5 * bytes_us  # faster than the compiled peer, far from the floor
# the ratios the text below quotes: 2.5× HF compiled, 55× the readable path, 11 times the bytes' time
assert (round(graph_tok_s / hf_tok_s, 1), round(graph_tok_s / readable_tok_s), round(1e6 / graph_tok_s / bytes_us)) == (
    2.5, 55, 11)
assert (round(splits["split256_pos512_us"], 1), round(splits["split32_pos512_us"], 1)) == (20.8, 8.6)
assert alone_us < 0.7 * 1e6 / graph_tok_s  # "a third of the step is not in any kernel's time alone"

# %% [markdown]
# The graph decodes 2.5× faster than HF's compiled static-cache step on the same GPU, and 55× faster
# than the readable path; but a token still takes 11 times the bytes' time. With the host gone,
# what is left is each kernel's own time: `benchmarks/results/decode_gpu.md` times every launch
# alone, and a product over 1.3 MB of weights ($W_o$) takes ~2.5 µs however fast the memory, as a few
# hundred threads each read a row and sum it, while each kernel waits for the one before. Attention
# over the cache is the one part that grows with the position: at position 512 (513 keys), the split
# and the merge of the splits (`attend_split`, printed above) took 20.8 µs a layer with 256 keys
# a block (3 KV heads × 3 ranges: 9 blocks for 132 multiprocessors), 8.6 µs with 32 keys a block.
# Yet the kernels timed alone add up to 773 µs, and the step takes 1,191: a third of it is in no
# kernel's time alone (each was timed with its weights left in the L2 cache by the launches before it,
# a lower bound; in the step they come from HBM, and where the third goes is not measured yet).
# Making one kernel faster alone need not make the step faster: docs/gpu.md tells how the step went
# from 7 kernels a layer to 5, and attention from 12 µs to 8.6, with the graph's speed the same
# within the spread between runs.
#
# That the graph replays a *recording* is what makes it hard to get right: a value frozen in when it was recorded, or a buffer allocated while recording,
# gives wrong tokens with no error. The package checks the step without a GPU: the same body
# (`T.DecodeStep.enqueue`) records into a `T.RecordingLauncher` (a CUDA graph's model on the CPU)
# and replays through the kernels' NumPy twins, which split the work exactly as the kernels do.
# A control run: recorded once and replayed for every token, it gives the host loop's ids.

# %%
tiny = T.random_llama(T.LlamaConfig(L=2, d=64, h=4, h_kv=2, d_h=16, d_ff=128, v=256, n_ctx=64), seed=1, std=0.3)
host_ids = tiny.generate([1, 2, 3], 12, stop_at_eos=False)  # the host loop: FastForward, sampling on the host
tiny.device_step = "recorded"  # the decode step recorded once, replayed per token through the twins
replayed = tiny.generate([1, 2, 3], 12, stop_at_eos=False)
print(f"host loop:      {host_ids}\nrecorded step ({tiny.last_stats.engine}): {replayed}")
assert replayed == host_ids

# %% [markdown]
# **Takeaways.** The CUDA kernels are lesson 09's FlashAttention-2 loop, one thread block per
# query block: $K_j, V_j$ are copied into shared memory, the running $(m, l, O_i)$ stay in
# registers, and no $n \times n$ matrix ever reaches HBM. The kernels differ in where $S$, $P$
# and $O$ live: the `mma` kernels use an instruction whose register layout is documented, so the
# lane that computes a score is the lane that feeds it to $\tilde P V$ and the softmax happens
# in registers; `mma_tf32` buys back float32's accuracy on TF32 tensor cores with three products
# per product. A block's shared memory depends on the tile sizes and $d_h$, never on $n$ — from
# 32 to 142 KiB here, within the 227 KiB a block may opt in to, against hundreds of MiB for
# standard attention's $S$ — which is why the tiled
# kernels still run where standard attention runs out of memory. The layouts, tile sizes and
# launch plans are pure functions, and the kernels' CUDA C runs on the CPU in the tests, so all
# of this is checked on a machine without a GPU. A decode step of a 135M model is the opposite
# case: its bytes take ~0.1 ms on an H200, its 1,661 launches from Python ~65 ms; a few fused kernels
# a layer, replayed as one CUDA graph with the token and position in device memory, remove the host
# (measured: 1.19 ms a token, 840 tok/s), and what is left is each small kernel's own time.

# %% [markdown]
# **Write it yourself.** `workbook/17_flash_gpu_kernels.py` holds `mma_fragment_layout` (which lane and
# register hold each element of an `mma.sync` operand) as a stub with the tables of section 2; fill it in,
# then run `python -m transformer check 17`: it runs the package's own test cases on your code and says what
# is still wrong. No GPU is needed.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 17` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/17_flash_gpu_kernels.py`.
#
# 1. **Which lane holds which score, coded.** Write, with `np.indices((16, 8))`, the lane and the
#    register that hold each score $(i, j)$ of an `m16n8k16` accumulator tile (lane $4g+t$ holds
#    rows $g$ and $g+8$, columns $2t$ and $2t+1$). Which lane holds score $(9, 3)$? How many lanes
#    share a row's max? Compare with `T.cuda_kernels.mma_fragment_layout("C")`.
# 2. **The TF32 split.** By hand, split $x = $ float32(1/3) into $x_{hi} + x_{lo}$, both TF32
#    (10 mantissa bits, ties away from zero). How far is $x_{hi} + x_{lo}$ from $x$? Check with
#    `T.cuda_kernels.split_tf32`.
