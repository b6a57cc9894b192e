"""The KV cache (notes 000 §4, 001, 004): keep past keys and values instead of recomputing them.

Without a cache, step t recomputes K and V for all t tokens; with it, step t computes
K and V for the one new token and appends them. Only the h_kv key/value heads are
stored (GQA/MQA shrink the cache); heads are repeated for the queries after reading.

    bytes = 2 (K and V) · L · b · h_kv · n_max · d_h · bytes per element
"""
from __future__ import annotations

from ..backend import namespace, nbytes
from ..require import require_float, require_int

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
        require_int(n_layers=n_layers, b=b, h_kv=h_kv, n_max=n_max, d_h=d_h, low=1)  # 4.7 or True is no size
        n_layers, b, h_kv, n_max, d_h = (int(s) for s in (n_layers, b, h_kv, n_max, d_h))
        self.n_max, self.length = n_max, 0
        self.written = [0] * n_layers  # per layer: positions [0, written) hold keys/values
        shape = (b, h_kv, n_max, d_h)
        self.k = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]
        self.v = [xp.zeros(shape, dtype=dtype) for _ in range(n_layers)]  # L × [b, h_kv, n_max, d_h]

    def update(self, layer: int, k_new, v_new):  # [b, h_kv, t, d_h] -> 2 × [b, h_kv, length + t, d_h]
        """Write the t new positions of `layer` at [length, length + t) and return K, V up to there."""
        self._check_new(layer, k_new, v_new)
        t = k_new.shape[2]
        end = self.length + t
        if end > self.n_max:
            raise ValueError(f"KV cache overflow: {self.length} cached + {t} new tokens > n_max={self.n_max}; "
                             "allocate a larger cache (n_max) or generate fewer tokens")
        self.k[layer][:, :, self.length:end, :] = k_new
        self.v[layer][:, :, self.length:end, :] = v_new
        self.written[layer] = end
        return self.k[layer][:, :, :end, :], self.v[layer][:, :, :end, :]  # views, no copy

    def advance(self, t: int):
        """All layers hold the t new positions: move the write position on."""
        _check_written(f"advance(t={t})", t, self.length, self.written, "the cache", "update(layer, k, v)")
        self.length += t

    def _check_new(self, layer, k_new, v_new):
        _check_layer(layer, len(self.k))
        b, h_kv, _, d_h = self.k[0].shape
        _check_new_kv(k_new, v_new, b=b, h_kv=h_kv, t=None, d_h=d_h)

    @property
    def nbytes(self) -> int:
        """Real bytes held by the cache arrays (the whole preallocation, used or not)."""
        return sum(nbytes(a) for a in self.k + self.v)


# Checks shared with the paged cache (paged_kv.py), which has the same update/advance interface.

def _check_layer(layer, n_layers: int):
    """layer must index one of the cache's n_layers layers."""
    require_int(layer=layer)
    if layer >= n_layers:
        raise ValueError(f"layer={layer} is out of range: the cache holds {n_layers} layers")


def _check_new_kv(k_new, v_new, **dims):  # dims: name -> size in order, None for any (t, or b)
    """k_new and v_new float arrays of one shape, of rank len(dims), matching every size given."""
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        require_float(name, x)
        if x.ndim != len(dims) or any(s is not None and n != s for n, s in zip(x.shape, dims.values())):
            names, sizes = ", ".join(dims), ", ".join(d if s is None else str(s) for d, s in dims.items())
            raise ValueError(f"{name} must be ({names}) = ({sizes}), got shape {tuple(x.shape)}")
    if tuple(k_new.shape) != tuple(v_new.shape):
        raise ValueError(f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} must have one shape")


def _check_written(call: str, t, length: int, written: list[int], holder: str, fill: str):
    """Moving on by t positions needs every layer written up to length + t."""
    require_int(t=t)
    short = [i for i, w in enumerate(written) if w < length + t]
    if short:
        i = short[0]
        raise ValueError(f"{call} past what was written: {holder} holds {length} positions, layer {i} has only "
                         f"{written[i]} written; call {fill} on every layer with the new positions first")
