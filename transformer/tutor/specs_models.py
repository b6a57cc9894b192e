"""The checker's cases for lessons 12 to 16 and 19: sentence embeddings, a decoder's parameters and KV bytes
counted from its config, paged attention, the encoder–decoder's decoder layer, the document mask of packed
rows, and the scores that find induction heads."""
from __future__ import annotations

import math

import numpy as np

from ..core.heads import AttentionWeights, multi_head_attention
from ..core.layers import ffn, layer_norm, relu
from ..core.masks import causal_mask, document_mask, padding_mask
from ..core.online_softmax import exp_minus
from ..core.paged_kv import paged_attention
from ..models.bert import l2_normalize, mean_pool
from ..models.configs import ModelConfig, load_config
from ..models.counting import count_parameters, kv_cache_bytes_per_token
from ..models.encoder_decoder import Seq2SeqDecoderLayer, seq2seq_decoder_layer
from ..tasks.induction import induction_head_scores
from .cases import Case, Mistake, Spec, call_plain

__all__ = ["MEAN_POOL", "L2_NORMALIZE", "COUNT_PARAMETERS", "KV_BYTES_PER_TOKEN", "PAGED_ATTENTION", "DECODER_LAYER",
           "DOCUMENT_MASK", "INDUCTION_SCORES"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 12: a sentence embedding from the hidden states --------------------------------------
def pool_cases():
    r = _rng(121)
    h = lambda *s: r.standard_normal(s) + 0.5  # noqa: E731
    pad = lambda x, lengths: np.where(np.arange(x.shape[1])[None, :, None] < np.asarray(lengths)[:, None, None],
                                      x, 7.0)  # noqa: E731 - [PAD] rows hold their own (large) states
    return [Case("hidden (3, 5, 4), lengths [5, 2, 3]: two rows padded", (pad(h(3, 5, 4), [5, 2, 3]), np.array([5, 2, 3])),
                 tags=frozenset({"padded"})),
            Case("hidden (1, 4, 6), lengths [4]: no padding", (h(1, 4, 6), np.array([4]))),
            Case("float32 hidden (2, 6, 3), lengths [1, 6]", (pad(h(2, 6, 3), [1, 6]).astype(np.float32), np.array([1, 6])),
                 tags=frozenset({"padded", "float32"}))]


def _real(hidden, lengths, extra=0):  # [b, n, 1]: 1.0 where j < length (+ extra)
    return (np.arange(hidden.shape[1])[None, :] < np.asarray(lengths)[:, None] + extra)[:, :, None]


def _torch_mean_pool(case):  # sentence-transformers' pooling: (h · mask).sum / mask.sum, in torch
    import torch
    h, lengths = torch.from_numpy(case.args[0]), torch.from_numpy(case.args[1])
    mask = (torch.arange(h.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1).to(h.dtype)  # [b, n, 1]
    return ((h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy()


POOL_DIMS = ("b", "d")
MEAN_POOL = Spec(
    "mean_pool", mean_pool, pool_cases, "transformer/models/bert.py", dims=POOL_DIMS,
    mistakes=[Mistake("[PAD] rows do not count: average only the real tokens, j < lengths[i]",
                      variant=lambda hidden, lengths: hidden.mean(axis=1)),
              Mistake("divide by the number of real tokens, lengths[i], not by n: the padded slots are not tokens",
                      variant=lambda hidden, lengths: (hidden * _real(hidden, lengths)).sum(1) / hidden.shape[1]),
              Mistake("the real tokens of a row of length 3 are 0, 1, 2: j < length, not j ≤ length",
                      variant=lambda hidden, lengths: (hidden * _real(hidden, lengths, 1)).sum(1)
                      / np.minimum(np.asarray(lengths) + 1, hidden.shape[1])[:, None]),
              Mistake("the real tokens of a row of length 3 are 0, 1, 2: j < length, not j ≤ length (the sum takes "
                      "one [PAD] row)", variant=lambda hidden, lengths: (hidden * _real(hidden, lengths, 1)).sum(1)
                      / np.asarray(lengths)[:, None]),
              Mistake("average over the n positions (axis=1), not over the d features", variant=lambda hidden, lengths:
                      (hidden * _real(hidden, lengths)).sum(-1) / np.asarray(lengths)[:, None]),
              Mistake("divide each sentence's (b, d) sum by its length as a column, lengths[:, None] of shape (b, 1), "
                      "so that it broadcasts over the d features", raises=r"could not be broadcast")],
    torch=_torch_mean_pool)


def normalize_cases():
    r = _rng(122)
    x = r.standard_normal((3, 4)) * 3
    zero = x.copy()
    zero[1] = 0.0
    return [Case("x (3, 4)", (x,)), Case("x (2, 3, 5): b=2, n=3, d=5", (r.standard_normal((2, 3, 5)),)),
            Case("x (3, 4) with row 1 all zeros", (zero,), tags=frozenset({"zero"})),
            Case("float32 x (2, 8)", (r.standard_normal((2, 8)).astype(np.float32),), tags=frozenset({"float32"}))]


def _torch_normalize(case):
    import torch
    import torch.nn.functional as F
    return F.normalize(torch.from_numpy(case.args[0]), dim=-1, eps=case.kwargs.get("eps", 1e-12)).numpy()


L2_NORMALIZE = Spec(
    "l2_normalize", l2_normalize, normalize_cases, "transformer/models/bert.py", dims=("b", "d"),
    mistakes=[Mistake("divide by the length ‖x‖₂ = √(Σ x²), the square root of the sum of squares",
                      variant=lambda x, eps=1e-12: x / np.maximum((x * x).sum(-1, keepdims=True), eps)),
              Mistake("the length is the Euclidean one, √(Σ x²), not the sum of |x|",
                      variant=lambda x, eps=1e-12: x / np.maximum(np.abs(x).sum(-1, keepdims=True), eps)),
              Mistake("each vector is a row: take the length over the last axis (axis=-1, keepdims=True)",
                      variant=lambda x, eps=1e-12: x / np.maximum(np.sqrt((x * x).sum(0, keepdims=True)), eps)),
              Mistake("a zero row must stay zero, not NaN: divide by max(‖x‖₂, eps), the `eps` argument",
                      tag="zero"),
              Mistake("keep the length's axis (keepdims=True): a (…, 1) length broadcasts over the d numbers of its row",
                      raises=r"could not be broadcast")],
    torch=_torch_normalize)


# --- lesson 13: counting a Llama-style decoder from its config -----------------------------------------
TINY = ModelConfig("tiny", "decoder", L=2, d=16, h=4, h_kv=2, d_h=4, d_ff=24, v=50, n_ctx=64, tied=False)
WIDE_HEADS = ModelConfig("wide heads (h·d_h ≠ d)", "decoder", L=3, d=12, h=4, h_kv=1, d_h=5, d_ff=20, v=30, n_ctx=32)


def config_cases():
    """Llama-style decoders (RMSNorm, SwiGLU, RoPE, no biases): the lesson's three and two small ones."""
    def case(config, tags=()):
        c = load_config(config)
        gqa = {"gqa"} if c.h_kv < c.h else set()
        return Case(f"{c.name}: L={c.L}, d={c.d}, h={c.h}, h_kv={c.h_kv}, d_h={c.d_h}, d_ff={c.d_ff}, v={c.v}, "
                    f"{'tied' if c.tied else 'untied'} head", (c,), tags=frozenset({*tags, *gqa,
                                                                                    "tied" if c.tied else "untied"}))
    return [case("smollm2-135m"), case("phi-3-mini"), case("llama-3-8b"), case(TINY), case(WIDE_HEADS, {"d_h"})]


def _params(c, *, head=None, kv_heads=None, ffn=3, norms=None, q_width=None, kv_width=None):
    """A Llama-style count with one part changed: the head (v·d or 0), the K/V heads, the FFN's matrices,
    the norms, the width of W_q and W_o, the width of W_k and W_v."""
    kv = (c.h_kv if kv_heads is None else kv_heads) * c.d_h if kv_width is None else kv_width
    qw = c.h * c.d_h if q_width is None else q_width
    attention = c.d * qw + 2 * c.d * kv + qw * c.d  # W_q, W_k, W_v, W_o
    norm_count = 2 * c.L + 1 if norms is None else norms
    lm_head = (0 if c.tied else c.v * c.d) if head is None else head
    return c.v * c.d + c.L * (attention + ffn * c.d * c.d_ff) + norm_count * c.d + lm_head


COUNT_PARAMETERS = Spec(
    "count_parameters", count_parameters, config_cases, "transformer/models/counting.py",
    mistakes=[Mistake("a tied head reuses the embedding table: count its v·d numbers once (config.tied)",
                      variant=lambda config: _params(config, head=config.v * config.d)),
              Mistake("an untied head (config.tied False) is a matrix of its own: add v·d",
                      variant=lambda config: _params(config, head=0)),
              Mistake("W_k and W_v have h_kv heads, not h: each is d × h_kv·d_h (GQA shares them)",
                      variant=lambda config: _params(config, kv_heads=config.h)),
              Mistake("SwiGLU has three matrices: W_gate and W_up (d × d_ff) and W_down (d_ff × d)",
                      variant=lambda config: _params(config, ffn=2)),
              Mistake("the four attention matrices are not all d × d: W_q and W_o are d × h·d_h (and back), W_k and "
                      "W_v d × h_kv·d_h (GQA shares them)",
                      variant=lambda config: _params(config, q_width=config.d, kv_width=config.d)),
              Mistake("each RMSNorm has d numbers (γ): two per layer and a final one, (2L + 1)·d in all",
                      variant=lambda config: _params(config, norms=0)),
              Mistake("a layer has two RMSNorms, one before attention and one before the FFN: (2L + 1)·d in all",
                      variant=lambda config: _params(config, norms=config.L + 1)),
              Mistake("the final RMSNorm after the last layer has d numbers too: (2L + 1)·d norms in all",
                      variant=lambda config: _params(config, norms=2 * config.L)),
              Mistake("W_q is d × h·d_h and W_o is h·d_h × d: h·d_h need not equal d (config.d_h)",
                      variant=lambda config: _params(config, q_width=config.d)),
              Mistake("W_k and W_v are d × h_kv·d_h: use config.d_h, which need not be d / h", tag="d_h")])


def bytes_cases():
    cases = config_cases()
    return ([Case(c.label, c.args, tags=c.tags) for c in cases[:3]]  # the default dtype, float16
            + [Case(cases[2].label + ', dtype="float64"', cases[2].args, {"dtype": "float64"}, cases[2].tags | {"dtype"}),
               Case(cases[3].label, cases[3].args, tags=cases[3].tags),
               Case(cases[4].label + ", dtype=np.float64", cases[4].args, {"dtype": np.float64},
                    cases[4].tags | {"dtype"})])


def _bytes(config, dtype="float16", *, kv=2, heads=None, layers=None, width=None, per=None):
    c = config
    size = np.dtype(dtype).itemsize if per is None else per
    return (kv * (c.L if layers is None else layers) * (c.h_kv if heads is None else heads)
            * (c.d_h if width is None else width) * size)


KV_BYTES_PER_TOKEN = Spec(
    "kv_cache_bytes_per_token", kv_cache_bytes_per_token, bytes_cases, "transformer/models/counting.py",
    mistakes=[Mistake("the cache holds K AND V: 2 · L · h_kv · d_h numbers a token",
                      variant=lambda config, dtype="float16": _bytes(config, dtype, kv=1)),
              Mistake("only the h_kv key/value heads are cached (GQA, MQA): h_kv · d_h numbers of K and of V a layer, "
                      "not h · d_h (= d)", variant=lambda config, dtype="float16": _bytes(config, dtype, heads=config.h)),
              Mistake("every one of the L layers keeps its own K and V",
                      variant=lambda config, dtype="float16": _bytes(config, dtype, layers=1)),
              Mistake("a head holds d_h numbers of K (and of V), and h_kv · d_h need not be d",
                      variant=lambda config, dtype="float16": _bytes(config, dtype, heads=1, width=config.d)),
              Mistake("bytes, not bits: a float16 number takes 2 bytes (np.dtype(dtype).itemsize)",
                      variant=lambda config, dtype="float16": _bytes(config, dtype, per=8 * np.dtype(dtype).itemsize)),
              Mistake("use the `dtype` argument: np.dtype(dtype).itemsize bytes a number (float16: 2, float64: 8)",
                      variant=lambda config, dtype="float16": _bytes(config))])


# --- lesson 14: attention through a block table ------------------------------------------------------
def _pool(r, blocks, h_kv, bs, d_h, table, n_tokens):
    """K and V pools whose slots past n_tokens, and whose blocks outside the table, hold large stale values:
    a kernel that reads them gives a visibly wrong answer."""
    k = r.standard_normal((blocks, h_kv, bs, d_h))
    v = r.standard_normal((blocks, h_kv, bs, d_h))
    live = np.zeros((blocks, bs), bool)
    for j, b in enumerate(table):
        live[b, :max(0, min(bs, n_tokens - j * bs))] = True
    stale = ~live[:, None, :, None]  # [blocks, 1, bs, 1]
    return np.where(stale, 40.0, k), np.where(stale, -40.0, v)


def paged_cases():
    r = _rng(141)
    cases = []
    for label, h, h_kv, n_q, n_tokens, table, kw, tags in [
            ("decode: one query, n_tokens=11 in blocks [5, 0, 3] of 4 slots (the last holds 3)",
             2, 2, 1, 11, [5, 0, 3], {}, {"decode"}),
            ("prefill: n_q = n_tokens = 7, blocks [4, 2] of 4, causal", 2, 2, 7, 7, [4, 2], {}, set()),
            ("a chunk: the last n_q=3 of n_tokens=10, blocks [5, 1, 3], GQA h=4, h_kv=2", 4, 2, 3, 10, [5, 1, 3], {},
             {"gqa"}),
            ("causal=False: n_q=2 of n_tokens=6, blocks [1, 0]", 2, 1, 2, 6, [1, 0], {"causal": False},
             {"gqa", "noncausal"})]:
        k, v = _pool(r, 6, h_kv, 4, 8, table, n_tokens)
        cases.append(Case(label, (r.standard_normal((h, n_q, 8)), k, v, table, n_tokens), kw, frozenset(tags)))
    return cases


def _torch_paged(case):  # the table's blocks gathered, then torch's attention with the positions' mask
    import torch
    import torch.nn.functional as F
    q, k_pool, v_pool, table, n = case.args
    causal = case.kwargs.get("causal", True)
    K = np.concatenate([k_pool[b] for b in table], axis=1)[:, :n]  # [h_kv, n, d_h]
    V = np.concatenate([v_pool[b] for b in table], axis=1)[:, :n]
    mask = causal_mask(q.shape[1], n) if causal else np.ones((q.shape[1], n), bool)  # queries: the last n_q
    return F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(K), torch.from_numpy(V),
                                          attn_mask=torch.from_numpy(mask), enable_gqa=q.shape[0] != K.shape[0]).numpy()


def _paged_variant(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None, order=None, stale=False,
                   first=False, tile=False, rescale_l=True, rescale_o=True, strict=False, unscaled=False):
    """paged_attention block by block with lesson 08's online softmax, with a mistake switched on: blocks read
    in `order`, stale slots past n_tokens kept, the queries put at the first positions, heads tiled, one of
    the two rescalings left out, a query kept from its own key (strict), or the scores left unscaled."""
    table = list(order(block_table) if order else block_table)
    h, n_q, d_h = q.shape
    bs, rep = k_pool.shape[2], h // k_pool.shape[1]
    m, l, o = np.full((h, n_q, 1), -np.inf), np.zeros((h, n_q, 1)), np.zeros((h, n_q, d_h))
    q_pos = (np.arange(n_q) if first else np.arange(n_tokens - n_q, n_tokens))[:, None]  # [n_q, 1]
    for j in range(-(-n_tokens // bs)):
        kb, vb = ((np.tile(pool[table[j]], (rep, 1, 1)) if tile else np.repeat(pool[table[j]], rep, axis=0))
                  for pool in (k_pool, v_pool))  # [h, bs, d_h]
        k_pos = np.arange(j * bs, (j + 1) * bs)[None, :]  # [1, bs]
        seen = (k_pos < q_pos) if strict else (k_pos <= q_pos)  # [n_q, bs]
        allowed = (seen if causal else True) & (True if stale else k_pos < n_tokens)  # [n_q, bs]
        c = (1.0 if unscaled else 1 / math.sqrt(d_h)) if scale is None else scale
        s = np.where(allowed, q @ kb.swapaxes(-1, -2) * c, -np.inf)
        m_new = np.maximum(m, s.max(-1, keepdims=True))  # [h, n_q, 1]
        p, corr = exp_minus(s, m_new), exp_minus(m, m_new)  # [h, n_q, bs], [h, n_q, 1]
        l = (l * corr if rescale_l else l) + p.sum(-1, keepdims=True)
        o = (o * corr if rescale_o else o) + p @ vb  # [h, n_q, d_h]
        m = m_new
    return o / np.where(l == 0, 1, l)


def _variant(**mistake):
    return lambda q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None: _paged_variant(
        q, k_pool, v_pool, block_table, n_tokens, causal=causal, scale=scale, **mistake)


PAGED_ATTENTION = Spec(
    "paged_attention", paged_attention, paged_cases, "transformer/core/paged_kv.py", dims=("h", "n_q", "d_h"),
    mistakes=[Mistake("read the blocks in the table's order: block_table[j] holds positions j·block_size … "
                      "(j + 1)·block_size − 1, whatever its id", variant=_variant(order=sorted)),
              Mistake("the last block is only partly written: keys at positions ≥ n_tokens are left-overs, "
                      "mask them (position < n_tokens)", variant=_variant(stale=True)),
              Mistake("the queries are the LAST n_q of the n_tokens positions: query i sits at n_tokens − n_q + i",
                      variant=_variant(first=True)),
              Mistake("GQA: query head i reads key/value head i // (h / h_kv): np.repeat on the head axis, not "
                      "np.tile", variant=_variant(tile=True)),
              Mistake("online softmax: when the running max rises, the running sum l is rescaled too: "
                      "l' = l·e^(m − m') + rowsum(e^(S_j − m'))",
                      variant=_variant(rescale_l=False)),
              Mistake("online softmax: when the running max rises, the output so far is rescaled too: "
                      "O' = O·e^(m − m') + e^(S_j − m') V_j", variant=_variant(rescale_o=False)),
              Mistake("a query reads its own key too: key position ≤ query position (kpos <= qpos), not <",
                      variant=_variant(strict=True)),
              Mistake("the scores are not scaled: multiply Q Kᵀ by 1/√d_h when scale is None",
                      variant=_variant(unscaled=True)),
              Mistake("with causal=False every query reads all n_tokens keys", tag="noncausal")],
    torch=_torch_paged)


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
                 frozenset({"causal+self_mask"}))]


def _decoder_variant(*, pre_norm=False, keys_from=None, queries_from_input=False, cross_causal=False,
                     self_causal=True, cross_mask_used=True, last_norm=True, ffn_residual=True, self_residual=True,
                     cross_residual=True, inverted_causal=False):
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
        y2 = norm(y1 + c if cross_residual else c, 2)
        f = ffn(y2, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)
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
              Mistake("the causal mask is the wrong way round: position i sees the keys j ≤ i (True = may attend), "
                      "so causal_mask(n) as it is, not ~causal_mask(n)", variant=_decoder_variant(inverted_causal=True)),
              Mistake("when causal and a self_mask is given, the self-attention takes both: causal mask & self_mask",
                      tag="causal+self_mask"),
              Mistake("with causal=False there is no causal mask: the self-attention takes self_mask alone",
                      tag="noncausal"),
              Mistake("the cross-attention reads the encoder output (context=z), and its mask is cross_mask, over "
                      "z's n_enc keys", raises=r"not broadcastable to \(b, h, n_q, n_k\)"),
              Mistake("cross-attention is not causal: no causal mask between the target and the source (n_dec and "
                      "n_enc differ)", raises=r"offset must be ≥ 0")])


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
            Case("maps (2, 1, 8, 8), m = 4", (_maps(r, (2, 1), 8), 4))]


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
              Mistake("the induction score averages the rows of the second copy, i = m … 2m − 2, not every row",
                      variant=_scores(*RIGHT_PREV, lambda m: np.arange(m - 1, 2 * m - 1), RIGHT_IND[1])),
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
                      raises=r"returned .*expected a dict")])
