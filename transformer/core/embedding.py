"""From ids to vectors and back: token embedding and LM head (notes 000, 001, 003).

    ids (b, n) --embedding--> x (b, n, d) --… blocks …--> h (b, n, d) --LM head--> logits (b, n, v)

Where each token sits is `positions.py`. Each public function checks its input at the door
(`checks.py`, same name); `f.unchecked` is the bare formula.
"""
from __future__ import annotations

from . import checks
from ..backend import get_xp
from ..require import checked_by

__all__ = ["embed", "lm_head"]


@checked_by(checks.embed)
def embed(ids, W_E):  # [b, n] int, [v, d] -> [b, n, d]
    """Token embedding: row `ids[b, n]` of the table W_E (v, d)."""
    xp = get_xp(ids, W_E)
    flat = xp.take(W_E, xp.reshape(ids, (-1,)), axis=0)  # [b·n, d]
    return xp.reshape(flat, (*ids.shape, W_E.shape[1]))  # [b, n, d]


@checked_by(checks.lm_head)
def lm_head(x, W_E=None, *, W_out=None):  # [b, n, d] -> [b, n, v]
    """Logits over the vocabulary.

    Tied weights (W_E given): logits = x W_Eᵀ, the embedding table read backwards.
    Untied (W_out of shape (d, v) given): logits = x W_out.
    """
    if W_out is None:
        return x @ W_E.mT  # [b, n, d] @ [d, v] -> [b, n, v]
    return x @ W_out  # [b, n, d] @ [d, v] -> [b, n, v]
