"""The refusals of `core/positions.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..require import broadcastable_to, require_array, require_float, require_int, require_real
from ..backend import get_xp
from .shared_checks import fits_in_memory, float_dtype, itemsize

TABLE = "a table of sines and cosines holds fractions"


def pairs(name, size, where=""):
    """Sinusoidal positions and RoPE work on (sin, cos) pairs of features: size even, ≥ 2."""
    if size < 2 or size % 2:
        raise ValueError(f"{name} must be even and ≥ 2 (features come in sin/cos pairs), got {name}={size}{where}")


def sinusoidal_positions(n, d, *, base, xp, dtype):
    require_int(n=n, d=d)
    pairs("d", d)
    require_real(base=base, positive=True)
    float_dtype(dtype, xp, TABLE)
    fits_in_memory(f"an (n, d) = ({n}, {d}) table of positions", 8 * int(n) * int(d), xp)  # its angles in float64


def learned_positions(n, W_pos, offset):
    require_int(n=n, offset=offset)
    require_array("W_pos", W_pos)
    if W_pos.ndim != 2:
        raise ValueError(f"W_pos must be an (n_positions, d) table, got shape {tuple(W_pos.shape)}")
    if offset + n > W_pos.shape[0]:
        raise ValueError(f"positions {offset}…{offset + n - 1} exceed the table's {W_pos.shape[0]} rows")


def learned_positions_backward(dP, n_pos, offset):
    require_float("dP", dP)
    if dP.ndim < 2:
        raise ValueError(f"dP must be (..., n, d), got shape {tuple(dP.shape)}")
    if 0 in dP.shape[-2:]:  # no positions or no features: NumPy could not reshape it into rows
        raise ValueError(f"dP must be (..., n, d) with n ≥ 1 and d ≥ 1, got shape {tuple(dP.shape)}")
    require_int(n_pos=n_pos, offset=offset)
    if offset + dP.shape[-2] > n_pos:
        raise ValueError(f"positions {offset}…{offset + dP.shape[-2] - 1} exceed the table's {n_pos} rows")
    xp, d = get_xp(dP), dP.shape[-1]
    fits_in_memory(f"the (n_pos, d) = ({n_pos}, {d}) gradient of W_pos", int(n_pos) * d * itemsize(dP.dtype, xp), xp)


def rope_angles(positions, d_h, base):
    require_array("positions", positions)
    if positions.ndim != 1:
        raise ValueError(f"positions must be 1-D (one per token), got shape {tuple(positions.shape)}")
    if not get_xp(positions).isdtype(positions.dtype, ("integral", "real floating")):  # None in an object array: NaN
        raise TypeError(f"positions must be integers (or floats), got dtype {positions.dtype}")
    require_int(d_h=d_h)
    pairs("d_h", d_h)
    require_real(base=base, positive=True)
    n = positions.shape[0]  # d_h=2**40 asked NumPy for 4 TiB of frequencies
    fits_in_memory(f"an (n, d_h/2) = ({n}, {d_h // 2}) table of angles", 8 * (n + 1) * (d_h // 2), get_xp(positions))


def rope_cos_sin(positions, d_h, base, dtype):
    rope_angles(positions, d_h, base)
    float_dtype(dtype, get_xp(positions), TABLE)


def apply_rope_interleaved(x, cos, sin):
    require_float("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must be (..., n, d_h), got shape {tuple(x.shape)}")
    d_h = x.shape[-1]
    pairs("d_h", d_h, f" in x of shape {tuple(x.shape)}")
    target = (*x.shape[:-1], d_h // 2)
    for name, t in (("cos", cos), ("sin", sin)):
        require_float(name, t)
        if not broadcastable_to(t.shape, target):
            raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to x's (..., n, d_h/2) = {target}")


def apply_rope_interleaved_backward(dY, cos, sin):
    apply_rope_interleaved(dY, cos, sin)


def apply_rope_half(x, cos, sin):
    apply_rope_interleaved(x, cos, sin)  # the same pairs, laid out differently


def apply_rope_half_backward(dY, cos, sin):
    apply_rope_half(dY, cos, sin)


def interleaved_to_half_permutation(d_h):
    require_int(d_h=d_h)
    pairs("d_h", d_h)
    fits_in_memory(f"a list of d_h={d_h} feature indices", 36 * d_h)  # a pointer and an int object each
