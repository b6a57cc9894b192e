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
# # 16 · Packing short documents into one context
#
# **What you will see.** Why a batch of short documents padded to a long context window is
# mostly padding; how packing several documents into one row removes it; the two things a
# packed row must change so that documents do not leak into each other — the mask (a
# token reads only its own document) and the positions (they restart in every document);
# and, on the two real models, which of the two RoPE makes unnecessary: SmolLM2 (RoPE)
# gives the same logits with positions numbered straight through the row, MiniLM (learned
# absolute positions) does not. Last, FlashAttention's tiles on a packed row: those
# between documents are skipped.
#
# **The idea behind it.** Training packs short documents into one context window, so a
# document's first token can sit at, say, position 50; relative positions (RoPE) make that
# harmless. Builds on the masks of lesson 05, the relative-position property of lesson 02
# and the tiles of lesson 09.

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1: a smaller corpus of lengths; the models run the same
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Padding wastes the window
#
# Rows of a batch all have the context length $n_{ctx}$. An example: a 4K window
# given to a 10-word sentence is almost all padding, and every padded slot still costs
# its share of the matrix products. Most documents in a real corpus are short, a few are
# long: we draw lengths from a log-normal distribution whose median is 200 tokens (the
# sample's own median, printed below, comes out a little different), cut them to
# $[8, n_{ctx}]$ with $n_{ctx} = 2048$, and count the slots of three layouts:
#
# - **one per row** — each document padded to $n_{ctx}$;
# - **pad to longest** — batches of 32 documents, each padded to its own longest (what a
#   data loader does without packing);
# - **packed** — documents back to back, each placed in the first row that still has room
#   for it (*first fit*, `T.pack_documents`); a document is never split. Placing the longest
#   documents first (`longest_first=True`, *first fit decreasing*) leaves the short ones to
#   fill the gaps at the end, at the price of a row no longer holding its documents in
#   their original order.

# %%
n_ctx_corpus = 2048
n_docs = 300 if FAST else 2000
corpus = np.clip(rng.lognormal(np.log(200), 1.0, n_docs), 8, n_ctx_corpus).astype(int)
report = T.packing_report(corpus, n_ctx_corpus, batch=32)
print(f"{n_docs} documents, {report['tokens']:,} tokens, median length {int(np.median(corpus))}, "
      f"longest {corpus.max()}")
for name in ("one_per_row", "pad_to_longest", "packed"):
    r = report[name]
    print(f"  {name:15s} {r['rows']:5d} rows, {r['slots']:>10,} slots, {r['fill']:6.1%} hold a real token")
lower = -(-report["tokens"] // n_ctx_corpus)  # no layout needs fewer rows than ⌈tokens / n_ctx⌉
print(f"packed rows: {report['packed']['rows']} in input order, {report['packed_longest_first']['rows']} "
      f"longest first (at least {lower} are needed)")
assert report["rows_needed"] == lower
assert report["packed"]["fill"] > 0.95 and report["one_per_row"]["fill"] < 0.2
assert lower <= report["packed_longest_first"]["rows"] <= report["packed"]["rows"]

# %% [markdown]
# A small example we can draw: 14 documents of 3 to 24 tokens in rows of 32.

# %%
n_ctx = 32
lengths = [int(x) for x in rng.integers(3, 25, 14)]
docs = [[1000 * i + t for t in range(n)] for i, n in enumerate(lengths)]  # ids that name their document
packed = T.pack_documents(docs, n_ctx)
print("lengths:", lengths)
print("first-fit spans (row, start, length):", packed.spans)
print(f"packed: {packed.rows} rows, fill {packed.fill:.0%};  one per row (padded to n_ctx = {n_ctx}): "
      f"{len(lengths)} rows, fill {sum(lengths) / (len(lengths) * n_ctx):.0%}")
print("row 0, document of each slot:", packed.doc[0].tolist())
print("row 0, position of each slot:", packed.positions[0].tolist())


# %%
def draw_rows(ax, p, title, width):  # one horizontal bar of slots per row, a colour per document
    cmap = ListedColormap(["#f2f2f2"] + [P.LINE_COLORS[i % len(P.LINE_COLORS)] for i in range(len(p.spans))])
    grid = np.full((p.rows, width), 0)
    grid[:, :p.n_ctx] = p.doc + 1  # 0 = padding, i + 1 = document i
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=len(p.spans), aspect="auto", interpolation="nearest")
    for i, (row, start, n) in enumerate(p.spans):
        ax.text(start + n / 2 - 0.5, row, str(i), ha="center", va="center", color="white",
                fontsize=P.ANNOT_SIZE, fontweight="bold")
        ax.plot([start - 0.5] * 2, [row - 0.5, row + 0.5], color="white", lw=2)  # where a document starts
    ax.set_xticks(np.arange(-0.5, width, 8), [str(x) for x in range(0, width + 1, 8)])
    ax.set_yticks(range(p.rows))
    P.style_axes(ax, title, "slot in the row", "row")


fig, axes = P.new_figure(1, 3, figsize=(18, 5.8))
in_row = np.arange(n_ctx)[None, :] < np.array(lengths)[:, None]  # (14, n_ctx): slot holds a token
alone = T.Packed(ids=np.zeros((len(docs), n_ctx), np.int64),
                 doc=np.where(in_row, np.arange(len(docs))[:, None], -1),  # document i alone in row i
                 positions=np.zeros((len(docs), n_ctx), np.int64),
                 spans=tuple((i, 0, n) for i, n in enumerate(lengths)))
draw_rows(axes[0], alone, f"One document per row: {alone.fill:.0%} of slots used", n_ctx)
draw_rows(axes[1], packed, f"Packed (first fit): {packed.fill:.0%} used", n_ctx)
axes[1].set_ylim(alone.rows - 0.5, -0.5)  # same scale as the left panel: the saved rows show as empty
axes[1].text(n_ctx / 2, (packed.rows + alone.rows) / 2 - 0.5, f"{alone.rows - packed.rows} rows saved",
             ha="center", va="center", fontsize=P.TITLE_SIZE, color="grey")
names = {"one_per_row": "one per row\n(pad to n_ctx)", "pad_to_longest": "batches of 32,\npad to longest",
         "packed": "packed\n(first fit)"}
fills = [report[k]["fill"] for k in names]
bars = axes[2].bar(list(names.values()), fills, color=[P.OFF_COLOR, P.PARTIAL_COLOR, P.ON_COLOR])
for bar_, f_ in zip(bars, fills):
    axes[2].text(bar_.get_x() + bar_.get_width() / 2, f_ + 0.02, f"{f_:.1%}", ha="center", fontsize=P.LABEL_SIZE)
axes[2].set_ylim(0, 1.12)
axes[2].yaxis.set_major_formatter(PercentFormatter(1.0))
P.style_axes(axes[2], f"{n_docs} documents, n_ctx = {n_ctx_corpus}", None, "slots holding a real token")
fig.suptitle("Packing: short documents share a row instead of each padding one", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("16_packing_layout.png"))

# %% [markdown]
# ## 2. The mask: each token reads only its own document
#
# Packed into one row, the documents look to the model like one long text: under a plain
# causal mask the first token of the second document in a row reads all of the first. The
# **document mask** allows query $i$ to see key $j$ only when both belong to the same
# document, $\text{doc}_i = \text{doc}_j$ (and $j \le i$ in a decoder):
#
# $$M_{ij} = [\,\text{doc}_i = \text{doc}_j \ge 0\,] \wedge [\,j \le i\,]$$
#
# a block-diagonal matrix with one causal triangle per document. Padding (doc = −1) is
# seen by nobody; its own rows are empty and give zeros. (In training, one more boundary
# matters: the last token of a document must not be taught to predict the first token of
# the next, so that target is dropped from the loss too.)

# %%
row = 0
doc_row = packed.doc[row:row + 1]  # (1, n_ctx)
causal = T.causal_mask(n_ctx)  # (n_ctx, n_ctx)
document = T.document_mask(doc_row)[0, 0]  # (n_ctx, n_ctx)
is_token = doc_row[0] >= 0  # (n_ctx,): the slot holds a document's token, not padding
leak = causal & ~document & is_token[:, None]  # a document's token reading another document
pad_reads = causal & ~is_token[:, None]  # padding queries: their outputs are never used
print(f"row {row}: documents {sorted(set(doc_row[0].tolist()) - {-1})}, {(~is_token).sum()} padding slots; "
      f"causal mask {T.attended_pairs(causal)} pairs, document mask {T.attended_pairs(document)}, "
      f"{T.attended_pairs(leak)} would cross documents, {T.attended_pairs(pad_reads)} are padding queries")
doc_sizes = [n for r, _, n in packed.spans if r == row]
assert T.attended_pairs(document) == sum(n * (n + 1) // 2 for n in doc_sizes)  # one triangle per document
assert T.attended_pairs(causal) == T.attended_pairs(document) + T.attended_pairs(leak) + T.attended_pairs(pad_reads)
pad = packed.doc < 0  # (rows, n_ctx): padding slots, in every row of the batch
doc_masks = T.document_mask(packed.doc)[:, 0]  # (rows, n_ctx, n_ctx)
pad_rows_empty = not any(doc_masks[r][pad[r]].any() for r in range(packed.rows))  # a padding query reads nothing
pad_unseen = not any(doc_masks[r][:, pad[r]].any() for r in range(packed.rows))  # no query reads a padding key
print(f"the batch's {pad.sum()} padding slots: their rows of the document mask are empty: {pad_rows_empty}; "
      f"no query sees them: {pad_unseen}")
assert pad.any() and pad_rows_empty and pad_unseen

fig, axes = P.new_figure(1, 2, figsize=(12, 6.2))
four = ListedColormap([P.OFF_COLOR, P.ON_COLOR, "#d62728", "#f4c27a"])  # hidden, attend, leak, padding query
axes[0].imshow(causal.astype(int) + leak.astype(int) + 2 * pad_reads.astype(int), cmap=four, vmin=0, vmax=3,
               interpolation="nearest")
P.style_axes(axes[0], f"Causal mask alone\nred: {T.attended_pairs(leak)} pairs read another document", "key", "query")
axes[1].imshow(document.astype(int), cmap=four, vmin=0, vmax=3, interpolation="nearest")
P.style_axes(axes[1], f"Document mask\none causal block per document ({T.attended_pairs(document)} pairs)",
             "key", "query")
edges = [start - 0.5 for r, start, _ in packed.spans if r == row and start > 0]
for ax in axes:
    for e in edges:
        ax.axvline(e, color="black", lw=0.8), ax.axhline(e, color="black", lw=0.8)
fig.legend(handles=[Patch(color=P.ON_COLOR, label="may attend"), Patch(color="#d62728", label="leak across documents"),
                    Patch(color="#f4c27a", label="padding query (output unused)"), Patch(color=P.OFF_COLOR, label="hidden")],
           loc="lower center", ncols=4, fontsize=P.LABEL_SIZE, frameon=False, bbox_to_anchor=(0.5, -0.04))
fig.suptitle(f"Row {row} of the packed batch (lines: document boundaries)", fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("16_document_mask.png"))

# %% [markdown]
# The document mask makes packed attention *exactly* attention over each document alone:
# every score that crosses a boundary is hidden before the softmax, so its weight is 0.
# (The tests check this against torch's SDPA run on each document by itself.)

# %%
h, d_h = 4, 16
q, k, v = (rng.standard_normal((packed.rows, h, n_ctx, d_h)) for _ in range(3))
out = T.scaled_dot_product_attention(q, k, v, T.document_mask(packed.doc))  # (b, h, n_ctx, d_h)
worst = 0.0
for i, (r, start, n) in enumerate(packed.spans):
    s = slice(start, start + n)
    alone_out = T.scaled_dot_product_attention(q[r:r + 1, :, s], k[r:r + 1, :, s], v[r:r + 1, :, s], T.causal_mask(n))
    worst = max(worst, float(np.abs(out[r:r + 1, :, s] - alone_out).max()))
print(f"packed with the document mask vs each document alone: largest |Δ| = {worst:.1e}")
assert worst < 1e-12
out_pad = out.swapaxes(1, 2)[pad]  # (padding slots, h, d_h): the outputs of the padding queries
print(f"outputs of the {pad.sum()} padding queries: largest |value| = {np.abs(out_pad).max():.1e}")
assert np.all(out_pad == 0), "an empty row of the mask gives zeros"

# %% [markdown]
# ## 3. The positions: restart them — unless the model uses RoPE
#
# The mask is not enough for a model with **absolute** positions. Numbered straight
# through the row ($0, 1, \dots, n_{ctx}-1$), the first token of the second document gets
# position 50 if the first had 50 tokens, and the model reads it as deep inside a text.
# So position ids restart at 0 in every document (`packed.positions` above).
#
# **RoPE** does not care: it rotates $q_m$ by $m\theta$ and $k_n$ by $n\theta$,
# so the score $q_m^\top k_n$ depends only on $n - m$ (lesson 02). Shifting every position
# of a document by the same offset leaves all its scores, and so its whole forward pass,
# unchanged — as long as the document mask keeps other documents out.
#
# We check both claims on the real models, each document alone being the reference:
# SmolLM2 (RoPE) on three prompts packed into one row, MiniLM (learned positions) on three
# sentences, in three settings each: document mask with restarted positions, document
# mask with positions straight through, and no document mask at all.

# %%
smol = T.load_smollm2(progress=False)
prompts = ["The capital of France is", "def add(a, b):\n    return", "Once upon a time, a small dragon"]
alone_logits = [smol.logits(t) for t in prompts]


def smol_worst(outs):  # largest |Δ logit| against each prompt alone
    return max(float(np.abs(o - a).max()) for o, a in zip(outs, alone_logits))


p_smol = T.pack_documents([smol.encode(t) for t in prompts], sum(len(smol.encode(t)) for t in prompts))
leaky = T.llama_forward(p_smol.ids, smol.weights, smol.config, smol.cos, smol.sin,
                        positions=p_smol.positions)  # plain causal mask: documents read each other
smol_err = {"document mask,\npositions restart": smol_worst(smol.packed_logits(prompts)),
            "document mask,\nstraight through": smol_worst(smol.packed_logits(prompts, restart_positions=False)),
            "no document mask": smol_worst(T.unpack(leaky, p_smol))}
for name, e in smol_err.items():
    print(f"SmolLM2  {name.replace(chr(10), ' '):42s} largest |Δ logit| vs alone = {e:.1e}")
top_leaky = smol.tokenizer.decode([int(np.argmax(T.unpack(leaky, p_smol)[2][-1]))])
top_alone = smol.tokenizer.decode([int(np.argmax(alone_logits[2][-1]))])
print(f"next token after prompt 3: alone {top_alone!r}, packed without the document mask {top_leaky!r}")
assert max(list(smol_err.values())[:2]) < 2e-3 < list(smol_err.values())[2]

# %%
mini = T.load_minilm()
sentences = ["A dog chases a squirrel.", "A puppy runs after a squirrel in the park.", "Stock markets fell sharply."]
alone_emb = mini.embed(sentences)  # (3, d) unit rows


def mini_worst(e):  # largest |Δ| of a coordinate of the unit embeddings against each sentence alone
    return float(np.abs(e - alone_emb).max())


p_mini = T.pack_documents([mini.tokenizer.encode(s) for s in sentences],
                          sum(len(mini.tokenizer.encode(s)) for s in sentences))
full = T.bert_encode(p_mini.ids, np.array([p_mini.n_ctx]), mini.weights, mini.config,
                     positions=p_mini.positions, keep=False)  # every token reads the whole row
leaky_emb = T.l2_normalize(np.stack([h_.mean(axis=0) for h_ in T.unpack(full.hidden, p_mini)]))
mini_err = {"document mask,\npositions restart": mini_worst(mini.embed_packed(sentences)),
            "document mask,\nstraight through": mini_worst(mini.embed_packed(sentences, restart_positions=False)),
            "no document mask": mini_worst(leaky_emb)}
cos_through = (mini.embed_packed(sentences, restart_positions=False) * alone_emb).sum(axis=1)
for name, e in mini_err.items():
    print(f"MiniLM   {name.replace(chr(10), ' '):42s} largest |Δ| vs alone = {e:.1e}")
print("MiniLM, straight through: cosine to the true embedding per sentence", [round(float(c), 3) for c in cos_through])
assert mini_err["document mask,\npositions restart"] < 1e-5 < 1e-2 < mini_err["document mask,\nstraight through"]
assert mini_err["no document mask"] > 1e-2, "MiniLM without the document mask: the embeddings change"

# %% [markdown]
# ("No document mask" is the plain causal mask for the decoder; for the encoder, every
# token reads the whole row, as in a BERT batch row without padding.)

# %%
fig, axes = P.late.packing_errors(  # separate y-axes: different quantities; logits reach tens, a unit vector's
    [("SmolLM2 (RoPE)", smol_err, "largest |Δ logit|", 1e3),  # coordinates stay below 1
     ("MiniLM (learned absolute positions)", mini_err, "largest |Δ| of a unit-embedding coordinate", 10)],
    suptitle="A packed row must hide other documents; only absolute positions must also restart")
P.save(fig, P.figure_path("16_positions.png"))

# %% [markdown]
# ## 4. FlashAttention on a packed row: skip the tiles between documents
#
# The document mask above still computes every score of the row and hides most of them.
# The tiled loop of lesson 09 can do better: `T.flash_attention(..., doc=packed.doc)`
# classifies each $B_r \times B_c$ tile from the document indices alone — *skipped* when
# no query of the block shares a document with a key of the other, *full* when every pair
# does, *masked inside* otherwise — exactly as it skips the tiles above a causal diagonal.
# One row of 512 slots holding documents of 20 to 150 tokens, in tiles of 32 × 32:

# %%
n_row, B = 512, 32
row_lengths = []
while sum(row_lengths) < n_row - 20:  # fill one row with documents of 20 … 150 tokens
    row_lengths.append(int(min(rng.integers(20, 151), n_row - sum(row_lengths))))
one_row = T.pack_documents([[0] * n for n in row_lengths], n_row)
assert one_row.rows == 1
x = rng.standard_normal((3, 1, 2, n_row, 16))  # q, k, v: (b=1, h=2, n, d_h=16)
plain, packed_trace = T.FlashTrace(), T.FlashTrace()
out_plain = T.flash_attention(*x, causal=True, block_q=B, block_k=B, trace=plain)
out_doc = T.flash_attention(*x, causal=True, block_q=B, block_k=B, doc=one_row.doc, trace=packed_trace)
ref = T.scaled_dot_product_attention(*x, T.document_mask(one_row.doc))
print(f"documents in the row: {row_lengths}")
print(f"tiles computed: causal only {plain.computed().sum()} of {plain.computed().size}, "
      f"with the documents {packed_trace.computed().sum()}")
print(f"tiled with doc = document-masked attention: largest |Δ| = {np.abs(out_doc - ref).max():.1e}")
needed = T.attended_pairs(T.document_mask(one_row.doc))
print(f"scores needed {needed:,}; scores computed: causal tiles {plain.computed().sum() * B * B:,}, "
      f"document tiles {packed_trace.computed().sum() * B * B:,}")
ratio_doc, ratio_plain = (t.computed().sum() * B * B / needed for t in (packed_trace, plain))
print(f"scores computed per score needed: {ratio_doc:.2f} with the documents, {ratio_plain:.2f} with the causal mask "
      "alone")
assert np.abs(out_doc - ref).max() < 1e-12 and packed_trace.computed().sum() < 0.5 * plain.computed().sum()
assert 1.5 < ratio_doc < 2.2 and ratio_plain > 5  # "roughly twice", "over five times": the takeaways below

fig, axes = P.new_figure(1, 2, figsize=(16, 7.6), layout="constrained")
P.tile_schedule(plain.computed(), ax=axes[0], partial=plain.partial(), Br=B, Bc=B,
                title=f"Causal mask only: {plain.computed().sum()} tiles\n(most of them read other documents)")
P.tile_schedule(packed_trace.computed(), ax=axes[1], partial=packed_trace.partial(), Br=B, Bc=B,
                title=f"Causal + document: {packed_trace.computed().sum()} tiles\n(only tiles holding a same-document pair)")
axes[0].get_legend().remove()  # one legend (right panel) serves both
for r, start, n in one_row.spans[1:]:  # document boundaries, in tile units
    for ax in axes:
        ax.axvline(start / B - 0.5, color="#d62728", lw=1.2), ax.axhline(start / B - 0.5, color="#d62728", lw=1.2)
fig.suptitle(f"One packed row of {n_row} slots, {len(row_lengths)} documents (red lines), tiles of {B} × {B}",
             fontsize=P.TITLE_SIZE + 1)
P.save(fig, P.figure_path("16_packed_tiles.png"))

# %% [markdown]
# The CUDA kernels of lesson 17 take the same `doc=`:
# `T.flash_attention_cuda(q, k, v, causal=True, doc=packed.doc)`. A thread block owns a tile of
# query rows and cannot consult a table of tiles; instead the host gives each block the keys its
# documents span, `[first, end)` (`T.cuda_kernels.packed_row_args`), and the block walks only the
# key tiles inside it, masking each score whose key lies in another document (a key tile that
# holds only the document of all the block's rows needs no mask). For the row above, in the
# `mma` kernel's blocks of 128 queries and key tiles of 64:

# %%
CK = T.cuda_kernels  # the CUDA kernels' host side: their table, tile sizes, packed-row arguments

Bq, Bk = CK.KERNELS["mma"].block_q, CK.block_k("mma", 64)  # 128 query rows a block, and 64 keys a tile
_, spans = CK.packed_row_args(one_row.doc, Bq)  # [1, Tr, 2]
reads = CK.key_tiles_read(n_row, Bq, Bk, causal=True, doc=one_row.doc)[0]  # [Tr, Tc]: the tiles each block reads
reads_causal = CK.key_tiles_read(n_row, Bq, Bk, causal=True)[0]  # [Tr, Tc]: with the causal mask alone
Tr = len(spans[0])
for t, (first, end) in enumerate(spans[0]):
    tiles = np.flatnonzero(reads[t])
    print(f"queries {t * Bq:3d}–{t * Bq + Bq - 1:3d}: documents span keys [{first:3d}, {end:3d}) -> "
          f"key tiles {tiles[0]}…{tiles[-1]}: {tiles.size} of the {reads_causal[t].sum()} causal ones")
n_causal = reads_causal.sum()  # causal alone: block t reads the tiles up to its last row
print(f"key tiles the {Tr} blocks read: {reads.sum()} with the documents, {n_causal} with the causal mask alone")
trace_k = T.FlashTrace()  # the NumPy loop above, in the kernel's tiles
T.flash_attention(*x, causal=True, block_q=Bq, block_k=Bk, doc=one_row.doc, trace=trace_k)
print(f"the NumPy loop in tiles of {Bq} × {Bk} computes the same {trace_k.computed().sum()} tiles: the documents "
      "are contiguous, so each key tile inside a block's span meets one of the block's documents")
assert np.array_equal(reads, trace_k.computed()) and reads.sum() < n_causal

# %% [markdown]
# **Takeaways.** Packing turns padding into useful tokens (here from under a fifth of the
# slots to nearly all of them). It needs a block-diagonal document mask in every model —
# without it the documents read each other and the outputs change. Positions must restart
# in every document for absolute (learned or sinusoidal) encodings; with RoPE they need
# not, because its scores depend on distances only. A tiled kernel given the document of
# each position never computes the tiles between documents, as it skips those above a
# causal diagonal: packed attention then costs little more than each document alone (above,
# roughly twice the scores needed, between 1.5 and 2.2 times, where the causal mask alone
# computes over five times as many).

# %% [markdown]
# **Write it yourself.** `workbook/16_packing.py` holds `pack_documents` (first fit), `document_mask` (a token
# reads only its own document) and `key_tiles_read` (the key tiles a kernel's query block reads) as stubs; fill
# them in, then run `python -m transformer check 16`: it runs the package's own test cases on your code and says
# what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 16` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/16_packing.py`.
#
# 1. **First fit.** Documents of 5, 3, 7, 2, 6 tokens into rows of $n_\text{ctx} = 8$, in input
#    order: how many rows, and which documents share a row? Check with `T.pack_documents`.
# 2. **Positions.** With positions restarted per document, what are the positions of the last row?
# 3. **The document mask, coded.** Write the mask of the packed row
#    `doc = [0, 0, 0, 1, 1, 2, -1, -1]` in NumPy: compare `doc` as a column with `doc` as a row,
#    hide the padding keys, and keep `np.tril`. How many pairs are left? Compare with
#    `T.document_mask`.
