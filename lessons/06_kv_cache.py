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
# # 06 · The KV cache: prefill, then one row at a time
#
# **What you will see.** SmolLM2 generating text in its two stages: **prefill** runs the whole
# prompt through the model at once (an $n \times n$ causal attention matrix per head), then
# **decode** feeds one token per step, whose single query row reads every key so far from the
# cache. We check that this row is the last row of the full causal matrix (to float32 rounding:
# the sums run in another order), watch the cache grow by
# $2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes}$ per token (formula against
# the arrays' real `.nbytes`), time each step with and without the cache, and check that both
# give the same tokens. Last, why a decode step is slow at all: its time split into streaming
# the weights, attention and everything else, measured for the readable code and the fast path.
#
# **In one line:** without a cache every generation step recomputes the keys and values of
# all $n$ positions; with one it computes only the new token's and appends them, for memory
# $O(L \cdot n \cdot h_{kv} \cdot d_h)$. A reference measurement to compare with: 100 new tokens
# of a small model on a T4 GPU took 4.45 s with the cache and 33.4 s without.

# %%
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one BLAS thread gives steadier timings on a busy machine

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P

FAST = P.fast()  # TRANSFORMER_FAST=1 generates only a few tokens for the timing
rng = np.random.default_rng(0)

model = T.load_smollm2(progress=False)
tok, cfg, w = model.tokenizer, model.config, model.weights
print(f"SmolLM2: L = {cfg.L}, h = {cfg.h}, h_kv = {cfg.h_kv}, d_h = {cfg.d_h}, weights in {w.W_E.dtype}")

# %% [markdown]
# ## 1. Prefill: the prompt in one pass
#
# The prompt's $n$ tokens go through the model together. In every layer each token's key
# and value are computed and **written into the cache**; the attention matrix is the usual
# $n \times n$ causal one, and only the last row's logits are needed to pick the next token.

# %%
prompt = "The dog chased the squirrel because it"
ids = tok.encode(prompt)
n = len(ids)
cache = model.new_cache(b=1, n_max=n + 1)  # room for the prompt and one decoded token
prefill_maps = []
logits = T.llama_forward(np.array([ids]), w, cfg, model.cos, model.sin, cache=cache, last_only=True,
                         attn_out=prefill_maps)  # (1, 1, v): the last position only
nxt = int(logits[0, -1].argmax())
print(f"prompt: {n} tokens {tok.pieces(ids)}")
print("prefill attention per layer (b, h, n_q, n_k):", prefill_maps[0].shape, " cache.length =", cache.length)
print("greedy next token:", repr(tok.decode([nxt])))
k_past = [cache.k[l][:, :, :n].copy() for l in range(cfg.L)]  # keys written by prefill, per layer
assert cache.length == n and prefill_maps[0].shape == (1, cfg.h, n, n)

# %% [markdown]
# ## 2. Decode: one query row, the causal offset
#
# The new token sits at position $n$. It brings one query, one key and one value per head;
# the key and value are **appended** to the cache (concatenated after the past ones), and the query
# attends to all $n + 1$ keys. A causal mask for $n_q = 1$ query after $n$ cached keys is
# $j \le n$ for every key $j$: nothing is hidden, so the model applies no mask at all
# (`T.decoder_mask` returns `None`). The query row is offset by $n$; built as if it were row 0,
# the mask would wrongly hide all keys but the first.

# %%
decode_maps = []
logits_dec = T.llama_forward(np.array([[nxt]]), w, cfg, model.cos, model.sin, cache=cache, last_only=True,
                             attn_out=decode_maps)  # (1, 1, v)
print("decode attention per layer (b, h, n_q, n_k):", decode_maps[0].shape, " cache.length =", cache.length)
row_mask = T.causal_mask(1, n + 1)  # (1, n + 1): offset n_k - n_q = n by default
print("causal_mask(1, n + 1) with the offset:", row_mask.astype(int).tolist())
print("the same row built without the offset:  ", T.causal_mask(1, n + 1, offset=0).astype(int).tolist())
print("decoder_mask(n_q=1, n_past=n):", T.decoder_mask(1, n))
assert row_mask.all() and T.decoder_mask(1, n) is None and decode_maps[0].shape == (1, cfg.h, 1, n + 1)

# %% [markdown]
# The check that matters: run the full $n + 1$ tokens **without** a cache. The decode row must
# be the last row of that causal matrix in every layer and head, the prefill matrix its
# top-left $n \times n$ block, and the logits the same. And decoding must not touch the keys
# prefill stored: the cache only grows.

# %%
full_ids = ids + [nxt]
full_maps = model.attention_weights(full_ids)  # L × (h, n + 1, n + 1), no cache
row_err = max(np.abs(decode_maps[l][0, :, 0] - full_maps[l][:, -1]).max() for l in range(cfg.L))
block_err = max(np.abs(prefill_maps[l][0] - full_maps[l][:, :n, :n]).max() for l in range(cfg.L))
logit_err = np.abs(logits_dec[0, -1] - model.logits(full_ids)[-1]).max()
past_kept = all(np.array_equal(cache.k[l][:, :, :n], k_past[l]) for l in range(cfg.L))
print(f"decode row vs last row of the full matrix, max |Δ| over {cfg.L} layers × {cfg.h} heads: {row_err:.1e}")
print(f"prefill matrix vs the full matrix's top-left block, max |Δ|: {block_err:.1e}")
print(f"decode logits vs full-pass logits, max |Δ|: {logit_err:.1e}")
print("keys written by prefill untouched by decode:", past_kept)
assert row_err < 1e-4 and block_err < 1e-4 and logit_err < 1e-3 and past_kept

# %%
layer, head = 12, 1  # one head to draw (any layer and head pass the check above)
labels = [P.visible_token(tok.decode([i])) for i in full_ids]
fig, _ = P.decoding.prefill_decode(prefill_maps[layer][0, head], decode_maps[layer][0, head, 0], labels,
                                   layer=layer, head=head)
P.save(fig, P.figure_path("06_prefill_decode.png"))

# %% [markdown]
# ## 3. What the cache costs: bytes per token
#
# Each token leaves one key and one value vector per KV head in every layer:
#
# $$\text{bytes per token} = 2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes per number}.$$
#
# SmolLM2 keeps only $h_{kv} = 3$ KV heads for its 9 query heads (grouped-query attention,
# lesson 07) and our weights are float32 (4 bytes). The cache is allocated once for the
# longest sequence and filled slice by slice; we measure both the whole allocation and the
# filled part after every step. The last slot stays empty: the last generated token is
# returned, never fed back, so its key and value are never computed.

# %%
per_token = 2 * cfg.L * cfg.h_kv * cfg.d_h * np.dtype(w.W_E.dtype).itemsize
print(f"2 · {cfg.L} · {cfg.h_kv} · {cfg.d_h} · 4 bytes = {per_token:,} bytes per token")
assert per_token == model.kv_cache_bytes(1) == 46_080

n_new = 4 if FAST else 40  # tokens to generate in the timing runs below
n_max = n + n_new
grow_cache = model.new_cache(b=1, n_max=n_max)
alloc_ok = grow_cache.nbytes == model.kv_cache_bytes(n_max)
print(f"allocated for n_max = {n_max}: .nbytes = {grow_cache.nbytes:,} == formula {model.kv_cache_bytes(n_max):,}:",
      alloc_ok)
lengths, filled = [], []
for _ in model.stream(prompt, n_new, cache=grow_cache):
    lengths.append(grow_cache.length)
    filled.append(sum(a[:, :, :grow_cache.length].nbytes for a in grow_cache.k + grow_cache.v))  # real bytes in use
lengths, filled = np.array(lengths), np.array(filled)
grow_ok = np.array_equal(filled, lengths * per_token)
print("cache.length after each step:", lengths.tolist())
print("filled bytes == length · bytes per token at every step:", grow_ok)
assert alloc_ok and grow_ok

# %%
fig, ax = P.new_figure(figsize=(10, 5.5))
n_line = np.arange(1, n_max + 1)
P.curves(n_line, {"2·L·h_kv·d_h·4 · n": n_line * per_token / 1024}, {"2·L·h_kv·d_h·4 · n": filled / 1024},
         x_measured=lengths, ax=ax, logx=False, logy=False, xlabel="tokens in the cache n",
         ylabel="KiB", title=f"SmolLM2's KV cache, float32: {per_token / 1024:.0f} KiB per token",
         measured_label="filled slices' .nbytes")
ax.axhline(grow_cache.nbytes / 1024, color="grey", linestyle="--", linewidth=1.5)
ax.text(1, grow_cache.nbytes / 1024 * 0.985, f"allocated once for n_max = {n_max} (.nbytes)", va="top",
        fontsize=P.TICK_SIZE, color="grey")
ax.axvline(n, color="grey", linestyle=":", linewidth=1.5)
ax.text(n, ax.get_ylim()[0], " prefill", va="bottom", fontsize=P.TICK_SIZE, color="grey")
ax.legend(handles=ax.get_legend().legend_handles, loc="lower right", fontsize=P.TICK_SIZE, frameon=False)
P.save(fig, P.figure_path("06_cache_bytes.png"))

# %% [markdown]
# **Step through it.** The view below replays a real generation of SmolLM2 through its cache, one
# step at a time: the prefill, then each new token's single query row over the cached keys, the
# cache filling in every layer, and its bytes by the formula against the arrays' `.nbytes`.
#
# <div class="tfs-view" data-view="kv_cache"></div>

# %% [markdown]
# ## 4. Time per token, with and without the cache
#
# Without the cache, step $t$ runs the whole sequence of $n + t$ tokens again. A step costs
# $O(L \cdot (n \cdot d^2 + n^2 \cdot d))$ without the cache (every token through the projections
# and the feed-forward network, then attention among all of them) and $O(L \cdot (d^2 + n \cdot d))$
# with it, where a step runs one token against the cached keys ($d = 576$ for SmolLM2, the
# feed-forward width a few times $d$). At these lengths $n < d$, so the $d^2$ terms dominate: what
# the cache saves here is mostly the projections of the earlier tokens, not their attention.
#
# `model.generate` normally runs its cached steps on the fast engine of §5 (`T.FastForward`). Here
# we switch it off (`model.fast_path = False`), so both runs compute with the same readable
# `forward` and the ratio measures the cache alone; `last_stats.engine` says which path ran. We
# generate the same continuation both ways and time every step (`last_stats.steps`: step 0 is
# the prefill, the same forward pass over the prompt in both runs, the cached one also writing
# the cache), keeping for each step the fastest of a few runs. The reference run quoted above
# made 100 new tokens on a T4 GPU: 4.45 s with the cache, 33.4 s without. Our CPU, model and
# lengths differ, so only the ratio is worth comparing — and even that only roughly: it grows
# with the prompt and with the number of new tokens (we make fewer than 100), so a close match
# is partly luck.

# %%
long_prompt = ("The key and value vectors of earlier tokens never change once they are computed, "
               "so a language model can keep them in memory instead of computing them again. "
               "This saves time at every step, and the saving grows with the length of the text because")
repeats = 1 if FAST else 3  # keep each step's fastest run: other programs on the machine only ever add time
runs_with, runs_without = [], []
model.fast_path = False  # the cached steps through the readable forward too: the cache alone is compared
for _ in range(repeats):
    with_ids = model.generate(long_prompt, n_new)
    runs_with.append(model.last_stats.steps)  # seconds per step; step 0 is the prefill
    engine_with = model.last_stats.engine
    without_ids = model.generate(long_prompt, n_new, use_cache=False)
    runs_without.append(model.last_stats.steps)
    engine_without = model.last_stats.engine
model.fast_path = True  # back to the default: generation through the cache takes the fast engine
t_with, t_without = np.min(runs_with, axis=0), np.min(runs_without, axis=0)  # (steps,)
n_long = len(tok.encode(long_prompt))
assert n_long + n_new < cfg.d  # n < d: the d² terms dominate, as the text says
print(f"engines: {engine_with!r} with the cache, {engine_without!r} without")
print(f"prompt {n_long} tokens, {len(with_ids)} new tokens: {tok.decode(with_ids)!r}")
same_ids = with_ids == without_ids
print("cached == uncached token ids:", same_ids)
assert same_ids and (engine_with, engine_without) == ("readable", "no cache")

total_with, total_without = t_with.sum(), t_without.sum()
dec_with, dec_without = t_with[1:].mean(), t_without[1:].mean()
ratio = total_without / total_with
note_ratio = 33.4 / 4.45
print(f"prefill: {t_with[0]:.3f} s with the cache, {t_without[0]:.3f} s without (the same forward pass)")
print(f"mean decode step: {dec_with * 1e3:.0f} ms with the cache, {dec_without * 1e3:.0f} ms without "
      f"({dec_without / dec_with:.1f}×)")
print(f"whole generation: {total_with:.2f} s vs {total_without:.2f} s -> {ratio:.1f}× "
      f"(reference, a T4 GPU: 33.4 s / 4.45 s = {note_ratio:.1f}×)")
# Each uncached step redoes at least the prefill's work, so it cannot be faster than a cached step on average
assert dec_without > dec_with

# %%
pos = n_long + np.arange(len(t_with))  # the position of the token each step produces
fig, ax = P.decoding.time_per_token(
    pos, t_without, t_with, n_prompt=n_long,
    title=f"SmolLM2 on CPU: time per generated token ({ratio:.1f}× faster overall with the cache)"
    + "\nthe readable forward in both runs" + (f", fastest of {repeats} runs per step" if repeats > 1 else ""))
P.save(fig, P.figure_path("06_time_per_token.png"))

# %% [markdown]
# ## 5. Why decode is slow: where one token's time goes
#
# A decode step multiplies one vector by every weight matrix, so it must read all of them:
# 134.5 M float32 parameters, 538 MB, for about 2 FLOPs per weight. That is half a FLOP per byte,
# far below what the CPU could compute while the bytes arrive (lesson 13): the step waits on
# memory. Its floor is the time to stream the weights once, and we measure that floor directly:
# one matrix-vector product with each matrix the step reads and nothing else
# (`T.decode_matrices`). Everything above the floor is one of two things:
#
# - **attention over the cache**: in each of the $L$ layers the new query against $n$ cached keys
#   and values, $O(L \cdot n \cdot h \cdot d_h)$: small for a few hundred tokens, growing with the text;
# - **everything else**: the small operations between the big products (RMSNorm, RoPE, writing the
#   cache, softmax, SwiGLU, the residual adds), about 55 array operations a layer in the readable
#   code with its products (lesson 17 counts them), each a Python call that allocates its result.
#   Microseconds each; over 30 layers, milliseconds.
#
# We time three ways of running the same step, in one process, taking turns so that other work on
# the machine slows all three alike, and keep each one's fastest round (one BLAS thread, as above).
# Each round first rewinds the caches by one token, so every round times the same step over the
# same keys. The three ways:
#
# 1. **readable**: `T.llama_forward`, the formulas as written, a function per step of the maths;
# 2. **+ buffers, one loop**: `T.FastForward(..., fused=False)`, the same maths with every
#    intermediate written into an array allocated once (`out=`), RoPE as one complex multiply
#    (each pair of features is a complex number turned by $e^{i\theta}$), and the $h / h_{kv}$ queries
#    that share a key/value head as one matrix product against the cache, K and V never repeated;
# 3. **+ fused matrices**: `T.FastForward(...)` reading the loader's fused storage:
#    $[W_q \mid W_k \mid W_v]$ and $[W_{gate} \mid W_{up}]$ are one matrix each, so a layer makes 4
#    matrix-vector products instead of 7, and larger matrices stream closer to the full bandwidth.
#
# Before any timing, each way's logits are checked against the readable ones.

# %%
import time  # noqa: E402

ids_t = tok.encode(long_prompt)
n_t, rounds = len(ids_t), 3 if FAST else 25
cos_t, sin_t = model.rope_tables(n_t + 2)  # the prompt, the checked decode step and the timed one
ways = {"readable": None, "+ buffers, one loop": T.FastForward(w, cfg, fused=False),
        "+ fused matrices": T.FastForward(w, cfg)}
caches = {name: model.new_cache(1, n_t + 2) for name in ways}


def step(name, new_ids):  # one pass of new_ids (1, n) through `name`'s cache -> last logits (v,)
    cache, t = caches[name], caches[name].length
    if ways[name] is None:
        return T.llama_forward(new_ids, w, cfg, cos_t, sin_t, cache=cache, last_only=True)[0, -1]
    return ways[name](new_ids, cache, cos_t, sin_t, np.arange(t, t + new_ids.shape[1])[None])[0]


first = {name: step(name, np.array([ids_t])).copy() for name in ways}  # prefill, each into its own cache
nxt_t = int(first["readable"].argmax())
checked = {name: step(name, np.array([[nxt_t]])).copy() for name in ways}  # one decode step each
for name in ways:
    err = np.abs(checked[name] - checked["readable"]).max() / np.abs(checked["readable"]).max()
    print(f"{name:20s} logits vs readable: max |Δ| = {err:.1e} of the largest")
    assert err < 1e-5 and int(checked[name].argmax()) == int(checked["readable"].argmax())

mats = {"unfused": T.decode_matrices(w, fused=False), "fused": T.decode_matrices(w)}
vecs = {k: [(np.ones(W.shape[0], np.float32), np.empty(W.shape[1], np.float32)) for W in m] for k, m in mats.items()}


def weights_pass(kind):  # one matrix-vector product with every matrix a step reads
    for W, (x_in, y_out) in zip(mats[kind], vecs[kind]):
        np.matmul(x_in, W, out=y_out)


g = cfg.h // cfg.h_kv
q_read, q_fast = np.ones((1, cfg.h, 1, cfg.d_h), np.float32), np.ones((1, cfg.h_kv, g, cfg.d_h), np.float32)


def attention(kind):  # the L layers' attention of one query over the cache as it is now
    n_k = caches["readable"].length
    for layer in range(cfg.L):
        K, V = caches["readable"].k[layer][:, :, :n_k], caches["readable"].v[layer][:, :, :n_k]
        if kind == "readable":
            T.scaled_dot_product_attention(q_read, K, V)  # repeats K and V for the h / h_kv query heads
        else:
            T.FastForward.attend(q_fast, K, V)


parts = {"readable": ("unfused", "readable"), "+ buffers, one loop": ("unfused", "grouped"),
         "+ fused matrices": ("fused", "grouped")}  # the weights and the attention each way runs
jobs = {name: (lambda name=name: step(name, np.array([[nxt_t]]))) for name in ways}
jobs.update({f"pass {k}": (lambda k=k: weights_pass(k)) for k in mats})
jobs.update({f"attention {k}": (lambda k=k: attention(k)) for k in ("readable", "grouped")})
best = {job: np.inf for job in jobs}
n_kept = {name: caches[name].length for name in ways}  # n_t + 1: the prompt and the checked step
for _ in range(rounds):  # every job once a round, in turn; each keeps its fastest round
    for name in ways:  # rewind: every round times the same step, at position n_t + 1 over n_t + 2 keys
        caches[name].length = n_kept[name]
    for job, run in jobs.items():
        t0 = time.perf_counter()
        run()
        best[job] = min(best[job], time.perf_counter() - t0)
n_keys = caches["readable"].length  # what every round's attention read
assert n_keys == n_t + 2 and all(caches[name].length == n_keys for name in ways)
print(f"every round: one step at position {n_t + 1}, attention over {n_keys} keys")
ms = {name: {"weights": 1e3 * best[f"pass {wk}"], "attention": 1e3 * best[f"attention {ak}"],
             "total": 1e3 * best[name]} for name, (wk, ak) in parts.items()}
for name, m in ms.items():
    m["everything else"] = max(m["total"] - m["weights"] - m["attention"], 0.0)
    print(f"{name:20s} {m['total']:6.1f} ms a token ({1e3 / m['total']:4.1f} tok/s): weights {m['weights']:5.1f} ms, "
          f"attention {m['attention']:4.1f} ms, everything else {m['everything else']:4.1f} ms")
names = list(ms)
print("what each step bought (fastest round of each, same process):")
for before, after in zip(names, names[1:]):
    print(f"  {after:20s} {ms[before]['total']:6.1f} ms -> {ms[after]['total']:6.1f} ms  "
          f"({ms[before]['total'] / ms[after]['total']:.2f}×)")
print(f"  fused matrices alone, the weights pass: {ms[names[1]]['weights']:.1f} ms -> {ms[names[2]]['weights']:.1f} ms "
      f"({ms[names[1]]['weights'] / ms[names[2]]['weights']:.2f}×); the fast step reaches "
      f"{100 * ms[names[2]]['weights'] / ms[names[2]]['total']:.0f}% of its floor")

# %%
fig, ax = P.new_figure(figsize=(11, 6.5))
segments = [("weights", "streaming the weights: one matrix-vector product per matrix", P.LINE_COLORS[0]),
            ("attention", f"attention over the cache ({n_keys} tokens)", P.LINE_COLORS[2]),
            ("everything else", "everything else: Python and small NumPy operations", "#bbbbbb")]
bottom = np.zeros(len(names))
for key, label, colour in segments:
    heights = np.array([ms[name][key] for name in names])
    ax.bar(names, heights, bottom=bottom, color=colour, label=label, width=0.6)
    bottom += heights
ax.set_xticks(range(len(names)), [f"{name}\n{call}" for name, call in zip(
    names, ("T.llama_forward", "T.FastForward(fused=False)", "T.FastForward"))])
for i, name in enumerate(names):
    ax.text(i, ms[name]["total"] * 1.01, f"{ms[name]['total']:.1f} ms\n{1e3 / ms[name]['total']:.1f} tok/s",
            ha="center", va="bottom", fontsize=P.TICK_SIZE)
ax.set_ylim(0, max(m["total"] for m in ms.values()) * 1.25)
ax.set_ylabel("ms per decode step (fastest round)")
ax.set_title(f"SmolLM2 on CPU, one BLAS thread: where a decode step's time goes (measured, {rounds} rounds)")
ax.legend(loc="upper right", fontsize=P.TICK_SIZE, frameon=False)
P.save(fig, P.figure_path("06_decode_time.png"))

# %% [markdown]
# **Takeaways.** Prefill is one big causal pass that fills the cache; each decode step is one
# query row with no mask, reading keys and values that never change, so the result is the one
# recomputing everything gives (the same logits to float32 rounding, printed above). The price
# is memory that grows linearly, $2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes}$ per token — which is
# why GQA (lesson 07) shrinks $h_{kv}$. Without the cache each step redoes the whole prefix,
# so the gap widens as the text gets longer. With it, a decode step is bound by the bytes of
# weights it streams; code that runs between the matrix products only adds to that floor.

# %% [markdown]
# **Write it yourself.** `workbook/06_kv_cache.py` holds the `KVCache` class with `update` as a stub
# with this lesson's formula, and `decoder_mask` (the mask of new queries after the cached keys, `None`
# for one decode step); fill them in, then run `python -m transformer check 06`: it runs the package's
# own test cases on your code and says what is still wrong. With `--on-model` it then runs SmolLM2-135M
# through your cache and your mask.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 06` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute; the worked answers, each checked against the package, are in
# `lessons/solutions/06_kv_cache.py`.
#
# 1. Llama-2-7B has L = 32 layers, d = 4096 and h = 32 heads, and keeps a key and a value for
#    every head (no GQA). How many bytes does one token add to its cache in float16? Compare
#    with SmolLM2.
# 2. Fill Llama-2-7B's whole context, 4096 tokens, for a batch of 8: how large is the cache?
#    Is it larger than the float16 weights (6.74 billion parameters)?
# 3. **Code it.** A cache in NumPy: for q, k, v of shape (1, 2, 8, 4), allocate K and V for 8
#    positions once, prefill positions 0–4, then decode 5, 6, 7 one at a time (write the new key
#    and value at `[length]`, attend the one query to keys `[:length + 1]` with no mask). Compare
#    the three decoded rows with the last three rows of `T.scaled_dot_product_attention` over all
#    8 positions with `T.causal_mask(8)`.
