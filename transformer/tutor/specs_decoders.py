"""The checker's cases for lessons 15, 16 and 19: the encoder–decoder's two layers, packing documents into rows
and their document mask, and the scores that find induction heads and the held-out accuracy of induction."""
from __future__ import annotations

import math

import numpy as np

from ..core.heads import AttentionWeights, multi_head_attention
from ..core.layers import ffn, gelu, layer_norm, relu
from ..core.masks import causal_mask, document_mask, padding_mask
from ..core.packing import Packed, pack_documents
from ..models.encoder_decoder import (Seq2SeqDecoderLayer, Seq2SeqEncoderLayer, seq2seq_decoder_layer,
                                      seq2seq_encoder_layer)
from ..tasks.induction import induction_head_scores
from ..tasks.induction_data import induction_accuracy
from .cases import Case, Mistake, Spec, call_plain

__all__ = ["DECODER_LAYER", "ENCODER_LAYER", "PACK_DOCUMENTS", "DOCUMENT_MASK", "INDUCTION_SCORES",
           "INDUCTION_ACCURACY"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 15: the encoder–decoder's decoder layer ----------------------------------------------------
def _decoder_layer(r, d, d_ff):
    """Random weights of one decoder layer, with biases and β (so a left-out one shows)."""
    m = lambda *s: r.standard_normal(s) / math.sqrt(s[0])  # noqa: E731
    vec = lambda n, c=0.0: c + 0.1 * r.standard_normal(n)  # noqa: E731
    attn = lambda: AttentionWeights(m(d, d), m(d, d), m(d, d), m(d, d), vec(d), vec(d), vec(d), vec(d))  # noqa: E731
    return Seq2SeqDecoderLayer(attn(), attn(), m(d, d_ff), m(d_ff, d), vec(d, 1), vec(d, 1), vec(d, 1),
                               vec(d_ff), vec(d), vec(d), vec(d), vec(d))


def decoder_cases():
    r = _rng(151)
    y = lambda b, n: r.standard_normal((b, n, 8))  # noqa: E731
    return [Case("b=2, n_dec=4, n_enc=6, d=8, h=2: the second source sentence has 4 words (cross_mask)",
                 (y(2, 4), y(2, 6), _decoder_layer(r, 8, 12), 2), {"cross_mask": padding_mask([6, 4])},
                 frozenset({"cross_mask"})),
            Case("b=1, n_dec=5, n_enc=3, d=8, h=4, no mask given", (y(1, 5), y(1, 3), _decoder_layer(r, 8, 12), 4)),
            Case("causal=False with self_mask: the second target has 3 words (b=2, n_dec=4, n_enc=5)",
                 (y(2, 4), y(2, 5), _decoder_layer(r, 8, 16), 2), {"causal": False, "self_mask": padding_mask([4, 3])},
                 frozenset({"noncausal"})),
            Case("causal with self_mask too: the first target has 2 words (b=2, n_dec=4, n_enc=3)",
                 (y(2, 4), y(2, 3), _decoder_layer(r, 8, 12), 2), {"self_mask": padding_mask([2, 4])},
                 frozenset({"causal+self_mask"})),
            Case("activation=gelu and eps=0.3 given (b=1, n_dec=3, n_enc=4)", (y(1, 3), y(1, 4), _decoder_layer(r, 8, 12),
                                                                              2), {"activation": gelu, "eps": 0.3},
                 frozenset({"options"}))]


def _decoder_variant(*, pre_norm=False, keys_from=None, queries_from_input=False, cross_causal=False,
                     self_causal=True, cross_mask_used=True, last_norm=True, ffn_residual=True, self_residual=True,
                     cross_residual=True, inverted_causal=False, ffn_biases=True, cross_residual_from="y1"):
    """The decoder layer with one mistake switched on."""
    def layer(y, z, lw, h, *, causal=True, self_mask=None, cross_mask=None, activation=relu, eps=1e-5):
        keep = self_mask
        if causal and self_causal:
            future = ~causal_mask(y.shape[1]) if inverted_causal else causal_mask(y.shape[1])
            keep = future if keep is None else keep & future
        norm = lambda x, i: layer_norm(x, getattr(lw, f"ln{i}_g"), getattr(lw, f"ln{i}_b"), eps)  # noqa: E731
        if pre_norm:  # x + sublayer(LN(x)), the pre-LN layout
            a, p_self = multi_head_attention(norm(y, 1), lw.self_attn, h, mask=keep, return_weights=True)
            y1 = y + a
            c, p_cross = multi_head_attention(norm(y1, 2), lw.cross_attn, h, mask=cross_mask, context=z,
                                              return_weights=True)
            y2 = y1 + c
            return y2 + ffn(norm(y2, 3), lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation), p_self, p_cross
        a, p_self = multi_head_attention(y, lw.self_attn, h, mask=keep, return_weights=True)
        y1 = norm(y + a if self_residual else a, 1)
        mask = cross_mask if cross_mask_used else None
        if cross_causal:
            future = causal_mask(y.shape[1], z.shape[1])
            mask = future if mask is None else mask & future
        context = {"z": z, "y": y, "y1": y1}[keys_from or "z"]
        c, p_cross = multi_head_attention(y if queries_from_input else y1, lw.cross_attn, h, mask=mask,
                                          context=context, return_weights=True)
        y2 = norm({"y1": y1, "y": y}[cross_residual_from] + c if cross_residual else c, 2)
        f = ffn(y2, lw.W_1, lw.W_2, lw.b_1 if ffn_biases else None, lw.b_2 if ffn_biases else None,
                activation=activation)
        r3 = y2 + f if ffn_residual else f
        return (norm(r3, 3) if last_norm else r3), p_self, p_cross
    return layer


DECODER_LAYER = Spec(
    "seq2seq_decoder_layer", seq2seq_decoder_layer, decoder_cases, "transformer/models/encoder_decoder.py",
    dims=(("b", "n_q", "d"), ("b", "h", "n_q", "n_k"), ("b", "h", "n_q", "n_k")),
    names=("the output", "the self-attention weights", "the cross-attention weights"),
    mistakes=[Mistake("cross-attention's keys and values come from the encoder output z (context=z); its queries "
                      "from the decoder", variant=_decoder_variant(keys_from="y1")),
              Mistake("cross-attention's keys and values come from the encoder output z (context=z)",
                      variant=_decoder_variant(keys_from="y")),
              Mistake("the cross-attention's queries come from the first sub-layer's output, "
                      "LayerNorm(y + self-attention), not from the layer's input y",
                      variant=_decoder_variant(queries_from_input=True)),
              Mistake("post-norm (the original Transformer, as in this lesson): LayerNorm(x + sublayer(x)) after "
                      "each sub-layer, not x + sublayer(LayerNorm(x))", variant=_decoder_variant(pre_norm=True)),
              Mistake("the self-attention over the target is causal (causal=True): position i sees j ≤ i",
                      variant=_decoder_variant(self_causal=False)),
              Mistake("cross-attention is not causal: every target position may read every source word; only "
                      "cross_mask hides the source's padding", variant=_decoder_variant(cross_causal=True)),
              Mistake("pass cross_mask to the cross-attention: it hides the padded source words",
                      variant=_decoder_variant(cross_mask_used=False)),
              Mistake("the third sub-layer ends like the others: LayerNorm(y2 + FFN(y2)) with ln3",
                      variant=_decoder_variant(last_norm=False)),
              Mistake("the FFN has a residual too: LayerNorm(y2 + FFN(y2))", variant=_decoder_variant(ffn_residual=False)),
              Mistake("the self-attention has a residual: y1 = LayerNorm(y + SelfAttention(y)), not LayerNorm of the "
                      "attention alone", variant=_decoder_variant(self_residual=False)),
              Mistake("the cross-attention has a residual: y2 = LayerNorm(y1 + CrossAttention(y1, z))",
                      variant=_decoder_variant(cross_residual=False)),
              Mistake("the cross-attention's residual adds its own input, y1 (the first sub-layer's output), not the "
                      "layer's input y: y2 = LayerNorm(y1 + CrossAttention(y1, z))",
                      variant=_decoder_variant(cross_residual_from="y")),
              Mistake("the FFN has biases: ffn(y2, W_1, W_2, b_1, b_2), as the original Transformer's",
                      variant=_decoder_variant(ffn_biases=False)),
              Mistake("the causal mask is the wrong way round: position i sees the keys j ≤ i (True = may attend), "
                      "so causal_mask(n) as it is, not ~causal_mask(n)", variant=_decoder_variant(inverted_causal=True)),
              Mistake("when causal and a self_mask is given, the self-attention takes both: causal mask & self_mask",
                      tag="causal+self_mask"),
              Mistake("with causal=False there is no causal mask: the self-attention takes self_mask alone",
                      tag="noncausal"),
              Mistake("a mask's shape follows its attention: the self-attention's is over the target, causal_mask(n_dec) "
                      "(and self_mask), the cross-attention's is cross_mask, over z's n_enc keys (context=z)",
                      raises=r"not broadcastable to \(b, h, n_q, n_k\)"),
              Mistake("pass `activation` on to the FFN and `eps` to each LayerNorm (the defaults, ReLU and 1e-5, only "
                      "when they are not given)", tag="options"),
              Mistake("cross-attention is not causal: no causal mask between the target and the source (n_dec and "
                      "n_enc differ)", raises=r"offset must be ≥ 0")])


# --- lesson 15: the encoder layer (BERT's layer too) -------------------------------------------------------------
def _encoder_layer(r, d, d_ff):
    """Random weights of one encoder layer, with biases and β (so a left-out one shows)."""
    m = lambda *s: r.standard_normal(s) / math.sqrt(s[0])  # noqa: E731
    vec = lambda n, c=0.0: c + 0.1 * r.standard_normal(n)  # noqa: E731
    attn = AttentionWeights(m(d, d), m(d, d), m(d, d), m(d, d), vec(d), vec(d), vec(d), vec(d))
    return Seq2SeqEncoderLayer(attn, m(d, d_ff), m(d_ff, d), vec(d, 1), vec(d, 1), vec(d_ff), vec(d), vec(d), vec(d))


def encoder_cases():
    r = _rng(152)
    x = lambda b, n: r.standard_normal((b, n, 8))  # noqa: E731
    return [Case("b=2, n=5, d=8, h=2: the second sentence has 3 words (mask = padding_mask([5, 3]))",
                 (x(2, 5), _encoder_layer(r, 8, 12), 2), {"mask": padding_mask([5, 3])}, frozenset({"mask"})),
            Case("b=1, n=4, d=8, h=4, no mask: every word sees every word", (x(1, 4), _encoder_layer(r, 8, 16), 4)),
            Case("activation=gelu and eps=0.3 given (b=1, n=3, h=2)", (x(1, 3), _encoder_layer(r, 8, 12), 2),
                 {"activation": gelu, "eps": 0.3}, frozenset({"options"}))]


def _encoder_variant(*, pre_norm=False, causal=False, mask_used=True, attention_residual=True, ffn_residual=True,
                     last_norm=True, ffn_biases=True):
    """The encoder layer with one mistake switched on."""
    def layer(x, lw, h, *, mask=None, activation=relu, eps=1e-5):
        keep = mask if mask_used else None
        if causal:
            keep = causal_mask(x.shape[1]) if keep is None else keep & causal_mask(x.shape[1])
        norm = lambda t, i: layer_norm(t, getattr(lw, f"ln{i}_g"), getattr(lw, f"ln{i}_b"), eps)  # noqa: E731
        f = lambda t: ffn(t, lw.W_1, lw.W_2, lw.b_1 if ffn_biases else None,  # noqa: E731
                          lw.b_2 if ffn_biases else None, activation=activation)
        if pre_norm:  # x + sublayer(LN(x)), the pre-LN layout
            a, p = multi_head_attention(norm(x, 1), lw.self_attn, h, mask=keep, return_weights=True)
            x1 = x + a
            return x1 + f(norm(x1, 2)), p
        a, p = multi_head_attention(x, lw.self_attn, h, mask=keep, return_weights=True)
        x1 = norm(x + a if attention_residual else a, 1)
        r2 = x1 + f(x1) if ffn_residual else f(x1)
        return (norm(r2, 2) if last_norm else r2), p
    return layer


ENCODER_LAYER = Spec(
    "seq2seq_encoder_layer", seq2seq_encoder_layer, encoder_cases, "transformer/models/encoder_decoder.py",
    dims=(("b", "n", "d"), ("b", "h", "n", "n")), names=("the output", "the attention weights"),
    mistakes=[Mistake("post-norm (the original Transformer and BERT): LayerNorm(x + sublayer(x)) after each sub-layer, "
                      "not x + sublayer(LayerNorm(x))", variant=_encoder_variant(pre_norm=True)),
              Mistake("an encoder's self-attention is bidirectional: every word sees every word, the later ones too; "
                      "only `mask` (the padding) hides keys", variant=_encoder_variant(causal=True)),
              Mistake("pass `mask` to the self-attention: it hides the padded words of the shorter sentences",
                      variant=_encoder_variant(mask_used=False)),
              Mistake("the self-attention has a residual: x1 = LayerNorm(x + SelfAttention(x)), not LayerNorm of the "
                      "attention alone", variant=_encoder_variant(attention_residual=False)),
              Mistake("the FFN has a residual too: LayerNorm(x1 + FFN(x1))",
                      variant=_encoder_variant(ffn_residual=False)),
              Mistake("the second sub-layer ends like the first: LayerNorm(x1 + FFN(x1)) with ln2",
                      variant=_encoder_variant(last_norm=False)),
              Mistake("the FFN has biases: ffn(x1, W_1, W_2, b_1, b_2), as the original Transformer's and BERT's",
                      variant=_encoder_variant(ffn_biases=False)),
              Mistake("pass `activation` on to the FFN and `eps` to each LayerNorm (the defaults, ReLU and 1e-5, only "
                      "when they are not given)", tag="options")])


# --- lesson 16: packing documents into rows of n_ctx ------------------------------------------------------------
def pack_cases():
    return [Case("the docstring's example: lengths 3, 2, 4 in rows of 5", ([[7, 7, 7], [8, 8], [9, 9, 9, 9]], 5)),
            Case("lengths 4, 3, 2, 1 in rows of 5: the last one fits back in the first row",
                 ([[1] * 4, [2] * 3, [3] * 2, [4]], 5), tags=frozenset({"first-fit"})),
            Case("pad_id=50 given", ([[5, 6], [7, 8, 9]], 4), {"pad_id": 50}, frozenset({"pad"})),
            Case("longest_first=True: lengths 1, 3, 2, 4 in rows of 5", ([[1], [2, 2, 2], [3, 3], [4, 4, 4, 4]], 5),
                 {"longest_first": True}, frozenset({"longest"})),
            Case("longest_first=True: lengths 2, 3, 3, 2 in rows of 5, two rows either way, filled otherwise",
                 ([[1, 1], [2, 2, 2], [3, 3, 3], [4, 4]], 5), {"longest_first": True}, frozenset({"longest"})),
            Case("documents as NumPy arrays, each exactly n_ctx = 3 long", ([np.array([3, 1, 4]), np.array([1, 5, 9])],
                                                                            3)),
            Case("a document of 7 tokens, rows of 5", ([[1, 1], [2] * 7], 5), tags=frozenset({"refuse"}),
                 refuses=ValueError, names=(7,), refusal="document 1 has 7 tokens and a row holds n_ctx=5: no row "
                 "takes it whole")]


PACK_NAMES = ("ids", "doc", "positions", "spans")
PACK_DIMS = (("b", "n"), ("b", "n"), ("b", "n"), ("document", "(row, start, length)"))


def run_pack(fn, case):
    """ids, doc and positions as arrays, and the spans as an array of (row, start, length) rows: a T.Packed, or the
    four of them as a tuple."""
    out = call_plain(fn, case)
    parts = (out.ids, out.doc, out.positions, out.spans) if hasattr(out, "ids") else out
    if not isinstance(parts, (tuple, list)) or len(parts) != 4:
        return out  # compared as it is, and told what it is
    *arrays, spans = parts
    return tuple(np.asarray(a) for a in arrays) + (np.asarray(spans, dtype=np.int64).reshape(-1, 3),)


def _packer(first_fit=True, restart=True, numbered="input", pad_doc=-1):
    """pack_documents with a slip: next fit (only the last row opened takes a document), positions counted along the
    row, documents numbered in the order they are placed, or padding marked pad_doc."""
    def pack(docs, n_ctx, *, pad_id=0, longest_first=False):
        docs = [[int(t) for t in d] for d in docs]
        order = sorted(range(len(docs)), key=lambda i: -len(docs[i])) if longest_first else range(len(docs))
        used, spans = [], [None] * len(docs)  # tokens placed in each row; (row, start, n) of each document
        for k, i in enumerate(order):
            n = len(docs[i])
            rows = range(len(used)) if first_fit else range(len(used) - 1, len(used))
            row = next((r for r in rows if r >= 0 and used[r] + n <= n_ctx), None)
            if row is None:
                used.append(0)
                row = len(used) - 1
            spans[i] = (row, used[row], n, k)
            used[row] += n
        ids = np.full((len(used), n_ctx), pad_id, dtype=np.int64)
        doc = np.full((len(used), n_ctx), pad_doc, dtype=np.int64)
        positions = np.zeros((len(used), n_ctx), dtype=np.int64)
        for i, (row, start, n, k) in enumerate(spans):
            ids[row, start:start + n] = docs[i]
            doc[row, start:start + n] = i if numbered == "input" else k
            positions[row, start:start + n] = np.arange(n) + (0 if restart else start)
        return Packed(ids, doc, positions, tuple(sp[:3] for sp in spans))
    return pack


PACK_DOCUMENTS = Spec(
    "pack_documents", pack_documents, pack_cases, "transformer/core/packing.py", call=run_pack, names=PACK_NAMES,
    dims=PACK_DIMS, dtype_rule="",
    mistakes=[Mistake("first fit: each document goes to the FIRST row with room for it, an earlier row included — "
                      "a row that could not take one document stays open for later, shorter ones",
                      variant=_packer(first_fit=False)),
              Mistake("positions restart at 0 in every document: a token's position is its place in its own "
                      "document, not in the row", variant=_packer(restart=False)),
              Mistake("documents keep their input numbers (doc and spans follow the input order), even when "
                      "longest_first places them in another order", variant=_packer(numbered="placed")),
              Mistake("a padding slot belongs to no document: doc = −1 there (0 is the first document)",
                      variant=_packer(pad_doc=0)),
              Mistake("fill the padding slots of ids with the pad_id given", tag="pad"),
              Mistake("longest_first=True places the documents from the longest down (sorted by length, the "
                      "longest first), each still in the first row with room", tag="longest"),
              Mistake("a document longer than n_ctx fits no row: raise ValueError naming its length and n_ctx before "
                      "placing anything (a first fit would look for a row forever, or cut it)", tag="refuse")])


# --- lesson 16: the document mask of packed rows -----------------------------------------------------
def document_cases():
    row = [0, 0, 0, 1, 1, 2, -1, -1]  # three documents, then two padding slots
    return [Case("doc [[0 0 0 1 1 2 −1 −1]]: three documents and two padding slots", (np.array([row]),)),
            Case("b=2: doc [[0 0 1 1 1 1], [0 1 1 2 2 −1]]", (np.array([[0, 0, 1, 1, 1, 1], [0, 1, 1, 2, 2, -1]]),)),
            Case("causal=False (an encoder's packed row): doc [[0 0 0 1 1 2 −1 −1]]", (np.array([row]),),
                 {"causal": False}, frozenset({"bidirectional"}))]


def _same(doc):  # [b, n, n]: same document (padding included)
    return doc[:, :, None] == doc[:, None, :]


DOCUMENT_MASK = Spec(
    "document_mask", document_mask, document_cases, "transformer/core/masks.py", dims=("b", "1", "n_q", "n_k"),
    mistakes=[Mistake("a padding key (doc = −1) is seen by no one, not even by the padding queries: keep only "
                      "doc[j] ≥ 0", variant=lambda doc, *, causal=True:
                      (_same(doc) & (np.tri(doc.shape[1], dtype=bool) if causal else True))[:, None]),
              Mistake("the causal triangle is the wrong way round: query i sees key j when j ≤ i (np.tril keeps "
                      "those; np.triu keeps the keys after it)", variant=lambda doc, *, causal=True:
                      document_mask(doc, causal=False) & (np.triu(np.ones((doc.shape[1],) * 2, bool)) if causal
                                                          else True)),
              Mistake("inside a document the mask is still causal: query i sees key j only when j ≤ i",
                      variant=lambda doc, *, causal=True: document_mask(doc, causal=False)),
              Mistake("a query sees only its own document's keys: the same doc id, doc[i] = doc[j] — the causal "
                      "mask alone lets it read the documents packed before it", variant=lambda doc, *, causal=True:
                      (np.tri(doc.shape[1], dtype=bool) if causal else np.ones((doc.shape[1],) * 2, bool))
                      & (doc[:, None, None, :] >= 0)),
              Mistake("a query sees only its own document: doc[j] == doc[i] — with ≤ it also reads every document "
                      "packed before its own", variant=lambda doc, *, causal=True:
                      ((doc[:, None, :] <= doc[:, :, None]) & (doc[:, None, :] >= 0) & (doc[:, :, None] >= 0)
                       & (np.tri(doc.shape[1], dtype=bool) if causal else True))[:, None]),
              Mistake("return (b, 1, n, n): the head axis lets the mask broadcast over the h heads of the scores",
                      variant=lambda doc, *, causal=True: document_mask(doc, causal=causal)[:, 0]),
              Mistake("with causal=False a document's tokens see each other both ways", tag="bidirectional")])


# --- lesson 19: scoring heads on a repeated sequence -------------------------------------------------
def _maps(r, lead, n):  # causal attention maps [..., n, n], each row a distribution over keys 0 … i
    s = np.where(np.tri(n, dtype=bool), r.standard_normal((*lead, n, n)) * 2, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def induction_cases():
    r = _rng(191)
    # m − 1 and 2m − 1 (the rows each score averages) differ from L and h, so that a sum is not read as a head count
    return [Case("maps (2, 3, 10, 10): L=2 layers, h=3 heads, m = n_half = 5", (_maps(r, (2, 3), 10), 5)),
            Case("maps (1, 2, 12, 12): m = 6", (_maps(r, (1, 2), 12), 6)),
            Case("maps (2, 1, 8, 8), m = 4", (_maps(r, (2, 1), 8), 4)),
            Case("maps (3, 2, 2, 8, 8): snapshots × L × h in front, m = 4", (_maps(r, (3, 2, 2), 8), 4),
                 tags=frozenset({"lead"}))]


SCORE_NAMES = ("previous token", "induction")


def call_scores(fn, case):
    """The dict's two scores, in SCORE_NAMES' order. Any other answer (a tuple, a dict without a key) raises
    the TypeError a learner reads, which the last mistake below explains."""
    got = call_plain(fn, case)
    missing = [k for k in SCORE_NAMES if not isinstance(got, dict) or k not in got]
    if missing:
        what = f"a dict without {' and '.join(map(repr, missing))}" if isinstance(got, dict) else f"a {type(got).__name__}"
        raise TypeError(f"induction_head_scores returned {what}: expected a dict with the keys "
                        f"{' and '.join(map(repr, SCORE_NAMES))}")
    return tuple(got[k] for k in SCORE_NAMES)


def _scores(prev_rows, prev_key, ind_rows, ind_key):
    """induction_head_scores with other rows and keys: each a function of m giving the rows i (or keys of i)."""
    def variant(maps, n_half):
        W, m = np.asarray(maps), n_half
        i, j = prev_rows(m), ind_rows(m)
        return {"previous token": W[..., i, prev_key(i, m)].mean(-1), "induction": W[..., j, ind_key(j, m)].mean(-1)}
    return variant


RIGHT_PREV = (lambda m: np.arange(1, 2 * m), lambda i, m: i - 1)
RIGHT_IND = (lambda m: np.arange(m, 2 * m - 1), lambda i, m: i - m + 1)


def _summed(names):
    """induction_head_scores with the scores `names` summed over their rows instead of averaged."""
    def variant(maps, n_half):
        right, m = induction_head_scores(maps, n_half), n_half
        rows = {"previous token": 2 * m - 1, "induction": m - 1}  # how many rows each score averages
        return {k: v * rows[k] if k in names else v for k, v in right.items()}
    return variant


SUMMED = "a score is a mean over its rows (.mean(axis=-1)), not a sum: 1 must mean a perfect head"
INDUCTION_SCORES = Spec(
    "induction_head_scores", induction_head_scores, induction_cases, "transformer/tasks/induction.py",
    dims=("L", "h"), names=SCORE_NAMES, call=call_scores,
    mistakes=[Mistake("the induction head reads the token AFTER the earlier copy: query i of the second copy finds "
                      "its token's earlier copy at i − m, and the token to copy sits at i − m + 1, not i − m",
                      variant=_scores(*RIGHT_PREV, RIGHT_IND[0], lambda i, m: i - m)),
              Mistake("the induction score averages the rows of the second copy, i = m … 2m − 2: row m − 1 is the "
                      "first copy's last token, with no earlier copy of itself to look back to",
                      variant=_scores(*RIGHT_PREV, lambda m: np.arange(m - 1, 2 * m - 1), RIGHT_IND[1])),
              Mistake("the induction score averages rows i = m … 2m − 2 only: the whole diagonal (np.diagonal with "
                      "offset −(m − 1)) also takes row m − 1, the first copy's last token, and row 2m − 1, whose "
                      "token t_m has nothing after its first copy to look at",
                      variant=_scores(*RIGHT_PREV, lambda m: np.arange(m - 1, 2 * m), RIGHT_IND[1])),
              *(Mistake(SUMMED, variant=_summed(names)) for names in (SCORE_NAMES, SCORE_NAMES[:1], SCORE_NAMES[1:])),
              Mistake("the induction score reads the rows i = m … 2m − 2 (np.arange(m, 2 * m - 1)): the last query, "
                      "2m − 1, holds t_m, and nothing follows t_m's earlier copy in the first half",
                      variant=_scores(*RIGHT_PREV, lambda m: np.arange(m, 2 * m), RIGHT_IND[1])),
              Mistake("the previous-token score starts at row i = 1: row 0 has no key before it (index −1 wraps to "
                      "the last key, whose weight is 0)",
                      variant=_scores(lambda m: np.arange(0, 2 * m), RIGHT_PREV[1], *RIGHT_IND)),
              Mistake("P[..., i, j] is query i's weight on key j: the previous-token score reads row i, column i − 1 "
                      "(W[..., i, i - 1]); above the diagonal a causal map holds only zeros",
                      variant=lambda maps, n_half: {**induction_head_scores(maps, n_half), "previous token": np.asarray(
                          maps)[..., np.arange(0, 2 * n_half - 1), np.arange(1, 2 * n_half)].mean(-1)}),
              Mistake("the previous-token score reads P[i, i − 1], the key just before the query, for i = 1 … 2m − 1",
                      variant=_scores(lambda m: np.arange(2 * m), lambda i, m: i, *RIGHT_IND)),
              Mistake("P[..., i, j] is query i's weight on key j: the query is the second-to-last axis, the key "
                      "the last", variant=lambda maps, n_half: induction_head_scores(np.swapaxes(maps, -1, -2), n_half)),
              Mistake("return a dict with the two keys 'previous token' and 'induction', each (…, L, h)",
                      raises=r"returned .*expected a dict"),
              Mistake("maps may hold more axes in front of L and h (snapshots of a run): index the last two, "
                      "maps[..., i, j], and average over the rows, the last axis of what that gives", tag="lead")])


# --- lesson 19: the share of the second half predicted right ---------------------------------------------------------
def accuracy_cases():
    r = _rng(191)

    def case(label, b, n_half, wrong, tags=()):
        """ids: b rows of a random first half repeated; pred_ids: the next token at every position, then `wrong`
        of the scored guesses (positions n_half … 2·n_half − 2) changed, and every unscored one random."""
        first = np.stack([r.permutation(np.arange(2, 40))[:n_half] for _ in range(b)])  # [b, n_half]
        ids = np.concatenate([first, first], axis=1)  # [b, 2·n_half]
        pred = np.concatenate([ids[:, 1:], r.integers(2, 40, (b, 1))], axis=1)  # [b, 2·n_half]: the next token
        pred[:, :n_half] = r.integers(2, 40, (b, n_half))  # the first half is not predictable: guesses at random
        scored = [(row, col) for row in range(b) for col in range(n_half, 2 * n_half - 1)]
        for k in r.choice(len(scored), size=wrong, replace=False):
            row, col = scored[k]
            pred[row, col] = 1  # a token no row holds
        return Case(label, (pred, ids), tags=frozenset(tags))

    return [case("b=1, n_half=4, every guess right", 1, 4, 0), case("b=1, n_half=5, 1 of 4 wrong", 1, 5, 1),
            case("b=3, n_half=6, 4 of 15 wrong", 3, 6, 4), case("b=2, n_half=2: one scored position a row", 2, 2, 1),
            case("b=4, n_half=8, 9 of 28 wrong", 4, 8, 9)]


def _accuracy(first, count=False):
    """induction_accuracy with a slip: pred_ids[:, first:stop] against ids[:, first + shift:], or a count."""
    def variant(pred_ids, ids):
        n_half, pred, ids = ids.shape[1] // 2, np.asarray(pred_ids), np.asarray(ids)
        lo, shift = first(n_half)
        right = pred[:, lo:ids.shape[1] - shift] == ids[:, lo + shift:]
        return float(right.sum() if count else right.mean())
    return variant


INDUCTION_ACCURACY = Spec(
    "induction_accuracy", induction_accuracy, accuracy_cases, "transformer/tasks/induction_data.py",
    mistakes=[Mistake("pred_ids[:, i] is the guess for the NEXT token, ids[:, i + 1]: compare pred_ids[:, n_half:-1] "
                      "with ids[:, n_half + 1:]", variant=_accuracy(lambda m: (m, 0))),
              Mistake("only the repeated half can be predicted: score the guesses at positions n_half … 2·n_half − 2, "
                      "not the first half's random tokens", variant=_accuracy(lambda m: (0, 1))),
              Mistake("the second half's first token cannot be predicted: nothing says the sequence repeats until it "
                      "has begun, so the guess at position n_half − 1 is not scored",
                      variant=_accuracy(lambda m: (m - 1, 1))),
              Mistake("a share, between 0 and 1: the mean of the right guesses, not their count",
                      variant=_accuracy(lambda m: (m, 1), count=True))])
