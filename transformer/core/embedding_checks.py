"""The refusals of `core/embedding.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..backend import get_xp
from ..require import require_array, require_float, require_int
from .shared_checks import fits_in_memory, itemsize


def embed(ids, W_E):
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


def embed_backward(dX, ids, v):
    require_int(v=v, low=1)
    require_float("dX", dX)
    require_array("ids", ids)
    if dX.ndim < 1 or tuple(dX.shape[:-1]) != tuple(ids.shape) or dX.shape[-1] == 0:
        raise ValueError(f"dX must have shape (*ids.shape, d) = {(*ids.shape, 'd')} with d ≥ 1, "
                         f"got {tuple(dX.shape)}")
    xp, d = get_xp(dX), dX.shape[-1]
    fits_in_memory(f"the (v, d) = ({v}, {d}) gradient of W_E", int(v) * d * itemsize(dX.dtype, xp), xp)
    embed(ids, xp.zeros((v, 0), dtype=dX.dtype))  # the ids' dtype and range, against an empty (v, 0) table


def lm_head(x, W_E, *, W_out):
    if (W_E is None) == (W_out is None):
        raise ValueError("lm_head needs exactly one of W_E (tied) or W_out (untied)")
    require_float("x", x)
    name, W, d_axis = ("W_E", W_E, 1) if W_out is None else ("W_out", W_out, 0)
    require_float(name, W)
    want = "(v, d)" if W_out is None else "(d, v)"
    if W.ndim != 2 or x.ndim < 1 or W.shape[d_axis] != x.shape[-1]:
        raise ValueError(f"{name} must be {want} with d = x's last size {x.shape[-1] if x.ndim else None}, "
                         f"got shape {tuple(W.shape)}")


def lm_head_backward(d_logits, x, W_E):
    lm_head(x, W_E, W_out=None)
    require_float("d_logits", d_logits)
    want = (*x.shape[:-1], W_E.shape[0])
    if tuple(d_logits.shape) != want:
        raise ValueError(f"d_logits must have shape (..., v) = {want}, got {tuple(d_logits.shape)}")
