"""The refusals of loop.py: train_loop's arguments at its door, and the gradients a model returns
to it at each step (grads_match)."""
from __future__ import annotations

from ..require import require_bool, require_int, require_real
from .optim_checks import lr_at, optimizer_settings
from .shared_checks import callable_arg, param_dict, same_arrays


def train_loop(loss_and_grads, params, batch_iter, *, steps, lr_max, warmup, min_lr, clip, weight_decay, betas, eps,
               decay, progress, on_step, desc, tokens_of):
    callable_arg("loss_and_grads", loss_and_grads)
    param_dict("params", params)
    if not hasattr(batch_iter, "__iter__") and not hasattr(batch_iter, "__next__"):
        raise TypeError(f"batch_iter must be an iterator of batches (T.batches(...)), got {type(batch_iter).__name__}")
    require_int(steps=steps, low=1)
    lr_at(0, lr_max=lr_max, warmup=warmup, total=steps, lr_min=min_lr)
    if clip is not None:
        require_real(clip=clip, positive=True)
    optimizer_settings(lr_max, betas, eps, weight_decay, decay)
    require_bool(progress=progress)
    callable_arg("on_step", on_step, optional=True)
    callable_arg("tokens_of", tokens_of, optional=True)
    if not isinstance(desc, str):
        raise TypeError(f"desc must be a string, got {desc!r}")


def grads_match(params, grads):
    """What a model's loss_and_grads returned: the params' keys and shapes."""
    same_arrays("grads", grads, params)
