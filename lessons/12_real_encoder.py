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
# # 12 · A real encoder: MiniLM
#
# **What you will see.** all-MiniLM-L6-v2, a 6-layer BERT-style encoder (12 heads, $d = 384$),
# reading "The dog chased the squirrel because it was fast" (the classic example ends at
# "because it"; "was fast" gives the encoder words on both sides of "it"). We look at what
# the token "it" attends to, head by head; at sentence embeddings and their similarity matrix; at the same weights run bidirectionally (as trained) and under a
# causal mask; and at the padding mask of a batch, under which padded keys get a weight of
# exactly 0.
#
# **The ideas behind it.** Attention scores every token's relevance, then mixes the tokens by
# those scores; BERT-style encoders read both sides of a token, decoders only the left
# (a causal mask); the encoder's block is post-norm, $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$.

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1: nothing to shrink, the encoder is small
rng = np.random.default_rng(0)

model = T.load_minilm()
cfg = model.config
print(f"MiniLM: L = {cfg.L}, h = {cfg.h}, d = {cfg.d}, d_h = {cfg.d_h}, v = {cfg.v}, "
      f"{T.count_parameters(cfg):,} parameters (with the unused [CLS] pooler)")

# %% [markdown]
# ## 1. What does "it" attend to?
#
# In "The dog chased the squirrel because it was fast", "it" must be tied to the dog or the
# squirrel. An encoder's attention is bidirectional, so the row of "it" can also read "was
# fast" to the right. `attention_weights` returns each layer's $(h, n, n)$ weights; row
# $i$ says how much query $i$ takes from every key. We pick the layer whose heads, on
# average, give "it" the most weight on "dog" + "squirrel", and draw its 12 heads.

# %%
sentence = "The dog chased the squirrel because it was fast"
toks = model.tokens(sentence)  # WordPiece pieces with [CLS] and [SEP]
W = np.stack(model.attention_weights(sentence))  # (L, h, n, n)
it, dog, squirrel = toks.index("it"), toks.index("dog"), toks.index("squirrel")
to_nouns = W[:, :, it, dog] + W[:, :, it, squirrel]  # (L, h): weight of "it" on the two nouns
layer = int(np.argmax(to_nouns.mean(1)))
head = int(np.argmax(to_nouns[layer]))
print("tokens:", toks)
print("'it' -> dog + squirrel, head average per layer:", [round(float(v_), 3) for v_ in to_nouns.mean(1)])
print(f"chosen: layer {layer} (average {to_nouns[layer].mean():.3f}); its head {head} gives "
      f"{to_nouns[layer, head]:.3f} (dog {W[layer, head, it, dog]:.3f}, squirrel {W[layer, head, it, squirrel]:.3f})")
uniform = 2 / len(toks)  # what two keys would get if "it" spread its weight evenly
print(f"a uniform row would give the two nouns {uniform:.3f}")
every_row = W[layer, head][:, [dog, squirrel]].sum(-1)  # (n,): the same two columns, for every query
print(f"head {head} gives dog + squirrel {every_row.mean():.3f} on average over all {len(toks)} rows, "
      f"from {every_row.min():.3f} to {every_row.max():.3f}")
assert np.allclose(W.sum(-1), 1, atol=1e-5) and to_nouns[layer, head] > uniform
assert to_nouns[layer, head] > 0.5 and (layer, head) == (5, 11)  # "most of the weight"; the head the view opens on
share_dog = W[layer, head, it, dog] / to_nouns[layer, head]  # dog's part of the two nouns' weight
others = np.delete(every_row, it)  # (n - 1,): every row but the row of "it"
print(f"dog's share of the pair: {share_dog:.2f}; rows other than 'it' above uniform: {(others > uniform).mean():.0%}")
assert 1 / 3 < share_dog < 2 / 3, "a mix of both nouns, neither above twice the other"
assert (others > uniform).mean() > 0.5, "most other rows also favour the two nouns"

# %% [markdown]
# Two cautions for reading such maps. The head does not *choose* between the nouns: the row
# of "it" is a weighted mix of both, neither taking twice the other's weight. And the same head
# sends more than a uniform row's weight to "dog" and "squirrel" from most other rows as well
# (the printed range above): it looks like a "find the nouns"
# head more than a resolver of "it" — one head's map is a clue, not an explanation.

# %%
fig, axes = P.models.heads_with_row(
    W[layer], toks, row=it, titles=[f"head {i}" + ("  ★" if i == head else "") for i in range(cfg.h)],
    suptitle=f"MiniLM layer {layer}: all {cfg.h} heads on \"{sentence}\" (★: most on dog + squirrel from 'it', red frame)")
P.save(fig, P.figure_path("12_it_heads.png"))

# %%
fig, axes = P.models.row_bars([(W[layer, :, it].mean(0), f"layer {layer}, average of the {cfg.h} heads"),
                               (W[layer, head, it], f"layer {layer}, head {head}")], toks, (dog, squirrel),
                              ylabel="weight from 'it'",
                              suptitle="The row of 'it': how much it takes from each token (red: the two candidates)")
P.save(fig, P.figure_path("12_it_row.png"))

# %% [markdown]
# **Explore every head.** The view below holds all 6 × 12 maps of MiniLM on a few sentences:
# pick a layer and head, hover "it" to see its row, click a square of the overview to jump to
# that head.
#
# <div class="tfs-view" data-view="attention" data-model="minilm" data-layer="5" data-head="11"></div>

# %% [markdown]
# ## 2. Sentence embeddings and their similarity
#
# MiniLM is trained so that the mean of its last hidden states over the real tokens, scaled
# to length 1, places sentences with similar meaning close together. With unit vectors the
# cosine similarity is a dot product: $S = E E^\top$. The six sentences hold two related
# pairs (a dog / a puppy after a squirrel; two facts about Paris and France) and two
# unrelated ones. The Paris pair states two *different* facts, yet it scores highest: the
# embedding measures a shared topic, not whether two sentences say the same thing.

# %%
sentences = ["A dog chases a squirrel in the park.", "A puppy runs after a squirrel.",
             "The cat sleeps on the sofa.", "The capital of France is Paris.",
             "Paris is the largest city in France.", "Stock prices fell sharply today."]
E = T.to_numpy(model.embed(sentences))  # (6, d), unit rows
S = E @ E.T  # (6, 6) cosine similarities
print("embeddings:", E.shape, " norms:", np.round(np.linalg.norm(E, axis=1), 4).tolist())
print(np.round(S, 2))
related = np.zeros_like(S, dtype=bool)
related[[0, 1, 3, 4], [1, 0, 4, 3]] = True  # (dog, puppy) and (Paris, France), both ways
others = ~related & ~np.eye(len(sentences), dtype=bool)
pairs_ok = min(S[0, 1], S[3, 4]) > S[others].max()
print(f"related pairs: dog/puppy {S[0, 1]:.2f}, capital/Paris {S[3, 4]:.2f}; largest other pair {S[others].max():.2f}")
assert np.allclose(np.diag(S), 1, atol=1e-5) and np.allclose(S, S.T, atol=1e-6) and pairs_ok
assert S[3, 4] > S[0, 1]  # the prose's claim: the Paris pair scores highest

fig, ax = P.new_figure(figsize=(12.5, 7))
short_names = [f"S{i + 1}" for i in range(len(sentences))]
P.attention_heatmap(S, [f"{s_}  S{i + 1}" for i, s_ in enumerate(sentences)], short_names, ax=ax, signed=True,
                    vmin=-1, vmax=1,  # a cosine's range: not max |S|, whose last digit varies with the rounding
                    annotate=True, fmt=".2f", cbar_label="cosine similarity",
                    title="MiniLM sentence embeddings: cosine similarity", xlabel=None, ylabel=None)
ax.set_xticklabels(short_names, rotation=0)
ax.tick_params(labelsize=P.LABEL_SIZE)
for t_ in ax.texts:
    t_.set_fontsize(P.LABEL_SIZE)
P.save(fig, P.figure_path("12_similarity.png"))

# %% [markdown]
# ## 3. Bidirectional vs causal, same weights
#
# The encoder was trained to read in both directions. Running the very same weights under a
# causal mask (`causal=True`) turns it into a left-to-right reader: every row loses the keys
# to its right. The test is simple: change the last word, "fast" → "slow". Bidirectionally,
# every token's final vector changes, because every token reads "slow"; causally, the tokens
# before it cannot see it and stay exactly the same.

# %%
other = "The dog chased the squirrel because it was slow"
assert len(model.tokens(other)) == len(toks)
changed = toks.index("fast")
for causal in (False, True):
    h = T.to_numpy(model.forward([sentence, other], causal=causal).hidden)  # (2, n, d)
    diff = np.abs(h[0] - h[1]).max(-1)  # (n,): how much each position's output moved
    print(f"{'causal       ' if causal else 'bidirectional'}: change of each position before 'fast' "
          f"from {diff[:changed].min():.2e} to {diff[:changed].max():.2e}; at 'fast' {diff[changed]:.2f}")
    assert np.all(diff[:changed] == 0.0) if causal else np.all(diff[:changed] > 1e-3)
Wc = np.stack(model.attention_weights(sentence, causal=True))  # (L, h, n, n)
upper = np.triu(np.ones((len(toks), len(toks)), dtype=bool), 1)  # keys to the right of each query
print(f"weight on keys to the right: bidirectional {W[layer, head][upper].sum():.2f} "
      f"(summed over the map), causal {Wc[layer, head][upper].sum():.1f}")
assert np.all(Wc[:, :, upper] == 0.0) and W[layer, head][upper].sum() > 0.5

# %% [markdown]
# ## 4. The padding mask in a batch
#
# A batch needs one length, so shorter sentences are filled with `[PAD]`. Padded keys must
# not take any weight, or a sentence's meaning would depend on its batch-mates. The mask
# sets their scores to $-\infty$ before the softmax, and $e^{-\infty} = 0$: their weight is
# exactly zero, not just small. The short sentence then gets the same vectors and the same
# embedding as when it is encoded alone. (The `[PAD]` *queries* still get rows of weights —
# nothing reads them: mean pooling skips those positions.)

# %%
short, long_ = "The dog was fast.", "The dog chased the squirrel because it was fast"
out = model.forward([short, long_])
lengths = T.to_numpy(out.lengths)  # (b,) real tokens per row
n_real, n_pad = int(lengths[0]), int(lengths.max())
Wb = T.to_numpy(out.weights[layer])[0]  # (h, n, n): the short sentence's weights in the batch
print(f"batch lengths {lengths.tolist()}: the short row has {n_pad - n_real} [PAD] tokens")
print("largest weight on a [PAD] key, all layers and heads:",
      max(float(T.to_numpy(w_)[0][:, :, n_real:].max()) for w_ in out.weights))
alone = T.to_numpy(model.forward([short]).hidden)[0]  # (n_real, d)
same_h = np.abs(T.to_numpy(out.hidden)[0, :n_real] - alone).max()
same_e = np.abs(T.to_numpy(model.embed([short, long_]))[0] - T.to_numpy(model.embed([short]))[0]).max()
print(f"short sentence in the batch vs alone: hidden states max |Δ| {same_h:.1e}, embedding max |Δ| {same_e:.1e}")
assert all(np.all(T.to_numpy(w_)[0][:, :, n_real:] == 0.0) for w_ in out.weights)
assert same_h < 1e-4 and same_e < 1e-5

# %%
pad_toks = model.tokens(short) + ["[PAD]"] * (n_pad - n_real)
real_keys = np.arange(n_pad) < n_real  # (n,): the keys a padded row may read
fig, axes = P.late.mask_panels(
    [(W[layer, head], toks, None, f"bidirectional (as trained)\nlayer {layer}, head {head}"),
     (Wc[layer, head], toks, ~upper, "causal mask, same weights\nnothing to the right of the diagonal"),
     (Wb[head], pad_toks, np.broadcast_to(real_keys, (n_pad, n_pad)),
      "short sentence padded in a batch\n[PAD] keys: weight exactly 0")])
P.save(fig, P.figure_path("12_bidirectional_causal_padding.png"))

# %% [markdown]
# **Takeaways.** In a trained encoder some heads put most of the weight of "it" on the two
# nouns, and they can use the words on both sides. Sentence embeddings turn meaning into
# geometry: sentences on the same topic have high cosine similarity, even when they state
# different facts. A mask is all that separates an encoder's reading from a decoder's,
# and the padding mask makes every sentence in a batch independent of the others.

# %% [markdown]
# **Write it yourself.** `workbook/12_real_encoder.py` holds `bert_embeddings` (BERT's input: word, position and
# token-type embeddings summed, then a LayerNorm), and `mean_pool` and `l2_normalize`, the two steps from the
# last hidden states to a sentence embedding, as stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 12`: it runs the package's own test cases on your code and says what is
# still wrong. `python -m transformer check 12 --on-model` then embeds three sentences with this lesson's
# model and your functions, and prints their similarities beside the package's.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 12` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/12_real_encoder.py`.
#
# 1. **Mean pooling, coded.** Hidden states $(3, 1)$, $(1, 3)$ and a [PAD] row $(100, 100)$,
#    length 2: the sentence embedding after pooling and L2 normalisation, by hand? Then write
#    masked mean pooling in NumPy for a batch of two (the second sentence: one token $(0, 2)$ and
#    two [PAD] rows) and compare with `T.l2_normalize(T.mean_pool(hidden, lengths))`.
# 2. **Pairs.** One layer, $h = 12$ heads, $n = 10$ tokens: how many weights does bidirectional
#    attention compute, and how many of them would a causal mask hide? Check with the masks.
