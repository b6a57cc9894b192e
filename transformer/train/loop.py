"""The training loop: batch → loss and gradients → clip → learning rate → AdamW, `steps` times.

No trainer class: one function, with the model passed in as a function
`loss_and_grads(params, batch) -> (loss, grads)` and its weights as a dict of arrays that the
optimizer updates in place. The loop records what a run is judged by (loss, learning rate and
gradient norm per step, tokens seen, tokens/s), shows them on a progress bar, and stops at the
first step whose loss or gradient is not finite, naming it.
"""
from __future__ import annotations

import math
import time

from . import loop_checks as checks
from .data import batch_tokens, row_shards
from .optim import adamw_state, adamw_step, clip_by_global_norm, global_norm, lr_at
from ..backend import progress_enabled, reuse_freed_memory
from ..require import checked_by

__all__ = ["train_loop", "sharded_loss"]


@checked_by(checks.train_loop)
def train_loop(loss_and_grads, params: dict, batch_iter, *, steps: int, lr_max: float, warmup: int,
               min_lr: float = 0.0, clip: float | None = 1.0, weight_decay: float = 0.1, betas=(0.9, 0.95),
               eps: float = 1e-8, decay=None, progress: bool = True, on_step=None, desc: str = "training",
               tokens_of=None) -> dict:
    """Train params in place for `steps` updates and return the history.

    Each step s = 0 … steps − 1:

        batch = next(batch_iter)
        L, g  = loss_and_grads(params, batch)
        ‖g‖   = clip_by_global_norm(g, clip)          (clip=None: measured, not clipped)
        η_s   = lr_at(s, lr_max, warmup, total=steps, lr_min=min_lr)
        θ     ← adamw_step(θ, g, η_s, betas, eps, weight_decay, decay)
        on_step(s, params, L)                         (after the update; for snapshots)

    history: "loss", "lr", "grad_norm", "tokens" (per step: tokens_of(batch); None: `batch_tokens`,
    the batch's real tokens), "tokens_seen", "seconds" (training time, on_step's excluded),
    "tokens_per_s" (tokens_seen / seconds), "steps". A loss or gradient
    norm that is NaN or ±inf stops training with FloatingPointError naming the step (the
    parameters are left as they were before that step's update). It first asks malloc to keep
    freed memory for reuse (`reuse_freed_memory`: process-wide, glibc only).
    """
    from tqdm.auto import tqdm

    reuse_freed_memory()  # a step's temporaries reuse the last step's memory (backend.py: 53 -> 33 ms a step)
    tokens_of = batch_tokens if tokens_of is None else tokens_of
    state = adamw_state(params)
    history = {"loss": [], "lr": [], "grad_norm": [], "tokens": []}
    bar = tqdm(total=steps, desc=desc, unit="step", disable=not progress_enabled(progress))
    seen, hooked = 0, 0.0  # tokens so far; seconds spent in on_step, kept out of tokens/s
    start = time.perf_counter()
    batch_iter = iter(batch_iter)
    try:
        for s in range(steps):
            try:
                batch = next(batch_iter)
            except StopIteration:
                raise ValueError(f"batch_iter ran out after {s} batches, steps={steps} were asked for") from None
            lr = lr_at(s, lr_max=lr_max, warmup=warmup, total=steps, lr_min=min_lr)  # checked at the door
            loss, grads = loss_and_grads(params, batch)
            loss = float(loss)
            if not math.isfinite(loss):
                raise FloatingPointError(f"loss is {loss} at step {s} (lr={lr:.3g}): training stopped; "
                                         f"try a lower lr_max or a smaller clip")
            checks.grads_match(params, grads)  # the model's own grads: wrong keys or shapes stop here
            norm = global_norm(grads) if clip is None else clip_by_global_norm(grads, clip)
            if not math.isfinite(norm):
                raise FloatingPointError(f"gradient norm is {norm} at step {s} (loss {loss:.4g}): training stopped")
            adamw_step(params, grads, state, lr, betas=betas, eps=eps, weight_decay=weight_decay,
                       decay=decay)  # settings checked at the door, grads just above
            tokens = int(tokens_of(batch))
            seen += tokens
            for key, value in (("loss", loss), ("lr", lr), ("grad_norm", norm), ("tokens", tokens)):
                history[key].append(value)
            if on_step is not None:
                t0 = time.perf_counter()
                on_step(s, params, loss)
                hooked += time.perf_counter() - t0
            seconds = time.perf_counter() - start - hooked
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{seen / max(seconds, 1e-9):.0f}", refresh=False)
            bar.update(1)
    finally:
        bar.close()
    seconds = time.perf_counter() - start - hooked
    history["tokens_seen"] = seen
    history["seconds"] = seconds
    history["tokens_per_s"] = history["tokens_seen"] / seconds if seconds > 0 else 0.0
    history["steps"] = steps
    return history


def sharded_loss(loss_and_grads, pool, shards: int):  # -> (params, rows) -> (loss, grads)
    """loss_and_grads over the batch's rows cut into `shards` shards, run by `pool` (a concurrent.futures
    executor of as many workers: data parallelism on the CPU's cores, as NumPy and BLAS release the
    GIL), the shards' means combined by their scored targets:

        L = Σ_i (n_i / N) L_i,   ∇L = Σ_i (n_i / N) ∇L_i          n_i: shard i's scored targets, N = Σ n_i

    the batch's mean loss and its gradient, as one call on the whole batch computes them (up to the
    order of float additions)."""
    def loss(params, rows):
        parts = row_shards(rows, shards)
        results = list(pool.map(lambda part: loss_and_grads(params, part), parts))
        n = [part.scored for part in parts]  # n_i
        N = sum(n)
        weights = [n_i / N for n_i in n]  # n_i / N
        total = sum(w * L for w, (L, _) in zip(weights, results))
        grads = {k: sum(w * g[k] for w, (_, g) in zip(weights, results)) for k in results[0][1]}
        return total, grads
    return loss
