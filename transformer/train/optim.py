"""The optimizer and its two companions: AdamW, the learning-rate schedule, gradient clipping.

Parameters and gradients are dicts of arrays with the same keys (`{"W_q": …, "ln_g": …}`); the
optimizer changes the parameter arrays in place, so a model holding them sees every update.
All three follow PyTorch's definitions operation for operation (`torch.optim.AdamW`,
`torch.nn.utils.clip_grad_norm_`, warm-up then cosine), and tests/test_train_optim.py holds them
to it in float64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import optim_checks as checks
from ..backend import get_xp
from ..require import checked_by

__all__ = ["AdamWState", "adamw_state", "adamw_step", "lr_at", "global_norm", "clip_by_global_norm",
           "decays_by_default"]


@dataclass
class AdamWState:
    """AdamW's memory: the running mean m and mean square v of every gradient, and the step t."""
    m: dict  # name -> array, the shape of its parameter: first moment, E[g]
    v: dict  # name -> array: second moment, E[g²]
    t: int = 0  # updates done so far; the bias correction divides by 1 − β^t


@checked_by(checks.adamw_state)
def adamw_state(params: dict) -> AdamWState:
    """Zero moments for every parameter, t = 0 (as torch's optimizer before its first step).

    >>> import numpy as np
    >>> s = adamw_state({"W": np.ones((2, 3)), "b": np.ones(3)})
    >>> s.t, s.m["W"].shape, float(s.v["b"].sum())
    (0, (2, 3), 0.0)
    """
    m = {k: get_xp(p).zeros_like(p) for k, p in params.items()}
    v = {k: get_xp(p).zeros_like(p) for k, p in params.items()}
    return AdamWState(m, v, 0)


def decays_by_default(name: str, p) -> bool:
    """Weight decay for matrices (ndim ≥ 2) only.

    Decay pulls a weight towards 0. For a matrix (projections, the FFN, the embedding table)
    that is the regulariser we want: small weights, smoother functions. For a norm's gain γ,
    0 means "switch this feature off", not "no opinion" (its neutral value is 1), and a bias
    only shifts; both are few numbers that cannot overfit by themselves. GPT-2, nanoGPT and
    Llama's recipes leave them undecayed.
    """
    return p.ndim >= 2


@checked_by(checks.adamw_step)
def adamw_step(params: dict, grads: dict, state: AdamWState, lr: float, *, betas=(0.9, 0.95), eps: float = 1e-8,
               weight_decay: float = 0.1, decay=None) -> None:
    """One AdamW update of every parameter, in place (Loshchilov & Hutter, decoupled weight decay).

    With g the gradient, t the step after this one, η = lr, λ = weight_decay:

        θ ← θ − η·λ·θ                       (only where decay(name) is True; not through m, v)
        m ← β₁·m + (1 − β₁)·g
        v ← β₂·v + (1 − β₂)·g²
        m̂ = m / (1 − β₁ᵗ),   v̂ = v / (1 − β₂ᵗ)
        θ ← θ − η·m̂ / (√v̂ + ε)

    in torch.optim.AdamW's order: decay first, then the moments, then the step written as
    θ − (η / (1 − β₁ᵗ))·m / (√v / √(1 − β₂ᵗ) + ε). decay(name) -> bool picks the decayed
    parameters; None: `decays_by_default`, the matrices.

    >>> import numpy as np
    >>> p, g = {"w": np.array([1.0, -2.0])}, {"w": np.array([0.5, 0.5])}
    >>> s = adamw_state(p); adamw_step(p, g, s, lr=0.1)
    >>> p["w"].round(6).tolist(), s.t  # step 1: m̂ = g, v̂ = g², so θ moves by η·sign(g)
    ([0.9, -2.1], 1)
    """
    beta1, beta2 = betas
    state.t += 1
    t = state.t
    bias1, bias2 = 1 - beta1 ** t, 1 - beta2 ** t  # the moments started at 0: undo that pull
    step_size = lr / bias1
    for name, p in params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        xp = get_xp(p)
        if weight_decay != 0 and (decay(name) if decay is not None else decays_by_default(name, p)):
            p *= 1 - lr * weight_decay  # decoupled: shrink θ itself, never through m or v
        m += (1 - beta1) * (g - m)  # m ← β₁ m + (1 − β₁) g, as torch's lerp
        v *= beta2
        v += (1 - beta2) * (g * g)  # v ← β₂ v + (1 − β₂) g²
        denom = xp.sqrt(v) / math.sqrt(bias2) + eps  # √v̂ + ε
        p -= step_size * (m / denom)  # θ ← θ − η m̂ / (√v̂ + ε)


@checked_by(checks.lr_at)
def lr_at(step: int, *, lr_max: float, warmup: int, total: int, lr_min: float = 0.0) -> float:
    """The learning rate of update number `step` (0, 1, …): linear warm-up, cosine decay, then flat.

        step < warmup:          η = η_max · (step + 1) / warmup       (η_max/warmup, …, η_max)
        warmup ≤ step < total:  η = η_min + (η_max − η_min) · ½(1 + cos(π·(step − warmup)/(total − warmup)))
        step ≥ total:           η = η_min

    The first update gets η_max/warmup, never 0 (an update at η = 0 would be wasted). This is
    torch's SequentialLR of LinearLR(start_factor=1/warmup, total_iters=warmup − 1) and, from
    step warmup on, CosineAnnealingLR(T_max=total − warmup, eta_min=η_min).

    >>> [round(lr_at(s, lr_max=1.0, warmup=2, total=6), 3) for s in range(8)]
    [0.5, 1.0, 1.0, 0.854, 0.5, 0.146, 0.0, 0.0]
    """
    if step < warmup:
        return lr_max * (step + 1) / warmup
    if step >= total:
        return lr_min
    progress = (step - warmup) / (total - warmup)  # 0 → 1 over the decay
    return lr_min + (lr_max - lr_min) * 0.5 * (1 + math.cos(math.pi * progress))


@checked_by(checks.global_norm)
def global_norm(grads: dict) -> float:
    """‖g‖₂ over all the gradients together: √(Σ_arrays Σ_elements g²), as one long vector.

    The squares are summed in float64: a float16 gradient of 300 (or a float32 one of 2e19) squared to
    inf in its own dtype, and the loop stopped on a "non-finite" norm of finite gradients.

    >>> import numpy as np
    >>> global_norm({"a": np.array([3.0]), "b": np.array([[4.0]])})
    5.0
    """
    total = 0.0
    for g in grads.values():
        xp = get_xp(g)
        g64 = xp.astype(g, xp.float64, copy=False)  # a float64 gradient is read as it is
        total += float(xp.sum(g64 * g64))  # a host float: the loop logs it and decides on it
    return math.sqrt(total)


@checked_by(checks.clip_by_global_norm)
def clip_by_global_norm(grads: dict, max_norm: float) -> float:
    """Scale every gradient by min(1, max_norm / (‖g‖₂ + 10⁻⁶)), in place; return ‖g‖₂ before.

    One factor for all arrays keeps the update's direction; only its length is capped. The
    10⁻⁶ is torch.nn.utils.clip_grad_norm_'s: it keeps the factor finite at ‖g‖ = 0, and makes
    a norm just at max_norm shrink by a hair, as torch does.

    >>> import numpy as np
    >>> g = {"a": np.array([3.0, 4.0])}
    >>> clip_by_global_norm(g, 1.0), g["a"].round(6).tolist()
    (5.0, [0.6, 0.8])
    """
    norm = global_norm(grads)  # grads checked at this door
    scale = max_norm / (norm + 1e-6)
    if scale < 1 and math.isfinite(norm):  # a NaN or inf norm: left for the caller to stop on
        for g in grads.values():
            g *= scale
    return norm
