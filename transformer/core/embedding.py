"""From ids to vectors and back: token embedding and LM head (notes 000, 001, 003).

    ids (b, n) --embedding--> x (b, n, d) --… blocks …--> h (b, n, d) --LM head--> logits (b, n, v)

Where each token sits is `positions.py`. Each public function checks its input at the door
(`embedding_checks.py`, same name); `f.unchecked` is the bare formula.
"""
from __future__ import annotations

from . import embedding_checks as checks
from ..backend import get_xp
from ..require import checked_by

__all__ = ["embed", "lm_head", "embed_backward", "lm_head_backward"]


@checked_by(checks.embed)
def embed(ids, W_E):  # [b, n] int, [v, d] -> [b, n, d]
    """Token embedding: row `ids[b, n]` of the table W_E (v, d)."""
    xp = get_xp(ids, W_E)
    flat = xp.take(W_E, xp.reshape(ids, (-1,)), axis=0)  # [b·n, d]
    return xp.reshape(flat, (*ids.shape, W_E.shape[1]))  # [b, n, d]


@checked_by(checks.embed_backward)
def embed_backward(dX, ids, v: int):  # [b, n, d], [b, n] int -> [v, d]
    """Gradient of the lookup X[b, n] = W_E[ids[b, n]]. Saved: the ids.

        dW_E[t] = Σ_{(b, n): ids[b, n] = t} dX[b, n]

    a scatter-add: a token that occurs several times gets the sum of its rows' gradients, and a
    token that does not occur gets 0. NumPy and CuPy have it as `add.at` (unbuffered, so repeated
    ids accumulate instead of overwriting each other); a namespace without it (the strict Array
    API) multiplies by the one-hot matrix instead, Oᵀ dX with O[(b, n), t] = 1[ids[b, n] = t].
    With a tied LM head, W_E's whole gradient is this plus `lm_head_backward`'s dW_E.

    >>> import numpy as np
    >>> embed_backward(np.array([[[1.0], [2.0], [4.0]]]), np.array([[2, 0, 2]]), 3).ravel().tolist()
    [2.0, 0.0, 5.0]
    """
    xp = get_xp(dX, ids)
    d = dX.shape[-1]
    rows = xp.reshape(dX, (-1, d))  # [b·n, d]
    t = xp.reshape(ids, (-1,))  # [b·n]
    add_at = getattr(getattr(xp, "add", None), "at", None)
    if add_at is None:  # the standard has no scatter: the one-hot product, [v, b·n] @ [b·n, d]
        one_hot = xp.astype(xp.arange(v, dtype=t.dtype)[:, None] == t[None, :], dX.dtype)  # [v, b·n]
        return one_hot @ rows  # [v, d]
    dW_E = xp.zeros((v, d), dtype=dX.dtype)  # [v, d]
    add_at(dW_E, t, rows)  # dW_E[t[i]] += rows[i], repeats accumulate
    return dW_E


@checked_by(checks.lm_head)
def lm_head(x, W_E=None, *, W_out=None):  # [b, n, d] -> [b, n, v]
    """Logits over the vocabulary.

    Tied weights (W_E given): logits = x W_Eᵀ, the embedding table read backwards.
    Untied (W_out of shape (d, v) given): logits = x W_out.
    """
    if W_out is None:
        return x @ W_E.mT  # [b, n, d] @ [d, v] -> [b, n, v]
    return x @ W_out  # [b, n, d] @ [d, v] -> [b, n, v]


@checked_by(checks.lm_head_backward)
def lm_head_backward(d_logits, x, W_E):  # [b, n, v], [b, n, d], [v, d] -> dx [b, n, d], dW_E [v, d]
    """Gradients of the tied head, logits = X W_Eᵀ. Saved: X (the final normed hidden states).

        dX   = d_logits W_E                      [b, n, v] @ [v, d]
        dW_E = Σ_rows d_logitsᵀ X                [v, b·n] @ [b·n, d]

    The table is also the embedding: its total gradient is this dW_E plus `embed_backward`'s.
    (An untied head, logits = X W_out, is a plain `linear_backward`.)
    """
    xp = get_xp(d_logits, x, W_E)
    v, d = W_E.shape
    dx = d_logits @ W_E  # [b, n, d]
    dW_E = xp.reshape(d_logits, (-1, v)).mT @ xp.reshape(x, (-1, d))  # [v, d]
    return dx, dW_E
