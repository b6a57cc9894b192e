"""The checker's cases for lesson 13's FLOPs of a forward pass, counted from a Llama-style decoder's config:
prefill (n tokens at once) and one decode step (one new token, n in the cache); and the arithmetic intensity of
each, FLOPs per byte moved."""
from __future__ import annotations

from ..models.configs import load_config
import numpy as np

from ..models.counting import arithmetic_intensity, forward_flops
from .cases import Case, Mistake, Spec
from .specs_models import TINY, WIDE_HEADS

__all__ = ["FORWARD_FLOPS", "ARITHMETIC_INTENSITY"]

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


# --- arithmetic intensity: FLOPs per byte moved ------------------------------------------------------------------
def intensity_cases():
    def case(config, n, tags=(), **kw):
        c = load_config(config)
        said = ", ".join(f"{k}={v!r}" for k, v in kw.items())
        return Case(f"{c.name} ({'tied' if c.tied else 'untied'} head), n_tokens={n}" + (f", {said}" if said else ""),
                    (c, n), kw, frozenset({*tags, "tied" if c.tied else "untied",
                                           *(["batch"] if kw.get("batch", 1) > 1 else [])}))
    return [case("llama-3-8b", 1024), case("smollm2-135m", 512, batch=8),
            case(TINY, 6, dtype="float32", tags={"dtype"}), case("phi-3-mini", 100, batch=2, dtype=np.float64,
                                                                  tags={"dtype"})]


def _weights(c, head=True, embedding=False):
    """The numbers of the matrices a pass multiplies by: the layers' and the LM head's (v·d, tied or not)."""
    layer = c.d * c.h * c.d_h + 2 * c.d * c.h_kv * c.d_h + c.h * c.d_h * c.d + 3 * c.d * c.d_ff
    return c.L * layer + (c.v * c.d if head else 0) + (c.v * c.d if embedding and not c.tied else 0)


def _intensity(head=True, embedding=False, kv=True, decode_writes=True, prefill_logits="last", per_token_weights=False,
               itemsize=None, inverted=False):
    """arithmetic_intensity with a slip: the head's weights left out, the embedding table counted as read, the KV
    cache's bytes left out, decode's new K/V row not written, the head on every prefill token, the weights read once
    per token, a fixed bytes-per-number, intensity as bytes / FLOPs."""
    def ai(config, n_tokens, *, batch=1, dtype="float16"):
        c, size = config, np.dtype(dtype).itemsize if itemsize is None else itemsize
        kv_row = 2 * c.L * c.h_kv * c.d_h * size  # a token's K and V, every layer
        w = _weights(c, head, embedding) * size
        out = {}
        for phase, tokens, kv_tokens in (("prefill", batch * n_tokens, n_tokens),
                                         ("decode", batch, n_tokens + (1 if decode_writes else 0))):
            kw = {"logits": prefill_logits} if phase == "prefill" else {}
            flops = forward_flops(c, n_tokens, batch=batch, phase=phase, **kw)["total"]
            nbytes = (w * tokens if per_token_weights else w) + (batch * kv_tokens * kv_row if kv else 0)
            out[phase] = {"flops": flops, "bytes": nbytes, "intensity": nbytes / flops if inverted else flops / nbytes}
        return out
    return ai


def _intensity_slip(**slip):
    ai = _intensity(**slip)
    return lambda config, n_tokens, **kw: ai(config, n_tokens, **kw)


ARITHMETIC_INTENSITY = Spec(
    "arithmetic_intensity", arithmetic_intensity, intensity_cases, "transformer/models/counting.py",
    mistakes=[Mistake("the LM head is a matrix the pass multiplies by, so its v·d numbers are read too — tied or not",
                      variant=_intensity_slip(head=False)),
              Mistake("the embedding table is looked up, not multiplied: a pass reads only its tokens' rows, so only "
                      "the head's v·d counts (once, tied or not)", variant=_intensity_slip(embedding=True)),
              Mistake("the KV cache moves too: prefill writes n_tokens rows of K and V, a decode step reads the n "
                      "cached and writes its own, batch · (n_tokens + 1) rows", variant=_intensity_slip(kv=False)),
              Mistake("a decode step writes its own K and V row as well as reading the n_tokens cached: "
                      "batch · (n_tokens + 1) rows of 2·L·h_kv·d_h numbers",
                      variant=_intensity_slip(decode_writes=False)),
              Mistake("prefill's FLOPs here are for the next token's logits only (logits='last'): a server prefills a "
                      "prompt to start generating", variant=_intensity_slip(prefill_logits="all")),
              Mistake("each weight is read once a pass, whatever b and n are: that is why prefill, which reuses it "
                      "for b·n tokens, does far more FLOPs per byte than decode",
                      variant=_intensity_slip(per_token_weights=True)),
              Mistake("bytes come from `dtype`: np.dtype(dtype).itemsize a number (float16: 2, float32: 4, float64: 8)",
                      variant=_intensity_slip(itemsize=2)),
              Mistake("intensity is FLOPs per byte, flops / bytes (decode: about 1 in 16-bit), not bytes per FLOP",
                      variant=_intensity_slip(inverted=True))])
