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
# # 09 · FlashAttention: tiles, loop orders, memory traffic
#
# **What you will see.** Attention computed tile by tile with the online softmax of lesson
# 08: which tiles of the $n \times n$ score matrix are computed and which are skipped under a
# causal mask (with blocks that do not divide $n$); the two loop orders, FlashAttention-1
# (key blocks outside) and FlashAttention-2 (query blocks outside); the running $m$ and $l$ of
# one query row as the tiles go by; a check that the result equals standard attention; the
# slow-memory (HBM) traffic and the peak extra memory against $n$, each as formula lines
# with measured points; and the backward pass by recomputation, equal to the naive one
# while never storing an $n \times n$ matrix. Lesson 17 takes the same tiles onto the GPU,
# as CUDA kernels.
#
# **The ideas behind it.** Standard attention costs $O(n^2 d_h)$ time and $O(n^2)$ memory; on a
# GPU it waits on memory, not arithmetic, between a big slow memory (HBM) and a small fast
# one (SRAM). Tiling with the online softmax, and recomputing in the backward pass, moves far
# less and gave FlashAttention its 2–4× speed-ups.

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 stops the memory sweeps at n = 1024 for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The tiles
#
# Standard attention writes $S = QK^\top/\sqrt{d_h}$ and $P = \mathrm{softmax}(S)$, two
# $n \times n$ arrays, to slow memory and reads them back. FlashAttention cuts $Q$ into
# $T_r = \lceil n / B_r \rceil$ blocks of $B_r$ rows and $K, V$ into $T_c = \lceil n / B_c \rceil$
# blocks of $B_c$ rows. Tile $(i, j)$ is $S_{ij} = Q_i K_j^\top/\sqrt{d_h}$, of size
# $B_r \times B_c$: it lives only in fast memory, is folded into the running $(m, l, O)$ of
# its query rows, and is thrown away.
#
# With a causal mask, a tile whose first key comes after its last query is never loaded
# nor computed (*skipped*); a tile entirely below the diagonal needs no mask (*full*); only
# the tiles the diagonal crosses are masked inside (*diagonal*). The last block is simply
# shorter when $B$ does not divide $n$.

# %%
def tile_picture(n, Br, Bc, causal):  # -> ([n, n] element state, trace): 0 skipped, 1 full, 2 diagonal, 3 masked
    """Run the kernel once with a trace and paint each score element by the fate of its tile."""
    x = rng.standard_normal((1, 1, n, 8))  # (b, h, n, d_h): the values do not matter here
    tr = T.FlashTrace()
    T.flash_attention(x, x, x, causal=causal, block_q=Br, block_k=Bc, trace=tr)
    state = np.zeros((n, n), dtype=np.int8)
    for s in tr.steps:
        (r0, r1), (c0, c1) = s.rows, s.cols
        state[r0:r1, c0:c1] = {"skipped": 0, "full": 1, "diagonal": 2}[s.kind]
    if causal:
        state[(state == 2) & np.triu(np.ones((n, n), dtype=bool), 1)] = 3  # computed, then masked away
    return state, tr


cases = [(20, 6, 6, False), (20, 6, 6, True), (20, 8, 5, True)]  # (n, Br, Bc, causal); 6 and 8 do not divide 20
pictures = []
for n_, Br_, Bc_, causal_ in cases:
    state, tr = tile_picture(n_, Br_, Bc_, causal_)
    kinds = tr.kinds()
    done = int(tr.computed().sum())
    per_block = T.visible_key_tiles(n_, n_, Br_, Bc_, causal_)  # key tiles computed per query block
    print(f"n = {n_}, B_r = {Br_}, B_c = {Bc_}, causal = {causal_}: grid {tr.Tr} × {tr.Tc}, "
          f"computed {done} (diagonal {int((kinds == 'diagonal').sum())}), skipped {tr.Tr * tr.Tc - done}; "
          f"per query block {per_block}")
    assert done == sum(per_block)
    pictures.append((state, tr))

# %%
panels = [(state, Br_, Bc_, f"{'causal' if causal_ else 'no mask'}, B_r = {Br_}, B_c = {Bc_}\n"
                            f"{int(tr.computed().sum())} of {tr.Tr * tr.Tc} tiles computed")
          for (n_, Br_, Bc_, causal_), (state, tr) in zip(cases, pictures)]
fig, axes = P.late.tile_states(panels, suptitle="The n × n score matrix in tiles (n = 20): "
                                                "the last block is shorter when B does not divide n")
P.save(fig, P.figure_path("09_tile_schedule.png"))

# %% [markdown]
# ## 2. Two loop orders
#
# Both orders visit the same tiles and give the same result; they differ in what stays in
# fast memory and what travels.
#
# * **FlashAttention-1** (key blocks outside): load $K_j, V_j$ once; for every query block
#   read $Q_i$ *and* the partial $O_i, l_i, m_i$ from slow memory, update them, write them back.
# * **FlashAttention-2** (query blocks outside): load $Q_i$ once, keep $O_i, l_i, m_i$ in fast
#   memory while every $K_j, V_j$ streams past, write $O_i$ (divided by $l_i$ once) at the end.
#   Each query block is independent, which is how the GPU version (lesson 17) spreads work
#   over its cores.
#
# The trace records the step at which each tile was visited:

# %%
n_o, B_o = 20, 5
orders = {}
for version in (1, 2):
    tr, io = T.FlashTrace(), T.IOCounter()
    x = rng.standard_normal((1, 1, n_o, 8))
    T.flash_attention(x, x, x, causal=True, block_q=B_o, block_k=B_o, version=version, trace=tr, io=io)
    orders[version] = (tr, io)
    visited = [(s.i, s.j) for s in tr.steps if s.kind != "skipped"]
    formula = (T.flash1_io if version == 1 else T.flash2_io)(n_o, n_o, 8, B_o, B_o, causal=True)
    print(f"FlashAttention-{version}: tiles (i, j) in visit order {visited}")
    print(f"   HBM traffic counted {io.total:,} elements = formula {formula['total']:,}")
    assert io.total == formula["total"]
assert np.array_equal(orders[1][0].computed(), orders[2][0].computed())  # same tiles, other order

# %%
titles = {1: "FlashAttention-1: key block j outside\nK_j, V_j stay; Q_i, O_i, l_i, m_i travel",
          2: "FlashAttention-2: query block i outside\nQ_i, O_i, l_i, m_i stay; K_j, V_j travel"}
fig, axes = P.late.visit_order([(tr.computed(), tr.partial(), tr.grid(), titles[version])
                                for version, (tr, _) in orders.items()],
                               B=B_o, suptitle=f"Visit order of the computed tiles, causal, n = {n_o}, B_r = B_c = {B_o}")
P.save(fig, P.figure_path("09_loop_order.png"))

# %% [markdown]
# ## 3. One query row through the tiles
#
# Watch a single row of FlashAttention-2: after each key block the kernel holds only that
# row's $m$ and $l$ (and its output accumulator). The trace copies them out. The last value
# must be the maximum and $\sum_j e^{s_j - \max}$ of the full row, which we compute here from
# the whole score matrix, for comparison only.

# %%
n_r, d_r, B_r_, r = 64, 16, 8, 37  # 8 key blocks of 8; row 37
q = rng.standard_normal((1, 1, n_r, d_r))  # (b, h, n, d_h)
k = rng.standard_normal((1, 1, n_r, d_r))
v = rng.standard_normal((1, 1, n_r, d_r))
tr = T.FlashTrace()
out = T.flash_attention(q, k, v, block_q=B_r_, block_k=B_r_, trace=tr)  # (1, 1, 64, 16)
blocks, m_row, l_row = tr.row_history(r)  # (T,), (T,), (T,)
s_row = (q[0, 0, r] @ k[0, 0].T) / np.sqrt(d_r)  # (n,) the row of S, computed whole only to check
m_full, l_full = s_row.max(), np.exp(s_row - s_row.max()).sum()
print(f"row {r}: key blocks {blocks.tolist()}")
print("running m:", np.round(m_row, 3).tolist())
print("running l:", np.round(l_row, 3).tolist())
print(f"last step: m = {m_row[-1]:.4f} (row max {m_full:.4f}), l = {l_row[-1]:.4f} (full-row sum {l_full:.4f})")
assert np.isclose(m_row[-1], m_full) and np.isclose(l_row[-1], l_full)

# %%
fig, (ax_m, ax_l) = P.online_softmax_trace(
    m_row, l_row, scores=[s_row[j * B_r_:(j + 1) * B_r_] for j in blocks], true_max=m_full, true_sum=l_full,
    title=f"Query row {r} through {len(blocks)} key tiles of B_c = {B_r_} (FlashAttention-2)")
for text in ax_m.get_legend().get_texts():
    if text.get_text() == "scores in block":
        text.set_text("the tile's 8 scores of this row")
for t in np.nonzero(np.diff(m_row) > 0)[0] + 1:  # tiles that raised the max: l was rescaled
    ax_l.annotate(f"l × e^(m_old − m_new) = l × {np.exp(m_row[t - 1] - m_row[t]):.2f}, then + this tile's sum",
                  (t, l_row[t]), xytext=(0, -48), textcoords="offset points", ha="center", va="top",
                  fontsize=P.TICK_SIZE, color=P.LINE_COLORS[1],
                  arrowprops=dict(arrowstyle="->", color=P.LINE_COLORS[1], linewidth=1.5, shrinkB=6))
P.save(fig, P.figure_path("09_row_trace.png"))

# %% [markdown]
# **Step through it.** The view below runs the tiled loop of this lesson on a small causal
# example, one tile per step, in either loop order: the current $Q_i$ and $K_j$ tiles, the tiles
# skipped above the diagonal, each row's $m$ and $l$ with the rescaling factor
# $\alpha = e^{m_\text{old} - m_\text{new}}$, and the HBM reads and writes counted so far.
#
# <div class="tfs-view" data-view="flash"></div>

# %% [markdown]
# ## 4. Exact, not approximate
#
# Same inputs, every combination of loop order, mask, block sizes that do not divide $n$,
# and grouped-query heads ($h = 4$ query heads reading $h_{kv} = 2$ key/value heads): the
# tiled output equals standard attention to rounding.

# %%
n_e, d_e = 50, 16
worst = 0.0
for h_, h_kv_ in ((4, 4), (4, 2), (4, 1)):
    q = rng.standard_normal((2, h_, n_e, d_e))  # (b, h, n, d_h)
    k = rng.standard_normal((2, h_kv_, n_e, d_e))  # (b, h_kv, n, d_h)
    v = rng.standard_normal((2, h_kv_, n_e, d_e))
    for causal_ in (False, True):
        mask = T.causal_mask(n_e) if causal_ else None
        reference = T.scaled_dot_product_attention(q, k, v, mask)  # (b, h, n, d_h), lesson 03's attention
        assert np.allclose(T.standard_attention(q, k, v, causal=causal_), reference, rtol=0, atol=1e-12)
        for version in (1, 2):
            for Br_, Bc_ in ((7, 7), (16, 5), (50, 50), (1, 64)):
                tiled = T.flash_attention(q, k, v, causal=causal_, block_q=Br_, block_k=Bc_, version=version)
                worst = max(worst, float(np.abs(tiled - reference).max()))
print(f"largest |tiled − standard| over 3 head layouts × 2 masks × 2 orders × 4 block shapes: {worst:.1e}")
assert worst < 1e-12

# %% [markdown]
# ## 5. Slow-memory traffic against $n$
#
# Count elements moved between HBM and fast memory (all exact formulas in
# `transformer/flash/io_count.py`; the kernels count every load and store as they run):
#
# * standard attention: $\;4nd + 4n^2$ — $S$ and $P$ written once and read once, plus $Q, K, V, O$;
# * FlashAttention-1: $K, V$ read once and $O, l, m$ initialised, $n(3d + 2)$, then per computed
#   tile $B_r(3d + 4)$: $T_c \cdot n(3d + 4) + n(3d + 2)$, about $T_c \cdot n(3d + 4)$;
# * FlashAttention-2: $Q$ read and $O$, $L$ written once, $n(2d + 1)$, then $K$ and $V$ once per
#   query block: $T_r \cdot 2nd + n(2d + 1)$, about $T_r \cdot 2nd$.
#
# (No mask here; $T_r = \lceil n/B_r \rceil$, $T_c = \lceil n/B_c \rceil$.) The counters are
# checked against both the functions of `io_count` and these closed forms.
#
# Each count shrinks as the tiles grow, and the tiles are bounded by the fast memory of $M$
# elements. FlashAttention-1's paper picks $B_c = \lceil M/4d \rceil$, $B_r = \min(B_c, d)$:
# its traffic $T_c \cdot n(3d+4)$ is then $\Theta(n^2 d^2 / M)$. That rule suits FA-1's loop
# order, where only $B_c$ matters. FA-2 re-reads $K$ and $V$ once per *query* block, so its
# traffic $\approx 2n^2 d / B_r$ depends on $B_r$ — which the rule caps at $d$, giving $2n^2$
# whatever $M$ is. So FA-2 takes large query blocks as well: below it gets
# $B_r = B_c = \lfloor M/4d \rfloor$ (its four tiles $Q_i, O_i, K_j, V_j$ fill $M$), and then it
# too is $\Theta(n^2 d^2 / M)$.
#
# $M$ is an illustration: 192 KiB of SRAM per streaming multiprocessor (SM), as on an NVIDIA
# A100 (the hardware of the FlashAttention paper), holding 16-bit numbers. Overviews often speak
# of SRAM as "tens of MB": that is the whole chip — about 20 MB over the A100's 108 SMs. One tile
# is worked on by one SM, so it only ever sees that SM's share.

# %%
d_h, heads = 64, 1  # one (batch, head) pair: every head moves the same
M = 192 * 1024 // 2  # fast-memory elements: 192 KiB of 2-byte numbers
Br_p, Bc_p = T.paper_block_sizes(M, d_h)
B_2 = M // (4 * d_h)  # FA-2: square tiles, Q_i, O_i, K_j, V_j of B_2 × d_h fill M
blocks = {"FlashAttention-1": (Br_p, Bc_p), "FlashAttention-2": (B_2, B_2)}
print(f"M = {M:,} elements, d_h = {d_h}: FA-1 (paper's rule) B_r = {Br_p}, B_c = {Bc_p};  FA-2 B_r = B_c = {B_2}")
n_line = 2 ** np.arange(8, 15)  # 256 … 16384, formulas only
n_io = 2 ** np.arange(8, 11 if FAST else 12)  # 256 … 1024 (fast) or 2048: the loops really run
io_formula = {
    "standard attention": [T.standard_attention_io(n, n, d_h)["total"] for n in n_line],
    "FlashAttention-1": [T.flash1_io(n, n, d_h, *blocks["FlashAttention-1"])["total"] for n in n_line],
    "FlashAttention-2": [T.flash2_io(n, n, d_h, *blocks["FlashAttention-2"])["total"] for n in n_line],
}
io_counted = {name: [] for name in io_formula}
for n in n_io:
    q, k, v = (rng.standard_normal((1, heads, n, d_h)).astype(np.float32) for _ in range(3))
    for name in io_formula:
        io = T.IOCounter()
        if name == "standard attention":
            T.standard_attention(q, k, v, io=io)
        else:
            B_r, B_c = blocks[name]
            T.flash_attention(q, k, v, block_q=B_r, block_k=B_c, version=int(name[-1]), io=io)
        io_counted[name].append(io.total)
closed_form = {  # the bullets above, written out: (n, B_r, B_c) -> elements moved, d = d_h
    "standard attention": lambda n, Br, Bc: 4 * n * d_h + 4 * n ** 2,
    "FlashAttention-1": lambda n, Br, Bc: -(-n // Bc) * n * (3 * d_h + 4) + n * (3 * d_h + 2),
    "FlashAttention-2": lambda n, Br, Bc: -(-n // Br) * 2 * n * d_h + n * (2 * d_h + 1),
}
for name in io_formula:
    same = [c == f for c, f in zip(io_counted[name], np.array(io_formula[name])[np.isin(n_line, n_io)])]
    Br, Bc = blocks.get(name, (0, 0))
    closed = [closed_form[name](int(n), Br, Bc) for n in n_line]
    print(f"{name:18s} counted {io_counted[name]}  == formula: {all(same)}  == closed form: "
          f"{io_counted[name] == closed[:len(n_io)]}")
    assert all(same), f"{name}: the kernel's counter differs from io_count's formula"
    assert io_formula[name] == closed and io_counted[name] == closed[:len(n_io)], f"{name}: not the closed form"
ratio = {name: io_formula["standard attention"][-1] / io_formula[name][-1] for name in io_formula}
print(f"at n = {n_line[-1]}: standard moves {ratio['FlashAttention-1']:.1f}× FlashAttention-1's traffic "
      f"and {ratio['FlashAttention-2']:.1f}× FlashAttention-2's")

# %% [markdown]
# The saving comes from the size of the tiles: FlashAttention-2 streams all of $K$ and $V$
# once per query block, FlashAttention-1 moves every $Q_i, O_i$ once per key block, so larger
# blocks mean fewer trips. Fix $n$ and grow both blocks together ($B_r = B_c = B$): standard
# attention does not care, the tiled kernels move less and less, down to one pass over
# everything when a single block covers the sequence: FA-2 then reads $Q, K, V$ and writes $O, L$
# once, $4nd + n$; FA-1 also initialises $O, l, m$ and reads them back once, $6nd + 6n$.
# Tiny tiles are worse than no tiling:
# at $B = 16$ both kernels move more than standard attention. The limit is the fast memory: $K_j$,
# $V_j$, $Q_i$, $O_i$ together take about $4 B d_h$ elements, which must fit in $M$ (dotted line).

# %%
n_m = 512 if FAST else 1024
B_line = 2 ** np.arange(4, int(np.log2(n_m)) + 1)  # 16 … n
B_meas = np.array([64, 256, n_m])  # the loops really run for these (small blocks mean many Python steps)
io_B = {
    "standard attention": np.full(len(B_line), T.standard_attention_io(n_m, n_m, d_h)["total"], float),
    "FlashAttention-1": np.array([T.flash1_io(n_m, n_m, d_h, int(B), int(B))["total"] for B in B_line], float),
    "FlashAttention-2": np.array([T.flash2_io(n_m, n_m, d_h, int(B), int(B))["total"] for B in B_line], float),
}
q, k, v = (rng.standard_normal((1, heads, n_m, d_h)).astype(np.float32) for _ in range(3))
io_B_counted = {"FlashAttention-1": [], "FlashAttention-2": []}
for B in B_meas:
    for version in (1, 2):
        io = T.IOCounter()
        T.flash_attention(q, k, v, block_q=int(B), block_k=int(B), version=version, io=io)
        io_B_counted[f"FlashAttention-{version}"].append(io.total)
for name, counted in io_B_counted.items():
    assert counted == [io_B[name][list(B_line).index(B)] for B in B_meas]
print(f"n = {n_m}: counted traffic for B = {B_meas.tolist()} equals the formulas: True")
for B in (16, 128, n_m):
    i = list(B_line).index(B)
    print(f"   B = {B:4d}: standard / FA-1 = {io_B['standard attention'][i] / io_B['FlashAttention-1'][i]:5.1f}×,"
          f"  standard / FA-2 = {io_B['standard attention'][i] / io_B['FlashAttention-2'][i]:5.1f}×")
for name in io_B_counted:
    assert np.all(np.diff(io_B[name]) < 0) and np.all(np.diff(io_B_counted[name]) < 0), f"{name}: less as B grows"
    assert io_B[name][0] > io_B["standard attention"][0], f"{name} at B = 16 moves more than standard attention"
one_pass = {"FlashAttention-1": 6 * n_m * d_h + 6 * n_m, "FlashAttention-2": 4 * n_m * d_h + n_m}
print(f"   B = n = {n_m}: one pass, counted FA-1 {io_B_counted['FlashAttention-1'][-1]:,} (6nd + 6n = "
      f"{one_pass['FlashAttention-1']:,}), FA-2 {io_B_counted['FlashAttention-2'][-1]:,} (4nd + n = "
      f"{one_pass['FlashAttention-2']:,})")
assert all(io_B_counted[name][-1] == one_pass[name] for name in one_pass), "B = n: one pass over everything"

# %%
fig, (ax_n, ax_M) = P.new_figure(1, 2, figsize=(17, 6.5), layout="constrained")
P.curves(n_line, {k_: np.array(v_, float) for k_, v_ in io_formula.items()},
         {k_: np.array(v_, float) for k_, v_ in io_counted.items()}, x_measured=n_io, ax=ax_n,
         xlabel="sequence length n", ylabel="elements moved to/from HBM (one head)",
         title=f"HBM traffic vs n  (d_h = {d_h}; FA-1 B_r = {Br_p}, B_c = {Bc_p}; FA-2 B_r = B_c = {B_2})",
         measured_label="kernel's counter")
P.curves(B_line, {k_: v_ / 1e6 for k_, v_ in io_B.items()},
         {k_: np.array(v_, float) / 1e6 for k_, v_ in io_B_counted.items()}, x_measured=B_meas, ax=ax_M,
         xlabel="block size B = B_r = B_c (rows per tile)", ylabel="millions of elements moved (one head)",
         title=f"HBM traffic vs tile size  (n = {n_m}, d_h = {d_h})", measured_label="kernel's counter")
B_fit = M / (4 * d_h)  # largest B whose four B × d_h blocks fit in M
ax_M.axvline(B_fit, color="grey", linestyle=":", linewidth=2)
ax_M.text(B_fit * 0.93, 0.97, f"B = {B_fit:.0f}: 4·B·d_h\nfills 192 KiB\nof 16-bit numbers",
          transform=ax_M.get_xaxis_transform(), ha="right", va="top", fontsize=P.TICK_SIZE, color="dimgrey")
P.save(fig, P.figure_path("09_hbm_traffic.png"))

# %% [markdown]
# ## 6. Peak extra memory against $n$
#
# The other half of the story: standard attention needs two $n \times n$ buffers per head
# at its peak ($S$ and $e^{S - m}$), so its memory grows like $n^2$. The tiled kernel needs
# its output, the log-sum-exp $L$ and a handful of $B_r \times B_c$ tiles: it grows like
# $n$. Lines: the byte formulas of `io_count`; dots: the peak of newly allocated bytes
# measured with `tracemalloc` while the function runs (NumPy reports its buffers to it).

# %%
b_p, h_p, d_p, B_p = 1, 2, 64, 128  # float32, blocks of 128 (the package default)
n_peak_line = 2 ** np.arange(8, 15)  # 256 … 16384, formulas only
n_peak = 2 ** np.arange(8, 11 if FAST else 13)  # 256 … 1024 (fast) or 4096: measured
peak_formula = {
    "standard attention": np.array([T.standard_attention_peak_bytes(b_p, h_p, n, n, d_p, 4)
                                    for n in n_peak_line], float),
    "FlashAttention-2": np.array([T.flash_attention_peak_bytes(b_p, h_p, n, n, d_p, 4, B_p, B_p)
                                  for n in n_peak_line], float),
}
x0 = rng.standard_normal((1, 1, 32, 8)).astype(np.float32)
T.measure_peak_bytes(T.flash_attention, x0, x0, x0)  # warm-up: the first call allocates one-off caches
peak_measured = {name: [] for name in peak_formula}
for n in n_peak:
    q, k, v = (rng.standard_normal((b_p, h_p, n, d_p)).astype(np.float32) for _ in range(3))
    _, pk_std = T.measure_peak_bytes(T.standard_attention, q, k, v)
    _, pk_fl = T.measure_peak_bytes(T.flash_attention, q, k, v, block_q=B_p, block_k=B_p)
    peak_measured["standard attention"].append(pk_std)
    peak_measured["FlashAttention-2"].append(pk_fl)
for name in peak_formula:
    f = peak_formula[name][np.isin(n_peak_line, n_peak)]
    rel = np.abs(np.array(peak_measured[name]) - f) / f
    print(f"{name:18s} measured {[f'{p / 2**20:.2f}' for p in peak_measured[name]]} MiB; "
          f"largest gap to the formula {rel.max():.1%}")
    assert rel.max() < 0.05  # small Python objects are counted too
last = {name: peak_formula[name][-1] / 2 ** 20 for name in peak_formula}
print(f"formulas at n = {n_peak_line[-1]}: standard {last['standard attention']:,.0f} MiB, "
      f"tiled {last['FlashAttention-2']:.1f} MiB "
      f"({last['standard attention'] / last['FlashAttention-2']:.0f}× less)")

# %% [markdown]
# ## 7. Backward by recomputation
#
# Training needs $\partial L/\partial Q, \partial L/\partial K, \partial L/\partial V$, and the
# usual backward pass uses $P$, an $n \times n$ matrix per head kept from the forward pass.
# FlashAttention keeps only $O$ and the row log-sum-exp $L_i = m_i + \log l_i$, and rebuilds
# each tile of $P$ when it needs it: $P_{ij} = e^{S_{ij} - L_i}$, already normalised. With
# $D_i = \mathrm{rowsum}(dO_i \circ O_i)$ the tile gradients are
#
# $$dV_j \mathrel{+}= P_{ij}^\top dO_i,\quad dP_{ij} = dO_i V_j^\top,\quad
#   dS_{ij} = P_{ij} \circ (dP_{ij} - D_i),\quad dQ_i \mathrel{+}= dS_{ij} K_j / \sqrt{d_h},\quad
#   dK_j \mathrel{+}= dS_{ij}^\top Q_i / \sqrt{d_h}.$$
#
# It computes $S$ twice (more FLOPs) to move and store far less: on a memory-bound GPU that
# is a win. First, it equals the backward pass that stores $P$:

# %%
n_b, d_b = 48, 16
worst_b = 0.0
for causal_ in (False, True):
    q = rng.standard_normal((1, 4, n_b, d_b))  # (b, h, n, d_h)
    k = rng.standard_normal((1, 2, n_b, d_b))  # (b, h_kv, n, d_h): GQA, 2 query heads per K/V head
    v = rng.standard_normal((1, 2, n_b, d_b))
    dout = rng.standard_normal(q.shape)  # dL/dO from whatever comes after attention
    out, lse = T.flash_attention(q, k, v, causal=causal_, block_q=10, block_k=7, return_lse=True)
    recomputed = T.flash_attention_backward(dout, q, k, v, out, lse, causal=causal_, block_q=10, block_k=7)
    stored = T.attention_backward_naive(dout, q, k, v, causal=causal_)
    for name, g1, g2 in zip(("dQ", "dK", "dV"), recomputed, stored):
        worst_b = max(worst_b, float(np.abs(g1 - g2).max()))
print(f"largest |recomputed − stored-P| over dQ, dK, dV, causal and not: {worst_b:.1e}")
assert worst_b < 1e-12

# %% [markdown]
# Then its memory: the peak of each backward pass, measured, beside two reference sizes —
# one $n \times n$ float32 matrix per head ($b \cdot h \cdot n^2 \cdot 4$ bytes) and the
# gradients themselves ($dQ, dK, dV$: $3 \cdot b \cdot h \cdot n \cdot d_h \cdot 4$ bytes),
# which any backward pass must return.

# %%
n_bw = 2 ** np.arange(7, 11 if FAST else 12)  # 128 … 1024 (fast) or 2048
B_bw = 64  # smaller tiles: the backward holds more of them at once (S, P, dP, dS and their products)
bw_measured = {"backward, P stored": [], "backward, P recomputed": []}
for n in n_bw:
    q, k, v, dout = (rng.standard_normal((b_p, h_p, n, d_p)).astype(np.float32) for _ in range(4))
    out, lse = T.flash_attention(q, k, v, block_q=B_bw, block_k=B_bw, return_lse=True)
    _, pk_naive = T.measure_peak_bytes(T.attention_backward_naive, dout, q, k, v)
    _, pk_flash = T.measure_peak_bytes(T.flash_attention_backward, dout, q, k, v, out, lse,
                                        block_q=B_bw, block_k=B_bw)
    bw_measured["backward, P stored"].append(pk_naive)
    bw_measured["backward, P recomputed"].append(pk_flash)
n_bw_line = 2.0 ** np.arange(7, 13)  # 128 … 4096, reference sizes only
nn_bytes = b_p * h_p * n_bw_line ** 2 * 4  # one n × n float32 matrix per head
grad_bytes = 3 * b_p * h_p * n_bw_line * d_p * 4  # dQ, dK, dV
nn_at = b_p * h_p * n_bw.astype(float) ** 2 * 4
stored_x = np.array(bw_measured["backward, P stored"]) / nn_at
recomp_x = np.array(bw_measured["backward, P recomputed"]) / nn_at
print("P stored:     peak =", np.round(stored_x, 2).tolist(), "× one n×n matrix per head")
print("P recomputed: peak =", np.round(recomp_x, 3).tolist(), "× one n×n matrix per head")
assert np.all(stored_x > 3) and recomp_x[-1] < 0.5

# %%
fig, (ax_f, ax_b) = P.new_figure(1, 2, figsize=(17, 6.5), layout="constrained")
to_mib = lambda a: np.asarray(a, float) / 2 ** 20  # noqa: E731
P.curves(n_peak_line, {k_: to_mib(v_) for k_, v_ in peak_formula.items()},
         {k_: to_mib(v_) for k_, v_ in peak_measured.items()}, x_measured=n_peak, ax=ax_f,
         xlabel="sequence length n", ylabel="peak extra memory (MiB)", measured_label="tracemalloc",
         title=f"Forward: b = {b_p}, h = {h_p}, d_h = {d_p}, float32, B = {B_p}")
P.curves(n_bw_line, {"one n×n matrix per head": to_mib(nn_bytes), "dQ, dK, dV themselves": to_mib(grad_bytes)},
         {k_: to_mib(v_) for k_, v_ in bw_measured.items()}, x_measured=n_bw, ax=ax_b,
         xlabel="sequence length n", ylabel="peak extra memory (MiB)",
         title=f"Backward: stored P vs recomputed tiles (B = {B_bw}; dots measured)",
         styles={"one n×n matrix per head": dict(color="grey", linestyle="--"),
                 "dQ, dK, dV themselves": dict(color="grey", linestyle=":"),
                 "backward, P stored": dict(color=P.LINE_COLORS[0]),
                 "backward, P recomputed": dict(color=P.LINE_COLORS[1])})
P.save(fig, P.figure_path("09_peak_memory.png"))

# %% [markdown]
# ## 8. The benchmark
#
# The project's benchmark (`benchmarks/bench_flash.py`) repeats these measurements at larger
# sizes, with timings; when its results are present, their summary reads:

# %%
bench = ROOT / "benchmarks" / "results" / "flash.md"
summary = {}  # run (the report's section, e.g. "1 thread") -> its "## Summary" bullets
if bench.is_file():  # the benchmark also writes .json and .csv
    section = run = None
    for line in bench.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            run = run if section.lower() == "summary" else section
        elif section is not None and section.lower() == "summary" and line.startswith("- "):
            summary.setdefault(run, []).append(line[2:].strip())
if summary:
    print(f"{bench.relative_to(ROOT)}:")
    for run, bullets in summary.items():
        print(f"  {run}:")
        for line in bullets:
            print("    ", line)
else:
    print("no benchmark summary yet: run `python benchmarks/bench_flash.py --quick`")

# %% [markdown]
# **Takeaways.** FlashAttention computes exactly the attention of lesson 03, tile by tile:
# the online softmax carries $(m, l)$ from tile to tile, causal masks skip whole tiles, and
# the two loop orders differ only in which blocks stay in fast memory. It never writes an
# $n \times n$ matrix, so its slow-memory traffic drops by a factor that grows with the tiles
# the fast memory can hold, and its extra memory grows like $n$ instead of $n^2$; the backward pass buys the same saving with a second
# computation of $S$. On a GPU, where attention waits on memory, that is the 2–4× speed-up
# FlashAttention reports. This lesson measures memory moved and held, not seconds: on a CPU, in NumPy,
# the time of the tiled version is set mostly by its Python loop over tiles (the benchmark
# times both). Lesson 17 runs the same tiles as CUDA kernels and shows the seconds on a GPU.

# %% [markdown]
# **Write it yourself.** `workbook/09_flash_tiling.py` holds `flash_attention` (the FlashAttention-2
# loop), `visible_key_tiles`, `standard_attention_io` and `flash2_io` (section 5's counts of slow-memory
# traffic) and `flash_attention_backward` (section 7's backward by recomputation) as stubs with this
# lesson's formulas; fill them in, then run `python -m transformer check 09`: it runs the package's
# own test cases on your code, measures the memory of a long case (a loop that holds the whole
# n × n matrix fails it) and says what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 09` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/09_flash_tiling.py`.
#
# 1. **Tiles.** $n = 1000$, $B_r = B_c = 64$. Predict $T_r$, the number of tiles in the dense
#    schedule, and the number a causal kernel computes. Check with `T.visible_key_tiles`.
# 2. **Block sizes.** An on-chip memory of 100 KB of float32 and $d_h = 128$: which $B_c$ and $B_r$
#    does the paper's rule $B_c = \lceil M / 4d \rceil$, $B_r = \min(B_c, d)$ pick? Check with
#    `T.paper_block_sizes`.
# 3. **One query block, coded.** Write FlashAttention-2's inner loop for one query block $Q_i$
#    of $B_r = 4$ rows in NumPy: key tiles of $B_c = 4$ over $n_k = 10$ keys (the last tile is
#    short), carrying $m$, $l$ and $O$ as in §3, dividing by $l$ at the end. Compare with
#    `T.flash_attention(…, block_q=4, block_k=4)` and `T.scaled_dot_product_attention`.
