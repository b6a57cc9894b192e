"""The KV cache (notes 000 §4, 001, 004): keep past keys and values instead of recomputing them.

Without a cache, step t recomputes K and V for all t tokens; with it, step t computes
K and V for the one new token and appends them. Only the h_kv key/value heads are
stored (GQA/MQA shrink the cache); heads are repeated for the queries after reading.

    bytes = 2 (K and V) · L · b · h_kv · n_max · d_h · bytes per element

Each public method checks its input at the door (`kv_cache_checks.kv_cache_update` for `update`, …).
"""
from __future__ import annotations

from . import kv_cache_checks as checks
from ..backend import namespace, nbytes
from ..require import checked_by

__all__ = ["KVCache"]


class KVCache:
    """Contiguous cache: per layer one K and one V array of shape (b, h_kv, n_max, d_h),
    allocated once and written by slice at the current position.

    Interface shared with the paged cache: `update(layer, k, v)` stores the new
    positions of one layer and returns all keys/values so far; `advance(n_new)` moves
    the position on once every layer has been updated; `length` is the tokens stored.
    """

    @checked_by(checks.kv_cache_init)
    def __init__(self, n_layers: int, b: int, h_kv: int, n_max: int, d_h: int, *, dtype=None, xp=None):
        xp = namespace(xp)
        dtype = xp.float32 if dtype is None else dtype
        n_layers, b, h_kv, n_max, d_h = (int(s) for s in (n_layers, b, h_kv, n_max, d_h))  # NumPy ints -> ints
        self.n_max, self.length = n_max, 0
        self.written = [0] * n_layers  # per layer: positions [0, written) hold keys/values
        shape = (b, h_kv, n_max, d_h)
        self.k = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]
        self.v = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]

    @checked_by(checks.kv_cache_update)
    def update(self, layer: int, k_new, v_new):  # [b, h_kv, t, d_h] -> 2 × [b, h_kv, length + t, d_h]
        """Write the t new positions of `layer` at [length, length + t) and return K, V up to there."""
        end = self.length + k_new.shape[2]
        self.k[layer][:, :, self.length:end, :] = k_new
        self.v[layer][:, :, self.length:end, :] = v_new
        self.written[layer] = end
        return self.k[layer][:, :, :end, :], self.v[layer][:, :, :end, :]  # views, no copy

    @checked_by(checks.kv_cache_advance)
    def advance(self, t: int):
        """All layers hold the t new positions: move the write position on."""
        self.length += t

    @property
    def nbytes(self) -> int:
        """Real bytes held by the cache arrays (the whole preallocation, used or not)."""
        return sum(nbytes(a) for a in self.k + self.v)
