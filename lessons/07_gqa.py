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
# # 07 · MHA, GQA, MQA: sharing keys and values
#
# **What you will see.** Which query heads read which key/value heads in multi-head (MHA),
# grouped-query (GQA) and multi-query (MQA) attention; note 004's worked example — 3
# tokens, $d_\text{model} = 12$, 4 query heads in 2 groups — with its actual small matrices;
# checks that GQA with $h_{kv} = h$ *is* MHA and that GQA equals MHA with tied K/V heads;
# and the KV-cache bytes per token, $2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes}$, for
# SmolLM2-135M, Llama-3-8B and Llama-2-7B: going from 32 to 8 KV heads saves 75 %.
#
# **Follows** note 004 (grouped-query attention and its S = 3, d_model = 12 example),
# note 001 (the MHA/MQA/GQA table, the bytes-per-token formula, "32 → 8 KV heads saves 75 %")
# and note 000 (§4.3, MQA and GQA shrink the cache).

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 shortens the context sweep for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Who shares with whom
#
# The queries always have $h$ heads. Keys and values have $h_{kv}$ heads:
#
# | | $h_{kv}$ | which K/V head query head $i$ reads |
# |---|---|---|
# | MHA | $h$ | its own, head $i$ |
# | GQA | a divisor of $h$ | the one of its group of $h / h_{kv}$ query heads |
# | MQA | 1 | the single head, shared by all |
#
# Each query head always reads exactly one K/V head; what changes is how many query heads
# read the same one.
#
# The package stores only the $h_{kv}$ heads and repeats each one $h / h_{kv}$ times right
# before the product (`repeat_kv`), so query head $i$ reads KV head $\lfloor i / (h/h_{kv}) \rfloor$.
# Feeding head *numbers* through `repeat_kv` shows the mapping:

# %%
h = 4
kinds = {"MHA": 4, "GQA": 2, "MQA": 1}  # name -> h_kv
reads = {}
for name, h_kv in kinds.items():
    ids = np.arange(h_kv, dtype=np.float64).reshape(1, h_kv, 1, 1)  # (b, h_kv, n=1, d_h=1): each head holds its number
    reads[name] = T.repeat_kv(ids, h // h_kv)[0, :, 0, 0].astype(int)  # (h,) KV head read by each query head
    print(f"{name}: h = {h}, h_kv = {h_kv}  ->  query head i reads KV head {reads[name].tolist()}")
assert reads["GQA"].tolist() == [0, 0, 1, 1] and reads["MQA"].tolist() == [0, 0, 0, 0]

# %%
import matplotlib.pyplot as plt  # noqa: E402

fig, axes = P.new_figure(1, 3, figsize=(17, 5), layout="constrained")
kv_cols = plt.get_cmap("tab10")
for a, (name, h_kv) in zip(axes, kinds.items()):
    xq = np.arange(h) * 1.5  # query boxes, evenly spaced
    xk = (np.arange(h_kv) + 0.5) * (h * 1.5 / h_kv) - 0.75  # KV boxes, centred under their group
    for i in range(h):
        j = reads[name][i]
        a.plot([xq[i], xk[j]], [1.55, 0.45], color=kv_cols(j), linewidth=3, zorder=1)
        a.add_patch(plt.Rectangle((xq[i] - 0.5, 1.55), 1.0, 0.7, color=kv_cols(j), alpha=0.35, zorder=2))
        a.text(xq[i], 1.9, f"Q{i}", ha="center", va="center", fontsize=P.LABEL_SIZE + 2)
    for j in range(h_kv):
        a.add_patch(plt.Rectangle((xk[j] - 0.5, -0.25), 1.0, 0.7, color=kv_cols(j), zorder=2))
        a.text(xk[j], 0.1, f"KV{j}", ha="center", va="center", fontsize=P.LABEL_SIZE + 2, color="white",
               fontweight="bold")
    a.set_xlim(-1, h * 1.5 - 0.5), a.set_ylim(-0.5, 2.5), a.axis("off")
    a.set_title(f"{name}: {h} query heads, {h_kv} KV head{'s' if h_kv > 1 else ''}\n"
                f"cache holds {h_kv}/{h} of MHA's K and V", fontsize=P.TITLE_SIZE)
fig.suptitle("Lines: which key/value head each query head reads", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("07_sharing.png"))

# %% [markdown]
# ## 2. Note 004's example, matrix by matrix
#
# $S = 3$ tokens, $d_\text{model} = 12$, $h = 4$ heads of $d_h = 12/4 = 3$, two groups
# ($h_{kv} = 2$). $W_q$ keeps its $12 \times 12$ shape, but $W_k$ and $W_v$ shrink to
# $12 \times 6$: only two $3 \times 3$ key matrices and two value matrices exist. Query heads
# 0 and 1 both read K/V head 0; heads 2 and 3 read head 1. In the figure the query heads
# are coloured by group, as in the sharing diagram above, and each stored K/V pair sits
# under the two query heads that read it.

# %%
S_tok, d_model, h, h_kv = 3, 12, 4, 2
d_h = d_model // h
X = rng.normal(size=(1, S_tok, d_model))  # (b, S, d_model)
w = T.AttentionWeights(W_q=rng.normal(size=(d_model, h * d_h)) / np.sqrt(d_model),  # (12, 12)
                       W_k=rng.normal(size=(d_model, h_kv * d_h)) / np.sqrt(d_model),  # (12, 6)
                       W_v=rng.normal(size=(d_model, h_kv * d_h)) / np.sqrt(d_model),  # (12, 6)
                       W_o=rng.normal(size=(h * d_h, d_model)) / np.sqrt(d_model))  # (12, 12)
q, k, v = T.qkv_heads(X, w, h, h_kv)  # (1, 4, 3, 3), (1, 2, 3, 3), (1, 2, 3, 3)
mask = T.causal_mask(S_tok)
out, weights = T.multi_head_attention(X, w, h, h_kv, mask=mask, return_weights=True)
print("W_q", w.W_q.shape, " W_k", w.W_k.shape, " W_v", w.W_v.shape)
print("q", q.shape, " k", k.shape, " v", v.shape, " weights", weights.shape, " out", out.shape)
k_read = T.repeat_kv(k, h // h_kv)  # (1, 4, 3, 3): the keys each query head reads
shared_ok = np.array_equal(k_read[0, 0], k_read[0, 1]) and np.array_equal(k_read[0, 2], k_read[0, 3])
print("query heads 0 and 1 read the same K, as do 2 and 3:", shared_ok)
assert shared_ok

# The cache of this layer holds 2 K/V heads instead of 4: half the bytes.
gqa_cache = T.KVCache(1, 1, h_kv, S_tok, d_h, dtype=np.float64)
mha_cache = T.KVCache(1, 1, h, S_tok, d_h, dtype=np.float64)
gqa_cache.update(0, k, v)
print(f"KV cache bytes: GQA {gqa_cache.nbytes} vs MHA {mha_cache.nbytes}  (2 · h_kv · S · d_h · 8 bytes)")
assert gqa_cache.nbytes == 2 * h_kv * S_tok * d_h * 8 and mha_cache.nbytes == 2 * gqa_cache.nbytes

# %%
v_read = T.repeat_kv(v, h // h_kv)  # (1, 4, 3, 3): the values each query head reads
assert np.array_equal(v_read[0, 0], v_read[0, 1]) and np.array_equal(v_read[0, 2], v_read[0, 3])
# Row 0: the 4 query heads. Row 1: the 2 stored K heads and 2 stored V heads, each pair
# under the query heads of its group. Row 2: each query head's attention weights.
fig, axd = plt.subplot_mosaic([["Q0", "Q1", "Q2", "Q3"], ["K0", "V0", "K1", "V1"], ["P0", "P1", "P2", "P3"]],
                              figsize=(18, 12.5), layout="constrained")
lim = float(max(np.abs(q).max(), np.abs(k).max(), np.abs(v).max()))  # one colour scale for Q, K and V
for i in range(h):
    j = reads["GQA"][i]
    P.attention_heatmap(q[0, i], ax=axd[f"Q{i}"], signed=True, vmin=-lim, vmax=lim, fmt=".1f", colorbar=False,
                        title=f"Q head {i}  (group {j})", xlabel="d_h", ylabel="token" if i == 0 else None)
    P.attention_heatmap(weights[0, i], ax=axd[f"P{i}"], vmax=1.0, colorbar=False,
                        title=f"weights, Q head {i} (reads K{j}, V{j})", xlabel="key",
                        ylabel="query" if i == 0 else None)
    for t_ in list(axd[f"P{i}"].texts):  # pairs hidden by the causal mask: grey, no number (as in lesson 05)
        col, row = (round(c_) for c_ in t_.get_position())
        if not mask[row, col]:
            t_.remove()
            axd[f"P{i}"].add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, color=P.OFF_COLOR))
for j in range(h_kv):
    readers = ", ".join(f"Q{i}" for i in range(h) if reads["GQA"][i] == j)
    for name, mat in (("K", k), ("V", v)):
        P.attention_heatmap(mat[0, j], ax=axd[f"{name}{j}"], signed=True, vmin=-lim, vmax=lim, fmt=".1f",
                            colorbar=False, title=f"{name} head {j}  (read by {readers})", xlabel="d_h",
                            ylabel="token" if (name, j) == ("K", 0) else None)
for key, a in axd.items():
    a.set_xticks(range(3)), a.set_yticks(range(3))
    if key[0] in "QKV":  # frame in the group's colour, as in 07_sharing.png
        j = reads["GQA"][int(key[1])] if key[0] == "Q" else int(key[1])
        for sp in a.spines.values():
            sp.set_edgecolor(kv_cols(j)), sp.set_linewidth(5)
cb = fig.colorbar(axd["K0"].images[0], ax=[a for key, a in axd.items() if key[0] in "QKV"], fraction=0.03,
                  pad=0.02, aspect=45)  # one bar the height of the Q and K/V rows
cb.set_label("entry of Q, K or V", fontsize=P.LABEL_SIZE), cb.ax.tick_params(labelsize=P.TICK_SIZE)
cb = fig.colorbar(axd["P0"].images[0], ax=[axd[f"P{i}"] for i in range(h)], fraction=0.03, pad=0.02, aspect=20)
cb.set_label("attention weight", fontsize=P.LABEL_SIZE), cb.ax.tick_params(labelsize=P.TICK_SIZE)
fig.suptitle("GQA, note 004's example: S = 3, d_model = 12, 4 query heads, 2 K/V heads (causal)\n"
             "frame colour = group; grey = hidden by the mask; the cache stores only the middle row's 2 K and 2 V heads",
             fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("07_gqa_example.png"))

# %% [markdown]
# ## 3. Two checks that tie GQA to MHA
#
# 1. With $h_{kv} = h$ nothing is repeated: GQA *is* MHA. We compare with attention done head
#    by head, each with its own column slice of $W_q, W_k, W_v$, then concatenated and
#    projected by $W_o$.
# 2. GQA is MHA whose K/V heads are tied: copy each KV head's columns of $W_k, W_v$ into
#    both heads of its group and MHA gives GQA's output exactly.

# %%
w_mha = T.AttentionWeights(W_q=w.W_q, W_k=rng.normal(size=(d_model, h * d_h)) / np.sqrt(d_model),
                           W_v=rng.normal(size=(d_model, h * d_h)) / np.sqrt(d_model), W_o=w.W_o)
per_head = []
for i in range(h):
    cols = slice(i * d_h, (i + 1) * d_h)
    qi, ki, vi = (X @ W[:, cols] for W in (w_mha.W_q, w_mha.W_k, w_mha.W_v))  # (1, S, d_h) each
    per_head.append(T.scaled_dot_product_attention(qi[:, None], ki[:, None], vi[:, None], mask)[:, 0])
by_hand = np.concatenate(per_head, -1) @ w_mha.W_o  # (1, S, d_model)
mha_ok = np.allclose(T.multi_head_attention(X, w_mha, h, h_kv=h, mask=mask), by_hand)
print("GQA code with h_kv = h  ==  head-by-head MHA:", mha_ok)

group = np.repeat(np.arange(h_kv), h // h_kv)  # KV head of each query head: [0, 0, 1, 1]
tied_cols = np.concatenate([np.arange(j * d_h, (j + 1) * d_h) for j in group])  # (h·d_h,)
w_tied = T.AttentionWeights(W_q=w.W_q, W_k=w.W_k[:, tied_cols], W_v=w.W_v[:, tied_cols], W_o=w.W_o)
tied_ok = np.allclose(T.multi_head_attention(X, w_tied, h, h_kv=h, mask=mask), out)
print("MHA with K/V heads tied in groups  ==  GQA:", tied_ok)
assert mha_ok and tied_ok

# %% [markdown]
# ## 4. What it buys: KV-cache bytes per token
#
# Each generated token stores one key and one value vector per KV head per layer (note 001):
#
# $$\text{bytes per token} = 2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes per number}$$
#
# The configs below are typed in from the models' published `config.json` values
# (16-bit cache: 2 bytes per number). "Llama-3-8B as MHA" is the same model with all 32 heads
# keeping their own K/V, which is what Llama-2-7B does.

# %%
configs = {  # name: (L, h, h_kv, d_h)
    "SmolLM2-135M": (30, 9, 3, 64),
    "Llama-3-8B": (32, 32, 8, 128),
    "Llama-3-8B as MHA": (32, 32, 32, 128),
    "Llama-2-7B (MHA)": (32, 32, 32, 128),
}
BYTES = 2  # bfloat16 / float16
per_token = {}
for name, (L, h_, h_kv_, d_h_) in configs.items():
    per_token[name] = 2 * L * h_kv_ * d_h_ * BYTES
    print(f"{name:18s} L={L:2d} h={h_:2d} h_kv={h_kv_:2d} d_h={d_h_:3d}: "
          f"2·{L}·{h_kv_}·{d_h_}·{BYTES} = {per_token[name]:7,d} bytes = {per_token[name] / 1024:5.1f} KiB per token")
saving = 1 - per_token["Llama-3-8B"] / per_token["Llama-3-8B as MHA"]
print(f"Llama-3-8B: 32 -> 8 KV heads saves {saving:.0%} of the cache")
assert per_token["SmolLM2-135M"] == 23_040 and per_token["Llama-3-8B"] == 131_072
assert per_token["Llama-2-7B (MHA)"] == 524_288 and saving == 0.75

# %% [markdown]
# The formula is also a measurement: a real `KVCache` allocated for $n$ tokens holds exactly
# $n$ times the bytes per token (float16 has the same 2 bytes as bfloat16). Over a long
# context the difference is gigabytes:

# %%
n_meas = 2 ** np.arange(8, 11 if FAST else 13)  # contexts we actually allocate (256 … 1024 or 4096)
n_line = 2 ** np.arange(8, 18)  # 256 … 131072 tokens, formula only
shown = ["SmolLM2-135M", "Llama-3-8B", "Llama-2-7B (MHA)"]
formula_lines, measured_pts = {}, {}
for name in shown:
    L, _, h_kv_, d_h_ = configs[name]
    formula_lines[name] = n_line * per_token[name] / 2 ** 30
    # np.zeros does not touch the pages, so even the 2 GiB cache costs no real memory here
    measured_pts[name] = np.array([T.KVCache(L, 1, h_kv_, int(n), d_h_, dtype=np.float16).nbytes
                                   for n in n_meas]) / 2 ** 30
    match = np.array_equal(measured_pts[name] * 2 ** 30, n_meas * per_token[name])
    print(f"{name:18s} KVCache.nbytes == n · bytes per token for n in {n_meas.tolist()}: {match}")
    assert match
at_8k = {name: 8192 * per_token[name] / 2 ** 30 for name in shown}
print("cache at 8192 tokens (GiB):", {k_: round(v_, 2) for k_, v_ in at_8k.items()})

# %%
fig, axes = P.new_figure(1, 2, figsize=(18, 6.5), layout="constrained", width_ratios=[1, 1.25])
names = list(configs)
vals = np.array([per_token[nm] / 1024 for nm in names])
colours = [P.LINE_COLORS[0], P.LINE_COLORS[1], "#bbbbbb", P.LINE_COLORS[2]]  # the right panel's colours
bars = axes[0].barh(np.arange(len(names))[::-1], vals, color=colours)
axes[0].set_yticks(np.arange(len(names))[::-1], [f"{nm}\n(h_kv = {configs[nm][2]})" for nm in names])
for yb, val, nm in zip(np.arange(len(names))[::-1], vals, names):
    note = "   −75 % vs 32 KV heads" if nm == "Llama-3-8B" else ""
    axes[0].text(val + 8, yb, f"{val:.1f} KiB{note}", va="center", fontsize=P.LABEL_SIZE,
                 fontweight="bold" if note else "normal")
axes[0].set_xlim(0, vals.max() * 1.3)
P.style_axes(axes[0], "KV cache per token: 2·L·h_kv·d_h·2 bytes", "KiB per token", None)
P.curves(n_line, formula_lines, measured_pts, x_measured=n_meas, ax=axes[1], xlabel="context length n (tokens)",
         ylabel="KV cache (GiB, 16-bit)", title="Cache size over the context (b = 1)",
         measured_label="KVCache.nbytes")
P.save(fig, P.figure_path("07_kv_bytes.png"))

# %% [markdown]
# **Takeaways.** GQA keeps all $h$ query heads but only $h_{kv}$ key/value heads, each read by
# a group of $h/h_{kv}$ queries; MHA and MQA are its two ends. The cache shrinks by
# $h/h_{kv}$ — a factor 4 for Llama-3-8B — which is why most recent LLMs use it (note 001).
