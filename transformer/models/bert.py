"""A real encoder: all-MiniLM-L6-v2, a 6-layer BERT, in NumPy (notes 000 §2.4, 002, 003).

An encoder reads the whole sentence at once, so its self-attention is *bidirectional*:
every token may look at every other token, before and after it (a decoder's causal
mask would hide the future). The only mask left is the *padding* mask, which hides
the [PAD] keys added to make a batch rectangular. Each layer is the original
Transformer's post-norm encoder layer (note 003), the package's one: `seq2seq_encoder_layer`
(models/encoder_decoder.py) with GELU where the 2017 paper has ReLU, and BERT's eps = 1e-12:

    ids (b, n) -> word + position + token-type embeddings -> LayerNorm          (b, n, d)
    L × [ x = LayerNorm(x + MultiHead(x, mask)) ; x = LayerNorm(x + FFN_GELU(x)) ]
    mean over real tokens -> divide by the L2 norm                               (b, d)

The sentence embedding is the mean of the last hidden states over the real tokens,
scaled to length 1, so the cosine similarity of two sentences is a dot product.

>>> from transformer.models.bert_files import load_minilm         # the loader builds it from a folder
>>> model = load_minilm()                                          # doctest: +SKIP
>>> e = model.embed(["A dog chases a squirrel.", "A puppy runs after a squirrel."])  # doctest: +SKIP
>>> float(e[0] @ e[1])                                             # doctest: +SKIP
0.8...
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import bert_checks as checks
from ..backend import compute_dtype, get_xp, progress_enabled, to_numpy
from ..require import checked_by
from ..core.embedding import embed
from ..core.layers import gelu, layer_norm
from ..core.masks import causal_mask, padding_mask
from ..core.packing import map_rows, pack_documents
from ..tokenizers.wordpiece import WordPieceTokenizer
from .encoder_decoder import Seq2SeqEncoderLayer, seq2seq_encoder_layer

__all__ = [
    "BertConfig", "BertLayer", "BertWeights", "EncoderOutput",
    "bert_embeddings", "encoder_mask", "bert_encode", "mean_pool", "l2_normalize", "MiniLM",
]


@dataclass(frozen=True)
class BertConfig:
    """all-MiniLM-L6-v2's sizes; the field names are the dimension legend."""
    v: int = 30522  # vocabulary (WordPiece pieces)
    d: int = 384  # d_model, the width of every hidden state
    h: int = 12  # attention heads (h_kv = h: plain multi-head attention)
    L: int = 6  # encoder layers
    d_ff: int = 1536  # FFN inner width, 4·d
    n_max: int = 512  # rows of the learned position table: the longest input
    n_types: int = 2  # token types: sentence A / sentence B
    eps: float = 1e-12  # LayerNorm epsilon (BERT's; Llama-era models use 1e-5 or 1e-6)
    n_seq: int | None = None  # sentence-transformers cuts inputs to this many tokens; None: min(256, n_max)

    def __post_init__(self):
        """Checked as a config read from a file is (errors name the field); then plain numbers."""
        checks.bert_config(self)
        if self.n_seq is None:  # sentence-transformers' cut, within the learned positions
            object.__setattr__(self, "n_seq", min(256, int(self.n_max)))
        for f in ("v", "d", "h", "L", "d_ff", "n_max", "n_types", "n_seq"):
            object.__setattr__(self, f, int(getattr(self, f)))  # NumPy integers become plain ints
        object.__setattr__(self, "eps", float(self.eps))

    @property
    def d_h(self) -> int:  # head size d / h = 32
        return self.d // self.h


# One BERT layer's weights are one original-Transformer encoder layer's: self_attn (W_q, W_k, W_v, W_o,
# all (d, d), with biases), W_1 (d, d_ff), b_1, W_2 (d_ff, d), b_2, and both LayerNorms' γ and β.
# BertLayer is that record's older name, kept for code written against it.
BertLayer = Seq2SeqEncoderLayer


@dataclass
class BertWeights:
    W_E: Any  # (v, d) word embeddings
    W_pos: Any  # (n_max, d) learned absolute positions
    W_type: Any  # (n_types, d) token-type embeddings
    ln_g: Any  # (d,) LayerNorm over the summed embeddings
    ln_b: Any  # (d,)
    layers: list[Seq2SeqEncoderLayer] = field(default_factory=list)  # L layers, run by seq2seq_encoder_layer


# ---------------------------------------------------------------- the forward pass
# Each public function checks its input once at the door (bert_checks.py, same name). Inside it the
# calls are trusted, their checks skipped: bert_encode calls seq2seq_encoder_layer L times, and the
# layers would otherwise re-check the same weights and shapes on every call.

@checked_by(checks.bert_embeddings)
def bert_embeddings(ids, w: BertWeights, cfg: BertConfig, token_types=None,
                    positions=None):  # [b, n] -> [b, n, d]
    """x = LayerNorm(W_E[ids] + W_pos[positions] + W_type[types]); positions default to
    0 … n-1 in every row, types to 0 (sentence A)."""
    xp = get_xp(ids)
    n = ids.shape[1]
    if token_types is None:
        token_types = xp.zeros_like(ids)
    x = embed(ids, w.W_E)  # [b, n, d]
    if positions is None:
        x = x + w.W_pos[None, :n, :]  # + [1, n, d]: position j gets row j
    else:
        x = x + embed(positions, w.W_pos)  # + [b, n, d]: each slot's own position (packed rows)
    x = x + embed(token_types, w.W_type)  # + [b, n, d]
    return layer_norm(x, w.ln_g, w.ln_b, cfg.eps)  # [b, n, d]


@checked_by(checks.encoder_mask)
def encoder_mask(lengths, n: int, causal: bool = False):  # [b] -> [b, 1, 1, n] or [b, 1, n, n]
    """Which keys each query may attend to (True = may).

    Bidirectional (the encoder): every real key, none of the [PAD] keys.
    causal=True runs the same weights as if they were a decoder's: also no key to the right.
    """
    xp = get_xp(lengths)
    keep = padding_mask(lengths, n)  # [b, 1, 1, n]: hides padded keys, for every query
    if causal:
        keep = keep & causal_mask(n, xp=xp)[None, None, :, :]  # [b, 1, n, n]
    return keep


@dataclass
class EncoderOutput:
    """Everything a lesson may want from one forward pass (arrays on the model's backend)."""
    hidden: Any  # (b, n, d) the last layer's hidden states
    hidden_states: list  # L + 1 arrays (b, n, d): the embeddings, then each layer's output
    weights: list  # L arrays (b, h, n, n): attention weights, rows = queries, columns = keys
    lengths: Any  # (b,) real tokens per row; positions ≥ lengths[i] are [PAD]


@checked_by(checks.bert_encode)
def bert_encode(ids, lengths, w: BertWeights, cfg: BertConfig, *, token_types=None,
                causal: bool = False, keep: bool = True, mask=None,
                positions=None) -> EncoderOutput:  # [b, n], [b] -> EncoderOutput
    """Run the encoder on right-padded ids; row i holds lengths[i] real tokens.

    keep=False drops the per-layer hidden states and weights as it goes (only `hidden` is
    returned): for a batch of 32 × 256 tokens the weights alone are 6 × 100 MB.
    mask / positions: a boolean mask broadcastable to (b, h, n, n) used instead of the
    padding mask, and (b, n) learned-position indices; both for packed rows, where
    `lengths` may be None (`MiniLM.embed_packed`).
    """
    n = ids.shape[1]
    if mask is None:
        mask = encoder_mask(lengths, n, causal)  # [b, 1, 1, n] or [b, 1, n, n]; padding_mask checks lengths
    x = bert_embeddings(ids, w, cfg, token_types, positions)  # [b, n, d]
    states, weights = [x], []
    for lw in w.layers:  # post-norm: LayerNorm(x + MultiHead(x)), then LayerNorm(x + FFN_GELU(x))
        x, p = seq2seq_encoder_layer(x, lw, cfg.h, mask=mask, activation=gelu, eps=cfg.eps)  # [b, n, d], [b, h, n, n]
        if keep:
            states.append(x)
            weights.append(p)
    return EncoderOutput(x, states if keep else [], weights, lengths)


@checked_by(checks.mean_pool)
def mean_pool(hidden, lengths):  # [b, n, d], [b] -> [b, d]
    """Mean of the hidden states over the real tokens only: [PAD] rows do not count.

        e_i = (1 / lengths_i) · Σ_{j < lengths_i} hidden[i, j]

    float16 is summed in float32 (200 states of 500 overflow float16; 3,000 of 1 lost a third) and
    rounded once. A row of length 0 gives zeros.
    """
    xp = get_xp(hidden, lengths)
    n, dtype = hidden.shape[1], hidden.dtype
    hidden = xp.astype(hidden, compute_dtype(xp, dtype), copy=False)
    real = xp.arange(n)[None, :] < lengths[:, None]  # [b, n]
    real = xp.astype(real, hidden.dtype)[:, :, None]  # [b, n, 1], 1.0 = real token
    total = xp.sum(hidden * real, axis=1)  # [b, d]
    count = xp.clip(xp.sum(real, axis=1), min=1.0)  # [b, 1]; the floor only guards an empty row (total 0)
    return xp.astype(total / count, dtype, copy=False)  # [b, d]


@checked_by(checks.l2_normalize)
def l2_normalize(x, eps: float = 1e-12):  # [..., d] -> [..., d]
    """x / max(‖x‖₂, eps): unit length, so a dot product is a cosine (a zero row stays zero).

    float16 is computed in float32 and rounded once: in float16, eps = 1e-12 is 0 (a zero row gave NaN)
    and x² overflows from |x| = 256.
    """
    xp = get_xp(x)
    dtype = x.dtype
    x = xp.astype(x, compute_dtype(xp, dtype), copy=False)
    norm = xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))  # [..., 1]
    return xp.astype(x / xp.clip(norm, min=eps), dtype, copy=False)  # [..., d]


PACKED_PASS_BYTES = 1 << 26  # embed_packed runs as many rows at once as keep one layer's scores within 64 MiB


def packed_rows_per_pass(cfg: BertConfig, n_ctx: int) -> int:
    """Packed rows whose float32 scores [rows, h, n_ctx, n_ctx] fit PACKED_PASS_BYTES: 5 at n_ctx = 512."""
    return max(1, PACKED_PASS_BYTES // (4 * cfg.h * n_ctx * n_ctx))


# ---------------------------------------------------------------- the model

class MiniLM:
    """all-MiniLM-L6-v2: weights, config and tokenizer together.

    embed(texts) -> (b, d) unit sentence embeddings (arrays of the model's backend);
    forward(texts) -> EncoderOutput with every layer's hidden states and attention weights;
    attention_weights(text) -> per layer a NumPy (h, n, n) array, for plots (iter_attention_weights:
    one layer at a time).
    """

    @checked_by(checks.minilm_init)
    def __init__(self, weights: BertWeights, config: BertConfig, tokenizer: WordPieceTokenizer, xp):
        # The weights and the tokenizer's ids are checked once, here: every method's door then trusts
        # the forward pass it runs (bert_encode and its L layers).
        self.weights, self.config, self.tokenizer, self.xp = weights, config, tokenizer, xp

    @checked_by(checks.minilm_forward)
    def forward(self, texts, *, causal: bool = False, max_length: int | None = None,
                keep: bool = True) -> EncoderOutput:
        """Tokenize, pad and encode a batch (a single str is a batch of one).

        max_length: cut each text to this many tokens, [CLS] and [SEP] included; default
        config.n_seq (256, as sentence-transformers), at most config.n_max (512 positions).
        """
        max_length = self.config.n_seq if max_length is None else max_length
        return self._run(self.tokenizer.encode_batch(texts, max_length), causal, keep)

    def _run(self, batch, causal, keep) -> EncoderOutput:  # forward of a tokenized batch
        ids = self.xp.asarray(batch.ids)  # [b, n], ids in [0, v): checked in __init__; moved to the backend once
        lengths = self.xp.asarray(batch.lengths)  # [b]
        return bert_encode(ids, lengths, self.weights, self.config, causal=causal, keep=keep)

    @checked_by(checks.minilm_embed)
    def embed(self, texts, *, batch_size: int = 32):  # list of b str -> [b, d]
        """Sentence embeddings as sentence-transformers computes them: mean pooling, then L2 norm. More than one
        batch shows a progress bar on stderr (TQDM_DISABLE=1 hides it)."""
        from tqdm.auto import tqdm

        texts = [texts] if isinstance(texts, str) else texts  # one str is a batch of one
        # Longest first, so each batch pads to about its own length instead of the longest
        # text's (sentence-transformers does the same). The padding mask makes every row
        # independent of its batch-mates, so sorting changes no value; the order is undone below.
        rows = [self.tokenizer.encode(t, self.config.n_seq) for t in texts]  # [CLS] ids… [SEP], each cut to n_seq
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        parts = []
        hidden = len(rows) <= batch_size or not progress_enabled()  # one batch: no bar
        for i in tqdm(range(0, len(rows), batch_size), desc="embedding", unit="batch", leave=False, disable=hidden):
            out = self._run(self.tokenizer.pad([rows[j] for j in order[i:i + batch_size]]), False, False)
            parts.append(l2_normalize(mean_pool(out.hidden, out.lengths)))  # [batch, d], bounded memory
        e = self.xp.concat(parts, axis=0)  # [b, d], rows in sorted order
        where = self.xp.asarray(np.argsort(np.asarray(order)))  # position of each input in the sorted order
        return self.xp.take(e, where, axis=0)  # [b, d], rows in input order

    @checked_by(checks.minilm_embed_packed)
    def embed_packed(self, texts, n_ctx: int | None = None, *, restart_positions: bool = True):  # b str -> [b, d]
        """`embed`, with the texts packed back to back into rows of n_ctx tokens.

        Each text keeps its [CLS] … [SEP] and sees only itself (`document_mask`, not causal);
        its embedding is the mean over its own slots. With positions restarted at 0 in each
        text, the embeddings equal `embed`'s. restart_positions=False numbers each row
        0 … n_ctx − 1 straight through, as if one long text: the learned positions then tell
        every text but the first that it sits deep inside a document, and its embedding moves.
        n_ctx defaults to the total length, at most config.n_max (512 learned positions).
        The rows run a few at a time (packed_rows_per_pass), so memory does not grow
        with the number of texts.
        """
        texts = [texts] if isinstance(texts, str) else texts  # one str is a batch of one
        docs = [self.tokenizer.encode(t, self.config.n_seq) for t in texts]  # ids with [CLS] … [SEP]
        n_ctx = min(sum(map(len, docs)), self.config.n_max) if n_ctx is None else n_ctx
        p = pack_documents(docs, n_ctx, pad_id=self.tokenizer.pad_id)
        def run(part):  # a few rows at a time (packed_rows_per_pass) -> [rows, n_ctx, d]
            ids, positions, mask = part.model_inputs(self.xp, causal=False, restart_positions=restart_positions)
            return bert_encode(ids, None, self.weights, self.config, mask=mask, positions=positions, keep=False).hidden
        rows = map_rows(run, p, packed_rows_per_pass(self.config, n_ctx))  # per text [n_i, d]
        return l2_normalize(self.xp.stack([self.xp.mean(r, axis=0) for r in rows]))  # [b, d]

    def tokens(self, text: str) -> list[str]:
        """The pieces the model sees, [CLS] and [SEP] included: labels for attention plots."""
        return self.tokenizer.convert_ids_to_tokens(self.tokenizer.encode(text, self.config.n_seq))

    @checked_by(checks.minilm_iter_attention_weights)
    def iter_attention_weights(self, text: str, *, causal: bool = False):  # -> yields L × [h, n, n] NumPy
        """Each layer's weights[head, query, key], one layer at a time: a layer runs only when it
        is asked for, so memory holds one layer's (h, n, n), never all L of them."""
        batch = self.tokenizer.encode_batch([text], self.config.n_seq)  # [CLS] ids… [SEP], cut to n_seq
        ids, lengths = self.xp.asarray(batch.ids), self.xp.asarray(batch.lengths)  # [1, n], [1]
        mask = encoder_mask(lengths, ids.shape[1], causal)  # [1, 1, 1, n] or [1, 1, n, n]
        x = bert_embeddings(ids, self.weights, self.config)  # [1, n, d]; ids checked in __init__
        for lw in self.weights.layers:  # the layer bert_encode runs
            x, p = seq2seq_encoder_layer(x, lw, self.config.h, mask=mask, activation=gelu,
                                         eps=self.config.eps)  # [1, n, d], [1, h, n, n]
            yield to_numpy(p[0, ...])  # [h, n, n]

    @checked_by(checks.minilm_attention_weights)
    def attention_weights(self, text: str, *, causal: bool = False, layer: int | None = None,
                          head: int | None = None):
        """One text -> L NumPy arrays (h, n, n): weights[l][head, query, key].

        causal=True runs the same weights under a causal mask: how the sentence would be
        read by a decoder, which cannot look right. layer=l (−1 the last) returns that
        layer's (h, n, n) only, from l + 1 layers; head=k keeps that head, (n, n).
        """
        maps = self.iter_attention_weights(text, causal=causal)  # computed as consumed
        if layer is not None:
            m = next(itertools.islice(maps, layer % self.config.L, None))  # [h, n, n]
            return m if head is None else m[head]
        return [m if head is None else m[head] for m in maps]  # L × [h, n, n] or L × [n, n]

    @checked_by(checks.minilm_hidden_states)
    def hidden_states(self, text: str) -> list[np.ndarray]:
        """One text -> L + 1 NumPy arrays (n, d): the embeddings, then each layer's output."""
        return [to_numpy(s[0, ...]) for s in self.forward([text]).hidden_states]

