"""The checker's cases for lessons 10 and 18: norms and the SwiGLU, backward passes, AdamW."""
from __future__ import annotations

import math

import numpy as np

from ..core.attention import scaled_dot_product_attention, scaled_dot_product_attention_backward, softmax_backward
from ..core.layers import erf, gelu, layer_norm, relu, rms_norm, sigmoid, silu, swiglu_ffn
from .compare import Tolerance
from ..core.masks import causal_mask
from ..train.optim import adamw_state, adamw_step, decays_by_default
from .cases import Case, Mistake, Spec, fresh

__all__ = ["LAYER_NORM", "RMS_NORM", "GELU", "SWIGLU", "SOFTMAX_BACKWARD", "SDPA_BACKWARD", "ADAMW_STEP"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 10: norms and the feed-forward ----------------------------------------------------------
def norm_cases(with_beta):
    def cases():
        r = _rng(101)
        x = lambda *s: r.standard_normal(s) * 2 + 1  # noqa: E731
        g = lambda d: r.uniform(0.5, 1.5, d)  # noqa: E731
        beta = (lambda d: (r.standard_normal(d) * 0.1,)) if with_beta else (lambda d: ())
        return [Case("x (2, 3, 8): b=2, n=3, d=8", (x(2, 3, 8), g(8)) + beta(8), tags=frozenset({"batch"})),
                Case("x (4, 6)", (x(4, 6), g(6)) + beta(6)),
                Case("eps=0.5 given", (x(2, 5), g(5)) + beta(5), {"eps": 0.5}, frozenset({"eps"})),
                Case("float32 x (3, 16)", (x(3, 16).astype(np.float32), g(16).astype(np.float32))
                     + tuple(b.astype(np.float32) for b in beta(16)), tags=frozenset({"float32"}))] + (
            [Case("no β (beta=None, the default)", (x(3, 7), g(7)), tags=frozenset({"no-beta"}))] if with_beta else [])
    return cases


def _normalised(statistics):
    """layer_norm with the statistics a slip computes: statistics(x, eps) -> (μ, the divisor)."""
    def norm(x, gamma, beta=None, eps=1e-5):
        centre, divisor = statistics(x, eps)
        return ((x - centre) / divisor * gamma + (0 if beta is None else beta)).astype(x.dtype)
    return norm


def _ln_swapped(x, gamma, beta=None, eps=1e-5):  # y·β + γ
    if beta is None:
        raise ValueError("no β to swap with γ")  # a variant that cannot run on a case says nothing about it
    return layer_norm(x, beta, gamma, eps)


def _ln_stats(variance, sqrt=True, axis=-1):  # (μ, √(var + ε)) with a slip in the variance, the root or the axis
    def stats(x, eps):
        mu = x.mean(axis, keepdims=True)
        var = variance(x, mu, axis)
        return mu, np.sqrt(var + eps) if sqrt else var + eps
    return stats


_CENTRED = lambda x, mu, axis: ((x - mu) ** 2).mean(axis, keepdims=True)  # noqa: E731 - the biased variance
_UNCENTRED = lambda x, mu, axis: (x * x).mean(axis, keepdims=True)  # noqa: E731 - mean(x²), μ left in


def _rms_variant(square_mean=lambda x: (x * x).mean(-1, keepdims=True), sqrt=True, gain=True, times_root=False):
    def norm(x, gamma, eps=1e-6):
        root = np.sqrt(square_mean(x) + eps) if sqrt else square_mean(x) + eps
        y = x * root if times_root else x / root
        return (y * (gamma if gain else 1.0)).astype(x.dtype)
    return norm


def _ln_unbiased(x, gamma, beta=None, eps=1e-5):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps) * gamma
    return (y if beta is None else y + beta).astype(x.dtype)


def _ln_eps_outside(x, gamma, beta=None, eps=1e-5):
    y = (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps) * gamma
    return (y if beta is None else y + beta).astype(x.dtype)


def _ln_no_gain(x, gamma, beta=None, eps=1e-5):
    return layer_norm(x, np.ones_like(gamma), None if beta is None else np.zeros_like(beta), eps)


def _ln_axis0(x, gamma, beta=None, eps=1e-5):  # the statistics of each feature across the batch
    y = (x - x.mean(0, keepdims=True)) / np.sqrt(x.var(0, keepdims=True) + eps) * gamma
    return (y if beta is None else y + beta).astype(x.dtype)


NORM_DIMS = ("b", "n", "d")
LAYER_NORM = Spec(
    "layer_norm", layer_norm, norm_cases(True), "transformer/core/layers.py", dims=NORM_DIMS,
    mistakes=[Mistake("the variance is the biased one, divided by d (np.var's default ddof=0), as the paper and "
                      "torch", variant=_ln_unbiased),
              Mistake("ε goes inside the square root: (x − μ) / √(σ² + ε)", variant=_ln_eps_outside),
              Mistake("multiply by γ and add β after normalising", variant=_ln_no_gain),
              Mistake("the mean and variance run over axis 0, across the batch: take them over each position's own "
                      "d features, the last axis (axis=-1, keepdims=True)", variant=_ln_axis0),
              Mistake("normalise over the last axis (the d features of each position): axis=-1, keepdims=True",
                      raises=r"broadcast"),
              Mistake("ε is left out: add the `eps` argument to the variance inside the root, √(σ² + ε) (it changes "
                      "each entry by about ε / 2σ², so only the case with a large eps fails by much)",
                      variant=lambda x, gamma, beta=None, eps=1e-5: layer_norm(x, gamma, beta, 0.0)),
              Mistake("use the `eps` argument", tag="eps"),
              Mistake("β is optional: add it only when it is given (y if beta is None else y + beta)", tag="no-beta"),
              Mistake("β is optional: add it only when it is given (y if beta is None else y + beta)",
                      raises=r"NoneType", tag="no-beta"),
              Mistake("add β after scaling: y = (x − μ) / √(σ² + ε) · γ + β",
                      variant=lambda x, gamma, beta=None, eps=1e-5: layer_norm(x, gamma, None, eps)),
              Mistake("divide by the standard deviation, √(σ² + ε), not by the variance",
                      variant=_normalised(_ln_stats(_CENTRED, sqrt=False))),
              Mistake("σ² is the mean of (x − μ)², not of x²: centre x before squaring",
                      variant=_normalised(_ln_stats(_UNCENTRED))),
              Mistake("the statistics are each position's own: over its d features (axis=-1, keepdims=True), not "
                      "over the whole array", variant=_normalised(_ln_stats(_CENTRED, axis=None))),
              Mistake("γ multiplies and β adds: (x − μ) / √(σ² + ε) · γ + β", variant=_ln_swapped)],
    torch=lambda case: _torch_norm("layer", case))


def _rms_centred(x, gamma, eps=1e-6):
    return rms_norm(x - x.mean(-1, keepdims=True), gamma, eps)


def _rms_eps_outside(x, gamma, eps=1e-6):
    return (x / (np.sqrt((x * x).mean(-1, keepdims=True)) + eps) * gamma).astype(x.dtype)


def _rms_sum(x, gamma, eps=1e-6):  # the sum of x² where the formula has its mean
    return (x / np.sqrt((x * x).sum(-1, keepdims=True) + eps) * gamma).astype(x.dtype)


RMS_NORM = Spec(
    "rms_norm", rms_norm, norm_cases(False), "transformer/core/layers.py", dims=NORM_DIMS,
    mistakes=[Mistake("RMSNorm does not subtract the mean: x / √(mean(x²) + ε) · γ", variant=_rms_centred),
              Mistake("ε goes inside the square root: x / √(mean(x²) + ε)", variant=_rms_eps_outside),
              Mistake("the mean of x², not the sum: divide the sum by d (np.mean(x * x, axis=-1, keepdims=True)); "
                      "with the sum every output is √d times too small", variant=_rms_sum),
              Mistake("the root mean square runs over the last axis: mean(x * x, axis=-1, keepdims=True)",
                      raises=r"broadcast"),
              Mistake("ε is left out: add the `eps` argument inside the root, √(mean(x²) + ε) (it changes each entry "
                      "by about ε / 2·mean(x²), so only the case with a large eps fails by much)",
                      variant=lambda x, gamma, eps=1e-6: rms_norm(x, gamma, 0.0)),
              Mistake("use the `eps` argument", tag="eps"),
              Mistake("divide by the root: √(mean(x²) + ε), not mean(x²) + ε", variant=_rms_variant(sqrt=False)),
              Mistake("divide by the root mean square (or multiply by its inverse, 1/√(mean(x²) + ε)), not multiply "
                      "by it", variant=_rms_variant(times_root=True)),
              Mistake("the mean of the squares, mean(x²), not the square of the mean, mean(x)²",
                      variant=_rms_variant(square_mean=lambda x: x.mean(-1, keepdims=True) ** 2)),
              Mistake("multiply by the gain γ after dividing", variant=_rms_variant(gain=False))],
    torch=lambda case: _torch_norm("rms", case))


def _torch_norm(kind, case):
    import torch
    import torch.nn.functional as F
    x, gamma, *rest = (torch.from_numpy(np.asarray(a)) for a in case.args)
    if kind == "layer":
        eps = case.kwargs.get("eps", 1e-5)
        return F.layer_norm(x, x.shape[-1:], gamma, rest[0] if rest else None, eps).numpy()
    return F.rms_norm(x, x.shape[-1:], gamma, case.kwargs.get("eps", 1e-6)).numpy()


# the package's erf is written out, within 1.5e-7 of the true one: a GELU with math.erf or scipy's differs by
# ½|x|·1.5e-7 ≤ 3e-7 on these cases, and a slip (the √2, the tanh form for the exact one) by 1e-4 or more
ERF_TOL = Tolerance((1e-6, 5e-7))


def gelu_cases():
    r = _rng(103)
    x = r.standard_normal((2, 3, 8)) * 2
    wide = np.array([-30.0, -20, -10, -4, -1, 0, 1, 4, 10, 20, 30])  # the tails: GELU(x) → x, and → 0 for −x
    return [Case("x (2, 3, 8), the exact form (approximate='none', the default)", (x,), tol=ERF_TOL),
            Case("x (2, 3, 8), approximate='tanh' (GPT-2's form)", (x,), {"approximate": "tanh"},
                 frozenset({"tanh"}), tol=ERF_TOL),
            Case("x from −30 to 30, exact", (wide,), tags=frozenset({"tails"}), tol=ERF_TOL),
            Case("x from −30 to 30, approximate='tanh'", (wide,), {"approximate": "tanh"}, frozenset({"tanh", "tails"}),
                 tol=ERF_TOL),
            Case("float32 x (4, 6), exact", (x.reshape(6, 8)[:4, :6].astype(np.float32),),
                 tags=frozenset({"float32"}))]


def _tanh_form(inner, outer=math.sqrt(2 / math.pi)):
    """GELU with a slip in its tanh form: tanh(outer · inner(x)); the exact form untouched, so that only the
    cases with approximate='tanh' tell it."""
    def fn(x, approximate="none"):
        if approximate != "tanh":
            return gelu(x)
        return 0.5 * x * (1.0 + np.tanh(outer * inner(x)))
    return fn


def _phi_alone(x, approximate="none"):  # Φ(x) without the x in front: ½(1 + erf(x/√2)), or its tanh form
    if approximate == "tanh":
        return 0.5 * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


GELU = Spec(
    "gelu", gelu, gelu_cases, "transformer/core/layers.py", dims=("…",),
    mistakes=[Mistake("Φ is the normal distribution's CDF, ½(1 + erf(x/√2)): divide x by √2 inside erf",
                      variant=lambda x, approximate="none": 0.5 * x * (1.0 + erf(x))
                      if approximate != "tanh" else gelu(x, "tanh")),
              Mistake("GELU(x) = x·Φ(x): ½(1 + erf(x/√2)) is Φ(x) alone — multiply it by x",
                      variant=_phi_alone),
              Mistake("approximate='none', the default, is the exact form ½x(1 + erf(x/√2)); the tanh formula is only "
                      "for approximate='tanh'", variant=lambda x, approximate="none": gelu(x, "tanh")),
              Mistake("approximate='tanh' asks for GPT-2's form, ½x(1 + tanh(√(2/π)(x + 0.044715x³))), not the erf one",
                      variant=lambda x, approximate="none": gelu(x)),
              Mistake("the tanh form's inner term is x + 0.044715·x³, with x cubed",
                      variant=_tanh_form(lambda x: x + 0.044715 * x * x)),
              Mistake("the tanh form's inner term is x + 0.044715·x³: the cube is scaled by 0.044715",
                      variant=_tanh_form(lambda x: x + x ** 3)),
              Mistake("the tanh form scales its inner term by √(2/π) ≈ 0.798",
                      variant=_tanh_form(lambda x: x + 0.044715 * x ** 3, outer=1.0)),
              Mistake("x·σ(1.702x) is the sigmoid approximation of GELU, within 0.02 of it: write the exact form with "
                      "erf", variant=lambda x, approximate="none": x * sigmoid(1.702 * x)),
              Mistake("math.erf takes one number: use `erf` imported at the top of the file (the package's, for "
                      "arrays), or np.vectorize(math.erf)", raises=r"only (length-1|size-1|0-dimensional|integer "
                      r"scalar) arrays|must be real number")],
    torch=lambda case: _torch_gelu(case))


def _torch_gelu(case):
    import torch
    import torch.nn.functional as F
    (x,), kwargs = case.args, case.kwargs
    return F.gelu(torch.from_numpy(np.asarray(x)), approximate=kwargs.get("approximate", "none")).numpy()


def swiglu_cases():
    r = _rng(102)
    m = lambda *s: r.standard_normal(s) / math.sqrt(s[0])  # noqa: E731
    return [Case("x (2, 3, 6), d=6, d_ff=10", (r.standard_normal((2, 3, 6)), m(6, 10), m(6, 10), m(10, 6))),
            Case("x (4, 8), d=8, d_ff=12", (r.standard_normal((4, 8)), m(8, 12), m(8, 12), m(12, 8)))]


SWIGLU = Spec(
    "swiglu_ffn", swiglu_ffn, swiglu_cases, "transformer/core/layers.py", dims=NORM_DIMS,
    mistakes=[Mistake("SiLU goes on the gate: SiLU(x W_gate) ∘ (x W_up), then @ W_down",
                      variant=lambda x, W_gate, W_up, W_down: ((x @ W_gate) * silu(x @ W_up)) @ W_down),
              Mistake("SiLU(z) = z·σ(z), not σ(z): the gate is the SiLU of x W_gate",
                      variant=lambda x, W_gate, W_up, W_down: (sigmoid(x @ W_gate) * (x @ W_up)) @ W_down),
              Mistake("a matrix product whose sizes do not line up: the gate and the up projection multiply "
                      "element-wise (*), and (…, d_ff) @ W_down takes W_down (d_ff, d) as it is, untransposed",
                      raises=r"core dimension|mismatch"),
              Mistake("SiLU(z) = z·σ(z) = z / (1 + e^(−z)): the exponent's sign is flipped",
                      variant=lambda x, W_gate, W_up, W_down: ((x @ W_gate) * sigmoid(-(x @ W_gate)) * (x @ W_up))
                      @ W_down),
              Mistake("SiLU goes on the gate alone, SiLU(x W_gate) ∘ (x W_up), not on the product",
                      variant=lambda x, W_gate, W_up, W_down: silu((x @ W_gate) * (x @ W_up)) @ W_down),
              Mistake("SiLU goes on the gate's projection, SiLU(x W_gate), not on x",
                      variant=lambda x, W_gate, W_up, W_down: ((silu(x) @ W_gate) * (x @ W_up)) @ W_down),
              Mistake("the gate's activation is SiLU, z·σ(z), not ReLU",
                      variant=lambda x, W_gate, W_up, W_down: (relu(x @ W_gate) * (x @ W_up)) @ W_down),
              Mistake("the gate's activation is SiLU, z·σ(z), not GELU",
                      variant=lambda x, W_gate, W_up, W_down: (gelu(x @ W_gate) * (x @ W_up)) @ W_down),
              Mistake("the gate's activation is SiLU, z·σ(z), not GELU",
                      variant=lambda x, W_gate, W_up, W_down: (gelu(x @ W_gate, "tanh") * (x @ W_up)) @ W_down),
              Mistake("the last axis is d_ff where it should be d: did you skip the last product, @ W_down "
                      "(d_ff, d)?", variant=lambda x, W_gate, W_up, W_down: silu(x @ W_gate) * (x @ W_up))],
    torch=lambda case: _torch_swiglu(case))


def _torch_swiglu(case):
    import torch
    import torch.nn.functional as F
    x, W_gate, W_up, W_down = (torch.from_numpy(np.asarray(a)) for a in case.args)
    return ((F.silu(x @ W_gate) * (x @ W_up)) @ W_down).numpy()


# --- lesson 18: backward passes and AdamW ------------------------------------------------------------
def softmax_backward_cases():
    r = _rng(181)
    P = np.exp(r.standard_normal((2, 3, 5)))
    P /= P.sum(-1, keepdims=True)
    P_masked = P.copy()
    P_masked[0, 1, 3:] = 0  # masked entries: P = 0
    P_masked[0, 1] /= P_masked[0, 1].sum()
    return [Case("P (2, 3, 5) rows summing to 1", (r.standard_normal((2, 3, 5)), P)),
            Case("some masked entries (P = 0)", (r.standard_normal((2, 3, 5)), P_masked), tags=frozenset({"mask"}))]


SOFTMAX_BACKWARD = Spec(
    "softmax_backward", softmax_backward, softmax_backward_cases, "transformer/core/attention.py",
    dims=("…", "n_q", "n_k"),
    mistakes=[Mistake("the row-sum term is missing: dS = P ∘ (dP − rowsum(dP ∘ P)) — every weight depends on every "
                      "score of its row", variant=lambda dP, P: P * dP),
              Mistake("only the diagonal of the Jacobian is taken: ∂P_i/∂S_j = P_i(δ_ij − P_j), so dS_j = "
                      "P_j (dP_j − Σ_i dP_i P_i) — the off-diagonal terms, −P_i P_j, give the row sum",
                      variant=lambda dP, P: P * (1 - P) * dP),
              Mistake("the row sum must keep its axis (keepdims=True) to broadcast back over the row",
                      raises=r"broadcast"),
              Mistake("dS = P ∘ (dP − rowsum(dP ∘ P)): multiply by P, element-wise",
                      variant=lambda dP, P: dP - (dP * P).sum(-1, keepdims=True)),
              Mistake("the row sum runs over axis −2, the queries: it runs over the keys of one query, the last "
                      "axis, the one the softmax normalised ((dP * P).sum(axis=-1, keepdims=True))",
                      variant=lambda dP, P: P * (dP - (dP * P).sum(-2, keepdims=True))),
              Mistake("the row sum is weighted by P: rowsum(dP ∘ P) = Σ_j dP_ij P_ij (the gradient reaching the row's "
                      "normaliser), not Σ_j dP_ij", variant=lambda dP, P: P * (dP - dP.sum(-1, keepdims=True)))],
    torch=lambda case: _torch_softmax_backward(case))


def _torch_softmax_backward(case):
    import torch
    dP, P = (np.asarray(a) for a in case.args)
    if (P == 0).any():
        return None  # P from logits: a zero needs −inf logits, whose gradient torch leaves NaN-free only via masking
    S = torch.from_numpy(np.log(P)).requires_grad_(True)
    torch.softmax(S, -1).backward(torch.from_numpy(dP))
    return S.grad.numpy()


def sdpa_backward_cases():
    r = _rng(182)

    def case(label, b, h, h_kv, n, d_h, mask=None, tags=(), scale=None):
        q, k, v = (r.standard_normal(s) for s in ((b, h, n, d_h), (b, h_kv, n, d_h), (b, h_kv, n, d_h)))
        _, P = scaled_dot_product_attention(q, k, v, mask, scale=scale, return_weights=True)
        kw = {} if scale is None else {"scale": scale}
        return Case(label, (r.standard_normal((b, h, n, d_h)), q, k, v, P), kw, frozenset(tags))
    return [case("b=1, h=2, n=4, d_h=3", 1, 2, 2, 4, 3),
            case("causal, b=2, h=2, n=5, d_h=4", 2, 2, 2, 5, 4, causal_mask(5), ("mask",)),
            case("GQA: h=4, h_kv=2, n=4", 1, 4, 2, 4, 3, tags=("gqa",)),
            case("scale=0.3 given", 1, 1, 1, 3, 2, tags=("scale",), scale=0.3)]


def _sdpa_backward_unscaled(which="dq dk"):
    """The backward with the scale left out of dQ, of dK, or of both."""
    def variant(dO, q, k, v, P, *, scale=None):
        dq, dk, dv = scaled_dot_product_attention_backward(dO, q, k, v, P, scale=scale)
        s = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        return dq / s if "dq" in which else dq, dk / s if "dk" in which else dk, dv
    return variant


def _sdpa_backward_heads_not_summed(dO, q, k, v, P, *, scale=None):  # dK, dV left with h heads
    n_rep = q.shape[1] // k.shape[1]
    return scaled_dot_product_attention_backward(dO, q, np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1), P,
                                                 scale=scale)


def _sdpa_backward_heads_strided(dO, q, k, v, P, *, scale=None):  # groups summed as heads g, g + h_kv, g + 2h_kv …
    b, h_kv, n_k, d_h = k.shape
    n_rep = q.shape[1] // h_kv
    if n_rep == 1:
        raise ValueError("no groups")  # a variant that cannot run on a case says nothing about it
    dq, dk, dv = scaled_dot_product_attention_backward(dO, q, np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1),
                                                       P, scale=scale)  # dk, dv: [b, h, n_k, d_h]
    return (dq, dk.reshape(b, n_rep, h_kv, n_k, d_h).sum(axis=1),
            dv.reshape(b, n_rep, h_kv, n_k, d_h).sum(axis=1))  # [b, h_kv, n_k, d_h]


def _sdpa_backward_p_not_transposed(dO, q, k, v, P, *, scale=None):  # dV = P dO (square cases only)
    dq, dk, _ = scaled_dot_product_attention_backward(dO, q, k, v, P, scale=scale)
    b, h_kv, n_k, d_h = v.shape
    return dq, dk, (P @ dO).reshape(b, h_kv, q.shape[1] // h_kv, n_k, d_h).sum(axis=2)  # [b, h_kv, n_k, d_h]


SDPA_BACKWARD = Spec(
    "scaled_dot_product_attention_backward", scaled_dot_product_attention_backward, sdpa_backward_cases,
    "transformer/core/attention.py",
    dims=(("b", "h", "n_q", "d_h"), ("b", "h_kv", "n_k", "d_h"), ("b", "h_kv", "n_k", "d_h")), names=("dq", "dk", "dv"),
    mistakes=[*(Mistake("dQ and dK carry the scale: dQ = dS K · scale and dK = dSᵀ Q · scale",
                        variant=_sdpa_backward_unscaled(which)) for which in ("dq dk", "dq", "dk")),
              Mistake("dK and dV have h heads where K and V have h_kv: sum the gradients of each group of h / h_kv "
                      "query heads (the backward of np.repeat: dk.reshape(b, h_kv, h // h_kv, n, d_h).sum(axis=2))",
                      variant=_sdpa_backward_heads_not_summed),
              Mistake("the groups are consecutive query heads: heads g·r … g·r + r − 1 (r = h / h_kv) read K/V head g, "
                      "so reshape to (b, h_kv, r, n, d_h) and sum axis 2 — (b, r, h_kv, …) sums heads g, g + h_kv …, "
                      "the order of np.tile", variant=_sdpa_backward_heads_strided),
              Mistake("dV = Pᵀ dO: key j collects the gradient of every query that read it, weighted by P[i, j], so P "
                      "is transposed (P.swapaxes(-1, -2) @ dO)", variant=_sdpa_backward_p_not_transposed),
              Mistake("dK and dV have h_kv heads: sum the gradients of each group of h / h_kv query heads "
                      "(the backward of repeating K and V)", tag="gqa"),
              Mistake("use the `scale` argument when it is given", tag="scale")],
    torch=lambda case: _torch_sdpa_backward(case))


def _torch_sdpa_backward(case):
    import torch
    import torch.nn.functional as F
    dO, q, k, v, P = (torch.from_numpy(np.asarray(a)) for a in case.args)
    mask = P > 0  # the weights' zeros are the mask (no score underflows in these small cases)
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=case.kwargs.get("scale"),
                                         enable_gqa=q.shape[1] != k.shape[1])
    out.backward(dO)
    return q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


def adamw_cases():
    r = _rng(183)
    params = {"W": r.standard_normal((3, 4)), "b": r.standard_normal(4)}
    grads = [{"W": r.standard_normal((3, 4)), "b": r.standard_normal(4)} for _ in range(3)]
    return [Case("3 steps on W (3, 4) and b (4,), lr=0.01, defaults", (params, grads, 0.01)),
            Case("3 steps, betas=(0.8, 0.9), weight_decay=0.5, eps=1e-6", (params, grads, 0.05),
                 {"betas": (0.8, 0.9), "weight_decay": 0.5, "eps": 1e-6}, frozenset({"options"})),
            Case("3 steps, weight_decay=0: plain Adam", (params, grads, 0.05), {"weight_decay": 0.0},
                 frozenset({"options"}))]


ADAMW_NAMES = ("state.t",) + tuple(f"{p} after step {s}" for s in (1, 2, 3) for p in ("W", "b"))


def run_adamw(step, case):
    """Three steps of `step` on a copy of the case's parameters; the final state.t (first: a step that does not count
    itself makes every θ wrong), and θ after each step, read from the arrays the caller holds: a model holds its
    parameters, so a step that puts new arrays into params[name] moves nothing the model sees."""
    (params, grads, lr), kwargs = fresh(case)
    held = dict(params)  # the caller's arrays, as a model holds them
    state = adamw_state(params)
    out = []
    for g in grads:
        step(params, g, state, lr, **kwargs)
        out += [held["W"].copy(), held["b"].copy()]
    return (state.t,) + tuple(out)


def _adam_l2(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
    g2 = {k: g + weight_decay * params[k] if decays_by_default(k, params[k]) else g for k, g in grads.items()}
    return adamw_step(params, g2, state, lr, betas=betas, eps=eps, weight_decay=0.0)


def _adamw_corrected(m_hat: bool, v_hat: bool):
    """AdamW with the bias correction of m, of v, or of neither."""
    def step(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
        state.t += 1
        for k, p in params.items():
            if weight_decay and decays_by_default(k, p):
                p *= 1 - lr * weight_decay
            state.m[k] = betas[0] * state.m[k] + (1 - betas[0]) * grads[k]
            state.v[k] = betas[1] * state.v[k] + (1 - betas[1]) * grads[k] ** 2
            m = state.m[k] / (1 - betas[0] ** state.t) if m_hat else state.m[k]
            v = state.v[k] / (1 - betas[1] ** state.t) if v_hat else state.v[k]
            p -= lr * m / (np.sqrt(v) + eps)
    return step


def _adamw_rebinds(only_decayed: bool):
    """`p = p * (1 − ηλ)` on the decayed parameters (only_decayed) or `p = p − …` on all: a new array, so the
    caller's θ never moves there."""
    def step(params, grads, state, lr, **kwargs):
        frozen = {k: p.copy() for k, p in params.items() if not only_decayed or decays_by_default(k, p)}
        adamw_step(params, grads, state, lr, **kwargs)
        for k, p in frozen.items():
            params[k][...] = p
    return step


def _adamw_decay_all(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
    return adamw_step(params, grads, state, lr, betas=betas, eps=eps, weight_decay=weight_decay,
                      decay=lambda name: True)


ADAMW_STEP = Spec(
    "adamw_step", adamw_step, adamw_cases, "transformer/train/optim.py", dims=None, names=ADAMW_NAMES,
    call=run_adamw,
    mistakes=[Mistake("decoupled weight decay: shrink θ itself (θ ← θ − η·λ·θ) before the Adam step, never add λθ "
                      "to the gradient (that is Adam with L2)", variant=_adam_l2),
              Mistake("the bias correction is missing: m̂ = m / (1 − β₁ᵗ), v̂ = v / (1 − β₂ᵗ), t counted from 1",
                      variant=_adamw_corrected(False, False)),
              Mistake("m's bias correction is missing: m̂ = m / (1 − β₁ᵗ), as v̂ = v / (1 − β₂ᵗ)",
                      variant=_adamw_corrected(False, True)),
              Mistake("v's bias correction is missing: v̂ = v / (1 − β₂ᵗ), as m̂ = m / (1 − β₁ᵗ)",
                      variant=_adamw_corrected(True, False)),
              Mistake("the parameters the caller holds never change: `p = p - …` or `params[name] = p - …` makes a "
                      "new array, and a model holding the old one never sees it — update in place (p -= …, p *= …, "
                      "p[...] = …)", variant=_adamw_rebinds(False)),
              Mistake("the weight decay is missing: shrink each decayed parameter, θ ← θ − η·λ·θ, before the Adam "
                      "step", variant=lambda params, grads, state, lr, *, weight_decay=0.1, **kwargs:
                      adamw_step(params, grads, state, lr, weight_decay=0.0, **kwargs)),
              Mistake("the decayed parameters never change: `p = p * (1 − η·λ)` makes a new array and leaves "
                      "params[name] as it was, so the step after it moves the copy — shrink in place (p *= …)",
                      variant=_adamw_rebinds(True)),
              Mistake("by default only matrices decay (decays_by_default: ndim ≥ 2); biases and gains do not",
                      variant=_adamw_decay_all),
              Mistake("use the keyword arguments betas, eps and weight_decay", tag="options")])
