"""The refusals of llama_backward.py: the saved activations against the weights, and ∂loss/∂logits."""
from __future__ import annotations

from ..require import require_float

__all__ = ["forward_backward"]


def forward_backward(d_logits, saved, w, cfg, *, attention_backward):
    if not isinstance(saved, dict) or not {"ids", "cos", "sin", "x_final", "h", "layers.0.x"} <= set(saved):
        raise TypeError("saved must be the dict that forward(..., saved=saved) filled")
    L = len(w.layers)
    if f"layers.{L - 1}.x" not in saved or f"layers.{L}.x" in saved:
        raise ValueError(f"saved holds another number of layers than the weights' L={L}")
    if not callable(attention_backward):
        raise TypeError(f"attention_backward must be a function (do, q, k, v, o, kept) -> dq, dk, dv, "
                        f"got {type(attention_backward).__name__}")
    require_float("d_logits", d_logits)
    want = (*saved["ids"].shape, cfg.v)
    if tuple(d_logits.shape) != want:
        raise ValueError(f"d_logits must have shape (b, n, v) = {want}, got {tuple(d_logits.shape)}")
