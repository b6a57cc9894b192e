"""The numbers the course's interactive views draw, exported from the package.

Each view in site/views/NAME.js draws only what this file writes into OUT_DIR/NAME.js:

    window.TFS_VIEWS_DATA = window.TFS_VIEWS_DATA || {};
    window.TFS_VIEWS_DATA["NAME"] = {...};

(a script, not JSON: a page opened from file:// may not fetch a file beside it).

    attention   SmolLM2's and MiniLM's attention weights on a few texts, every layer and head;
                SmolLM2's rows of the tokens it generated greedily, one decode step at a time
    kv_cache    a real generation through SmolLM2's KV cache: per step the new query's row, the
                cache length, its bytes by formula (Llama.kv_cache_bytes) and measured (.nbytes)
    flash       T.flash_attention's own FlashTrace (m, l per tile step) and its IOCounter's
                loads and stores as they happen, for FlashAttention-2 and -1
    paged_kv    a scripted stream of requests through T.PagedKVCache: block tables, free list, bytes
    sampling    SmolLM2's next-token logits for a few prompts: the 1,000 largest exactly, the rest
                as a histogram, so the page can redo softmax(z / T), top-k and top-p for drawing

Numbers are rounded (weights to 4 decimals, logits to 4 decimals, the rest to 4 significant
digits) to keep the files small. The fast mode (`--fast`, for CI) drops SmolLM2's second text, MiniLM's
last two and two of the four sampling prompts, and decodes 4 tokens instead of 6 (attention) and 6
instead of 16 (KV cache); the flash and paged views are the same in both modes.

Run: python site/export_views.py OUT_DIR [--fast]
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import transformer as T  # noqa: E402
from transformer import plotting as P  # noqa: E402  (visible_token: a leading space shown as ␣)

VIEWS = ("attention", "kv_cache", "flash", "paged_kv", "sampling")

SMOLLM2_TEXTS = ["The dog chased the squirrel because it", "The capital of France is",
                 "The cat sat on the mat. The cat sat on the"]  # the last repeats itself: induction heads
MINILM_TEXTS = ["The dog chased the squirrel because it was fast", "The dog chased the squirrel because it",
                "The trophy did not fit in the suitcase because it was too big."]
SAMPLING_PROMPTS = ["The capital of France is", "Once upon a time", "The dog chased the squirrel because it",
                    "def fibonacci(n):"]
KV_PROMPT = "The dog chased the squirrel because it"  # lesson 06's prompt
KV_LAYERS = (0, 6, 12, 18, 24, 29)  # the decode rows kept for the KV-cache view: every 6th layer and the last
TOP_LOGITS = 1000  # logits kept exactly; the top-k control goes to 100, the rest enters only the sums
TAIL_BIN = 0.02  # logit width of a tail histogram bin: e^(±0.01 / T) inside a bin, its mean is kept


# --- rounding and the files ------------------------------------------------------------------------

def sig(x, digits: int = 4):  # float or array -> float or nested list, `digits` significant digits
    """Round for the page: 4 significant digits is finer than any drawing shows."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        v = float(a)
        return None if not math.isfinite(v) else float(f"{v:.{digits}g}")
    return [sig(v, digits) for v in a]


def decimals(x, places: int = 4):  # array -> nested list rounded to `places` decimals
    return np.round(np.asarray(x, dtype=np.float64), places).tolist()


def fixed_ints(w, scale: int = 10_000):  # [...] floats in [0, 1] -> flat list of ints, w · scale rounded
    """Attention weights as whole numbers of 1e-4: '1234' instead of '0.1234' halves the file."""
    return np.rint(np.asarray(w, dtype=np.float64).ravel() * scale).astype(np.int64).tolist()


def write_view(out_dir: Path, name: str, data: dict) -> Path:
    """OUT_DIR/NAME.js setting window.TFS_VIEWS_DATA[NAME] (a script: file:// pages cannot fetch JSON)."""
    path = out_dir / f"{name}.js"
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    path.write_text("window.TFS_VIEWS_DATA = window.TFS_VIEWS_DATA || {};\n"
                    f"window.TFS_VIEWS_DATA[{json.dumps(name)}] = {body};\n", encoding="utf-8")
    return path


class Models:
    """The two real models, loaded once and only when a view asks for them."""

    def __init__(self):
        self.smollm2_model, self.minilm_model = None, None

    @property
    def smollm2(self):
        if self.smollm2_model is None:
            self.smollm2_model = T.load_smollm2(progress=False)
        return self.smollm2_model

    @property
    def minilm(self):
        if self.minilm_model is None:
            self.minilm_model = T.load_minilm()
        return self.minilm_model


# --- 1. attention: real maps, and the decode rows of generated tokens --------------------------------

def prefill_and_decode(model, ids: list[int], n_new: int, keep_layers=None):
    """Greedy generation through the KV cache, keeping every attention row on the way.

    Prefill runs the prompt (n tokens) in one pass: each layer gives (h, n, n). Each decode step
    then feeds one generated token: each layer gives its single query row (h, 1, n_k) over every
    key in the cache. Returns the fed tokens' ids (prompt + n_new generated), the next token the
    model would produce after them, the weights [L, h, N, N] (N = n + n_new, row i = query i; the
    decode rows are rows n … N − 1) and, per step, the cache's state for the KV-cache view.
    """
    cfg = model.config
    n = len(ids)
    cache = model.new_cache(b=1, n_max=n + n_new)  # allocated once for the whole request
    N = n + n_new
    W = np.zeros((cfg.L, cfg.h, N, N), dtype=np.float32)  # [L, h, N, N]
    maps: list = []
    logits = T.llama_forward(np.array([ids]), model.weights, cfg, model.cos, model.sin, cache=cache,
                             last_only=True, attn_out=maps)  # [1, 1, v]; maps: L × [1, h, n, n]
    for layer, p in enumerate(maps):
        W[layer, :, :n, :n] = T.to_numpy(p[0])
    steps = [cache_state(cache, model, query=n - 1, W=W, keep_layers=keep_layers)]  # step 0: the prefill
    seq = list(ids)
    for s in range(n_new):
        nxt = int(T.sample_next(T.to_numpy(logits[0, -1]), temperature=0))  # greedy
        seq.append(nxt)
        maps = []
        logits = T.llama_forward(np.array([[nxt]]), model.weights, cfg, model.cos, model.sin, cache=cache,
                                 last_only=True, attn_out=maps)  # maps: L × [1, h, 1, n + s + 1]
        for layer, p in enumerate(maps):
            W[layer, :, n + s, :n + s + 1] = T.to_numpy(p[0, :, 0])  # the new token's row
        steps.append(cache_state(cache, model, query=n + s, W=W, keep_layers=keep_layers))
    nxt = int(T.sample_next(T.to_numpy(logits[0, -1]), temperature=0))
    return seq, nxt, W, steps


def cache_state(cache, model, *, query: int, W, keep_layers=None) -> dict:
    """What the cache holds after a step: its length, bytes by formula and measured, the query's rows."""
    n = cache.length
    filled = sum(a[:, :, :n].nbytes for a in cache.k + cache.v)  # real bytes of the written slices
    state = {"length": n, "formula_bytes": int(model.kv_cache_bytes(n)), "measured_bytes": int(filled),
             "allocated_bytes": int(cache.nbytes)}
    if keep_layers is not None:  # [layers][h][n] the query's row in each kept layer and head
        state["rows"] = [[decimals(W[layer, head, query, :n]) for head in range(W.shape[1])]
                         for layer in keep_layers]
    return state


def token_labels(tok, ids) -> list[str]:
    return [P.visible_token(tok.decode([i])) for i in ids]


def attention_view(models: Models, fast: bool) -> dict:
    smol, mini = models.smollm2, models.minilm
    n_new = 4 if fast else 6
    smol_texts = []
    for text in ([SMOLLM2_TEXTS[0], SMOLLM2_TEXTS[-1]] if fast else SMOLLM2_TEXTS):  # fast: the lesson's two
        ids = smol.tokenizer.encode(text)
        seq, nxt, W, _ = prefill_and_decode(smol, ids, n_new)
        i, j = np.tril_indices(len(seq))  # causal: keys j ≤ i only, row by row (the rest is exactly 0)
        smol_texts.append({"text": text, "tokens": token_labels(smol.tokenizer, seq), "n_prompt": len(ids),
                           "next": P.visible_token(smol.tokenizer.decode([nxt])), "w": fixed_ints(W[:, :, i, j])})
    mini_texts = []
    for text in MINILM_TEXTS[:1 if fast else None]:
        W = np.stack(mini.attention_weights(text))  # [L, h, n, n]
        toks = mini.tokens(text)
        mini_texts.append({"text": text, "tokens": toks, "n_prompt": len(toks), "next": None, "w": fixed_ints(W)})
    sc, mc = smol.config, mini.config
    return {"w_scale": 10_000, "models": [
        {"key": "smollm2", "name": "SmolLM2-135M", "causal": True, "lower": True, "L": sc.L, "h": sc.h,
         "h_kv": sc.h_kv, "n_new": n_new, "texts": smol_texts},
        {"key": "minilm", "name": "MiniLM-L6", "causal": False, "lower": False, "L": mc.L, "h": mc.h,
         "h_kv": mc.h, "n_new": 0, "texts": mini_texts}]}


# --- 2. the KV cache during a real generation ----------------------------------------------------

def kv_cache_view(models: Models, fast: bool) -> dict:
    m = models.smollm2
    cfg = m.config
    n_new = 6 if fast else 16
    ids = m.tokenizer.encode(KV_PROMPT)
    seq, nxt, _, steps = prefill_and_decode(m, ids, n_new, keep_layers=KV_LAYERS)
    itemsize = int(np.dtype(m.weights.W_E.dtype).itemsize)
    return {"model": "SmolLM2-135M", "prompt": KV_PROMPT, "tokens": token_labels(m.tokenizer, seq),
            "next": P.visible_token(m.tokenizer.decode([nxt])), "n_prompt": len(ids), "n_max": len(seq),
            "L": cfg.L, "h": cfg.h, "h_kv": cfg.h_kv, "d_h": cfg.d_h, "itemsize": itemsize,
            "dtype": str(np.dtype(m.weights.W_E.dtype)), "bytes_per_token": int(m.kv_cache_bytes(1)),
            "layers": list(KV_LAYERS), "steps": steps}


# --- 3. FlashAttention, tile by tile ---------------------------------------------------------------

class RecordingIO(T.IOCounter):
    """An IOCounter that also notes when each load and store happened: `tag` is the number of
    tile steps the trace had recorded at that moment, so traffic between steps (Q_i loaded
    before a query block, O_i stored after it) lands on the step that follows it."""

    def __init__(self, trace: T.FlashTrace):
        super().__init__()
        self.trace = trace
        self.events: list = []  # (tag, "load" | "store", name, elements)

    def load(self, name: str, elements: int):
        self.events.append((len(self.trace.steps), "load", name, int(elements)))
        super().load(name, elements)

    def store(self, name: str, elements: int):
        self.events.append((len(self.trace.steps), "store", name, int(elements)))
        super().store(name, elements)


def flash_run(q, k, v, *, version: int, causal: bool, Br: int, Bc: int) -> dict:
    """One traced run of T.flash_attention: per step the tile, m and l of its query rows, the
    rescaling factors e^(m_old − m_new), and the HBM traffic so far."""
    n, d_h = q.shape[2], q.shape[3]
    trace = T.FlashTrace(batch=0, head=0)
    io = RecordingIO(trace)
    T.flash_attention(q, k, v, causal=causal, block_q=Br, block_k=Bc, version=version, io=io, trace=trace)
    m_now = np.full(n, -np.inf)  # each row's m before the step, from the trace's earlier steps
    steps, loads, stores = [], 0, 0
    for t in range(len(trace.steps) + 1):  # the last entry: the traffic after the final tile
        ev = [e for e in io.events if e[0] == t]
        step_io = {"loads": {}, "stores": {}}
        for _, kind, name, el in ev:
            step_io[kind + "s"][name] = step_io[kind + "s"].get(name, 0) + el
        loads += sum(step_io["loads"].values())
        stores += sum(step_io["stores"].values())
        entry = {"io": step_io, "cum_loads": loads, "cum_stores": stores}
        if t < len(trace.steps):
            s = trace.steps[t]
            entry.update({"i": s.i, "j": s.j, "kind": s.kind, "rows": list(s.rows), "cols": list(s.cols)})
            if s.kind != "skipped":
                r0, r1 = s.rows
                m_old = m_now[r0:r1].copy()
                alpha = np.exp(m_old - s.m)  # e^(m_old − m_new): 0 for a row's first tile (m_old = −inf)
                entry.update({"m": sig(s.m), "l": sig(s.l), "m_old": sig(m_old), "alpha": sig(alpha)})
                m_now[r0:r1] = s.m
        steps.append(entry)
    formula = (T.flash2_io if version == 2 else T.flash1_io)(n, n, d_h, Br, Bc, causal=causal)
    return {"version": version, "causal": causal, "Tr": trace.Tr, "Tc": trace.Tc, "steps": steps,
            "total": io.total, "formula": formula, "standard": T.standard_attention_io(n, n, d_h)}


def flash_view(models: Models, fast: bool) -> dict:
    n, d_h, Br, Bc = 14, 8, 4, 4  # 4 does not divide 14: the last block of rows and of keys is shorter
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, d_h)) for _ in range(3))  # (b, h, n, d_h)
    S = T.attention_scores(q, k)[0, 0]  # [n, n] = Q Kᵀ/√d_h, drawn inside the tiles
    runs = [flash_run(q, k, v, version=ver, causal=c, Br=Br, Bc=Bc) for ver, c in ((2, True), (1, True), (2, False))]
    return {"n": n, "d_h": d_h, "Br": Br, "Bc": Bc, "S": decimals(S), "q": decimals(q[0, 0], 6),
            "k": decimals(k[0, 0], 6), "runs": runs}


# --- 4. the paged KV cache -----------------------------------------------------------------------

PAGED_SCRIPT = [  # (what happens, request, tokens): lesson 14's pool and requests, then a few more events
    ("arrive", "A", 6), ("arrive", "B", 9), ("arrive", "C", 3),
    ("decode", "ABC", 1), ("decode", "ABC", 1), ("decode", "ABC", 1), ("decode", "ABC", 1),
    ("finish", "A", 0), ("arrive", "D", 10), ("decode", "BCD", 1), ("finish", "C", 0),
    ("arrive", "E", 7), ("decode", "BDE", 1), ("decode", "BDE", 1), ("finish", "B", 0),
]


def paged_kv_view(models: Models, fast: bool) -> dict:
    """Replay PAGED_SCRIPT on a real PagedKVCache with SmolLM2's per-token shapes (L = 30 layers,
    h_kv = 3, d_h = 64, float32) and snapshot it after every event."""
    L, h_kv, d_h, B, n_blocks, n_max = 30, 3, 64, 4, 12, 32
    cache = T.PagedKVCache(L, 0, h_kv, n_max, d_h, block_size=B, n_blocks=n_blocks, dtype=np.float32)
    rng = np.random.default_rng(0)
    seq_of: dict[str, int] = {}
    events = []
    for what, who, t in PAGED_SCRIPT:
        if what == "arrive":
            seq_of[who] = cache.add_sequence()
        for name in who:
            seq = seq_of[name]
            if what == "finish":
                cache.free_sequence(seq)
                del seq_of[name]
                continue
            for layer in range(L):  # every layer writes its K and V; the first one takes the blocks
                k_new = rng.standard_normal((h_kv, t, d_h)).astype(np.float32)  # (h_kv, t, d_h)
                cache.write(seq, layer, k_new, k_new)
            cache.extend(seq, t)
        live = {name: cache.lengths[s] for name, s in seq_of.items()}
        report = cache.memory_report()
        contiguous = T.paged_memory_report("smollm2-135m", list(live.values()), block_size=B, n_max=n_max,
                                           dtype="float32") if live else None
        events.append({"what": what, "who": who, "tokens": t,
                       "tables": {name: list(cache.tables[s]) for name, s in seq_of.items()},
                       "lengths": live, "free": list(cache.free), "report": report,
                       "contiguous_reserved": None if contiguous is None else contiguous["contiguous_reserved"]})
    return {"n_blocks": n_blocks, "block_size": B, "n_max": n_max, "L": L, "h_kv": h_kv, "d_h": d_h,
            "dtype": "float32", "bytes_per_token": cache.bytes_per_token, "pool_bytes": cache.nbytes,
            "requests": "ABCDE", "events": events}


# --- 5. next-token probabilities -------------------------------------------------------------------

def logits_summary(z, tok, top: int = TOP_LOGITS, width: float = TAIL_BIN) -> dict:
    """The `top` largest logits exactly (in the order top-k and top-p visit them: falling, ties
    by id), and the others as a histogram of bins `width` wide: (mean logit, count), falling.

    softmax needs Σ_j e^(z_j / T) over all v tokens; a bin's tokens differ by at most `width`,
    so count · e^(mean / T) stands for their sum (relative error about width² / 24T²)."""
    z = np.asarray(T.to_numpy(z), dtype=np.float64)  # [v]
    order = np.argsort(-z, kind="stable")  # [v] most likely first, ties by id: as T.filter_logits
    head, rest = order[:top], z[order[top:]]
    bins = np.floor(rest / width).astype(np.int64)  # [v - top]
    keys, inverse, counts = np.unique(bins, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=rest) / counts  # [bins]
    falling = np.argsort(-means)
    return {"ids": head.tolist(), "tokens": token_labels(tok, head.tolist()), "logits": decimals(z[head]),
            "tail": [[round(float(means[b]), 4), int(counts[b])] for b in falling], "v": int(z.size)}


def sampling_view(models: Models, fast: bool) -> dict:
    m = models.smollm2
    prompts = []
    for prompt in SAMPLING_PROMPTS[:2 if fast else None]:
        z = m.logits(prompt)[-1]  # [v] the last position's logits
        prompts.append({"prompt": prompt, **logits_summary(z, m.tokenizer)})
    return {"model": "SmolLM2-135M", "tail_bin": TAIL_BIN, "prompts": prompts}


# --- all of them ----------------------------------------------------------------------------------

BUILDERS = {"attention": attention_view, "kv_cache": kv_cache_view, "flash": flash_view,
            "paged_kv": paged_kv_view, "sampling": sampling_view}


def export_all(out_dir: Path, fast: bool = False) -> list[Path]:
    """Write OUT_DIR/NAME.js for every view; return the paths. fast: fewer texts, prompts and steps."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    models = Models()
    return [write_view(out_dir, name, BUILDERS[name](models, fast)) for name in VIEWS]


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    fast = "--fast" in args
    rest = [a for a in args if a != "--fast"]
    if len(rest) != 1:
        print("usage: python site/export_views.py OUT_DIR [--fast]", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    for path in export_all(Path(rest[0]), fast=fast):
        print(f"{path.name:12s} {path.stat().st_size / 1024:7.1f} KiB")
    print(f"exported in {time.perf_counter() - t0:.1f} s{' (fast)' if fast else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
