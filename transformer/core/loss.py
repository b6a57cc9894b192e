"""The training loss: cross-entropy of the next token, and its gradient.

A language model's logits z (one row of v scores per position) give p = softmax(z); the loss
of a position whose next token is t is −log p_t, and the batch's loss is the mean over the
positions that have a target. Positions without one (padding, a prompt we do not train on)
carry target = ignore_index (−100, as in torch) and count for nothing.

    −log p_t = log Σ_j e^(z_j) − z_t = LSE(z) − z_t

Each public function checks its input at the door (`loss_checks.py`, same name).
"""
from __future__ import annotations

import math

from . import loss_checks as checks
from .attention import softmax
from ..backend import compute_dtype, get_xp
from ..require import checked_by

__all__ = ["cross_entropy", "cross_entropy_backward"]


def _targets_kept(targets, ignore_index):  # [...] int -> kept [...] bool, safe targets [...] int
    """Which positions count, and their targets with ignored ones replaced by 0 (a valid index)."""
    xp = get_xp(targets)
    keep = targets != ignore_index  # [...]
    return keep, xp.where(keep, targets, 0)


@checked_by(checks.cross_entropy)
def cross_entropy(logits, targets, *, ignore_index: int = -100):  # [..., v], [...] int -> 0-d array
    """Mean over the kept positions of LSE(z) − z_t, computed stably:

        LSE(z) = m + log Σ_j e^(z_j − m),   m = max_j z_j       (no e^z ever overflows)
        LSE(z) − z_t = log Σ_j e^(z_j − m) − (z_t − m)           two small terms: m itself is never added

    Adding m and then subtracting z_t would keep only the digits of a number near m: with logits near
    10⁶ in float32 (spaced 1/16 apart) each position's loss came out a multiple of 1/16.
    Per-position losses are summed in float64; the result is a 0-d array of the logits' dtype
    (float16/bfloat16: float32), on their device. With every position ignored it is 0.0.

    >>> import numpy as np
    >>> float(cross_entropy(np.array([[0.0, 0.0], [5.0, 1.0]]), np.array([1, -100])))  # −log ½
    0.6931471805599453
    """
    xp = get_xp(logits, targets)
    ct = compute_dtype(xp, logits.dtype)
    z = xp.astype(logits, ct, copy=False)  # [..., v]
    keep, t = _targets_kept(targets, ignore_index)  # [...] each
    m = xp.max(z, axis=-1, keepdims=True)  # [..., 1]
    lse_m = xp.log(xp.sum(xp.exp(z - m), axis=-1))  # [...] LSE(z) − m, in [0, log v]
    z_t = xp.take_along_axis(z, t[..., None], axis=-1)[..., 0]  # [...] the target's logit
    nll = xp.where(keep, lse_m - (z_t - m[..., 0]), 0.0)  # [...] −log p_t, 0 where ignored
    count = xp.sum(xp.astype(keep, xp.float64))  # kept positions
    loss = xp.sum(xp.astype(nll, xp.float64)) / xp.maximum(count, 1.0)  # all ignored: 0 / 1
    return xp.astype(loss, ct)


@checked_by(checks.cross_entropy_backward)
def cross_entropy_backward(logits, targets, *, ignore_index: int = -100):  # [..., v], [...] -> [..., v]
    """Gradient of the mean cross-entropy with respect to the logits. Saved: the logits.

    ∂(LSE(z) − z_t)/∂z_j = p_j − 1[j = t], and the mean divides by the kept count N:
        d_logits = (softmax(z) − one_hot(t)) / N   on kept rows,   0 on ignored rows
    Each kept row sums to 0: raising every logit of a row by the same amount changes nothing. A kept
    row of all −inf logits, whose loss is NaN, gets NaN, as in torch.

    >>> import numpy as np
    >>> cross_entropy_backward(np.array([[0.0, 0.0], [5.0, 1.0]]), np.array([1, -100])).tolist()
    [[0.5, -0.5], [0.0, 0.0]]
    """
    xp = get_xp(logits, targets)
    ct = compute_dtype(xp, logits.dtype)
    keep, t = _targets_kept(targets, ignore_index)  # [...] each
    z = xp.astype(logits, ct, copy=False)  # [..., v]
    p = softmax(z, axis=-1)  # [..., v]
    v = logits.shape[-1]
    one_hot = xp.astype(xp.arange(v, dtype=t.dtype) == t[..., None], ct)  # [..., v]
    count = xp.sum(xp.astype(keep, ct))  # kept positions
    d = xp.where(keep[..., None], (p - one_hot) / xp.maximum(count, 1.0), 0.0)  # [..., v]
    # a kept row of all −inf logits has a NaN loss, −inf − (−inf); softmax gives it zeros (a masked row's
    # convention), which made its gradient a finite −1/N at the target: NaN, as the loss and torch's gradient
    no_logit = xp.max(z, axis=-1, keepdims=True) == -math.inf  # [..., 1]
    d = xp.where(keep[..., None] & no_logit, math.nan, d)  # [..., v]
    return xp.astype(d, logits.dtype, copy=False)
