"""Workbook, lesson 02 · Positions (`lessons/02_positions.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 02

Shapes use the course's dimension names: n positions, d model width, d_h head size.
"""
from __future__ import annotations

import numpy as np

from transformer import namespace  # namespace(None) is NumPy; namespace(xp) the module xp names


def sinusoidal_positions(n: int, d: int, *, base: float = 10000.0, xp=None, dtype=None):  # -> [n, d]
    """The fixed position table of "Attention Is All You Need" (§3.5), added to the embeddings.

        PE[pos, 2i]   = sin(pos / base^(2i/d))
        PE[pos, 2i+1] = cos(pos / base^(2i/d))        pos = 0 … n−1,  i = 0 … d/2 − 1

    Returns PE (n, d), in `dtype` (None: float32), built with the namespace `xp` (None: NumPy).
    Each pair of columns (2i, 2i+1) turns at its own frequency 1/base^(2i/d): fast on the left,
    slow on the right.
    Example: sinusoidal_positions(2, 2) = [[0, 1], [sin 1, cos 1]] ≈ [[0, 1], [0.841, 0.540]].

    After trying: the package's version is `transformer/core/positions.py`, `sinusoidal_positions`.
    """
    raise NotImplementedError(
        "sinusoidal_positions: start with two small arrays: the positions as a column (n, 1) and the d/2 "
        "frequencies 1/base^(2i/d) as a row (1, d/2). Their product is every angle, (n, d/2); then decide "
        "how sin and cos of it fill the even and the odd columns.")


def learned_positions(n: int, W_pos, offset: int = 0):  # -> [n, d]
    """Learned absolute positions (GPT-2, BERT): a trained table W_pos (n_ctx, d), one row a position.

        P = rows offset … offset + n − 1 of W_pos          -> (n, d), W_pos's dtype

    offset: the position of the first input token (after cached ones, or a decode step's position).
    A table has no row past n_ctx = W_pos.shape[0]: when offset + n > n_ctx, raise ValueError with a
    message that names the positions and the table's rows (a NumPy slice past the end quietly gives
    fewer rows, and the model would go on with the wrong shape).
    Example: a (512, d) table, n = 10, offset = 4 gives rows 4 … 13; n = 600 is refused.

    After trying: the package's version is `transformer/core/positions.py`, `learned_positions`.
    """
    raise NotImplementedError(
        "learned_positions: start by writing down which rows of W_pos positions offset … offset + n − 1 are, "
        "and what W_pos[508:518] gives for a table of 512 rows.")


def rope_angles(positions, d_h: int, base: float = 10000.0):  # [n] -> [n, d_h/2]
    """The angles RoPE turns each pair of a head's features by (RoFormer; Llama).

        θ_{m,i} = m · base^(−2i/d_h)          position m, pair i = 0 … d_h/2 − 1

    positions (n,): the token positions m, integers (or floats); d_h the head size (even).
    ->  θ (n, d_h/2), float64. Pair 0 turns by m radians (fast), the last pair slowest.
    cos θ and sin θ of this table are what apply_rope_half and apply_rope_interleaved take.
    Example: rope_angles(np.array([0, 1, 2]), 4) = [[0, 0], [1, 0.01], [2, 0.02]].

    After trying: the package's version is `transformer/core/positions.py`, `rope_angles`.
    """
    raise NotImplementedError(
        "rope_angles: as for sinusoidal_positions, a column of positions (n, 1) times a row of d_h/2 "
        "frequencies base^(−2i/d_h) (1, d_h/2); compute in float64 and check the example.")


def apply_rope_half(x, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """RoPE in the rotate-half layout of Hugging Face checkpoints: pair i is (x_i, x_{i + d_h/2}).

    With x1 = x[..., :d_h/2] and x2 = x[..., d_h/2:], each pair is turned by its angle θ:

        out = [x1·cos θ − x2·sin θ,  x1·sin θ + x2·cos θ]      (the two halves, concatenated)

    x (..., n, d_h), e.g. (b, h, n, d_h); cos and sin (n, d_h/2): cos θ and sin θ of position
    pos and pair i (`T.rope_cos_sin` makes them)  ->  out (..., n, d_h), the shape of x.

    After trying: the package's version is `transformer/core/positions.py`, `apply_rope_half`.
    """
    raise NotImplementedError(
        "apply_rope_half: first cut the last axis of x into its two halves, each (..., n, d_h/2); check "
        "that cos and sin, (n, d_h/2), broadcast against them. Then write the two rotated halves.")


def apply_rope_interleaved(x, cos, sin):  # [..., n, d_h], [n, d_h/2] -> [..., n, d_h]
    """RoPE on interleaved pairs (x_0, x_1), (x_2, x_3), …: the complex form of the rotation.

    Pair i is the complex number z = x_{2i} + i·x_{2i+1}; RoPE multiplies it by e^{iθ}:

        out_{2i}   = x_{2i}·cos θ − x_{2i+1}·sin θ
        out_{2i+1} = x_{2i}·sin θ + x_{2i+1}·cos θ

    x (..., n, d_h); cos and sin (n, d_h/2)  ->  out (..., n, d_h), pairs in the same places.

    After trying: the package's version is `transformer/core/positions.py`, `apply_rope_interleaved`.
    """
    raise NotImplementedError(
        "apply_rope_interleaved: take the pairs apart first: x[..., 0::2] holds every pair's first number "
        "and x[..., 1::2] its second, each (..., n, d_h/2) like cos and sin. The hard part is putting the "
        "rotated numbers back in their interleaved places.")
