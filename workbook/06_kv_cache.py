"""Workbook, lesson 06 · The KV cache: prefill, then one row at a time (`lessons/06_kv_cache.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 06

Here the class is given whole except `update`: the cache is allocated once (`__init__`),
`advance` moves the write position on, `nbytes` counts its bytes; you write `update`, and then
`decoder_mask`, the mask of a step that comes after the cached keys.
Shapes use the course's dimension names: L layers, b batch, h_kv key/value heads, d_h head size;
n_max is the longest sequence the cache can hold, t the new positions of one step.
"""
from __future__ import annotations

import numpy as np

from transformer import causal_mask, namespace  # namespace(None) is NumPy; namespace(xp) the module xp names
# causal_mask(n_q, n_k, offset=n_k − n_q, *, xp): query i sees keys j ≤ i + offset (you wrote one in lesson 05)


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
        does, once every layer has its new positions. When length + t > n_max the cache cannot
        hold them: raise ValueError naming n_max and length + t.

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


def decoder_mask(n_q: int, n_past: int, key_valid=None, *, xp=None):  # -> [n_q, n_k] or [b, 1, n_q, n_k] or None
    """The mask of n_q new queries that come after n_past cached keys: n_k = n_past + n_q keys.

        query i is at position n_past + i and sees keys j ≤ n_past + i      -> (n_q, n_k) bool
        key_valid (b, n_k) bool, False at left padding: a key is kept when it is in the past AND valid
                                                                                -> (b, 1, n_q, n_k) bool
        None when nothing need be hidden: one decode step (n_q = 1) without padding

    Prefill is n_past = 0, n_q = the prompt's length; each decode step is n_q = 1 after every cached
    key. The head axis of 1 lets the padded mask broadcast over the h heads. A key_valid whose rows
    do not hold n_past + n_q flags is refused: ValueError naming both. Build arrays with
    xp = namespace(xp) (causal_mask takes xp= too).
    Example: decoder_mask(2, 3) = [[T, T, T, T, F], [T, T, T, T, T]].

    After trying: the package's version is `transformer/models/llama.py`, `decoder_mask`.
    """
    raise NotImplementedError(
        "decoder_mask: start with no padding: how many keys are there, and which position does the first new "
        "query sit at? Then ask when no key at all need be hidden.")
