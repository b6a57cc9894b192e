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
# # 01 · From text to vectors
#
# **What you will see.** A sentence cut into pieces and ids by a real tokenizer (SmolLM2's
# byte-level BPE, 49,152 tokens), one word built merge by merge from its bytes, the special
# tokens of a chat prompt, and a second sentence cut by both SmolLM2's BPE and MiniLM's
# WordPiece for contrast.
# Then the ids pick rows of the real $49152 \times 576$ embedding table, run through the 30
# blocks, and come out as one score per vocabulary entry:
#
# $$\underbrace{(b, n)}_{\text{ids}} \xrightarrow{\ \text{embedding}\ } \underbrace{(b, n, d)}_{\text{vectors}}
#   \xrightarrow{\ L\ \text{blocks}\ } (b, n, d) \xrightarrow{\ \text{LM head}\ } \underbrace{(b, n, v)}_{\text{logits}}$$
#
# **In one line:** a language model reads ids of shape $(b, n)$ and writes one score per
# vocabulary entry at every position, $(b, n, v)$; everything between keeps the width $d$.

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

FAST = P.fast()  # TRANSFORMER_FAST=1: nothing to shrink here, the lesson is one forward pass
rng = np.random.default_rng(0)

model = T.load_smollm2(progress=False)  # SmolLM2-135M-Instruct, dequantized to float32
tok = model.tokenizer
cfg = model.config
print(f"SmolLM2: v = {cfg.v}, d = {cfg.d}, L = {cfg.L}, h = {cfg.h}, h_kv = {cfg.h_kv}, d_h = {cfg.d_h}")

# %% [markdown]
# ## 1. Text → pieces → ids
#
# A tokenizer cuts text into pieces that are in its vocabulary and replaces each piece by
# its row number, the **id**. SmolLM2 works on the UTF-8 *bytes* of the text, so no input is
# ever unknown. Each byte is stored as a printable character; the space becomes `Ġ`, so
# `ĠParis` is " Paris" with its leading space (the figures show it as `␣Paris`). A word
# and the same word after a space are different tokens.

# %%
sentence = "The capital of France is Paris."
ids = tok.encode(sentence)
pieces = tok.pieces(ids)
print("text:  ", repr(sentence))
print("pieces:", pieces)
print("ids:   ", ids)
round_trip = tok.decode(ids) == sentence
print("decode(encode(text)) == text:", round_trip)
print("'Paris' vs ' Paris':", tok.encode("Paris"), tok.encode(" Paris"))
assert round_trip and len(ids) == 7 and tok.encode(" Paris") != tok.encode("Paris")

# %% [markdown]
# ## 2. One word, merge by merge
#
# Byte-level BPE starts from one symbol per byte and repeatedly glues the adjacent pair that
# ranks best in its learned merge list (48,900 merges for SmolLM2), until no pair in the word
# is in the list. The tokenizer only returns the final pieces, so we watch the steps by
# running the package's `bpe` with the merge list cut just after the next merge that applies:
# if that merge has rank $r$ (its index in the list), `BPETokenizer(tokens, merges[:r + 1]).bpe(word)`
# is the word after every merge of rank $\le r$.
#
# The word is `" Tokenization"` *with* its leading space, the form it takes inside a
# sentence. Its first piece is therefore `␣Token` (id 33135), not the `Token` (id 20855)
# that starts the sentence in §4: the space is part of the token.

# %%
word = " Tokenization"
print(f"{len(tok.merges):,} merges in SmolLM2's list")
assert len(tok.merges) == 48_900
steps = [[tok.byte_to_char[b] for b in word.encode("utf-8")]]  # one symbol per byte
ranks_used = []
while True:
    cur = steps[-1]
    ranks = [tok.ranks[p] for p in zip(cur, cur[1:]) if p in tok.ranks]  # rank of each pair that may merge
    if not ranks:
        break
    r = min(ranks)  # the best-ranked pair merges next
    ranks_used.append(r)
    steps.append(T.BPETokenizer(tok.tokens, tok.merges[:r + 1]).bpe(word))
for k, s in enumerate(steps):
    how = "bytes" if k == 0 else f"merge #{ranks_used[k - 1]:5d} {tok.merges[ranks_used[k - 1]]}"
    print(f"step {k:2d}  {how:32s} {s}")
final_ok = steps[-1] == tok.bpe(word) == tok.pieces(tok.encode(word))
print(f"{len(word.encode())} bytes -> {len(steps[-1])} tokens in {len(steps) - 1} merges; "
      f"last step == the tokenizer's pieces: {final_ok}")
assert final_ok
sp_tok, bare_tok = tok.encode(" Token"), tok.encode("Token")
print("' Token' vs 'Token':", sp_tok, bare_tok)
assert sp_tok == [33135] and bare_tok == [20855]  # the ids quoted above

# %% [markdown]
# Text in other scripts shows the byte level: each Chinese character is 3 UTF-8 bytes, and
# a character the merges never covered stays as several byte tokens (they print as odd
# Latin letters, because of the byte-to-character table).

# %%
zh = "注意力"  # "attention"
zh_ids = tok.encode(zh)
print(repr(zh), "->", len(zh.encode()), "bytes ->", len(zh_ids), "tokens:", tok.pieces(zh_ids))
assert tok.decode(zh_ids) == zh
assert all(len(ch.encode()) == 3 for ch in zh) and len(zh_ids) > len(zh)  # 3 bytes each; some split into bytes

# %% [markdown]
# ## 3. Special tokens
#
# Some vocabulary entries are never produced by merging: they are written whole into the
# text and mark structure. SmolLM2-Instruct's chat format wraps each turn in `<|im_start|>`
# … `<|im_end|>`; `<|endoftext|>` ends a document, and generation stops when the model
# emits the end-of-sequence id.

# %%
print("special tokens:", tok.special[:3], f"… ({len(tok.special)} in all)")
print("bos_id =", tok.bos_id, " eos_id =", tok.eos_id, "=", repr(tok.tokens[tok.eos_id]))
chat = tok.apply_chat_template("What is the capital of France?")
chat_ids = tok.encode(chat)
print(repr(chat))
print("first pieces:", tok.pieces(chat_ids[:4]), "…")
specials_in_chat = [tok.tokens[i] for i in chat_ids if i in tok.special_ids]
print("special tokens in the chat prompt:", specials_in_chat)
assert chat_ids[0] == tok.vocab["<|im_start|>"] and "<|im_end|>" in specials_in_chat

# %% [markdown]
# ## 4. A different tokenizer: MiniLM's WordPiece
#
# BERT-family encoders such as all-MiniLM-L6-v2 use **WordPiece**: the text is lower-cased
# and cut into words first, then each word is covered greedily by the longest vocabulary
# pieces; a piece that continues a word starts with `##`. Every sequence is framed by
# `[CLS]` … `[SEP]`. The vocabulary (30,522 pieces) and the ids have nothing in common
# with SmolLM2's: ids only mean something to the model they were made for.

# %%
minilm = T.load_minilm()
wp_sentence = "Tokenization turns text into numbers."
bpe_ids = tok.encode(wp_sentence)
wp_ids = minilm.tokenizer.encode(wp_sentence)
bpe_pieces = tok.pieces(bpe_ids)
wp_pieces = minilm.tokenizer.convert_ids_to_tokens(wp_ids)
print("SmolLM2 BPE:    ", bpe_pieces, bpe_ids)
print("MiniLM WordPiece:", wp_pieces, wp_ids)
print("vocabulary sizes:", tok.vocab_size, "vs", len(minilm.tokenizer))
assert wp_pieces[0] == "[CLS]" and wp_pieces[-1] == "[SEP]" and any(p.startswith("##") for p in wp_pieces)

# %% [markdown]
# The figure puts the two tokenizers side by side, then the word of §2 before and after its
# merges. The third row is the raw input of byte-level BPE: each box is one UTF-8 byte, with its
# value (0–255) below; the other rows show vocabulary ids.

# %%
word_bytes = list(word.encode("utf-8"))  # the byte values BPE starts from
rows = [([P.visible_token(tok.decode([i])) for i in bpe_ids], bpe_ids, P.LINE_COLORS[0],
         f"SmolLM2 BPE\n{len(bpe_ids)} tokens (ids)"),
        (wp_pieces, wp_ids, P.LINE_COLORS[2], f"MiniLM WordPiece\n{len(wp_ids)} tokens (ids)"),
        ([P.visible_token(bytes([b_]).decode()) for b_ in word_bytes], word_bytes, P.LINE_COLORS[3],
         f"'{P.visible_token(word)}' as bytes\n{len(word_bytes)} bytes (values)"),
        ([P.visible_token(tok.decode([tok.vocab[s]])) for s in steps[-1]], [tok.vocab[s] for s in steps[-1]],
         P.LINE_COLORS[1], f"… after {len(steps) - 1} merges\n{len(steps[-1])} tokens (ids)")]
fig, ax = P.early.token_rows(rows, title=(
    f"Top two rows: \"{wp_sentence}\" — piece on top of each box, id below\n"
    f"Bottom two rows: the word as it appears mid-sentence, with its leading space ␣: its bytes, "
    f"then its tokens (␣Token = {sp_tok[0]} ≠ Token = {bare_tok[0]})"))
P.save(fig, P.figure_path("01_tokens.png"))

# %% [markdown]
# ## 5. Ids → vectors: the embedding table
#
# The embedding is a lookup: id $i$ selects row $i$ of the table
# $W_E \in \mathbb{R}^{v \times d}$ — here the real $49152 \times 576$ table of SmolLM2. No
# arithmetic happens; it is the same as multiplying a one-hot vector by $W_E$.

# %%
W_E = model.weights.W_E  # (v, d)
ids_arr = np.array([ids])  # (b, n) = (1, 7)
x = T.embed(ids_arr, W_E)  # (b, n, d)
print("W_E:", W_E.shape, W_E.dtype, f"({W_E.nbytes / 2**20:.0f} MiB in float32)")
print("ids", ids_arr.shape, "-> x", x.shape)
rows_ok = np.array_equal(x[0], W_E[ids])
one_hot = np.zeros((len(ids), cfg.v), dtype=W_E.dtype)  # (n, v)
one_hot[np.arange(len(ids)), ids] = 1.0  # row j is 1 at column ids[j]
onehot_ok = np.allclose(one_hot @ W_E, x[0])
print("x[0, j] is row ids[j] of W_E:", rows_ok, "   one-hot · W_E gives the same:", onehot_ok)
assert W_E.shape == (49152, 576) and rows_ok and onehot_ok

# %% [markdown]
# Training places tokens that are used alike near each other. The cosine similarity of two
# rows, $\cos(e_a, e_b) = e_a \cdot e_b / (\lVert e_a\rVert\,\lVert e_b\rVert)$, is one way to
# look: capitals sit near capitals, countries near countries, numbers near numbers. (SmolLM2
# ties its LM head to this table, so these rows are also what the last layer is compared
# against to score each next token.)

# %%
words = [" France", " England", " Germany", " Paris", " London", " Berlin",
         " one", " two", " three", " dog", " cat", " puppy"]
word_ids = [tok.encode(w_) for w_ in words]
assert all(len(i_) == 1 for i_ in word_ids), "each word must be a single token"
E = T.l2_normalize(W_E[[i_[0] for i_ in word_ids]])  # (12, d), unit rows
C = E @ E.T  # (12, 12) cosine similarities
groups = np.arange(len(words)) // 3  # countries, capitals, numbers, animals
same = groups[:, None] == groups[None, :]
off_diag = ~np.eye(len(words), dtype=bool)
within, across = C[same & off_diag].mean(), C[~same].mean()
print(f"mean cosine within a group {within:.3f}, across groups {across:.3f}")
print("most similar to ' Paris':", words[int(np.argsort(-C[3])[1])])
assert within > across

fig, ax = P.new_figure(figsize=(10.5, 8.5))
P.attention_heatmap(C, [P.visible_token(w_) for w_ in words], [P.visible_token(w_) for w_ in words], ax=ax,
                    signed=True, annotate=True, fmt=".2f", cbar_label="cosine similarity",
                    title="Cosine similarity of SmolLM2 embedding rows", xlabel=None, ylabel=None)
for t_ in ax.texts:
    t_.set_fontsize(P.TICK_SIZE + 1)
for k in (3, 6, 9):
    ax.axhline(k - 0.5, color="black", linewidth=1.5), ax.axvline(k - 0.5, color="black", linewidth=1.5)
P.save(fig, P.figure_path("01_embedding_similarity.png"))

# %% [markdown]
# ## 6. The shapes through the whole model, for a real batch
#
# Two prompts of the same length make a batch ($b = 2$). The ids $(b, n)$ become vectors
# $(b, n, d)$; each of the $L = 30$ blocks maps $(b, n, d)$ to $(b, n, d)$ — the width never
# changes inside the stack — and the LM head turns every position's vector into $v$ scores,
# $(b, n, v)$. The last position's scores rank the next token:
# "The capital of France is" gives " Paris".

# %%
prompts = ["The capital of France is", "The capital of Italy is"]
batch = np.array([tok.encode(p_) for p_ in prompts])  # (b, n)
stream = []
logits = T.llama_forward(batch, model.weights, cfg, model.cos, model.sin, hidden_out=stream)  # (b, n, v)
print("ids               (b, n)   :", batch.shape)
print("embedding         (b, n, d):", stream[0].shape)
print(f"after block {cfg.L:2d}    (b, n, d):", stream[-1].shape, f"  ({len(stream) - 1} blocks)")
print("LM head logits    (b, n, v):", logits.shape)
nxt = logits[:, -1].argmax(-1)  # (b,)
answers = [tok.decode([int(i_)]) for i_ in nxt]
for p_, a_ in zip(prompts, answers):
    print(f"{p_!r} -> {a_!r}")
same_as_single = np.allclose(logits[0], model.logits(prompts[0]), atol=1e-4)
print("row 0 of the batch == the prompt run alone:", same_as_single)
head_ok = np.allclose(logits, T.lm_head(T.rms_norm(stream[-1], model.weights.norm, cfg.eps), W_E), atol=1e-4)
print("logits == RMSNorm(last hidden) · W_Eᵀ (tied head):", head_ok)
assert logits.shape == (2, 5, 49152) and stream[0].shape == (2, 5, 576) and len(stream) == cfg.L + 1
assert answers[0] == " Paris" and same_as_single and head_ok

# %%
b_, n_ = batch.shape
stages = [("text", f"{b_} prompts", None),
          ("ids", f"({b_}, {n_})", "(b, n)"),
          ("embedding", f"({b_}, {n_}, {cfg.d})", "(b, n, d)"),
          (f"{cfg.L} blocks", f"({b_}, {n_}, {cfg.d})", "(b, n, d)"),
          ("LM head", f"({b_}, {n_}, {cfg.v})", "(b, n, v)"),
          ("next token", f"{answers[0]!r}\n{answers[1]!r}", "argmax, last row")]
notes = ["tokenizer", f"rows of W_E\n{cfg.v}×{cfg.d}", "attention\n+ FFN", f"× W_Eᵀ\n{cfg.d}×{cfg.v}",
         "last\nposition"]
fig, ax = P.early.shape_pipeline(stages, notes,
                                 title=f"SmolLM2 on a real batch: {prompts[0]!r} and {prompts[1]!r}")
P.save(fig, P.figure_path("01_shapes.png"))

# %% [markdown]
# **Takeaways.** Text becomes ids through a tokenizer that is part of the model (BPE merges
# bytes; WordPiece covers lower-cased words with `##` pieces); ids become vectors by a table
# lookup; the stack keeps the width $d$; and the LM head scores all $v$ tokens at every
# position. Only the last position's scores are needed to pick the next token — lesson 06
# uses that to avoid recomputing the rest, lesson 11 looks at how the choice is made.

# %% [markdown]
# **Write it yourself.** `workbook/01_text_to_vectors.py` holds `merge_symbols` (BPE's merge loop),
# `wordpiece` (WordPiece's longest match), `embed` and `lm_head` as stubs with this lesson's
# formulas; fill them in, then run `python -m transformer check 01`: it runs the package's own test
# cases on your code and says what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 01` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/01_text_to_vectors.py`.
#
# 1. **Code it.** Take a small table `W_E = np.random.default_rng(1).normal(size=(6, 4))` and
#    ids `[[3, 1, 3]]`. Write the lookup with NumPy indexing and the tied LM head as a matrix
#    product with the same table; predict the shapes, and which token gets the largest logit in
#    row 0. Compare with `T.embed` and `T.lm_head`.
# 2. What pieces does MiniLM's WordPiece make of `"Naïve"`? (It lower-cases and strips accents
#    first.)
# 3. How many numbers does SmolLM2's embedding table hold, and what share of the model's
#    134,515,008 parameters is that?
