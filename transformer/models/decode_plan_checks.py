"""The refusals of `models/decode_plan.py`, one check per public function (and DecodeSizes) of the same name."""
from __future__ import annotations

from ..core.shared_checks import fits_in_memory
from ..require import require_bool, require_int, require_real

SIZES = ("L", "d", "h", "h_kv", "d_h", "d_ff", "v", "max_len", "split")


def decode_sizes(s):
    """Whole sizes ≥ 1 (max_new ≥ 0), a whole group of query heads for each key/value head, a positive ε: the
    grids and the buffers of the step are made from these, and L = -1 gave -1 kernels a step."""
    require_int(low=1, **{f: getattr(s, f) for f in SIZES})
    require_int(max_new=s.max_new)
    if s.h % s.h_kv:
        raise ValueError(f"h must be a multiple of h_kv (each key/value head serves a whole group), got h={s.h}, "
                         f"h_kv={s.h_kv}")
    require_real(positive=True, eps=s.eps)


def step_kernels(s, filtered):
    if not all(hasattr(s, f) for f in (*SIZES, "max_new", "n_splits")):  # a DecodeSizes, read by its fields
        raise TypeError(f"s must be a DecodeSizes (DecodeSizes.of(config, max_len, max_new)), got {type(s).__name__}")
    require_bool(filtered=filtered)


def kernels_per_step(L, filtered):
    require_int(low=1, L=L)  # L = 2.5 gave 16.5 kernels
    require_bool(filtered=filtered)


def counter_uniforms(seed, step, n):
    require_int(low=None, seed=seed)  # any integer: its low 32 bits are the kernel's
    require_int(step=step)
    if step >= 1 << 32:
        raise ValueError(f"step must be below 2**32 (a 32-bit counter on the device), got step={step}")
    require_int(n=n)
    fits_in_memory(f"{n:,} float32 uniforms", 12 * n)  # i, the hash and the result: 4 bytes each
