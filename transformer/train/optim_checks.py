"""The refusals of optim.py's public functions, one check per function and of the same name."""
from __future__ import annotations

from ..backend import get_xp
from ..core.shared_checks import dtype_name
from ..require import require_int, require_real
from .shared_checks import callable_arg, param_dict, same_arrays


def adamw_state(params):
    param_dict("params", params)


def optimizer_settings(lr, betas, eps, weight_decay, decay):
    require_real(lr=lr, eps=eps, weight_decay=weight_decay)
    for name, x in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
        if x < 0:
            raise ValueError(f"{name} must be ≥ 0, got {name}={x!r}")
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair (β₁, β₂), got betas={betas!r}")
    require_real(**{"betas[0]": betas[0], "betas[1]": betas[1]})
    if not all(0 <= b < 1 for b in betas):
        raise ValueError(f"betas must lie in [0, 1), got betas={tuple(betas)}")
    callable_arg("decay", decay, optional=True)


def adamw_step(params, grads, state, lr, *, betas, eps, weight_decay, decay):
    param_dict("params", params)
    same_arrays("grads", grads, params)
    if not (hasattr(state, "m") and hasattr(state, "v") and hasattr(state, "t")):
        raise TypeError(f"state must be an AdamWState (adamw_state(params)), got {type(state).__name__}")
    same_arrays("state.m", state.m, params)
    same_arrays("state.v", state.v, params)
    require_int(**{"state.t": state.t})  # the steps taken: -1 divided by zero in the bias correction, 1.5 passed
    optimizer_settings(lr, betas, eps, weight_decay, decay)
    if eps == 0:  # m̂ / (√v̂ + ε) is 0 / 0 for a parameter whose gradients have all been 0
        raise ValueError("eps must be > 0: it keeps m̂ / (√v̂ + ε) finite where v̂ = 0, got eps=0")
    eps_in_dtypes(eps, params)


def eps_in_dtypes(eps, params):
    """ε is added in each parameter's dtype: below its smallest number it is 0 there, the same 0 / 0 (the
    default 1e-8 in float16, whose smallest is 6e-8: an embedding row no token used turned NaN)."""
    for name, p in params.items():
        finfo = get_xp(p).finfo(p.dtype)
        smallest = float(finfo.smallest_normal) * float(finfo.eps)  # the smallest subnormal
        if eps < smallest:
            raise ValueError(f"eps={eps!r} is 0 in params[{name!r}]'s {dtype_name(p.dtype)} (its smallest number is "
                             f"{smallest:.2g}): m̂ / (√v̂ + ε) would be 0 / 0 where v̂ = 0; keep the parameters "
                             f"in float32 or raise eps")


def lr_at(step, *, lr_max, warmup, total, lr_min):
    require_int(step=step, warmup=warmup, total=total)
    require_real(lr_max=lr_max, lr_min=lr_min)
    if lr_max < 0 or not 0 <= lr_min <= lr_max:
        raise ValueError(f"need 0 ≤ lr_min ≤ lr_max, got lr_min={lr_min!r}, lr_max={lr_max!r}")
    if total < warmup or total == 0:
        raise ValueError(f"total must be ≥ warmup and ≥ 1, got total={total}, warmup={warmup}")


def global_norm(grads):
    param_dict("grads", grads)


def clip_by_global_norm(grads, max_norm):
    param_dict("grads", grads)
    require_real(max_norm=max_norm, positive=True)
