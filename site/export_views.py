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
    soft_lookup lesson 03's q over three 2-D keys: scores, weights (T.softmax) and output
                (T.scaled_dot_product_attention); the page redoes the formula as q is dragged
    masks       lesson 05's masks from the package's builders for n = 8, 16, 32 and each parameter,
                with T.attended_pairs of each
    online_softmax  lesson 08's row: m and l after each step (T.online_softmax_history), the output
                accumulator folded key by key (T.online_attention_update)
    training    lesson 19's run (T.train_induction, seed 0): loss, held-out accuracy, head scores and
                every head's attention map at each snapshot

Numbers are rounded (weights to 4 decimals, logits to 4 decimals, the rest to 4 significant
digits) to keep the files small. The fast mode (`--fast`, for CI) drops SmolLM2's second text, MiniLM's
last two and two of the four sampling prompts, and decodes 4 tokens instead of 6 (attention) and 6
instead of 16 (KV cache), and trains lesson 19's run for its first 60 steps instead of all 600;
the flash, paged, lookup, masks and online-softmax views are the same in both modes.

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
# the rounding and the per-text numbers, shared with `python -m transformer serve` (its live answers)
from transformer.cli.view_numbers import (  # noqa: E402,F401
    TAIL_BIN, TOP_LOGITS, W_SCALE, cache_state, decimals, fixed_ints, logits_summary, minilm_text, prefill_and_decode,
    sig, smollm2_text, token_labels)

VIEWS = ("attention", "kv_cache", "flash", "paged_kv", "sampling", "soft_lookup", "masks", "online_softmax",
         "training")

SMOLLM2_TEXTS = ["The dog chased the squirrel because it", "The capital of France is",
                 "The cat sat on the mat. The cat sat on the"]  # the last repeats itself: induction heads
MINILM_TEXTS = ["The dog chased the squirrel because it was fast", "The dog chased the squirrel because it",
                "The trophy did not fit in the suitcase because it was too big."]
SAMPLING_PROMPTS = ["The capital of France is", "Once upon a time", "The dog chased the squirrel because it",
                    "def fibonacci(n):"]
KV_PROMPT = "The dog chased the squirrel because it"  # lesson 06's prompt
KV_LAYERS = (0, 6, 12, 18, 24, 29)  # the decode rows kept for the KV-cache view: every 6th layer and the last


# --- rounding and the files ------------------------------------------------------------------------

def write_view(out_dir: Path, name: str, data: dict) -> Path:
    """OUT_DIR/NAME.js setting window.TFS_VIEWS_DATA[NAME] (a script: file:// pages cannot fetch JSON)."""
    path = out_dir / f"{name}.js"
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    path.write_text("window.TFS_VIEWS_DATA = window.TFS_VIEWS_DATA || {};\n"
                    f"window.TFS_VIEWS_DATA[{json.dumps(name)}] = {body};\n", encoding="utf-8")
    return path


class Models:
    """The two real models, loaded once and only when a view asks for them."""

    def __init__(self, smollm2=None, minilm=None):  # models already loaded, if the caller has them
        self.smollm2_model, self.minilm_model = smollm2, minilm

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

def attention_view(models: Models, fast: bool) -> dict:
    smol, mini = models.smollm2, models.minilm
    n_new = 4 if fast else 6
    # each text's entry is what `python -m transformer serve` answers live (transformer/cli/view_numbers.py)
    smol_texts = [smollm2_text(smol, text, n_new)
                  for text in ([SMOLLM2_TEXTS[0], SMOLLM2_TEXTS[-1]] if fast else SMOLLM2_TEXTS)]  # fast: the lesson's two
    mini_texts = [minilm_text(mini, text) for text in MINILM_TEXTS[:1 if fast else None]]
    sc, mc = smol.config, mini.config
    return {"w_scale": W_SCALE, "models": [
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

def sampling_view(models: Models, fast: bool) -> dict:
    m = models.smollm2
    prompts = []
    for prompt in SAMPLING_PROMPTS[:2 if fast else None]:
        z = m.logits(prompt)[-1]  # [v] the last position's logits
        prompts.append({"prompt": prompt, **logits_summary(z, m.tokenizer)})
    return {"model": "SmolLM2-135M", "tail_bin": TAIL_BIN, "prompts": prompts}


# --- 6. the core lessons: one query over a few keys (03), masks (05), the online softmax (08) ------

LOOKUP_NAMES = ["the", "dog", "barked"]  # lesson 03, section 3: its q, three keys and three values


def soft_lookup_view(models: Models, fast: bool) -> dict:
    """Lesson 03's hand example, q = (2, 1) over three 2-D keys: the scores, weights and output the
    package gives for it. The page redoes s_j = q·k_j/√d_k, softmax and Σ p_j v_j as the reader drags q."""
    q = np.array([2.0, 1.0])  # (d_k,)
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (n, d_k)
    V = np.array([[4.0, 0.0], [0.0, 4.0], [2.0, 3.0]])  # (n, d_v)
    s = T.attention_scores(q[None, None, None], K[None, None])[0, 0, 0]  # (n,) = q·k_j / √d_k
    o, p = T.scaled_dot_product_attention(q[None, None, None], K[None, None], V[None, None], return_weights=True)
    return {"names": LOOKUP_NAMES, "d_k": 2, "query": q.tolist(), "keys": K.tolist(), "values": V.tolist(),
            "scores": decimals(s, 6), "weights": decimals(T.softmax(s), 6),
            "sdpa_weights": decimals(p[0, 0, 0], 6), "output": decimals(o[0, 0, 0], 6),
            "extent": 4, "step": 0.25}  # ±4: the corner (4, −4) gives k₀ 94 % (±3 reached only 88 %)


MASK_NS = (8, 16, 32)  # the sizes the picker offers; 16 and 32 are lesson 05's n_s (fast and full)


def bits(mask) -> list[str]:  # [n, n] bool -> n rows of hex digits, 4 keys a digit, key 0 the high bit
    a = np.asarray(T.to_numpy(mask), dtype=bool)
    n = a.shape[-1]
    padded = np.zeros((a.shape[0], -(-n // 4) * 4), dtype=bool)
    padded[:, :n] = a
    digits = padded.reshape(a.shape[0], -1, 4) @ np.array([8, 4, 2, 1])  # [n, ⌈n/4⌉]
    return ["".join("0123456789abcdef"[d] for d in row) for row in digits]


def masks_view(models: Models, fast: bool) -> dict:
    """Lesson 05's masks from the package's builders, for n = 8, 16, 32 and every value of their
    parameter, with T.attended_pairs of each: the pairs attention computes under it, against n²."""
    def pad(n, length):  # a batch of one sequence of `length` real tokens, padded to n: (n, n) as drawn
        return np.broadcast_to(T.padding_mask(np.array([length]), n)[0, 0], (n, n))

    kinds = [  # key, label, parameter name (None: none), builder(n, p)
        ("causal", "causal (decoder)", None, lambda n, p: T.causal_mask(n)),
        ("bidirectional", "bidirectional (encoder, full)", None, lambda n, p: T.bidirectional_mask(n)),
        ("padding", "padding", "real tokens", lambda n, p: pad(n, p)),
        ("causal_padding", "causal & padding", "real tokens", lambda n, p: T.causal_mask(n) & pad(n, p)),
        ("window", "sliding window (causal)", "window w", lambda n, p: T.sliding_window_mask(n, p)),
        ("strided", "strided (Sparse Transformer)", "stride ℓ", lambda n, p: T.strided_mask(n, p)),
        ("global", "global tokens (Longformer)", "global tokens", lambda n, p: T.global_mask(n, list(range(p)))),
    ]
    default = {"padding": 0.6, "causal_padding": 0.6, "window": 0.25, "strided": 0.25, "global": 0.07}
    out = []
    for key, label, param, build in kinds:
        sizes = {}
        for n in MASK_NS:
            values = [None] if param is None else list(range(1, n + 1))
            masks = [build(n, p) for p in values]
            sizes[str(n)] = {"values": values, "rows": [bits(m) for m in masks],
                             "pairs": [T.attended_pairs(m) for m in masks],
                             "default": 0 if param is None else max(0, round(default[key] * n) - 1)}
        out.append({"key": key, "label": label, "param": param, "sizes": sizes})
    return {"ns": list(MASK_NS), "n": 16, "masks": out}


def online_softmax_view(models: Models, fast: bool) -> dict:
    """Lesson 08's row x and its 2-D values V (default_rng(0), as the lesson draws them): after each
    step j, T.online_softmax_history's m and l, the factor e^(m_old − m_new), and the output
    accumulator O folded key by key with T.online_attention_update, O/l beside softmax(x[:j]) @ V."""
    x = np.array([1.0, 3.0, 0.5, 4.0, 2.0, 6.0, 1.5, 5.0])  # (n,) lesson 08's scores
    V = np.random.default_rng(0).normal(size=(len(x), 2))  # (n, d_v) lesson 08's values, the same draw
    m_hist, l_hist = T.online_softmax_history(x, block=1)  # (n,), (n,)
    m, l, O = np.full((1, 1), -np.inf), np.zeros((1, 1)), np.zeros((1, 2))  # (Br, 1), (Br, 1), (Br, d_v)
    steps = []
    for j in range(len(x)):
        m_old = float(m[0, 0])
        m, l, O = T.online_attention_update(m, l, O, x[None, j:j + 1], V[j:j + 1])  # one key per step
        prefix = T.softmax(x[:j + 1])  # (j + 1,) the two-pass softmax of what has been read
        steps.append({"m": float(m_hist[j]), "l": sig(l_hist[j], 8), "m_old": None if j == 0 else m_old,
                      "alpha": sig(np.exp(m_old - m_hist[j]), 8), "term": sig(np.exp(x[j] - m_hist[j]), 8),
                      "O": sig(O[0], 8), "o": sig(O[0] / l[0, 0], 8), "weights": sig(prefix, 6),
                      "prefix_out": sig(prefix @ V[:j + 1], 8)})
    return {"x": x.tolist(), "V": decimals(V, 6), "steps": steps, "softmax": sig(T.softmax(x), 6),
            "output": sig(T.softmax(x) @ V, 8)}


# --- 7. training from scratch: lesson 19's run, snapshot by snapshot --------------------------------

# the lesson's run (seed 0) in both builds, about 20 s: the fast build's first 60 steps, before any head had
# formed, showed a view whose loss never fell under the lesson's text saying it does
TRAIN_STEPS = {False: 600, True: 600}
TRAIN_SNAPSHOT_EVERY = {False: 20, True: 20}


def training_view(models: Models, fast: bool) -> dict:
    """T.train_induction(seed=0), lesson 19's run (600 steps, about 20 s, in both builds):
    the loss at every step, and at every snapshot the held-out accuracy, the two head scores
    and every head's attention map on the held-out probe (24 tokens, 12 then the same 12)."""
    run = T.train_induction(seed=0, steps=TRAIN_STEPS[fast], snapshot_every=TRAIN_SNAPSHOT_EVERY[fast],
                            progress=False)
    cfg, h, s = run["cfg"], run["history"], run["snapshots"]
    maps = np.asarray(s["maps"])  # [k, L, h, n, n], causal
    n = maps.shape[-1]
    i, j = np.tril_indices(n)
    return {"steps": run["steps"], "full_steps": TRAIN_STEPS[False], "seed": run["seed"], "fast": fast,
            "L": cfg.L, "h": cfg.h, "v": cfg.v, "n": n, "n_half": int(s["n_half"]), "ids": [int(t) for t in s["ids"]],
            "loss": sig(h["loss"], 5), "chance": float(np.log(cfg.v - 1)),
            "snap_steps": [int(t) for t in s["step"]], "accuracy": sig(s["accuracy"], 4),
            "scores": {k: decimals(v, 4) for k, v in s["scores"].items()},
            "w_scale": 1000, "maps": fixed_ints(maps[..., i, j], 1000),
            "heldout_accuracy": float(run["heldout_accuracy"])}


# --- all of them ----------------------------------------------------------------------------------

BUILDERS = {"attention": attention_view, "kv_cache": kv_cache_view, "flash": flash_view,
            "paged_kv": paged_kv_view, "sampling": sampling_view,
            "soft_lookup": soft_lookup_view, "masks": masks_view, "online_softmax": online_softmax_view,
            "training": training_view}


def export_all(out_dir: Path, fast: bool = False, models: Models | None = None) -> list[Path]:
    """Write OUT_DIR/NAME.js for every view; return the paths. fast: fewer texts, prompts and steps.
    models: the real models, if already loaded (default: each loaded when a view first needs it)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    models = Models() if models is None else models
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
