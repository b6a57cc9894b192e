"""The checker's cases for lesson 10's position-wise feed-forward network (ffn) and the residual sub-block around
attention and the FFN (residual), pre-norm and post-norm."""
from __future__ import annotations

import numpy as np

from ..core.layers import ffn, gelu, layer_norm, relu, residual, rms_norm, silu
from .cases import Case, Mistake, Spec

__all__ = ["FFN", "RESIDUAL"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- the feed-forward network g(x W₁ + b₁) W₂ + b₂ ------------------------------------------------------------
def ffn_cases():
    r = _rng(101)
    n = r.standard_normal
    return [Case("x (2, 3, 4): b=2, n=3, d=4, d_ff=6, biases b1 and b2, ReLU", (n((2, 3, 4)), n((4, 6)), n((6, 4)),
                                                                               n(6), n(4)), tags=frozenset({"bias"})),
            Case("x (5, 4), d_ff=8, no biases, activation=gelu", (n((5, 4)), n((4, 8)), n((8, 4))),
                 {"activation": gelu}, frozenset({"activation"})),
            Case("x (3, 6), d_ff=6, b1 only, activation=silu", (n((3, 6)), n((6, 6)), n((6, 6)), n(6)),
                 {"activation": silu}, frozenset({"activation", "bias"})),
            Case("float32 x (2, 2, 4), d_ff=8, b2 only, ReLU",
                 tuple(a.astype(np.float32) for a in (n((2, 2, 4)), n((4, 8)), n((8, 4)))),
                 {"b2": n(4).astype(np.float32)}, frozenset({"bias", "float32"}))]


def _ffn_slip(outer=lambda y, g: y, fixed_g=None, drop=None, b1_outside=False):
    """ffn with a slip: outer(y, g) after the second product; fixed_g: g whatever activation says; drop: "b1" or
    "b2", a bias left out; b1_outside: g(x W₁) + b₁."""
    def f(x, W1, W2, b1=None, b2=None, activation=relu):
        g = fixed_g or activation
        b1, b2 = (None if drop == "b1" else b1), (None if drop == "b2" else b2)
        h = x @ W1  # [..., d_ff]
        h = g(h) + b1 if (b1_outside and b1 is not None) else g(h if b1 is None else h + b1)
        y = outer(h @ W2, g)  # [..., d]
        return y if b2 is None else y + b2
    return f


FFN = Spec(
    "ffn", ffn, ffn_cases, "transformer/core/layers.py", dims=("…", "d"),
    mistakes=[Mistake("b₁ goes inside the activation: g(x W₁ + b₁), not g(x W₁) + b₁",
                      variant=_ffn_slip(b1_outside=True)),
              Mistake("the activation sits between the two products only: g(x W₁ + b₁) W₂ + b₂, with no g at the end",
                      variant=_ffn_slip(outer=lambda y, g: g(y))),
              Mistake("use the activation given (activation=…, ReLU by default): the call passes GELU or SiLU too",
                      variant=_ffn_slip(fixed_g=relu)),
              Mistake("W₁ (d, d_ff) comes first and widens x; W₂ (d_ff, d) brings it back to d",
                      raises=r"mismatch|broadcast|not aligned"),
              Mistake("add b₁ when it is given: g(x W₁ + b₁), b₁ (d_ff,) after the first product (None: no bias)",
                      variant=_ffn_slip(drop="b1")),
              Mistake("add b₂ when it is given: … W₂ + b₂, b₂ (d,) after the second product (None: no bias)",
                      variant=_ffn_slip(drop="b2"))])


# --- the residual sub-block -------------------------------------------------------------------------------------
def residual_cases():
    r = _rng(102)
    n = r.standard_normal
    W, gamma, beta = n((4, 4)) / 2, r.uniform(0.5, 1.5, 4), n(4)
    ln = lambda t: layer_norm(t, gamma, beta)  # noqa: E731 - a norm with its own weights, as a layer holds them
    rms = lambda t: rms_norm(t, gamma)  # noqa: E731
    linear = lambda t: t @ W  # noqa: E731 - a sublayer that mixes the features
    mlp = lambda t: np.tanh(t) @ W  # noqa: E731
    return [Case("x (2, 3, 4), sublayer t @ W, RMSNorm, pre_norm=True", (n((2, 3, 4)) * 3 + 1, linear, rms),
                 tags=frozenset({"pre"})),
            Case("x (5, 4), sublayer tanh(t) @ W, LayerNorm, pre_norm=True (the default)", (n((5, 4)) * 2, mlp, ln),
                 tags=frozenset({"pre"})),
            Case("x (2, 3, 4), sublayer t @ W, LayerNorm, pre_norm=False", (n((2, 3, 4)) * 3 + 1, linear, ln),
                 {"pre_norm": False}, frozenset({"post"})),
            Case("float32 x (3, 4), sublayer tanh(t) @ W, RMSNorm, pre_norm=False",
                 (n((3, 4)).astype(np.float32) * 2, mlp, rms), {"pre_norm": False}, frozenset({"post", "float32"}))]


def _residual_slip(pre, post):
    """residual with a slip: pre(x, sublayer, norm) and post(x, sublayer, norm) for the two placements."""
    def block(x, sublayer, norm, *, pre_norm=True):
        return (pre if pre_norm else post)(x, sublayer, norm)
    return block


_PRE = lambda x, f, norm: x + f(norm(x))  # noqa: E731
_POST = lambda x, f, norm: norm(x + f(x))  # noqa: E731

RESIDUAL = Spec(
    "residual", residual, residual_cases, "transformer/core/layers.py", dims=("…", "d"),
    mistakes=[Mistake("pre-norm leaves the residual stream as it is: x + sublayer(norm(x)) — norm(x) + … normalises "
                      "the stream itself", variant=_residual_slip(lambda x, f, norm: norm(x) + f(norm(x)), _POST)),
              Mistake("use pre_norm: with pre_norm=False the norm comes after the add, norm(x + sublayer(x))",
                      variant=_residual_slip(_PRE, _PRE)),  # before "swapped": it explains only post's cases
              Mistake("pre_norm=True is x + sublayer(norm(x)) (GPT-2, Llama) and pre_norm=False norm(x + sublayer(x)) "
                      "(the original Transformer, BERT): the two are swapped", variant=_residual_slip(_POST, _PRE)),
              Mistake("post-norm normalises the SUM, after the residual add: norm(x + sublayer(x)), not "
                      "x + norm(sublayer(x))", variant=_residual_slip(_PRE, lambda x, f, norm: x + norm(f(x)))),
              Mistake("the residual adds x back around the sublayer: x + sublayer(norm(x)) (pre-norm), "
                      "norm(x + sublayer(x)) (post-norm)",
                      variant=_residual_slip(lambda x, f, norm: f(norm(x)), lambda x, f, norm: norm(f(x)))),
              Mistake("pre-norm normalises what enters the sublayer: x + sublayer(norm(x)) — the norm is missing",
                      variant=_residual_slip(lambda x, f, norm: x + f(x), _POST))])
