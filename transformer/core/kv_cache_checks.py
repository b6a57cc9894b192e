"""The refusals of `core/kv_cache.py`, one check per public method, named `kv_cache_METHOD`. They
look at the cache's state (its length, what each layer has written) as well as at the new arrays."""
from __future__ import annotations

from ..backend import namespace
from ..require import require_int
from .shared_checks import cache_fits, cache_layer, new_kv, written_ahead


def kv_cache_init(self, n_layers, b, h_kv, n_max, d_h, *, dtype, xp):
    namespace(xp)  # an unknown backend name is refused first
    require_int(n_layers=n_layers, b=b, h_kv=h_kv, n_max=n_max, d_h=d_h, low=1)  # 4.7 or True is no size
    cache_fits(f"a KV cache of {n_layers} layers × (b, h_kv, n_max, d_h) = ({b}, {h_kv}, {n_max}, {d_h}) × 2",
               n_layers, int(b) * int(n_max), h_kv, d_h, dtype, xp)


def kv_cache_update(self, layer, k_new, v_new):
    cache_layer(layer, len(self.k))
    b, h_kv, _, d_h = self.k[0].shape
    new_kv(k_new, v_new, into=self.k[0].dtype, b=b, h_kv=h_kv, t=None, d_h=d_h)
    t = k_new.shape[2]
    if self.length + t > self.n_max:
        raise ValueError(f"KV cache overflow: {self.length} cached + {t} new tokens > n_max={self.n_max}; "
                         "allocate a larger cache (n_max) or generate fewer tokens")


def kv_cache_advance(self, t):
    written_ahead(f"advance(t={t})", t, self.length, self.written, "the cache", "update(layer, k, v)")
