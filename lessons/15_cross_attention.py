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
# are $n_\text{dec} \times n_\text{enc}$ — not square. We check each pattern by its effect:
# changing a later target token leaves earlier decoder positions untouched, changing any
# source token moves every decoder position.
#
# **The source says:** the original Transformer stacks $N = 6$ encoder and $N = 6$ decoder layers
# of width $d_\text{model} = 512$, each sub-layer wrapped post-norm as
# $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$; the decoder masks its self-attention and adds a
# third sub-layer that attends over the encoder output; decoders attend causally, encoders do not.
#
# **New in the package:** the two layers are `T.seq2seq_encoder_layer` and
# `T.seq2seq_decoder_layer` (weights in `T.Seq2SeqEncoderLayer`, `T.Seq2SeqDecoderLayer`), tested
# against `torch.nn.TransformerEncoderLayer` and `torch.nn.TransformerDecoderLayer`.
#
# The weights here are **small, seeded random numbers**, not a trained translation model:
# the patterns show the wiring (who may attend to whom), not learned meaning. The sizes are
# shrunk from the paper's so the matrices stay printable.
#
# $$\text{CrossAttention}(Y, Z) = \mathrm{softmax}\!\left(\frac{(YW_q)(ZW_k)^\top}{\sqrt{d_k}}\right) ZW_v
#   \qquad Y: (n_\text{dec}, d),\ Z = \text{encoder output}: (n_\text{enc}, d)$$

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P

FAST = P.fast()  # TRANSFORMER_FAST=1: nothing to shrink, the model is tiny
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The sizes and the weights
#
# The paper uses $N = 6$ layers on each side and $d_\text{model} = 512$, with $h = 8$ heads of $d_k = 64$ and an FFN of width
# $d_{ff} = 2048 = 4\,d_\text{model}$ (from the paper itself). We shrink all of it to a
# printable size: $N = 2$, $d_\text{model} = 32$, $h = 4$ heads of $d_k = 8$ (still
# $d_k = d_\text{model}/h$) and $d_{ff} = 64 = 2\,d_\text{model}$, half the paper's ratio,
# to keep the FFN matrices small. The source sentence is English; the decoder input is the
# French target "le chat est assis sur le tapis" shifted right by a start token `<s>`
# (during training the decoder reads the answer so far and predicts the next word). We
# feed only its first five tokens, `<s> le chat est assis`, a prefix; the rest of the target
# ("sur", "tapis", "</s>") is in the vocabulary but not in the input, and §4 borrows
# "tapis" as a replacement word.

# %%
N, d_model, h, d_ff = 2, 32, 4, 64  # paper: N = 6, d_model = 512, h = 8, d_ff = 2048
d_k = d_model // h
src = "the cat sat on the mat".split()
tgt = "<s> le chat est assis".split()  # decoder input: a prefix of the target shifted right
src_vocab = sorted(set(src))
tgt_vocab = sorted(set(tgt) | {"sur", "tapis", "</s>"})
src_ids = np.array([[src_vocab.index(t) for t in src]])  # (b, n_enc) = (1, 6)
tgt_ids = np.array([[tgt_vocab.index(t) for t in tgt]])  # (b, n_dec) = (1, 5)
n_enc, n_dec = src_ids.shape[1], tgt_ids.shape[1]
print(f"N = {N}, d_model = {d_model}, h = {h}, d_k = {d_k}, d_ff = {d_ff}")
print(f"source {src} -> ids {src_ids.tolist()}   target input {tgt} -> ids {tgt_ids.tolist()}")


def random_attention():  # -> AttentionWeights with W_q, W_k, W_v (d, h·d_k), W_o (h·d_k, d)
    """Projections drawn N(0, 1/d_model): unit-variance inputs give unit-variance outputs."""
    return T.AttentionWeights(*(rng.normal(size=(d_model, d_model)) / np.sqrt(d_model) for _ in range(4)))


def random_ffn():  # -> (W_1 (d, d_ff), W_2 (d_ff, d))
    return rng.normal(size=(d_model, d_ff)) / np.sqrt(d_model), rng.normal(size=(d_ff, d_model)) / np.sqrt(d_ff)


ones = np.ones(d_model)  # LayerNorm γ = 1 and no β, as at initialisation


def random_encoder_layer():
    self_attn = random_attention()
    W_1, W_2 = random_ffn()
    return T.Seq2SeqEncoderLayer(self_attn=self_attn, W_1=W_1, W_2=W_2, ln1_g=ones, ln2_g=ones)


def random_decoder_layer():
    self_attn, cross_attn = random_attention(), random_attention()
    W_1, W_2 = random_ffn()
    return T.Seq2SeqDecoderLayer(self_attn=self_attn, cross_attn=cross_attn, W_1=W_1, W_2=W_2,
                                 ln1_g=ones, ln2_g=ones, ln3_g=ones)


enc_params = [random_encoder_layer() for _ in range(N)]
dec_params = [random_decoder_layer() for _ in range(N)]
W_src = rng.normal(size=(len(src_vocab), d_model)) / np.sqrt(d_model)  # (v_src, d)
W_tgt = rng.normal(size=(len(tgt_vocab), d_model)) / np.sqrt(d_model)  # (v_tgt, d)
W_out = rng.normal(size=(d_model, len(tgt_vocab))) / np.sqrt(d_model)  # (d, v_tgt) output projection

# %% [markdown]
# ## 2. The encoder: bidirectional self-attention, post-norm
#
# Input: token embeddings scaled by $\sqrt{d_\text{model}}$ plus the sinusoidal positions (the
# paper's §3.4–3.5). Each of the $N$ layers has two sub-layers, each wrapped as
# $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$: multi-head self-attention where every source
# token sees every other (no mask), then the position-wise FFN $\max(0, xW_1)W_2$. One layer
# is `T.seq2seq_encoder_layer`; written out, it is
#
# ```python
# a, w_self = T.multi_head_attention(x, lw.self_attn, h, return_weights=True)  # no mask: bidirectional
# x = T.layer_norm(x + a, lw.ln1_g)                                            # post-norm
# x = T.layer_norm(x + T.ffn(x, lw.W_1, lw.W_2), lw.ln2_g)                     # LayerNorm(x + FFN(x))
# ```

# %%
def embed_with_positions(ids, W_E):  # (b, n) -> (b, n, d)
    return T.embed(ids, W_E) * np.sqrt(d_model) + T.sinusoidal_positions(ids.shape[1], d_model, dtype=np.float64)


def encode(src_ids_):  # (b, n_enc) -> encoder output Z (b, n_enc, d), per-layer weights
    x = embed_with_positions(src_ids_, W_src)  # (b, n_enc, d)
    weights = []
    for lw in enc_params:
        x, w_ = T.seq2seq_encoder_layer(x, lw, h)  # (b, n_enc, d), (b, h, n_enc, n_enc)
        weights.append(w_)
    return x, weights


Z, enc_w = encode(src_ids)
print("encoder input (b, n_enc, d):", embed_with_positions(src_ids, W_src).shape)
print("encoder output Z (b, n_enc, d):", Z.shape, "  self-attention weights (b, h, n_enc, n_enc):", enc_w[0].shape)

# %% [markdown]
# This block is the one MiniLM uses (lesson 12), only with ReLU where BERT has GELU. With
# GELU and zero biases, the package's `T.encoder_layer` (MiniLM's layer) on the same weights must agree:

# %%
p0 = enc_params[0]
zeros = np.zeros(d_model)
as_bert = T.BertLayer(attn=p0.self_attn, ln1_g=p0.ln1_g, ln1_b=zeros, W_1=p0.W_1, b_1=np.zeros(d_ff),
                      W_2=p0.W_2, b_2=zeros, ln2_g=p0.ln2_g, ln2_b=zeros)
x0 = embed_with_positions(src_ids, W_src)
ours, _ = T.seq2seq_encoder_layer(x0, p0, h, activation=T.gelu)
theirs, _ = T.encoder_layer(x0, as_bert, T.BertConfig(d=d_model, h=h, d_ff=d_ff, eps=1e-5), mask=None)
bert_ok = np.allclose(ours, theirs, atol=1e-12)
print("T.seq2seq_encoder_layer (GELU) == T.encoder_layer (MiniLM's):", bert_ok)
assert bert_ok

# %% [markdown]
# ## 3. The decoder: masked self-attention, cross-attention, FFN
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
# y = T.layer_norm(y + a, lw.ln1_g)
# c = T.multi_head_attention(y, lw.cross_attn, h, context=Z)                 # 2. K, V from Z
# y = T.layer_norm(y + c, lw.ln2_g)
# y = T.layer_norm(y + T.ffn(y, lw.W_1, lw.W_2), lw.ln3_g)                   # 3. FFN
# ```

# %%
def decode(tgt_ids_, Z_):  # (b, n_dec), (b, n_enc, d) -> logits (b, n_dec, v_tgt), per-layer records
    y = embed_with_positions(tgt_ids_, W_tgt)  # (b, n_dec, d)
    records = []
    for lw in dec_params:
        y_in = y  # the layer's input, kept to redo its cross-attention by hand below
        y, w_self, w_cross = T.seq2seq_decoder_layer(y, Z_, lw, h)  # (b, n_dec, d), (b,h,n_dec,n_dec), (b,h,n_dec,n_enc)
        records.append(dict(self=w_self, cross=w_cross, y_in=y_in))
    return T.lm_head(y, W_out=W_out), y, records  # (b, n_dec, v_tgt)


logits, Y, dec_rec = decode(tgt_ids, Z)
probs = T.softmax(logits)  # (b, n_dec, v_tgt)
print("decoder output (b, n_dec, d):", Y.shape, "  logits (b, n_dec, v_tgt):", logits.shape)
print("decoder self-attention (b, h, n_dec, n_dec):", dec_rec[0]["self"].shape)
print("cross-attention        (b, h, n_dec, n_enc):", dec_rec[0]["cross"].shape)
assert dec_rec[0]["cross"].shape == (1, h, n_dec, n_enc) and logits.shape == (1, n_dec, len(tgt_vocab))
assert np.allclose(dec_rec[0]["cross"].sum(-1), 1) and np.allclose(probs.sum(-1), 1)

# %% [markdown]
# Cross-attention by hand, to see where each matrix comes from: queries from the decoder
# state $Y$ after its first sub-layer (b, h, $n_\text{dec}$, $d_k$), keys and values from $Z$
# (b, h, $n_\text{enc}$, $d_k$); the scores are $n_\text{dec} \times n_\text{enc}$.

# %%
rec, lw_last = dec_rec[-1], dec_params[-1]
a = T.multi_head_attention(rec["y_in"], lw_last.self_attn, h, mask=T.causal_mask(n_dec))  # sub-layer 1
y_mid = T.layer_norm(rec["y_in"] + a, lw_last.ln1_g)  # (b, n_dec, d): the cross-attention's queries come from here
q, k, v = T.qkv_heads(y_mid, lw_last.cross_attn, h, h, context=Z)  # (1, h, n_dec, d_k), (1, h, n_enc, d_k) × 2
o, p_hand = T.scaled_dot_product_attention(q, k, v, return_weights=True)  # (1, h, n_dec, d_k), (1, h, n_dec, n_enc)
print("q", q.shape, " k", k.shape, " v", v.shape, " scores/weights", p_hand.shape, " out", o.shape)
hand_ok = np.allclose(p_hand, rec["cross"])
print("by hand == multi_head_attention(..., context=Z):", hand_ok)
assert hand_ok and q.shape[2] == n_dec and k.shape[2] == n_enc

# %% [markdown]
# ## 4. Checking the wiring by its effects
#
# * Change the **last target token**: the decoder outputs at the earlier positions must not
#   move (masked self-attention), only the last one may.
# * Change the **last source token**: every encoder output moves (bidirectional), and so
#   does every decoder position (cross-attention reads the whole source).

# %%
tgt_changed = tgt_ids.copy()
tgt_changed[0, -1] = tgt_vocab.index("tapis")
_, Y2, _ = decode(tgt_changed, Z)
move_tgt = np.abs(Y2 - Y).max(-1)[0]  # (n_dec,)
print("change the last target word -> change of each decoder position:", np.round(move_tgt, 3).tolist())

src_changed = src_ids.copy()
src_changed[0, -1] = src_vocab.index("cat")
Z3, _ = encode(src_changed)
_, Y3, _ = decode(tgt_ids, Z3)
move_enc = np.abs(Z3 - Z).max(-1)[0]  # (n_enc,)
move_dec = np.abs(Y3 - Y).max(-1)[0]  # (n_dec,)
print("change the last source word -> change of each encoder position:", np.round(move_enc, 3).tolist())
print("                            -> change of each decoder position:", np.round(move_dec, 3).tolist())
assert np.allclose(move_tgt[:-1], 0, atol=1e-12) and move_tgt[-1] > 1e-3
assert np.all(move_enc > 1e-3) and np.all(move_dec > 1e-3)

# %%
layer_shown, head_shown = 0, 0
fig, axes = P.models.three_attentions(
    enc_w[layer_shown][0, head_shown], dec_rec[layer_shown]["self"][0, head_shown],
    dec_rec[layer_shown]["cross"][0, head_shown], src, tgt,
    suptitle=f"The three attentions of an encoder–decoder (layer {layer_shown}, head {head_shown}; "
             "random seeded weights: the shapes and masks matter, not the values)")
P.save(fig, P.figure_path("15_three_patterns.png"))

# %% [markdown]
# ## 5. The data flow, with its shapes

# %%
v_tgt = len(tgt_vocab)
enc_boxes = [("source ids", f"(1, {n_enc})"),
             ("embed·√d + positions", f"(1, {n_enc}, {d_model})"),
             ("self-attention (no mask)\n+ Add & LayerNorm", f"(1, {n_enc}, {d_model})"),
             ("FFN + Add & LayerNorm", f"(1, {n_enc}, {d_model})"),
             ("encoder output Z", f"(1, {n_enc}, {d_model})")]
dec_boxes = [("target ids (shifted right; a prefix)", f"(1, {n_dec})"),
             ("embed·√d + positions", f"(1, {n_dec}, {d_model})"),
             ("masked self-attention\n+ Add & LayerNorm", f"(1, {n_dec}, {d_model})"),
             ("cross-attention (Q from here)\n+ Add & LayerNorm", f"(1, {n_dec}, {d_model})"),
             ("FFN + Add & LayerNorm", f"(1, {n_dec}, {d_model})"),
             (f"linear W_out + softmax\nover the v_tgt = {v_tgt} target words", f"(1, {n_dec}, {v_tgt})")]
fig, ax = P.models.encoder_decoder_flow(enc_boxes, dec_boxes, N=N, title="Shapes through the encoder–decoder "
                                        f"(b = 1, d_model = {d_model}; paper: 512)")
P.save(fig, P.figure_path("15_data_flow.png"))

# %% [markdown]
# **Takeaways.** The original Transformer uses one attention function three ways, and only
# the mask and the source of $K, V$ differ: encoder self-attention (no mask), decoder
# self-attention (causal mask) and cross-attention (queries from the decoder, keys and
# values from the encoder output, an $n_\text{dec} \times n_\text{enc}$ weight matrix).
# Decoder-only LLMs such as SmolLM2 (lessons 06, 11) keep just the middle one; encoders such
# as MiniLM (lesson 12) keep just the first.

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
