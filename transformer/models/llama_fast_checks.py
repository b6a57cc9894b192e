"""The refusals of llama_fast.py: the call of its FastForward engine (FastForward.__call__)."""
from __future__ import annotations

import numpy as np

from ..require import require_bool


def fast_forward_call(self, ids, cache, cos, sin, positions, key_valid, *, last_only):
    """Shapes, and the few ids and positions of the pass (b·n numbers, not the weights): ids (b, n)
    integers in [0, v) for a NumPy KVCache of b rows with room for n more, positions (b or 1, n)
    rows of the RoPE tables, key_valid (b, t + n) booleans."""
    from ..core.kv_cache import KVCache
    if type(cache) is not KVCache or not isinstance(cache.k[0], np.ndarray):
        raise TypeError(f"FastForward runs with the contiguous KVCache on NumPy arrays, got {type(cache).__name__}: "
                        "use llama.forward, which takes any cache on any backend")
    if not isinstance(ids, np.ndarray) or ids.ndim != 2 or ids.shape[1] < 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be a NumPy (b, n) integer array with n ≥ 1, got "
                         f"{getattr(ids, 'shape', type(ids).__name__)} {getattr(ids, 'dtype', '')}")
    (b, n), t, v = ids.shape, cache.length, self.cfg.v
    if cache.k[0].shape[0] != b:
        raise ValueError(f"ids hold b={b} sequences, the cache {cache.k[0].shape[0]}")
    if t + n > cache.n_max:
        raise ValueError(f"the KV cache holds n_max={cache.n_max} tokens: {t} cached + {n} new do not fit")
    if ids.min() < 0 or ids.max() >= v:
        raise ValueError(f"token ids must lie in [0, {v}), got {int(ids.min())} … {int(ids.max())}")
    shape = np.shape(positions)
    if len(shape) != 2 or shape[0] not in (1, b) or shape[1] != n:
        raise ValueError(f"positions must have shape (b, n) = ({b}, {n}) or (1, {n}), got {shape}")
    if np.min(positions) < 0 or np.max(positions) >= cos.shape[0]:
        raise ValueError(f"positions must lie in [0, {cos.shape[0]}) (the RoPE tables' rows), got "
                         f"{int(np.min(positions))} … {int(np.max(positions))}")
    if key_valid is not None and (np.shape(key_valid) != (b, t + n) or np.asarray(key_valid).dtype != bool):
        raise ValueError(f"key_valid must be a (b, t + n) = ({b}, {t + n}) boolean array, got "
                         f"{np.shape(key_valid)} {np.asarray(key_valid).dtype}")
    require_bool(last_only=last_only)
