"""Workbook, lesson 06 · The KV cache: prefill, then one row at a time (`lessons/06_kv_cache.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 06

Here the class is given whole except `update`: the cache is allocated once (`__init__`),
`advance` moves the write position on, `nbytes` counts its bytes; you write `update`.
Shapes use the course's dimension names: L layers, b batch, h_kv key/value heads, d_h head size;
n_max is the longest sequence the cache can hold, t the new positions of one step.
"""
from __future__ import annotations

import numpy as np

from transformer import namespace  # namespace(None) is NumPy; namespace(xp) the module xp names


class KVCache:
    """Contiguous cache: per layer one K and one V array of shape (b, h_kv, n_max, d_h),
    allocated once and written by slice at the current position.

        bytes = 2 (K and V) · L · b · h_kv · n_max · d_h · bytes per element

    `update(layer, k, v)` stores the new positions of one layer and returns all keys/values so
    far; `advance(t)` moves the position on once every layer has been updated; `length` is the
    number of positions stored.
    """

    def __init__(self, n_layers: int, b: int, h_kv: int, n_max: int, d_h: int, *, dtype=None, xp=None):
        xp = namespace(xp)
        dtype = xp.float32 if dtype is None else dtype
        n_layers, b, h_kv, n_max, d_h = (int(s) for s in (n_layers, b, h_kv, n_max, d_h))  # NumPy ints -> ints
        self.n_max, self.length = n_max, 0
        self.written = [0] * n_layers  # per layer: positions [0, written) hold keys/values
        shape = (b, h_kv, n_max, d_h)
        self.k = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]
        self.v = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]

    def update(self, layer: int, k_new, v_new):  # [b, h_kv, t, d_h] -> 2 × [b, h_kv, length + t, d_h]
        """Write the t new positions of `layer` and return that layer's K and V so far.

            self.k[layer][:, :, length : length + t, :] = k_new      (and the same for v)
            return K, V = positions [0, length + t) of self.k[layer], self.v[layer]

        k_new, v_new (b, h_kv, t, d_h): t = the whole prompt at prefill, 1 at each decode step.
        Returns K and V, each (b, h_kv, length + t, d_h): views of the cache, not copies.
        Records self.written[layer] = length + t. It does not move self.length: `advance`
        does, once every layer has its new positions.

        After trying: the package's version is `transformer/core/kv_cache.py`, `KVCache.update`.
        """
        raise NotImplementedError(
            "KVCache.update: start by working out where the new positions go: they begin at self.length "
            "and there are k_new.shape[2] of them. Slice the third axis (positions) of self.k[layer] there.")

    def advance(self, t: int):
        """All layers hold the t new positions: move the write position on."""
        self.length += t

    @property
    def nbytes(self) -> int:
        """Real bytes held by the cache arrays (the whole preallocation, used or not)."""
        return sum(int(a.nbytes) for a in self.k + self.v)
