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
# # 03 · Scaled dot-product attention
#
# **What you will see.** A seven-token sentence turned into queries, keys and values; the
# score matrix $QK^\top/\sqrt{d_k}$, the weights softmax makes of it and the weighted sum
# $PV$ they take of the values, first by hand on three tokens; a measurement of
# *why* the scores are divided by $\sqrt{d_k}$ (without it softmax saturates as $d_k$ grows
# and, from $d_k \approx 16$ on, its gradient shrinks below the scaled one's); the additive score the dot product replaced, and what it
# costs; and why every softmax subtracts the row maximum (without it
# `exp` overflows, in float16 already at logits above 11).
#
# **Sources.** The formula and the $1/\sqrt{d_k}$ are those of "Attention Is All You Need"
# (Vaswani et al., 2017, §3.2.1), which also compares the dot-product score with the additive one
# of Bahdanau et al.; the max-subtraction is how every softmax implementation avoids overflow.
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$

# %%
import os
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one BLAS thread gives steadier timings (§6)

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 shrinks the measurements for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. From a sentence to $X$
#
# A short sentence whose last word needs context. Each word is one token here, with an id from a tiny
# vocabulary; the embedding table $W_E$ is random (a trained one comes in the MiniLM and
# SmolLM2 lessons) and the sinusoidal positions of lesson 02 are added.

# %%
tokens = "The dog chased the squirrel because it".split()
vocab = sorted(set(tokens))
ids = np.array([[vocab.index(t) for t in tokens]])  # (b, n) = (1, 7)
d_model, d_k = 16, 8
W_E = rng.normal(size=(len(vocab), d_model))  # (v, d_model)
X = T.embed(ids, W_E) + T.sinusoidal_positions(len(tokens), d_model, dtype=np.float64)  # (b, n, d_model)
print("ids:", ids.tolist())
print("X shape (b, n, d_model):", X.shape)

# %% [markdown]
# ## 2. Queries, keys, values
#
# Three learned matrices project each token: $Q = XW_q$, $K = XW_k$, $V = XW_v$ with
# $W_q, W_k, W_v \in \mathbb{R}^{d_\text{model}\times d_k}$. A query asks "what am I looking
# for", a key says "what I contain", a value is what gets passed on.

# %%
W_q, W_k, W_v = (rng.normal(size=(d_model, d_k)) / np.sqrt(d_model) for _ in range(3))  # (d_model, d_k)
Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (b, n, d_k) each
q, k, v = Q[:, None], K[:, None], V[:, None]  # one head: (b, h=1, n, d_k)
print("Q, K, V shapes:", Q.shape, K.shape, V.shape)
print("as one head (b, h, n, d_k):", q.shape)

# %% [markdown]
# ## 3. One query by hand
#
# Three tokens, $d_k = 2$, small integers. The query $q$ is compared with each key by a dot
# product, scaled by $1/\sqrt{d_k}$; softmax turns the three scores into weights; the output is
# the weighted sum of the values:
#
# $$s_j = \frac{q \cdot k_j}{\sqrt{d_k}}, \qquad p_j = \frac{e^{s_j}}{\sum_{j'} e^{s_{j'}}}, \qquad
#   o = \sum_j p_j\, v_j .$$
#
# **A soft dictionary lookup.** A Python `dict` returns the value whose key *equals* the
# query, and nothing else. Attention compares the query with *every* key, and instead of
# picking one it returns a blend of all the values, each weighted by how well its key
# matched. A key that matches much better than the rest takes almost all the weight (the
# hard lookup of a `dict`); keys that match equally share it (an average). Because the blend
# is smooth in $q$ and $k$, the model can learn, by gradient descent, what to look for.

# %%
q1 = np.array([2.0, 1.0])  # (d_k,) the query
K1 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (n, d_k) three keys
V1 = np.array([[4.0, 0.0], [0.0, 4.0], [2.0, 3.0]])  # (n, d_v) three values
# scores: q·k_j / √2 = [2, 1, 3] / 1.414
s1 = np.array([2 * 1 + 1 * 0, 2 * 0 + 1 * 1, 2 * 1 + 1 * 1]) / np.sqrt(2)  # (n,)
e1 = np.exp(s1 - s1.max())  # (n,) e^(s_j − max): e^-0.707, e^-1.414, e^0
p1 = e1 / e1.sum()  # (n,) weights, sum 1
o1 = p1[0] * V1[0] + p1[1] * V1[1] + p1[2] * V1[2]  # (d_v,) the weighted sum of the values
print("scores  s =", np.round(s1, 3))
print("e^(s − max) =", np.round(e1, 3), " sum =", round(float(e1.sum()), 3))
print("weights p =", np.round(p1, 3))
print("output  o = p0·v0 + p1·v1 + p2·v2 =", np.round(o1, 3))
o_pkg = T.scaled_dot_product_attention(q1[None, None, None], K1[None, None], V1[None, None])[0, 0, 0]  # (d_v,)
hand_ok = np.allclose(o1, o_pkg, atol=1e-12) and np.allclose(p1, [0.284, 0.140, 0.576], atol=5e-4)
print("by hand == T.scaled_dot_product_attention:", hand_ok)
assert hand_ok

# %%
fig, _ = P.early.soft_lookup(q1, K1, V1, p1, o1, names=["the", "dog", "barked"])
fig.suptitle(f"q·k / √2 = {np.round(s1, 2).tolist()}  →  softmax  →  p = {np.round(p1, 3).tolist()}",
             fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("03_soft_lookup.png"))

# %% [markdown]
# On the course's website, drag the query yourself: the scores, the weights and the weighted sum
# follow it. At $q = (2, 1)$ they are the numbers printed above.
#
# <div class="tfs-view" data-view="soft_lookup"></div>

# %% [markdown]
# ## 4. All queries at once: $P\,V$
#
# With every token asking at once, the scores form a matrix: entry $(i, j)$ of
# $S = QK^\top/\sqrt{d_k}$ is how well query $i$ matches key $j$. Softmax turns each row into
# weights, $P_{ij} = e^{S_{ij}} / \sum_{j'} e^{S_{ij'}}$, and one matrix product takes every
# weighted sum: row $i$ of $O = PV$ is $\sum_j P_{ij} V_j$, row $i$ of $P$ times $V$.

# %%
S = T.attention_scores(q, k)  # (b, h, n, n), already divided by √d_k
Pw = T.softmax(S)  # (b, h, n, n)
out = Pw @ v  # (b, h, n, d_k)
print("scores S shape:", S.shape)
print("row 'it' of S:", np.round(S[0, 0, -1], 2))
print("row 'it' of P:", np.round(Pw[0, 0, -1], 3))

rows_ok = np.allclose(Pw.sum(-1), 1.0)
print("rows sum to 1:", rows_ok)
mix_ok = np.allclose(out[0, 0, -1], sum(Pw[0, 0, -1, j] * v[0, 0, j] for j in range(len(tokens))))
print("output of 'it' = Σ_j P[it, j] · V_j:", mix_ok)
sdpa_ok = np.allclose(out, T.scaled_dot_product_attention(q, k, v))
print("step by step == scaled_dot_product_attention:", sdpa_ok)
assert rows_ok and mix_ok and sdpa_ok

# %%
fig, axes = P.new_figure(1, 2, figsize=(16, 6.5), layout="constrained")
P.attention_heatmap(S[0, 0], tokens, tokens, ax=axes[0], signed=True, title="Scores  QKᵀ/√d_k")
P.attention_heatmap(Pw[0, 0], tokens, tokens, ax=axes[1], title="Weights  softmax(row)", vmax=1.0)
fig.suptitle("Random projections: the pattern means nothing yet, the arithmetic is the point",
             fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("03_scores_to_weights.png"))

# %% [markdown]
# The last step, drawn: the outlined row of $P$ (the weights of "it") runs down the columns of
# $V$, and each dimension of the output of "it" is that weighted sum.

# %%
fig, _ = P.early.weighted_sum(Pw[0, 0], v[0, 0], out[0, 0], tokens, row=len(tokens) - 1,
                              title="O = P V: each output row is a weighted sum of the value rows")
P.save(fig, P.figure_path("03_weighted_sum.png"))

# %% [markdown]
# ## 5. Why divide by $\sqrt{d_k}$
#
# If the entries of $q$ and $k$ are independent with mean 0 and variance 1, then
# $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ has variance $d_k$: its spread grows like $\sqrt{d_k}$.
# Large logits push softmax towards a one-hot vector, where its Jacobian
# $J = \mathrm{diag}(p) - pp^\top$ is nearly zero and gradients stop flowing.
# Dividing by $\sqrt{d_k}$ brings the variance back to 1 for every $d_k$.
# We measure it on random vectors: the spread of $q\cdot k$, the entropy of the weights
# (high = spread out, 0 = one-hot) and the size $\lVert J\rVert_F$ of the softmax Jacobian.
# Unscaled, $\lVert J\rVert_F$ falls as $d_k$ grows and is below the scaled one from $d_k = 16$ on
# (at $d_k = 4$ the logits are still small enough that the unscaled $J$ is slightly larger).

# %%
d_ks = np.array([4, 16, 64, 256] if FAST else [4, 16, 64, 256, 1024])
trials, n_keys = (200, 16) if FAST else (2000, 16)


def row_stats(logits):  # (trials, n_keys) -> mean entropy, mean ‖J‖_F
    p = T.softmax(logits)  # (trials, n_keys)
    entropy = -(p * np.log(np.clip(p, 1e-300, None))).sum(-1)  # (trials,)
    J = p[:, :, None] * np.eye(n_keys) - p[:, :, None] * p[:, None, :]  # (trials, n_keys, n_keys)
    return entropy.mean(), np.sqrt((J ** 2).sum((-2, -1))).mean()


spread, H_raw, H_scaled, J_raw, J_scaled = [], [], [], [], []
for dk in d_ks:
    qv = rng.normal(size=(trials, 1, dk))  # (trials, 1, d_k)
    kv = rng.normal(size=(trials, n_keys, dk))  # (trials, n_keys, d_k)
    dots = (qv @ kv.mT)[:, 0]  # (trials, n_keys) unscaled q·k
    spread.append(dots.std())
    h0, j0 = row_stats(dots)
    h1, j1 = row_stats(dots / np.sqrt(dk))
    H_raw.append(h0), H_scaled.append(h1), J_raw.append(j0), J_scaled.append(j1)
    print(f"d_k={dk:5d}  std(q·k)={dots.std():6.2f} (√d_k={np.sqrt(dk):5.2f})  "
          f"entropy raw={h0:.2f} scaled={h1:.2f}  ‖J‖ raw={j0:.3f} scaled={j1:.3f}")

std_ok = np.allclose(spread, np.sqrt(d_ks), rtol=0.1)
print("std(q·k) ≈ √d_k (within 10 %):", std_ok)
flat_ok = max(H_scaled) - min(H_scaled) < 0.15 and H_raw[-1] < 0.5 * H_scaled[-1]
print("scaled entropy stays flat, unscaled collapses:", flat_ok)
J_raw_a, J_scaled_a = np.array(J_raw), np.array(J_scaled)
vanish_ok = bool(np.all(np.diff(J_raw_a) < 0) and np.all(J_raw_a[d_ks >= 16] < J_scaled_a[d_ks >= 16])
                 and J_raw_a[-1] < 0.5 * J_scaled_a[-1])
print("unscaled ‖J‖ falls with d_k, below the scaled one from d_k = 16 on:", vanish_ok)
assert std_ok and flat_ok and vanish_ok

# %%
fig, axes = P.new_figure(1, 3, figsize=(20, 6), layout="constrained")
P.curves(d_ks, {"√d_k": np.sqrt(d_ks)}, {"√d_k": np.array(spread)}, ax=axes[0], xlabel="d_k",
         ylabel="std of q·k", title="Dot products spread like √d_k")
P.curves(d_ks, {f"uniform: ln {n_keys}": np.full(len(d_ks), np.log(n_keys))},
         {"QKᵀ (unscaled)": np.array(H_raw), "QKᵀ/√d_k": np.array(H_scaled)}, ax=axes[1],
         xlabel="d_k", ylabel="entropy of a weight row (nats)", logy=False,
         title="Unscaled softmax turns one-hot", styles={f"uniform: ln {n_keys}": {"linestyle": "--", "color": "grey"}})
axes[1].set_ylim(0, np.log(n_keys) * 1.1)
P.curves(d_ks, None, {"QKᵀ (unscaled)": np.array(J_raw), "QKᵀ/√d_k": np.array(J_scaled)}, ax=axes[2],
         xlabel="d_k", ylabel="‖J‖_F of softmax", title="…and its gradient vanishes")
for a in axes[1:]:
    for ln, c in zip(a.lines[-2:], (P.LINE_COLORS[1], P.LINE_COLORS[0])):
        ln.set_color(c), ln.set_linestyle("-")
    a.legend(fontsize=P.TICK_SIZE, frameon=False)
fig.suptitle(f"Random q, k with N(0, 1) entries, {n_keys} keys, {trials} rows per point", fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("03_why_scale.png"))

# %% [markdown]
# One row at $d_k = 512$ makes the same point by eye: unscaled, one key takes (almost) all
# the weight; scaled, several keys share it.

# %%
dk = 512
qv, kv = rng.normal(size=(1, dk)), rng.normal(size=(n_keys, dk))
raw = (kv @ qv[0])  # (n_keys,)
p_raw, p_scaled = T.softmax(raw), T.softmax(raw / np.sqrt(dk))
print("largest weight unscaled:", round(float(p_raw.max()), 3), " scaled:", round(float(p_scaled.max()), 3))
assert p_raw.max() > 0.9 > p_scaled.max()

fig, axes = P.new_figure(1, 2, figsize=(15, 4.8), sharey=True, layout="constrained")
keys = np.arange(n_keys)
for a, p, name in ((axes[0], p_raw, "unscaled  softmax(q·k)"), (axes[1], p_scaled, "scaled  softmax(q·k / √d_k)")):
    a.bar(keys, p, color=P.ON_COLOR)
    a.set_xticks(keys)
    P.style_axes(a, f"{name}\nlargest weight {p.max():.2f}", "key j", "weight")
axes[0].set_ylim(0, 1.05)
fig.suptitle(f"One query against {n_keys} keys, d_k = {dk}", fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("03_saturation_example.png"))

# %% [markdown]
# ## 6. The other score: additive attention
#
# The original paper weighs two ways to score how much query $q_i$ should read key $k_j$. Dot
# product, as above, and **additive** attention (Bahdanau et al.), a small network with one
# hidden layer of size $d_a$ per pair:
#
# $$e_{ij} = w^\top \tanh(q_i W_q + k_j W_k), \qquad W_q \in \mathbb{R}^{d_q \times d_a},\;
#   W_k \in \mathbb{R}^{d_k \times d_a},\; w \in \mathbb{R}^{d_a}$$
#
# The paper found the two about equal for small $d_k$ and additive better than *unscaled*
# dot products for large $d_k$ — the saturation measured above — yet chose the dot product,
# scaled, because it is "much faster and more space-efficient": one matrix product, where
# additive scoring forms a $d_a$-vector for every one of the $n_q n_k$ pairs. The quality
# claim needs trained models; the other two — the scale of the scores, and the cost — we
# measure with `T.additive_scores` (tested against torch and a plain loop).
#
# First the scale: since $|\tanh| < 1$, $|e_{ij}| \le \lVert w \rVert_1$ whatever $d_k$ is.
# With weights drawn as a layer would be initialised ($W \sim \mathcal N(0, 1/d_k)$,
# $w \sim \mathcal N(0, 1/d_a)$; 20 such networks per point, each scoring its share of the
# rows), the spread of additive scores does not move with $d_k$.

# %%
d_a, nets = 64, 20
spread_add, H_add = [], []
for dk in d_ks:
    qv = rng.normal(size=(trials, 1, dk))  # (trials, 1, d_k), as in §5
    kv = rng.normal(size=(trials, n_keys, dk))  # (trials, n_keys, d_k)
    e = []
    for rows in np.array_split(np.arange(trials), nets):  # one freshly drawn network per share of the rows
        W_q, W_k = rng.normal(size=(dk, d_a)) / np.sqrt(dk), rng.normal(size=(dk, d_a)) / np.sqrt(dk)
        w_a = rng.normal(size=d_a) / np.sqrt(d_a)
        e_net = T.additive_scores(qv[rows], kv[rows], W_q, W_k, w_a)[:, 0]  # (rows, n_keys)
        assert np.abs(e_net).max() <= np.abs(w_a).sum()  # bounded by ‖w‖₁
        e.append(e_net)
    e = np.concatenate(e)  # (trials, n_keys)
    spread_add.append(e.std()), H_add.append(row_stats(e)[0])
    print(f"d_k={dk:5d}  std(additive e)={e.std():.2f}  entropy={H_add[-1]:.2f}  (scaled dot: {H_scaled[list(d_ks).index(dk)]:.2f})")
add_flat = max(spread_add) / min(spread_add) < 1.3
print("additive spread stays within 30 % over all d_k:", add_flat)
assert add_flat

# %% [markdown]
# Then the cost, on one head with $d_k = d_a = 64$: the time of the score matrix (the
# fastest of 5 runs: other programs on the machine only ever add time, so timings on a busy
# machine still wobble) and its peak extra memory — measured with `tracemalloc`, which NumPy tells about
# every buffer, beside the formulas. Dot product: the $n \times n$ product and its scaled
# copy, $2n^2$ floats. Additive: the $(n, n, d_a)$ sum and its tanh, alive together while
# tanh runs, $2n^2 d_a$ floats (`T.additive_peak_bytes`).

# %%
import time  # noqa: E402

ns_cost = np.array([64, 128, 256] if FAST else [64, 128, 256, 512, 1024])
t_dot, t_add, m_dot, m_add = [], [], [], []
for n_ in ns_cost:
    x_q = rng.standard_normal((1, 1, n_, 64)).astype(np.float32)  # (b, h, n, d_k)
    x_k = rng.standard_normal((1, 1, n_, 64)).astype(np.float32)
    W_q = (rng.standard_normal((64, d_a)) / 8).astype(np.float32)
    w_a = (rng.standard_normal(d_a) / 8).astype(np.float32)
    runs = {"dot": lambda: T.attention_scores(x_q, x_k), "add": lambda: T.additive_scores(x_q, x_k, W_q, W_q, w_a)}
    for name, fn in runs.items():
        fn()  # warm up: NumPy's own one-off buffers are not the formula's
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        (t_dot if name == "dot" else t_add).append(min(times))
        peak = T.measure_peak_bytes(fn)[1]
        (m_dot if name == "dot" else m_add).append(peak)
    print(f"n={n_:5d}  dot {t_dot[-1] * 1e3:8.2f} ms {m_dot[-1] / 2**20:8.2f} MiB   "
          f"additive {t_add[-1] * 1e3:8.2f} ms {m_add[-1] / 2**20:8.2f} MiB   "
          f"ratio {t_add[-1] / t_dot[-1]:5.0f}× time, {m_add[-1] / m_dot[-1]:4.0f}× memory")
f_dot = 2 * ns_cost.astype(float) ** 2 * 4
f_add = np.array([T.additive_peak_bytes(int(n_), int(n_), d_a) for n_ in ns_cost], float)
mem_ok = np.allclose(m_add, f_add, rtol=0.05) and np.allclose(m_dot, f_dot, rtol=0.05)
print("measured peaks within 5 % of the formulas:", mem_ok)
assert mem_ok and sum(t_add) > 5 * sum(t_dot)  # summed over n: one slow run cannot flip it

# %%
fig, axes = P.new_figure(1, 3, figsize=(20, 6), layout="constrained")
P.curves(d_ks, {"unscaled q·k: √d_k": np.sqrt(d_ks)},
         {"unscaled q·k: √d_k": np.array(spread), "scaled q·k/√d_k": np.array(spread) / np.sqrt(d_ks),
          f"additive, d_a = {d_a}": np.array(spread_add)},
         ax=axes[0], xlabel="d_k", ylabel="std of the scores", title="Additive scores do not grow with d_k")
P.curves(ns_cost, None, {"dot product  QKᵀ/√d_k": np.array(t_dot) * 1e3, f"additive, d_a = {d_a}": np.array(t_add) * 1e3},
         ax=axes[1], ylabel="time of the n × n scores (ms, fastest of 5)", title="…but cost a d_a-vector per pair")
MiB = 2 ** 20
P.curves(ns_cost, {"dot: 2·n²·4 B": f_dot / MiB, "additive: 2·n²·d_a·4 B": f_add / MiB},
         {"dot: 2·n²·4 B": np.array(m_dot) / MiB, "additive: 2·n²·d_a·4 B": np.array(m_add) / MiB},
         ax=axes[2], ylabel="peak extra memory (MiB)", title="…and d_a times the memory",
         measured_label="tracemalloc")
fig.suptitle("Additive vs dot-product scores (one head, float32; d_k = 64 for time and memory)", fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("03_additive_vs_dot.png"))

# %% [markdown]
# ## 7. Why subtract the maximum
#
# $e^x$ overflows float32 above $x \approx 88.7$ and float16 above $x \approx 11.1$ (its
# largest number is 65504). Softmax does not change when a constant is subtracted from a
# row, $\mathrm{softmax}(x - c) = \mathrm{softmax}(x)$, so the package subtracts the row max:
# the largest exponent is then $e^0 = 1$ and nothing can overflow.
# Below, the "naive" formula $e^{x}/\sum e^{x}$ is written out only to watch it fail: first
# the sum overflows (the weight drops to 0), then $e^x$ itself does ($\infty/\infty$ = NaN).

# %%
big = np.array([1000.0, 1001.0, 1002.0], dtype=np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    naive_big = np.exp(big) / np.exp(big).sum()
stable_big = T.softmax(big)
print("naive  softmax([1000, 1001, 1002]) in float32:", naive_big)
print("stable softmax([1000, 1001, 1002]) in float32:", np.round(stable_big, 4))
ref = np.exp([-2.0, -1.0, 0.0]) / np.exp([-2.0, -1.0, 0.0]).sum()  # the same row shifted by hand
stable_ok = np.allclose(stable_big, ref, atol=1e-6) and np.isnan(naive_big).all()
print("stable equals the hand-shifted row, naive gives NaN:", stable_ok)
assert stable_ok

# %%
offsets = np.arange(0.0, 100.0, 0.25)  # the row is [c, c+1, c+2]
rows = offsets[:, None] + np.array([0.0, 1.0, 2.0])  # (len(c), 3)
p_top = ref[-1]  # the exact weight of the largest logit, for every c
curves = {}
with np.errstate(over="ignore", invalid="ignore"):
    for dt in (np.float16, np.float32):
        x = rows.astype(dt)
        naive = (np.exp(x) / np.exp(x).sum(-1, keepdims=True))[:, -1].astype(np.float64)
        stable = T.softmax(x)[:, -1].astype(np.float64)
        curves[dt.__name__] = (naive, stable)
        first_nan = offsets[np.isnan(naive)].min()
        stable_err = np.abs(stable - p_top).max()
        print(f"{dt.__name__}: naive is NaN from c = {first_nan:g}; stable max error {stable_err:.1e}")
        assert np.isfinite(stable).all() and stable_err < (1e-3 if dt == np.float16 else 1e-6)

limits = {"float16": np.log(65504.0), "float32": np.log(np.finfo(np.float32).max)}  # ln of the largest number
with np.errstate(over="ignore"):
    for name, lim in limits.items():  # e^x is finite just below the limit and inf just above it
        dt = np.dtype(name).type
        assert np.isfinite(np.exp(dt(lim - 0.01))) and np.isinf(np.exp(dt(lim + 0.02)))
naive16 = curves["float16"][0]
zero_from, nan_from = offsets[naive16 == 0].min(), offsets[np.isnan(naive16)].min()
print(f"e^x overflows float32 above x = {limits['float32']:.1f}, float16 above x = {limits['float16']:.1f}; "
      f"in float16 the sum overflows first (the top weight is 0 from c = {zero_from:g}), e^x itself later "
      f"(NaN from c = {nan_from:g})")
assert zero_from < nan_from
fig, ax = P.early.overflow(offsets, curves, p_top, limits=limits)
P.save(fig, P.figure_path("03_overflow.png"))

# %% [markdown]
# Subtracting the max removes overflow; a long row in float16 has two more traps. The first is
# the *sum*. float16 keeps 11 significant bits, and an accumulator that adds one term at a time
# in half precision (a GPU thread accumulating in float16) rounds every partial sum: once the sum
# has grown, the small terms stop counting. NumPy's float16 `sum` is not such a loop: it adds in
# float32 and rounds once, so it returns the exact sum rounded to float16. The second trap comes
# before the sum: $x - \max$ and $e^{x - \max}$ computed in float16 round every exponent and
# every exp, and that costs accuracy even when the sum is exact. So the package computes a
# float16 (or bfloat16) softmax in float32 throughout and rounds once at the end, as torch
# does — the reason FlashAttention keeps its running sum $l$ and output $O$ in float32 while
# Q, K, V are float16 (lessons 09 and 17). Below, the same float32 exps summed two ways, then a
# softmax whose subtraction and exp run in float16.

# %%
rows16 = (np.random.default_rng(3).standard_normal((200, 1000)) * 3).astype(np.float16)  # 200 rows of 1000 logits
exact = T.softmax(rows16.astype(np.float64))  # float64: the reference
x32 = rows16.astype(np.float32)
e = np.exp(x32 - x32.max(axis=-1, keepdims=True))  # (200, 1000) float32 exps: the same terms for both sums
z_half = np.zeros((len(e), 1), np.float16)  # (200, 1)
for e_j in e.T:  # a half-precision accumulator, one term at a time
    z_half = (z_half + e_j[:, None]).astype(np.float16)  # every partial sum rounded to float16
z_single = e.sum(axis=-1, keepdims=True)  # (200, 1) summed in float32
e16 = np.exp(rows16 - rows16.max(axis=-1, keepdims=True))  # (200, 1000) subtraction and exp in float16
z16 = e16.sum(axis=-1, keepdims=True, dtype=np.float16)  # (200, 1) NumPy's float16 sum
sum_once = np.array_equal(z16, e16.astype(np.float64).sum(axis=-1, keepdims=True).astype(np.float16))
print("NumPy's float16 sum == the exact sum rounded once to float16, in every row:", sum_once)
ways = {"float32 exps, float16 running sum": (e / z_half).astype(np.float16),
        "float32 exps, float32 sum (= T.softmax)": (e / z_single).astype(np.float16),
        "float16 exps, NumPy's float16 sum": e16 / z16}
package_ok = np.array_equal(ways["float32 exps, float32 sum (= T.softmax)"], T.softmax(rows16))
print("float32 exps and sum, rounded once == T.softmax(float16 row):", package_ok)
big = exact > 1e-3  # the weights that matter (smaller ones are below float16's resolution anyway)
errors = {name: float(np.max(np.abs(p[big] - exact[big]) / exact[big])) for name, p in ways.items()}
for name, err in errors.items():
    print(f"{name:40s} largest relative error of a weight > 1e-3: {err:.1e}")
print(f"float16's own half-ulp (the best any float16 result can do): {2.0 ** -11:.1e}")
assert sum_once and package_ok and T.softmax(rows16).dtype == np.float16
assert (errors["float32 exps, float32 sum (= T.softmax)"] <= 2.0 ** -10
        < errors["float16 exps, NumPy's float16 sum"] < errors["float32 exps, float16 running sum"])

# %% [markdown]
# **Takeaways.** Attention is three projections, one matrix of scores, a row-wise softmax and a
# weighted sum. The $1/\sqrt{d_k}$ keeps scores at unit scale whatever the head size — what
# additive scoring gets from its bounded tanh, at d_a times the memory and many times the
# time — and the max-subtraction keeps softmax finite whatever the logits. Next: many heads
# side by side (lesson 04).

# %% [markdown]
# **Write it yourself.** `workbook/03_attention.py` holds `softmax`, `scaled_dot_product_attention`
# and `additive_scores` as stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 03`: it runs the package's own test cases on your code and says what
# is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 03` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/03_attention.py`.
#
# 1. Rerun the worked example of §3 with the query $q = (0, 2)$. Which keys tie? Write the three
#    weights and the output to three decimals.
# 2. Make all three keys equal, $k_j = (1, 1)$. What are the weights, for *any* query? What is
#    the output?
# 3. **Code it.** Predict, then run the textbook softmax `np.exp(s) / np.exp(s).sum()` on
#    s = [1000, 1001, 1002] in float32. What comes out? Write it again with the max subtracted
#    (work the three weights out by hand too) and compare with `T.softmax`.
