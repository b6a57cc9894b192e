"""The training loop against the same loop written with torch (AdamW, clip_grad_norm_, the
schedule as SequentialLR, autograd for the gradient) on softmax regression, whose gradient
we write in closed form; and its stops, hook, token counts and progress bar."""
import math

import numpy as np
import pytest
import torch

import transformer as T

N, D, C = 64, 5, 4  # examples, features, classes


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))  # [N, D]
    y = rng.integers(0, C, size=N)  # [N]
    y[::7] = T.IGNORE_INDEX  # a few ignored examples, as padding would be
    return X, y


def make_batch(X, y, size=16):
    return lambda rng: (lambda i: (X[i], y[i]))(rng.choice(N, size=size, replace=False))


def softmax_regression(params, batch):  # -> (loss, grads)
    """Mean cross-entropy of softmax(X W + b) over the kept examples, and its gradient in closed
    form: with P the probabilities and Y the one-hot targets, dZ = (P − Y) / n_kept,
    dW = Xᵀ dZ, db = Σ_rows dZ."""
    X, y = batch
    keep = y != T.IGNORE_INDEX
    X, y = X[keep], y[keep]
    Z = X @ params["W"] + params["b"]  # [n, C]
    Z = Z - Z.max(axis=1, keepdims=True)
    P = np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True)  # [n, C]
    n = len(y)
    loss = -np.log(P[np.arange(n), y]).mean()
    dZ = P.copy()
    dZ[np.arange(n), y] -= 1
    dZ /= n  # [n, C]
    return loss, {"W": X.T @ dZ, "b": dZ.sum(axis=0)}


def torch_loop(W0, b0, batches, *, steps, lr_max, warmup, min_lr, clip, weight_decay, betas):
    """The same run in torch: W decayed, b not; clip_grad_norm_; LinearLR then cosine."""
    W = torch.tensor(W0.copy(), requires_grad=True)
    b = torch.tensor(b0.copy(), requires_grad=True)
    opt = torch.optim.AdamW([{"params": [W], "weight_decay": weight_decay}, {"params": [b], "weight_decay": 0.0}],
                            lr=lr_max, betas=betas, eps=1e-8)
    linear = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, total_iters=warmup - 1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - warmup, eta_min=min_lr)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [linear, cosine], milestones=[warmup])
    losses, norms, lrs = [], [], []
    for _, (X, y) in zip(range(steps), batches):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(torch.tensor(X) @ W + b, torch.tensor(y), ignore_index=-100)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([W, b], clip)))
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses, norms, lrs, W.detach().numpy(), b.detach().numpy()


@pytest.mark.parametrize("lr_max,clip,weight_decay,betas", [(0.05, 1.0, 0.1, (0.9, 0.95)),
                                                            (0.3, 0.25, 0.5, (0.8, 0.99))])
def test_loss_trajectory_equals_torch(lr_max, clip, weight_decay, betas):
    X, y = data()
    rng = np.random.default_rng(1)
    params = {"W": rng.standard_normal((D, C)) * 3, "b": np.zeros(C)}  # large W: big early gradients, clipped
    W0, b0 = params["W"].copy(), params["b"].copy()
    settings = dict(steps=60, lr_max=lr_max, warmup=6, min_lr=lr_max / 20, clip=clip, weight_decay=weight_decay,
                    betas=betas)
    hist = T.train_loop(softmax_regression, params, T.batches(make_batch(X, y), 5, 60), progress=False, **settings)
    losses, norms, lrs, W, b = torch_loop(W0, b0, T.batches(make_batch(X, y), 5, 60), **settings)
    np.testing.assert_allclose(hist["loss"], losses, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(hist["grad_norm"], norms, rtol=1e-5)
    np.testing.assert_allclose(hist["lr"], lrs, rtol=1e-12)
    np.testing.assert_allclose(params["W"], W, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(params["b"], b, rtol=1e-5, atol=1e-8)
    assert sum(n > clip for n in norms) >= 3  # clipping was exercised, not just skipped
    assert hist["loss"][-1] < 0.5 * hist["loss"][0]  # and it learned
    assert hist["steps"] == 60 and len(hist["loss"]) == 60


def test_a_nan_loss_stops_naming_the_step():
    X, y = data()
    params = {"W": np.zeros((D, C)), "b": np.zeros(C)}
    snapshot = {}

    def flaky(p, batch):  # a model that diverges at step 3
        loss, grads = softmax_regression(p, batch)
        return (math.nan if len(snapshot) == 3 else loss), grads

    def on_step(step, p, loss):
        snapshot[step] = {k: v.copy() for k, v in p.items()}

    with pytest.raises(FloatingPointError, match=r"^loss is nan at step 3 \(lr=[0-9.e-]+\): training stopped"):
        T.train_loop(flaky, params, T.batches(make_batch(X, y), 0, 10), steps=10, lr_max=0.1, warmup=2,
                     progress=False, on_step=on_step)
    np.testing.assert_array_equal(params["W"], snapshot[2]["W"])  # the bad step changed nothing


def test_an_inf_gradient_stops_naming_the_step():
    def exploding(p, batch):
        return 1.0, {"W": np.full((D, C), np.inf), "b": np.zeros(C)}

    with pytest.raises(FloatingPointError, match=r"^gradient norm is inf at step 0"):
        T.train_loop(exploding, {"W": np.zeros((D, C)), "b": np.zeros(C)}, iter([None] * 3), steps=3, lr_max=0.1,
                     warmup=1, progress=False)


def test_hook_tokens_and_history():
    X, y = data()
    params = {"W": np.zeros((D, C)), "b": np.zeros(C)}
    seen = []
    batches = list(T.batches(lambda rng: T.induction_batch(rng, 2, 3, 10), 0, 5))
    # a model that ignores its batch: softmax regression on fixed data, tokens from the induction batches
    hist = T.train_loop(lambda p, batch: softmax_regression(p, (X, y)), params, iter(batches), steps=5, lr_max=0.1,
                        warmup=1, progress=False, on_step=lambda s, p, loss: seen.append((s, loss)))
    assert seen == list(enumerate(hist["loss"]))
    assert hist["tokens"] == [12] * 5 and hist["tokens_seen"] == 60  # b · 2·n_half per batch
    assert hist["tokens_per_s"] == pytest.approx(60 / hist["seconds"])
    assert hist["lr"] == [T.lr_at(s, lr_max=0.1, warmup=1, total=5) for s in range(5)]


def test_time_in_the_hook_is_not_training_time():
    """Snapshots taken in on_step (0.1 s each, 0.5 s in all) do not count against tokens/s."""
    import time
    X, y = data()
    hist = T.train_loop(softmax_regression, {"W": np.zeros((D, C)), "b": np.zeros(C)}, [(X, y)] * 5, steps=5,
                        lr_max=0.1, warmup=1, progress=False, on_step=lambda s, p, loss: time.sleep(0.1))
    assert hist["seconds"] < 0.25  # five small steps take milliseconds


def test_stops_when_the_batches_run_out_and_on_wrong_grads():
    X, y = data()
    with pytest.raises(ValueError, match=r"batch_iter ran out after 2 batches, steps=5"):
        T.train_loop(softmax_regression, {"W": np.zeros((D, C)), "b": np.zeros(C)}, [(X, y)] * 2, steps=5,
                     lr_max=0.1, warmup=1, progress=False)
    with pytest.raises(ValueError, match=r"keys of grads ≠ keys of params: missing \['b'\]"):
        T.train_loop(lambda p, batch: (1.0, {"W": np.zeros((D, C))}), {"W": np.zeros((D, C)), "b": np.zeros(C)},
                     [None] * 2, steps=2, lr_max=0.1, warmup=1, progress=False)


@pytest.mark.parametrize("progress,env,shown", [(True, None, True), (False, None, False), (True, "1", False),
                                                (True, "0", True)])
def test_progress_bar(capsys, monkeypatch, progress, env, shown):
    X, y = data()
    if env is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", env)
    T.train_loop(softmax_regression, {"W": np.zeros((D, C)), "b": np.zeros(C)}, [(X, y)] * 3, steps=3, lr_max=0.1,
                 warmup=1, progress=progress, desc="softmax regression")
    err = capsys.readouterr().err
    assert ("softmax regression" in err and "loss=" in err and "tok_s=" in err) == shown, err


@pytest.mark.parametrize("kw,err,match", [
    (dict(steps=0), ValueError, r"steps must be an integer ≥ 1, got steps=0"),
    (dict(warmup=20), ValueError, r"total must be ≥ warmup"),
    (dict(lr_max=-1.0), ValueError, r"need 0 ≤ lr_min ≤ lr_max"),
    (dict(clip=0.0), ValueError, r"clip must be a finite positive number"),
    (dict(betas=(0.9, 1.5)), ValueError, r"betas must lie in \[0, 1\)"),
    (dict(progress="yes"), TypeError, r"progress must be True or False"),
    (dict(on_step=3), TypeError, r"on_step must be a function or None"),
])
def test_bad_settings_are_refused_in_one_line(kw, err, match):
    args = dict(steps=10, lr_max=0.1, warmup=2, progress=False) | kw
    with pytest.raises(err, match=match) as e:
        T.train_loop(softmax_regression, {"W": np.zeros((D, C)), "b": np.zeros(C)}, [], **args)
    assert "\n" not in str(e.value)
