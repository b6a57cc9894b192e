"""The checker's cases for lesson 18's backward of the layers that only multiply, move or drop numbers:
linear_backward, split_heads_backward, merge_heads_backward, dropout and dropout_backward."""
from __future__ import annotations

import numpy as np

from ..core.attention import dropout, dropout_backward
from ..core.heads import merge_heads_backward, split_heads_backward
from ..core.layers import linear_backward
from .cases import Case, Mistake, Spec, fresh

__all__ = ["LINEAR_BACKWARD", "SPLIT_HEADS_BACKWARD", "MERGE_HEADS_BACKWARD", "DROPOUT", "DROPOUT_BACKWARD"]


def _rng(seed):
    return np.random.default_rng(seed)


def _t64(a, grad=False):
    import torch
    return torch.from_numpy(np.asarray(a, np.float64)).requires_grad_(grad)


# --- the linear layer Y = X W + b --------------------------------------------------------------------------
def linear_backward_cases():
    r = _rng(191)
    n = r.standard_normal
    return [Case("x (2, 3, 4): b=2, n=3, d_in=4, d_out=5, has_bias=True", (n((2, 3, 5)), n((2, 3, 4)), n((4, 5)), True),
                 tags=frozenset({"batch", "bias"})),
            Case("x (4, 3): d_in=3, d_out=2, no bias", (n((4, 2)), n((4, 3)), n((3, 2)))),
            Case("x (3, 4), W (4, 4): d_in = d_out = 4, has_bias=True", (n((3, 4)), n((3, 4)), n((4, 4)), True),
                 tags=frozenset({"bias", "square"})),
            Case("x (1, 5, 6), d_out=3, has_bias=False given", (n((1, 5, 3)), n((1, 5, 6)), n((6, 3)), False),
                 tags=frozenset({"batch"})),
            Case("float32 x (2, 2, 3), d_out=4, has_bias=True",
                 tuple(a.astype(np.float32) for a in (n((2, 2, 4)), n((2, 2, 3)), n((3, 4)))) + (True,),
                 tags=frozenset({"batch", "bias", "float32"}))]


def _linear_grads(dx_rule=lambda G, W: G @ W.T, dW_rule=lambda X, G: X.T @ G, db_rule=lambda G: G.sum(0),
                  db_always=None):
    """linear_backward with a slip: dx_rule(G, W), dW_rule(X, G) and db_rule(G) on the rows X (rows, d_in) and
    G (rows, d_out); db_always: 'none' or 'zeros', whatever has_bias says."""
    def backward(dY, x, W, has_bias=False):
        d_in, d_out = W.shape
        X, G = x.reshape(-1, d_in), dY.reshape(-1, d_out)
        db = db_rule(G) if has_bias else None
        if db_always == "none":
            db = None
        elif db_always == "zeros":
            db = np.zeros(d_out, dtype=dY.dtype) if db is None else db
        return np.reshape(dx_rule(G, W), x.shape), dW_rule(X, G), db
    return backward


def _linear_unflattened(dW_rule, db_rule):
    """linear_backward with dW and db taken on the arrays as given, (b, n, …) not flattened to rows."""
    def backward(dY, x, W, has_bias=False):
        return dY @ W.T, dW_rule(x, dY), db_rule(dY) if has_bias else None
    return backward


def _dW_rows(x, dY):  # Xᵀ dY over all rows: the right dW
    return x.reshape(-1, x.shape[-1]).T @ dY.reshape(-1, dY.shape[-1])


def _db_rows(dY):  # Σ dY over all rows: the right db
    return dY.reshape(-1, dY.shape[-1]).sum(0)


LINEAR_BACKWARD = Spec(
    "linear_backward", linear_backward, linear_backward_cases, "transformer/core/layers.py",
    dims=(("…", "d_in"), ("d_in", "d_out"), ("d_out",)), names=("dx", "dW", "db"),
    mistakes=[Mistake("dX = dY Wᵀ: (…, d_out) @ (d_out, d_in); dY W multiplies by W untransposed",
                      variant=_linear_grads(dx_rule=lambda G, W: G @ W)),
              Mistake("dX = dY Wᵀ: (…, d_out) @ (d_out, d_in) — dY W does not fit W's shape (d_in, d_out)",
                      raises=r"mismatch|broadcast|not aligned"),
              Mistake("dW has W's shape (d_in, d_out): Xᵀ dY, where dYᵀ X is its transpose (d_out, d_in)",
                      variant=_linear_grads(dW_rule=lambda X, G: G.T @ X)),
              Mistake("W is shared by every position of every sequence: its gradient sums over all of them — "
                      "flatten the leading axes first (x.reshape(-1, d_in), dY.reshape(-1, d_out)) so that Xᵀ dY is "
                      "one (d_in, d_out) sum",
                      variant=_linear_unflattened(lambda x, dY: x.swapaxes(-1, -2) @ dY, _db_rows)),
              Mistake("db sums dY over EVERY row: b is added at all b·n positions, so sum every axis but the last "
                      "(dY.reshape(-1, d_out).sum(axis=0)), not only axis 0",
                      variant=_linear_unflattened(_dW_rows, lambda dY: dY.sum(0))),
              Mistake("db is the SUM of dY over the rows, not its mean: each position adds its own gradient to b",
                      variant=_linear_grads(db_rule=lambda G: G.mean(0))),
              Mistake("with has_bias=False the layer has no b, so there is no gradient for it: return None for db, "
                      "not zeros", variant=_linear_grads(db_always="zeros")),
              Mistake("with has_bias=True, db = Σ over the rows of dY, a (d_out,) vector: return it in the third "
                      "place", variant=_linear_grads(db_always="none"))],
    torch=lambda case: _torch_linear_backward(case))


def _torch_linear_backward(case):
    """torch's autograd through X W (+ b) in float64, cast back to the inputs' dtype."""
    (dY, x, W, *bias), _ = fresh(case)
    has_bias = bool(bias and bias[0])
    xt, Wt = _t64(x, True), _t64(W, True)
    bt = _t64(np.zeros(W.shape[1]), True)
    (xt @ Wt + (bt if has_bias else 0)).backward(_t64(dY))
    db = bt.grad.numpy().astype(dY.dtype) if has_bias else None
    return xt.grad.numpy().astype(x.dtype), Wt.grad.numpy().astype(W.dtype), db


# --- the heads' reshapes ---------------------------------------------------------------------------------------
def split_backward_cases():
    r = _rng(192)
    return [Case("dX (2, 3, 4, 5): b=2, h=3, n=4, d_h=5", (r.standard_normal((2, 3, 4, 5)),)),
            Case("dX (1, 2, 3, 4): b=1, h=2, n=3, d_h=4", (r.standard_normal((1, 2, 3, 4)),)),
            Case("float32 dX (1, 4, 2, 2): h=4, d_h=2", (r.standard_normal((1, 4, 2, 2)).astype(np.float32),),
                 tags=frozenset({"float32"}))]


def _merge_without_moving(dX):  # the heads joined by a reshape alone: positions and heads mixed
    b, h, n, d_h = dX.shape
    return dX.reshape(b, n, h * d_h)


def _merge_feature_major(dX):  # column i·h + j instead of j·d_h + i: the features of all heads interleaved
    b, h, n, d_h = dX.shape
    return dX.transpose(0, 2, 3, 1).reshape(b, n, h * d_h)


SPLIT_HEADS_BACKWARD = Spec(
    "split_heads_backward", split_heads_backward, split_backward_cases, "transformer/core/heads.py",
    dims=("b", "n", "h·d_h"),
    mistakes=[Mistake("move the head axis back beside d_h before joining: (b, h, n, d_h) -> swapaxes(1, 2) -> "
                      "(b, n, h, d_h) -> reshape (b, n, h·d_h); a reshape alone mixes positions with heads",
                      variant=_merge_without_moving),
              Mistake("the heads join one after the other: column j·d_h + i is head j's feature i, so go through "
                      "(b, n, h, d_h) — not (b, n, d_h, h), which interleaves the heads' features",
                      variant=_merge_feature_major)],
    torch=lambda case: _torch_split_backward(case))


def _torch_split_backward(case):
    """torch's autograd through x.view(b, n, h, d_h).transpose(1, 2), in float64, cast back to dX's dtype."""
    (dX,), _ = fresh(case)
    b, h, n, d_h = dX.shape
    x = _t64(np.zeros((b, n, h * d_h)), True)
    x.view(b, n, h, d_h).transpose(1, 2).backward(_t64(dX))
    return x.grad.numpy().astype(dX.dtype)


def merge_backward_cases():
    r = _rng(193)
    return [Case("dY (2, 4, 6), h=3: b=2, n=4, d_h=2", (r.standard_normal((2, 4, 6)), 3)),
            Case("dY (1, 3, 8), h=2: d_h=4", (r.standard_normal((1, 3, 8)), 2)),
            Case("float32 dY (2, 2, 12), h=4: d_h=3", (r.standard_normal((2, 2, 12)).astype(np.float32), 4),
                 tags=frozenset({"float32"}))]


def _split_without_moving(dY, h):  # cut into heads by a reshape alone
    b, n, d = dY.shape
    return dY.reshape(b, h, n, d // h)


def _split_feature_major(dY, h):  # head j as the columns j, j + h, j + 2h, …
    b, n, d = dY.shape
    return dY.reshape(b, n, d // h, h).transpose(0, 3, 1, 2)


MERGE_HEADS_BACKWARD = Spec(
    "merge_heads_backward", merge_heads_backward, merge_backward_cases, "transformer/core/heads.py",
    dims=("b", "h", "n", "d_h"),
    mistakes=[Mistake("cut the last axis first, then move the heads before the positions: reshape (b, n, h, d_h) -> "
                      "swapaxes(1, 2) -> (b, h, n, d_h); a reshape straight to (b, h, n, d_h) mixes positions with "
                      "heads", variant=_split_without_moving),
              Mistake("head j is the columns j·d_h … (j + 1)·d_h − 1, one block each: reshape to (b, n, h, d_h), "
                      "not (b, n, d_h, h), which deals the columns out to the heads in turn",
                      variant=_split_feature_major)],
    torch=lambda case: _torch_merge_backward(case))


def _torch_merge_backward(case):
    """torch's autograd through x.transpose(1, 2).reshape(b, n, h·d_h), in float64, cast back to dY's dtype."""
    (dY, h), _ = fresh(case)
    b, n, d = dY.shape
    x = _t64(np.zeros((b, h, n, d // h)), True)
    x.transpose(1, 2).reshape(b, n, d).backward(_t64(dY))
    return x.grad.numpy().astype(dY.dtype)


# --- dropout -----------------------------------------------------------------------------------------------
def dropout_cases():
    r = _rng(194)
    x = r.standard_normal((2, 3, 4))
    keep = r.random((2, 3, 4)) >= 0.25
    return [Case("x (2, 3, 4), p=0.25, mask= given", (x, 0.25), {"mask": keep}),
            Case("x (5, 6), p=0.5, rng=7 (an int seed)", (r.standard_normal((5, 6)), 0.5), {"rng": 7},
                 tags=frozenset({"rng"})),
            Case("x (3, 8), p=0.1, rng=np.random.default_rng(3) (a Generator)", (r.standard_normal((3, 8)), 0.1),
                 {"rng": np.random.default_rng(3)}, tags=frozenset({"rng"})),
            Case("float32 x (4, 4), p=0.75, mask= given", (r.standard_normal((4, 4)).astype(np.float32), 0.75),
                 {"mask": r.random((4, 4)) >= 0.75}, tags=frozenset({"float32"})),
            Case("x (2, 5), p=0.5, training=False (evaluation)", (r.standard_normal((2, 5)), 0.5),
                 {"rng": 1, "training": False}, tags=frozenset({"identity"})),
            Case("x (3, 3), p=0, rng=2", (r.standard_normal((3, 3)), 0.0), {"rng": 2},
                 tags=frozenset({"identity", "p0"}))]


def _dropout_slip(scale=lambda p: 1 / (1 - p), keep_rule=lambda u, p: u >= p, eval_drops=False, p0_mask=False):
    """dropout with a slip: scale(p) for the kept entries, keep_rule(u, p) on the uniform draws u; eval_drops: the
    mask applied in evaluation too; p0_mask: p = 0 returns an all-True mask where there is none."""
    def drop(x, p, *, rng=None, mask=None, training=True):
        if (not training and not eval_drops) or (p == 0 and not p0_mask):
            return x, None
        if mask is None:
            draw = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
            mask = keep_rule(draw.random(x.shape), p)
        return x * mask * scale(p), mask
    return drop


DROPOUT = Spec(
    "dropout", dropout, dropout_cases, "transformer/core/attention.py", dims=("…",), names=("Y", "keep"),
    mistakes=[Mistake("inverted dropout scales the kept entries by 1/(1 − p), so that E[Y] = X and evaluation "
                      "needs no rescaling: Y = X ∘ keep / (1 − p)", variant=_dropout_slip(scale=lambda p: 1.0)),
              Mistake("divide the kept entries by (1 − p), the probability of KEEPING one, not multiply: "
                      "E[Y] = X needs Y = X ∘ keep / (1 − p)", variant=_dropout_slip(scale=lambda p: 1 - p)),
              Mistake("the scale is 1/(1 − p), one over the probability of keeping an entry, not 1/p",
                      variant=_dropout_slip(scale=lambda p: 1 / p)),
              Mistake("p is the probability of DROPPING an entry: keep = rng.random(x.shape) >= p keeps 1 − p of "
                      "them, where < p keeps p", variant=_dropout_slip(keep_rule=lambda u, p: u < p)),
              Mistake("with training=False (evaluation) dropout is the identity: return (x, None), whatever p is",
                      variant=_dropout_slip(eval_drops=True)),
              Mistake("p = 0 drops nothing: return (x, None), as in evaluation, with no mask to save",
                      variant=_dropout_slip(p0_mask=True)),
              Mistake("draw with the rng given, one uniform number an entry: g = np.random.default_rng(rng) when rng "
                      "is an int seed (rng itself when it is a Generator), then keep = g.random(x.shape) >= p",
                      tag="rng")])


def dropout_backward_cases():
    r = _rng(195)
    return [Case("dY (2, 3, 4), p=0.25", (r.standard_normal((2, 3, 4)), r.random((2, 3, 4)) >= 0.25, 0.25)),
            Case("dY (5, 6), p=0.5", (r.standard_normal((5, 6)), r.random((5, 6)) >= 0.5, 0.5)),
            Case("float32 dY (3, 4), p=0.1", (r.standard_normal((3, 4)).astype(np.float32), r.random((3, 4)) >= 0.1,
                                              0.1), tags=frozenset({"float32"})),
            Case("dY (2, 5), mask None (the forward ran in evaluation), p=0.5", (r.standard_normal((2, 5)), None, 0.5),
                 tags=frozenset({"identity"}))]


def _dropout_backward_slip(scale):
    def backward(dY, mask, p):
        return dY if mask is None else dY * mask * scale(p)
    return backward


DROPOUT_BACKWARD = Spec(
    "dropout_backward", dropout_backward, dropout_backward_cases, "transformer/core/attention.py", dims=("…",),
    mistakes=[Mistake("dX = dY ∘ keep / (1 − p): the forward's scale 1/(1 − p) multiplies the gradient too",
                      variant=_dropout_backward_slip(lambda p: 1.0)),
              Mistake("dX = dY ∘ keep / (1 − p): divide by (1 − p), as the forward does, not multiply",
                      variant=_dropout_backward_slip(lambda p: 1 - p)),
              Mistake("mask None means nothing was dropped (evaluation, or p = 0): dX = dY",
                      raises=r"unsupported operand|NoneType", tag="identity")],
    torch=lambda case: _torch_dropout_backward(case))


def _torch_dropout_backward(case):
    """torch's autograd through X ∘ keep / (1 − p) with the case's mask, in float64, cast back to dY's dtype."""
    import torch

    (dY, mask, p), _ = fresh(case)
    x = _t64(np.zeros(dY.shape), True)
    y = x if mask is None else x * torch.from_numpy(mask) / (1 - p)
    y.backward(_t64(dY))
    return x.grad.numpy().astype(dY.dtype)
