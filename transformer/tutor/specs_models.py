"""The checker's cases for lessons 12 to 14: sentence embeddings, a decoder's parameters and KV bytes counted
from its config, and paged attention (15, 16 and 19 are in specs_decoders.py)."""
from __future__ import annotations

import math

import numpy as np

from ..core.masks import causal_mask
from ..core.online_softmax import exp_minus
from ..core.paged_kv import paged_attention
from ..core.layers import layer_norm
from ..models.bert import BertConfig, BertWeights, bert_embeddings, l2_normalize, mean_pool
from ..models.configs import ModelConfig, load_config
from ..models.counting import count_parameters, kv_cache_bytes_per_token, paged_memory_report
from .cases import Case, Mistake, Spec

__all__ = ["MEAN_POOL", "L2_NORMALIZE", "BERT_EMBEDDINGS", "COUNT_PARAMETERS", "KV_BYTES_PER_TOKEN", "PAGED_ATTENTION",
           "PAGED_MEMORY_REPORT"]


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
              Mistake("two shapes that do not line up: the real-token mask is (b, n) from np.arange(n)[None, :] < "
                      "lengths[:, None] (one row per sentence), used as (b, n, 1) over the features; the (b, d) sum "
                      "is divided by lengths[:, None] of shape (b, 1), a column", raises=r"could not be broadcast")],
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
              Mistake("each row has its own length: ‖x‖₂ over the last axis (axis=-1, keepdims=True), not one norm "
                      "of the whole array", variant=lambda x, eps=1e-12: x / max(np.sqrt((x * x).sum()), eps)),
              Mistake("a zero row must stay zero, not NaN: divide by max(‖x‖₂, eps), the `eps` argument",
                      tag="zero"),
              Mistake("keep the length's axis (keepdims=True): a (…, 1) length broadcasts over the d numbers of its row",
                      raises=r"could not be broadcast")],
    torch=_torch_normalize)


# --- lesson 12: BERT's input, three embeddings summed and normalised --------------------------------------------
def _bert(r, v=20, d=8, n_max=16, n_types=2, dtype=np.float64):
    """A small BertConfig and random embedding weights of its sizes (no layers: the embeddings do not read them)."""
    cfg = BertConfig(v=v, d=d, h=2, L=1, d_ff=2 * d, n_max=n_max, n_types=n_types)
    w = BertWeights(*(a.astype(dtype) for a in (r.standard_normal((v, d)), r.standard_normal((n_max, d)) * 0.5,
                                                r.standard_normal((n_types, d)) * 0.5, r.uniform(0.5, 1.5, d),
                                                r.standard_normal(d) * 0.1)))
    return w, cfg


def bert_embedding_cases():
    r = _rng(122)
    ids = lambda b, n: r.integers(0, 20, (b, n))  # noqa: E731
    w, cfg = _bert(r)
    w32, _ = _bert(r, dtype=np.float32)
    return [Case("ids (2, 5), types and positions left out", (ids(2, 5), w, cfg)),
            Case("a sentence pair: token_types [0, 0, 0, 1, 1, 1]", (ids(1, 6), w, cfg),
                 {"token_types": np.array([[0, 0, 0, 1, 1, 1]])}, frozenset({"types"})),
            Case("packed rows: positions [[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]]", (ids(2, 5), w, cfg),
                 {"positions": np.array([[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]])}, frozenset({"positions"})),
            Case("float32 weights, ids (1, 4)", (ids(1, 4), w32, cfg), tags=frozenset({"float32"}))]


def _embeddings(norm=True, types=True, positions_used=True, first_position=0, eps=None):
    """bert_embeddings with a slip: no LayerNorm, no token-type term, the positions given left out, positions from
    first_position, another eps."""
    def embeddings(ids, w, cfg, token_types=None, positions=None):
        n = ids.shape[1]
        pos = (positions if positions is not None and positions_used else
               np.broadcast_to(np.arange(first_position, first_position + n), ids.shape))
        x = w.W_E[ids] + w.W_pos[pos]  # [b, n, d]
        if types:
            x = x + w.W_type[np.zeros_like(ids) if token_types is None else token_types]
        if not norm:
            return x
        return layer_norm(x, w.ln_g, w.ln_b, cfg.eps if eps is None else eps)
    return embeddings


BERT_EMBEDDINGS = Spec(
    "bert_embeddings", bert_embeddings, bert_embedding_cases, "transformer/models/bert.py", dims=("b", "n", "d"),
    mistakes=[Mistake("the sum goes through BERT's embedding LayerNorm: x = LayerNorm(W_E[ids] + W_pos[positions] + "
                      "W_type[types]) with w.ln_g, w.ln_b and cfg.eps", variant=_embeddings(norm=False)),
              Mistake("the token-type embedding is added even when every token is type 0: W_type[0] is a learned "
                      "vector, not zero", variant=_embeddings(types=False)),
              Mistake("use the positions given (packed rows restart them at each sentence); 0 … n − 1 only when "
                      "positions is None", variant=_embeddings(positions_used=False)),
              Mistake("positions count from 0: the first token, [CLS], reads row 0 of W_pos",
                      variant=_embeddings(first_position=1)),
              Mistake("the LayerNorm's ε is cfg.eps (BERT's 1e-12), not a default of 1e-5",
                      variant=_embeddings(eps=1e-5))])


# --- lesson 13: counting a Llama-style decoder from its config -----------------------------------------
TINY = ModelConfig("tiny", "decoder", L=2, d=16, h=4, h_kv=2, d_h=4, d_ff=24, v=50, n_ctx=64, tied=False)
# d_ff = 28: with 20, a count that takes d_h = d / h fell short by L·d·d_ff, as one without W_up does, and got that hint
WIDE_HEADS = ModelConfig("wide heads (h·d_h ≠ d)", "decoder", L=3, d=12, h=4, h_kv=1, d_h=5, d_ff=28, v=30, n_ctx=32)


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
              Mistake("the head size is config.d_h, which need not be d / h: W_q is d × h·d_h, W_k and W_v "
                      "d × h_kv·d_h", variant=lambda config: _params(config, q_width=config.h * (config.d // config.h),
                                                                     kv_width=config.h_kv * (config.d // config.h))),
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
                      variant=lambda config, dtype="float16": _bytes(config)),
              Mistake("that counts numbers, not bytes: multiply by the bytes of one number, np.dtype(dtype).itemsize "
                      "(float16: 2, float64: 8)", variant=lambda config, dtype="float16": _bytes(config, dtype, per=1)),
              Mistake("the bytes of one number come from `dtype`, np.dtype(dtype).itemsize: float16 is 2, float64 8 — "
                      "not always float32's 4", variant=lambda config, dtype="float16": _bytes(config, dtype, per=4)),
              Mistake("a head holds config.d_h numbers of K (and of V), which need not be d / h",
                      variant=lambda config, dtype="float16": _bytes(config, dtype, width=config.d // config.h))])


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
             {"gqa", "noncausal"}),
            ("scale=0.2 given: one query, n_tokens=5 in blocks [2, 4]", 2, 2, 1, 5, [2, 4], {"scale": 0.2},
             {"decode", "scale"})]:
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
                                          attn_mask=torch.from_numpy(mask), enable_gqa=q.shape[0] != K.shape[0],
                                          scale=case.kwargs.get("scale")).numpy()


def _paged_variant(q, k_pool, v_pool, block_table, n_tokens, *, causal=True, scale=None, order=None, stale=False,
                   first=False, tile=False, rescale_l=True, rescale_o=True, strict=False, unscaled=False,
                   floor=False):
    """paged_attention block by block with lesson 08's online softmax, with a mistake switched on: blocks read
    in `order`, stale slots past n_tokens kept, the queries put at the first positions, heads tiled, one of
    the two rescalings left out, a query kept from its own key (strict), or the scores left unscaled."""
    table = list(order(block_table) if order else block_table)
    h, n_q, d_h = q.shape
    bs, rep = k_pool.shape[2], h // k_pool.shape[1]
    m, l, o = np.full((h, n_q, 1), -np.inf), np.zeros((h, n_q, 1)), np.zeros((h, n_q, d_h))
    q_pos = (np.arange(n_q) if first else np.arange(n_tokens - n_q, n_tokens))[:, None]  # [n_q, 1]
    for j in range(n_tokens // bs if floor else -(-n_tokens // bs)):  # floor: the last, partial block left out
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
              Mistake("the last block may be partly filled: ⌈n_tokens / block_size⌉ blocks, -(-n_tokens // bs), not "
                      "n_tokens // bs, which leaves the newest keys out", variant=_variant(floor=True)),
              Mistake("with causal=False every query reads all n_tokens keys", tag="noncausal"),
              Mistake("use the `scale` argument when it is given (1/√d_h only when scale is None)", tag="scale")],
    torch=_torch_paged)


# --- lesson 14: paged against contiguous KV memory, counted --------------------------------------------
def report_cases():
    smol, llama = load_config("smollm2-135m"), load_config("llama-3-8b")
    return [Case("SmolLM2-135M: requests of 100, 37 and 512 tokens, block_size=16", (smol, [100, 37, 512])),
            Case("Llama-3-8B: requests of 1, 16, 17 and 300 tokens, block_size=16, n_max=2048",
                 (llama, [1, 16, 17, 300]), {"n_max": 2048}, frozenset({"n_max"})),
            Case("SmolLM2-135M: 5 requests, block_size=32, n_max=1024, dtype='float32'",
                 (smol, [5, 64, 65, 700, 31]), {"block_size": 32, "n_max": 1024, "dtype": "float32"},
                 frozenset({"n_max", "dtype"})),
            Case("Llama-3-8B: lengths a multiple of block_size=8 (no last block part full)", (llama, [8, 24, 64]),
                 {"block_size": 8}),
            Case("SmolLM2-135M: no request", (smol, []), tags=frozenset({"empty"})),
            Case("Llama-3-8B: requests of 100 and 300 tokens with n_max=256", (llama, [100, 300]), {"n_max": 256},
                 frozenset({"refuse"}), refuses=ValueError, names=(300, 256),
                 refusal="a request of 300 tokens is longer than n_max=256, so no contiguous reservation holds it")]


def _report(config, lengths, *, block_size=16, n_max=None, dtype="float16", blocks=None, longest=False,
            waste=None, utilisation=None, per_token=None, layouts=("paged", "contiguous")):
    """paged_memory_report with a slip: how blocks are counted, n_max ignored, waste or utilisation (of the layouts
    named), or bytes."""
    right = paged_memory_report(config, lengths, block_size=block_size, n_max=n_max, dtype=dtype)
    per = right["bytes_per_token"] if per_token is None else per_token
    n_blocks = right["blocks"] if blocks is None else sum(blocks(x, block_size) for x in lengths)
    n_max = max(lengths, default=0) if n_max is None or longest else n_max
    used, paged, contiguous = sum(lengths) * per, n_blocks * block_size * per, len(lengths) * n_max * per
    out = {**right, "blocks": n_blocks, "bytes_per_token": per, "used": used, "paged_reserved": paged,
           "contiguous_reserved": contiguous}
    for layout, reserved in (("paged", paged), ("contiguous", contiguous)):
        slipped = layout in layouts
        out[f"{layout}_waste"] = waste(reserved, used) if waste and slipped else reserved - used
        out[f"{layout}_utilisation"] = (utilisation(used, reserved) if utilisation and slipped
                                        else used / reserved if reserved else 1.0)
    return out


LAYOUTS = (("paged", "contiguous"), ("paged",), ("contiguous",))  # a slip in both, or in one of them
_FLOOR = lambda n, bs: n // bs  # noqa: E731 - blocks of a request, rounded down
_ONE_MORE = lambda n, bs: n // bs + 1  # noqa: E731 - one block more, also when bs divides n
_INVERTED = lambda used, reserved: reserved / used if used else 1.0  # noqa: E731 - utilisation upside down
PAGED_MEMORY_REPORT = Spec(
    "paged_memory_report", paged_memory_report, report_cases, "transformer/models/counting.py",
    mistakes=[Mistake("a request of n tokens takes ⌈n / block_size⌉ blocks, -(-n // block_size): its last block, part "
                      "full, is reserved whole", variant=lambda *a, **k: _report(*a, **k, blocks=_FLOOR)),
              Mistake("a request of n tokens takes ⌈n / block_size⌉ blocks: n // block_size + 1 is one too many when "
                      "block_size divides n", variant=lambda *a, **k: _report(*a, **k, blocks=_ONE_MORE)),
              Mistake("contiguous preallocation reserves n_max tokens for EVERY request, the longest one allowed "
                      "(the argument n_max when it is given), not the longest one here",
                      variant=lambda *a, **k: _report(*a, **k, longest=True)),
              *(Mistake("waste is what is reserved and not used: reserved − used, per layout",
                        variant=lambda *a, _l=layouts, **k: _report(*a, **k, waste=lambda r, u: u - r, layouts=_l))
                for layouts in LAYOUTS),
              *(Mistake("utilisation is used / reserved, at most 1 (and 1.0 when nothing is reserved)",
                        variant=lambda *a, _l=layouts, **k: _report(*a, **k, utilisation=_INVERTED, layouts=_l))
                for layouts in LAYOUTS),
              Mistake("every count but requests, tokens and blocks is in bytes: tokens × bytes_per_token, where "
                      "bytes_per_token = kv_cache_bytes_per_token(config, dtype)",
                      variant=lambda *a, **k: _report(*a, **k, per_token=1)),
              Mistake("bytes a token depend on the `dtype` argument: kv_cache_bytes_per_token(config, dtype)",
                      tag="dtype"),
              Mistake("with no request every count is 0 and utilisation 1.0: guard the divisions by zero",
                      tag="empty"),
              Mistake("a request longer than n_max fits no contiguous reservation, and the counts would be nonsense "
                      "(waste below 0): raise ValueError naming its length and n_max", tag="refuse")])
