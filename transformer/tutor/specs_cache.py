"""The checker's cases for lessons 06 and 14: the KV cache's update and the paged cache's write, each held to its
contract (written in place, self.written recorded, the length left to advance/extend; the cache's views returned,
the paged cache's blocks taken from the free list only as needed) as well as to its values."""
from __future__ import annotations

import math

import numpy as np

from ..core.kv_cache import KVCache
from ..core.paged_kv import PagedKVCache
from .cases import Case, Mistake, Spec, fresh

__all__ = ["KV_CACHE_UPDATE", "PAGED_WRITE"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 06: the KV cache's update ------------------------------------------------------------
def cache_cases():
    r = _rng(61)
    kv = lambda t: (r.standard_normal((2, 2, t, 4)), r.standard_normal((2, 2, t, 4)))  # noqa: E731
    return [Case("prefill 3 positions on 2 layers, then 2 decode steps (b=2, h_kv=2, n_max=8, d_h=4)",
                 ([kv(3), kv(3)], [kv(1), kv(1)], [kv(1), kv(1)])),
            Case("prefill 1 position, a chunk of 4, then 1 decode step", ([kv(1), kv(1)], [kv(4), kv(4)],
                                                                           [kv(1), kv(1)])),
            Case("prefill 6 positions, then a chunk of 3: 9 positions in a cache of n_max=8",
                 ([kv(6), kv(6)], [kv(3), kv(3)]), tags=frozenset({"refuse"}), refuses=ValueError, names=(8, 9),
                 refusal="6 cached positions and 3 new ones make 9, more than the n_max=8 the cache was allocated "
                         "for")]


UPDATES = [(s, layer) for s in range(3) for layer in range(2)]  # every case: 3 steps on 2 layers, in this order
REPLACED = "updates that replaced self.k[layer] or self.v[layer] by a new array"
COPIED = "K and V returned as copies, not views of the cache"
CACHE_NAMES = (tuple(f"{kv} returned at step {s}, layer {layer}" for s, layer in UPDATES for kv in ("K", "V"))
               + tuple(f"self.written[{layer}] after step {s}" for s, layer in UPDATES) + (REPLACED, COPIED))


def run_cache(cls, case):
    """Build cls(n_layers=2, b=2, h_kv=2, n_max=8, d_h=4) and feed it the steps. Returns every K and V that update
    returned, self.written after each update, then how many updates replaced a layer's arrays and how many of the
    returned K and V are copies: the docstring's cache is allocated once, written by slice, read through views."""
    (steps,), _ = fresh(Case("", (case.args,)))
    cache = cls(2, 2, 2, 8, 4, dtype=np.float64)
    returned, written, replaced, copied = [], [], 0, 0
    for step in steps:
        for layer, (k, v) in enumerate(step):
            arrays = cache.k[layer], cache.v[layer]
            res = cache.update(layer, k, v)
            pair = tuple(res) if isinstance(res, (tuple, list)) and len(res) == 2 else (res, None)
            replaced += cache.k[layer] is not arrays[0] or cache.v[layer] is not arrays[1]
            copied += sum(not (isinstance(a, np.ndarray) and np.shares_memory(a, store))
                          for a, store in zip(pair, (cache.k[layer], cache.v[layer])))
            written.append(cache.written[layer])
            # what it returned, as it was then: a later update that writes the wrong layer is not blamed on this one
            returned.extend(np.array(a, copy=True) if a is not None else None for a in pair)
        cache.advance(step[0][0].shape[2])
    return tuple(returned) + tuple(written) + (replaced, copied)


class _OnlyNew(KVCache):
    def update(self, layer, k_new, v_new):
        KVCache.update(self, layer, k_new, v_new)
        return k_new, v_new


class _AtZero(KVCache):
    def update(self, layer, k_new, v_new):
        t = k_new.shape[2]
        self.k[layer][:, :, :t], self.v[layer][:, :, :t] = k_new, v_new
        self.written[layer] = self.length + t
        return self.k[layer][:, :, :self.length + t], self.v[layer][:, :, :self.length + t]


class _MovesLength(KVCache):  # update moves self.length itself: the next layer writes after the first's positions
    def update(self, layer, k_new, v_new):
        end = self.length + k_new.shape[2]
        self.k[layer][:, :, self.length:end], self.v[layer][:, :, self.length:end] = k_new, v_new
        self.written[layer], self.length = end, end
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def advance(self, t):  # the workbook's, which does not check self.written as the package's does
        self.length += t


class _OneLayer(KVCache):  # every layer written into, and read from, layer 0's arrays
    def update(self, layer, k_new, v_new):
        end = self.length + k_new.shape[2]
        self.k[0][:, :, self.length:end], self.v[0][:, :, self.length:end] = k_new, v_new
        self.written[layer] = end
        return self.k[0][:, :, :end], self.v[0][:, :, :end]


def _not_in_place(rebuild: bool, copies: bool, records: bool):
    """An update with the right values that breaks the cache's contract: the layer's arrays rebuilt with
    np.concatenate (rebuild), copies returned instead of views (copies), self.written not recorded (not records)."""
    class NotInPlace(KVCache):
        def update(self, layer, k_new, v_new):
            end = self.length + k_new.shape[2]
            for store, new in ((self.k, k_new), (self.v, v_new)):
                if rebuild:
                    store[layer] = np.concatenate([store[layer][:, :, :self.length], new, store[layer][:, :, end:]],
                                                  axis=2)
                else:
                    store[layer][:, :, self.length:end] = new
            if records:
                self.written[layer] = end
            K, V = self.k[layer][:, :, :end], self.v[layer][:, :, :end]
            return (K.copy(), V.copy()) if copies else (K, V)

        def advance(self, t):  # the workbook's, which does not check self.written as the package's does
            self.length += t
    return NotInPlace


REBUILT = ("write into the arrays __init__ allocated, by slice (self.k[layer][:, :, length:end] = k_new), and return "
           "views of them: np.concatenate builds a new array, copying the whole cache at every step — the cost the "
           "cache is there to avoid")
COPIES = ("return views of the cache, self.k[layer][:, :, :length + t], not copies: a copy costs at every step the "
          "time and memory the cache saves")
UNRECORDED = "record self.written[layer] = length + t: that layer's positions [0, length + t) now hold keys and values"
NOT_IN_PLACE = [Mistake("; ".join(h for h, wrong in ((REBUILT, rebuild), (COPIES, copies and not rebuild),
                                                     (UNRECORDED, not records)) if wrong),
                        variant=_not_in_place(rebuild, copies, records))
                for rebuild in (True, False) for copies in (True, False) for records in (True, False)
                if rebuild or copies or not records]

KV_CACHE_UPDATE = Spec(
    "KVCache", KVCache, cache_cases, "transformer/core/kv_cache.py", dims=("b", "h_kv", "n", "d_h"),
    names=CACHE_NAMES, call=run_cache, shown="KVCache.update",
    mistakes=[Mistake("return every position written so far, [0, length + t), not only the new ones",
                      variant=_OnlyNew),
              Mistake("write the new positions at [length, length + t): the cache keeps what came before",
                      variant=_AtZero),
              Mistake("each layer has its own arrays: write and read self.k[layer] and self.v[layer], so that one "
                      "layer's keys never overwrite another's", variant=_OneLayer),
              Mistake("update must not move self.length: every layer writes its new positions at the same "
                      "[length, length + t), and advance(t) moves length on once all layers have", variant=_MovesLength),
              Mistake("check length + t ≤ n_max first, and raise ValueError naming both: a slice past n_max is "
                      "NumPy's broadcast error, and np.concatenate would grow the cache in silence", tag="refuse"),
              ] + NOT_IN_PLACE)


# --- lesson 14: the paged cache's write ----------------------------------------------------------
PAGED_SIZES = dict(n_layers=2, h_kv=2, d_h=4, block_size=4, n_blocks=40)  # room for a slip that takes too many
# every case runs these events, with its own lengths: three requests, two rounds of each in turn, A finishes,
# D arrives in A's blocks, B goes on
PAGED_WRITES = ("A", "B", "C", "A", "B", "C", "A", "B", "C", "D", "B")
PAGED_LIVE = ("B", "C", "D")  # the requests left at the end


def paged_cases():
    r = _rng(141)

    def script(prompts, step, d_prompt):  # the events, each write with its (k, v) per layer: [h_kv, t, d_h] each
        h_kv, d_h, L = PAGED_SIZES["h_kv"], PAGED_SIZES["d_h"], PAGED_SIZES["n_layers"]
        kv = lambda t: [(r.standard_normal((h_kv, t, d_h)), r.standard_normal((h_kv, t, d_h)))  # noqa: E731
                        for _ in range(L)]
        lengths = dict(zip("ABC", prompts), D=d_prompt)
        events = [("add", name) for name in "ABC"]
        for i, name in enumerate(PAGED_WRITES):
            if name == "D":
                events += [("free", "A"), ("add", "D")]
            events.append(("write", name, kv(lengths[name] if i < 3 or name == "D" else step)))
        return tuple(events)
    return [Case("prompts of 6, 9 and 3 tokens, 2 decode steps each in turn, A finishes, D's 10 tokens take A's "
                 "blocks (block_size 4, 40 blocks, 2 layers)", (script((6, 9, 3), 1, 10),)),
            Case("prompts of 3, 1 and 4 tokens, then chunks of 3 that start inside a block and cross into the "
                 "next; A finishes, D's 6 tokens take its blocks", (script((3, 1, 4), 3, 6),),
                 tags=frozenset({"chunks"})),
            Case("six requests of 32 tokens in a pool of 40 blocks of 4: the sixth finds the free list empty",
                 (full_pool(r),), tags=frozenset({"refuse"}), refuses=RuntimeError, names=(40,),
                 refusal="five requests of 32 tokens hold all 40 blocks, and none is free for the sixth")]


def full_pool(r):
    """Six requests, each written 32 positions at once: the first five take the pool's 40 blocks."""
    h_kv, d_h, L = PAGED_SIZES["h_kv"], PAGED_SIZES["d_h"], PAGED_SIZES["n_layers"]
    kv = [(r.standard_normal((h_kv, 32, d_h)), r.standard_normal((h_kv, 32, d_h))) for _ in range(L)]
    return tuple([("add", name) for name in "ABCDEF"] + [("write", name, kv) for name in "ABCDEF"])


def _read(pool, table, n, bs):  # [n_blocks, h_kv, bs, d_h] -> [h_kv, n, d_h]: position p at table[p // bs], p % bs
    """NaN at a position the table does not reach (a write that took too few blocks, or a length moved twice)."""
    missing = np.full(pool.shape[1:2] + pool.shape[3:], np.nan)  # [h_kv, d_h]
    return np.stack([pool[table[p // bs], :, p % bs] if p // bs < len(table) else missing for p in range(n)], axis=1)


PAGED_NAMES = (tuple(f"{name}'s block table after write {i + 1}" for i, name in enumerate(PAGED_WRITES))
               + tuple(f"self.written[{name}][{layer}] after write {i + 1}"
                       for i, name in enumerate(PAGED_WRITES) for layer in range(PAGED_SIZES["n_layers"]))
               + ("the free list at the end",)
               + tuple(f"{kv} of {name}, layer {layer}, read through its block table at the end"
                       for name in PAGED_LIVE for layer in range(PAGED_SIZES["n_layers"]) for kv in "KV")
               + ("pool arrays replaced by new ones (1: self.k[layer] or self.v[layer] is not the array __init__ "
                  "allocated)",))
PAGED_DIMS = ((("blocks",),) * len(PAGED_WRITES) + (None,) * (len(PAGED_WRITES) * PAGED_SIZES["n_layers"])
              + (("blocks",),) + (("h_kv", "n", "d_h"),) * (2 * len(PAGED_LIVE) * PAGED_SIZES["n_layers"]) + (None,))
assert len(PAGED_DIMS) == len(PAGED_NAMES)


def run_paged(cls, case):
    """Build cls(2 layers, b=0, h_kv=2, n_max=32, d_h=4, block_size=4, n_blocks=12) and play the case's events:
    add_sequence, then for each write every layer's write(seq, layer, k, v) and extend(seq, t), free_sequence.
    Returns the writer's block table after each write, self.written after each layer's write, the free list at the
    end, K and V of each live request read through its table by this function (not by the class's gather), and how
    many pool arrays were replaced: the pool is allocated once and written in place."""
    (events,), _ = fresh(case)
    s = PAGED_SIZES
    cache = cls(s["n_layers"], 0, s["h_kv"], 32, s["d_h"], block_size=s["block_size"], n_blocks=s["n_blocks"],
                dtype=np.float64)
    pools, ids, tables, written = list(cache.k + cache.v), {}, [], []
    for event in events:
        if event[0] == "add":
            ids[event[1]] = cache.add_sequence()
        elif event[0] == "free":
            cache.free_sequence(ids[event[1]])
        else:
            seq = ids[event[1]]
            for layer, (k, v) in enumerate(event[2]):
                cache.write(seq, layer, k, v)
                written.append(cache.written[seq][layer])
            cache.extend(seq, event[2][0][0].shape[1])
            tables.append(np.array(cache.tables[seq], dtype=np.int64))
    reads = [_read(pool[layer], cache.tables[ids[name]], cache.lengths[ids[name]], s["block_size"])
             for name in PAGED_LIVE for layer in range(s["n_layers"]) for pool in (cache.k, cache.v)]
    replaced = int(any(a is not b for a, b in zip(pools, cache.k + cache.v)))
    return tuple(tables) + tuple(written) + (np.array(cache.free, dtype=np.int64),) + tuple(reads) + (replaced,)


def _paged_write(need=lambda start, t, have, bs: math.ceil((start + t) / bs) - have, take=-1, at_zero=False,
                 records=True, moves_length=False, rebuild=False):
    """PagedKVCache.write with a slip: need(start, t, blocks held, block_size) the blocks taken; take the free
    list's end (-1) or its start (0); the positions written from 0; self.written not recorded; the length moved; the
    layer's K pool copied into a new array before it is written (rebuild)."""
    class Slipped(PagedKVCache):
        def extend(self, seq, t):  # the workbook's, which does not check self.written as the package's does
            self.lengths[seq] += t

        def write(self, seq, layer, k_new, v_new):
            t, table, bs = k_new.shape[1], self.tables[seq], self.block_size
            start = 0 if at_zero else self.lengths[seq]
            for _ in range(max(0, need(start, t, len(table), bs))):
                table.append(self.free.pop(take))
            if rebuild:
                self.k[layer] = self.k[layer].copy()
            for p in range(start, start + t):
                self.k[layer][table[p // bs], :, p % bs] = k_new[:, p - start]
                self.v[layer][table[p // bs], :, p % bs] = v_new[:, p - start]
            if records:
                self.written[seq][layer] = start + t
            if moves_length:
                self.lengths[seq] += t
    return Slipped


EXHAUSTED = ("when the free list is empty, no block can be taken: raise RuntimeError naming the pool's size "
             "(self.free.pop() on an empty list is IndexError, which says nothing of the cache)")
CROSSING = ("the new positions can start inside a block that is partly full and run across block boundaries: copy "
            "them one block at a time (position p goes to block table[p // block_size], slot p % block_size)")
PAGED_WRITE = Spec(
    "PagedKVCache", PagedKVCache, paged_cases, "transformer/core/paged_kv.py", dims=PAGED_DIMS, names=PAGED_NAMES,
    call=run_paged, shown="PagedKVCache.write", dtype_rule="",
    mistakes=[Mistake("the table may already cover some of the new positions — its last block can be partly full, "
                      "and the other layers find the blocks the first layer took: take only ⌈(length + t) / "
                      "block_size⌉ − len(table) blocks", variant=_paged_write(lambda start, t, have, bs:
                                                                              math.ceil(t / bs))),
              Mistake("the free list is a stack: take its last entry, self.free.pop() — block 0 goes first, and a "
                      "block just freed is reused first", variant=_paged_write(take=0)),
              Mistake("write the new positions at [length, length + t), after those the sequence holds: "
                      "start = self.lengths[seq]", variant=_paged_write(at_zero=True)),
              Mistake("record self.written[seq][layer] = length + t: that layer's positions [0, length + t) now hold "
                      "keys and values", variant=_paged_write(records=False)),
              Mistake("write must not move self.lengths[seq]: every layer writes at the same [length, length + t), "
                      "and extend(seq, t) moves it once all layers have", variant=_paged_write(moves_length=True)),
              Mistake("write into the pools __init__ allocated, by slice (self.k[layer][block, :, slot] = …): a new "
                      "array copies the whole pool at every write, and anything holding the old one (paged_attention "
                      "given self.k[layer]) never sees the new keys", variant=_paged_write(rebuild=True)),
              Mistake("the table must cover every new position before they are copied: take ⌈(length + t) / "
                      "block_size⌉ − len(table) blocks from the free list first", raises=r"list index out of range"),
              Mistake(CROSSING, raises=r"could not broadcast|shape mismatch|broadcast input array"),
              Mistake(CROSSING, tag="chunks"),
              Mistake(EXHAUSTED, raises=r"pop from empty list"), Mistake(EXHAUSTED, tag="refuse")])
