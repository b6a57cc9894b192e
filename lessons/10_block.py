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
# # 10 · The Transformer block
#
# **What you will see.** The two ways of wiring a block — post-norm (the original
# Transformer) and pre-norm (GPT-2, Llama) — built from the package's parts; what LayerNorm
# and RMSNorm each do to one vector; the activation functions (ReLU, GELU in its erf form and its tanh
# approximation, SiLU) and the gated SwiGLU feed-forward; and, through a stack of random
# blocks, how the size of the residual stream behaves under each wiring.
#
# **The source says:** the original Transformer wraps each sub-layer post-norm,
# LayerNorm(x + Sublayer(x)), in $N = 6$ layers of $d_\text{model} = 512$; GPT-1 writes its block the
# same way, $O = \mathrm{LayerNorm}(f(X) + X)$; GPT-2 moved the norm in front of each sub-block, and
# recent models (Llama) pair that pre-norm with RMSNorm and a gated (SwiGLU) FFN.
#
# $$\text{post-norm:}\; x \leftarrow \mathrm{LN}(x + \mathrm{Sublayer}(x))
#   \qquad\qquad
#   \text{pre-norm:}\; x \leftarrow x + \mathrm{Sublayer}(\mathrm{Norm}(x))$$

# %%
import math
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 uses a shorter stack for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 0. The block, wired two ways
#
# Read each drawing bottom-up. The thick line is the **residual stream**, shape $(b, n, d)$ all
# the way up: a sub-layer (attention, then the FFN) branches off it, computes, and is *added*
# back at ⊕. The one difference is where the norm sits. Post-norm puts it **on the trunk**, after
# the sum, so the stream itself is normalised after every sub-layer. Pre-norm puts it **on the
# branch**, before the sub-layer, so the trunk is a plain running sum that no norm ever touches
# inside the stack. Inside a branch the shapes change — heads $(b, h, n, d_h)$ in attention
# (with $h_{kv}$ key/value heads under GQA, lesson 07), $(b, n, d_{ff})$ in the FFN — but every
# branch returns $(b, n, d)$, or it could not be added to the stream.

# %%
fig, _ = P.late.block_wiring()
P.save(fig, P.figure_path("10_block_wiring.png"))

# %% [markdown]
# ## 1. LayerNorm and RMSNorm on one vector
#
# $$\mathrm{LayerNorm}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\,\gamma + \beta,\qquad
#   \mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac1d\sum_i x_i^2 + \epsilon}}\,\gamma$$
#
# LayerNorm centres the vector (mean 0) and scales it (variance 1). RMSNorm only scales it
# (mean square 1): no mean to subtract, no $\beta$ — cheaper, and it keeps the vector's
# direction. With $\gamma = 1$, $\beta = 0$ on an 8-dimensional vector:

# %%
x = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0])
d = x.size
ones = np.ones(d)
ln, rms = T.layer_norm(x, ones, np.zeros(d)), T.rms_norm(x, ones)
print("x       :", x, f"  mean {x.mean():.3f}, rms {np.sqrt((x ** 2).mean()):.3f}")
print("LN(x)   :", np.round(ln, 3), f"  mean {ln.mean():.1e}, var {ln.var():.4f}")
print("RMS(x)  :", np.round(rms, 3), f"  mean {rms.mean():.3f}, mean square {np.mean(rms ** 2):.4f}")
ln_ok = abs(ln.mean()) < 1e-12 and abs(ln.var() - x.var() / (x.var() + 1e-5)) < 1e-12
rms_ok = abs(np.mean(rms ** 2) - np.mean(x ** 2) / (np.mean(x ** 2) + 1e-6)) < 1e-12
cos_rms = rms @ x / (np.linalg.norm(rms) * np.linalg.norm(x))
print("LayerNorm: mean 0, variance 1 (up to eps):", ln_ok)
print("RMSNorm: mean square 1 (up to eps), direction kept (cosine with x =", round(float(cos_rms), 6), "):", rms_ok)
xc = x - x.mean()
same_ok = np.allclose(T.rms_norm(xc, ones, eps=1e-5), T.layer_norm(xc, ones, eps=1e-5))
print("on a centred vector RMSNorm == LayerNorm:", same_ok)
assert ln_ok and rms_ok and same_ok and abs(cos_rms - 1) < 1e-12

# %%
fig, ax = P.new_figure(figsize=(12, 5.5))
idx = np.arange(d)
for off, vals, name, col in ((-0.27, x, "x", "#999999"), (0.0, ln, "LayerNorm(x): mean 0, variance 1", P.LINE_COLORS[0]),
                             (0.27, rms, f"RMSNorm(x): mean square 1, same direction (mean {rms.mean():.2f}, not 0)",
                              P.LINE_COLORS[1])):
    ax.bar(idx + off, vals, width=0.27, color=col, label=name)
ax.axhline(0, color="black", linewidth=0.8)
ax.axhline(ln.mean(), color=P.LINE_COLORS[0], linestyle=":", linewidth=1.5)
ax.axhline(rms.mean(), color=P.LINE_COLORS[1], linestyle=":", linewidth=1.5)
ax.set_xticks(idx)
ax.set_ylim(-2, 12.5)  # headroom for the legend
ax.legend(fontsize=P.TICK_SIZE + 1, frameon=False, loc="upper left")
P.style_axes(ax, "What the two norms do to one vector (γ = 1, β = 0)", "dimension i", "value", grid=True)
P.save(fig, P.figure_path("10_norms.png"))

# %% [markdown]
# ## 2. Activations
#
# - ReLU: $\max(x, 0)$ (the original Transformer).
# - GELU: $x\,\Phi(x) = \tfrac12 x\,(1 + \mathrm{erf}(x/\sqrt2))$ (BERT), and its tanh
#   approximation $\tfrac12 x\,(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715x^3)))$ (GPT-2's form).
# - SiLU (Swish): $x\,\sigma(x)$ (Llama, inside SwiGLU).
#
# All three smooth ones let small negative values through, unlike ReLU's hard corner.
# We check GELU and SiLU against Python's own `math.erf` and `math.exp`, point by point.
# GELU's error is not at rounding level: the array API has no erf, so the package writes
# one as a 5-term polynomial times $e^{-x^2}$ (error below $1.5\cdot10^{-7}$), and the
# factor $\tfrac12 x$ can double that near $|x| = 4$. The figure's "erf" curve is this form.

# %%
xs = np.linspace(-4, 4, 401)
acts = {"ReLU": T.relu(xs), "GELU (erf)": T.gelu(xs), "GELU (tanh approx.)": T.gelu(xs, approximate="tanh"),
        "SiLU  x·σ(x)": T.silu(xs)}
gelu_ref = np.array([0.5 * t * (1 + math.erf(t / math.sqrt(2))) for t in xs])
silu_ref = np.array([t / (1 + math.exp(-t)) for t in xs])
gelu_err, silu_err = np.abs(acts["GELU (erf)"] - gelu_ref).max(), np.abs(acts["SiLU  x·σ(x)"] - silu_ref).max()
tanh_gap = np.abs(acts["GELU (erf)"] - acts["GELU (tanh approx.)"]).max()
print(f"GELU vs math.erf: max error {gelu_err:.1e};  SiLU vs math.exp: max error {silu_err:.1e}")
print(f"GELU (erf form) vs tanh approximation: largest gap {tanh_gap:.1e} on [-4, 4]")
print(f"minima: GELU {acts['GELU (erf)'].min():.3f} at x = {xs[acts['GELU (erf)'].argmin()]:.2f}, "
      f"SiLU {acts['SiLU  x·σ(x)'].min():.3f} at x = {xs[acts['SiLU  x·σ(x)'].argmin()]:.2f}")
assert gelu_err < 3e-7 and silu_err < 1e-12 and tanh_gap < 1e-3  # 1.5e-7, doubled near |x| = 4
g_min = -1.0
for _ in range(50):  # SiLU'(g) = 0 ⇔ g = −1 − e^g; the iteration contracts (e^g ≈ 0.28 < 1)
    g_min = -1 - math.exp(g_min)
silu_min = g_min / (1 + math.exp(-g_min))  # = −e^g_min
print(f"SiLU's minimum solved from SiLU'(g) = 0: {silu_min:.4f} at g = {g_min:.4f}")
silu_y, silu_x = acts["SiLU  x·σ(x)"].min(), xs[acts["SiLU  x·σ(x)"].argmin()]
assert round(silu_min, 2) == -0.28 and round(g_min, 2) == -1.28, "the prose's −0.28 at −1.28"
assert abs(silu_y - silu_min) < 1e-3 and abs(silu_x - g_min) <= 0.01, "the grid's minimum is the solved one"

# %%
fig, axes = P.new_figure(1, 2, figsize=(17, 6), layout="constrained", width_ratios=[1.3, 1])
styles = {"ReLU": dict(color="black", linewidth=2), "GELU (erf)": dict(color=P.LINE_COLORS[0], linewidth=4),
          "GELU (tanh approx.)": dict(color=P.LINE_COLORS[3], linewidth=2, linestyle="--"),
          "SiLU  x·σ(x)": dict(color=P.LINE_COLORS[1], linewidth=3)}
for name, y in acts.items():
    axes[0].plot(xs, y, label=name, **styles[name])
axes[0].axhline(0, color="grey", linewidth=0.6), axes[0].axvline(0, color="grey", linewidth=0.6)
axes[0].legend(fontsize=P.TICK_SIZE + 1, frameon=False)
axes[0].set_ylim(-1, 4)
P.style_axes(axes[0], "Activation functions", "x", "g(x)", grid=True)
axes[1].plot(xs, acts["GELU (erf)"] - acts["GELU (tanh approx.)"], color=P.LINE_COLORS[3], linewidth=2.5)
axes[1].axhline(0, color="grey", linewidth=0.6)
P.style_axes(axes[1], f"GELU (erf form) − tanh approximation (max {tanh_gap:.1e})", "x", "difference", grid=True)
P.save(fig, P.figure_path("10_activations.png"))

# %% [markdown]
# ## 3. The feed-forward network and SwiGLU
#
# The original FFN is $g(xW_1)W_2$ with $W_1 \in \mathbb{R}^{d\times d_{ff}}$, $d_{ff} = 4d$.
# A gated FFN adds a third matrix that *gates* the hidden units. The GLU paper writes the
# gate with a sigmoid, $[(XW_1) \odot \sigma(XW_2)]\,W_3$; Llama's version, SwiGLU, puts SiLU
# in place of the sigmoid:
#
# $$\mathrm{SwiGLU}(x) = \big(\mathrm{SiLU}(xW_\text{gate}) \odot xW_\text{up}\big)\,W_\text{down}$$
#
# Three matrices instead of two, so Llama shrinks $d_{ff}$ to about $\tfrac83 d$ to keep the
# parameter count (within 1 % below). A hidden unit lets $u = (xW_\text{up})_j$ through, scaled by
# $\mathrm{SiLU}(g)$, where its gate $g = (xW_\text{gate})_j$ is positive; for $g < 0$ the gate
# is nearly closed, not shut: SiLU dips to $-0.28$ (at $g \approx -1.28$), so a small, sign-flipped
# share of $u$ leaks through. The map below is $\mathrm{SiLU}(g)\cdot u$.

# %%
d_model = 64
d_ff, d_ff_glu = 4 * d_model, 8 * d_model // 3  # 256, 170
X = rng.normal(size=(2, 5, d_model))  # (b, n, d)
W_gate, W_up = (rng.normal(size=(d_model, d_ff_glu)) / np.sqrt(d_model) for _ in range(2))  # (d, d_ff)
W_down = rng.normal(size=(d_ff_glu, d_model)) / np.sqrt(d_ff_glu)  # (d_ff, d)
Y = T.swiglu_ffn(X, W_gate, W_up, W_down)  # (b, n, d)
hidden = X @ W_gate  # (b, n, d_ff)
by_hand = ((hidden / (1 + np.exp(-hidden))) * (X @ W_up)) @ W_down
print("SwiGLU: X", X.shape, "-> hidden", hidden.shape, "-> Y", Y.shape)
print(f"parameters: FFN 2·d·4d = {2 * d_model * d_ff:,};  SwiGLU 3·d·(8d/3) = {3 * d_model * d_ff_glu:,}")
glu_ok = np.allclose(Y, by_hand)
print("swiglu_ffn == (x W_gate · σ(x W_gate) ⊙ x W_up) W_down:", glu_ok)
same_size = abs(W_gate.size + W_up.size + W_down.size - 2 * d_model * d_ff) / (2 * d_model * d_ff)
print(f"SwiGLU's weights differ from the 4d FFN's by {same_size:.2%}")
assert glu_ok and same_size < 0.01

# %%
g = np.linspace(-4, 4, 201)
u = np.linspace(-3, 3, 151)
surface = T.silu(g)[None, :] * u[:, None]  # (len(u), len(g))
fig, ax = P.new_figure(figsize=(9.5, 6.5))
lim = np.abs(surface).max()
im = ax.imshow(surface, origin="lower", extent=(g[0], g[-1], u[0], u[-1]), aspect="auto", cmap=P.SCORES_CMAP,
               vmin=-lim, vmax=lim)
cs = ax.contour(g, u, surface, levels=[-2, -1, -0.25, 0.25, 1, 2], colors="black", linewidths=0.8, alpha=0.7)
ax.clabel(cs, fmt="%g", fontsize=P.TICK_SIZE)  # solid: positive levels, dashed: negative (matplotlib's default)
cb = fig.colorbar(im, ax=ax)
cb.set_label("SiLU(g) · u", fontsize=P.LABEL_SIZE), cb.ax.tick_params(labelsize=P.TICK_SIZE)
ax.axvline(0, color="black", linewidth=1)
ax.text(-3.8, 0, "gate nearly closed (g < 0):\nSiLU(g) ≥ −0.28", fontsize=P.LABEL_SIZE + 1, va="center")
ax.text(1.0, 2.5, "gate open: u passes,\nscaled by SiLU(g)", fontsize=P.LABEL_SIZE + 1, va="top")
P.style_axes(ax, "One SwiGLU hidden unit: SiLU(g)·u\n(contours at ±0.25, ±1, ±2; solid > 0, dashed < 0)",
             "gate g = (x W_gate)_j", "up value u = (x W_up)_j")
P.save(fig, P.figure_path("10_swiglu.png"))

# %% [markdown]
# ## 4. Post-norm vs pre-norm through a deep stack
#
# One block = attention sub-block + FFN sub-block, each wrapped by `residual`:
#
# - **post-norm** (the original Transformer): the norm sits *on* the residual path, so after every block the
#   stream is renormalised to size $\sqrt d$;
# - **pre-norm** (Llama): the norm sits only on the branch; the stream itself is a running sum
#   $x_L = x_0 + \sum_\ell \Delta_\ell$ that is never normalised (a final norm before the LM
#   head takes care of that). Each block adds a bit, so $\lVert x\rVert$ grows with depth and
#   the *relative* change a block makes shrinks — one reason deep pre-norm stacks train
#   stably without warm-up tricks.
#
# Post-norm pays for its fixed size: the branch output is about as large as the stream, and
# the norm that follows rescales the sum, so every block, however deep it sits, changes the stream
# by more than half its size (right panel below) — more than the last pre-norm block does — and the gradient reaching early blocks must pass
# through every one of those norms.
#
# We push one random input through the same random blocks wired both ways and measure the
# average token norm $\lVert x\rVert$ after each block.

# %%
L_blocks = 8 if FAST else 24
d, h, n = 64, 4, 16
x0 = rng.normal(size=(1, n, d))  # (b, n, d), token norms ≈ √d = 8
mask = T.causal_mask(n)
gamma, beta = np.ones(d), np.zeros(d)
norm = lambda t: T.layer_norm(t, gamma, beta)  # noqa: E731
blocks = []
for _ in range(L_blocks):
    w = T.AttentionWeights(*(rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(4)))
    W1, W2 = rng.normal(size=(d, 4 * d)) / np.sqrt(d), rng.normal(size=(4 * d, d)) / np.sqrt(4 * d)
    blocks.append((w, W1, W2))


def run_stack(x, pre_norm):  # (b, n, d) -> list of token-norm means, list of relative updates
    norms, rel = [np.linalg.norm(x, axis=-1).mean()], []
    for w, W1, W2 in blocks:
        attn = lambda t: T.multi_head_attention(t, w, h, mask=mask)  # noqa: E731
        mlp = lambda t: T.ffn(t, W1, W2, activation=T.gelu)  # noqa: E731
        y = T.residual(x, attn, norm, pre_norm=pre_norm)
        y = T.residual(y, mlp, norm, pre_norm=pre_norm)
        rel.append(np.linalg.norm(y - x) / np.linalg.norm(x))
        norms.append(np.linalg.norm(y, axis=-1).mean())
        x = y
    return np.array(norms), np.array(rel)


post_norms, post_rel = run_stack(x0, pre_norm=False)
pre_norms, pre_rel = run_stack(x0, pre_norm=True)
print("mean token norm after block 0, 1, …")
print("  post-norm:", np.round(post_norms[:6], 2), "…", np.round(post_norms[-1], 2))
print("  pre-norm :", np.round(pre_norms[:6], 2), "…", np.round(pre_norms[-1], 2))
post_ok = np.allclose(post_norms[1:], np.sqrt(d), rtol=1e-3)
grow_ok = pre_norms[-1] > 1.5 * pre_norms[0] and pre_rel[-1] < pre_rel[0]
print(f"post-norm stream stays at √d = {np.sqrt(d):.0f}:", post_ok)
print("pre-norm stream grows, and each block changes it relatively less:", grow_ok)
print(f"relative change per block: post-norm {post_rel.min():.2f} to {post_rel.max():.2f}, "
      f"pre-norm {pre_rel[0]:.2f} falling to {pre_rel[-1]:.2f}")
rewrite_ok = post_rel.min() > 0.5 and post_rel[-1] > pre_rel[-1]
print("every post-norm block changes the stream by over half its size, the last more than pre-norm's:", rewrite_ok)
assert post_ok and grow_ok and rewrite_ok

# %%
layers = np.arange(L_blocks + 1)
fig, axes = P.new_figure(1, 2, figsize=(17, 6), layout="constrained")
axes[0].plot(layers, post_norms, marker="o", color=P.LINE_COLORS[0], linewidth=2.5, label="post-norm  LN(x + f(x))")
axes[0].plot(layers, pre_norms, marker="s", color=P.LINE_COLORS[1], linewidth=2.5, label="pre-norm  x + f(Norm(x))")
axes[0].set_ylim(0, pre_norms.max() * 1.1)
axes[0].legend(fontsize=P.TICK_SIZE + 1, frameon=False)
P.style_axes(axes[0], "Size of the residual stream", "after block ℓ (0 = input)", "mean token norm ‖x‖", grid=True)
axes[1].plot(layers[1:], post_rel, marker="o", color=P.LINE_COLORS[0], linewidth=2.5, label="post-norm")
axes[1].plot(layers[1:], pre_rel, marker="s", color=P.LINE_COLORS[1], linewidth=2.5, label="pre-norm")
axes[1].set_ylim(0, None)
axes[1].legend(fontsize=P.TICK_SIZE + 1, frameon=False)
P.style_axes(axes[1], "How much each block changes the stream", "block ℓ", r"$\Vert x_\ell - x_{\ell-1}\Vert \;/\; \Vert x_{\ell-1}\Vert$", grid=True)
fig.suptitle(f"{L_blocks} random blocks (attention + GELU FFN, d = {d}, h = {h}), same weights, two wirings",
             fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("10_residual_stream.png"))

# %% [markdown]
# **Takeaways.** A block is two residual sub-blocks, attention (token mixing) and FFN
# (channel mixing). Where the norm sits changes the dynamics: post-norm renormalises the
# stream every block; pre-norm leaves it as a growing sum and normalises only what enters
# each branch. Llama pairs pre-norm with RMSNorm and a SwiGLU FFN. Next: all of it in a real
# LLM (lesson 11).

# %% [markdown]
# **Write it yourself.** `workbook/10_block.py` holds `layer_norm`, `rms_norm`, `gelu`, `ffn`, `swiglu_ffn`
# and `residual` (pre-norm and post-norm) as stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 10`: it runs the package's own test cases on your code and says what is
# still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 10` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/10_block.py`.
#
# 1. **Norms by hand.** LayerNorm and RMSNorm of $x = (1, 2, 3, 4)$ with $\gamma = 1$, $\beta = 0$,
#    $\epsilon = 0$: write both vectors, then check with `T.layer_norm` and `T.rms_norm`.
# 2. **SwiGLU's size.** SmolLM2-135M has $d = 576$, $d_{ff} = 1536$, $L = 30$. How many FFN weights
#    in all? How many would a plain FFN of width $4d$ hold per layer? Check with
#    `T.parameter_breakdown("smollm2-135m")`.
# 3. **SwiGLU, coded.** Write SwiGLU in NumPy, with SiLU as $a / (1 + e^{-a})$:
#    $(\mathrm{SiLU}(x W_\text{gate}) \circ x W_\text{up}) W_\text{down}$ for $x$ of shape (2, 3, 4)
#    and $d_{ff} = 6$. Compare with `T.swiglu_ffn`.
