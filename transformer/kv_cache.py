"""The KV cache (notes 000 §4, 001, 004): keep past keys and values instead of recomputing them.

Without a cache, step t recomputes K and V for all t tokens; with it, step t computes
K and V for the one new token and appends them. Only the h_kv key/value heads are
stored (GQA/MQA shrink the cache); heads are repeated for the queries after reading.

    bytes = 2 (K and V) · L · b · h_kv · n_max · d_h · bytes per element
"""
from __future__ import annotations

from .backend import namespace, nbytes

__all__ = ["KVCache"]


class KVCache:
    """Contiguous cache: per layer one K and one V array of shape (b, h_kv, n_max, d_h),
    allocated once and written by slice at the current position.

    Interface shared with the paged cache: `update(layer, k, v)` stores the new
    positions of one layer and returns all keys/values so far; `advance(n_new)` moves
    the position on once every layer has been updated; `length` is the tokens stored.
    """

    def __init__(self, n_layers: int, b: int, h_kv: int, n_max: int, d_h: int, *, dtype=None, xp=None):
        xp = namespace(xp)
        dtype = xp.float32 if dtype is None else dtype
        for name, val in (("n_layers", n_layers), ("b", b), ("h_kv", h_kv), ("n_max", n_max), ("d_h", d_h)):
            if int(val) < 1:
                raise ValueError(f"KVCache needs {name} ≥ 1, got {name}={val}")
        self.n_max, self.length = n_max, 0
        shape = (b, h_kv, n_max, d_h)
        self.k = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]
        self.v = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]

    def update(self, layer: int, k_new, v_new):  # [b, h_kv, t, d_h] -> 2 × [b, h_kv, length + t, d_h]
        """Write the t new positions of `layer` at [length, length + t) and return K, V up to there."""
        t = k_new.shape[2]
        end = self.length + t
        if end > self.n_max:
            raise ValueError(f"KV cache overflow: {self.length} cached + {t} new tokens > n_max={self.n_max}; "
                             "allocate a larger cache (n_max) or generate fewer tokens")
        self.k[layer][:, :, self.length:end, :] = k_new
        self.v[layer][:, :, self.length:end, :] = v_new
        return self.k[layer][:, :, :end, :], self.v[layer][:, :, :end, :]  # views, no copy

    def advance(self, t: int):
        """All layers hold the t new positions: move the write position on."""
        self.length += t

    @property
    def nbytes(self) -> int:
        """Real bytes held by the cache arrays (the whole preallocation, used or not)."""
        return sum(nbytes(a) for a in self.k + self.v)
