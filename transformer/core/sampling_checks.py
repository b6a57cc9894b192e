"""The refusals of `core/sampling.py`, one check per public function and of the same name, and
`step_logits`, which every generation loop calls on a step's logits before it samples."""
from __future__ import annotations

import numpy as np

from ..backend import to_host
from ..require import require_int, require_real
from .shared_checks import seed_or_rng


def setting(name, value, inside, want):
    """Raise ValueError "NAME must WANT, got NAME=VALUE" unless value is a real number in range.
    A real number is what require_real takes (Python's, NumPy's, a 0-d array; finite, not a
    bool); its TypeError becomes a ValueError here, the one error type of a bad setting."""
    try:
        require_real(**{name: value})
        ok = inside(float(value))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must {want}, got {name}={value!r}")


def check_sampling(temperature, top_k, top_p):
    setting("temperature", temperature, lambda t: t >= 0, "be a finite number ≥ 0 (0 = greedy)")
    if top_k is not None:
        require_int(top_k=top_k, low=1)
    if top_p is not None:
        setting("top_p", top_p, lambda p: 0.0 < p <= 1.0, "lie in (0, 1] or be None")


def logits_row_max(x):  # [..., v] NumPy, floating, non-empty
    """A possible token in every row: NaN or +inf has no softmax. One pass: a finite row max means
    no NaN (max propagates it), no +inf, and not all -inf. A model calls this on its own logits."""
    if not np.isfinite(x.max(axis=-1)).all():
        if np.isnan(x).any():
            raise ValueError("logits contain NaN")
        if np.isposinf(x).any():
            raise ValueError("logits contain +inf")
        raise ValueError("a row of logits is all -inf: no token is possible")


def step_logits(logits, step: int):  # [b, v] logits of one generation step, any backend
    """A possible token in every row of a generation step's logits, or one line naming the step: broken
    weights, finite weights whose products overflow, or a float16 overflow give NaN or +inf, and an
    argmax over them would pick a meaningless id. Every generation loop calls this before it samples."""
    try:
        logits_row_max(to_host(logits))
    except ValueError as e:
        raise ValueError(f"the model's {e} at generation step {step}: no token can be chosen from them") from None


def host_logits(logits):
    """Floating-point logits with a vocabulary axis, and a possible token in every row."""
    x = to_host(logits)  # the check looks at the host copy the formula samples from
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"logits must be floating point, got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"logits must have a vocabulary axis of size ≥ 1, got shape {x.shape}")
    logits_row_max(x)


def greedy(logits):
    host_logits(logits)


def filter_logits(logits, temperature, top_k, top_p):
    check_sampling(temperature, top_k, top_p)
    host_logits(logits)


def next_token_probs(logits, temperature, top_k, top_p):
    filter_logits(logits, temperature, top_k, top_p)


def sample_next(logits, temperature, top_k, top_p, rng):
    filter_logits(logits, temperature, top_k, top_p)
    seed_or_rng("rng", rng)
