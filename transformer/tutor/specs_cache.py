"""The checker's cases for lesson 06: the KV cache's update, held to its contract (written in place, views
returned, self.written recorded) as well as to its values."""
from __future__ import annotations

import numpy as np

from ..core.kv_cache import KVCache
from .cases import Case, Mistake, Spec, fresh

__all__ = ["KV_CACHE_UPDATE"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 06: the KV cache's update ------------------------------------------------------------
def cache_cases():
    r = _rng(61)
    kv = lambda t: (r.standard_normal((2, 2, t, 4)), r.standard_normal((2, 2, t, 4)))  # noqa: E731
    return [Case("prefill 3 positions on 2 layers, then 2 decode steps (b=2, h_kv=2, n_max=8, d_h=4)",
                 ([kv(3), kv(3)], [kv(1), kv(1)], [kv(1), kv(1)])),
            Case("prefill 1 position, a chunk of 4, then 1 decode step", ([kv(1), kv(1)], [kv(4), kv(4)],
                                                                           [kv(1), kv(1)]))]


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
              ] + NOT_IN_PLACE)
