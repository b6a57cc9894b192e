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
# # 04 · Many heads
#
# **What you will see.** How one projection of width $d_\text{model}$ is cut into $h$ heads
# of width $d_k$ — the shapes $(b, n, d) \to (b, h, n, d_k)$ and back — and why
# $d_\text{model} = h \cdot d_k$ (the original Transformer's $512 = 8 \cdot 64$, the values of
# "Attention Is All You Need"); a tiny example
# ($n = 3$, $d_\text{model} = 12$, 4 heads of 3 × 3) drawn as matrices; and one attention
# pattern per head on a sentence.
#
# **Source.** "Attention Is All You Need" (§3.2.2): $h$ heads, each with its own
# $W_i^Q, W_i^K, W_i^V \in \mathbb{R}^{d_\text{model}\times d_k}$, their outputs concatenated and
# projected by $W^O$; with $d_k = d_\text{model}/h$ the cost is that of one full-width head.
#
# $$\mathrm{MultiHead}(X) = \mathrm{Concat}(\text{head}_1, …, \text{head}_h)\,W^O,\qquad
#   \text{head}_i = \mathrm{Attention}(XW_i^Q,\; XW_i^K,\; XW_i^V)$$

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Split and merge: only a reshape and a transpose
#
# All $h$ matrices $W_i^Q$ sit side by side in one $W_q$ of shape $(d_\text{model}, h\,d_k)$, so
# one matrix product computes every head's queries at once. `split_heads` then cuts the last
# axis into $h$ slices of $d_k$ and moves the head axis in front of the positions;
# `merge_heads` undoes it (this *is* the Concat of the formula). With the original
# Transformer's sizes:

# %%
b, n, d_model, h = 2, 10, 512, 8
x = rng.normal(size=(b, n, d_model))  # (b, n, d_model)
heads = T.split_heads(x, h)  # (b, h, n, d_k)
back = T.merge_heads(heads)  # (b, n, d_model)
print("x:", x.shape, "-> split_heads:", heads.shape, "-> merge_heads:", back.shape)
slice_ok = np.array_equal(heads[1, 3], x[1, :, 3 * 64:4 * 64])
print("head 3 is columns 192…255 of x:", slice_ok)
roundtrip_ok = np.array_equal(back, x)
print("merge_heads(split_heads(x)) == x exactly:", roundtrip_ok)
assert slice_ok and roundtrip_ok

# %% [markdown]
# ## 2. The rule $d_\text{model} = h \cdot d_k$
#
# Heads share out the width; they do not add to it. Whatever $h$, $W_q, W_k, W_v, W_o$ stay
# $d_\text{model} \times d_\text{model}$, so the attention layer has $4\,d_\text{model}^2$
# weights (without biases): more heads means narrower heads, not more parameters. A width
# that $h$ does not divide is an error. Below, the package builds one attention layer for each
# $h$ (`T.random_llama`, heads of $d_k = d_\text{model} / h$), runs it on `x` with $h$ heads,
# and the weights are counted in its arrays; `T.parameter_breakdown` gives the count by formula.

# %%
counts = {}
for h_try in (1, 2, 4, 8, 16):
    d_k = d_model // h_try
    cfg = T.LlamaConfig(L=1, d=d_model, h=h_try, h_kv=h_try, d_h=d_k, d_ff=1, v=1, n_ctx=n)  # one layer, tiny FFN
    layer = T.random_llama(cfg).weights.layers[0]
    w_try = T.AttentionWeights(layer.W_q, layer.W_k, layer.W_v, layer.W_o)  # (d, h·d_k) ×3, (h·d_k, d)
    y = T.multi_head_attention(x.astype(np.float32), w_try, h_try)  # (b, n, d_model)
    q_heads = T.split_heads(x.astype(np.float32) @ w_try.W_q, h_try)  # (b, h, n, d_k)
    assert y.shape == x.shape and q_heads.shape == (b, h_try, n, d_k), f"h = {h_try}: {h_try} heads of {d_k}"
    counts[h_try] = sum(W.size for W in (w_try.W_q, w_try.W_k, w_try.W_v, w_try.W_o))
    print(f"h = {h_try:2d}  ->  d_k = {d_k:3d},  W_q {w_try.W_q.shape},  W_o {w_try.W_o.shape},  "
          f"attention weights in the arrays = {counts[h_try]:,}")
    assert counts[h_try] == T.parameter_breakdown(cfg)["attention"], "the arrays hold what the formula counts"
assert set(counts.values()) == {4 * d_model ** 2}, "every h gives the same 4·d_model² weights"
try:
    T.split_heads(x, 6)
    raise AssertionError("512 does not split into 6 heads")
except ValueError as e:
    print("h = 6 ->", e)

# %% [markdown]
# ## 3. A tiny example, matrix by matrix
#
# $n = 3$ tokens, $d_\text{model} = 12$, $h = 4$ heads: the $3 \times 12$ query matrix is read
# as four $3 \times 3$ matrices, one per head (each head owns 3 consecutive columns).
# The amount of data does not change: $3 \times 12 = 4 \times (3 \times 3)$.

# %%
n_small, d_small, h_small = 3, 12, 4
X_small = rng.normal(size=(1, n_small, d_small))  # (b, n, d_model)
W_q_small = rng.normal(size=(d_small, d_small)) / np.sqrt(d_small)  # (d_model, h·d_k)
Q_small = X_small @ W_q_small  # (1, 3, 12)
Q_heads = T.split_heads(Q_small, h_small)  # (1, 4, 3, 3)
print("Q:", Q_small.shape, "-> heads:", Q_heads.shape, " sizes", Q_small.size, "=", Q_heads.size)
assert Q_small.size == Q_heads.size == 36

# %%
import matplotlib.pyplot as plt  # noqa: E402

fig, axd = plt.subplot_mosaic([["Q"] * 4, ["h0", "h1", "h2", "h3"]], figsize=(15, 8.5),
                              layout="constrained", height_ratios=[1, 1.1])
lim = float(np.abs(Q_small).max())
P.attention_heatmap(Q_small[0], ax=axd["Q"], signed=True, vmin=-lim, vmax=lim, annotate=True, fmt=".1f",
                    title="Q = X W_q   (n × d_model = 3 × 12)", xlabel="column of Q", ylabel="token",
                    cbar_label="value")
head_cols = plt.get_cmap("tab10")
for i in range(h_small):
    axd["Q"].add_patch(plt.Rectangle((3 * i - 0.5, -0.5), 3, 3, fill=False, linewidth=4,
                                     edgecolor=head_cols(i)))
    axd["Q"].text(3 * i + 1, -0.75, f"head {i}", ha="center", va="bottom", fontsize=P.LABEL_SIZE,
                  color=head_cols(i), fontweight="bold")
    a = axd[f"h{i}"]
    P.attention_heatmap(Q_heads[0, i], ax=a, signed=True, vmin=-lim, vmax=lim, annotate=True, fmt=".1f",
                        colorbar=False, title=f"head {i}: 3 × 3", xlabel="d_k", ylabel="token" if i == 0 else None)
    for sp in a.spines.values():
        sp.set_edgecolor(head_cols(i)), sp.set_linewidth(4)
axd["Q"].set_ylim(2.5, -1.3)  # room above for the head names
axd["Q"].set_xticks(range(d_small)), axd["Q"].set_yticks(range(n_small))
for i in range(h_small):
    axd[f"h{i}"].set_xticks(range(3)), axd[f"h{i}"].set_yticks(range(n_small))
fig.suptitle("split_heads: d_model = 12 = 4 heads × d_k = 3", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("04_split_heads.png"))

# %% [markdown]
# ## 4. One attention pattern per head
#
# Each head has its own $W_i^Q, W_i^K$, so each computes its own weights over the same
# tokens. The projections here are **random** over a small deterministic embedding, so the
# patterns show only that heads differ. Trained heads specialise: lesson 11 (§4–5) finds heads
# of the real SmolLM2 model that follow the previous token or rest on the first token, and
# lesson 12 draws how the heads of the real MiniLM model weigh the words around "it".
# The mask is causal (lesson 05): a token sees only itself and the tokens before it. In the
# figure, grey cells are pairs the mask hides (their weight is exactly 0); white ones are
# allowed pairs whose weight came out near 0.

# %%
tokens = "The dog chased the squirrel because it".split()
vocab = sorted(set(tokens))
ids = np.array([[vocab.index(t) for t in tokens]])  # (b, n)
d, h = 32, 4
d_h = d // h
W_E = rng.normal(size=(len(vocab), d))  # (v, d)
X = T.embed(ids, W_E) + T.sinusoidal_positions(len(tokens), d, dtype=np.float64)  # (b, n, d)
# 1.5 × the usual 1/√d scale: larger scores give sharper softmax rows, so the heads' patterns are easy to tell apart
w = T.AttentionWeights(*(rng.normal(size=(d, d)) * 1.5 / np.sqrt(d) for _ in range(4)))  # W_q, W_k, W_v, W_o
mask = T.causal_mask(len(tokens))  # (n, n)
out, weights = T.multi_head_attention(X, w, h, mask=mask, return_weights=True)
print("X:", X.shape, " out:", out.shape, " weights (b, h, n, n):", weights.shape)

rows_ok = np.allclose(weights.sum(-1), 1.0)
future_ok = np.all(weights[0][:, ~mask] == 0)
print("every head's rows sum to 1:", rows_ok, "  no weight on future tokens:", future_ok)

# The same thing one head at a time, with the head's own column slice of each matrix:
per_head = []
for i in range(h):
    cols = slice(i * d_h, (i + 1) * d_h)
    q_i, k_i, v_i = (X @ W[:, cols] for W in (w.W_q, w.W_k, w.W_v))  # (b, n, d_h) each
    per_head.append(T.scaled_dot_product_attention(q_i[:, None], k_i[:, None], v_i[:, None], mask)[:, 0])
by_hand = np.concatenate(per_head, axis=-1) @ w.W_o  # Concat(head_1 … head_h) W_o: (b, n, d)
loop_ok = np.allclose(by_hand, out)
print("head-by-head loop + concat + W_o == multi_head_attention:", loop_ok)
assert rows_ok and future_ok and loop_ok

# %%
fig, axes = P.head_grid(weights[0], tokens, ncols=4, vmax=1.0, mask=mask, xlabel="key", ylabel="query",
                        suptitle="4 heads, causal, random projections: each head weighs the past differently")
P.save(fig, P.figure_path("04_head_grid.png"))

# %% [markdown]
# **Takeaways.** Multi-head attention is one wide projection viewed as $h$ narrow ones:
# split (reshape + transpose), attend per head in one batched product, merge, project with
# $W^O$. The heads divide $d_\text{model}$ among themselves. Next: masks (lesson 05).

# %% [markdown]
# **Write it yourself.** `workbook/04_multi_head.py` holds `split_heads`, `merge_heads` and
# `multi_head_attention` as stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 04`: it runs the package's own test cases on your code and says what
# is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 04` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/04_multi_head.py`.
#
# 1. GPT-2 small has d_model = 768 and h = 12. What is d_k, what shape does `T.split_heads`
#    give for a (1, 5, 768) input, and which columns of the input make head 3?
# 2. **Code it.** Multi-head attention as a loop: for Q, K, V of shape (1, 5, 12) and h = 3, run
#    attention (scores, softmax, $PV$, written in NumPy) on each head's 4 columns by itself, then
#    glue the three outputs side by side. Compare with `T.split_heads` →
#    `T.scaled_dot_product_attention` → `T.merge_heads`.
# 3. Does the number of heads change the parameter count of an attention layer? Predict, then
#    try h = 1, 4, 9, 16 at d = 576 with `T.parameter_breakdown`.
