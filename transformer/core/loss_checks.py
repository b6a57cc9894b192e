"""The refusals of `core/loss.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..backend import get_xp
from ..require import require_array, require_float, require_int


def cross_entropy(logits, targets, *, ignore_index):
    require_float("logits", logits)
    require_array("targets", targets)
    require_int(ignore_index=ignore_index, low=None)
    xp = get_xp(logits, targets)
    if not xp.isdtype(targets.dtype, "integral"):
        raise TypeError(f"targets must be integer token ids, got dtype {targets.dtype}")
    if logits.ndim < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must be (..., v) with v ≥ 1, got shape {tuple(logits.shape)}")
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"targets must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
                         f"got {tuple(targets.shape)}")
    v = logits.shape[-1]
    scored = targets != ignore_index
    bad = scored & ((targets < 0) | (targets >= v))
    if bool(xp.any(bad)):  # one device -> host transfer: a bad target would index out of the row
        kept = targets[scored]  # the ignored ones aside: min -100 would hide a target of -5
        raise ValueError(f"targets must lie in [0, {v}) or equal ignore_index={ignore_index}, "
                         f"got min {int(xp.min(kept))}, max {int(xp.max(kept))} (ignore_index aside)")


def cross_entropy_backward(logits, targets, *, ignore_index):
    cross_entropy(logits, targets, ignore_index=ignore_index)
