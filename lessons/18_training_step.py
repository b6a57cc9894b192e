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
# # 18 · One training step, by hand
#
# **What you will see.** A single step of training a tiny decoder, taken apart: the forward
# pass and what it keeps for later, the loss, then the backward pass one function at a time —
# each `*_backward` of the core called in the order the block runs in reverse, with the shape of
# every gradient — checked against `T.decoder_backward` and against finite differences; the
# AdamW update written out as arithmetic; and the memory that training costs beyond the
# weights: the activations the backward needs, as a formula and as measured bytes, and what
# FlashAttention's tiled backward saves at long sequences.
#
# **The idea behind it.** Training is the forward pass of lesson 10 and 11, run backwards.
# Every forward function of `transformer/core/` has its backward beside it (`rms_norm` and
# `rms_norm_backward`, `scaled_dot_product_attention` and
# `scaled_dot_product_attention_backward`, …), each with its derivation in the docstring and a
# test against torch autograd. The chain rule chains them. Builds on lesson 10 (the block) and
# lesson 09 (the tiled attention and its backward by recomputation).

# %%
import sys
import time
import tracemalloc
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1: measure the memory at fewer lengths

# %% [markdown]
# ## 1. The model and one batch
#
# The model of lesson 19: a decoder like SmolLM2 (RMSNorm before each sub-block, RoPE, SwiGLU,
# the LM head tied to the embedding table), only tiny — $v = 32$ tokens, $d = 64$, $h = 2$
# heads of $d_h = 32$, $L = 2$ layers. Its weights are a dict of named arrays, drawn as GPT-2
# draws them. The batch: 8 documents of the induction task (random tokens, then the same tokens
# again; lesson 19), padded to the longest. The targets are the next tokens of the second half,
# −100 (ignored) elsewhere.

# %%
cfg = T.induction_config()
params = T.init_decoder(cfg, seed=0)
rng = np.random.default_rng(0)
docs = T.induction_documents(rng, 8, cfg.v, (4, 16))
rows = T.induction_rows(docs, packed=False)
ids, targets = rows.ids, rows.targets  # (b, n)
b, n = ids.shape
print(cfg)
n_weights = sum(p.size for p in params.values())
print(f"{n_weights:,} weights in {len(params)} arrays;  batch ids {ids.shape}, "
      f"{rows.scored} of {ids.size} positions have a target")
assert 80_000 < n_weights < 90_000  # "a model of 84 k weights", in §4
print("document 0:", ids[0].tolist())
print("targets 0: ", targets[0].tolist())

# %% [markdown]
# ## 2. Forward: logits, and what is kept for the backward
#
# `T.decoder_forward` returns the logits and `saved`, the activations the backward pass will
# need: per layer the block's input $x$, the normed $a$, $q, k, v$ after RoPE, the attention
# weights $P$, the attention output $o$, the residual $x_{mid}$ and the normed $f$; then the
# last residual and its norm. Each is there because some backward formula reads it: the
# gradient of $Y = XW$ with respect to $W$ is $X^\top dY$, so $X$ must still exist.

# %%
logits, saved = T.decoder_forward(params, ids, cfg)
print(f"logits {logits.shape}")
for name in ["ids", "cos", "sin"] + [k for k in saved if k.startswith("layers.0.")] + ["x_final", "h"]:
    print(f"  saved[{name!r:18}] {str(saved[name].shape):18} {saved[name].dtype}")
print(f"  … and the same for layer 1: {len(saved)} arrays in all")

# %% [markdown]
# ## 3. The loss and its gradient
#
# Cross-entropy over the $N$ positions that have a target:
# $\mathcal{L} = -\frac{1}{N}\sum_i \log \mathrm{softmax}(z_i)_{y_i}$. Its gradient with respect
# to the logits is the softmax minus the one-hot target, divided by $N$ — and 0 at the
# ignored positions:
#
# $$\frac{\partial \mathcal{L}}{\partial z_i} = \frac{1}{N}\left(\mathrm{softmax}(z_i) - e_{y_i}\right)$$

# %%
loss = float(T.cross_entropy(logits, targets))
z = logits.astype(np.float64)
scored = targets != T.IGNORE_INDEX  # (b, n)
log_p = z - z.max(-1, keepdims=True)
log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))  # log softmax, stable
by_hand = -log_p[scored, targets[scored]].mean()
print(f"loss {loss:.6f}  (by hand {by_hand:.6f}; chance over the 31 real tokens: ln 31 = {np.log(31):.6f})")
assert abs(loss - by_hand) < 1e-5

d_logits = T.cross_entropy_backward(logits, targets)  # (b, n, v)
onehot = np.zeros_like(z)
onehot[scored, targets[scored]] = 1
by_hand = (np.exp(log_p) - onehot) * scored[..., None] / scored.sum()
print(f"d_logits {d_logits.shape}: largest |Δ| from (softmax − one-hot) / N = "
      f"{np.abs(d_logits - by_hand).max():.1e}")
assert np.abs(d_logits - by_hand).max() < 1e-7

# %% [markdown]
# ## 4. Backward, one function at a time
#
# Now the chain rule, from the logits back to the embedding table. The forward ran
# embed → L × [norm1 → q, k, v → RoPE → attention → W_o → +residual → norm2 → SwiGLU → +residual]
# → norm → LM head; the backward calls each `*_backward` in the reverse order. Three rules
# recur:
#
# - **a residual** $y = x + F(x)$ passes its gradient through unchanged *and* into $F$:
#   $dx = dy + (\partial F/\partial x)^\top dy$ — so each sub-block's backward *adds* to `dx`;
# - **a tensor used twice** gets the sum of both gradients: the normed $a$ feeds $W_q, W_k, W_v$,
#   and the tied $W_E$ is both the embedding table and the LM head;
# - **a linear map** $Y = XW$ gives $dX = dY\,W^\top$ and $dW = X^\top dY$ (summed over the
#   batch and the positions).
#
# Every step is one of these, or a formula's own backward from the core — and one of those is
# worth deriving here, because attention's backward leans on it: the softmax's.
#
# **The softmax's backward.** Per row, $P_j = e^{S_j} / \sum_k e^{S_k}$, so
# $\partial P_j / \partial S_k = P_j(\delta_{jk} - P_k)$: the Jacobian is
# $\mathrm{diag}(P) - P P^\top$, symmetric. Given $dP = \partial\mathcal{L}/\partial P$,
#
# $$dS_k = \sum_j dP_j\, P_j(\delta_{jk} - P_k) = P_k\Big(dP_k - \sum_j dP_j P_j\Big)
#   \qquad\text{so}\qquad dS = P \circ \big(dP - \mathrm{rowsum}(dP \circ P)\big).$$
#
# A masked entry has $P_k = 0$, so its $dS_k = 0$: the mask needs no special case. On a 3 × 3
# causal example, against the Jacobian written out, `T.softmax_backward`, and finite differences
# of $\mathcal{L}(S) = \sum dP \circ \mathrm{softmax}(S)$ (whose $\partial\mathcal{L}/\partial P$ is
# $dP$):

# %%
S3 = np.array([[0.3, 0.0, 0.0], [1.0, -0.5, 0.0], [0.2, 0.7, -1.0]])  # scores; above the diagonal: masked
causal3 = np.tri(3, dtype=bool)
P3 = T.softmax(S3, mask=causal3)  # (3, 3), rows sum to 1
dP3 = np.array([[0.5, -1.0, 2.0], [-0.3, 0.8, 1.5], [1.2, -0.4, 0.1]])  # some upstream gradient
dS3 = P3 * (dP3 - (dP3 * P3).sum(-1, keepdims=True))  # the formula
jacobian = np.stack([(np.diag(P3[i]) - np.outer(P3[i], P3[i])) @ dP3[i] for i in range(3)])  # row by row
eps = 1e-6
fd3 = np.zeros_like(S3)
loss3 = lambda S: (dP3 * T.softmax(S, mask=causal3)).sum()  # noqa: E731  ∂loss3/∂P = dP3
for i, j in np.ndindex(3, 3):
    e = np.zeros_like(S3)
    e[i, j] = eps
    fd3[i, j] = (loss3(S3 + e) - loss3(S3 - e)) / (2 * eps)
print("P =\n", P3.round(4), "\ndS = P ∘ (dP − rowsum(dP ∘ P)) =\n", dS3.round(4))
print(f"largest |Δ| against the Jacobian {np.abs(dS3 - jacobian).max():.1e}, T.softmax_backward "
      f"{np.abs(dS3 - T.softmax_backward(dP3, P3)).max():.1e}, finite differences {np.abs(dS3 - fd3).max():.1e}")
assert np.abs(dS3 - jacobian).max() < 1e-15 and np.abs(dS3 - T.softmax_backward(dP3, P3)).max() < 1e-15
assert np.abs(dS3 - fd3).max() < 1e-9 and np.all(dS3[~causal3] == 0)  # masked: no gradient
assert np.allclose(dS3.sum(-1), 0)  # adding c to a row of S changes nothing: each row of dS sums to 0

# %% [markdown]
# Each row of $dS$ sums to 0: adding a constant to a row of scores leaves the softmax unchanged,
# so no gradient can push along that direction. Attention's backward is then products only:
# $dV = P^\top dO$, $dP = dO\, V^\top$, this $dS$, and $dQ = dS\, K/\sqrt{d_h}$, $dK = dS^\top Q/\sqrt{d_h}$
# (`T.scaled_dot_product_attention_backward`).
#
# The cell below is `T.decoder_backward` written out; each line prints the shape it produced.

# %%
grads, steps = {}, []


def note(what, *arrays):  # record a backward step and the shapes it produced
    steps.append((what, " ".join(str(tuple(a.shape)) for a in arrays)))


dh, dW_head = T.lm_head_backward(d_logits, saved["h"], params["W_E"])  # logits = h W_Eᵀ
note("lm_head_backward -> dh, dW_E (head)", dh, dW_head)
dx, grads["norm"] = T.rms_norm_backward(dh, saved["x_final"], params["norm"], cfg.eps)
note("rms_norm_backward (final norm) -> dx, dγ", dx, grads["norm"])
for l in reversed(range(cfg.L)):
    s = {k.split(".", 2)[2]: t for k, t in saved.items() if k.startswith(f"layers.{l}.")}
    p = {k.split(".", 2)[2]: w for k, w in params.items() if k.startswith(f"layers.{l}.")}
    g = {}
    # FFN sub-block:  x_out = x_mid + SwiGLU(RMSNorm(x_mid))
    df, g["W_gate"], g["W_up"], g["W_down"] = T.swiglu_ffn_backward(dx, s["f"], p["W_gate"], p["W_up"], p["W_down"])
    note(f"L{l} swiglu_ffn_backward -> df, dW_gate, dW_up, dW_down", df, g["W_gate"], g["W_up"], g["W_down"])
    d_mid, g["norm2"] = T.rms_norm_backward(df, s["x_mid"], p["norm2"], cfg.eps)
    dx = dx + d_mid  # the residual: the gradient passes by and into the FFN
    note(f"L{l} rms_norm_backward (norm2) -> dx_mid, dγ₂;  dx += dx_mid", d_mid, g["norm2"])
    # attention sub-block:  x_mid = x + merge(o) W_o
    dz, g["W_o"], _ = T.linear_backward(dx, T.merge_heads(s["o"]), p["W_o"])
    note(f"L{l} linear_backward (W_o) -> dz, dW_o", dz, g["W_o"])
    do = T.merge_heads_backward(dz, cfg.h)
    note(f"L{l} merge_heads_backward -> do", do)
    dq, dk, dv = T.scaled_dot_product_attention_backward(do, s["q"], s["k"], s["v"], s["P"])
    note(f"L{l} scaled_dot_product_attention_backward -> dq, dk, dv", dq, dk, dv)
    dq = T.apply_rope_half_backward(dq, saved["cos"], saved["sin"])  # RoPE's transpose: rotate by −θ
    dk = T.apply_rope_half_backward(dk, saved["cos"], saved["sin"])
    note(f"L{l} apply_rope_half_backward -> dq, dk", dq, dk)
    da = 0
    for name, dH in (("W_q", dq), ("W_k", dk), ("W_v", dv)):  # a feeds three projections: their da add
        dA, g[name], _ = T.linear_backward(T.split_heads_backward(dH), s["a"], p[name])
        da = da + dA
    note(f"L{l} split_heads_backward + linear_backward ×3 -> da, dW_q, dW_k, dW_v", da, g["W_q"], g["W_k"], g["W_v"])
    d_attn, g["norm1"] = T.rms_norm_backward(da, s["x"], p["norm1"], cfg.eps)
    dx = dx + d_attn
    note(f"L{l} rms_norm_backward (norm1) -> dx_attn, dγ₁;  dx += dx_attn", d_attn, g["norm1"])
    grads.update({f"layers.{l}.{k}": t for k, t in g.items()})
grads["W_E"] = T.embed_backward(dx, ids, cfg.v) + dW_head  # tied: the table's two uses add
note("embed_backward -> dW_E (table);  dW_E = table + head", grads["W_E"])
for what, shapes in steps:
    print(f"{what:72s} {shapes}")

# %% [markdown]
# The same, in one call: `T.decoder_backward` walks exactly these steps. And an independent
# check: the gradient of one weight by finite differences in float64,
# $\frac{\mathcal{L}(\theta + \epsilon) - \mathcal{L}(\theta - \epsilon)}{2\epsilon}$, which knows
# nothing about backward passes.

# %%
reference = T.decoder_backward(d_logits, saved, params, cfg)
worst = max(float(np.abs(grads[k] - reference[k]).max()) for k in params)
print(f"by hand vs T.decoder_backward: {len(params)} gradients, largest |Δ| = {worst:.1e}")
assert worst < 1e-6

p64 = {k: w.astype(np.float64) for k, w in params.items()}
_, g64 = T.decoder_loss_and_grads(p64, ids, targets, cfg)
eps = 1e-5
for name, idx in (("layers.0.W_q", (3, 5)), ("layers.1.norm2", (7,)), ("W_E", (int(ids[0, 9]), 2))):
    plus, minus = {**p64, name: p64[name].copy()}, {**p64, name: p64[name].copy()}
    plus[name][idx] += eps
    minus[name][idx] -= eps
    L_plus, L_minus = (T.decoder_loss_and_grads(p_, ids, targets, cfg)[0] for p_ in (plus, minus))
    fd = (L_plus - L_minus) / (2 * eps)
    print(f"∂L/∂{name}{list(idx)}: backward {g64[name][idx]:+.8f}, finite difference {fd:+.8f}")
    assert abs(g64[name][idx] - fd) < 1e-6 * max(1, abs(fd)) + 1e-9

# %% [markdown]
# ## 5. The update: clipping, the learning rate, AdamW
#
# Three things happen between the gradient and the new weights.
#
# 1. **Clip** the gradient's global norm $\lVert g \rVert_2$ (over all arrays at once) to 1:
#    one factor for every array, so the direction is kept.
# 2. **The learning rate** of this step: a linear warm-up from $\eta_{max}/100$ over 100
#    steps, then a cosine to 0 (`T.lr_at`).
# 3. **AdamW**: running means of $g$ and $g^2$, corrected for having started at 0, and a weight
#    decay $\lambda$ that shrinks the matrices (not the norms' gains) directly:
#
# $$\theta \leftarrow \theta\,(1 - \eta\lambda),\quad m \leftarrow \beta_1 m + (1-\beta_1) g,\quad
#   v \leftarrow \beta_2 v + (1-\beta_2) g^2,\quad
#   \theta \leftarrow \theta - \eta\,\frac{m/(1-\beta_1^t)}{\sqrt{v/(1-\beta_2^t)} + \epsilon}$$
#
# At step $t = 1$, $m/(1-\beta_1) = g$ and $v/(1-\beta_2) = g^2$: every weight moves by
# $\eta\, g/(|g| + \epsilon) \approx \pm\eta$, whatever the size of its gradient.

# %%
lr_max, warmup, total, lam, (beta1, beta2), adam_eps = 3e-3, 100, 600, 0.1, (0.9, 0.95), 1e-8
g = {k: v.copy() for k, v in grads.items()}
norm = T.clip_by_global_norm(g, 1.0)
lr = T.lr_at(0, lr_max=lr_max, warmup=warmup, total=total)
print(f"‖g‖₂ = {norm:.4f} (clipped to 1: {'yes' if norm > 1 else 'no, already below'}); "
      f"lr at step 0 = {lr:.1e} = lr_max / warmup")
flat_g, flat_raw = (np.concatenate([a[k].ravel() for k in grads]).astype(np.float64) for a in (g, grads))
cosine = flat_g @ flat_raw / (np.linalg.norm(flat_g) * np.linalg.norm(flat_raw))
print(f"after clipping: ‖g‖₂ = {np.linalg.norm(flat_g):.4f}, cosine with the raw gradient {cosine:.6f}")
assert abs(np.linalg.norm(flat_g) - min(norm, 1.0)) < 1e-5 and cosine > 1 - 1e-6  # direction kept
lrs = np.array([T.lr_at(t, lr_max=lr_max, warmup=warmup, total=total) for t in range(total + 1)])
print(f"lr: step 0 {lrs[0]:.1e}, step {warmup - 1} {lrs[warmup - 1]:.1e}, halfway down "
      f"{lrs[(warmup + total) // 2]:.1e}, step {total - 1} {lrs[total - 1]:.1e}, step {total} {lrs[total]:.1e}")
assert np.isclose(lrs[0], lr_max / 100) and np.isclose(lrs[warmup - 1], lr_max) and lrs[total] == 0
assert np.isclose(lrs[(warmup + total) // 2], lr_max / 2) and np.all(np.diff(lrs[warmup - 1:]) <= 0)  # cosine down

by_hand = {}
for name, theta in params.items():
    gk = g[name].astype(np.float64)
    m = (1 - beta1) * gk  # β₁·0 + (1 − β₁)·g
    v = (1 - beta2) * gk ** 2
    m_hat, v_hat = m / (1 - beta1), v / (1 - beta2)  # t = 1: m̂ = g, v̂ = g²
    decayed = theta * (1 - lr * lam) if theta.ndim >= 2 else theta  # matrices only
    by_hand[name] = decayed - lr * m_hat / (np.sqrt(v_hat) + adam_eps)

after = {k: w.copy() for k, w in params.items()}
T.adamw_step(after, g, T.adamw_state(after), lr, betas=(beta1, beta2), eps=adam_eps, weight_decay=lam)
worst = max(float(np.abs(after[k] - by_hand[k]).max()) for k in params)
moved = np.abs(after["layers.0.W_q"] - params["layers.0.W_q"])
print(f"AdamW by hand (float64) vs T.adamw_step (float32): largest |Δ| = {worst:.1e} = {worst / lr:.0e} of a "
      f"step η; layers.0.W_q moved by {moved.min():.2e} … {moved.max():.2e} (lr = {lr:.1e})")
assert worst < 1e-2 * lr  # float32 rounding of weights near 1 (the norms' gains): 6e-8
loss_after = float(T.cross_entropy(T.decoder_forward(after, ids, cfg)[0], targets))
print(f"loss on this batch: before the step {loss:.6f}, after {loss_after:.6f} ({loss_after - loss:+.2e}: a first "
      f"step of η = {lr:.0e} per weight)")
assert loss_after < loss

# %%
name = "layers.0.W_q"
fig, _ = P.training.adamw_vs_sgd(g[name], after[name] - params[name], -lr * g[name], lr=lr, name=name)
P.save(fig, P.figure_path("18_adamw_update.png"))
nonzero = g[name] != 0
ratio = np.abs(after[name] - params[name])[nonzero] / np.abs(lr * g[name])[nonzero]  # AdamW's move / SGD's, per weight
print(f"{name}: AdamW moves each weight {ratio.min():.1e} to {ratio.max():.1e} times as far as SGD with the same η")
assert 1e3 < ratio.min() < 1e4 and 1e7 < ratio.max() < 1e8  # "thousands to nearly a hundred million" in the text

# %% [markdown]
# With the same $\eta$, SGD moves each weight by $\eta |g|$: here thousands to nearly a hundred
# million times less than AdamW (printed above), and a weight with a small gradient barely moves at
# all. AdamW's first step moves every weight of the matrix by $\eta$ (plus the decay's
# $\eta\lambda\theta$, too small to see), opposite to its gradient — except the few whose gradient
# is as small as $\epsilon = 10^{-8}$.
# That is why AdamW's learning rates ($10^{-4}$ to $10^{-2}$) mean the same across layers of
# different gradient scales. Later steps average: $m$ and $v$ remember about
# $1/(1-\beta_1) = 10$ and $1/(1-\beta_2) = 20$ steps.

# %% [markdown]
# ## 6. The memory training costs: the saved activations
#
# Inference can drop each activation once the next layer has read it; training must keep
# every entry of `saved` until the backward pass reaches it. `T.activation_bytes` counts them
# (per layer: $x, a, x_{mid}, f$ of $b n d$ each; $q, o$ of $b h n d_h$; $k, v$ of
# $b h_{kv} n d_h$; and the weights $P$ of $b h n^2$ — plus the last residual and its norm, the
# RoPE tables and the ids). We compare it with the bytes the arrays really hold
# (`.nbytes`) and with what Python's allocator saw (`tracemalloc`: every NumPy allocation
# during the forward pass, those still alive at its end and the peak).

# %%
formula = T.activation_bytes(cfg, b, n)
nbytes = sum(a.nbytes for a in saved.values())
tracemalloc.start()
logits_t, saved_t = T.decoder_forward(params, ids, cfg)
alive, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print(f"b = {b}, n = {n}:  formula {formula:,} B   Σ .nbytes of saved {nbytes:,} B")
print(f"tracemalloc: alive after the forward {alive:,} B = saved + logits ({logits_t.nbytes:,} B) + "
      f"{alive - nbytes - logits_t.nbytes:,} B of bookkeeping; peak {peak:,} B (temporaries included)")
assert formula == nbytes and 0 <= alive - nbytes - logits_t.nbytes < 0.05 * nbytes
del logits_t, saved_t

# %% [markdown]
# Only the weights $P$ grow as $n^2$. FlashAttention's backward (lesson 09) keeps instead each
# row's log-sum-exp, $b h n$ numbers, and recomputes $P$ tile by tile from $q, k$ and it:
# `decoder_forward(..., attention="tiled")`. The gradients are the same:

# %%
_, g_plain = T.decoder_loss_and_grads(params, ids, targets, cfg)
_, g_tiled = T.decoder_loss_and_grads(params, ids, targets, cfg, attention="tiled", block_q=8, block_k=8)
worst = max(float(np.abs(g_plain[k] - g_tiled[k]).max()) for k in params)
print(f"gradients, plain vs tiled backward (tiles of 8 × 8): largest |Δ| = {worst:.1e}")
assert worst < 1e-6

# %% [markdown]
# Over $n$, for one sequence ($b = 1$) of the same model: the formula for both, and the
# measured `.nbytes` at a few lengths (the model gets `n_max = 8192`; nothing else changes).

# %%
long_cfg = T.DecoderConfig(**{**T.INDUCTION_SIZES, "n_max": 8192})
n_all = 2 ** np.arange(6, 14)  # 64 … 8192
n_measured = [64, 128, 256] if FAST else [64, 128, 256, 512, 1024]
formulas = {kind: [T.activation_bytes(long_cfg, 1, int(m), attention=kind) for m in n_all]
            for kind in ("plain", "tiled")}
measured = {"plain": [], "tiled": []}
parts_at = {}  # n -> kind -> the split of the bytes, at n = 256 and the longest measured n
for m in n_measured:
    x_ids = rng.integers(1, cfg.v, size=(1, m))
    for kind in ("plain", "tiled"):
        t0 = time.perf_counter()
        _, sv = T.decoder_forward(params, x_ids, long_cfg, attention=kind)
        measured[kind].append(sum(a.nbytes for a in sv.values()))
        assert measured[kind][-1] == T.activation_bytes(long_cfg, 1, m, attention=kind)
        if m in (256, n_measured[-1]):
            parts = {"P (plain) / lse (tiled)": 0, "q, k, v, o": 0, "x, a, x_mid, f": 0, "the rest": 0}
            for key, a in sv.items():
                kind_of = key.rsplit(".", 1)[-1]
                part = ("P (plain) / lse (tiled)" if kind_of in ("P", "lse") else "q, k, v, o" if kind_of in "qkvo"
                        else "x, a, x_mid, f" if kind_of in ("x", "a", "x_mid", "f") else "the rest")
                parts[part] += a.nbytes
            parts_at.setdefault(m, {})[kind] = parts
breakdown = parts_at[n_measured[-1]]
for i, m in enumerate(n_measured):
    print(f"n = {m:5d}: plain {measured['plain'][i] / 2**20:8.2f} MiB   tiled {measured['tiled'][i] / 2**20:6.2f} MiB")
ratio = formulas["plain"][-1] / formulas["tiled"][-1]
print(f"at n = 8192 (formula): plain {formulas['plain'][-1] / 2**30:.2f} GiB, "
      f"tiled {formulas['tiled'][-1] / 2**20:.1f} MiB, {ratio:.0f} × less")
assert formulas["plain"][-1] > 2**30  # over a gigabyte
slopes = {k: np.diff(formulas[k]) / np.diff(n_all) for k in formulas}  # bytes per extra token
print(f"bytes per extra token, n = 64 → 8192: tiled {slopes['tiled'][0]:.0f} … {slopes['tiled'][-1]:.0f}, "
      f"plain {slopes['plain'][0]:.0f} … {slopes['plain'][-1]:.0f}")
assert np.allclose(slopes["tiled"], slopes["tiled"][0]) and slopes["plain"][-1] > 10 * slopes["plain"][0]
at_256 = parts_at[256]["plain"]
quad, lin = at_256["P (plain) / lse (tiled)"], at_256["q, k, v, o"] + at_256["x, a, x_mid, f"]
n_cross = (4 * cfg.d + 2 * cfg.h * cfg.d_h + 2 * cfg.h_kv * cfg.d_h) / cfg.h
print(f"at n = 256, measured: P {quad / 2**10:.0f} KiB, q, k, v, o and x, a, x_mid, f {lin / 2**10:.0f} KiB; "
      f"formula's crossover n = {n_cross:.0f}")
assert quad == lin and n_cross == 256  # the n² term meets the linear ones at n = 256

# %%
label = {"plain": "plain attention: keeps P (b·h·n²)", "tiled": "tiled: keeps the log-sum-exp (b·h·n)"}
fig, _ = P.training.activation_memory(
    n_all, {label[k]: formulas[k] for k in label}, {label[k]: measured[k] for k in label},
    {"plain": breakdown["plain"], "tiled": breakdown["tiled"]}, n_measured=n_measured, n_breakdown=n_measured[-1],
    suptitle="Training memory beyond the weights: the tiny decoder, one sequence (b = 1)")
P.save(fig, P.figure_path("18_activation_memory.png"))

# %% [markdown]
# Per layer, the $n^2$ term $h n^2$ overtakes the linear ones, $(4d + 2 h d_h + 2 h_{kv} d_h)\,n$,
# at $n = (4d + 2 h d_h + 2 h_{kv} d_h)/h = 256$ tokens; at 8192 tokens the plain backward would
# keep over a gigabyte for a model of 84 k weights. The tiled one stays linear in $n$: its price is
# recomputing the scores in the backward pass (lesson 09's extra matrix product per tile).
#
# ## 7. Dropout: a change made in training only
#
# The Transformer paper drops out (zeroes at random, with probability $p = 0.1$) the output of
# every sub-layer and the embeddings; the Annotated Transformer and nanoGPT also drop out the
# attention weights $P$, after the softmax and before $PV$. Dropped entries are zero; the kept
# ones are scaled by $1/(1-p)$ (*inverted* dropout), so that the expectation is unchanged:
#
# $$\tilde P = P \circ \frac{\mathrm{keep}}{1-p},\quad \mathrm{keep}_{ij} \sim \mathrm{Bernoulli}(1-p),\qquad
#   \mathbb{E}[\tilde P] = P, \qquad dP = d\tilde P \circ \frac{\mathrm{keep}}{1-p}.$$
#
# At evaluation nothing is dropped and nothing rescaled: the model computes exactly what it did
# without dropout. `T.DecoderConfig(dropout=p)` turns it on for the attention weights;
# `decoder_forward(..., training=True, rng=seed)` draws the keep-masks and saves them for the
# backward, and the default `training=False` is evaluation. (The runs of lesson 19 use none:
# each step draws 64 fresh random documents, so memorising one helps with nothing that follows.)

# %%
p_drop = 0.1
cfg_drop = T.DecoderConfig(**{**T.INDUCTION_SIZES, "dropout": p_drop})
logits_eval, _ = T.decoder_forward(params, ids, cfg_drop)  # eval mode: training=False
logits_train, saved_train = T.decoder_forward(params, ids, cfg_drop, training=True, rng=0)
print(f"eval mode == the model without dropout, bit for bit: {np.array_equal(logits_eval, logits)}; "
      f"training mode moves the logits by up to {np.abs(logits_train - logits).max():.1e}")
assert np.array_equal(logits_eval, logits) and not np.array_equal(logits_train, logits)
keep0 = saved_train["layers.0.keep"][0, 0]  # document 0, layer 0, head 0: (n, n)
row = next(i for i in range(9, n) if (~keep0[i, :i + 1]).sum() >= 2)  # a query with a few of its keys dropped
P_row = saved_train["layers.0.P"][0, 0, row, :row + 1]  # it may read keys 0 … row
keep_row = keep0[row, :row + 1]
print(f"query {row} of document 0, layer 0, head 0; p = {p_drop}:")
dropped_row = T.dropout(P_row, p_drop, mask=keep_row)[0]
print("key:      ", " ".join(f"{j:6d}" for j in range(row + 1)))
print("P:        ", " ".join(f"{w:6.3f}" for w in P_row), f"   sum {P_row.sum():.3f}")
print("kept:     ", " ".join(f"{'yes' if k else 'no':>6s}" for k in keep_row))
print("dropout P:", " ".join(f"{w:6.3f}" for w in dropped_row), f"   sum {dropped_row.sum():.3f}")
assert np.allclose(dropped_row[keep_row], P_row[keep_row] / (1 - p_drop)) and np.all(dropped_row[~keep_row] == 0)
draws = np.stack([T.dropout(P_row, p_drop, rng=s)[0] for s in range(4000)])  # [4000, row + 1]
sigma = P_row * np.sqrt(p_drop / ((1 - p_drop) * len(draws)))  # the std of a mean of 4000 draws
print(f"mean of {len(draws)} draws: largest |mean − P| = {np.abs(draws.mean(0) - P_row).max():.1e} "
      f"(5 standard errors: {5 * sigma.max():.1e})")
assert np.all(np.abs(draws.mean(0) - P_row) < 5 * sigma)
sums = draws.sum(-1)  # (4000,): each draw's row sum
print(f"row sums: P {P_row.sum():.6f}, this draw {dropped_row.sum():.3f}, mean of the draws {sums.mean():.4f} "
      f"(5 standard errors: {5 * sums.std() / np.sqrt(len(sums)):.1e})")
assert np.isclose(P_row.sum(), 1) and abs(dropped_row.sum() - 1) > 1e-3  # a dropped row no longer sums to 1
assert abs(sums.mean() - 1) < 5 * sums.std() / np.sqrt(len(sums))  # its expectation does

# %% [markdown]
# A dropped row no longer sums to 1 — only its expectation does. Each step sees another random
# subset of the keys, so no prediction can come to rest on a single one. The gradients of a step
# with dropout use the same masks backwards (the formula above); the tests check them against
# torch autograd given the same masks, and against finite differences.
#
# **Takeaways.** A training step is: forward (keep what the backward needs), loss, backward
# (each forward function's transpose, in reverse, summing the gradients of tensors used twice
# and of residuals), clip, learning rate, AdamW. Each piece is checked: by hand here, against
# torch autograd and finite differences in the tests. The memory of training is the weights, their
# gradients and AdamW's two moments (four copies of the weights in all), and the activations — the
# only part that grows with $n$, and with $n^2$ unless attention is tiled.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/18_training_step.py`.
#
# 1. **The loss's gradient.** Logits $(2, 0, 0)$ at one position whose target is token 0, and no
#    other position scored: what is $\partial\mathcal{L}/\partial z$? Check with
#    `T.cross_entropy_backward`.
# 2. **AdamW's first step.** A matrix entry $\theta = 0.5$ with gradient $g = -0.2$, $\eta = 0.01$,
#    $\lambda = 0.1$: what is $\theta$ after one step? And for a norm's gain with the same numbers?
# 3. **Activation bytes.** The lesson's model at $b = 1$, $n = 512$: how many bytes does the plain
#    backward keep, and how many the tiled one? Use the formula of section 6.

# %% [markdown]
# **Write it yourself:** `workbook/18_training_step.py` holds `cross_entropy`,
# `cross_entropy_backward`, `lm_head_backward`, `rms_norm_backward`, `swiglu_ffn_backward`,
# `linear_backward`, `merge_heads_backward`, `softmax_backward`,
# `scaled_dot_product_attention_backward`, `apply_rope_half_backward`, `split_heads_backward`,
# `embed_backward`, `dropout`, `dropout_backward`, `clip_by_global_norm`, `lr_at` and `adamw_step` as
# stubs: the loss, every step of the backward cell above one function at a time, dropout, and the
# optimiser. `python -m transformer check 18` tells you what is still wrong, and
# `python -m transformer check 18 --on-model` then trains lesson 19's decoder for 40 steps with your
# functions beside the package's and compares the losses, step by step.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 18` does the same.
