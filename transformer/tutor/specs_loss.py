"""The checker's cases for lesson 18's loss, clipping and schedule: cross_entropy, its gradient, clip_by_global_norm
and lr_at."""
from __future__ import annotations

import math

import numpy as np

from ..core.attention import softmax
from ..core.loss import cross_entropy, cross_entropy_backward
from ..train.optim import clip_by_global_norm, lr_at
from .cases import Case, Mistake, Spec, call_plain, fresh
from .compare import tolerance_for

__all__ = ["CROSS_ENTROPY", "CROSS_ENTROPY_BACKWARD", "CLIP_BY_GLOBAL_NORM", "LR_AT"]

IGNORE = -100  # the package's ignore_index, torch's default


def _rng(seed):
    return np.random.default_rng(seed)


# --- the loss and its gradient --------------------------------------------------------------------------
def loss_cases():
    r = _rng(184)
    z = lambda *s: r.standard_normal(s) * 2  # noqa: E731 - logits
    t = lambda v, *s: r.integers(0, v, s)  # noqa: E731 - targets
    some_ignored = t(7, 2, 5)
    some_ignored[0, 3:] = IGNORE  # padding at the end of the first row
    some_ignored[1, 0] = IGNORE
    huge = z(2, 3, 6) * 1e3  # logits of ±several thousand: e^z overflows unless the row max is taken out first
    near_million = (1e6 + z(2, 4, 5) * 3).astype(np.float32)  # float32 near 10⁶ is spaced 1/16 apart
    f32 = tolerance_for(np.float32)
    return [Case("logits (4, 5): n=4, v=5, every target kept", (z(4, 5), t(5, 4))),
            Case("logits (2, 5, 7): b=2, n=5, v=7, three positions ignored (target −100)", (z(2, 5, 7), some_ignored),
                 tags=frozenset({"ignore"})),
            Case("ignore_index=0 given: targets equal to 0 are the ignored ones", (z(3, 4, 6), t(6, 3, 4)),
                 {"ignore_index": 0}, frozenset({"ignore", "ignore_index"})),
            Case("logits of several thousand (2, 3, 6)", (huge, t(6, 2, 3)), tags=frozenset({"huge"})),
            Case("float32 logits near 10⁶ (2, 4, 5): the loss is a difference of two numbers near 10⁶",
                 (near_million, t(5, 2, 4)), tags=frozenset({"float32", "million", "huge"}), tol=f32),
            Case("float32 logits (3, 8)", (z(3, 8).astype(np.float32), t(8, 3)), tags=frozenset({"float32"}),
                 tol=f32),
            Case("every position ignored: no position to average over", (z(2, 3, 4), np.full((2, 3), IGNORE)),
                 tags=frozenset({"ignore", "all-ignored"})),
            Case("a target of 5 with v=5", (z(2, 5), np.array([1, 5])), tags=frozenset({"refuse"}),
                 refuses=ValueError, names=(5,), refusal="targets lie in [0, 5) or equal ignore_index: no token 5"),
            Case("a target of −5 beside an ignored one: NumPy would read the 5th logit from the end",
                 (z(3, 5), np.array([2, IGNORE, -5])), tags=frozenset({"refuse", "negative"}), refuses=ValueError,
                 names=(-5,), refusal="targets lie in [0, 5) or equal ignore_index=-100: −5 is neither")]


def call_loss(fn, case):
    """The loss as a Python float: a 0-d array, a NumPy scalar and a float are all a loss."""
    out = call_plain(fn, case)
    try:
        return float(out)
    except (TypeError, ValueError):  # an array of many losses, None: compared as it is, and told what it is
        return out


def _loss_from(per_position, mean_over="kept"):
    """cross_entropy with −log p_t from per_position(z, t), and the mean over the kept positions, over all of them,
    or a sum."""
    def loss(logits, targets, *, ignore_index=IGNORE):
        z = np.asarray(logits, np.float64)
        keep = targets != ignore_index
        nll = np.where(keep, per_position(z, np.where(keep, targets, 0)), 0.0)
        if mean_over == "sum":
            return nll.sum()
        n = keep.sum() if mean_over == "kept" else keep.size
        return nll.sum() / max(n, 1)
    return loss


def _picked(log_p, t):
    return -np.take_along_axis(log_p, t[..., None], -1)[..., 0]


def _stable(z, t):
    m = z.max(-1, keepdims=True)
    return _picked(z - m - np.log(np.exp(z - m).sum(-1, keepdims=True)), t)


def _ignoring_nothing(logits, targets, *, ignore_index=IGNORE):
    """Every position counted: an ignored target of 0 (ignore_index=0) is scored as token 0."""
    if (targets < 0).any():
        raise IndexError("a negative target")  # −100 indexes from the end, or past it: no answer to compare
    return _loss_from(_stable)(logits, targets, ignore_index=None)


CROSS_ENTROPY = Spec(
    "cross_entropy", cross_entropy, loss_cases, "transformer/core/loss.py", call=call_loss,
    mistakes=[Mistake("the mean runs over the kept positions only: N counts the targets ≠ ignore_index, not every "
                      "position", variant=_loss_from(_stable, "all")),
              Mistake("the loss is the mean over the kept positions, not their sum: divide by N",
                      variant=_loss_from(_stable, "sum")),
              Mistake("the ignored positions are scored too: keep = targets != ignore_index, and only those count",
                      variant=_ignoring_nothing),
              Mistake("with every position ignored there is nothing to average: return 0, not 0 / 0 = NaN",
                      tag="all-ignored"),
              Mistake("a target of −100 is not an index: take the target's logit only where targets != ignore_index "
                      "(np.where(keep, targets, 0) is a safe index), and zero the ignored positions after",
                      raises=r"out of bounds|index -100|-100 is out"),
              Mistake("subtract each row's max before exp: e^z overflows to inf for logits of a few hundred (float64: "
                      "709; float32: 88), and inf / inf is NaN — log Σ_j e^(z_j) = m + log Σ_j e^(z_j − m)",
                      tag="huge"),
              Mistake("near 10⁶, float32 numbers are 1/16 apart: LSE(z) = m + log Σ e^(z − m) rounds to that step, and "
                      "LSE(z) − z_t keeps only the rounding — compute (log Σ_j e^(z_j − m)) − (z_t − m), two small "
                      "numbers, and never add m back", tag="million"),
              Mistake("use ignore_index as given (ignore_index=0 here: targets equal to 0 are ignored), not −100",
                      tag="ignore_index"),
              Mistake("check the kept targets first: outside [0, v) raise ValueError naming the target "
                      "(np.take_along_axis raises IndexError past v, and reads from the end for a negative one)",
                      tag="refuse"),
              Mistake("a negative target other than ignore_index is no token: check 0 ≤ t as well as t < v",
                      tag="negative")],
    torch=lambda case: _torch_loss(case, grad=False))


def _grad_from(probs=lambda z: softmax(z, axis=-1), scale="kept", zero_ignored=True):
    """cross_entropy_backward with a slip: probs(z) in place of the softmax, no 1/N or 1/(every position), or the
    ignored rows left in."""
    def grad(logits, targets, *, ignore_index=IGNORE):
        z = np.asarray(logits, np.float64)
        keep = targets != ignore_index
        t = np.where(keep, targets, 0)
        d = probs(z) - (np.arange(z.shape[-1]) == t[..., None])
        n = {"kept": max(keep.sum(), 1), "all": keep.size, "none": 1}[scale]
        d = d / n
        return (np.where(keep[..., None], d, 0.0) if zero_ignored else d).astype(logits.dtype)
    return grad


def grad_cases():  # the loss's cases; the targets it refuses are refused there, once
    return [c for c in loss_cases() if c.refuses is None]


CROSS_ENTROPY_BACKWARD = Spec(
    "cross_entropy_backward", cross_entropy_backward, grad_cases, "transformer/core/loss.py", dims=("…", "v"),
    mistakes=[Mistake("divide by N, the number of kept positions: the loss is their mean, so each one's gradient "
                      "(softmax − one-hot) is scaled by 1/N", variant=_grad_from(scale="none")),
              Mistake("N counts the kept positions only (targets ≠ ignore_index), not every position",
                      variant=_grad_from(scale="all")),
              Mistake("an ignored position adds nothing to the loss, so its row of the gradient is 0",
                      variant=_grad_from(zero_ignored=False)),
              Mistake("the sign: ∂(LSE(z) − z_t)/∂z_j = p_j − 1[j = t], softmax minus the one-hot, not the reverse",
                      variant=lambda logits, targets, *, ignore_index=IGNORE: -cross_entropy_backward(
                          logits, targets, ignore_index=ignore_index)),
              Mistake("∂LSE(z)/∂z_j is softmax(z)_j, not z_j: the gradient is softmax(z) − one_hot(t)",
                      variant=_grad_from(lambda z: z)),
              Mistake("subtract each row's max before exp: e^z overflows to inf for logits of a few hundred, and "
                      "inf / inf is NaN — softmax(z) = softmax(z − max z)", tag="huge"),
              Mistake("with every position ignored the gradient is 0 everywhere: divide by max(N, 1), not by 0",
                      tag="all-ignored"),
              Mistake("a target of −100 is not an index: build the one-hot only where targets != ignore_index "
                      "(np.where(keep, targets, 0) is a safe index), and zero the ignored rows after",
                      raises=r"out of bounds|index -100|-100 is out"),
              Mistake("use ignore_index as given (ignore_index=0 here: targets equal to 0 are ignored), not −100",
                      tag="ignore_index")],
    torch=lambda case: _torch_loss(case, grad=True))


def _torch_loss(case, grad: bool):
    """torch's cross_entropy (mean over the kept positions) or its gradient by autograd; None where every position
    is ignored (torch gives NaN there, the package 0)."""
    import torch
    import torch.nn.functional as F

    (logits, targets), kwargs = fresh(case)
    ignore = kwargs.get("ignore_index", IGNORE)
    if (targets == ignore).all():
        return None
    z = torch.from_numpy(np.asarray(logits, np.float64)).requires_grad_(grad)
    t = torch.from_numpy(targets.reshape(-1)).long()
    loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), t, ignore_index=ignore)
    if not grad:
        return float(loss)
    loss.backward()
    return z.grad.numpy().astype(logits.dtype)


# --- clipping the gradient's global norm ----------------------------------------------------------------------
def clip_cases():
    r = _rng(185)
    g = lambda *s: r.standard_normal(s)  # noqa: E731
    return [Case("W (3, 4) and b (4,), ‖g‖ ≈ 4.5 clipped to 1", ({"W": g(3, 4), "b": g(4)}, 1.0)),
            Case("‖g‖ ≈ 4.5 under max_norm = 10: left as it is", ({"W": g(3, 4), "b": g(4)}, 10.0),
                 tags=frozenset({"under"})),
            Case("three arrays, one far larger: one factor for all", ({"W_q": g(4, 4) * 10, "W_k": g(4, 4) * 0.01,
                                                                         "gain": g(4) * 0.1}, 2.0)),
            Case("float16 gradients of about 300: their squares overflow float16", ({"W": (g(2, 3) * 300).astype(
                np.float16), "b": (g(3) * 300).astype(np.float16)}, 1.0), tags=frozenset({"float16"})),
            Case("every gradient 0: the norm is 0 and nothing moves", ({"W": np.zeros((2, 2)), "b": np.zeros(2)}, 1.0),
                 tags=frozenset({"zero"}))]


def run_clip(clip, case):
    """The norm clip returns, then each gradient as the caller holds it afterwards: the step that follows reads the
    arrays the caller has, so clipping a copy clips nothing."""
    (grads, max_norm), _ = fresh(case)
    held = dict(grads)
    norm = clip(grads, max_norm)
    try:
        norm = float(norm)
    except (TypeError, ValueError):  # None, an array of norms: compared as it is
        pass
    return (norm,) + tuple(held[k].copy() for k in held)


def _clipped(factor, in_place=True, norm_after=False, each=False):
    """clip_by_global_norm with a slip: factor(norm, max_norm) the scale, always applied; or each array clipped on
    its own norm; or a new array put in the dict; or the norm after clipping returned."""
    def clip(grads, max_norm):
        norm = float(np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values())))
        for k, g in grads.items():
            own = float(np.sqrt((g.astype(np.float64) ** 2).sum())) if each else norm
            scaled = (g * factor(own, max_norm)).astype(g.dtype)
            if in_place:
                g[...] = scaled
            else:
                grads[k] = scaled
        return min(norm, max_norm) if norm_after else norm
    return clip


_TORCH_FACTOR = lambda norm, max_norm: min(1.0, max_norm / (norm + 1e-6))  # noqa: E731

CLIP_BY_GLOBAL_NORM = Spec(
    "clip_by_global_norm", clip_by_global_norm, clip_cases, "transformer/train/optim.py", call=run_clip,
    writes=("grads",),  # in place on purpose, also where the package leaves them (under max_norm)
    names=("the norm returned", "gradient 1 after", "gradient 2 after", "gradient 3 after"), dtype_rule="",
    mistakes=[Mistake("one norm over ALL the arrays, ‖g‖ = √(Σ_arrays Σ_entries g²), and one factor for all of them: "
                      "clipping each array by its own norm changes the update's direction",
                      variant=_clipped(_TORCH_FACTOR, each=True)),
              Mistake("clip only when ‖g‖ > max_norm: the factor is min(1, max_norm / (‖g‖ + 1e-6)), so a small "
                      "gradient is never scaled up", variant=_clipped(lambda n, m: m / (n + 1e-6))),
              Mistake("the gradients the caller holds never change: `grads[name] = g * scale` puts a new array in the "
                      "dict — scale in place (g *= scale)", variant=_clipped(_TORCH_FACTOR, in_place=False)),
              Mistake("return the norm measured BEFORE clipping: the training loop logs it, and it tells how far the "
                      "gradient was from max_norm", variant=_clipped(_TORCH_FACTOR, norm_after=True)),
              Mistake("the factor is max_norm / (‖g‖ + 1e-6), torch's clip_grad_norm_: the 1e-6 keeps it finite at "
                      "‖g‖ = 0 and shrinks a gradient at exactly max_norm by a hair",
                      variant=_clipped(lambda n, m: min(1.0, m / n) if n else 1.0)),
              Mistake("sum the squares in float64: 300² overflows float16 (its largest number is 65,504), and the "
                      "norm of finite gradients comes out inf", tag="float16"),
              Mistake("with every gradient 0 the norm is 0 and the factor max_norm / (0 + 1e-6) is large: min(1, …) "
                      "leaves the gradients at 0 (and no 0 / 0)", tag="zero")],
    torch=lambda case: _torch_clip(case))


def _torch_clip(case):
    """torch.nn.utils.clip_grad_norm_ on the same gradients, in float64: the total norm and the clipped arrays, in
    the gradients' dtype."""
    import torch

    (grads, max_norm), _ = fresh(case)
    params = []
    for g in grads.values():
        p = torch.zeros(g.shape, dtype=torch.float64, requires_grad=True)
        p.grad = torch.from_numpy(np.asarray(g, np.float64))
        params.append(p)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return (float(norm),) + tuple(p.grad.numpy().astype(g.dtype) for p, g in zip(params, grads.values()))


# --- the learning rate's schedule ---------------------------------------------------------------------------
def schedule_cases():
    return [Case("lr_max=1, warmup=3, total=10: steps 0 … 12", (), {"lr_max": 1.0, "warmup": 3, "total": 10}),
            Case("lr_max=0.003, warmup=100, total=600: steps 0 … 610", (),
                 {"lr_max": 3e-3, "warmup": 100, "total": 600}),
            Case("lr_min=0.1 given: lr_max=1, warmup=2, total=8", (), {"lr_max": 1.0, "warmup": 2, "total": 8,
                                                                        "lr_min": 0.1}, frozenset({"lr_min"})),
            Case("warmup=0: the first step is at the top of the cosine", (), {"lr_max": 1.0, "warmup": 0, "total": 6},
                 frozenset({"no-warmup"})),
            Case("warmup=total=4: no decay, η_min from step 4 on", (), {"lr_max": 2.0, "warmup": 4, "total": 4,
                                                                          "lr_min": 0.5}, frozenset({"lr_min"}))]


def run_schedule(fn, case):
    """The rate of every step from 0 to total + 10, as one float64 array (a step past total too)."""
    _, kwargs = fresh(case)
    return np.array([float(fn(step, **kwargs)) for step in range(kwargs["total"] + 11)])


def _schedule(warm, decay_length=lambda w, T: T - w, half=0.5, after=None, floor=True):
    """lr_at with a slip: warm(step, warmup) the warm-up's fraction; the cosine over decay_length steps; its half;
    what comes after total (None: η_min); floor=False: the cosine decays to 0, not to η_min."""
    def lr(step, *, lr_max, warmup, total, lr_min=0.0):
        low = lr_min if floor else 0.0  # what the cosine decays to
        if step < warmup:
            return lr_max * warm(step, warmup)
        if step >= total and after is None:
            return lr_min
        length = decay_length(warmup, total)
        progress = (step - warmup) / length if length else 0.0
        return low + (lr_max - low) * half * (1 + math.cos(math.pi * progress))
    return lr


LR_AT = Spec(
    "lr_at", lr_at, schedule_cases, "transformer/train/optim.py", dims=("step",), call=run_schedule,
    dtype_rule="",
    mistakes=[Mistake("the warm-up's first step is η_max/warmup, not 0: step s (counted from 0) gets η_max·(s + 1)/"
                      "warmup, so step warmup − 1 is η_max", variant=_schedule(lambda s, w: s / w)),
              Mistake("the cosine runs over the total − warmup steps after the warm-up: progress = (step − warmup) / "
                      "(total − warmup), from 0 to 1", variant=_schedule(lambda s, w: (s + 1) / w, lambda w, T: T)),
              Mistake("the cosine takes half a turn: ½(1 + cos(π·progress)) goes from 1 to 0 — the ½ is missing",
                      variant=_schedule(lambda s, w: (s + 1) / w, half=1.0)),
              Mistake("after total steps the rate stays at η_min: the cosine, left running, climbs back up",
                      variant=_schedule(lambda s, w: (s + 1) / w, after="cosine")),
              Mistake("the cosine decays to lr_min, not to 0: η = η_min + (η_max − η_min)·½(1 + cos(π·progress))",
                      variant=_schedule(lambda s, w: (s + 1) / w, floor=False)),
              Mistake("lr_min is a keyword argument, 0 by default: use the one given", tag="lr_min"),
              Mistake("with warmup=0 there is no warm-up: step 0 is at the top of the cosine, η_max "
                      "(and no division by warmup)", raises=r"division by zero", tag="no-warmup")],
    torch=lambda case: _torch_schedule(case))


def _torch_schedule(case):
    """torch's LinearLR warm-up (start_factor = 1/warmup) then CosineAnnealingLR to eta_min, the rate of each step
    read before optimizer.step(); None without a warm-up (LinearLR needs at least one step) or a decay."""
    import torch

    _, kw = fresh(case)
    lr_max, warmup, total, lr_min = kw["lr_max"], kw["warmup"], kw["total"], kw.get("lr_min", 0.0)
    if warmup == 0 or total == warmup:
        return None
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr_max)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, total_iters=warmup - 1)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=lr_min)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, decay], milestones=[warmup])
    rates = []
    for step in range(total + 11):
        rates.append(opt.param_groups[0]["lr"] if step <= total else lr_min)  # torch's cosine climbs back past T_max
        opt.step()
        sched.step()
    return np.array(rates)
