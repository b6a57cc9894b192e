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
# # 11 · A real LLM, end to end
#
# **What you will see.** SmolLM2-135M, every formula of the earlier lessons with trained
# weights, completing note 002's prompt "The capital of France is" with " Paris"; the
# probabilities of its top next tokens; how the next token is *chosen* — greedy, sampling at
# temperature 0.7 and 1.5, top-p — with seeded, reproducible draws; what temperature does to
# the distribution; and the real attention maps of a few heads on the prompt.
#
# **Follows** note 002 (part 一 §1–3: generation one token per forward pass, the LM head's
# probabilities, greedy vs sampled decoding, temperature, the "Paris" example) and note 000
# (§2.3, the Llama architecture: pre-norm, RoPE, GLU).
#
# $$p_i = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}}\qquad z = \text{logits of the last position},\ T = \text{temperature}$$

# %%
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one BLAS thread is steadier on a busy machine

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 generates shorter continuations
rng = np.random.default_rng(0)

model = T.load_smollm2(progress=False)
tok, cfg = model.tokenizer, model.config
print(f"SmolLM2-135M: {T.count_parameters(cfg):,} parameters, L = {cfg.L}, d = {cfg.d}, h = {cfg.h}, "
      f"h_kv = {cfg.h_kv}, v = {cfg.v}")

# %% [markdown]
# ## 1. "The capital of France is" → " Paris"
#
# One forward pass gives a row of $v = 49152$ logits per position; the last row, through a
# softmax, is the model's distribution over the next token. Greedy decoding takes the most
# likely one.

# %%
prompt = "The capital of France is"
logits = model.logits(prompt)  # (n, v)
z = logits[-1]  # (v,) the last position's logits
p = T.softmax(z)  # (v,)
top = model.next_token_probs(prompt, k=10)  # [(id, text, probability)], best first
print(f"logits {logits.shape} for {len(tok.encode(prompt))} tokens {tok.pieces(tok.encode(prompt))}")
for i, text, prob in top[:5]:
    print(f"  {text!r:12} id {i:5d}  p = {prob:.3f}")
answer = tok.decode(model.generate(prompt, max_new_tokens=1))
print("greedy next token:", repr(answer))
print(f"the top 10 hold {sum(t[2] for t in top):.3f} of the probability")
assert answer == " Paris" and top[0][1] == " Paris" and np.isclose(top[0][2], p.max(), atol=1e-6)

# %%
cand = [t[1] for t in top]
fig, ax = P.new_figure(figsize=(9, 6))
P.next_token_bars(cand, np.array([t[2] for t in top]), ax=ax, highlight=" Paris",
                  title=f"SmolLM2: next token after \"{prompt}\"")
ax.tick_params(axis="y", labelsize=P.LABEL_SIZE)
P.save(fig, P.figure_path("11_next_token.png"))

# %% [markdown]
# ## 2. Choosing the token: greedy, temperature, top-p
#
# * **Greedy** ($T = 0$): always the argmax — the same text every time, often repetitive.
# * **Sampling at temperature $T$**: draw from $\mathrm{softmax}(z / T)$. $T < 1$ sharpens the
#   distribution towards greedy, $T > 1$ flattens it and lets unlikely tokens through.
# * **Top-p** (nucleus): keep the smallest set of most likely tokens whose total mass reaches
#   $p$, renormalise, draw from it; the tail of very unlikely tokens can never be drawn.
#
# Each draw uses a seeded generator, so the same seed gives the same text.

# %%
n_gen = 8 if FAST else 30
settings = {"greedy (T = 0)": dict(temperature=0.0),
            "T = 0.7": dict(temperature=0.7, seed=0),
            "T = 1.5": dict(temperature=1.5, seed=0),
            "top-p 0.9 (T = 1)": dict(temperature=1.0, top_p=0.9, seed=0)}
texts = {}
for name, kw in settings.items():
    texts[name] = tok.decode(model.generate(prompt, n_gen, **kw))
    print(f"{name:18s} {prompt + texts[name]!r}")
again = tok.decode(model.generate(prompt, n_gen, temperature=0.7, seed=0))
print("T = 0.7 with the same seed again gives the same text:", again == texts["T = 0.7"])
assert again == texts["T = 0.7"] and texts["greedy (T = 0)"].startswith(" Paris")

# %% [markdown]
# A sampler is only right if its draws follow the distribution it claims. We draw the first
# token 10,000 times (2,000 in fast mode) at $T = 1$ and compare the frequencies with $p$.

# %%
n_draws, chunk = (2_000 if FAST else 10_000), 500  # chunks of 500 rows keep the (rows, v) arrays at ~100 MB
draw_rng = np.random.default_rng(0)
draws = np.concatenate([T.sample_next(np.broadcast_to(z, (chunk, cfg.v)), temperature=1.0, rng=draw_rng)
                        for _ in range(n_draws // chunk)])  # (n_draws,)
for i, text, prob in top[:3]:
    freq = np.mean(draws == i)
    sigma = np.sqrt(prob * (1 - prob) / n_draws)  # binomial standard error
    print(f"  {text!r:10} p = {prob:.4f}, drawn {freq:.4f} of the time ({(freq - prob) / sigma:+.1f} σ)")
    assert abs(freq - prob) < 4 * sigma

# %% [markdown]
# ## 3. What temperature does to the distribution
#
# Dividing the logits by $T$ before the softmax keeps their order but changes the gaps:
# as $T \to 0$ all the mass goes to the argmax, as $T$ grows the distribution flattens
# towards uniform. The entropy $H = -\sum_i p_i \ln p_i$ measures the spread, and the top-p
# nucleus grows with it.

# %%
temps = [0.5, 1.0, 1.5, 2.0]
shown = [t[0] for t in top[:8]]
probs_T = {t_: T.next_token_probs(z, temperature=t_) for t_ in temps}  # {T: (v,)}
for t_ in temps:
    print(f"T = {t_:3.1f}: p(' Paris') = {probs_T[t_][top[0][0]]:.3f}")
t_grid = np.linspace(0.2, 2.5, 24)
p_paris, entropy, nucleus = [], [], []
for t_ in t_grid:
    q = T.next_token_probs(z, temperature=t_)  # (v,)
    p_paris.append(q[top[0][0]])
    entropy.append(-(q * np.log(np.clip(q, 1e-30, None))).sum())
    nucleus.append(int(np.isfinite(T.filter_logits(z, t_, top_p=0.9)).sum()))  # tokens kept by top-p 0.9
p_paris, entropy, nucleus = np.array(p_paris), np.array(entropy), np.array(nucleus)
print(f"entropy from {entropy[0]:.2f} nats at T = {t_grid[0]:.1f} to {entropy[-1]:.2f} at T = {t_grid[-1]:.1f} "
      f"(uniform: ln v = {np.log(cfg.v):.2f}); top-p 0.9 keeps {nucleus[0]} to {nucleus[-1]} tokens")
assert np.all(np.diff(p_paris) < 0) and np.all(np.diff(entropy) > 0) and nucleus[-1] > nucleus[0]

# %%
fig, axes = P.new_figure(1, 2, figsize=(18, 6.5), layout="constrained", width_ratios=[1.3, 1])
width = 0.8 / len(temps)
xs = np.arange(len(shown))
for k, t_ in enumerate(temps):
    axes[0].bar(xs + (k - (len(temps) - 1) / 2) * width, probs_T[t_][shown], width,
                color=P.LINE_COLORS[[0, 2, 3, 1][k]], label=f"T = {t_:g}")
axes[0].set_xticks(xs, [P.visible_token(tok.decode([i])) for i in shown], fontfamily="monospace")
axes[0].tick_params(axis="x", labelsize=P.LABEL_SIZE)
axes[0].legend(fontsize=P.LABEL_SIZE, frameon=False)
P.style_axes(axes[0], "softmax(z / T) for the 8 most likely tokens", "next token", "probability", grid=True)
axes[0].tick_params(axis="x", labelsize=P.LABEL_SIZE)
axes[1].plot(t_grid, p_paris, color=P.LINE_COLORS[1], linewidth=2.5, label="p(␣Paris)")
axes[1].set_ylim(0, 1.02)
twin = axes[1].twinx()
twin.plot(t_grid, entropy, color=P.LINE_COLORS[0], linewidth=2.5, linestyle="--", label="entropy H (nats)")
twin.tick_params(labelsize=P.TICK_SIZE)
twin.set_ylabel("entropy H (nats)", fontsize=P.LABEL_SIZE)
axes[1].axvline(1.0, color="grey", linestyle=":", linewidth=1.5)
P.style_axes(axes[1], "Sharper below T = 1, flatter above", "temperature T", "p(␣Paris)", grid=True)
lines = axes[1].get_lines()[:1] + twin.get_lines()
axes[1].legend(lines, [ln.get_label() for ln in lines], fontsize=P.LABEL_SIZE, frameon=False, loc="center right")
P.save(fig, P.figure_path("11_temperature.png"))

# %% [markdown]
# ## 4. Real attention maps
#
# `attention_weights` returns, for each of the 30 layers, the $9 \times n \times n$ causal
# weights. Trained heads specialise. We pick four heads by a number each (averaged over the
# rows after the first, which can only look at itself): the one that puts the most weight on
# the **first token**, on the **previous token**, on **itself**, and the one whose rows are
# the most **spread out** (highest entropy). The first token often works as a resting place
# for heads with nothing to look up (an "attention sink").

# %%
maps = model.attention_weights(prompt)  # L × (h, n, n)
W = np.stack(maps)  # (L, h, n, n)
n = W.shape[-1]
labels = [P.visible_token(tok.decode([i])) for i in tok.encode(prompt)]
rows = np.arange(1, n)  # rows that have a choice to make
scores = {
    "first token": W[:, :, rows, 0].mean(-1),  # (L, h)
    "previous token": W[:, :, rows, rows - 1].mean(-1),
    "itself": W[:, :, rows, rows].mean(-1),
    "spread out": -(W[:, :, rows] * np.log(np.clip(W[:, :, rows], 1e-12, None))).sum(-1).mean(-1),
}
picked = {}
for kind, s in scores.items():
    l_, h_ = np.unravel_index(np.argmax(s), s.shape)
    picked[kind] = (int(l_), int(h_), float(s[l_, h_]))
    print(f"most '{kind}': layer {l_:2d}, head {h_}  (score {s[l_, h_]:.2f})")
sink = np.mean(np.argmax(W[1:, :, rows].mean(2), -1) == 0)  # heads (layers ≥ 1) whose average row peaks on token 0
print(f"heads in layers 1–{cfg.L - 1} whose average weight peaks on the first token: {sink:.0%}")
causal_ok = np.allclose(np.triu(W, 1), 0) and np.allclose(W.sum(-1), 1, atol=1e-5)
print("every map is causal (nothing above the diagonal) and its rows sum to 1:", causal_ok)
assert causal_ok and len(maps) == cfg.L and maps[0].shape == (cfg.h, n, n)

# %%
import matplotlib.pyplot as plt  # noqa: E402

depth_layers = [0, cfg.L // 3, 2 * cfg.L // 3, cfg.L - 1]
what = {"first token": "most weight on the first token", "previous token": "most weight on the previous token",
        "itself": "most weight on itself", "spread out": "most spread out (highest entropy)"}
panels = [(f"{what[kind]}\nlayer {l_}, head {h_}", W[l_, h_]) for kind, (l_, h_, _) in picked.items()]
panels += [(f"head 0, layer {l_}", W[l_, 0]) for l_ in depth_layers]
fig, grid = P.new_figure(2, 4, figsize=(20, 10.5), layout="constrained")
for k, (a, (title, m_)) in enumerate(zip(grid.ravel(), panels)):
    P.attention_heatmap(m_, labels if k % 4 == 0 else None, labels if k >= 4 else None, ax=a, vmax=1.0,
                        annotate=True, fmt=".2f", colorbar=False, title=title,
                        xlabel="key" if k >= 4 else None, ylabel="query" if k % 4 == 0 else None)
    for t_ in list(a.texts):  # cells above the diagonal are masked: grey, no number
        j, i = t_.get_position()
        if j > i:
            t_.remove()
            a.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=P.OFF_COLOR))
    if k % 4:
        a.set_yticks([])
    if k < 4:
        a.set_xticks(range(n), labels, rotation=90)
    a.tick_params(labelsize=P.LABEL_SIZE)
fig.colorbar(grid[0, 0].images[0], ax=grid, fraction=0.02, pad=0.01).set_label("weight", fontsize=P.LABEL_SIZE)
fig.suptitle(f"SmolLM2 attention on \"{prompt}\": top, four kinds of head; bottom, one head through the depth",
             fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("11_attention_maps.png"))

# %% [markdown]
# **Takeaways.** A trained decoder is the same stack of formulas as before; only the weights
# are learned. Its output is a distribution, and the decoding rule — greedy, temperature,
# top-p — is a separate choice that trades predictability for variety. Its heads are not
# interchangeable: some track the previous token, some park their weight on the first one.
