"""The refusals of core/online_softmax.py, one check per public function and of the same name."""
from __future__ import annotations

from ..require import broadcastable_to, require_array, require_float, require_int

__all__ = ["exp_minus", "merge_softmax_stats", "online_attention_update", "online_softmax_stats",
           "online_softmax_history", "online_softmax"]


def exp_minus(x, m):
    require_array("x", x)
    require_array("m", m)
    if not broadcastable_to(m.shape, x.shape):  # else NumPy's "operands could not be broadcast", or a grown x
        raise ValueError(f"m of shape {tuple(m.shape)} must broadcast to x's {tuple(x.shape)} (a max per row: "
                         f"(..., 1))")


def merge_softmax_stats(m_a, l_a, m_b, l_b):
    for name, t in (("m_a", m_a), ("l_a", l_a), ("m_b", m_b), ("l_b", l_b)):
        require_array(name, t)
    if not tuple(m_a.shape) == tuple(l_a.shape) == tuple(m_b.shape) == tuple(l_b.shape):  # broadcast in silence
        raise ValueError(f"m_a, l_a, m_b, l_b must have one shape (..., 1), got {tuple(m_a.shape)}, "
                         f"{tuple(l_a.shape)}, {tuple(m_b.shape)}, {tuple(l_b.shape)}")


def online_attention_update(m, l, O, S_j, V_j):
    for name, t in (("m", m), ("l", l), ("O", O), ("S_j", S_j), ("V_j", V_j)):
        require_float(name, t)
    if S_j.ndim < 2 or m.shape != S_j.shape[:-1] + (1,) or l.shape != m.shape:
        raise ValueError(f"m and l must have shape (..., Br, 1) for scores S_j of shape (..., Br, Bc): got m "
                         f"{tuple(m.shape)}, l {tuple(l.shape)}, S_j {tuple(S_j.shape)}")
    if V_j.ndim != S_j.ndim or V_j.shape[-2] != S_j.shape[-1] or O.shape != S_j.shape[:-1] + V_j.shape[-1:]:
        raise ValueError(f"V_j must be (..., Bc, d_h) and O (..., Br, d_h) for S_j (..., Br, Bc): got S_j "
                         f"{tuple(S_j.shape)}, V_j {tuple(V_j.shape)}, O {tuple(O.shape)}")


def online_softmax_stats(x, block, history):
    require_float("x", x)
    if x.ndim < 1:
        raise ValueError(f"x must have at least one axis (..., n), got shape {tuple(x.shape)}")
    require_int(block=block, low=1)
    if history is not None and not isinstance(history, list):  # it receives each step's (m, l)
        raise TypeError(f"history must be None or a list to receive each step's (m, l), got {type(history).__name__}")


def online_softmax_history(x, block):
    require_float("x", x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"x has no entries to take a softmax over: shape {tuple(x.shape)}")
    require_int(block=block, low=1)


def online_softmax(x, block):
    online_softmax_stats(x, block, None)
