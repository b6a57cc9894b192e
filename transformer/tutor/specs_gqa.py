"""The checker's cases for lesson 07's projections of grouped-query attention: qkv_heads, which gives h query heads
and only h_kv key/value heads (what the KV cache stores)."""
from __future__ import annotations

import numpy as np

from ..core.attention import repeat_kv
from ..core.heads import AttentionWeights, qkv_heads, split_heads
from ..core.layers import linear
from .cases import Case, Mistake, Spec
from .specs_layers import attention_weights

__all__ = ["QKV_HEADS"]

HEADS = (("b", "h", "n", "d_h"), ("b", "h_kv", "n_k", "d_h"), ("b", "h_kv", "n_k", "d_h"))


def qkv_cases():
    r = np.random.default_rng(71)
    x = lambda *s: r.standard_normal(s)  # noqa: E731
    return [Case("GQA: x (2, 5, 16), h=4, h_kv=2, d_h=4", (x(2, 5, 16), attention_weights(r, 16, 4, 2, 4), 4, 2),
                 tags=frozenset({"gqa"})),
            Case("MQA: x (1, 6, 12), h=3, h_kv=1, d_h=4, with biases b_q, b_k, b_v",
                 (x(1, 6, 12), attention_weights(r, 12, 3, 1, 4, bias=True), 3, 1), tags=frozenset({"gqa", "bias"})),
            Case("MHA: x (2, 3, 8), h = h_kv = 2", (x(2, 3, 8), attention_weights(r, 8, 2, 2, 4), 2, 2)),
            Case("cross-attention, GQA: x (1, 4, 8), context (1, 7, 6), h=4, h_kv=2",
                 (x(1, 4, 8), attention_weights(r, 8, 4, 2, 2, d_c=6), 4, 2), {"context": x(1, 7, 6)},
                 frozenset({"gqa", "context"})),
            Case("float32 GQA: x (1, 3, 8), h=4, h_kv=2", (x(1, 3, 8).astype(np.float32),
                                                            _float32(attention_weights(r, 8, 4, 2, 2)), 4, 2),
                 tags=frozenset({"gqa", "float32"}))]


def _float32(w: AttentionWeights) -> AttentionWeights:
    return AttentionWeights(*(None if a is None else a.astype(np.float32) for a in vars(w).values()))


def _qkv(kv_heads=None, repeated=False, context_used=True, queries_from_context=False, biases=True,
         reshape_only=False):
    """qkv_heads with a slip: K and V cut into kv_heads(h, h_kv) heads, repeated to h heads, from x where a context is
    given, Q from the context, no biases, heads cut by a reshape alone."""
    def split(t, heads):
        b, n, width = t.shape
        return t.reshape(b, heads, n, width // heads) if reshape_only else split_heads(t, heads)

    def qkv(x, w, h, h_kv, context=None):
        c = x if (context is None or not context_used) else context
        bias = (lambda b_: b_) if biases else (lambda b_: None)
        q = split(linear(c if queries_from_context else x, w.W_q, bias(w.b_q)), h)
        n_kv = h_kv if kv_heads is None else kv_heads(h, h_kv)
        k = split(linear(c, w.W_k, bias(w.b_k)), n_kv)
        v = split(linear(c, w.W_v, bias(w.b_v)), n_kv)
        if repeated:
            k, v = repeat_kv(k, h // h_kv), repeat_kv(v, h // h_kv)
        return q, k, v
    return qkv


QKV_HEADS = Spec(
    "qkv_heads", qkv_heads, qkv_cases, "transformer/core/heads.py", dims=HEADS, names=("q", "k", "v"),
    mistakes=[Mistake("K and V have h_kv heads, not h: W_k and W_v are (d, h_kv·d_h), so cut their outputs into "
                      "h_kv heads of d_h", variant=_qkv(kv_heads=lambda h, h_kv: h)),
              Mistake("K and V have h_kv heads, not h: W_k and W_v are (d, h_kv·d_h), so cut their outputs into "
                      "h_kv heads of d_h", raises=r"cannot reshape|divisible"),
              Mistake("return K and V with their h_kv heads, as the KV cache stores them: they are repeated for the "
                      "query heads only later, at attention (repeat_kv)", variant=_qkv(repeated=True)),
              Mistake("in cross-attention the keys and values come from the context (the encoder's output): "
                      "K = context W_k, V = context W_v; the queries still come from x",
                      variant=_qkv(context_used=False)),
              Mistake("in cross-attention W_k and W_v read the context, (b, n_k, d_c): K = context W_k and "
                      "V = context W_v",
                      raises=r"mismatch|not aligned", tag="context"),
              Mistake("the queries come from x, the keys and values from the context: Q = x W_q",
                      variant=_qkv(queries_from_context=True)),
              Mistake("add each projection's bias when the weights have one: Q = x W_q + b_q, and b_k, b_v likewise",
                      variant=_qkv(biases=False)),
              Mistake("cut the last axis into heads first, then move the heads before the positions: reshape to "
                      "(b, n, h, d_h), then swapaxes(1, 2) — a reshape straight to (b, h, n, d_h) mixes positions "
                      "with heads", variant=_qkv(reshape_only=True))])
