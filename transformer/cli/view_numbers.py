"""The numbers the course's interactive views draw, computed by the package and rounded for a page.

Two callers: site/export_views.py writes them into the site at build time (a few fixed texts),
and `python -m transformer serve` answers them live for a text the reader types (cli/serve_api.py).
Both go through these functions, so a live answer has exactly the shape of an exported one and
the view draws either the same way.

    fixed_ints(w)                 attention weights as whole numbers of 1e-4 (W_SCALE)
    smollm2_text(model, text, …)  one text's entry of the attention view: tokens, every layer's and
                                  head's causal weights (lower triangle), decode rows of greedy tokens
    minilm_text(model, text)      the same for the encoder: full (n, n) maps
    prefill_and_decode(…)         greedy generation through the KV cache, keeping every attention row
    logits_summary(z, tok)        next-token logits: the 1,000 largest exactly, the rest as a histogram

Rounding: weights to 4 decimals (as integers), logits to 4 decimals, the rest to 4 significant
digits: finer than any drawing shows, and it keeps the files (and the answers) small.
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import to_numpy
from ..core.sampling import sample_next
from ..models.llama import forward as llama_forward
from ..plotting import visible_token

__all__ = ["W_SCALE", "TOP_LOGITS", "TAIL_BIN", "sig", "decimals", "fixed_ints", "token_labels",
           "prefill_and_decode", "cache_state", "smollm2_text", "minilm_text", "logits_summary"]

W_SCALE = 10_000  # a weight w is sent as round(w · W_SCALE): 4 decimals, '1234' instead of '0.1234'
TOP_LOGITS = 1000  # logits kept exactly; the top-k control goes to 100, the rest enters only the sums
TAIL_BIN = 0.02  # logit width of a tail histogram bin: e^(±0.01 / T) inside a bin, its mean is kept


# --- rounding -------------------------------------------------------------------------------------

def sig(x, digits: int = 4):  # float or array -> float or nested list, `digits` significant digits
    """Round for the page: 4 significant digits is finer than any drawing shows (None for inf/NaN)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        v = float(a)
        return None if not math.isfinite(v) else float(f"{v:.{digits}g}")
    return [sig(v, digits) for v in a]


def decimals(x, places: int = 4):  # array -> nested list rounded to `places` decimals
    return np.round(np.asarray(x, dtype=np.float64), places).tolist()


def fixed_ints(w, scale: int = W_SCALE):  # [...] floats in [0, 1] -> flat list of ints, w · scale rounded
    """Attention weights as whole numbers of 1/scale: '1234' instead of '0.1234' halves the file.

    >>> fixed_ints([[0.5, 0.25], [0.12341, 1.0]])
    [5000, 2500, 1234, 10000]
    """
    return np.rint(np.asarray(w, dtype=np.float64).ravel() * scale).astype(np.int64).tolist()


def token_labels(tok, ids) -> list[str]:
    """Each id's text with its spaces shown (a leading space as '␣'): labels for the views."""
    return [visible_token(tok.decode([i])) for i in ids]


# --- the decoder: attention through a real generation --------------------------------------------

class LayersKept(list):
    """An attn_out list that keeps the weights of the layers asked for and None for the others, so a
    long text's unwanted (h, n, n) maps are freed as the pass goes on (300 MB at 500 tokens)."""

    def __init__(self, layers):
        super().__init__()
        self.layers = set(layers)

    def append(self, p):
        super().append(p if len(self) in self.layers else None)


def prefill_and_decode(model, ids: list[int], n_new: int, keep_layers=None, *, weights: bool = True, layers=None):
    """Greedy generation through the KV cache, keeping every attention row on the way.

    Prefill runs the prompt (n tokens) in one pass: each layer gives (h, n, n). Each decode step
    then feeds one generated token: each layer gives its single query row (h, 1, n_k) over every
    key in the cache. Returns the fed tokens' ids (prompt + n_new generated), the next token the
    model would produce after them, the weights [L, h, N, N] (N = n + n_new, row i = query i; the
    decode rows are rows n … N − 1; None when weights=False; with `layers`, [len(layers), h, N, N]
    in their order) and, per step, the cache's state.
    """
    cfg = model.config
    n = len(ids)
    N = n + n_new
    layers = range(cfg.L) if layers is None else layers
    cache = model.new_cache(b=1, n_max=N)  # allocated once for the whole request
    at = {layer: k for k, layer in enumerate(layers)}  # a layer's place in W
    W = np.zeros((len(at), cfg.h, N, N), dtype=np.float32) if weights else None  # [L or len(layers), h, N, N]
    maps: list | None = LayersKept(layers) if weights else None
    kept = None if keep_layers is None else [at[layer] for layer in keep_layers]  # their places in W
    logits = llama_forward(np.array([ids]), model.weights, cfg, model.cos, model.sin, cache=cache,
                           last_only=True, attn_out=maps)  # [1, 1, v]; maps: L × [1, h, n, n] or None
    for layer, p in enumerate(maps or []):
        if p is not None:
            W[at[layer], :, :n, :n] = to_numpy(p[0])
    steps = [cache_state(cache, model, query=n - 1, W=W, keep_layers=kept)]  # step 0: the prefill
    seq = list(ids)
    for s in range(n_new):
        nxt = int(sample_next(to_numpy(logits[0, -1]), temperature=0))  # greedy
        seq.append(nxt)
        maps = LayersKept(layers) if weights else None
        logits = llama_forward(np.array([[nxt]]), model.weights, cfg, model.cos, model.sin, cache=cache,
                               last_only=True, attn_out=maps)  # maps: L × [1, h, 1, n + s + 1] or None
        for layer, p in enumerate(maps or []):
            if p is not None:
                W[at[layer], :, n + s, :n + s + 1] = to_numpy(p[0, :, 0])  # the new token's row
        steps.append(cache_state(cache, model, query=n + s, W=W, keep_layers=kept))
    nxt = int(sample_next(to_numpy(logits[0, -1]), temperature=0))
    return seq, nxt, W, steps


def cache_state(cache, model, *, query: int, W=None, keep_layers=None) -> dict:
    """What the cache holds after a step: its length, bytes by formula and measured, the query's rows."""
    n = cache.length
    filled = sum(a[:, :, :n].nbytes for a in cache.k + cache.v)  # real bytes of the written slices
    state = {"length": n, "formula_bytes": int(model.kv_cache_bytes(n)), "measured_bytes": int(filled),
             "allocated_bytes": int(cache.nbytes)}
    if keep_layers is not None and W is not None:  # [layers][h][n] the query's row in each kept layer and head
        state["rows"] = [[decimals(W[layer, head, query, :n]) for head in range(W.shape[1])]
                         for layer in keep_layers]
    return state


def smollm2_text(model, text: str, n_new: int, layers=None, known: dict | None = None) -> dict:
    """SmolLM2's entry for one text in the attention view: the tokens (prompt, then n_new greedy
    ones), the next token after them, and the causal weights of `layers` (default all), every head,
    as fixed_ints of the lower triangle, row by row: w[(layer_k · h + head) · N(N+1)/2 + i(i+1)/2 + j].

    known: a dict kept between requests for the same text and n_new. Empty, it is filled with the ids
    generated; holding them, the weights come from one causal pass over those ids, up to the last
    layer asked for, with no generation (the cached rows equal a full pass's within float32 rounding):
    the explorer asking for layer after layer of a long text pays a generation once."""
    ids = model.tokenizer.encode(text)
    layers = list(range(model.config.L)) if layers is None else list(layers)
    if known:
        seq, nxt = known["seq"], known["next"]
        maps = model.iter_attention_weights(seq)  # L × [h, N, N], computed as consumed
        wanted = {layer: m for layer, m in zip(range(max(layers) + 1), maps) if layer in layers}
        W = np.stack([wanted[layer] for layer in layers])  # [len(layers), h, N, N], in the order asked
    else:
        seq, nxt, W, _ = prefill_and_decode(model, ids, n_new, layers=layers)  # W: [len(layers), h, N, N]
        if known is not None:
            known.update(seq=seq, next=nxt)
    i, j = np.tril_indices(len(seq))  # causal: keys j ≤ i only (the rest is exactly 0)
    return {"text": text, "tokens": token_labels(model.tokenizer, seq), "n_prompt": len(ids),
            "next": visible_token(model.tokenizer.decode([nxt])), "layers": layers,
            "w": fixed_ints(W[:, :, i, j])}


def minilm_text(model, text: str, layers=None) -> dict:
    """MiniLM's entry for one text: its pieces ([CLS] … [SEP], cut to the model's 256) and the full
    (n, n) weights of `layers` (default all), every head: w[((layer_k · h + head) · n + i) · n + j]."""
    layers = list(range(model.config.L)) if layers is None else list(layers)
    maps = model.iter_attention_weights(text)  # L × [h, n, n], one layer at a time
    W = np.stack([m for layer, m in zip(range(max(layers) + 1), maps) if layer in layers])  # [len(layers), h, n, n]
    toks = model.tokens(text)
    return {"text": text, "tokens": toks, "n_prompt": len(toks), "next": None, "layers": layers,
            "w": fixed_ints(W)}


# --- next-token probabilities ----------------------------------------------------------------------

def logits_summary(z, tok, top: int = TOP_LOGITS, width: float = TAIL_BIN) -> dict:
    """The `top` largest logits exactly (in the order top-k and top-p visit them: falling, ties
    by id), and the others as a histogram of bins `width` wide: (mean logit, count), falling.

    softmax needs Σ_j e^(z_j / T) over all v tokens; a bin's tokens differ by at most `width`,
    so count · e^(mean / T) stands for their sum (relative error about width² / 24T²)."""
    z = np.asarray(to_numpy(z), dtype=np.float64)  # [v]
    order = np.argsort(-z, kind="stable")  # [v] most likely first, ties by id: as filter_logits
    head, rest = order[:top], z[order[top:]]
    bins = np.floor(rest / width).astype(np.int64)  # [v - top]
    keys, inverse, counts = np.unique(bins, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=rest) / counts  # [bins]
    falling = np.argsort(-means)
    return {"ids": head.tolist(), "tokens": token_labels(tok, head.tolist()), "logits": decimals(z[head]),
            "tail": [[round(float(means[b]), 4), int(counts[b])] for b in falling], "v": int(z.size)}
