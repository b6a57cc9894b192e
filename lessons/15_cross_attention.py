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
# **Follows** note 003 (§2–3: the encoder–decoder, $N = 6$ layers of width
# $d_\text{model} = 512$, post-norm $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$, the decoder's
# masked self-attention and its third sub-layer over the encoder output; §5, multi-head
# attention) and note 000 (§2.4, causal vs non-causal attention).
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
# The paper uses $N = 6$ layers on each side and $d_\text{model} = 512$ (the two sizes note
# 003 quotes), with $h = 8$ heads of $d_k = 64$ and an FFN of width
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
N, d_model, h, d_ff = 2, 32, 4, 64  # paper: N = 6, d_model = 512 (both in note 003), h = 8, d_ff = 2048
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


def norm_params():  # LayerNorm γ = 1, β = 0, as at initialisation
    return np.ones(d_model), np.zeros(d_model)


enc_params = [dict(self=random_attention(), ffn=random_ffn(), ln1=norm_params(), ln2=norm_params()) for _ in range(N)]
dec_params = [dict(self=random_attention(), cross=random_attention(), ffn=random_ffn(), ln1=norm_params(),
                   ln2=norm_params(), ln3=norm_params()) for _ in range(N)]
W_src = rng.normal(size=(len(src_vocab), d_model)) / np.sqrt(d_model)  # (v_src, d)
W_tgt = rng.normal(size=(len(tgt_vocab), d_model)) / np.sqrt(d_model)  # (v_tgt, d)
W_out = rng.normal(size=(d_model, len(tgt_vocab))) / np.sqrt(d_model)  # (d, v_tgt) output projection

# %% [markdown]
# ## 2. The encoder: bidirectional self-attention, post-norm
#
# Input: token embeddings scaled by $\sqrt{d_\text{model}}$ plus the sinusoidal positions (the
# paper's §3.4–3.5). Each of the $N$ layers has two sub-layers, each wrapped as
# $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$: multi-head self-attention where every source
# token sees every other (no mask), then the position-wise FFN $\max(0, xW_1)W_2$.

# %%
def embed_with_positions(ids, W_E):  # (b, n) -> (b, n, d)
    return T.embed(ids, W_E) * np.sqrt(d_model) + T.sinusoidal_positions(ids.shape[1], d_model, dtype=np.float64)


def enc_block(x, p, activation=T.relu):  # (b, n_enc, d) -> (b, n_enc, d), (b, h, n_enc, n_enc)
    a, w_self = T.multi_head_attention(x, p["self"], h, return_weights=True)  # no mask: bidirectional
    x = T.layer_norm(x + a, *p["ln1"])  # post-norm
    x = T.residual(x, lambda t: T.ffn(t, *p["ffn"], activation=activation),
                   lambda t: T.layer_norm(t, *p["ln2"]), pre_norm=False)  # LayerNorm(x + FFN(x))
    return x, w_self


def encode(src_ids_):  # (b, n_enc) -> encoder output Z (b, n_enc, d), per-layer weights
    x = embed_with_positions(src_ids_, W_src)  # (b, n_enc, d)
    weights = []
    for p in enc_params:
        x, w_ = enc_block(x, p)
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
as_bert = T.BertLayer(attn=p0["self"], ln1_g=p0["ln1"][0], ln1_b=p0["ln1"][1], W_1=p0["ffn"][0], b_1=np.zeros(d_ff),
                    W_2=p0["ffn"][1], b_2=np.zeros(d_model), ln2_g=p0["ln2"][0], ln2_b=p0["ln2"][1])
x0 = embed_with_positions(src_ids, W_src)
ours, _ = enc_block(x0, p0, activation=T.gelu)
theirs, _ = T.encoder_layer(x0, as_bert, T.BertConfig(d=d_model, h=h, d_ff=d_ff, eps=1e-5), mask=None)
bert_ok = np.allclose(ours, theirs, atol=1e-12)
print("our post-norm block (GELU) == T.encoder_layer:", bert_ok)
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

# %%
def dec_block(y, Z_, p):  # (b, n_dec, d), (b, n_enc, d) -> (b, n_dec, d), weights, state before cross
    a, w_self = T.multi_head_attention(y, p["self"], h, mask=T.causal_mask(y.shape[1]), return_weights=True)
    y = T.layer_norm(y + a, *p["ln1"])  # (b, n_dec, d)
    y_mid = y  # the cross-attention's queries are made from this
    c, w_cross = T.multi_head_attention(y, p["cross"], h, context=Z_, return_weights=True)  # K, V from Z
    y = T.layer_norm(y + c, *p["ln2"])  # (b, n_dec, d)
    y = T.residual(y, lambda t: T.ffn(t, *p["ffn"]), lambda t: T.layer_norm(t, *p["ln3"]), pre_norm=False)
    return y, w_self, w_cross, y_mid


def decode(tgt_ids_, Z_):  # (b, n_dec), (b, n_enc, d) -> logits (b, n_dec, v_tgt), per-layer records
    y = embed_with_positions(tgt_ids_, W_tgt)  # (b, n_dec, d)
    records = []
    for p in dec_params:
        y, w_self, w_cross, y_mid = dec_block(y, Z_, p)
        records.append(dict(self=w_self, cross=w_cross, y_mid=y_mid))
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
# state $Y$ (b, h, $n_\text{dec}$, $d_k$), keys and values from $Z$ (b, h, $n_\text{enc}$, $d_k$);
# the scores are $n_\text{dec} \times n_\text{enc}$.

# %%
rec = dec_rec[-1]
w_cross_last = dec_params[-1]["cross"]
q, k, v = T.qkv_heads(rec["y_mid"], w_cross_last, h, h, context=Z)  # (1, h, n_dec, d_k), (1, h, n_enc, d_k) × 2
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
import matplotlib.pyplot as plt  # noqa: E402

layer_shown, head_shown = 0, 0
fig, axes = P.new_figure(1, 3, figsize=(21, 6.8), layout="constrained", width_ratios=[n_enc, n_dec, n_enc])
P.attention_heatmap(enc_w[layer_shown][0, head_shown], src, src, ax=axes[0], vmax=1.0, colorbar=False,
                    title=f"encoder self-attention\nbidirectional, {n_enc} × {n_enc}")
P.attention_heatmap(dec_rec[layer_shown]["self"][0, head_shown], tgt, tgt, ax=axes[1], vmax=1.0, colorbar=False,
                    title=f"decoder masked self-attention\ncausal, {n_dec} × {n_dec}", ylabel=None)
P.attention_heatmap(dec_rec[layer_shown]["cross"][0, head_shown], tgt, src, ax=axes[2], vmax=1.0, colorbar=False,
                    title=f"cross-attention: Q from decoder, K/V from encoder\n{n_dec} × {n_enc}  (n_dec × n_enc)",
                    xlabel="encoder position (key)", ylabel="decoder position (query)")
for t_ in list(axes[1].texts):  # the hidden (future) cells: grey, no number
    j, i = t_.get_position()
    if j > i:
        t_.remove()
        axes[1].add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=P.OFF_COLOR))
for a in axes:
    a.tick_params(labelsize=P.LABEL_SIZE)
    a.tick_params(axis="x", labelrotation=0)
    for t_ in a.texts:
        t_.set_fontsize(P.TICK_SIZE)
fig.colorbar(axes[0].images[0], ax=axes, fraction=0.02, pad=0.01).set_label("weight", fontsize=P.LABEL_SIZE)
fig.suptitle(f"The three attentions of an encoder–decoder (layer {layer_shown}, head {head_shown}; "
             "random seeded weights: the shapes and masks matter, not the values)", fontsize=P.TITLE_SIZE + 1)
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
fig, ax = P.new_figure(figsize=(17, 10))
box_w, box_h, gap = 7.4, 1.05, 0.55
col_x = {"enc": 0.0, "dec": 10.4}
pos = {}
for side, boxes in (("enc", enc_boxes), ("dec", dec_boxes)):
    for k, (label, shape) in enumerate(boxes):
        y0 = -(k * (box_h + gap))
        in_stack = 2 <= k <= (3 if side == "enc" else 4)
        colour = {"enc": P.LINE_COLORS[0], "dec": P.LINE_COLORS[1]}[side] if in_stack else "#999999"
        if side == "dec" and k == 3:
            colour = P.LINE_COLORS[2]  # cross-attention
        ax.add_patch(plt.Rectangle((col_x[side], y0), box_w, box_h, color=colour, alpha=0.18))
        ax.text(col_x[side] + 0.15, y0 + box_h / 2, label, va="center", fontsize=P.LABEL_SIZE)
        ax.text(col_x[side] + box_w - 0.15, y0 + box_h / 2, shape, va="center", ha="right",
                fontsize=P.LABEL_SIZE, fontfamily="monospace", fontweight="bold")
        pos[side, k] = y0
        if k:
            ax.annotate("", xy=(col_x[side] + box_w / 2, y0 + box_h), xytext=(col_x[side] + box_w / 2, y0 + box_h + gap),
                        arrowprops=dict(arrowstyle="->", linewidth=1.8))
for side, (k0, k1) in (("enc", (2, 3)), ("dec", (2, 4))):  # brace the N repeated layers
    top_, bot_ = pos[side, k0] + box_h + 0.12, pos[side, k1] - 0.12
    x_ = col_x[side] - 0.25 if side == "enc" else col_x[side] + box_w + 0.25
    ax.plot([x_, x_], [bot_, top_], color="black", linewidth=2)
    ax.text(x_ + (-0.2 if side == "enc" else 0.2), (top_ + bot_) / 2, f"× N = {N}\n(paper: 6)",
            ha="right" if side == "enc" else "left", va="center", fontsize=P.LABEL_SIZE)
z_y = pos["enc", 4] + box_h / 2
cross_y = pos["dec", 3] + box_h / 2
ax.annotate("", xy=(col_x["dec"], cross_y), xytext=(col_x["enc"] + box_w, z_y),
            arrowprops=dict(arrowstyle="->", linewidth=2.5, color=P.LINE_COLORS[2], connectionstyle="arc3,rad=0.25"))
ax.text(col_x["enc"] + box_w + 0.2, z_y + 1.15, "K, V from Z", ha="left",
        fontsize=P.LABEL_SIZE + 1, color=P.LINE_COLORS[2], fontweight="bold")
ax.text(col_x["enc"] + box_w / 2, box_h + 0.45, "ENCODER", ha="center", fontsize=P.TITLE_SIZE, fontweight="bold")
ax.text(col_x["dec"] + box_w / 2, box_h + 0.45, "DECODER", ha="center", fontsize=P.TITLE_SIZE, fontweight="bold")
ax.set_xlim(-2.2, col_x["dec"] + box_w + 2.2)
ax.set_ylim(pos["dec", 5] - 0.4, box_h + 1.1)
ax.axis("off")
ax.set_title(f"Shapes through the encoder–decoder (b = 1, d_model = {d_model}; paper: 512)", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("15_data_flow.png"))

# %% [markdown]
# **Takeaways.** The original Transformer uses one attention function three ways, and only
# the mask and the source of $K, V$ differ: encoder self-attention (no mask), decoder
# self-attention (causal mask) and cross-attention (queries from the decoder, keys and
# values from the encoder output, an $n_\text{dec} \times n_\text{enc}$ weight matrix).
# Decoder-only LLMs such as SmolLM2 (lessons 06, 11) keep just the middle one; encoders such
# as MiniLM (lesson 12) keep just the first.
