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
# # 15 · Encoder–decoder and cross-attention
#
# **What you will see.** The architecture of "Attention Is All You Need" assembled from the
# package's functions: an encoder whose self-attention is bidirectional, a decoder whose
# self-attention is masked (causal), and between them **cross-attention**, where the
# decoder's queries read keys and values made from the encoder's output. The cross weights
# are $n_\text{dec} \times n_\text{enc}$ — not square. We train a small model of this shape,
# here and now, on a toy translation task whose right alignment is known exactly, and watch
# cross-attention learn it: at initialisation its weights are a near-uniform blur (none twice
# the uniform $1/n_\text{enc}$), after training each target word looks at the source word it
# translates.
#
# **The source says:** the original Transformer stacks $N = 6$ encoder and $N = 6$ decoder layers
# of width $d_\text{model} = 512$, each sub-layer wrapped post-norm as
# $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$; the decoder masks its self-attention and adds a
# third sub-layer that attends over the encoder output; decoders attend causally, encoders do not.
#
# **New in the package:** the two layers are `T.seq2seq_encoder_layer` and
# `T.seq2seq_decoder_layer` (weights in `T.Seq2SeqEncoderLayer`, `T.Seq2SeqDecoderLayer`), tested
# against `torch.nn.TransformerEncoderLayer` and `torch.nn.TransformerDecoderLayer`. The trainable
# model is `T.seq2seq_forward` / `T.seq2seq_backward` (the same layers, with their backward pass,
# tested against torch autograd), trained by `T.train_translation`; `T.translate_greedy` decodes
# with a KV cache.
#
# $$\text{CrossAttention}(Y, Z) = \mathrm{softmax}\!\left(\frac{(YW_q)(ZW_k)^\top}{\sqrt{d_k}}\right) ZW_v
#   \qquad Y: (n_\text{dec}, d),\ Z = \text{encoder output}: (n_\text{enc}, d)$$

# %%
import inspect
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P

FAST = P.fast()  # TRANSFORMER_FAST=1: the control run without cross-attention trains for fewer steps

# %% [markdown]
# ## 1. The task: reverse the sentence and translate each word
#
# The source language has 24 made-up words ("ka", "lu", …), the target language 24 English
# ones, paired one to one by a fixed dictionary. A source sentence is 4–12 random words; its
# translation is the dictionary words **in reversed order**. So the alignment is known
# exactly: the decoder position that writes target word $i$ must read source word
# $n - 1 - i$, an anti-diagonal, never the diagonal of a word-by-word copy. One shared
# vocabulary serves both sides (PAD, BOS, EOS, 24 + 24 words: $v = 51$). A tenth of all
# sentences (chosen by a hash of their words) is **held out**: training never sees them.

# %%
vocab = T.translation_vocab()
shown = T.translation_batch(np.random.default_rng(0), 1, n_range=(5, 5))  # src_ids, src_lengths, tgt_in, tgt_out
print("source:", T.detokenize(shown.src_ids[0]), "  ->  target:", T.detokenize(shown.tgt_out[0]))
print("decoder input (BOS + target, shifted right):", [vocab.tokens[t] for t in shown.tgt_in[0]])
print("decoder targets (the target, then EOS):      ", [vocab.tokens[t] for t in shown.tgt_out[0]])
print("dictionary:", ", ".join(f"{vocab.tokens[s]}→{vocab.tokens[vocab.translate(s)]}" for s in vocab.source_ids[:6]),
      "…", f"   v = {vocab.v}")

# %% [markdown]
# ## 2. The sizes, and training
#
# The paper uses $N = 6$ layers on each side and $d_\text{model} = 512$, with $h = 8$ heads of $d_k = 64$
# and an FFN of width $d_{ff} = 2048 = 4\,d_\text{model}$. We shrink all of it: $N = 2$,
# $d_\text{model} = 64$, $h = 4$ heads of $d_k = 16$ and $d_{ff} = 128 = 2\,d_\text{model}$. The
# architecture is the paper's: sinusoidal positions, embeddings scaled by $\sqrt{d_\text{model}}$, one
# embedding table shared by source, target and the output projection, ReLU FFN, post-norm. The
# training recipe is not quite (paper §5.3–5.4, against `T.TRANSLATION_RECIPE`):
#
# | | the paper | this run |
# | --- | --- | --- |
# | optimizer | Adam, $\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$, no weight decay | AdamW, $\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-8}$, weight decay 0.01 |
# | learning rate | $d_\text{model}^{-0.5} \min(t^{-0.5},\ t \cdot 4000^{-1.5})$: linear warm-up over 4000 steps, then $\propto 1/\sqrt{t}$ | linear warm-up over 100 steps to $3 \cdot 10^{-3}$, then a cosine down to $3 \cdot 10^{-4}$ |
# | gradient clipping | none | global norm clipped to 1 |
# | label smoothing | 0.1 | none |
# | dropout | 0.1, on every sub-layer's output and on the embeddings + positions | none |
#
# Dropout and label smoothing fight overfitting a fixed corpus; this run draws fresh sentences every
# step, and its held-out sentences are never drawn. Each step is 64 sentences: forward,
# cross-entropy on the target words (padding ignored), the backward pass through every layer, AdamW.
#
# `T.train_translation` runs it, seeded: the same seed gives the same weights. Its 600 steps
# (38 400 sentences) take about 23 s of one core's time; a busy machine takes longer, and the time
# printed below is this run's.

# %%
recipe = T.TRANSLATION_RECIPE  # the "this run" column of the table
adam_eps = inspect.signature(T.train_loop).parameters["eps"].default  # train_translation keeps train_loop's ε
print("recipe:", recipe, f"  Adam's ε = {adam_eps:g}")
assert adam_eps == 1e-8 and recipe["betas"] == (0.9, 0.98) and recipe["warmup"] == 100 and recipe["clip"] == 1.0
assert (recipe["lr_max"], recipe["min_lr"], recipe["weight_decay"]) == (3e-3, 3e-4, 0.01)

cfg = T.translation_config()
n_params = sum(int(np.prod(s)) for s in cfg.parameter_shapes().values())
print(f"N = {cfg.L_enc} + {cfg.L_dec}, d_model = {cfg.d}, h = {cfg.h}, d_k = {cfg.d_h}, d_ff = {cfg.d_ff}, "
      f"v = {cfg.v}: {n_params:,} parameters")
STEPS = T.DEFAULT_STEPS
run = T.train_translation(steps=STEPS, seed=0)
hist = run["history"]
print(f"{STEPS} steps in {run['seconds']:.0f} s ({hist['tokens_per_s']:,.0f} tokens/s; 1-minute load "
      f"{run['load_average'][0]:.1f} at the start); loss {hist['loss'][0]:.2f} -> {np.mean(hist['loss'][-20:]):.4f}")
print(f"held-out exact match (greedy, every word and the EOS right): {run['heldout_exact_match']:.1%} "
      f"of {run['heldout_sentences']} sentences never seen in training")
assert run["heldout_exact_match"] >= 0.95
assert STEPS == len(hist["loss"]) == 600 and STEPS * recipe["batch_size"] == 38_400  # the prose's count

# %%
fig, ax = P.new_figure(figsize=(11, 5.2))
steps = np.arange(1, STEPS + 1)
ax.plot(steps, hist["loss"], color=P.LINE_COLORS[0], linewidth=1, alpha=0.45, label="loss of each batch")
smooth = np.convolve(hist["loss"], np.ones(20) / 20, mode="valid")
ax.plot(steps[19:], smooth, color=P.LINE_COLORS[0], linewidth=2.5, label="mean of the last 20 batches")
ax.axhline(np.log(cfg.v), color="grey", linestyle="--", linewidth=1.2)
ax.text(STEPS, np.log(cfg.v) * 1.12, f"ln v = {np.log(cfg.v):.2f}: a uniform guess", ha="right",
        fontsize=P.TICK_SIZE, color="grey")
ax.set_yscale("log")
ax2 = ax.twinx()
ax2.plot(steps, hist["lr"], color=P.LINE_COLORS[1], linewidth=1.5, linestyle=":")
ax2.set_ylabel("learning rate (dotted)", fontsize=P.LABEL_SIZE, color=P.LINE_COLORS[1])
ax2.tick_params(labelsize=P.TICK_SIZE, colors=P.LINE_COLORS[1])
ax2.set_ylim(0, max(hist["lr"]) * 1.1)
ax.legend(fontsize=P.TICK_SIZE, frameon=False, loc="lower left")
P.style_axes(ax, f"Training the encoder–decoder: cross-entropy per target word (seed 0, {STEPS} steps of 64 "
             f"sentences)", "step", "loss (log scale)", grid=True)
P.save(fig, P.figure_path("15_training_loss.png"))

# %% [markdown]
# ## 3. The trained weights, as the layers of the original Transformer
#
# The trained parameters are a dict of named arrays (the checkpoint's format). Viewed as the
# package's layer records (`T.seq2seq_encoder_weights`, no copy), they run through `T.seq2seq_encoder_layer` and `T.seq2seq_decoder_layer`, the layers tested
# against torch's `TransformerEncoderLayer` and `TransformerDecoderLayer`:

# %%
def as_layers(params):  # the dict of named weights -> (encoder layers, decoder layers): views, no copies
    return ([T.seq2seq_encoder_weights(params, l) for l in range(cfg.L_enc)],
            [T.seq2seq_decoder_weights(params, l) for l in range(cfg.L_dec)])


params = run["params"]
enc_layers, dec_layers = as_layers(params)
W_E = params["W_E"]  # (v, d): source embedding, target embedding and output projection, one table
h, d_model = cfg.h, cfg.d
print(f"{len(enc_layers)} encoder layers, {len(dec_layers)} decoder layers; W_q of the first cross-attention:",
      dec_layers[0].cross_attn.W_q.shape)

# %% [markdown]
# ## 4. The encoder: bidirectional self-attention, post-norm
#
# Input: token embeddings scaled by $\sqrt{d_\text{model}}$ plus the sinusoidal positions (the
# paper's §3.4–3.5). Each of the $N$ layers has two sub-layers, each wrapped as
# $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$: multi-head self-attention where every source
# token sees every other (no mask, for one unpadded sentence), then the position-wise FFN
# $\max(0, xW_1 + b_1)W_2 + b_2$. One layer is `T.seq2seq_encoder_layer`; written out, it is
#
# ```python
# a, w_self = T.multi_head_attention(x, lw.self_attn, h, return_weights=True)  # no mask: bidirectional
# x = T.layer_norm(x + a, lw.ln1_g, lw.ln1_b)                                  # post-norm
# x = T.layer_norm(x + T.ffn(x, lw.W_1, lw.W_2, lw.b_1, lw.b_2), lw.ln2_g, lw.ln2_b)
# ```
#
# We follow one held-out sentence of nine words through the model.

# %%
ex_src = np.array([run["example"]["src"]])  # (b, n_enc) = (1, 9): a held-out sentence
ex_ref = [t for t in run["example"]["reference"] if t != T.IGNORE_INDEX]  # its translation, then EOS
src = [vocab.tokens[t] for t in ex_src[0]]
tgt_ids = np.array([[vocab.bos] + ex_ref[:-1]])  # decoder input: BOS + the translation, (1, n_dec) = (1, 10)
tgt = [vocab.tokens[t] for t in tgt_ids[0]]
n_enc, n_dec = ex_src.shape[1], tgt_ids.shape[1]
print("source  ", " ".join(src), "   ids", ex_src.tolist())
print("decoder input", " ".join(tgt))


def embed_with_positions(ids):  # (b, n) -> (b, n, d)
    return T.embed(ids, W_E) * d_model ** 0.5 + T.sinusoidal_positions(ids.shape[1], d_model, dtype=W_E.dtype)


def encode(src_ids_, layers, mask=None):  # (b, n_enc) -> encoder output Z (b, n_enc, d), per-layer weights
    x = embed_with_positions(src_ids_)  # (b, n_enc, d)
    weights = []
    for lw in layers:
        x, w_ = T.seq2seq_encoder_layer(x, lw, h, mask=mask)  # (b, n_enc, d), (b, h, n_enc, n_enc)
        weights.append(w_)
    return x, weights


Z, enc_w = encode(ex_src, enc_layers)
print("encoder input (b, n_enc, d):", embed_with_positions(ex_src).shape)
print("encoder output Z (b, n_enc, d):", Z.shape, "  self-attention weights (b, h, n_enc, n_enc):", enc_w[0].shape)

# %% [markdown]
# This block is the one MiniLM uses (lesson 12), only with ReLU where BERT has GELU: MiniLM's
# six layers are `T.Seq2SeqEncoderLayer` records too (read from its safetensors), and
# `T.bert_encode` runs each through this same function,
# `T.seq2seq_encoder_layer(x, lw, h, mask=padding, activation=T.gelu, eps=1e-12)`.

# %% [markdown]
# ## 5. The decoder: masked self-attention, cross-attention, FFN
#
# Each decoder layer has **three** sub-layers, all post-norm:
#
# 1. **masked self-attention** over the target: position $i$ sees positions $j \le i$, so
#    predicting word $i + 1$ cannot peek at it (the causal mask);
# 2. **cross-attention**: queries from the decoder, $Q = YW_q$, keys and values from the
#    encoder output, $K = ZW_k$, $V = ZW_v$ — `multi_head_attention(y, w, h, context=Z)`.
#    There is no causal mask here: the whole source is known from the start;
# 3. the FFN.
#
# One layer is `T.seq2seq_decoder_layer(y, Z, lw, h)`; written out, it is
#
# ```python
# a = T.multi_head_attention(y, lw.self_attn, h, mask=T.causal_mask(n_dec))  # 1. masked self-attention
# y = T.layer_norm(y + a, lw.ln1_g, lw.ln1_b)
# c = T.multi_head_attention(y, lw.cross_attn, h, context=Z)                 # 2. K, V from Z
# y = T.layer_norm(y + c, lw.ln2_g, lw.ln2_b)
# y = T.layer_norm(y + T.ffn(y, lw.W_1, lw.W_2, lw.b_1, lw.b_2), lw.ln3_g, lw.ln3_b)  # 3. FFN
# ```
#
# The output projection is the embedding table read backwards (tied): logits $= Y W_E^\top$.

# %%
def decode(tgt_ids_, Z_, layers, cross_mask=None):  # (b, n_dec), (b, n_enc, d) -> logits (b, n_dec, v), records
    y = embed_with_positions(tgt_ids_)  # (b, n_dec, d)
    records = []
    for lw in layers:
        y_in = y  # the layer's input, kept to redo its cross-attention by hand below
        y, w_self, w_cross = T.seq2seq_decoder_layer(y, Z_, lw, h, cross_mask=cross_mask)
        records.append(dict(self=w_self, cross=w_cross, y_in=y_in))  # (b,h,n_dec,n_dec), (b,h,n_dec,n_enc)
    return T.lm_head(y, W_E), y, records  # (b, n_dec, v)


logits, Y, dec_rec = decode(tgt_ids, Z, dec_layers)
probs = T.softmax(logits)  # (b, n_dec, v)
print("decoder output (b, n_dec, d):", Y.shape, "  logits (b, n_dec, v):", logits.shape)
print("decoder self-attention (b, h, n_dec, n_dec):", dec_rec[0]["self"].shape)
print("cross-attention        (b, h, n_dec, n_enc):", dec_rec[0]["cross"].shape)
assert dec_rec[0]["cross"].shape == (1, h, n_dec, n_enc) and logits.shape == (1, n_dec, cfg.v)
assert np.allclose(dec_rec[0]["cross"].sum(-1), 1, atol=1e-5) and np.allclose(probs.sum(-1), 1, atol=1e-5)
pred = logits[0].argmax(-1)
print("predicted next words:", " ".join(vocab.tokens[t] for t in pred),
      f"  (each with p ≥ {probs[0].max(-1).min():.3f})")
assert pred.tolist() == ex_ref

# the model as trained: T.seq2seq_forward, the same maths written with its backward pass beside it
logits_train, _ = T.seq2seq_forward(params, ex_src, tgt_ids, cfg, np.array([n_enc]))
same = np.allclose(logits, logits_train, atol=1e-4)
print("these layers == T.seq2seq_forward, the function that was trained:", same)
assert same

# %% [markdown]
# Cross-attention by hand, to see where each matrix comes from: queries from the decoder
# state $Y$ after its first sub-layer (b, h, $n_\text{dec}$, $d_k$), keys and values from $Z$
# (b, h, $n_\text{enc}$, $d_k$); the scores are $n_\text{dec} \times n_\text{enc}$.

# %%
rec, lw_last = dec_rec[-1], dec_layers[-1]
a = T.multi_head_attention(rec["y_in"], lw_last.self_attn, h, mask=T.causal_mask(n_dec))  # sub-layer 1
y_mid = T.layer_norm(rec["y_in"] + a, lw_last.ln1_g, lw_last.ln1_b)  # (b, n_dec, d): the queries come from here
q, k, v = T.qkv_heads(y_mid, lw_last.cross_attn, h, h, context=Z)  # (1, h, n_dec, d_k), (1, h, n_enc, d_k) × 2
o, p_hand = T.scaled_dot_product_attention(q, k, v, return_weights=True)  # (1, h, n_dec, d_k), (1, h, n_dec, n_enc)
print("q", q.shape, " k", k.shape, " v", v.shape, " scores/weights", p_hand.shape, " out", o.shape)
hand_ok = np.allclose(p_hand, rec["cross"], atol=1e-6)
print("by hand == multi_head_attention(..., context=Z):", hand_ok)
assert hand_ok and q.shape[2] == n_dec and k.shape[2] == n_enc

# %% [markdown]
# ## 6. What cross-attention learned: the alignment
#
# The same sentence through the same layers with the weights **at initialisation**
# (`T.init_seq2seq(cfg, seed=0)`, where training started) and **after training**, beside the
# known alignment `T.translation_alignment(n)`: a 1 where decoder position $i$ should look,
# source word $n - 1 - i$. The last row is the position that writes EOS; it has no word to
# translate. We show the last decoder layer, its $h$ heads averaged.

# %%
init_enc, init_dec = as_layers(T.init_seq2seq(cfg, seed=0))
Z_init, _ = encode(ex_src, init_enc)
_, _, rec_init = decode(tgt_ids, Z_init, init_dec)
A = T.translation_alignment(n_enc)  # (n_dec, n_enc) = (10, 9)
cross_init = rec_init[-1]["cross"][0].mean(0)  # (n_dec, n_enc), heads averaged
cross_trained = dec_rec[-1]["cross"][0].mean(0)


def on_alignment(w):  # mean weight on the aligned source word, over the n_enc positions that write a word
    return float((w[:n_enc] * A[:n_enc]).sum(-1).mean())


for l in range(cfg.L_dec):
    per_head = [on_alignment(dec_rec[l]["cross"][0, j]) for j in range(h)]
    print(f"decoder layer {l}: weight on the aligned word per head", np.round(per_head, 2).tolist(),
          f"  (at initialisation: {on_alignment(rec_init[l]['cross'][0].mean(0)):.2f})")
print(f"last layer, heads averaged: {on_alignment(cross_init):.2f} at initialisation (uniform: 1/{n_enc} = "
      f"{1 / n_enc:.2f}) -> {on_alignment(cross_trained):.2f} trained")
blur = cross_init[:n_enc].max() * n_enc  # the largest initial weight, in units of the uniform 1/n_enc
print(f"largest weight at initialisation: {blur:.2f} × uniform")
assert on_alignment(cross_trained) > 0.5 and 0.5 / n_enc < on_alignment(cross_init) < 2 / n_enc
assert blur < 2, "near-uniform at initialisation: no weight twice the uniform one"
assert np.all(cross_trained[:n_enc].argmax(-1) == A[:n_enc].argmax(-1))  # every row peaks where it should

# %%
fig, axes = P.new_figure(1, 3, figsize=(20, 7.2), layout="constrained")
tgt_written = [vocab.tokens[t] for t in ex_ref]  # row i writes this word
rows = [f"{i}: writes {w}" for i, w in enumerate(tgt_written)]
cols = [f"{w}\n({vocab.tokens[vocab.translate(t)]})" for w, t in zip(src, ex_src[0])]  # the word and its translation
for ax, w, title in ((axes[0], cross_init, "at initialisation (seed 0)"),
                     (axes[1], cross_trained, f"after {STEPS} training steps"),
                     (axes[2], A.astype(float), "the known alignment: word n − 1 − i")):
    P.attention_heatmap(w, rows if ax is axes[0] else [""] * n_dec, cols, ax=ax, vmax=1.0, colorbar=False,
                        annotate=False, title=title, xlabel="source word (key), its translation below",
                        ylabel="decoder position (query)" if ax is axes[0] else None)
    ax.tick_params(axis="x", labelrotation=0)
fig.colorbar(axes[0].images[0], ax=axes, fraction=0.02, pad=0.01).set_label("weight", fontsize=P.LABEL_SIZE)
fig.suptitle(f"Cross-attention of a held-out sentence, last decoder layer (heads averaged): "
             f"\"{' '.join(src)}\"", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("15_cross_attention_trained.png"))

# %%
layer_shown, head_shown = cfg.L_dec - 1, 0
fig, axes = P.models.three_attentions(
    enc_w[layer_shown][0, head_shown], dec_rec[layer_shown]["self"][0, head_shown],
    dec_rec[layer_shown]["cross"][0, head_shown], src, tgt,
    suptitle=f"The three attentions of the trained encoder–decoder (layer {layer_shown}, head {head_shown})")
P.save(fig, P.figure_path("15_three_patterns.png"))

# %% [markdown]
# The encoder's self-attention (left) is free to look anywhere; the decoder's (middle) never looks
# right of its diagonal; cross-attention (right) is the only one of the three whose pattern the
# task fixes, and it has found it.
#
# **The control: the same run without cross-attention.** Cross-attention is the decoder's only
# road to the source. `T.train_translation(cross_attention=False)` starts the output projection
# $W_o$ of every decoder layer's cross-attention at 0 and keeps it there (its gradient is set to
# 0): the decoder still reads its own prefix, but never the sentence it translates. Same seed,
# same sentences:

# %%
blind_steps = 150 if FAST else STEPS  # the loss has settled by step 150 (checked below)
blind = T.train_translation(steps=blind_steps, seed=0, cross_attention=False)
blind_loss = np.mean(blind["history"]["loss"][-20:])
blind_l = np.array(blind["history"]["loss"])
drift = abs(blind_l[100:120].mean() / blind_l[130:150].mean() - 1)  # steps 101–120 against 131–150
to_end = abs(blind_l[130:150].mean() / blind_loss - 1)  # 131–150 against the last 20 (0 in fast mode)
print(f"without cross-attention the loss moves {drift:.1%} from steps 101–120 to 131–150, "
      f"then {to_end:.1%} to the last 20 of {blind_steps}")
assert drift < 0.01 and to_end < 0.02, "settled by step 150"
print(f"held-out exact match: with cross-attention {run['heldout_exact_match']:.1%}, without "
      f"{blind['heldout_exact_match']:.1%};  loss of the last 20 steps: with {np.mean(hist['loss'][-20:]):.4f}, "
      f"without {blind_loss:.3f} (ln 24 = {np.log(24):.3f}: a uniform guess among the 24 target words)")
assert blind["heldout_exact_match"] < 0.01 and run["heldout_exact_match"] >= 0.95
assert 2.5 < blind_loss < np.log(24) and 100 * np.mean(hist["loss"][-20:]) < 2.5
assert all(np.all(blind["params"][f"dec.{l}.cross.W_o"] == 0) for l in range(cfg.L_dec))  # cut throughout

# %%
fig, _ = P.training.runs_compared(
    {"with cross-attention": hist["loss"], "without cross-attention: the control": blind["history"]["loss"]},
    levels={f"ln v = {np.log(cfg.v):.2f}: a uniform guess over the vocabulary": float(np.log(cfg.v)),
            f"ln 24 = {np.log(24):.2f}: a uniform guess among the target words": float(np.log(24))},
    suptitle=f"Cutting cross-attention: held-out exact match {run['heldout_exact_match']:.1%} with it, "
             f"{blind['heldout_exact_match']:.1%} without")
P.save(fig, P.figure_path("15_without_cross_attention.png"))

# %% [markdown]
# Without cross-attention the loss stops just under $\ln 24$: the decoder learns which words are
# target words and roughly when a sentence ends, and nothing about which words this one holds.
# Not one held-out sentence comes out right. (Exercise 4 asks exactly where it stops.)

# %% [markdown]
# ## 7. Padding: sentences of different lengths in one batch
#
# Training batches hold sentences of 4 to 12 words, padded with PAD to the longest. A padding
# mask (`T.padding_mask(lengths)`, shape (b, 1, 1, $n_\text{enc}$)) hides the PAD keys from the
# encoder's self-attention and from cross-attention, so a short sentence translates the same
# alone and in a batch.

# %%
short = T.translation_batch(np.random.default_rng(3), 1, n_range=(5, 5), split="heldout")
batch_src = np.zeros((2, n_enc), dtype=np.int64)  # PAD = 0
batch_src[0], batch_src[1, :5] = ex_src[0], short.src_ids[0]
lengths = np.array([n_enc, 5])
pad = T.padding_mask(lengths)  # (2, 1, 1, n_enc): True = a real word
Z_b, _ = encode(batch_src, enc_layers, mask=pad)
Z_alone, _ = encode(short.src_ids, enc_layers)
print("padding mask of the short sentence:", pad[1, 0, 0].astype(int).tolist())
print("encoder output of its 5 words, batched vs alone: max |difference| =",
      f"{np.abs(Z_b[1, :5] - Z_alone[0]).max():.1e}")
assert np.allclose(Z_b[1, :5], Z_alone[0], atol=1e-5)
ids_b, rows_b = T.translate_greedy(params, cfg, batch_src, lengths, n_enc + 2)
for r in range(2):
    print(f"batched greedy translation {r}: {T.detokenize(batch_src[r])!r} -> {T.detokenize(ids_b[r])!r}")
    assert T.detokenize(ids_b[r]) == T.detokenize(T.reference_translation(batch_src[r]))
assert np.all(rows_b[:, 1, :, :, 5:] == 0)  # no weight on PAD, in any layer, head or step

# %% [markdown]
# ## 8. Checking the wiring by its effects
#
# * Change the **last target token** of the decoder input: the decoder outputs at the earlier
#   positions must not move (masked self-attention), only the last one may.
# * Change the **last source word**: every encoder output moves (bidirectional), and so
#   does every decoder position (cross-attention reads the whole source). The trained model
#   also tells us where the change lands: the **first** word of the translation becomes the
#   new word's translation, because the last source word is translated first.

# %%
tgt_changed = tgt_ids.copy()
tgt_changed[0, -1] = vocab.id_of("moon")
_, Y2, _ = decode(tgt_changed, Z, dec_layers)
move_tgt = np.abs(Y2 - Y).max(-1)[0]  # (n_dec,)
print("change the last target word -> change of each decoder position:", np.round(move_tgt.astype(float), 3).tolist())

src_changed = ex_src.copy()
src_changed[0, -1] = vocab.id_of("ka") if ex_src[0, -1] != vocab.id_of("ka") else vocab.id_of("lu")
Z3, _ = encode(src_changed, enc_layers)
logits3, Y3, _ = decode(tgt_ids, Z3, dec_layers)
move_enc = np.abs(Z3 - Z).max(-1)[0]  # (n_enc,)
move_dec = np.abs(Y3 - Y).max(-1)[0]  # (n_dec,)
print("change the last source word -> change of each encoder position:", np.round(move_enc.astype(float), 3).tolist())
print("                            -> change of each decoder position:", np.round(move_dec.astype(float), 3).tolist())
first = vocab.tokens[int(logits3[0, 0].argmax())]
print(f"last source word {vocab.tokens[ex_src[0, -1]]} -> {vocab.tokens[src_changed[0, -1]]}: "
      f"first target word {tgt_written[0]} -> {first}")
assert np.allclose(move_tgt[:-1], 0, atol=1e-6) and move_tgt[-1] > 1e-3
assert np.all(move_enc > 1e-3) and np.all(move_dec > 1e-3)
assert first == vocab.tokens[vocab.translate(int(src_changed[0, -1]))]

# %% [markdown]
# ## 9. Greedy decoding, with a cache
#
# At inference the target is not known: the decoder starts from BOS and appends its own argmax
# word until it writes EOS. Re-running the decoder on the whole prefix at every step recomputes
# everything. Two things need not be:
#
# * the decoder's **self-attention** keys and values of earlier positions — a KV cache keeps them
#   (lesson 06);
# * the **cross-attention** keys and values $K = ZW_k$, $V = ZW_v$ — they depend on the source only,
#   which does not change while the translation grows: computed **once** per layer, before the
#   first step, instead of once per layer per step.
#
# `T.translate_greedy` does both; `T.translate_greedy_uncached` re-runs the decoder on the whole
# prefix. Both count the cross-attention K/V projections they compute. (At this toy size both take
# a few milliseconds, most of it Python's per-call overhead; what the cache saves is work that
# grows with the layers, the source length and the number of steps.)

# %%
c_fast, c_slow = {}, {}
ids_fast, rows_fast = T.translate_greedy(params, cfg, ex_src, np.array([n_enc]), n_enc + 2, counts=c_fast)
ids_slow, rows_slow = T.translate_greedy_uncached(params, cfg, ex_src, np.array([n_enc]), n_enc + 2, counts=c_slow)
n_steps = ids_fast.shape[1]
print("greedy translation:", T.detokenize(ids_fast[0]), f"  ({n_steps} steps, EOS included)")
print(f"cross-attention K/V projections: cached {c_fast['cross_kv']} (= L_dec), "
      f"uncached {c_slow['cross_kv']} (= L_dec × steps = {cfg.L_dec} × {n_steps})")
print(f"same tokens: {np.array_equal(ids_fast, ids_slow)}; same cross-attention rows: "
      f"{np.allclose(rows_fast, rows_slow, atol=1e-6)}")
assert np.array_equal(ids_fast, ids_slow) and ids_fast[0].tolist() == ex_ref
assert c_fast["cross_kv"] == cfg.L_dec and c_slow["cross_kv"] == cfg.L_dec * n_steps

# %% [markdown]
# ## 10. The data flow, with its shapes

# %%
v = cfg.v
enc_boxes = [("source ids", f"(1, {n_enc})"),
             ("embed·√d + positions", f"(1, {n_enc}, {d_model})"),
             ("self-attention (no mask)\n+ Add & LayerNorm", f"(1, {n_enc}, {d_model})"),
             ("FFN + Add & LayerNorm", f"(1, {n_enc}, {d_model})"),
             ("encoder output Z", f"(1, {n_enc}, {d_model})")]
dec_boxes = [("target ids: BOS + translation", f"(1, {n_dec})"),
             ("embed·√d + positions", f"(1, {n_dec}, {d_model})"),
             ("masked self-attention\n+ Add & LayerNorm", f"(1, {n_dec}, {d_model})"),
             ("cross-attention (Q from here)\n+ Add & LayerNorm", f"(1, {n_dec}, {d_model})"),
             ("FFN + Add & LayerNorm", f"(1, {n_dec}, {d_model})"),
             (f"tied output Y W_Eᵀ + softmax\nover the v = {v} words", f"(1, {n_dec}, {v})")]
fig, ax = P.models.encoder_decoder_flow(enc_boxes, dec_boxes, N=cfg.L_enc, title="Shapes through the trained "
                                        f"encoder–decoder (b = 1, d_model = {d_model}; paper: 512)")
P.save(fig, P.figure_path("15_data_flow.png"))

# %% [markdown]
# **Takeaways.** The original Transformer uses one attention function three ways, and only
# the mask and the source of $K, V$ differ: encoder self-attention (no mask but padding), decoder
# self-attention (causal mask) and cross-attention (queries from the decoder, keys and
# values from the encoder output, an $n_\text{dec} \times n_\text{enc}$ weight matrix). Trained on a
# task with a known alignment, cross-attention finds it: from a near-uniform blur to one peak
# per row, on the anti-diagonal. At inference the encoder runs once and so do its keys and
# values. Decoder-only LLMs such as SmolLM2 (lessons 06, 11) keep just the middle attention;
# encoders such as MiniLM (lesson 12) keep just the first.

# %% [markdown]
# **Write it yourself.** `workbook/15_cross_attention.py` holds `seq2seq_encoder_layer` (self-attention and
# FFN, each post-norm) and `seq2seq_decoder_layer` (masked self-attention, cross-attention, FFN, with both
# masks and both weights returned) as stubs; fill them in, then run `python -m transformer check 15`: it runs
# the package's own test cases on your code and says what is still wrong. With `--on-model`, your encoder
# layer then runs all six layers of lesson 12's all-MiniLM-L6-v2 (a BERT layer is this layer, with GELU).
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 15` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/15_cross_attention.py`.
#
# 1. **Shapes.** $n_\text{dec} = 3$, $n_\text{enc} = 7$, $h = 2$, $b = 1$: the cross-attention weights'
#    shape, and their sum. Check with `T.seq2seq_decoder_layer`.
# 2. **Parameters.** One decoder layer of the base Transformer ($d = 512$, $d_{ff} = 2048$, with
#    biases): how many parameters? Check with `T.parameter_breakdown("transformer-base")`.
# 3. **Work saved by computing the encoder's K and V once.** A model with $L_\text{dec} = 3$ decoder
#    layers decodes 8 steps greedily. How many times does some layer project the encoder output
#    to cross-attention keys and values without the cache, and with it? Check with the `counts`
#    of `T.translate_greedy_uncached` and `T.translate_greedy`.
# 4. **Change the run: cut cross-attention.** Without it the decoder knows the target language but
#    not the sentence. Sentence lengths are uniform in 4 … 12, words uniform among 24 (with
#    repeats). Predict the lowest loss per target token such a decoder can reach, EOS included,
#    averaged as the loss averages (over all the tokens of a batch). Check it with a short control
#    run: `T.train_translation(steps=150, cross_attention=False)`, the mean loss of its last 50 steps.
