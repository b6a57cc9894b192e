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
# # 02 · Positions
#
# **What you will see.** Why attention needs position information at all; the sinusoidal
# table of "Attention Is All You Need" as a picture; a learned position table; RoPE as a
# rotation of 2-D pairs, drawn as arrows turning with the position at several speeds; the
# property that makes RoPE *relative* (the score of $q$ at $m$ and $k$ at $n$ depends only on
# $n - m$), checked to float precision and plotted; and the two memory layouts of RoPE
# (interleaved, rotate-half) with the permutation between them.
#
# **Follows** note 000 (§2.1 positional encoding, §2.3 Llama's RoPE), note 001 (RoPE's
# advantages and the complex-number code) and note 003 (the original Transformer).

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
# ## 1. Attention alone cannot see order
#
# Self-attention treats its input as a *set*: permute the tokens and the outputs are permuted
# the same way, nothing else changes. "dog bites man" and "man bites dog" would look alike.

# %%
n, d = 5, 8
x = rng.normal(size=(1, n, d))  # (b, n, d)
perm = np.array([3, 0, 4, 1, 2])
w = T.AttentionWeights(*(rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(4)))
out = T.multi_head_attention(x, w, h=2)  # (b, n, d)
out_perm = T.multi_head_attention(x[:, perm], w, h=2)  # (b, n, d)
equivariant = np.allclose(out_perm, out[:, perm])
print("attention(permuted tokens) == permuted attention(tokens):", equivariant)
assert equivariant

# %% [markdown]
# ## 2. Sinusoidal positions (fixed)
#
# $$PE_{pos,\,2i} = \sin\!\left(\frac{pos}{10000^{2i/d}}\right),\qquad
#   PE_{pos,\,2i+1} = \cos\!\left(\frac{pos}{10000^{2i/d}}\right)$$
#
# Each pair of columns is a clock running at its own speed: the first pairs turn fast, the
# last ones barely move. The table is added to the token embeddings: $x = E[\text{id}] + PE[pos]$.
#
# Write $\omega_i = 10000^{-2i/d}$ for the speed of pair $i$ ($i = 0, …, d/2 - 1$). Since
# $\sin a \sin b + \cos a \cos b = \cos(b - a)$, the dot product of two rows is
#
# $$PE[m] \cdot PE[n] = \sum_{i=0}^{d/2-1} \cos\big((n - m)\,\omega_i\big),$$
#
# a function of the distance $n - m$ alone: the matrix $PE\,PE^\top$ is constant along
# each diagonal.

# %%
n_pos, d_pe = 64, 64
PE = T.sinusoidal_positions(n_pos, d_pe, dtype=np.float64)  # (n, d)
print("PE shape (n, d):", PE.shape)
by_hand = np.array([np.sin(5 / 10000 ** (2 * 3 / d_pe)), np.cos(5 / 10000 ** (2 * 3 / d_pe))])
pe_ok = np.allclose(PE[5, 6:8], by_hand)
print("PE[5, 6:8] equals sin/cos(5 / 10000^(6/64)) by hand:", pe_ok)
G = PE @ PE.T  # (n, n)
dist_ok = all(np.allclose(np.diagonal(G, k), np.diagonal(G, k)[0]) for k in range(-n_pos + 1, n_pos))
print("PE[m]·PE[n] is constant along every diagonal n − m = k:", dist_ok)
omega = 10000.0 ** (-2 * np.arange(d_pe // 2) / d_pe)  # ω_i, (d/2,)
sum_ok = np.allclose(G[3, 10], np.cos((10 - 3) * omega).sum())
print("PE[3]·PE[10] == Σ_i cos(7·ω_i):", sum_ok)
assert pe_ok and dist_ok and sum_ok

# %% [markdown]
# ## 3. Learned positions
#
# GPT-2 and BERT instead *learn* a table $W_{pos}$ of shape (n_ctx, d), one row per position,
# trained with the rest of the model. It has no built-in structure, and it stops at n_ctx
# (1024 for GPT-2, 512 for BERT): a longer input has no row to read. Below, a
# **random-initialised table stands in** for a trained one (what a model starts from);
# the real MiniLM table appears in the encoder lesson.

# %%
n_ctx = 32
W_pos = rng.normal(scale=0.02, size=(n_ctx, d_pe))  # (n_ctx, d), GPT-2's init scale
rows = T.learned_positions(10, W_pos, offset=4)  # positions 4 … 13
print("learned_positions(10, offset=4) shape:", rows.shape, " same rows as the table:", np.array_equal(rows, W_pos[4:14]))
try:
    T.learned_positions(40, W_pos)
    raise AssertionError("a 40-token input should not fit a 32-row table")
except ValueError as e:
    print("40 tokens, 32 rows ->", e)

# %%
fig, axes = P.new_figure(1, 2, figsize=(17, 6.5), layout="constrained")
P.attention_heatmap(PE, ax=axes[0], signed=True, annotate=False, title="Sinusoidal table PE (fixed)",
                    xlabel="dimension", ylabel="position", cbar_label="value")
P.attention_heatmap(W_pos, ax=axes[1], signed=True, annotate=False,
                    title="Learned table W_pos (random init, stand-in)", xlabel="dimension",
                    ylabel="position", cbar_label="value")
for a in axes:
    a.set_aspect("auto")
P.save(fig, P.figure_path("02_sinusoidal_vs_learned.png"))

# %% [markdown]
# ## 4. RoPE: rotate, do not add
#
# Llama does not add anything to $x$. It cuts each query and key into pairs
# $(x_{2i}, x_{2i+1})$ and turns pair $i$ at position $m$ by the angle $m\,\theta_i$,
# $\theta_i = 10000^{-2i/d_h}$:
#
# $$\begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix} =
#   \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
#   \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}$$
#
# In complex numbers (note 001): pair $i$ is $z_i = x_{2i} + \mathrm{i}\,x_{2i+1}$ and RoPE
# multiplies it by $e^{\mathrm{i} m\theta_i}$. Below, a vector whose pairs all start at $(1, 0)$
# is rotated for positions $m = 0 … 7$: pair 0 turns one radian per token, pair 3 a
# thousandth of one.

# %%
d_h = 8
pos = np.arange(8)
cos, sin = T.rope_cos_sin(pos, d_h, dtype=np.float64)  # (n, d_h/2) each
x0 = np.tile([1.0, 0.0], d_h // 2)  # every pair = (1, 0)
xr = T.apply_rope_interleaved(np.broadcast_to(x0, (len(pos), d_h)), cos, sin)  # (n, d_h)
pairs = xr.reshape(len(pos), d_h // 2, 2)  # (n, pairs, 2)
theta = T.rope_angles(np.array([1.0]), d_h)[0]  # θ_i, the angle per token of each pair
print("θ_i (radians per position):", np.round(theta, 4))
angle_ok = np.allclose(np.arctan2(pairs[3, :, 1], pairs[3, :, 0]), np.angle(np.exp(1j * 3 * theta)))
norm_ok = np.allclose(np.linalg.norm(pairs, axis=-1), 1.0)
print("pair i at position 3 sits at angle 3·θ_i:", angle_ok, "  rotation keeps lengths:", norm_ok)
assert angle_ok and norm_ok

# %%
import matplotlib.pyplot as plt  # noqa: E402

fig, axes = P.new_figure(1, d_h // 2, figsize=(18, 5.2), layout="constrained")
colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(pos)))
for i, a in enumerate(axes):
    for m in pos:
        a.annotate("", xy=pairs[m, i], xytext=(0, 0),
                   arrowprops=dict(arrowstyle="-|>", color=colours[m], linewidth=2.2, mutation_scale=16))
        if i == 0:
            a.text(*(pairs[m, i] * 1.17), str(m), ha="center", va="center", fontsize=P.TICK_SIZE,
                   color=colours[m])
    a.add_patch(plt.Circle((0, 0), 1, fill=False, color="grey", linestyle=":"))
    a.set_xlim(-1.35, 1.35), a.set_ylim(-1.35, 1.35), a.set_aspect("equal")
    a.axhline(0, color="grey", linewidth=0.5), a.axvline(0, color="grey", linewidth=0.5)
    P.style_axes(a, f"pair {i}: θ = {theta[i]:.3g} rad/token", f"x_{2 * i}", f"x_{2 * i + 1}")
fig.suptitle("RoPE turns each pair by m·θ_i (arrow colour = position m = 0 … 7, numbers on pair 0)",
             fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("02_rope_rotation.png"))

# %% [markdown]
# ## 5. Why the rotation gives *relative* positions
#
# Rotations compose: $R_m^\top R_n = R_{n-m}$. So the score of a rotated query at $m$ and a
# rotated key at $n$ is
#
# $$\langle R_m q,\; R_n k\rangle = q^\top R_m^\top R_n k = q^\top R_{n-m}\, k,$$
#
# which depends on the positions only through $n - m$. Note 000 (§2.3) writes the same fact
# with row vectors, $Q_s W_s (K_t W_t)^\top = Q_s W_{s-t} K_t^\top$ for a query at $s$ and a
# key at $t$, so its index reads "query minus key" where ours reads "key minus query". The
# two agree: a row vector times $W_s$ is $R_s$ applied to the column vector when
# $W_s = R_s^\top = R_{-s}$, and then $W_{s-t} = R_{t-s}$, which is our $R_{n-m}$ with $s = m$,
# $t = n$. The same $q$ and $k$ are placed at every pair of positions below: the score
# matrix is constant along its diagonals, and the curves for different $m$ fall on top of
# each other.

# %%
def R(a):  # the 2 × 2 rotation by angle a
    return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])


m_, n_ = 3.0, 7.0  # positions, for one pair with θ = 1
print("R_mᵀ R_n == R_(n−m):", np.allclose(R(m_).T @ R(n_), R(n_ - m_)),
      "  R_(−x) == R_xᵀ:", np.allclose(R(-m_), R(m_).T))
assert np.allclose(R(m_).T @ R(n_), R(n_ - m_)) and np.allclose(R(-m_), R(m_).T)

d_h, n_r = 64, 48
q, k = rng.normal(size=d_h), rng.normal(size=d_h)
pos = np.arange(n_r)
cos, sin = T.rope_cos_sin(pos, d_h, dtype=np.float64)  # (n, d_h/2)
Qr = T.apply_rope_interleaved(np.broadcast_to(q, (n_r, d_h)), cos, sin)  # q placed at every position
Kr = T.apply_rope_interleaved(np.broadcast_to(k, (n_r, d_h)), cos, sin)  # k placed at every position
score = Qr @ Kr.T  # (m, n): score of q at m and k at n
spread = max(np.ptp(np.diagonal(score, off)) for off in range(-n_r + 1, n_r))
print(f"largest spread along a diagonal n − m = const: {spread:.1e}")
rel_ok = spread < 1e-9
print("score(q at m, k at n) depends only on n − m:", rel_ok)
assert rel_ok

# %%
fig, axes = P.new_figure(1, 2, figsize=(17, 6.5), layout="constrained")
P.attention_heatmap(score, ax=axes[0], signed=True, annotate=False, title="score(q at m, k at n)",
                    xlabel="key position n", ylabel="query position m", cbar_label="q·k after RoPE")
axes[0].set_xticks(range(0, n_r, 8)), axes[0].set_yticks(range(0, n_r, 8))
for j, m in enumerate((0, 10, 20, 30)):
    rel = pos - m
    axes[1].plot(rel, score[m], linewidth=7 - 1.8 * j, color=P.LINE_COLORS[j],  # thinner on top: overlaps stay visible
                 label=f"query at m = {m}", alpha=0.85)
axes[1].legend(fontsize=P.TICK_SIZE, frameon=False)
P.style_axes(axes[1], "The same curve for every m", "relative position n − m", "score", grid=True)
P.save(fig, P.figure_path("02_rope_relative.png"))

# %% [markdown]
# ## 6. Two layouts of the same rotation
#
# Note 001's code (and Meta's Llama) pairs *neighbouring* dimensions $(x_0,x_1), (x_2,x_3), …$:
# the **interleaved** layout. Hugging Face checkpoints pair dimension $i$ with $i + d_h/2$:
# the **rotate-half** layout. They are the same rotation on permuted dimensions: gather the
# even dimensions first, then the odd ones ($p = [0, 2, 4, …, 1, 3, 5, …]$) and
#
# $$\mathrm{rope\_half}(x[p]) = \mathrm{rope\_interleaved}(x)[p].$$
#
# This is why checkpoint converters permute $W_q$ and $W_k$ once, head by head, along
# their output dimension (the same $p$ for both, so $QK^\top$ is unchanged). In this
# package's layout, $Q = X W_q$ with $W_q$ of shape $(d_\text{model}, h\,d_h)$, that is a
# permutation of the **columns** inside each head's block of $d_h$; in PyTorch's
# `nn.Linear` layout, (out, in), the same permutation acts on the **rows**. The SmolLM2
# GGUF file used from lesson 01 on was converted this way by llama.cpp, so the package
# applies `apply_rope_interleaved` to it.

# %%
d_h = 8
p = T.interleaved_to_half_permutation(d_h)
print("permutation p:", p)
xs = rng.normal(size=(6, d_h))  # (n, d_h)
cos, sin = T.rope_cos_sin(np.arange(6), d_h, dtype=np.float64)
layouts_ok = np.allclose(T.apply_rope_half(xs[:, p], cos, sin), T.apply_rope_interleaved(xs, cos, sin)[:, p])
print("rope_half(x[p]) == rope_interleaved(x)[p]:", layouts_ok)
assert layouts_ok

# %%
pair_interleaved = np.arange(d_h) // 2  # dimension j belongs to pair j // 2
pair_half = np.array(p) // 2  # after the permutation, slot s holds dimension p[s]
fig, ax = P.new_figure(figsize=(13, 4.2))
cmap = plt.get_cmap("tab10")
for row, (pairs_of, dims, name) in enumerate(((pair_interleaved, np.arange(d_h), "interleaved"),
                                               (pair_half, np.array(p), "rotate-half"))):
    y = 1 - row
    for s in range(d_h):
        ax.add_patch(plt.Rectangle((s, y), 0.92, 0.6, color=cmap(pairs_of[s]), alpha=0.85))
        ax.text(s + 0.46, y + 0.3, f"x{dims[s]}", ha="center", va="center", fontsize=P.LABEL_SIZE + 1,
                color="white", fontweight="bold")
    ax.text(-0.2, y + 0.3, name, ha="right", va="center", fontsize=P.LABEL_SIZE + 1)
for s in range(d_h):  # arrow from a dimension's interleaved slot to its rotate-half slot
    t = p.index(s)
    ax.annotate("", xy=(t + 0.46, 0.62), xytext=(s + 0.46, 1.0),
                arrowprops=dict(arrowstyle="-|>", color="grey", linewidth=1.3))
ax.set_xlim(-2.6, d_h), ax.set_ylim(-0.1, 1.75)
ax.axis("off")
ax.set_title("Same colour = one rotated pair.  p = " + str(p), fontsize=P.TITLE_SIZE)
P.save(fig, P.figure_path("02_rope_layouts.png"))

# %% [markdown]
# **Takeaways.** Attention is blind to order until positions are mixed in: added as a fixed
# (sinusoidal) or learned table, or — RoPE — as rotations of $q$ and $k$ whose dot product
# sees only the distance $n - m$. Next: the attention formula itself (lesson 03).
