# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 13 · Counting a model: parameters, FLOPs, bytes
#
# **What you will see.** The parameters of SmolLM2-135M, Phi-3-mini and Llama-3-8B split
# into embeddings, attention, FFN, norms and LM head, with totals checked against the
# published ones and against the real weights file; the FLOPs of a forward pass for a
# prompt (prefill) and for one generated token (decode), as the sum of a term that grows
# like $n$ (the matrix products with the weights) and one that grows like $n^2$ or $n$
# (attention); arithmetic intensity — FLOPs per byte moved — which shows why decoding one
# token at a time is limited by memory bandwidth, not by arithmetic; and the KV cache
# against the context length.
#
# **The ideas behind it.** A model's parameters and a forward pass's operations can be counted
# exactly, for prefill and for decode; Phi-3-mini's printed module list (32 layers, $d = 3072$,
# vocabulary 32064, `qkv_proj` 9216, `gate_up_proj` 16384) is one such count to check; the
# KV cache holds $2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes per number}$ per token;
# and a cache turns the cost of each generated token from a whole prefill into one step.

# %%
# SmolLM2's count is checked against its GGUF weights file, read with the gguf package:
# requires: gguf
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import dataclasses

import numpy as np

import transformer as T
from transformer import plotting as P

FAST = P.fast()  # TRANSFORMER_FAST=1 allocates fewer measured caches for the test suite
rng = np.random.default_rng(0)

MODELS = {"SmolLM2-135M": "smollm2-135m", "Phi-3-mini": "phi-3-mini", "Llama-3-8B": "llama-3-8b"}
cfg = {name: T.load_config(key) for name, key in MODELS.items()}

# %% [markdown]
# ## 1. Parameters, part by part
#
# Everything follows from a handful of dimensions (the legend: $L$ layers, width $d$,
# $h$ query heads and $h_{kv}$ key/value heads of size $d_h$, FFN width $d_\text{ff}$,
# vocabulary $v$). For these Llama-style decoders (no biases, RMSNorm, SwiGLU):
#
# | part | parameters |
# |---|---|
# | embeddings | $v \cdot d$ |
# | attention, per layer | $d \cdot h d_h$ ($W_q$) $+\; 2 \cdot d \cdot h_{kv} d_h$ ($W_k, W_v$) $+\; h d_h \cdot d$ ($W_o$) |
# | FFN, per layer | $3 \cdot d \cdot d_\text{ff}$ (gate, up, down) |
# | norms | $d$ per RMSNorm: two per layer and a final one |
# | LM head | $v \cdot d$, or 0 when tied to the embeddings (SmolLM2) |

# %%
for name, c in cfg.items():
    print(f"{name:13s} L={c.L:2d} d={c.d:4d} h={c.h:2d} h_kv={c.h_kv:2d} d_h={c.d_h:3d} "
          f"d_ff={c.d_ff:5d} v={c.v:6d} tied head: {c.tied}")
parts = {name: T.parameter_breakdown(key) for name, key in MODELS.items()}
PART_NAMES = {"embeddings": "embeddings", "attention": "attention", "ffn": "FFN", "norms": "norms",
              "lm_head": "LM head"}
print()
print(f"{'':13s}" + "".join(f"{label:>16s}" for label in PART_NAMES.values()) + f"{'total':>16s}")
for name, p in parts.items():
    print(f"{name:13s}" + "".join(f"{p[k]:16,d}" for k in PART_NAMES) + f"{p['total']:16,d}")

# %% [markdown]
# Three independent checks of the totals:
#
# * **Llama-3-8B**: the published count, 8,030,261,248.
# * **Phi-3-mini**: the published count, 3,821,079,552 — and, separately, the shapes in
#   Phi-3-mini's printed module list, added up by hand: `qkv_proj` is one $3072 \to 9216$ matrix, i.e.
#   $W_q, W_k, W_v$ side by side ($9216 = h d_h + 2 h_{kv} d_h$ with $h = h_{kv} = 32$,
#   $d_h = 96$), and `gate_up_proj` is $3072 \to 16384$, gate and up side by side
#   ($16384 = 2 d_\text{ff}$).
# * **SmolLM2-135M**: the number of values stored in the real GGUF weights file (its
#   quantisation changes bytes, not counts), also tallied part by part from the tensor names.

# %%
PUBLISHED = {"Llama-3-8B": 8_030_261_248, "Phi-3-mini": 3_821_079_552}
for name, total in PUBLISHED.items():
    print(f"{name}: counted {parts[name]['total']:,} = published {total:,}: {parts[name]['total'] == total}")
    assert parts[name]["total"] == total

c = cfg["Phi-3-mini"]
assert c.h * c.d_h + 2 * c.h_kv * c.d_h == 9216 and 2 * c.d_ff == 16384
printout = {  # (in_features, out_features) of each Linear in Phi-3-mini's printed module list, or the size of a vector
    "embed_tokens": 32064 * 3072,
    "per layer": 3072 * 9216 + 3072 * 3072 + 3072 * 16384 + 8192 * 3072 + 2 * 3072,  # qkv, o, gate_up, down, 2 norms
    "final norm": 3072,
    "lm_head": 3072 * 32064,
}
by_printout = printout["embed_tokens"] + 32 * printout["per layer"] + printout["final norm"] + printout["lm_head"]
print(f"Phi-3-mini from the printout's shapes: {by_printout:,}")
assert by_printout == parts["Phi-3-mini"]["total"]

reader = T.open_gguf(T.smollm2_path())


def gguf_part(tensor_name):  # GGUF tensor names -> our parts
    if tensor_name == "token_embd.weight":
        return "embeddings"
    if tensor_name == "output.weight":
        return "lm_head"
    if "norm" in tensor_name:
        return "norms"
    return "attention" if ".attn_" in tensor_name else "ffn"


on_disk = {k: 0 for k in PART_NAMES}
for t in reader.tensors:
    on_disk[gguf_part(t.name)] += int(t.n_elements)
print(f"SmolLM2-135M GGUF: {len(reader.tensors)} tensors, {sum(on_disk.values()):,} values; by part {on_disk}")
assert all(on_disk[k] == parts["SmolLM2-135M"][k] for k in PART_NAMES)
assert sum(on_disk.values()) == parts["SmolLM2-135M"]["total"]

# %%
norm_share = {nm: parts[nm]["norms"] / parts[nm]["total"] for nm in parts}
fig, ax = P.models.parameter_shares(parts, PART_NAMES, title="Where the parameters are "
                                    "(norms: under 0.03 % in every model, too thin to see)")
P.save(fig, P.figure_path("13_parameters.png"))
print("norms' share:", {nm: f"{s:.4%}" for nm, s in norm_share.items()})
assert max(norm_share.values()) < 3e-4

# %%
emb_share, ffn_share = {}, {}
for name, p in parts.items():
    c = cfg[name]
    emb_share[name] = p["embeddings"] / p["total"]
    ffn_share[name] = p["ffn"] / (p["attention"] + p["ffn"])
    print(f"{name:13s} embeddings {emb_share[name]:5.1%} of the model;  "
          f"FFN {ffn_share[name]:5.1%} of the layers' attention + FFN  "
          f"(d_ff / d = {c.d_ff / c.d:.2f}, h_kv / h = {c.h_kv}/{c.h})")
smol_mha = dataclasses.replace(cfg["SmolLM2-135M"], h_kv=cfg["SmolLM2-135M"].h)  # SmolLM2 without GQA
smol_mha_share = (lambda p: p["ffn"] / (p["attention"] + p["ffn"]))(T.parameter_breakdown(smol_mha))
print(f"SmolLM2-135M with h_kv = h: FFN {smol_mha_share:.1%} of the layers (Phi-3-mini: {ffn_share['Phi-3-mini']:.1%})")
assert emb_share["SmolLM2-135M"] > 0.2 > 0.1 > max(emb_share["Phi-3-mini"], emb_share["Llama-3-8B"]), \
    "the vocabulary table: a large share of the small model, a small one of the large models"
assert min(ffn_share.values()) > 0.5, "in every model the FFN holds most of the layer parameters"
assert max(ffn_share, key=ffn_share.get) == "Llama-3-8B", "Llama-3-8B's FFN share is the largest of the three"
assert 3 * cfg["SmolLM2-135M"].d_ff == 8 * cfg["SmolLM2-135M"].d and 3 * cfg["Phi-3-mini"].d_ff == 8 * cfg["Phi-3-mini"].d
assert np.isclose(smol_mha_share, ffn_share["Phi-3-mini"]), "with the same d_ff / d, GQA is the whole gap"

# %% [markdown]
# The vocabulary table is a large share of the small model and a small one of the large
# models: it does not grow with depth, the layers do. In every model the FFN holds most of
# the layer parameters, and two ratios set how much: the FFN's width $d_\text{ff}/d$ and the
# KV heads $h_{kv}/h$ (GQA gives $W_k, W_v$ only $h_{kv}$ heads). Phi-3-mini and SmolLM2 share
# $d_\text{ff}/d = 8/3$; SmolLM2's GQA is the whole gap between them. Llama-3-8B has GQA too
# and a wider FFN, $d_\text{ff} = 3.5\,d$: that is why its share is the largest of the three.
#
# ## 2. FLOPs: prefill vs decode
#
# A matrix product $(m \times k)(k \times n)$ costs $2mkn$ FLOPs (a multiply and an add per
# term). A token passing through a weight matrix of $N$ numbers therefore costs $2N$ FLOPs,
# whatever the context — the familiar "2 FLOPs per parameter per token" (the embedding
# lookup is not a product, so it does not count; the LM head does). Attention adds two
# products that depend on the context, $S = QK^\top$ and $PV$, each $2 \cdot h \cdot d_h \cdot
# n_q \cdot n_k$ per layer:
#
# * **prefill** ($n$ prompt tokens at once, $n_q = n_k = n$): $\;2 N n + 4 L h d_h n^2$ — the
#   second term, counted here for the dense $n \times n$ scores (a causal kernel skips about
#   half, lesson 09), takes over at $n^* = N / (2 L h d_h)$;
# * **decode** (one new token, $n$ already cached, $n_q = 1$, $n_k = n + 1$):
#   $\;2N + 4 L h d_h (n + 1)$ — without the cache it would be a whole prefill of $n + 1$
#   tokens for every new token.

# %%
n_line = 2 ** np.arange(7, 18)  # 128 … 131072 tokens
flops = {}
for name, key in MODELS.items():
    c = cfg[name]
    N_mat = parts[name]["attention"] + parts[name]["ffn"] + c.v * c.d  # the weights a token is multiplied by
    dec = T.decode_flops(key, 1000)
    pre = T.prefill_flops(key, 1000)
    assert dec["matmul"] == 2 * N_mat and pre["matmul"] == 1000 * dec["matmul"]  # 2 FLOPs per weight per token
    assert pre["attention"] == 4 * c.L * c.h * c.d_h * 1000 ** 2 and dec["attention"] == 4 * c.L * c.h * c.d_h * 1001
    n_star = N_mat / (2 * c.L * c.h * c.d_h)
    print(f"{name:13s} matmul weights N = {N_mat:,}: 2N = {2 * N_mat / 1e9:6.2f} GFLOP per token; "
          f"attention overtakes the weights at n* = N / (2·L·h·d_h) = {n_star:,.0f} tokens")
    flops[name] = {"prefill": [T.prefill_flops(key, int(n)) for n in n_line],
                   "decode": [T.decode_flops(key, int(n)) for n in n_line], "n_star": n_star}
ll = flops["Llama-3-8B"]
i_1k = list(n_line).index(1024)
print(f"Llama-3-8B, 1024-token prompt: prefill {T.prefill_flops('llama-3-8b', 1024, logits='last')['total'] / 1e12:.1f} TFLOP "
      f"(logits of the last token only); "
      f"one decode step at that context {ll['decode'][i_1k]['total'] / 1e9:.1f} GFLOP; "
      f"without a cache that step would be a prefill of 1025 tokens: "
      f"{T.prefill_flops('llama-3-8b', 1025, logits='last')['total'] / 1e12:.1f} TFLOP")

# %%
fig, axes = P.models.flops_by_phase(n_line, ll)
P.save(fig, P.figure_path("13_flops.png"))

# %% [markdown]
# ## 3. Arithmetic intensity: why decode waits on memory
#
# A GPU can do a certain number of FLOPs per second and move a certain number of bytes per
# second from its memory. Their ratio, the *ridge point*, is how many FLOPs a computation
# must do per byte it reads for the arithmetic to be the bottleneck. As an illustration take
# an NVIDIA H100 SXM's published peaks: about 989 TFLOP/s of dense 16-bit tensor-core
# arithmetic and 3.35 TB/s of HBM3 bandwidth, a ridge of about 295 FLOP/byte.
#
# `arithmetic_intensity` divides a pass's FLOPs by the bytes it must move: every weight read
# once (16-bit) plus the KV-cache traffic. Prefill multiplies each weight it reads by all
# $b \cdot n$ tokens; decode by only $b$ tokens, so it does about 2 FLOPs per 2-byte weight:
# about 1 FLOP per byte, over two hundred times below the ridge, up to a 1024-token context.
# Longer contexts read more of the cache, whose numbers GQA shares among $h/h_{kv}$ query
# heads: $2h/h_{kv}$ FLOPs per 2-byte number, so decode's intensity creeps up but stays at most
# $h/h_{kv}$ (3 for SmolLM2, 4 for Llama-3-8B), still over a hundred times below the ridge.

# %%
PEAK_FLOPS = 989e12  # FLOP/s, H100 SXM dense BF16/FP16 tensor cores (datasheet, illustration)
BANDWIDTH = 3.35e12  # bytes/s, H100 SXM HBM3 (datasheet, illustration)
ridge = PEAK_FLOPS / BANDWIDTH
print(f"ridge point: {PEAK_FLOPS / 1e12:.0f} TFLOP/s / {BANDWIDTH / 1e12:.2f} TB/s = {ridge:.0f} FLOP per byte")
assert abs(ridge - 295) < 1
n_ai = 2 ** np.arange(7, 16)  # 128 … 32768
short = n_ai <= 1024
intensity = {}
for name, key in MODELS.items():
    c = cfg[name]
    ai = [T.arithmetic_intensity(key, int(n)) for n in n_ai]
    intensity[f"{name} prefill"] = pre = np.array([a["prefill"]["intensity"] for a in ai])
    intensity[f"{name} decode"] = dec = np.array([a["decode"]["intensity"] for a in ai])
    print(f"{name:13s} decode: {dec[short].min():.2f}…{dec[short].max():.2f} FLOP/B up to n = 1024 "
          f"({ridge / dec[short].max():.0f}× below the ridge), at most {dec.max():.2f} up to n = {n_ai[-1]} "
          f"({ridge / dec.max():.0f}× below; h / h_kv = {c.h // c.h_kv})")
    assert np.all((0.99 < dec[short]) & (dec[short] < 1.2)) and ridge / dec[short].max() > 200, \
        f"{name}: decode does about 1 FLOP per byte, over 200× below the ridge, up to n = 1024"
    assert dec.max() < c.h / c.h_kv + 1e-9 and ridge / dec.max() > 100, f"{name}: decode under h / h_kv FLOP/B"
    assert np.all(pre[n_ai <= 256] < ridge) and np.all(pre[n_ai >= 512] > ridge), \
        f"{name}: prefill clears the ridge from 512 tokens, not at 256"
phi_dec = intensity["Phi-3-mini decode"]
print("Phi-3-mini decode intensity (h_kv = h: each cached K/V number is used for exactly 2 FLOPs):",
      np.unique(np.round(phi_dec, 12)).tolist())
assert np.allclose(phi_dec, 1.0)
for name in MODELS:
    print(f"{name:13s} n = 1024: prefill {intensity[f'{name} prefill'][3]:7.0f} FLOP/B, "
          f"decode {intensity[f'{name} decode'][3]:5.2f} FLOP/B")

# %% [markdown]
# For a memory-bound step the time is bytes / bandwidth, for a compute-bound one FLOPs /
# peak; the real time is at least the larger. One decode step of Llama-3-8B at a
# 1024-token context (b = 1), and what batching does to it — the weights are read once for
# the whole batch, so the FLOPs per byte grow with $b$:

# %%
batches = [1, 8, 64, 512]
roof_points = {}
for b in batches:
    a = T.arithmetic_intensity("llama-3-8b", 1024, batch=b)["decode"]
    t_mem, t_math = a["bytes"] / BANDWIDTH, a["flops"] / PEAK_FLOPS
    roof_points[f"decode, b = {b}"] = a["intensity"]
    print(f"b = {b:3d}: {a['bytes'] / 1e9:6.2f} GB moved, {a['flops'] / 1e9:8.1f} GFLOP -> memory {t_mem * 1e3:6.2f} ms, "
          f"arithmetic {t_math * 1e3:6.3f} ms: {'memory' if t_mem > t_math else 'compute'}-bound "
          f"({a['intensity']:.1f} FLOP/B)")
a1 = T.arithmetic_intensity("llama-3-8b", 1024, batch=1)["decode"]
kv_share = T.kv_cache_bytes("llama-3-8b", 1025, batch=512) / T.arithmetic_intensity("llama-3-8b", 1024, batch=512)["decode"]["bytes"]
print(f"at b = 512 the KV caches are {kv_share:.0%} of the bytes: each sequence reads its own cache")
assert a1["bytes"] / BANDWIDTH > 100 * a1["flops"] / PEAK_FLOPS  # decode at b = 1: memory-bound by far
assert max(roof_points.values()) < ridge and kv_share > 0.5, "up to b = 512 decode stays under the ridge, the caches dominating"
roof_points["prefill, n = 1024"] = T.arithmetic_intensity("llama-3-8b", 1024)["prefill"]["intensity"]

# %% [markdown]
# Batching shares the weights among $b$ sequences, but not the caches: each sequence reads
# its own keys and values for only a few FLOPs each (about $2 h / h_{kv}$ per cached
# number), so at large batches the cache traffic takes over and decode stays under the
# ridge. Only the prefill of a long enough prompt does enough arithmetic per byte: for these
# three models, 512 tokens or more (at 256 all three are still under the ridge).

# %%
fig, axes = P.models.roofline(n_ai, intensity, roof_points, MODELS, peak_flops=PEAK_FLOPS, bandwidth=BANDWIDTH)
P.save(fig, P.figure_path("13_intensity.png"))

# %% [markdown]
# ## 4. The KV cache against the context
#
# Each token in the context keeps a key and a value vector per KV head per layer:
# $2 \cdot L \cdot h_{kv} \cdot d_h \cdot 2$ bytes in 16-bit. Phi-3-mini uses
# plain multi-head attention ($h_{kv} = h = 32$), so its cache per token is the largest of
# the three despite a smaller model than Llama-3-8B ($h_{kv} = 8$). The dashed lines mark
# each model's own weights in 16-bit, the diamonds each model's context window. For one
# sequence the cache stays below the weights inside the window: the curves cross the dashed
# lines only beyond it. What makes the caches outweigh the model is the batch — every
# sequence keeps its own cache, so $b$ sequences at full context take $b$ times the bytes.
# Lines are the formula; dots are the bytes of real `KVCache` arrays.

# %%
n_kv = 2 ** np.arange(7, 18)  # 128 … 131072
n_kv_meas = 2 ** np.arange(8, 11 if FAST else 13)  # caches actually allocated (np.zeros: pages untouched)
kv_line, kv_meas, weights_gib = {}, {}, {}
for name, key in MODELS.items():
    c = cfg[name]
    per_tok = T.kv_cache_bytes_per_token(key)
    kv_line[name] = np.array([T.kv_cache_bytes(key, int(n)) for n in n_kv]) / 2 ** 30
    kv_meas[name] = np.array([T.KVCache(c.L, 1, c.h_kv, int(n), c.d_h, dtype=np.float16).nbytes
                              for n in n_kv_meas]) / 2 ** 30
    assert np.array_equal(kv_meas[name] * 2 ** 30, n_kv_meas * per_tok)
    weights_gib[name] = parts[name]["total"] * 2 / 2 ** 30
    print(f"{name:13s} {per_tok:8,d} bytes per token ({per_tok / 1024:5.1f} KiB); weights {weights_gib[name]:6.2f} GiB "
          f"= the cache of {parts[name]['total'] * 2 / per_tok:9,.0f} tokens; "
          f"cache at {c.n_ctx} tokens (its context window): {T.kv_cache_bytes(key, c.n_ctx) / 2 ** 30:.2f} GiB")
    b_over = int(np.ceil(parts[name]["total"] * 2 / T.kv_cache_bytes(key, c.n_ctx)))  # sequences at full context
    print(f"{'':13s} caches outweigh the weights from b = {b_over} sequences at full context")
    assert T.kv_cache_bytes(key, c.n_ctx) < parts[name]["total"] * 2  # one sequence: never, inside the window
print("KVCache.nbytes equals the formula for n in", n_kv_meas.tolist())
per_token = {name: T.kv_cache_bytes_per_token(key) for name, key in MODELS.items()}
assert max(per_token, key=per_token.get) == "Phi-3-mini", "plain MHA: the largest cache per token of the three"
assert parts["Phi-3-mini"]["total"] < parts["Llama-3-8B"]["total"], "… though a smaller model than Llama-3-8B"

# %%
windows = {name: (cfg[name].n_ctx, T.kv_cache_bytes(key, cfg[name].n_ctx) / 2 ** 30) for name, key in MODELS.items()}
fig, ax = P.models.kv_cache_growth(n_kv, kv_line, kv_meas, n_kv_meas, windows, weights_gib)
P.save(fig, P.figure_path("13_kv_cache.png"))

# %% [markdown]
# **Takeaways.** A model's size is a sum over a few shapes, and the same shapes give its
# FLOPs: $2N$ per token for the weights plus an attention term that grows with the
# context. Prefill reuses every weight for all prompt tokens and keeps the arithmetic
# busy; decode reuses each weight only $b$ times, does about one FLOP per byte and waits on
# memory — which is why batching, smaller caches (GQA, lesson 07) and paged caches
# (lesson 14) matter for serving.

# %% [markdown]
# **Write it yourself.** `workbook/13_counting.py` holds `count_parameters`, `forward_flops` (section 2's
# FLOPs, prefill and decode, part by part), `arithmetic_intensity` (section 3) and `kv_cache_bytes_per_token`
# as stubs with this lesson's formulas; fill them in, then run `python -m transformer check 13`: it runs the
# package's own test cases on your code and says what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 13` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/13_counting.py`.
#
# 1. **Crossover, causal.** The figure counts dense $n^2$ scores. A causal kernel computes about
#    half of them. At what prompt length do Llama-3-8B's attention FLOPs then equal its weights'
#    FLOPs? Work $N$ out from the config, then check against `T.prefill_flops("llama-3-8b", n)`.
# 2. **Count the arrays.** The table of §1 is a formula; measure it. Build a small random model,
#    `T.random_llama(T.LlamaConfig(L=2, d=16, h=4, h_kv=2, d_h=4, d_ff=24, v=50, n_ctx=64))`,
#    predict its parameter count with the table, then add up the `.size` of every weight array
#    in its `.weights` (the table, each layer's matrices and norms, the final norm). Compare with
#    `T.count_parameters`.
