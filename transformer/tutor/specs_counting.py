"""The checker's cases for lesson 13's FLOPs of a forward pass, counted from a Llama-style decoder's config:
prefill (n tokens at once) and one decode step (one new token, n in the cache)."""
from __future__ import annotations

from ..models.configs import load_config
from ..models.counting import forward_flops
from .cases import Case, Mistake, Spec
from .specs_models import TINY, WIDE_HEADS

__all__ = ["FORWARD_FLOPS"]

KEYS = ("qkvo", "ffn", "head", "scores", "mix", "matmul", "attention", "total", "tokens")


def flops_cases():
    """Llama-style decoders, both phases, a batch, the head on the last token only, and d_h ≠ d / h."""
    def case(config, n, tags=(), **kw):
        c = load_config(config)
        gqa = {"gqa"} if c.h_kv < c.h else set()
        phase = kw.get("phase", "prefill")
        said = ", ".join(f"{k}={v!r}" for k, v in kw.items())
        return Case(f"{c.name} (L={c.L}, d={c.d}, h={c.h}, h_kv={c.h_kv}, d_h={c.d_h}, d_ff={c.d_ff}, v={c.v}), "
                    f"n_tokens={n}" + (f", {said}" if said else ""), (c, n), kw,
                    frozenset({*tags, *gqa, phase, *(["batch"] if kw.get("batch", 1) > 1 else [])}))
    return [case("smollm2-135m", 16),
            case("llama-3-8b", 1000, phase="decode"),
            case(TINY, 7, batch=3, logits="last", tags={"last"}),
            case("phi-3-mini", 5, batch=2, phase="decode"),
            case(WIDE_HEADS, 9, tags={"d_h"}),
            case(TINY, 4, phase="decode", logits="last", tags={"last"})]


def _flops(config, n_tokens, *, batch=1, phase="prefill", logits="all", per_term=2, kv_heads=None, ffn_matrices=3,
           reproject=False, own_key=True, causal_half=False, head_tokens=None, tied_free=False, one_sequence=False,
           decode_tokens=None, d_h=None):
    """forward_flops for a Llama-style decoder, with one slip where an argument says so."""
    c = config
    dh = c.d_h if d_h is None else d_h(c)
    b = 1 if one_sequence else batch
    n_q, n_k = (n_tokens, n_tokens) if phase == "prefill" else (1, n_tokens + (1 if own_key else 0))
    n_proj = n_tokens + 1 if (reproject and phase == "decode") else n_q
    qkvo = per_term * (n_proj * c.d * c.h * dh + 2 * n_proj * c.d * (c.h if kv_heads else c.h_kv) * dh
                       + n_proj * c.h * dh * c.d)
    pairs = n_q * (n_q + 1) // 2 if (causal_half and phase == "prefill") else n_q * n_k
    scores = per_term * c.h * pairs * dh
    ffn = per_term * n_proj * c.d * c.d_ff * ffn_matrices
    t = head_tokens(n_q, phase, logits) if head_tokens else (n_q if phase == "prefill" and logits == "all" else 1)
    head = 0 if (tied_free and c.tied) else per_term * t * c.d * c.v
    f = {"qkvo": c.L * qkvo, "ffn": c.L * ffn, "head": head, "scores": c.L * scores, "mix": c.L * scores}
    f = {k: b * v for k, v in f.items()}
    f["matmul"] = f["qkvo"] + f["ffn"] + f["head"]
    f["attention"] = f["scores"] + f["mix"]
    f["total"] = f["matmul"] + f["attention"]
    f["tokens"] = b * (decode_tokens(n_tokens) if (decode_tokens and phase == "decode") else n_q)
    return f


def _slip(**slip):
    return lambda config, n_tokens, **kw: _flops(config, n_tokens, **kw, **slip)


FORWARD_FLOPS = Spec(
    "forward_flops", forward_flops, flops_cases, "transformer/models/counting.py",
    mistakes=[Mistake("a matrix product (m × k)(k × n) costs 2·m·k·n FLOPs: a multiply AND an add for each of its "
                      "m·k·n terms, so a token through a matrix of N numbers costs 2N", variant=_slip(per_term=1)),
              Mistake("W_k and W_v are d × h_kv·d_h: only the h_kv key/value heads are projected (GQA), not h",
                      variant=_slip(kv_heads=True)),
              Mistake("SwiGLU multiplies by three matrices a token: W_gate and W_up (d × d_ff) and W_down (d_ff × d)",
                      variant=_slip(ffn_matrices=2)),
              Mistake("a decode step projects only the new token (n_q = 1): the past tokens' K and V are in the cache, "
                      "not computed again", variant=_slip(reproject=True)),
              Mistake("the new token's query meets n_tokens + 1 keys: the n_tokens in the cache and its own",
                      variant=_slip(own_key=False)),
              Mistake("count the dense n × n scores, as plain attention computes them before the mask hides half: "
                      "scores = 2·h·n·n·d_h a layer at prefill, not n(n + 1)/2 pairs", variant=_slip(causal_half=True)),
              Mistake("logits='last' runs the head on the last token only: 2·d·v, not 2·n·d·v",
                      variant=_slip(head_tokens=lambda n_q, phase, logits: n_q)),
              Mistake("logits='all' runs the head on every prefill token: 2·n·d·v",
                      variant=_slip(head_tokens=lambda n_q, phase, logits: 1)),
              Mistake("a tied head shares the embedding's numbers but still multiplies by them: 2·d·v FLOPs a token",
                      variant=_slip(tied_free=True)),
              Mistake("every count grows with the batch: b sequences do b times the work, and tokens = b·n_q",
                      variant=_slip(one_sequence=True)),
              Mistake("tokens counts the queries processed: one a sequence at a decode step (b·1), not the cached ones",
                      variant=_slip(decode_tokens=lambda n: n)),
              Mistake("the head size is config.d_h, which need not be d / h: W_q is d × h·d_h, each score a d_h-long "
                      "dot product", variant=_slip(d_h=lambda c: c.d // c.h)),
              Mistake("the head size is config.d_h, which need not be d / h", tag="d_h")])
