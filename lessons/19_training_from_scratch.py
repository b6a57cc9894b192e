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
# # 19 · Training from scratch: watching induction heads form
#
# **What you will see.** The tiny decoder of lesson 18 trained from random weights, in NumPy, in
# about half a minute, on a task only attention can solve: random tokens, then the same tokens
# again. The loss creeps along for about 150 steps, then falls to nearly 0 in under 200 more; over
# those steps two kinds of heads appear — a *previous-token* head in layer 0 and an
# *induction* head in layer 1 — found by a score, not by eye, and checked by switching them
# off. Last, the same training on packed rows: the same documents and the same learning, with a
# fraction of the padding.
#
# **The idea behind it.** Lesson 11 found induction heads inside SmolLM2; here we watch them
# being born (Olsson et al., 2022, *In-context learning and induction heads*). Builds on lesson
# 18 (one training step) and lesson 16 (packing).

# %%
import sys
import time
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P

FAST = P.fast()  # TRANSFORMER_FAST=1: the one-layer control trains for fewer steps

# %% [markdown]
# ## 1. The task
#
# A document is $m$ random tokens $t_1 \dots t_m$ (no token twice), then the same $m$ tokens
# again, with $m$ between 4 and 16. In the first half nothing can be predicted; in the second,
# everything can: after $t_k$ comes $t_{k+1}$, as the first time. Only the second half is scored
# (targets −100 elsewhere). Because $m$ varies, no fixed offset points at the answer: the model
# must *find the earlier copy of the current token* and read what followed it. Each training
# step draws 64 fresh documents; held-out documents come from a split that training never
# draws (`T.is_heldout`).

# %%
cfg = T.induction_config()
docs = T.induction_documents(np.random.default_rng(1), 3, cfg.v, (4, 16))
for d in docs:
    m = len(d) // 2
    print(f"m = {m:2d}: {' '.join(map(str, d[:m]))}  |  {' '.join(map(str, d[m:]))}")
rows = T.induction_rows(docs, packed=False)
print(f"padded to the longest: ids {rows.ids.shape}, {rows.padded_slots} padded slots; "
      f"{rows.scored} targets: {rows.targets[0].tolist()}")

# %% [markdown]
# ## 2. Train
#
# `T.train_induction` runs lesson 18's step 600 times: AdamW ($\eta_{max} = 3 \cdot 10^{-3}$,
# 100 warm-up steps, cosine to 0, clip 1, weight decay 0.1), 64 documents a step, seed 0.
# Every 10 steps it stops the clock and records the held-out accuracy and the attention maps
# of one held-out sequence of 24 tokens ($m = 12$).

# %%
t0 = time.perf_counter()
run = T.train_induction(seed=0)
h, snaps = run["history"], run["snapshots"]
print(f"{h['steps']} steps in {h['seconds']:.0f} s of training ({time.perf_counter() - t0:.0f} s with the snapshots), "
      f"{h['tokens_per_s']:,.0f} tokens/s")
print(f"loss: first step {h['loss'][0]:.3f}, last {h['loss'][-1]:.4f};  held-out accuracy "
      f"{run['heldout_accuracy']:.2%} of {run['heldout_predictions']:,} predictions")
assert run["heldout_accuracy"] >= 0.99

# %% [markdown]
# The held-out accuracy (`T.induction_accuracy`) scores only the guesses the task makes predictable: the
# logits at position $i$ guess the token at $i + 1$, for $i = m \dots 2m - 2$, which are $t_2 \dots t_m$ of
# the second copy. The copy's own first token, $t_1$, is not scored: nothing before it says that a copy
# begins. A control run on a held-out batch: a perfect copier's guesses score 1, and the same guesses
# one position late (each token guessed to be itself again) score 0.

# %%
probe = T.induction_batch(np.random.default_rng(2), 4, 12, cfg.v, split="heldout").ids  # [4, 24]
perfect = np.concatenate([probe[:, 1:], probe[:, :1]], axis=1)  # at i: the token at i + 1 (the last is not scored)
print(f"a perfect copier: {T.induction_accuracy(perfect, probe):.0%}; one position late: "
      f"{T.induction_accuracy(probe, probe):.0%}")
assert T.induction_accuracy(perfect, probe) == 1.0 and T.induction_accuracy(probe, probe) == 0.0

# %% [markdown]
# ## 3. Which head does what: a score for each
#
# On the held-out sequence $t_1 \dots t_{12}\, t_1 \dots t_{12}$ ($m = 12$), two numbers per
# head (`T.induction_head_scores`):
#
# - **previous token**: the mean weight $P_{i,\,i-1}$ over all rows — 1 for a head that always
#   reads the token just before;
# - **induction**: the mean weight $P_{i,\,i-m+1}$ over the second half — query $i$ holds
#   $t_{k}$, its earlier copy sits at $i-m$, and the token after that copy, $t_{k+1}$, at
#   $i-m+1$: the answer.
#
# What does a head that has learned nothing score? A causal head that spreads its weight evenly
# gives query $i$'s $i + 1$ keys $1/(i+1)$ each; its scores are means of those over the rows each
# score reads, so they differ: the induction score reads only the later rows, where the weight
# is spread thinner.

# %%
m_probe = snaps["n_half"]  # 12
n_probe = 2 * m_probe
uniform = np.tri(n_probe) / np.arange(1, n_probe + 1)[:, None]  # [n, n]: row i puts 1/(i + 1) on keys 0 … i
baseline = {k: float(v[0, 0]) for k, v in T.induction_head_scores(uniform[None, None], m_probe).items()}  # L = h = 1
print(f"a uniform causal head on the probe (n = {n_probe}): previous token {baseline['previous token']:.3f}, "
      f"induction {baseline['induction']:.3f}")
assert abs(baseline["previous token"] - np.mean(1 / np.arange(2, n_probe + 1))) < 1e-12  # rows 1 … n − 1
assert abs(baseline["induction"] - np.mean(1 / np.arange(m_probe + 1, n_probe))) < 1e-12  # rows m … 2m − 2

# %%
scores = snaps["scores"]  # name -> [snapshot, L, h]
prev, ind = scores["previous token"][-1], scores["induction"][-1]  # (L, h) after training
names = [f"layer {l}, head {j}" for l in range(cfg.L) for j in range(cfg.h)]
for l in range(cfg.L):
    for j in range(cfg.h):
        print(f"layer {l}, head {j}:  previous token {prev[l, j]:.2f}   induction {ind[l, j]:.2f}")
l_prev, h_prev = np.unravel_index(prev.argmax(), prev.shape)
l_ind, h_ind = np.unravel_index(ind.argmax(), ind.shape)
print(f"previous-token head: layer {l_prev}, head {h_prev};  induction head: layer {l_ind}, head {h_ind}")
assert l_prev < l_ind and ind.max() > 0.8 and prev.max() > 0.4

# %% [markdown]
# The order matters: the induction head must know, at each key $j$, *which token came before
# $j$* — and that is what the previous-token head of the layer below wrote into position $j$.
# Query $t_k$ then matches the key whose previous token is $t_k$, and copies the token there.
# Two layers are the fewest that can do it: with one, no key holds anything but its own token
# (RoPE turns q and k by their positions, but writes no position into the residual stream), so
# no query can find "the key after my earlier copy". A claim to test: the same run, same seed
# and recipe, with `sizes={"L": 1}`.

# %%
one_steps = 150 if FAST else run["steps"]  # one layer is near its ceiling by step 150 (snapshots of the full run)
one = T.train_induction(seed=0, steps=one_steps, sizes={"L": 1}, snapshot_every=25)
print(f"held-out accuracy after {one_steps} steps: one layer {one['heldout_accuracy']:.1%}, "
      f"two layers {run['heldout_accuracy']:.1%} (after {run['steps']});  last-20-step loss: one layer "
      f"{np.mean(one['history']['loss'][-20:]):.2f}, two {np.mean(h['loss'][-20:]):.3f}")
assert one["heldout_accuracy"] < 0.35 and run["heldout_accuracy"] - one["heldout_accuracy"] > 0.6

# %%
fig, _ = P.training.runs_compared(
    {"two layers": h["loss"], "one layer": one["history"]["loss"]},
    {"two layers": (snaps["step"], snaps["accuracy"]),
     "one layer": (one["snapshots"]["step"], one["snapshots"]["accuracy"])},
    levels={f"chance: ln 31 = {np.log(cfg.v - 1):.2f}": float(np.log(cfg.v - 1))},
    suptitle="The same run with one layer: no induction head can form, and the accuracy stays near a fifth")
P.save(fig, P.figure_path("19_one_layer_control.png"))

# %% [markdown]
# The one-layer model's loss follows the two-layer one's through the slow phase, where neither
# can copy, then levels off at about a fifth of the answers, while the two-layer model drops to
# a loss near 0: the copy needs the second layer.
#
# A score is a correlation; to test the story, switch heads off. Zeroing a head's rows of
# $W_o$ removes what it writes into the residual stream:

# %%
held = T.induction_documents(np.random.default_rng(T.HELDOUT_SEED_OFFSET), 256, cfg.v, (4, 16), split="heldout")


def without(heads):  # held-out accuracy with these (layer, head) outputs zeroed
    p = {k: w.copy() for k, w in run["params"].items()}
    for l, j in heads:
        p[f"layers.{l}.W_o"][j * cfg.d_h:(j + 1) * cfg.d_h] = 0  # head j's slice of merge(o) W_o
    return T.induction_heldout_accuracy(p, cfg, held)[0]


ablations = {"nothing": [], **{f"layer {l}, head {j}": [(l, j)] for l in range(cfg.L) for j in range(cfg.h)},
             "both heads of layer 0": [(0, 0), (0, 1)], "both heads of layer 1": [(1, 0), (1, 1)]}
acc = {k: without(v) for k, v in ablations.items()}
for k, a in acc.items():
    print(f"without {k:22s} held-out accuracy {a:7.2%}")
assert acc["both heads of layer 1"] < 0.3 and acc["both heads of layer 0"] < 0.3 and acc["nothing"] >= 0.99
cost = [acc["nothing"] - acc[f"layer 0, head {j}"] for j in range(cfg.h)]  # the answers each layer-0 head carries
print(f"previous-token scores of layer 0: {', '.join(f'{v:.2f}' for v in prev[0])} (sum {prev[0].sum():.2f}); "
      f"removing one costs {', '.join(f'{c:.0%}' for c in cost)} of the answers")
assert abs(prev[0].sum() - 1) < 0.15, "the two layer-0 heads share the previous-token rows"
assert all(0.15 <= c <= 0.65 for c in cost), "each layer-0 head carries a quarter to about half of the answers"
assert min(acc[f"layer 1, head {j}"] for j in range(cfg.h)) > 0.9, "each layer-1 head answers almost alone"

# %% [markdown]
# Both layer-0 heads carry the previous token (their two scores add up to about 1: they share
# the rows between them), and removing one costs a quarter of the answers, the other about half.
# Both layer-1 heads are induction heads: each can answer almost alone, and without both the
# model is back near the guessing it started from.
#
# ## 4. The loss curve and the heads, over training

# %%
steps_s = np.array(snaps["step"])
acc_s = np.array(snaps["accuracy"])
best_prev = scores["previous token"][:, l_prev, h_prev]  # [snapshots]
best_ind = scores["induction"][:, l_ind, h_ind]
i_before = int(np.flatnonzero(acc_s < 0.2)[-1])  # the last snapshot of the slow phase
i_during = int(np.flatnonzero(acc_s >= 0.5)[0])  # the first past half
i_after = int(np.flatnonzero(acc_s >= 0.99)[0])
picked = [0, i_before, i_during, len(steps_s) - 1]
print(f"accuracy below 20 % until step {steps_s[i_before]}, past 50 % at step {steps_s[i_during]}, "
      f"past 99 % at step {steps_s[i_after]}")
drop = h["loss"][steps_s[i_before] - 1] - h["loss"][steps_s[i_after] - 1]
print(f"the loss falls by {drop:.2f} nats in the {steps_s[i_after] - steps_s[i_before]} steps between them; "
      f"held-out accuracy at step 300: {acc_s[steps_s == 300][0]:.0%}")
assert acc_s[steps_s == 300][0] > 0.9  # exercise 4 compares a one-layer run of 300 steps with this
assert steps_s[i_before] >= 120 and steps_s[i_after] - steps_s[i_before] < 200  # "about 150", "under 200 more"
for name, y in (("previous-token", best_prev), ("induction", best_ind)):
    share = (y[i_after] - y[i_before]) / (y[-1] - y[0])  # the part of its whole rise made between the two steps
    print(f"{name:14s} score: {y[0]:.2f} at step 0, {y[i_before]:.2f} at step {steps_s[i_before]}, "
          f"{y[i_after]:.2f} at step {steps_s[i_after]}, {y[-1]:.2f} at step {steps_s[-1]} "
          f"({share:.0%} of its rise between steps {steps_s[i_before]} and {steps_s[i_after]})")
    assert share > 0.75
marks = [(int(steps_s[i]), "ABCD"[k]) for k, i in enumerate(picked)]
fig, _ = P.training.training_curves(
    h["loss"], steps_s, acc_s, {f"previous-token score (layer {l_prev}, head {h_prev})": best_prev,
                                f"induction score (layer {l_ind}, head {h_ind})": best_ind},
    chance=float(np.log(cfg.v - 1)), marks=marks,
    title="Training from scratch: a slow start, then a sudden drop as the heads form")
P.save(fig, P.figure_path("19_loss_and_heads.png"))

# %% [markdown]
# Two phases. First the loss creeps down from chance ($\ln 31$): the model learns what needs no
# copy — the answer is one of the tokens seen once so far, not one already repeated — worth
# under a fifth of the answers. Then, in the steps printed above (under 200), the loss falls to
# nearly 0 and the accuracy jumps to 100 %; both scores make most of their rise over those same
# steps (over three quarters of it, printed), then keep sharpening slowly while the accuracy stays
# at 100 %. The two heads form *together*: neither helps without the other, so the loss shows no
# sign of either before the drop, and once one starts to form, the gradient pulls the other along.
#
# The four snapshots A–D, every head:

# %%
kind = {"previous token": "previous-token head", "induction": "induction head"}
row_score = ["previous token" if l == 0 else "induction" for l in range(cfg.L) for _ in range(cfg.h)]
head_names = [f"layer {l}, head {j}" + (f"\n{kind[row_score[r]]}" if scores[row_score[r]][-1, l, j] > 0.3 else "")
              for r, (l, j) in enumerate((l, j) for l in range(cfg.L) for j in range(cfg.h))]
m_probe = snaps["n_half"]
n_probe = 2 * m_probe
prev_cells = [(i, i - 1) for i in range(1, n_probe)]
ind_cells = [(i, i - m_probe + 1) for i in range(m_probe, n_probe - 1)]
maps = snaps["maps"][picked].reshape(len(picked), cfg.L * cfg.h, n_probe, n_probe)  # [4, L·h, n, n]
panel_scores = [[scores[row_score[r]][i].reshape(-1)[r] for r in range(cfg.L * cfg.h)] for i in picked]
fig, _ = P.training.heads_over_training(
    maps, [int(steps_s[i]) for i in picked], head_names, snaps["ids"],
    targets={r: (prev_cells if row_score[r] == "previous token" else ind_cells) for r in range(cfg.L * cfg.h)},
    scores=panel_scores, score_names=[f"{name} score" for name in row_score],
    col_titles=[f"{'ABCD'[k]}: step {int(steps_s[i])}, accuracy {acc_s[i]:.0%}" for k, i in enumerate(picked)],
    mask=np.tri(n_probe, dtype=bool),  # the causal mask: the cells above the diagonal are grey, not weights of 0
    suptitle="Every head on a held-out sequence (12 tokens, then the same 12); red: where a previous-token "
             "head (layer 0)\nor an induction head (layer 1) should look; grey: hidden by the causal mask")
P.save(fig, P.figure_path("19_heads_over_training.png"))

# %% [markdown]
# On the course's website, scrub through the run snapshot by snapshot: the loss, the held-out
# accuracy and all four heads' maps at each.
#
# <div class="tfs-view" data-view="training"></div>

# %% [markdown]
# At A (random weights) every head spreads its weight evenly over the past. At B, at the end of
# the slow phase, the layer-0 heads lean faintly on the diagonal below the main one, and layer 1
# already shows a stripe parallel to the red one but a key to its right — two after the earlier
# copy, not one. At C, mid-drop, both sharpen and layer 1's stripe has moved onto the red cells:
# the token that followed each query's own earlier copy. At D both are sharp. From C on, the
# first rows of layer 1 (the first copy, nothing to find) rest on the first keys: most of their
# weight on keys 0–3, where an even spread would put half. The numbers behind those words, read
# from the maps drawn (layer 1: the mean of its two heads):

# %%
P_A, P_B, P_C, P_D = (snaps["maps"][i] for i in picked)  # [L, h, n, n] each
second = np.arange(m_probe, n_probe - 1)  # the query rows the induction score reads


def stripe(P, shift):  # [..., n, n] -> [...]: mean weight `shift` keys right of the red cells (i, i − m + 1)
    return P[..., second, second - m_probe + 1 + shift].mean(-1)


def on_first_keys(P):  # [..., n, n] -> [...]: the weight rows 4 … m − 1 put on keys 0 … 3
    return P[..., 4:m_probe, :4].sum(-1).mean(-1)


assert np.allclose(stripe(P_D[1], 0), scores["induction"][picked[-1], 1])  # shift 0 is the induction score
prev_B = scores["previous token"][picked[1], 0]  # (h,) layer 0 at B
print(f"A: largest difference from an even spread over the past, any head: {np.abs(P_A - uniform).max():.3f}")
print(f"B: layer 0's previous-token scores {', '.join(f'{v:.2f}' for v in prev_B)} "
      f"(an even spread: {baseline['previous token']:.2f})")
for label, P_s in (("B", P_B), ("C", P_C), ("D", P_D)):
    print(f"{label}: layer 1's weight on the red cells {stripe(P_s[1], 0).mean():.2f}, one key to their right "
          f"{stripe(P_s[1], 1).mean():.2f}; its rows 4 … {m_probe - 1} on keys 0 … 3: {on_first_keys(P_s[1]).mean():.0%}")
print(f"(an even spread: {stripe(uniform, 0):.2f} on the red cells, {on_first_keys(uniform):.0%} on keys 0 … 3)")
assert np.abs(P_A - uniform).max() < 0.05, "A: every head spreads its weight evenly"
assert baseline["previous token"] < prev_B.min() and prev_B.max() < 0.25, "B: layer 0 leans faintly on i − 1"
assert stripe(P_B[1], 1).mean() > 1.5 * stripe(P_B[1], 0).mean(), "B: layer 1's stripe is a key right of the red one"
assert stripe(P_C[1], 0).mean() > stripe(P_C[1], 1).mean(), "C: layer 1's stripe has moved onto the red cells"
assert stripe(P_D[1], 0).min() > 0.8, "D: both induction heads are sharp"
assert abs(on_first_keys(uniform) - 0.5) < 0.05  # "an even spread would put half"
assert min(on_first_keys(P_C[1]).mean(), on_first_keys(P_D[1]).mean()) > 0.65, "from C on: most on the first keys"

# %% [markdown]
# ## 5. Using the trained model
#
# Greedy decoding with the KV cache (`T.greedy_generate`): give it a first half and the first
# two tokens of the copy, and it writes the rest. On documents longer than any it saw in
# training ($m > 16$) the accuracy falls: it learned the lengths it was shown.

# %%
prompt_doc = T.induction_batch(np.random.default_rng(7), 1, 10, cfg.v, split="heldout").ids[0]  # m = 10
prompt = prompt_doc[:12][None, :]  # the first half, and 2 tokens of the copy
out = T.greedy_generate(run["params"], cfg, prompt, 8)[0]
print("prompt:   ", " ".join(map(str, prompt[0])))
print("generated:", " ".join(map(str, out[12:])), "   expected:", " ".join(map(str, prompt_doc[12:])))
assert out[12:].tolist() == prompt_doc[12:].tolist()
for m in (16, 20, 24):
    longer = T.induction_documents(np.random.default_rng(5), 64, cfg.v, (m, m), split="heldout")
    acc_m = T.induction_heldout_accuracy(run["params"], cfg, longer)[0]
    print(f"documents with m = {m}: held-out accuracy {acc_m:.1%}")

# %% [markdown]
# ## 6. Packing in training
#
# The run above padded each batch of 64 documents to its longest: more than a third of its slots
# (38 %, printed below) were padding. Lesson 16 packed documents into rows instead; in training
# that takes the document mask (a token reads only its own document) and positions that restart
# in each document, and no target crosses from one document into the next (`T.packed_rows`). With the mask, each
# document's loss is *the same number* in both layouts — so training on packed rows should
# learn exactly as before, from the same documents (same seed), with far fewer wasted slots.

# %%
packed = T.train_induction(seed=0, packed=True)
slots = {name: run["slots"][name] for name in ("padded", "packed")}  # both layouts of the same documents
for name, s in slots.items():
    print(f"{name:7s} rows {s['rows']:6,}  slots {s['slots']:9,}  padded {s['padded_slots']:9,} "
          f"({s['padded_slots'] / s['slots']:.0%})")
print(f"real tokens: {run['slots']['tokens']:,} in both; packing leaves "
      f"{slots['packed']['padded_slots'] / slots['padded']['padded_slots']:.0%} of the padded run's padding")
print(f"first-step loss: padded {h['loss'][0]:.6f}, packed {packed['history']['loss'][0]:.6f}")
print(f"held-out accuracy: padded {run['heldout_accuracy']:.2%}, packed {packed['heldout_accuracy']:.2%};  "
      f"training time: padded {h['seconds']:.0f} s, packed {packed['history']['seconds']:.0f} s")
assert packed["slots"] == run["slots"]  # the same documents, counted in both runs
assert 0.35 < slots["padded"]["padded_slots"] / slots["padded"]["slots"] < 0.4  # "38 %" in the text
assert abs(h["loss"][0] - packed["history"]["loss"][0]) < 1e-5  # same weights, same documents: same loss
assert packed["heldout_accuracy"] >= 0.99 and slots["packed"]["padded_slots"] < 0.25 * slots["padded"]["padded_slots"]

# %%
fig, _ = P.training.packing_comparison(
    {"padded rows (one document each, padded to the batch's longest)": h["loss"],
     "packed rows (64 slots, document mask, positions restarted)": packed["history"]["loss"]},
    {name: (run["slots"]["tokens"], s["padded_slots"]) for name, s in slots.items()},
    suptitle=f"The same {run['steps'] * 64:,} documents, padded or packed: held-out accuracy "
             f"{run['heldout_accuracy']:.1%} and {packed['heldout_accuracy']:.1%}")
P.save(fig, P.figure_path("19_packing.png"))

# %% [markdown]
# The two loss curves lie on top of each other until float32 rounding, accumulated over
# hundreds of steps, separates them a little: packing changed where the tokens sit, not what
# the model computes. The time per step follows the slots only loosely at this size: the
# matrices are so small that much of a step is Python, and our plain attention still computes
# all $64^2$ scores of a packed row and masks most of them. At real sizes the matrix products
# dominate and their cost follows the slots; a tiled attention given the documents skips the
# tiles between them (lesson 16, section 4).
#
# **Takeaways.** A two-layer decoder learns to copy by composing two heads: one writes "the
# token before me" into each position, the next matches the current token against it and reads
# what follows. They appear together, in a sudden drop after a slow start; with one layer they
# cannot appear at all, and the accuracy stays near a fifth. Scores find them;
# switching them off confirms what they do. Packing gives the same learning with a fraction of
# the padding.

# %% [markdown]
# **Write it yourself.** `workbook/19_training_from_scratch.py` holds `induction_head_scores` (the two scores
# of section 3) and `induction_accuracy` (the held-out accuracy of section 2: which guesses are scored) as
# stubs; fill them in, then run `python -m transformer check 19`: it runs the package's own
# test cases on your code and says what is still wrong. `python -m transformer check 19 --on-model` then
# trains this decoder for 40 steps and scores its held-out accuracy with yours, beside the package's.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 19` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/19_training_from_scratch.py`.
#
# 1. **Chance.** With 31 possible tokens and no idea which, what is the loss? And for a model that
#    knows the answer is one of the $m = 10$ tokens of the first half, but not which?
# 2. **Padding.** Documents of 8, 12, 20 and 24 tokens: how many padded slots when each is padded
#    to the longest, and how many when they are packed, first fit, into rows of 64? Check with
#    `T.padded_rows` and `T.packed_rows`.
# 3. **The induction score.** On $t_1 t_2 t_3\, t_1 t_2 t_3$ ($m = 3$), which (query, key) cells does
#    the induction score read, and what does a head score that puts all the weight of those rows on
#    them? Check with `T.induction_head_scores`.
# 4. **Change the run: more heads instead of a second layer.** Give the one-layer control of
#    section 3 four times the heads: $h = 8$ heads of $d_h = 8$ (`sizes={"L": 1, "h": 8, "h_kv": 8}`).
#    Predict how many weights it has (against the one-layer model with 2 heads), and whether it
#    can learn to copy. Check with a run of 300 steps, `T.train_induction(steps=300, sizes=…)`: by
#    then the two-layer run above has passed 90 %. What has the wide layer learned, and what not?
