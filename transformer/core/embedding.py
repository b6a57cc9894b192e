"""From ids to vectors and back: token embedding, LM head, positional encodings (notes 000, 001, 003).

    ids (b, n) --embedding--> x (b, n, d) --… blocks …--> h (b, n, d) --LM head--> logits (b, n, v)
"""
from __future__ import annotations

from ..backend import get_xp, namespace
from ..require import broadcastable_to, require_array, require_float, require_int, require_real

__all__ = [
    "embed", "lm_head", "sinusoidal_positions", "learned_positions",
    "rope_angles", "rope_cos_sin", "apply_rope_interleaved", "apply_rope_half",
    "interleaved_to_half_permutation",
]


def embed(ids, W_E):  # [b, n] int, [v, d] -> [b, n, d]
    """Token embedding: row `ids[b, n]` of the table W_E (v, d)."""
    require_array("ids", ids)
    require_float("W_E", W_E)
    xp = get_xp(ids, W_E)
    if not xp.isdtype(ids.dtype, "integral"):
        raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
    if W_E.ndim != 2:
        raise ValueError(f"W_E must be a (v, d) table, got shape {tuple(W_E.shape)}")
    v = W_E.shape[0]
    if bool(xp.any((ids < 0) | (ids >= v))):  # one device -> host transfer (a GPU would wrap a bad id silently)
        raise ValueError(f"token ids must lie in [0, {v}), got min {int(xp.min(ids))}, max {int(xp.max(ids))}")
    return _embed(ids, W_E)


def _embed(ids, W_E):  # [b, n] int, [v, d] -> [b, n, d], on checked input
    xp = get_xp(ids, W_E)
    flat = xp.take(W_E, xp.reshape(ids, (-1,)), axis=0)  # [b·n, d]
    return xp.reshape(flat, (*ids.shape, W_E.shape[1]))  # [b, n, d]


def lm_head(x, W_E=None, *, W_out=None):  # [b, n, d] -> [b, n, v]
    """Logits over the vocabulary.

    Tied weights (W_E given): logits = x W_Eᵀ, the embedding table read backwards.
    Untied (W_out of shape (d, v) given): logits = x W_out.
    """
    if (W_E is None) == (W_out is None):
        raise ValueError("lm_head needs exactly one of W_E (tied) or W_out (untied)")
    _check_lm_head(x, W_E, W_out)
    xp = get_xp(x)
    if W_out is None:
        return x @ xp.matrix_transpose(W_E)  # [b, n, d] @ [d, v] -> [b, n, v]
    return x @ W_out  # [b, n, v]


def _check_lm_head(x, W_E, W_out):
    require_float("x", x)
    name, W, d_axis = ("W_E", W_E, 1) if W_out is None else ("W_out", W_out, 0)
    require_float(name, W)
    want = "(v, d)" if W_out is None else "(d, v)"
    if W.ndim != 2 or x.ndim < 1 or W.shape[d_axis] != x.shape[-1]:
        raise ValueError(f"{name} must be {want} with d = x's last size {x.shape[-1] if x.ndim else None}, "
                         f"got shape {tuple(W.shape)}")


def sinusoidal_positions(n: int, d: int, *, base: float = 10000.0, xp=None, dtype=None):  # -> [n, d]
    """The fixed table of "Attention Is All You Need" §3.5:

        PE[pos, 2i]   = sin(pos / base^(2i/d))
        PE[pos, 2i+1] = cos(pos / base^(2i/d))
    """
    require_int(n=n, d=d)
    _check_pairs("d", d)
    require_real(base=base, positive=True)
    xp = namespace(xp)
    dtype = xp.float32 if dtype is None else dtype
    pos = xp.arange(n, dtype=xp.float64)[:, None]  # [n, 1]
    inv_freq = base ** (-xp.arange(0, d, 2, dtype=xp.float64) / d)  # [d/2]
    angle = pos * inv_freq[None, :]  # [n, d/2]
    pe = xp.stack([xp.sin(angle), xp.cos(angle)], axis=-1)  # [n, d/2, 2]: sin at 2i, cos at 2i+1
    return xp.astype(xp.reshape(pe, (n, d)), dtype)  # [n, d]


def learned_positions(n: int, W_pos, offset: int = 0):  # -> [n, d]
    """Learned absolute positions (GPT-2, BERT): rows offset … offset+n-1 of a trained table."""
    require_int(n=n, offset=offset)
    require_array("W_pos", W_pos)
    if W_pos.ndim != 2:
        raise ValueError(f"W_pos must be an (n_positions, d) table, got shape {tuple(W_pos.shape)}")
    if offset + n > W_pos.shape[0]:
        raise ValueError(f"positions {offset}…{offset + n - 1} exceed the table's {W_pos.shape[0]} rows")
    return W_pos[offset:offset + n, :]  # [n, d]


def _check_pairs(name: str, size: int, where: str = ""):
    """Sinusoidal positions and RoPE work on (sin, cos) pairs of features: size even, ≥ 2."""
    if size < 2 or size % 2:
        raise ValueError(f"{name} must be even and ≥ 2 (features come in sin/cos pairs), got {name}={size}{where}")


def _check_rope_sizes(positions, d_h, base):
    require_array("positions", positions)
    if positions.ndim != 1:
        raise ValueError(f"positions must be 1-D (one per token), got shape {tuple(positions.shape)}")
    require_int(d_h=d_h)
    _check_pairs("d_h", d_h)
    require_real(base=base, positive=True)


def rope_angles(positions, d_h: int, base: float = 10000.0):  # [n] -> [n, d_h/2]
    """θ_{m,i} = m · base^(-2i/d_h): position m rotates pair i by this angle."""
    _check_rope_sizes(positions, d_h, base)
    xp = get_xp(positions)
    inv_freq = base ** (-xp.arange(0, d_h, 2, dtype=xp.float64) / d_h)  # [d_h/2]
    return xp.astype(positions, xp.float64)[:, None] * inv_freq[None, :]  # [n, d_h/2]


def rope_cos_sin(positions, d_h: int, base: float = 10000.0, dtype=None):  # [n] -> 2 × [n, d_h/2]
    """cos θ and sin θ of the RoPE angles, computed in float64 and cast to dtype."""
    a = rope_angles(positions, d_h, base)
    xp = get_xp(positions)
    dtype = xp.float32 if dtype is None else dtype
    return xp.astype(xp.cos(a), dtype), xp.astype(xp.sin(a), dtype)


def apply_rope_interleaved(x, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """RoPE on interleaved pairs (x0,x1), (x2,x3), … : the complex form of note 001.

    Each pair is a complex number z = x_{2i} + i·x_{2i+1}; RoPE multiplies it by e^{iθ}:
        out_{2i}   = x_{2i}·cos θ - x_{2i+1}·sin θ
        out_{2i+1} = x_{2i}·sin θ + x_{2i+1}·cos θ
    """
    _check_rope_input(x, cos, sin)
    return _rope(x, cos, sin)


def _rope(x, cos, sin):  # apply_rope_interleaved on checked input: [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    xp = get_xp(x)
    pairs = xp.reshape(x, (*x.shape[:-1], x.shape[-1] // 2, 2))  # [..., n, d_h/2, 2]
    x_re, x_im = pairs[..., 0], pairs[..., 1]  # [..., n, d_h/2] each
    out = xp.stack([x_re * cos - x_im * sin, x_re * sin + x_im * cos], axis=-1)  # [..., n, d_h/2, 2]
    return xp.reshape(out, x.shape)  # [..., n, d_h]


def apply_rope_half(x, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """RoPE in the rotate-half layout of HF checkpoints: pair i is (x_i, x_{i + d_h/2}).

        out = x·[cos, cos] + rotate_half(x)·[sin, sin],  rotate_half(x) = [-x2, x1]
    """
    _check_rope_input(x, cos, sin)
    xp = get_xp(x)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # [..., n, d_h/2] each
    return xp.concat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)  # [..., n, d_h]


def _check_rope_input(x, cos, sin):
    require_float("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must be (..., n, d_h), got shape {tuple(x.shape)}")
    d_h = x.shape[-1]
    _check_pairs("d_h", d_h, f" in x of shape {tuple(x.shape)}")
    target = (*x.shape[:-1], d_h // 2)
    for name, t in (("cos", cos), ("sin", sin)):
        require_float(name, t)
        if not broadcastable_to(t.shape, target):
            raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to x's (..., n, d_h/2) = {target}")


def interleaved_to_half_permutation(d_h: int) -> list[int]:
    """Index list p with x_half = x_interleaved[..., p]: evens first, then odds.

    Interleaved pairs (2i, 2i+1) become rotate-half pairs (i, i + d_h/2), so
    apply_rope_half(x[..., p]) == apply_rope_interleaved(x)[..., p].
    """
    require_int(d_h=d_h)
    return list(range(0, d_h, 2)) + list(range(1, d_h, 2))
