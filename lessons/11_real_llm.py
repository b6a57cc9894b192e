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
# weights, completing the prompt "The capital of France is" with " Paris"; the
# probabilities of its top next tokens; how the next token is *chosen* — greedy, sampling at
# temperature 0.7 and 1.5, top-p — with seeded, reproducible draws; what temperature does to
# the distribution; and the real attention maps of a few heads on the prompt.
#
# **The source says:** a decoder generates one token per forward pass, reading the LM head's
# probabilities at the last position and choosing greedily or by sampling at a temperature;
# Llama-style models are pre-norm, with RoPE and a gated FFN. Then, on a longer input, we find
# where three kinds of heads live across the 30 layers, among them the *induction heads* that
# copy what followed a token's last occurrence, and watch one at work during decoding.
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
assert np.all(np.diff(nucleus) >= 0), "the nucleus grows with T at every step of the grid, never shrinks"

# %%
fig, axes = P.models.temperature_effect(probs_T, shown, [P.visible_token(tok.decode([i])) for i in shown],
                                        t_grid, p_paris, entropy)
P.save(fig, P.figure_path("11_temperature.png"))

# %% [markdown]
# **Try it on the model.** The view below holds SmolLM2's logits after a few prompts: move the
# temperature, top-k and top-p and watch which tokens the sampler keeps and how their
# probabilities are renormalised.
#
# <div class="tfs-view" data-view="sampling"></div>

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
# **Explore every head.** The view below holds all 30 × 9 maps of SmolLM2 on a few texts: pick a
# layer and head, hover a token to see its row, click a square of the overview to jump to that
# head. The model also generated a few tokens greedily: their rows, at the bottom of each map, are
# the decode rows, one query against the whole context. The view opens on "The cat sat on the
# mat. The cat sat on the" at layer 18, head 6, the strongest induction head of section 5: from
# " sat" on, each token of the second sentence puts the most weight on the token that followed it
# in the first. " The" and " cat", the first two of the repeat, still rest on the first token, as
# the decode row of section 5 does at its first step (the cell below prints each row).
#
# <div class="tfs-view" data-view="attention" data-model="smollm2" data-text="2" data-layer="18" data-head="6"></div>

# %%
view_text = "The cat sat on the mat. The cat sat on the"
view_ids = model.tokenizer.encode(view_text)
W_view = model.attention_weights(view_ids, layer=18, head=6)  # [n, n]
period = view_ids.index(model.tokenizer.encode(".")[0]) + 1  # 7 tokens: "The cat sat on the mat."
for i in range(period, len(view_ids)):
    after = i - period + 1  # the token after this one's earlier occurrence
    print(f"{model.tokenizer.decode([view_ids[i]])!r:8}: {W_view[i, after]:.2f} on the token after its earlier "
          f"copy ({model.tokenizer.decode([view_ids[after]])!r}), {W_view[i, 0]:.2f} on the first token")
assert all(W_view[i].argmax() == i - period + 1 for i in range(period + 2, len(view_ids)))  # " sat" on
assert all(W_view[i].argmax() == 0 for i in (period, period + 1))  # " The", " cat": the first token

# %% [markdown]
# ## 5. Heads across the whole depth: previous-token, sink and induction heads
#
# Five tokens are too few to tell heads apart. A cleaner probe: $r$ random tokens, then the
# same $r$ again ($n = 2r$). A random sequence has no meaning to exploit, so a head that does
# something systematic on it shows its *mechanism*. Three scores per head, each a mean weight
# in $[0, 1]$:
#
# * **previous token**: $P_{i,\,i-1}$ over every row $i \ge 1$;
# * **first token (sink)**: $P_{i,0}$ over every row $i \ge 1$;
# * **induction**: in the second copy, $P_{i,\,i-r+1}$: query $i$ reads the token that *followed*
#   the previous occurrence of its own token. In the map this is a diagonal shifted $r - 1$ to
#   the left. An induction head is how a model continues a pattern it saw earlier in the context.
#
# `iter_attention_weights` yields one layer's $(h, n, n)$ at a time, so a loop that only scores
# the heads holds one layer in memory; here we also keep every layer's map, for the figure and
# for the decode check below.

# %%
r = 16 if FAST else 60  # tokens per copy; n = 2r
rand_ids = rng.integers(1000, cfg.v, size=r).tolist()  # random ids, clear of the special and byte tokens
seq = rand_ids + rand_ids  # (n,)
n_seq = len(seq)
i_all, i_2nd = np.arange(1, n_seq), np.arange(r, n_seq)  # rows with a choice; rows of the second copy
kinds = {"previous token  P[i, i−1]": [], "first token (sink)  P[i, 0]": [], "induction  P[i, i−r+1]": []}
maps_seq = []
for W_l in model.iter_attention_weights(seq):  # (h, n, n), one layer at a time
    kinds["previous token  P[i, i−1]"].append(W_l[:, i_all, i_all - 1].mean(-1))  # (h,)
    kinds["first token (sink)  P[i, 0]"].append(W_l[:, i_all, 0].mean(-1))
    kinds["induction  P[i, i−r+1]"].append(W_l[:, i_2nd, i_2nd - r + 1].mean(-1))
    maps_seq.append(W_l)
kinds = {k: np.array(v) for k, v in kinds.items()}  # each (L, h)
ind = kinds["induction  P[i, i−r+1]"]
l_ind, h_ind = (int(t) for t in np.unravel_index(np.argmax(ind), ind.shape))
for k, s_ in kinds.items():
    l_, h_ = np.unravel_index(np.argmax(s_), s_.shape)
    print(f"{k:30s} best: layer {l_:2d}, head {h_} ({s_[l_, h_]:.2f});  heads ≥ 0.4: {int((s_ >= 0.4).sum())}, "
          f"in layers {sorted(set(np.nonzero(s_ >= 0.4)[0].tolist()))}")
chance = 1 / np.arange(r, n_seq).mean()  # a uniform row gives each key about 1/i
print(f"best induction head: layer {l_ind}, head {h_ind}, score {ind[l_ind, h_ind]:.2f} "
      f"(a uniform row would give {chance:.3f}); first layers' best: {ind[:cfg.L // 3].max():.2f}")
assert ind[l_ind, h_ind] > 0.5 and l_ind >= cfg.L // 3 and ind[:cfg.L // 3].max() < 0.2
assert (l_ind, h_ind) == (18, 6)  # the head the attention view above opens at
sink_layers = set(np.nonzero(kinds["first token (sink)  P[i, 0]"] >= 0.4)[0].tolist())
print(f"sink heads (P[i, 0] ≥ 0.4) in layers {sorted(sink_layers)}")
prev_layers = sorted(set(np.nonzero(kinds["previous token  P[i, i−1]"] >= 0.4)[0].tolist()))
ind_layers = sorted(set(np.nonzero(kinds["induction  P[i, i−r+1]"] >= 0.4)[0].tolist()))
prev_best = int(np.unravel_index(np.argmax(kinds["previous token  P[i, i−1]"]), (cfg.L, cfg.h))[0])
assert prev_layers[0] <= 2 and prev_best == 16, "previous-token heads from layer 1 on, the strongest in layer 16"
assert ind_layers[0] >= cfg.L // 3, "induction heads only past the first third of the stack"
assert sink_layers >= set(range(12, cfg.L)) and not sink_layers & set(range(4, 12))  # early ones, then 12 on
assert 3 in sink_layers and sink_layers & set(range(3)) == ({2} if FAST else set())  # as the takeaways say

# %%
fig, _ = P.late.head_kinds(kinds)
fig.suptitle(f"SmolLM2, all {cfg.L} layers × {cfg.h} heads, on {r} random tokens repeated (n = {n_seq}): "
             "where each kind of head lives", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("11_head_kinds.png"))

# %% [markdown]
# **The decode row.** During generation the new token is one query against the keys in the KV
# cache (lesson 06). We prefill the first copy and one token of the second, then feed the rest
# of the second copy one token at a time through the cache (`T.llama_forward` with a cache and
# `attn_out`), and keep the new token's row in the induction head found above. At step $s$ the
# new token is `rand_ids[s]`, at position $r + s$, and an induction head should read key
# $s + 1$, the token that came after `rand_ids[s]` the first time. It does not do so at once.
# At step 1 it parks on the first token (the sink). For the next three steps it wavers: at step
# 3 it reads the right key, but at steps 2 and 4 almost none of its weight is on it — it goes to
# the sink or to keys that have nothing to do with the pattern (where, the full run's probe and
# the fast mode's shorter one differ). From step 5 on, once a few tokens have repeated, it puts
# nearly all its weight (over 0.9) on the key after the last occurrence.

# %%
n_steps = 6 if FAST else 14
cache = model.new_cache()
T.llama_forward(np.array([seq[:r + 1]]), model.weights, cfg, model.cos, model.sin, cache=cache, last_only=True)
rows, targets = [], []
for s_ in range(1, n_steps + 1):
    layer_maps = []  # L × (b, h, 1, n_k) from this one step
    T.llama_forward(np.array([[seq[r + s_]]]), model.weights, cfg, model.cos, model.sin, cache=cache,
                    last_only=True, attn_out=layer_maps)
    rows.append(np.asarray(layer_maps[l_ind][0, h_ind, 0]))  # (n_k,) = (r + s + 1,)
    targets.append(s_ + 1)
on_target = np.array([float(row[t_]) for row, t_ in zip(rows, targets)])  # (n_steps,)
on_sink = np.array([float(row[0]) for row in rows])  # (n_steps,)
late = slice(n_steps // 2, None)  # the second half of the steps
hits = np.mean([row[1:].argmax() + 1 == t_ for row, t_ in zip(rows[late], targets[late])])  # the sink, key 0, aside
uniform = 1 / np.array([row.size for row in rows])  # what a row spread evenly would give
same_as_full = np.allclose(rows[-1], maps_seq[l_ind][h_ind, r + n_steps, :r + n_steps + 1], atol=1e-4)
leads = np.array([row.argmax() == t_ for row, t_ in zip(rows, targets)])  # (n_steps,) that key gets the most weight
settled = next(s_ for s_ in range(n_steps) if leads[s_:].all()) + 1  # the step from which it always does
print(f"weight on the key after the last occurrence, step by step: {np.round(on_target, 2).tolist()}")
print(f"weight on the first token (the sink):                       {np.round(on_sink, 2).tolist()}")
print(f"that key gets the most weight at steps {(np.nonzero(leads)[0] + 1).tolist()}; at every step from step {settled} on")
print(f"second half of the steps: the row (sink aside) peaks on that key {hits:.0%} of the time, "
      f"mean weight {on_target[late].mean():.2f} (uniform: {uniform.max():.3f} or less)")
print("the cached decode row equals the same row of the full causal map:", same_as_full)
assert hits >= 0.6 and on_target[late].mean() > 5 * uniform.max() and same_as_full
assert on_sink[0] > 0.9 and leads[2] and not leads[1] and not leads[3] and settled == 5  # as told above
assert on_target[1] < 0.1 and on_target[3] < 0.1 and on_target[2] > 0.5 and on_target[4:].min() > 0.9

# %%
fig, _ = P.late.induction_and_decode(maps_seq[l_ind][h_ind], r, rows, r + 1, targets,
                                      head_name=f"induction head (layer {l_ind}, head {h_ind})")
P.save(fig, P.figure_path("11_induction.png"))

# %% [markdown]
# **Takeaways.** A trained decoder is the same stack of formulas as before; only the weights
# are learned. Its output is a distribution, and the decoding rule — greedy, temperature,
# top-p — is a separate choice that trades predictability for variety. Its heads are not
# interchangeable: previous-token heads sit here and there from layer 1 on (the strongest in
# layer 16), sink heads in layer 3 (on the fast mode's shorter probe, layer 2 as well) and then
# in every layer from 12 on, and induction heads
# only past the first third of the stack: they need the previous-token information written
# earlier to find "the token after mine".

# %% [markdown]
# **Write it yourself.** `workbook/11_real_llm.py` holds `filter_logits` (temperature, top-k, top-p)
# and `sample_next` (greedy, or a draw by the inverse CDF) as stubs with this lesson's formulas; fill
# them in, then run `python -m transformer check 11`: it runs the package's own test cases on your code
# (each draw is given the uniform numbers it must use) and says what is still wrong. Once the decoder's
# functions of lessons 01–07 and 10 pass too, `python -m transformer check all --on-model` runs this
# lesson's model with yours in place of the package's and prints both replies.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 11` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/11_real_llm.py`.
#
# 1. **Temperature.** Logits $z = (2, 1, 0)$ at $T = 0.5$: the three probabilities by hand, then
#    `T.next_token_probs(z, temperature=0.5)`.
# 2. **Top-p, coded.** $p = (0.5, 0.3, 0.15, 0.05)$, top-p $0.9$: how many tokens does the nucleus
#    keep, and what are their renormalised probabilities? Write the filter in NumPy (`np.argsort`,
#    `np.cumsum`, a boolean mask) and compare with `T.next_token_probs(np.log(p), top_p=0.9)`.
