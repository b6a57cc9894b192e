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
# # 08 · Online softmax: one pass, two running numbers
#
# **What you will see.** The softmax of a row computed in a single pass that keeps only
# a running maximum $m$ and a running sum $l$, step by step on an eight-number vector (a
# printed table and a plot); the result checked equal to the usual two-pass softmax; the
# same recurrence applied to whole *blocks* (two partial $(m, l)$ pairs merge into the pair
# of the whole row); and the output of attention accumulated the same way, rescaled by
# $e^{m - m_\text{new}}$ whenever the maximum goes up. This is the piece that lets
# FlashAttention (lesson 09) work on tiles without ever holding a whole row of scores.
#
# **In one line:** softmax needs the row's maximum and sum before any weight is known, but
# both can be carried along in one pass and corrected as they change (Milakov & Gimelshein,
# 2018), which is what lets FlashAttention keep its working set in fast on-chip memory.

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # nothing here is large; the flag is read for uniformity with the other lessons
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The problem: softmax wants the whole row first
#
# The safe softmax of lesson 03 reads the row three times: once for its maximum, once for
# the sum of exponentials, once to divide:
#
# $$m = \max_j x_j, \qquad l = \sum_j e^{x_j - m}, \qquad \mathrm{softmax}(x)_j = \frac{e^{x_j - m}}{l}.$$
#
# Subtracting $m$ keeps every exponent $\le 0$, so nothing overflows. But the sum cannot
# start before the maximum is known — unless we are willing to *correct* the sum each time
# a larger value turns up. That is the online softmax: read $x_1, x_2, \dots$ once, and keep
#
# $$m_j = \max(m_{j-1},\, x_j), \qquad
#   l_j = l_{j-1}\, e^{\,m_{j-1} - m_j} + e^{\,x_j - m_j}, \qquad m_0 = -\infty,\; l_0 = 0.$$
#
# Invariant: after step $j$, $l_j = \sum_{i \le j} e^{x_i - m_j}$. When the maximum rises,
# every earlier term $e^{x_i - m_{j-1}}$ must become $e^{x_i - m_j}$; they all share the factor
# $e^{m_{j-1} - m_j} < 1$, so one multiplication of their sum fixes all of them at once.

# %%
x = np.array([1.0, 3.0, 0.5, 4.0, 2.0, 6.0, 1.5, 5.0])  # (n,) = (8,) scores of one query row
m_hist, l_hist = T.online_softmax_history(x, block=1)  # (8,), (8,): (m_j, l_j) after each step

print(" j    x_j   m_{j-1} -> m_j   rescale e^(m_{j-1}-m_j)   new term e^(x_j-m_j)      l_j")
m_prev, l_prev = -np.inf, 0.0
recurrence_ok = True
for j, (x_j, m_j, l_j) in enumerate(zip(x, m_hist, l_hist), start=1):
    alpha = np.exp(m_prev - m_j)  # 0 at the first step: there is nothing to rescale
    term = np.exp(x_j - m_j)
    recurrence_ok &= bool(np.isclose(l_j, l_prev * alpha + term))
    raised = "  <- max went up" if m_j > m_prev else ""
    print(f"{j:2d}  {x_j:5.1f}   {m_prev:6.1f} -> {m_j:4.1f}   {alpha:14.4f}            {term:14.4f}        "
          f"{l_j:7.4f}{raised}")
    m_prev, l_prev = m_j, l_j
print("every row satisfies l_j = l_{j-1}·e^(m_{j-1}-m_j) + e^(x_j-m_j):", recurrence_ok)
assert recurrence_ok

# %% [markdown]
# After the last step $(m_8, l_8)$ are exactly the maximum and the normaliser of the
# two-pass softmax, so $e^{x_j - m_8}/l_8$ *is* the softmax, not an approximation of it:

# %%
two_pass = T.softmax(x)  # (8,) max, then sum, then divide
one_pass = T.online_softmax(x)  # (8,) from the one-pass (m, l)
m_true, l_true = x.max(), np.exp(x - x.max()).sum()
diff = np.abs(one_pass - two_pass).max()
print(f"final m = {m_hist[-1]:.1f}  (max of x = {m_true:.1f});  final l = {l_hist[-1]:.6f}  "
      f"(Σ e^(x - max) = {l_true:.6f})")
print(f"online softmax vs two-pass softmax: largest difference {diff:.1e}")
assert m_hist[-1] == m_true and np.isclose(l_hist[-1], l_true) and diff < 1e-15
# The sum of the *unshifted* exponentials is e^m · l: it only grows, even when l itself drops.
unshifted = np.exp(m_hist) * l_hist  # (8,)
assert np.all(np.diff(unshifted) > 0) and np.isclose(unshifted[-1], np.exp(x).sum())
print("e^(m_j) · l_j = Σ_{i≤j} e^(x_i):", np.round(unshifted, 1).tolist())

# %%
fig, (ax_m, ax_l) = P.online_softmax_trace(
    m_hist, l_hist, scores=[[v] for v in x], true_max=m_true, true_sum=l_true,
    xlabel="step j  (score x_j folded in)", title="Online softmax, one score per step")
for j in np.nonzero(np.diff(m_hist, prepend=-np.inf) > 0)[0][1:]:  # steps where the max rose
    ax_l.annotate(f"×{np.exp(m_hist[j - 1] - m_hist[j]):.2f}", (j, l_hist[j]), xytext=(0, -26),
                  textcoords="offset points", ha="center", fontsize=P.LABEL_SIZE, color=P.LINE_COLORS[1],
                  fontweight="bold")
ax_l.text(0.99, 0.04, "red: factor e^(m_old − m_new) applied to l\nwhen the max rises",
          transform=ax_l.transAxes, ha="right", va="bottom", fontsize=P.TICK_SIZE, color=P.LINE_COLORS[1])
ax_l.set_ylim(0.6, 1.9)
ax_l.set_xticks(np.arange(len(x)), [str(j) for j in range(1, len(x) + 1)])  # steps 1…8, as in the table
for text in ax_m.get_legend().get_texts() + ax_l.get_legend().get_texts():  # the lesson's letters: x, not s
    text.set_text({"scores in block": "score x_j (one per step)",
                   "full-row Σ exp(s − max)": "full-row Σ exp(x − max)"}.get(text.get_text(), text.get_text()))
P.save(fig, P.figure_path("08_running_max_sum.png"))

# %% [markdown]
# On the course's website, step through the same row one score at a time: $m$, $l$, the factor
# $e^{m_{j-1} - m_j}$ and the output accumulator $O$ of section 3, as the package computes them.
#
# <div class="tfs-view" data-view="online_softmax" data-step="4"></div>

# %% [markdown]
# ## 2. The block form: merging two partial results
#
# Nothing forces us to fold in one number at a time. Split the row into two parts $a$ and
# $b$ (of any sizes), compute each part's own $(m_a, l_a)$ and $(m_b, l_b)$ — possibly on
# different cores — and merge:
#
# $$m = \max(m_a, m_b), \qquad l = l_a\, e^{\,m_a - m} + l_b\, e^{\,m_b - m}.$$
#
# Each partial sum is rescaled to the common maximum. The single-step recurrence of §1 is
# the special case where $b$ holds one number ($m_b = x_j$, $l_b = 1$). The merge is
# symmetric and associative, so the blocks may come in any order and any grouping.

# %%
split = 5  # parts of 5 and 3 numbers: blocks need not be equal
x_a, x_b = x[:split], x[split:]  # (5,), (3,)
m_a, l_a = T.online_softmax_stats(x_a, block=len(x_a))  # (1,), (1,): one block, its own max and sum
m_b, l_b = T.online_softmax_stats(x_b, block=len(x_b))
m_ab, l_ab = T.merge_softmax_stats(m_a, l_a, m_b, l_b)
m_ba, l_ba = T.merge_softmax_stats(m_b, l_b, m_a, l_a)  # the other order
print(f"part a = {x_a.tolist()}: m_a = {m_a[0]:.1f}, l_a = {l_a[0]:.4f}")
print(f"part b = {x_b.tolist()}: m_b = {m_b[0]:.1f}, l_b = {l_b[0]:.4f}")
print(f"merged: m = {m_ab[0]:.1f}, l = {l_a[0]:.4f}·e^({m_a[0]:.0f}-{m_ab[0]:.0f}) + {l_b[0]:.4f}·e^"
      f"({m_b[0]:.0f}-{m_ab[0]:.0f}) = {l_ab[0]:.4f}   (whole row: {l_true:.4f})")
assert m_ab[0] == m_true and np.isclose(l_ab[0], l_true)
assert m_ba[0] == m_ab[0] and np.isclose(l_ba[0], l_ab[0])
parts = [T.online_softmax_stats(x[i:j], block=j - i) for i, j in ((0, 2), (2, 5), (5, 8))]  # three parts
left = T.merge_softmax_stats(*T.merge_softmax_stats(*parts[0], *parts[1]), *parts[2])  # (a · b) · c
right = T.merge_softmax_stats(*parts[0], *T.merge_softmax_stats(*parts[1], *parts[2]))  # a · (b · c)
print(f"three parts grouped two ways: l = {left[1][0]:.6f} and {right[1][0]:.6f}")
assert left[0][0] == right[0][0] == m_true and np.isclose(left[1][0], right[1][0]) and np.isclose(left[1][0], l_true)
for B in (1, 2, 3, 8):  # block sizes that divide n = 8 and one (3) that does not
    ok = np.allclose(T.online_softmax(x, block=B), two_pass, rtol=1e-14, atol=0)
    print(f"online softmax with blocks of {B}: equals the two-pass softmax: {ok}")
    assert ok

# %%
fig, axes = P.new_figure(1, 3, figsize=(17, 5.2), layout="constrained", sharey=True)
idx_a, idx_b = np.arange(split), np.arange(split, len(x))
col_a, col_b = P.LINE_COLORS[0], P.LINE_COLORS[3]
panels = [
    (f"part a alone: m = m_a = {m_a[0]:.0f}\nsum l_a = {l_a[0]:.3f}", np.exp(x_a - m_a), None),
    (f"part b alone: m = m_b = {m_b[0]:.0f}\nsum l_b = {l_b[0]:.3f}", None, np.exp(x_b - m_b)),
    (f"merged, common m = {m_ab[0]:.0f}: a × e^(m_a − m) = a × {np.exp(m_a[0] - m_ab[0]):.3f}\n"
     f"sum l = {l_ab[0]:.3f} = Σ e^(x − max) of the whole row",
     np.exp(x_a - m_a) * np.exp(m_a - m_ab), np.exp(x_b - m_b) * np.exp(m_b - m_ab)),
]
for a, (title, bars_a, bars_b) in zip(axes, panels):
    if bars_a is not None:
        a.bar(idx_a, bars_a, color=col_a, label="part a")
    if bars_b is not None:
        a.bar(idx_b, bars_b, color=col_b, label="part b")
    if bars_a is not None and bars_b is not None:  # ghost bars: part a before its rescaling
        a.bar(idx_a, np.exp(x_a - m_a), color="none", edgecolor=col_a, linestyle="--", linewidth=1.5,
              label="part a before rescaling")
    a.set_xticks(np.arange(len(x)), [f"{v:g}" for v in x])
    a.set_xlim(-0.7, len(x) - 0.3)
    P.style_axes(a, title, "score x_j", None, grid=True)
    a.legend(fontsize=P.TICK_SIZE, frameon=False, loc="upper left")
axes[0].set_ylabel("e^(x_j − m), m as in each title", fontsize=P.LABEL_SIZE)
axes[0].set_ylim(0, 1.25)
fig.suptitle("Two partial (m, l) pairs merge into the whole row's: rescale each to the common max",
             fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("08_merge_blocks.png"))

# %% [markdown]
# ## 3. The output, rescaled the same way
#
# Attention does not need the probabilities themselves, only their weighted sum of values
# $o = \sum_j \mathrm{softmax}(x)_j\, v_j$. Keep an unnormalised accumulator $O$ beside
# $m$ and $l$; each step shrinks the old $O$ by the same factor as $l$ and adds the new
# value with its weight:
#
# $$O_j = O_{j-1}\, e^{\,m_{j-1} - m_j} + e^{\,x_j - m_j}\, v_j, \qquad o = O_n / l_n .$$
#
# Some texts write this recurrence with different letters: their running **sum** may be
# called $m$ (our $l$), and a version that subtracts **no** maximum overflows exactly as the
# naive softmax of lesson 03 (§7) does. One can also keep $O$ normalised after every step,
# $O_j = \tfrac{l_{j-1}}{l_j} e^{m_{j-1} - m_j} O_{j-1} + \tfrac{e^{x_j - m_j}}{l_j} v_j$:
# FlashAttention-1 does that, FlashAttention-2 divides once at the end. A bonus: $O_j / l_j$ is exactly attention over the first $j$ keys, so the
# running output is always a valid weighted average of the values seen so far.
#
# Below, the scores $x$ come from one query against eight keys ($d_h = 2$, $q = (1, 0)$,
# $k_j = (x_j, 0)$, scale 1, so $q \cdot k_j = x_j$) and each value is a 2-D vector, so the
# running output can be drawn.
# The step-by-step loop is written out here; the package's tiled kernel, with one key per
# tile, must agree with it step for step.

# %%
V = rng.normal(size=(len(x), 2))  # (n, d_v) = (8, 2) one value vector per key
O, m, l = np.zeros(2), -np.inf, 0.0  # (d_v,), scalar, scalar: nothing seen yet
running = []  # O_j / l_j after each step
for x_j, v_j in zip(x, V):
    m_new = max(m, x_j)
    alpha = np.exp(m - m_new)  # e^(m_old - m_new): shrink everything accumulated so far
    p_j = np.exp(x_j - m_new)  # weight of the new value relative to the new max
    l = l * alpha + p_j
    O = O * alpha + p_j * v_j  # (d_v,)
    m = m_new
    running.append(O / l)
running = np.array(running)  # (n, d_v)
prefix_ok = all(np.allclose(running[j], T.softmax(x[:j + 1]) @ V[:j + 1]) for j in range(len(x)))
print("O_j / l_j equals softmax(x_1..x_j) @ v_1..v_j at every step:", prefix_ok)

q = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)  # (b, h, n_q, d_h) = (1, 1, 1, 2)
k = np.stack([x, np.zeros_like(x)], axis=-1).reshape(1, 1, -1, 2)  # (b, h_kv, n_k, d_h) = (1, 1, 8, 2): q · k_j = x_j
v = V.reshape(1, 1, -1, 2)  # (1, 1, 8, 2)
trace = T.FlashTrace()
tiled = T.flash_attention(q, k, v, block_k=1, scale=1.0, trace=trace)  # (1, 1, 1, 2)
reference = T.scaled_dot_product_attention(q, k, v, scale=1.0)  # (1, 1, 1, 2)
_, m_tr, l_tr = trace.row_history(0)  # the kernel's own m and l after each of its 8 tiles
kernel_ok = np.allclose(m_tr, m_hist) and np.allclose(l_tr, l_hist)
print("flash_attention with one key per tile keeps the same m and l:", kernel_ok)
print("final output O_n / l_n =", np.round(running[-1], 6).tolist(),
      " flash_attention =", np.round(tiled[0, 0, 0], 6).tolist(),
      " softmax(x) @ V =", np.round(reference[0, 0, 0], 6).tolist())
assert prefix_ok and kernel_ok
assert np.allclose(running[-1], reference[0, 0, 0]) and np.allclose(tiled, reference)

# %%
fig, _ = P.decoding.output_rescaling(x, V, running, reference[0, 0, 0], m_hist)
P.save(fig, P.figure_path("08_output_rescaling.png"))

# %% [markdown]
# **Takeaways.** Two numbers per row, $m$ and $l$, replace the whole row of scores: each
# new score (or block of scores) updates them, and one factor $e^{m_\text{old} - m_\text{new}}$
# repairs every earlier term when the maximum rises. The same factor rescales the output
# accumulator, so attention can be computed key block by key block and still equal the
# two-pass softmax exactly. Lesson 09 runs this over tiles of $Q$ and $K$.

# %% [markdown]
# **Write it yourself.** `workbook/08_online_softmax.py` holds `merge_softmax_stats`,
# `online_softmax_stats` (the one-pass loop: the checker reads your running (m, l) after each
# block, so the whole row's max taken first is told apart) and `online_attention_update` as stubs
# with this lesson's formulas; fill them in, then run `python -m transformer check 08`: it runs the
# package's own test cases on your code and says what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 08` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/08_online_softmax.py`.
#
# 1. Run the recurrence by hand on the scores 1, 3, 2, one at a time: write $(m, l)$ after
#    each. Check with `T.online_softmax_history`.
# 2. Merge two partial results $(m_a, l_a) = (3, 1.5)$ and $(m_b, l_b) = (5, 2)$ into one.
# 3. **Code it.** Give the scores 1, 3, 2 the values 10, 20, 30 and carry the unnormalised output
#    $O$ along by hand, rescaled as in §3: what is $O / l$ at the end? Then write the recurrence
#    as a NumPy loop, one key at a time, for a row of 100 random scores with values of $d_v = 4$,
#    and compare with `T.softmax(s) @ v` and the last $(m, l)$ of `T.online_softmax_history`.
