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
# # 14 · Serving memory: a paged KV cache
#
# **What you will see.** The KV cache of many requests at once stored the way an
# operating system stores memory pages: one pool of fixed-size blocks, a free list, and
# per request a *block table* that says which blocks hold its positions, in order
# (PagedAttention, the idea behind vLLM). We follow a small pool as requests arrive, grow
# one token at a time, finish and give their blocks back to a newcomer; check that
# attention reading K and V block by block through the table equals attention over a
# contiguous cache; and measure the memory a batch of requests of varied lengths reserves
# when each is given a contiguous cache of the maximum length, against the paged cache.
#
# **The ideas behind it.** PagedAttention (vLLM) stores the cache in fixed-size blocks; a
# token's keys and values take $2 \cdot L \cdot h_{kv} \cdot d_h \cdot \text{bytes per number}$;
# the cache grows by one token per generated token, so its memory is
# $O(L \cdot n \cdot d_h \cdot h_{kv})$.

# %%
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = _here if (_here / "transformer").is_dir() else _here.parent  # run as a script, or as a notebook in lessons/
sys.path.insert(0, str(ROOT))

import numpy as np

import transformer as T
from transformer import plotting as P
FAST = P.fast()  # TRANSFORMER_FAST=1 uses a smaller batch of requests for the test suite
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Why not one contiguous array per request?
#
# Lesson 06's `KVCache` allocates, per sequence, room for $n_\text{max}$ positions up front:
# the cache is written by slice and never moves. A server does not know how long a
# request will run, so it must reserve the maximum for each — and most requests stop far
# earlier. The paged cache reserves memory a block of `block_size` positions at a time:
#
# $$\text{position } p \text{ of a sequence lives in block } \texttt{table}[\,p \,/\!/\, B\,],
#   \text{ slot } p \bmod B .$$
#
# A block is taken from the free list only when the sequence's last block is full, and all
# its blocks go back to the free list when it finishes. The only waste is the unfilled end
# of each sequence's last block: less than one block per request.

# %% [markdown]
# ## 2. A small pool, step by step
#
# Twelve blocks of four positions, one layer, two KV heads of size 4. Three requests
# arrive with prompts of 6, 9 and 3 tokens; then they decode one token at a time in turn,
# so their blocks interleave in the pool. Beside the cache we keep each request's K and V
# in an ordinary contiguous array: the reference the paged cache must reproduce.

# %%
B, n_blocks, h_kv, d_h = 4, 12, 2, 4
cache = T.PagedKVCache(1, 0, h_kv, 32, d_h, block_size=B, n_blocks=n_blocks, dtype=np.float64)
reference = {}  # seq id -> (K, V), each (h_kv, n, d_h): the same positions, contiguous
names = {}  # seq id -> a letter for the figures


def append(seq, t):  # t new positions for one sequence: write them, then advance it
    k_new = rng.standard_normal((h_kv, t, d_h))  # (h_kv, t, d_h)
    v_new = rng.standard_normal((h_kv, t, d_h))
    cache.write(seq, 0, k_new, v_new)
    cache.extend(seq, t)
    K, V = reference.get(seq, (np.zeros((h_kv, 0, d_h)), np.zeros((h_kv, 0, d_h))))
    reference[seq] = (np.concatenate([K, k_new], axis=1), np.concatenate([V, v_new], axis=1))  # (h_kv, n + t, d_h)


def snapshot(title):  # what the figure draws: owner and filled slots of every block
    owner = np.full(n_blocks, -1)
    filled = np.zeros(n_blocks, dtype=int)
    for seq, table in cache.tables.items():
        for idx, blk in enumerate(table):
            owner[blk] = seq
            filled[blk] = min(B, cache.lengths[seq] - idx * B)
    tables = {names[s]: (list(t), cache.lengths[s]) for s, t in cache.tables.items()}
    return title, owner, filled, tables


def show():
    for seq, table in cache.tables.items():
        print(f"   {names[seq]}: {cache.lengths[seq]:2d} tokens, block table {table}")
    print(f"   free list (a stack: the last entry is handed out next): {cache.free}")


snaps = []
for letter, prompt in zip("ABC", (6, 9, 3)):
    seq = cache.add_sequence()
    names[seq] = letter
    append(seq, prompt)  # prefill: the whole prompt at once
print("after the three prompts:")
show()
for step in range(4):  # decode: one token per request per step, in turn
    for seq in list(cache.tables):
        append(seq, 1)
print("after 4 decode steps each:")
show()
snaps.append(snapshot("A, B, C after their prompts and 4 decode steps each"))

seq_A = next(s for s, nm in names.items() if nm == "A")
freed = list(cache.tables[seq_A])
cache.free_sequence(seq_A)
print(f"A finishes: its blocks {freed} go back to the free list")
show()
snaps.append(snapshot(f"A finished: blocks {freed} are free again"))

seq_D = cache.add_sequence()
names[seq_D] = "D"
append(seq_D, 10)
print("D arrives with a 10-token prompt:")
show()
snaps.append(snapshot("D (10 tokens) reuses A's blocks"))
assert set(cache.tables[seq_D]) <= set(freed), "a newcomer takes the freed blocks first"
assert sum(len(t) for t in cache.tables.values()) + len(cache.free) == n_blocks  # no block lost or shared
owners = [b_ for t in cache.tables.values() for b_ in t]
assert len(owners) == len(set(owners))

# %% [markdown]
# `gather` reads a sequence back through its table; it must give the contiguous arrays:

# %%
for seq in cache.tables:
    K, V = cache.gather(seq, 0)  # (h_kv, n, d_h) each, copied out block by block
    assert np.array_equal(K, reference[seq][0]) and np.array_equal(V, reference[seq][1])
print("gather() equals the contiguous K and V of every live request:", True)
# The byte counts, measured from the arrays: the pool blocks the tables point at (filled or
# not), and the K and V that gather() copies out (the filled positions only).
live = sorted({blk for t in cache.tables.values() for blk in t})  # block ids some table holds
held = sum(pool[live].nbytes for pool in cache.k + cache.v)  # (blocks, h_kv, B, d_h) per layer, K and V
filled = sum(K.nbytes + V.nbytes for K, V in (cache.gather(s, 0) for s in cache.tables))
print(f"reserved {cache.reserved_bytes:,} bytes for {cache.used_bytes:,} used "
      f"({cache.blocks_in_use} blocks of {B} positions for {sum(cache.lengths.values())} tokens); "
      f"measured: the blocks in the tables hold {held:,} bytes, the gathered K and V {filled:,}")
assert cache.reserved_bytes == held, "reserved_bytes is the bytes of the blocks the tables point at"
assert cache.used_bytes == filled, "used_bytes is the bytes of the positions stored"

# %%
fig, axes = P.decoding.block_pool(snaps, names, n_blocks=n_blocks, B=B)
P.save(fig, P.figure_path("14_block_tables.png"))

# %% [markdown]
# **Step through it.** The view below replays this pool and its requests on a real
# `PagedKVCache` with SmolLM2's per-token size, and goes on: a request finishes, another arrives
# and takes the freed blocks. At each event: the pool coloured by owner, every block table, the
# free list, and the bytes used, reserved and wasted against a contiguous cache per request.
#
# <div class="tfs-view" data-view="paged_kv"></div>

# %% [markdown]
# ## 3. Attention through the block table
#
# `paged_attention` never copies a sequence's K and V into one array: it fetches one block
# at a time by its id and folds it in with the online softmax of lesson 08 (running max,
# running sum, rescaled output). Its result must equal ordinary attention over the
# contiguous arrays — for a decode step (one query, the newest position) and for a
# prefill (every position a query, causal), with $h = 4$ query heads sharing the
# $h_{kv} = 2$ cached heads (GQA).

# %%
h = 4
worst = 0.0
for seq in cache.tables:
    n = cache.lengths[seq]
    K, V = reference[seq]
    for n_q in (1, n):  # decode: the last position asks; prefill: all of them
        q = rng.standard_normal((h, n_q, d_h))  # (h, n_q, d_h)
        paged = T.paged_attention(q, cache.k[0], cache.v[0], cache.tables[seq], n)  # (h, n_q, d_h)
        contiguous = T.scaled_dot_product_attention(q[None], K[None], V[None], T.causal_mask(n_q, n))[0]
        worst = max(worst, float(np.abs(paged - contiguous).max()))
    print(f"{names[seq]}: {n} tokens in blocks {cache.tables[seq]}: paged == contiguous for n_q = 1 and n_q = {n}")
print(f"largest difference: {worst:.1e}")
assert worst < 1e-12

# %% [markdown]
# "Never copies" measured: `T.measure_peak_bytes` counts, with `tracemalloc`, every array NumPy
# allocates during a call. One long sequence of 1,024 positions: a decode step that reads 64 of
# them and one that reads all 1,024 should hold the same peak (a block's worth of temporaries),
# far below the sequence's K and V. The control is `gather`, which does copy them out: the same
# count must see that copy.

# %%
n_long = 1024
long = T.PagedKVCache(1, 0, h_kv, n_long, d_h, block_size=B, n_blocks=n_long // B, dtype=np.float64)
seq_long = long.add_sequence()
long.write(seq_long, 0, np.ones((h_kv, n_long, d_h)), np.ones((h_kv, n_long, d_h)))  # the values do not matter here
long.extend(seq_long, n_long)
q_step = np.ones((h, 1, d_h))  # (h, 1, d_h): one decode query
T.paged_attention(q_step, long.k[0], long.v[0], long.tables[seq_long], n_long)  # warm-up: one-off allocations
step_peak = {n_read: T.measure_peak_bytes(T.paged_attention, q_step, long.k[0], long.v[0], long.tables[seq_long],
                                          n_read)[1] for n_read in (64, n_long)}
gather_peak = T.measure_peak_bytes(long.gather, seq_long, 0)[1]
kv_bytes = 2 * h_kv * n_long * d_h * 8  # the sequence's K and V, float64
print(f"peak allocation of a decode step reading 64 positions: {step_peak[64]:,} bytes; reading {n_long}: "
      f"{step_peak[n_long]:,} bytes; the sequence's K and V: {kv_bytes:,}; gather (a copy): {gather_peak:,}")
assert gather_peak >= kv_bytes, "control: the count sees a copy of K and V when one is made"
assert step_peak[n_long] <= 1.1 * step_peak[64] and step_peak[n_long] < kv_bytes / 10, \
    "paged_attention's memory does not grow with the sequence: it holds one block at a time, no copy of K and V"

# %% [markdown]
# ## 4. What it saves: a batch of requests of varied lengths
#
# A batch of requests whose final lengths (prompt + generated) vary widely, served with a
# maximum length $n_\text{max}$. A contiguous cache must reserve $n_\text{max}$ positions for
# each; the paged cache reserves $\lceil n_i / B \rceil$ blocks. `paged_memory_report` states
# both as formulas. The block accounting is also measured: the requests are written into a
# real `PagedKVCache` (one layer, one tiny head — the block tables do not depend on the head
# size) and a real contiguous `KVCache` is allocated for the same batch; their positions,
# times the bytes per token of a real model, give the bytes. The pool is written with ones, so
# the positions are counted in the arrays themselves: a slot holding a 1 is filled, a block with
# a filled slot is reserved (a sequence's last block always holds at least one position).

# %%
model, model_name = "llama-3-8b", "Llama-3-8B"
n_max, block = 4096, 16
b_req = 12 if FAST else 24
lengths = np.clip(rng.lognormal(mean=6.3, sigma=0.9, size=b_req).astype(int), 20, n_max)  # (b,) tokens per request
report = T.paged_memory_report(model, lengths, block_size=block, n_max=n_max)
per_tok = report["bytes_per_token"]
print(f"{b_req} requests, lengths {sorted(lengths.tolist())}")
print(f"{model_name}: {per_tok:,} bytes per token (16-bit), n_max = {n_max}, block = {block} positions")


def fill_pool(bs):  # a one-layer pool of blocks of bs positions holding the batch, every position a 1
    pool_b = T.PagedKVCache(1, 0, 1, n_max, 1, block_size=bs, n_blocks=int(sum(-(-lengths // bs))),
                            dtype=np.float16)
    for n_i in lengths:
        seq = pool_b.add_sequence()
        pool_b.write(seq, 0, np.ones((1, int(n_i), 1), np.float16), np.ones((1, int(n_i), 1), np.float16))
        pool_b.extend(seq, int(n_i))
    return pool_b


def slots(pool_b):  # (filled positions, positions of the blocks holding any) counted in the K array
    filled = pool_b.k[0][:, 0, :, 0] != 0  # (n_blocks, bs): True where a position was written
    return int(filled.sum()), int(filled.any(axis=1).sum()) * pool_b.block_size


pool = fill_pool(block)
contiguous = T.KVCache(1, b_req, 1, n_max, 1, dtype=np.float16)
used_pos, reserved_pos = slots(pool)
measured_tokens = {"used": used_pos, "paged_reserved": reserved_pos,
                   "contiguous_reserved": contiguous.nbytes / pool.bytes_per_token}
for key, tok in measured_tokens.items():
    print(f"{key:20s} measured {tok:9,.0f} positions = formula {report[key] / per_tok:9,.0f}  "
          f"-> {tok * per_tok / 2 ** 30:6.2f} GiB for {model_name}")
    assert tok * per_tok == report[key], f"{key}: the positions counted in the arrays disagree with the formula"
assert (pool.used_bytes, pool.reserved_bytes) == (used_pos * pool.bytes_per_token, reserved_pos * pool.bytes_per_token)
print(f"utilisation: paged {report['paged_utilisation']:.1%}, contiguous {report['contiguous_utilisation']:.1%}; "
      f"paged waste {report['paged_waste'] / 2 ** 20:.1f} MiB < one block per request "
      f"({b_req * block * per_tok / 2 ** 20:.1f} MiB)")
assert report["paged_waste"] < b_req * block * per_tok
saved = report["contiguous_reserved"] / report["paged_reserved"]
print(f"the contiguous caches reserve {saved:.1f}× the memory of the paged one: "
      f"{saved:.1f}× as many requests of this mix fit in the same memory")
assert report["paged_utilisation"] > 0.98, "paged: the reservation is within 2 % of what is used"
assert saved > 3, "the contiguous caches reserve several times the paged one for this mix"

# %% [markdown]
# The block size is a trade-off: small blocks waste less at each sequence's end, but make
# longer block tables and smaller reads. Waste against block size, formula (line) and the
# measured pool (dots, its empty slots counted in the array):

# %%
block_line = 2 ** np.arange(1, 10)  # 2 … 512 positions per block (1 would waste nothing: off a log axis)
waste_line = np.array([T.paged_memory_report(model, lengths, block_size=int(bs), n_max=n_max)["paged_waste"]
                       for bs in block_line]) / 2 ** 20
block_meas = np.array([4, 16, 64, 256])
waste_meas, table_len = [], []
for bs in block_meas:
    pool_b = fill_pool(int(bs))
    used_pos, reserved_pos = slots(pool_b)
    waste_meas.append((reserved_pos - used_pos) * per_tok / 2 ** 20)
    table_len.append(sum(len(t) for t in pool_b.tables.values()))  # block ids in all the tables
assert np.allclose(waste_meas, waste_line[np.isin(block_line, block_meas)])
contig_waste = report["contiguous_waste"] / 2 ** 20
print("paged waste (MiB) by block size:", dict(zip(block_line.tolist(), np.round(waste_line, 1).tolist())))
print("block table entries by block size (measured):", dict(zip(block_meas.tolist(), table_len)))
print(f"contiguous waste: {contig_waste:,.0f} MiB")
assert np.all(np.diff(waste_line) > 0) and np.all(np.diff(waste_meas) > 0), "waste grows with the block size"
assert np.all(np.diff(table_len) < 0), "smaller blocks make longer block tables"

# %%
fig, axes = P.decoding.fragmentation(lengths, report, (block_line, waste_line, block_meas, waste_meas),
                                     n_max=n_max, block=block, per_tok=per_tok, model_name=model_name)
P.save(fig, P.figure_path("14_fragmentation.png"))

# %% [markdown]
# **Takeaways.** A paged cache is a pool of blocks plus one small table per request:
# positions map to (block, slot) like virtual addresses to pages. A request holds only the
# blocks it has filled (plus part of one), a finished request's blocks serve the next one at
# once, and attention reads the blocks through the table with the online softmax, giving
# exactly the contiguous result. Against preallocating the maximum length, the memory a
# batch reserves falls to what it uses (within 2 %, asserted in section 4) — and that is how
# many more requests fit on one GPU.

# %% [markdown]
# **Write it yourself.** `workbook/14_paged_kv.py` holds the `PagedKVCache` class whole except `write`
# (blocks taken from the free list as a request grows, new keys copied across block boundaries),
# `paged_attention` (attention through a block table) and `paged_memory_report` (section 4's bytes,
# paged against contiguous), as stubs with this lesson's formulas; fill them in, then run
# `python -m transformer check 14`: it replays section 2's requests on your class, runs the
# package's own test cases on your code and says what is still wrong.
#
# Run it from the repository root with the `.venv` active; in a notebook opened in `lessons/`, a
# cell holding `!cd .. && {sys.executable} -m transformer check 14` does the same.

# %% [markdown]
# ## Try it
#
# Predict first, then compute. Worked solutions, each checked against the package by
# `tests/test_exercises.py`, are in `lessons/solutions/14_paged_kv.py`.
#
# 1. **Blocks.** Requests of 100, 33 and 64 tokens, blocks of 16: how many blocks, and how many
#    token slots stay unused? Check with `T.paged_memory_report`.
# 2. **Gather, coded.** A pool of 8 blocks of 4 positions, shape (8, h_kv, 4, d_h), and a
#    request of 10 tokens whose block table is `[5, 0, 3]`: read its K and V back in position
#    order with one fancy index, a `swapaxes` and a `reshape`. How many positions of block 3 are
#    real? Compare attention over your arrays with `T.paged_attention`.
