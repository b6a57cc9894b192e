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
# table of "Attention Is All You Need" as a picture; a real learned position table (MiniLM's
# 512 × 384) and what the similarity of its rows says about distance; RoPE as a rotation of
# 2-D pairs, drawn as arrows turning with the position at several speeds, and written as
# complex numbers in four lines of code; the property that makes RoPE *relative* (the score
# of $q$ at $m$ and $k$ at $n$ depends only on $n - m$), checked to float precision and
# plotted; its long-range decay; and the two memory layouts of RoPE (interleaved,
# rotate-half) with the permutation between them.
#
# **Sources.** The sinusoidal table is that of "Attention Is All You Need" (2017, §3.5); RoPE
# is RoFormer's (Su et al., 2021), which writes it as multiplication by $e^{\mathrm{i} m\theta}$
# and bounds the score by a quantity that decays with distance (its §3.4.3); Llama uses it.

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
# trained with the rest of the model. Nothing in it is built in, and it stops at n_ctx
# (1024 for GPT-2, 512 for BERT): a longer input has no row to read. Below is a trained one:
# MiniLM's 512 × 384 table, read from the model's weights. Training did find distance: the
# cosine similarity of two rows is highest near the diagonal and falls off with $|n - m|$, as
# the sinusoidal one does by construction, and its stripes parallel to the diagonal show
# that the model learned periodic "clocks" of its own (the fastest: the mean similarity at
# distance $n - m$ peaks every 6 positions or so); but the bands wander, because nothing
# forces them to depend on $n - m$ alone: the distance explains only about half of the
# similarity's variance, against all of it for the sinusoidal table.

# %%
minilm = T.load_minilm()  # all-MiniLM-L6-v2: a small trained BERT (0.5 s to load)
W_pos = np.asarray(minilm.weights.W_pos, dtype=np.float64)  # (n_ctx, d) = (512, 384)
n_ctx, d_pos = W_pos.shape
rows = T.learned_positions(10, W_pos, offset=4)  # positions 4 … 13
print("MiniLM W_pos shape (n_ctx, d):", W_pos.shape)
print("learned_positions(10, offset=4) shape:", rows.shape, " same rows as the table:", np.array_equal(rows, W_pos[4:14]))
try:
    T.learned_positions(600, W_pos)
    raise AssertionError("a 600-token input should not fit a 512-row table")
except ValueError as e:
    print("600 tokens, 512 rows ->", e)
unit = W_pos / np.linalg.norm(W_pos, axis=1, keepdims=True)  # (n_ctx, d) unit rows
C = unit @ unit.T  # (n_ctx, n_ctx) cosine similarity of positions
near, far = np.diagonal(C, 1).mean(), np.diagonal(C, 256).mean()
print(f"mean cosine of neighbouring positions {near:.2f}, of positions 256 apart {far:.2f}")
assert W_pos.shape == (512, 384) and near > 0.5 > far


def mean_by_distance(S):  # (n, n) -> (n,): the mean of S along each diagonal n − m = k, k = 0 … n − 1
    return np.array([np.diagonal(S, k).mean() for k in range(len(S))])


def distance_share(S):  # the share of the variance of S above its diagonal that the distance n − m alone explains
    m_, n_ = np.triu_indices(len(S), 1)
    return 1 - np.var(S[m_, n_] - mean_by_distance(S)[n_ - m_]) / np.var(S[m_, n_])


sim_at = mean_by_distance(C)  # (n_ctx,) mean cosine at distance k
k_in = np.arange(2, 256)  # distances 2 … 255, each with both neighbours
peaks = k_in[(sim_at[k_in] > sim_at[k_in - 1]) & (sim_at[k_in] > sim_at[k_in + 1])]  # the stripes: local maxima
gaps = np.diff(peaks)
print(f"mean cosine by distance peaks at k = {peaks[:8].tolist()} …: every {np.median(gaps):.0f} positions "
      f"({np.mean(np.abs(gaps - 6) <= 1):.0%} of the gaps within one of 6)")
PE_big = T.sinusoidal_positions(n_ctx, d_pos, dtype=np.float64)  # (n, d) as MiniLM's; every row has norm √(d/2)
share = {"learned": distance_share(C), "sinusoidal": distance_share(PE_big @ PE_big.T / (d_pos / 2))}
print(f"share of the similarity's variance that the distance n − m alone explains: "
      f"learned {share['learned']:.0%}, sinusoidal {share['sinusoidal']:.0%}")
assert np.median(gaps) == 6 and np.mean(np.abs(gaps - 6) <= 1) > 0.8, "a clock of about 6 positions"
assert 0.4 < share["learned"] < 0.6 and share["sinusoidal"] > 1 - 1e-9, "the learned bands wander"

# %%
fig, axes = P.early.position_tables(
    {f"Sinusoidal table PE ({n_ctx} × {d_pos}, fixed)": PE_big,
     f"Learned table W_pos (MiniLM, {n_ctx} × {d_pos}, trained)": W_pos},
    suptitle="Position tables (top) and the similarity of their rows (bottom)")
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
# In complex numbers: pair $i$ is $z_i = x_{2i} + \mathrm{i}\,x_{2i+1}$ and RoPE
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
fig, axes = P.early.rope_rotation(pairs, theta, suptitle=(
    "RoPE turns each pair by m·θ_i (arrow colour = position m = 0 … 7, numbers on pair 0)"))
P.save(fig, P.figure_path("02_rope_rotation.png"))

# %% [markdown]
# The complex form is also the shortest code: view the pairs as complex numbers, multiply by
# $e^{\mathrm{i} m\theta_i}$, read the real and imaginary parts back as pairs.

# %%
x_any = rng.normal(size=(len(pos), d_h))  # (n, d_h) any vectors, one per position
z = x_any[:, 0::2] + 1j * x_any[:, 1::2]  # (n, d_h/2) pair i as x_2i + i·x_2i+1
z_rot = z * np.exp(1j * pos[:, None] * theta)  # (n, d_h/2) pair i at position m times e^{i m θ_i}
x_rot = np.stack([z_rot.real, z_rot.imag], axis=-1).reshape(len(pos), d_h)  # (n, d_h) back to pairs
complex_ok = np.allclose(x_rot, T.apply_rope_interleaved(x_any, cos, sin), atol=1e-12)
print("complex form == T.apply_rope_interleaved:", complex_ok)
assert complex_ok

# %% [markdown]
# ## 5. Why the rotation gives *relative* positions
#
# Rotations compose: $R_m^\top R_n = R_{n-m}$. So the score of a rotated query at $m$ and a
# rotated key at $n$ is
#
# $$\langle R_m q,\; R_n k\rangle = q^\top R_m^\top R_n k = q^\top R_{n-m}\, k,$$
#
# which depends on the positions only through $n - m$. Some texts write the same fact
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
# ## 6. Far apart, less to say: the long-range decay
#
# Why is RoPE "good for long text"? Write the score in complex numbers: with
# $h_i = z^q_i\,\overline{z^k_i}$ the product of query pair $i$ and the conjugate of key pair
# $i$, and $r = m - n$,
#
# $$\langle R_m q, R_n k\rangle = \mathrm{Re}\sum_{i=0}^{d_h/2-1} h_i\, e^{\mathrm{i} r\theta_i}.$$
#
# Summing by parts with $S_j = \sum_{i<j} e^{\mathrm{i} r\theta_i}$ (and $h_{d_h/2} = 0$),
# RoFormer bounds it:
#
# $$\big|\langle R_m q, R_n k\rangle\big| \le \Big(\max_i |h_{i+1} - h_i|\Big) \sum_{j=1}^{d_h/2} |S_j|.$$
#
# The sum depends on the distance only. At $r = 0$ every term is 1 and $|S_j| = j$; as $r$ grows
# the fast pairs spin out of phase and the partial sums cancel, so the bound trends down (past a
# thousand tokens it stops falling and wobbles between about 0.06 and 0.26 of its start): far-apart
# tokens *can* still score high, but only if their vectors are tuned for it. We check the
# inequality on random $q, k$ at every distance, and draw the bound (scaled to 1 at $r = 0$)
# beside the score of a query and key that point the same way, $q = k$. The two curves are
# scaled separately, each to 1 at $r = 0$: the black line shows how the bound's *shape* falls
# with distance, not its height (for this $q, k$ the true bound is $2\sum_j |S_j|$, 32.5 times
# the score at $r = 0$), so the scaled score can lie above it.

# %%
d_h = 128  # Llama's head size, θ base 10000
theta128 = T.rope_angles(np.array([1.0]), d_h)[0]  # (d_h/2,) θ_i
r = np.unique(np.round(np.geomspace(1, 8192, 300)).astype(int))  # distances r = m − n, 1 … 8192
S_j = np.cumsum(np.exp(1j * r[:, None] * theta128), axis=1)  # (r, d_h/2) partial sums S_1 … S_(d_h/2)
bound_sum = np.abs(S_j).sum(1)  # (r,) Σ_j |S_j|

qv, kv = rng.normal(size=(2, 50, d_h))  # 50 random (q, k) pairs, (pairs, d_h) each
cos_r, sin_r = T.rope_cos_sin(r, d_h, dtype=np.float64)  # (r, d_h/2)
cos_0, sin_0 = T.rope_cos_sin(np.zeros(1), d_h, dtype=np.float64)
k_at_0 = T.apply_rope_interleaved(kv, cos_0, sin_0)  # (pairs, d_h): k at position 0
q_at_r = T.apply_rope_interleaved(np.broadcast_to(qv[:, None], (50, len(r), d_h)), cos_r, sin_r)  # q at r
scores = np.einsum("prd,pd->pr", q_at_r, k_at_0)  # (pairs, r) score of q at m = r, k at n = 0
h_c = (qv[:, 0::2] + 1j * qv[:, 1::2]) * np.conj(kv[:, 0::2] + 1j * kv[:, 1::2])  # (pairs, d_h/2) h_i
h_c = np.concatenate([h_c, np.zeros((50, 1))], axis=1)  # h_(d_h/2) = 0
lipschitz = np.abs(np.diff(h_c, axis=1)).max(1)  # (pairs,) max_i |h_(i+1) − h_i|
bound_ok = np.all(np.abs(scores) <= lipschitz[:, None] * bound_sum[None, :] + 1e-9)
print("|score| ≤ max|h_(i+1) − h_i| · Σ|S_j| for 50 random q, k at all", len(r), "distances:", bound_ok)
rel_bound = bound_sum / (d_h // 2 * (d_h // 2 + 1) / 2)  # scaled to 1 at r = 0, where |S_j| = j
at = np.searchsorted(r, [10, 100, 1000, 8192])  # the first sampled distance at or beyond each
print(f"relative bound at r = {r[at].tolist()}: {np.round(rel_bound[at], 2).tolist()}")
assert bound_ok and rel_bound[at[0]] > rel_bound[at[1]] > rel_bound[at[2]]  # trends down …
far = rel_bound[r >= 1000]  # past a thousand tokens
print(f"past 1,000 tokens the relative bound lies in {far.min():.2f} … {far.max():.2f}")
assert far.max() < 0.3 and far.mean() < 0.5 * rel_bound[(r >= 10) & (r < 100)].mean()  # low, and no longer falling

same = np.ones(d_h)  # q = k: every pair lined up
score_same = T.apply_rope_interleaved(np.broadcast_to(same, (len(r), d_h)), cos_r, sin_r) @ same / d_h  # (r,) 1 at r = 0
bound_same = 2 * bound_sum  # (r,) h_i = (1 + i)(1 − i) = 2 for every pair and h_(d_h/2) = 0: max|h_(i+1) − h_i| = 2
start = 2 * (d_h // 2 * (d_h // 2 + 1) / 2) / d_h  # true bound / score at r = 0: 2 · Σ_j j / d_h
above = np.mean(score_same > rel_bound)
print(f"q = k: true bound at r = 0 is {start:.1f}× the score; scaled separately, the score lies above "
      f"the scaled bound at {above:.0%} of the distances")
assert np.all(np.abs(score_same * d_h) <= bound_same + 1e-9) and start == 32.5 and above > 0

# %%
fig, ax = P.early.rope_decay(r, rel_bound, {"score of q = k = (1, …, 1)": score_same},
                             title=f"RoPE's long-range decay (d_h = {d_h}, θ base 10000)")
P.save(fig, P.figure_path("02_rope_decay.png"))

# %% [markdown]
# ## 7. Two layouts of the same rotation
#
# RoFormer's complex form (and Meta's Llama code) pairs *neighbouring* dimensions $(x_0,x_1), (x_2,x_3), …$:
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
fig, ax = P.early.rope_layouts(p)
P.save(fig, P.figure_path("02_rope_layouts.png"))

# %% [markdown]
# **Takeaways.** Attention is blind to order until positions are mixed in: added as a fixed
# (sinusoidal) or learned table, or — RoPE — as rotations of $q$ and $k$ whose dot product
# sees only the distance $n - m$, and whose bound trends down as that distance grows. Next: the
# attention formula itself (lesson 03).

# %% [markdown]
# **Write it yourself.** `workbook/02_positions.py` holds `sinusoidal_positions`, `learned_positions` (and
# its refusal of positions past the table), `rope_angles`, `apply_rope_half` and `apply_rope_interleaved` as
# stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 02`: it runs the package's own test cases on your code and says what
# is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 02` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/02_positions.py`.
#
# 1. **Code it.** Write the sinusoidal table for n = 8, d = 6 in a few lines of NumPy (`np.outer`
#    of positions and frequencies, then `np.sin` into the even columns and `np.cos` into the odd
#    ones); work row 1 out by hand first. Compare with `T.sinusoidal_positions`.
# 2. Apply RoPE by hand, in complex numbers, to x = (1, 2, 3, 4) at position m = 2 (d_h = 4);
#    check with `T.apply_rope_interleaved`.
# 3. With one pair (θ = 1) and q = k = (1, 0), what is the score of q at position 5 and k at 3?
#    Of q at 2 and k at 0? Why are they equal?
