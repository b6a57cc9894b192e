"""Where each token sits: absolute positions and RoPE (notes 000, 001, 003).

Absolute positions are added to the token vectors once, at the bottom of the model
(a fixed sinusoidal table, or a learned one). RoPE instead rotates q and k in every layer,
so that q·k depends only on the distance between two tokens.
Each public function checks its input at the door (`positions_checks.py`, same name); `f.unchecked`
is the bare formula.
"""
from __future__ import annotations

from . import positions_checks as checks
from ..backend import get_xp, namespace
from ..require import checked_by

__all__ = [
    "sinusoidal_positions", "learned_positions",
    "rope_angles", "rope_cos_sin", "apply_rope_interleaved", "apply_rope_half",
    "interleaved_to_half_permutation",
    "learned_positions_backward", "apply_rope_interleaved_backward", "apply_rope_half_backward",
]


@checked_by(checks.sinusoidal_positions)
def sinusoidal_positions(n: int, d: int, *, base: float = 10000.0, xp=None, dtype=None):  # -> [n, d]
    """The fixed table of "Attention Is All You Need" §3.5:

        PE[pos, 2i]   = sin(pos / base^(2i/d))
        PE[pos, 2i+1] = cos(pos / base^(2i/d))
    """
    xp = namespace(xp)
    dtype = xp.float32 if dtype is None else dtype
    pos = xp.arange(n, dtype=xp.float64)[:, None]  # [n, 1]
    inv_freq = base ** (-xp.arange(0, d, 2, dtype=xp.float64) / d)  # [d/2]
    angle = pos * inv_freq[None, :]  # [n, d/2]
    pe = xp.stack([xp.sin(angle), xp.cos(angle)], axis=-1)  # [n, d/2, 2]: sin at 2i, cos at 2i+1
    return xp.astype(xp.reshape(pe, (n, d)), dtype)  # [n, d]


@checked_by(checks.learned_positions)
def learned_positions(n: int, W_pos, offset: int = 0):  # -> [n, d]
    """Learned absolute positions (GPT-2, BERT): rows offset … offset+n-1 of a trained table."""
    return W_pos[offset:offset + n, :]  # [n, d]


@checked_by(checks.learned_positions_backward)
def learned_positions_backward(dP, n_pos: int, offset: int = 0):  # [..., n, d] -> [n_pos, d]
    """Gradient of P = W_pos[offset : offset + n]. Saved: nothing but the offset.

        dW_pos[offset + i] = Σ_batch dP[..., i, :],   0 on every row the slice did not read

    A model adds P to every sequence of the batch (x = tok + P, broadcast over b), so dP may
    carry leading axes: each position's rows add up.
    """
    xp = get_xp(dP)
    n, d = dP.shape[-2], dP.shape[-1]
    rows = xp.sum(xp.reshape(dP, (-1, n, d)), axis=0)  # [n, d]
    dW_pos = xp.zeros((n_pos, d), dtype=dP.dtype)  # [n_pos, d]
    dW_pos[offset:offset + n, :] = rows
    return dW_pos


@checked_by(checks.rope_angles)
def rope_angles(positions, d_h: int, base: float = 10000.0):  # [n] -> [n, d_h/2]
    """θ_{m,i} = m · base^(-2i/d_h): position m rotates pair i by this angle."""
    xp = get_xp(positions)
    inv_freq = base ** (-xp.arange(0, d_h, 2, dtype=xp.float64) / d_h)  # [d_h/2]
    return xp.astype(positions, xp.float64)[:, None] * inv_freq[None, :]  # [n, d_h/2]


@checked_by(checks.rope_cos_sin)
def rope_cos_sin(positions, d_h: int, base: float = 10000.0, dtype=None):  # [n] -> 2 × [n, d_h/2]
    """cos θ and sin θ of the RoPE angles, computed in float64 and cast to dtype."""
    a = rope_angles(positions, d_h, base)  # [n, d_h/2], checked at this door
    xp = get_xp(positions)
    dtype = xp.float32 if dtype is None else dtype
    return xp.astype(xp.cos(a), dtype), xp.astype(xp.sin(a), dtype)


@checked_by(checks.apply_rope_interleaved)
def apply_rope_interleaved(x, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """RoPE on interleaved pairs (x0,x1), (x2,x3), … : the complex form of note 001.

    Each pair is a complex number z = x_{2i} + i·x_{2i+1}; RoPE multiplies it by e^{iθ}:
        out_{2i}   = x_{2i}·cos θ - x_{2i+1}·sin θ
        out_{2i+1} = x_{2i}·sin θ + x_{2i+1}·cos θ
    """
    xp = get_xp(x)
    pairs = xp.reshape(x, (*x.shape[:-1], x.shape[-1] // 2, 2))  # [..., n, d_h/2, 2]
    x_re, x_im = pairs[..., 0], pairs[..., 1]  # [..., n, d_h/2] each
    out = xp.stack([x_re * cos - x_im * sin, x_re * sin + x_im * cos], axis=-1)  # [..., n, d_h/2, 2]
    return xp.reshape(out, x.shape)  # [..., n, d_h]


@checked_by(checks.apply_rope_interleaved_backward)
def apply_rope_interleaved_backward(dY, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """Gradient of RoPE on interleaved pairs. Saved: cos θ and sin θ (no activation at all).

    Each pair is rotated by θ: y = R(θ) x with R(θ) = [[cos θ, −sin θ], [sin θ, cos θ]]. The
    gradient is the transpose, and a rotation's transpose is the rotation by −θ:
        dX = R(θ)ᵀ dY = R(−θ) dY:   dx_{2i}   =  dy_{2i}·cos θ + dy_{2i+1}·sin θ
                                     dx_{2i+1} = −dy_{2i}·sin θ + dy_{2i+1}·cos θ
    """
    xp = get_xp(dY)
    pairs = xp.reshape(dY, (*dY.shape[:-1], dY.shape[-1] // 2, 2))  # [..., n, d_h/2, 2]
    d_re, d_im = pairs[..., 0], pairs[..., 1]  # [..., n, d_h/2] each
    out = xp.stack([d_re * cos + d_im * sin, -d_re * sin + d_im * cos], axis=-1)  # [..., n, d_h/2, 2]
    return xp.reshape(out, dY.shape)  # [..., n, d_h]


@checked_by(checks.apply_rope_half)
def apply_rope_half(x, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """RoPE in the rotate-half layout of HF checkpoints: pair i is (x_i, x_{i + d_h/2}).

        out = x·[cos, cos] + rotate_half(x)·[sin, sin],  rotate_half(x) = [-x2, x1]
    """
    xp = get_xp(x)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # [..., n, d_h/2] each
    return xp.concat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)  # [..., n, d_h]


@checked_by(checks.apply_rope_half_backward)
def apply_rope_half_backward(dY, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """Gradient of rotate-half RoPE: the rotation by −θ of each pair (i, i + d_h/2). Saved: cos, sin.

        dX₁ =  dY₁·cos θ + dY₂·sin θ
        dX₂ = −dY₁·sin θ + dY₂·cos θ                   (= apply_rope_half(dY, cos, −sin))

    >>> import numpy as np
    >>> x, c, s = np.array([[1.0, 2.0]]), np.array([[0.6]]), np.array([[0.8]])
    >>> apply_rope_half_backward(apply_rope_half(x, c, s), c, s).round(12).tolist()  # R(−θ)R(θ) = I
    [[1.0, 2.0]]
    """
    xp = get_xp(dY)
    half = dY.shape[-1] // 2
    d1, d2 = dY[..., :half], dY[..., half:]  # [..., n, d_h/2] each
    return xp.concat([d1 * cos + d2 * sin, -d1 * sin + d2 * cos], axis=-1)  # [..., n, d_h]


@checked_by(checks.interleaved_to_half_permutation)
def interleaved_to_half_permutation(d_h: int) -> list[int]:
    """Index list p with x_half = x_interleaved[..., p]: evens first, then odds.

    Interleaved pairs (2i, 2i+1) become rotate-half pairs (i, i + d_h/2), so
    apply_rope_half(x[..., p]) == apply_rope_interleaved(x)[..., p].
    """
    return list(range(0, d_h, 2)) + list(range(1, d_h, 2))
