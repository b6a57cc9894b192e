"""The JSON API of `python -m transformer serve`: the views' numbers for a text the reader types.

    POST /api/attention  {"model": "smollm2"|"minilm", "text": "…", "layer": l?, "new_tokens": k?}
                         (the model as --model names it: smollm2-135m, minilm-l6, any case)
    POST /api/next       {"text": "…", "temperature": T?, "top_k": k?, "top_p": p?}       (SmolLM2)
    POST /api/kv_cache   {"text": "…", "new_tokens": k?}                                   (SmolLM2)
    GET  /api/status     the limits, and which models are loaded

Each answer is computed by the package on the real model (view_numbers.py: the same functions
site/export_views.py exports the site's texts with) and rounded as the exported files are. A
request is checked field by field before any model runs; what is wrong is an ApiError(400, one
line) naming the field. Models load once, on their first request.
"""
from __future__ import annotations

import argparse
import math
import threading
import time
from collections import OrderedDict

import numpy as np

from . import view_numbers as V
from .encode import model_name
from .shown import cut
from ..backend import to_numpy
from ..core.sampling import next_token_probs

__all__ = ["ApiError", "Models", "LIMITS", "MAX_TOKENS", "ALL_LAYERS_MAX_TOKENS", "ENDPOINTS", "answer",
           "attention", "next_token", "kv_cache", "status"]

MAX_TOKENS = 512  # a text's tokens: one layer's weights are h · n² floats, and SmolLM2 keeps all L of them
ALL_LAYERS_MAX_TOKENS = 96  # every layer at once up to here (about 1.2 M weights, 3 MB of JSON for SmolLM2);
# a longer text is answered one layer at a time, the layer named by "layer"
MAX_NEW_TOKENS = 16  # greedy tokens after the text in the attention answer (their decode rows)
KNOWN_TEXTS = 16  # long texts whose generated ids are kept, so their next layer needs no generation
MAX_KV_NEW_TOKENS = 32  # greedy steps through the KV cache in the kv_cache answer
MAX_TEMPERATURE = 10.0  # beyond it softmax(z / T) is flat to within a few per cent: nothing left to see
TOP_SHOWN = 20  # tokens whose filtered probability the next answer lists
MODEL_NAMES = {"smollm2": "SmolLM2-135M", "minilm": "MiniLM-L6"}
LIMITS = {"max_tokens": MAX_TOKENS, "all_layers_max_tokens": ALL_LAYERS_MAX_TOKENS,
          "max_new_tokens": MAX_NEW_TOKENS, "max_kv_new_tokens": MAX_KV_NEW_TOKENS,
          "max_temperature": MAX_TEMPERATURE}


class ApiError(Exception):
    """An answer that is an error: HTTP status and one line for {"error": …}."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, " ".join(str(message).split())  # one line, whatever was in it


class Models:
    """SmolLM2 and MiniLM, each loaded once, on the first request that needs it (loading SmolLM2
    takes seconds; a server that only draws MiniLM never pays it). Passing models in skips loading."""

    def __init__(self, smollm2=None, minilm=None):
        self.loaded = {"smollm2": smollm2, "minilm": minilm}
        self.lock = threading.Lock()  # two first requests load one copy
        self.generated: OrderedDict = OrderedDict()  # (text, new_tokens) -> the ids SmolLM2 generated, last used last

    def known(self, text: str, new_tokens: int) -> dict:
        """What an earlier request for this text generated (empty the first time, for the view to fill): a
        long text's explorer asks for its layers one by one, and generates once. Model requests run one at
        a time, so the dict needs no lock of its own."""
        key = (text, new_tokens)
        self.generated[key] = self.generated.pop(key, {})
        while len(self.generated) > KNOWN_TEXTS:
            self.generated.popitem(last=False)
        return self.generated[key]

    def get(self, key: str):
        with self.lock:
            if self.loaded[key] is None:
                from ..models.bert_files import load_minilm  # the loaders, only when a model is first asked for
                from ..models.llama_gguf import load_smollm2

                self.loaded[key] = load_smollm2(progress=False) if key == "smollm2" else load_minilm()
            return self.loaded[key]

    def names(self) -> list[str]:
        return [k for k, m in self.loaded.items() if m is not None]


# --- checking a request ------------------------------------------------------------------------------

def fields(body, allowed: dict) -> dict:
    """The body as a dict holding only known fields (allowed: name -> required), or an ApiError."""
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0]!r}: this endpoint takes {', '.join(sorted(allowed))}")
    missing = [k for k, required in allowed.items() if required and k not in body]
    if missing:
        raise ApiError(400, f"missing field {missing[0]!r}")
    return body


def text_field(body) -> str:
    text = body["text"]
    if not isinstance(text, str):
        raise ApiError(400, f"'text' must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ApiError(400, "'text' is empty: type a sentence")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "'text' holds a lone surrogate (\\ud800 … \\udfff), which is not a character") from None
    return text


def int_field(body, name: str, default, lo: int, hi: int | None, meaning: str = ""):
    """An integer field in lo … hi (hi None: no upper bound); meaning, said after the bound, tells a special value."""
    value = body.get(name, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{name!r} must be an integer, got {type(value).__name__}")
    got = cut(str(value))  # a 400-digit integer, cut
    if hi is None and value < lo:
        raise ApiError(400, f"{name!r} must be an integer ≥ {lo}{meaning}, got {got}")
    if hi is not None and not lo <= value <= hi:
        raise ApiError(400, f"{name!r} must be in {lo} … {hi}, got {got}")
    return value


def number_field(body, name: str, default: float, lo: float, hi: float, lo_open: bool = False) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"{name!r} must be a number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an integer of 400 digits: no float
        raise ApiError(400, f"{name!r} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], got an integer of "
                            f"{len(str(abs(value)))} digits") from None
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        raise ApiError(400, f"{name!r} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {value:g}")
    return value


def model_field(body) -> str:
    """"model" as the command line takes --model: smollm2 (or smollm2-135m), minilm (or minilm-l6), in any case."""
    key = body["model"]
    if isinstance(key, str):
        try:
            return model_name(key)
        except argparse.ArgumentTypeError:
            pass
    raise ApiError(400, f"unknown model {str(key)[:40]!r}: choose smollm2 (or smollm2-135m) or minilm (or minilm-l6)")


def within(n: int) -> None:
    if n > MAX_TOKENS:
        raise ApiError(400, f"the text is {n} tokens, over the limit of {MAX_TOKENS}: shorten it")


# --- the endpoints -----------------------------------------------------------------------------------

def attention(models: Models, body) -> dict:
    """Every layer's and head's attention weights for the text (one layer, "layer", past
    ALL_LAYERS_MAX_TOKENS tokens): the `text` entry of the attention view, as site/export_views.py
    writes it, with the model's shape beside it. SmolLM2 adds new_tokens greedy tokens (decode rows)."""
    body = fields(body, {"model": True, "text": True, "layer": False, "new_tokens": False})
    key, text = model_field(body), text_field(body)
    layer = int_field(body, "layer", None, -2 ** 31, 2 ** 31 - 1)  # a sane integer; the model's L is checked below
    new_tokens = int_field(body, "new_tokens", 0, 0, MAX_NEW_TOKENS)
    if key == "minilm" and new_tokens:
        raise ApiError(400, "'new_tokens' applies to smollm2 only: MiniLM is an encoder and generates nothing")
    model = models.get(key)
    cfg, note = model.config, None
    if key == "smollm2":
        n = len(model.tokenizer.encode(text))
    else:
        n = len(model.tokenizer.tokenize(text)) + 2  # with [CLS] and [SEP], before the model's cut
    within(n)
    if layer is not None and not -cfg.L <= layer < cfg.L:
        raise ApiError(400, f"'layer' {layer} does not exist: {MODEL_NAMES[key]} has {cfg.L} layers, 0 … {cfg.L - 1} "
                            f"(or −{cfg.L} … −1, counted from the last)")
    if key == "minilm" and n > cfg.n_seq:
        note = f"the text is {n} tokens; MiniLM reads at most {cfg.n_seq}, so only the first {cfg.n_seq} are shown"
        n = cfg.n_seq
    n_all = n + new_tokens
    layers = list(range(cfg.L)) if n_all <= ALL_LAYERS_MAX_TOKENS else [(layer or 0) % cfg.L]
    if key == "smollm2":  # a long text's layers come one request each: its generation is kept for the next
        known = models.known(text, new_tokens) if len(layers) == 1 else None
        entry = V.smollm2_text(model, text, new_tokens, layers, known)
    else:
        entry = V.minilm_text(model, text, layers)
    out = {"model": key, "name": MODEL_NAMES[key], "causal": key == "smollm2", "lower": key == "smollm2",
           "L": cfg.L, "h": cfg.h, "h_kv": cfg.h_kv if key == "smollm2" else cfg.h, "n_new": new_tokens,
           "w_scale": V.W_SCALE, "text": entry}
    if note:
        out["note"] = note
    return out


def next_token(models: Models, body) -> dict:
    """SmolLM2's next-token logits after the text (the sampling view's entry: the 1,000 largest
    exactly, the rest as a histogram) and the package's own probabilities under temperature,
    top-k and top-p (T.next_token_probs): the TOP_SHOWN likeliest, and how many tokens survive."""
    body = fields(body, {"text": True, "temperature": False, "top_k": False, "top_p": False})
    text = text_field(body)
    temperature = number_field(body, "temperature", 1.0, 0.0, MAX_TEMPERATURE)
    top_k = int_field(body, "top_k", 0, 0, None, " (0 = off)")  # k ≥ v keeps every token, as --top-k does
    top_p = number_field(body, "top_p", 1.0, 0.0, 1.0, lo_open=True)  # 1: off
    model = models.get("smollm2")
    ids = model.tokenizer.encode(text)
    within(len(ids))
    z = to_numpy(model.logits(ids)[-1])  # [v] the last position's logits
    p = next_token_probs(z, temperature, top_k or None, top_p if top_p < 1 else None)  # [v]
    order = [i for i in np.argsort(-p, kind="stable")[:TOP_SHOWN] if p[i] > 0]  # likeliest first, ties by id
    return {"model": MODEL_NAMES["smollm2"], "prompt": text, "n_tokens": len(ids), "temperature": temperature,
            "top_k": top_k, "top_p": top_p, "kept": int(np.count_nonzero(p)),
            "top": [[int(i), V.token_labels(model.tokenizer, [int(i)])[0], V.sig(p[i], 6)] for i in order],
            **V.logits_summary(z, model.tokenizer)}


def kv_cache(models: Models, body) -> dict:
    """SmolLM2 reads the text through its KV cache (the prefill), then generates new_tokens greedily,
    one token a step: after each step, what the cache holds (its length, the shape of each layer's K
    and V, their bytes by formula and measured) and the token that step fed in."""
    body = fields(body, {"text": True, "new_tokens": False})
    text = text_field(body)
    new_tokens = int_field(body, "new_tokens", 8, 0, MAX_KV_NEW_TOKENS)
    model = models.get("smollm2")
    cfg = model.config
    ids = model.tokenizer.encode(text)
    within(len(ids))
    seq, nxt, _, steps = V.prefill_and_decode(model, ids, new_tokens, weights=False)
    labels = V.token_labels(model.tokenizer, seq)
    for s, step in enumerate(steps):  # step 0 fed the whole text; step s ≥ 1 fed the s-th generated token
        step["fed"] = labels[:len(ids)] if s == 0 else [labels[len(ids) + s - 1]]
        step["k_shape"] = [1, cfg.h_kv, step["length"], cfg.d_h]  # per layer, and V the same
    return {"model": MODEL_NAMES["smollm2"], "prompt": text, "tokens": labels, "n_prompt": len(ids),
            "next": V.token_labels(model.tokenizer, [nxt])[0], "L": cfg.L, "h": cfg.h, "h_kv": cfg.h_kv,
            "d_h": cfg.d_h, "dtype": str(np.dtype(model.weights.W_E.dtype)),
            "bytes_per_token": int(model.kv_cache_bytes(1)), "steps": steps}


def status(models: Models, body=None) -> dict:
    return {"server": "python -m transformer serve", "models": MODEL_NAMES, "loaded": models.names(),
            "endpoints": sorted(ENDPOINTS), "limits": LIMITS}


ENDPOINTS = {"attention": attention, "next": next_token, "kv_cache": kv_cache}  # POST /api/NAME


def answer(models: Models, name: str, body) -> tuple[dict, float]:
    """(the endpoint's answer, seconds it took), or an ApiError: 404 for an unknown name."""
    if name not in ENDPOINTS:
        raise ApiError(404, f"no endpoint /api/{name[:40]}: POST to {', '.join('/api/' + e for e in ENDPOINTS)}")
    t0 = time.perf_counter()
    out = ENDPOINTS[name](models, body)
    return out, time.perf_counter() - t0
