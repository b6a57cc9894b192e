"""AdamW, the learning-rate schedule and gradient clipping against PyTorch (float64), a table
worked by hand, and the refusals of bad arguments."""
import math

import numpy as np
import pytest
import torch

import transformer as T

SHAPES = {"E": (7, 4), "W_1": (4, 6), "b_1": (6,), "ln_g": (6,), "W_2": (6, 3), "b_2": (3,)}


def random_params(rng, dtype=np.float64):
    return {k: rng.standard_normal(s).astype(dtype) for k, s in SHAPES.items()}


def torch_adamw(params, decayed, lr, betas, eps, weight_decay):
    """torch.optim.AdamW over the same tensors, with a decay group and a no-decay group."""
    tensors = {k: torch.tensor(p.copy(), requires_grad=True) for k, p in params.items()}
    groups = [{"params": [tensors[k] for k in params if k in decayed], "weight_decay": weight_decay},
              {"params": [tensors[k] for k in params if k not in decayed], "weight_decay": 0.0}]
    return tensors, torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


# --- AdamW ----------------------------------------------------------------------------------
@pytest.mark.parametrize("betas,eps,weight_decay,decay", [
    ((0.9, 0.95), 1e-8, 0.1, None),  # the defaults: matrices decayed, vectors not
    ((0.8, 0.999), 1e-6, 0.3, None),
    ((0.9, 0.95), 1e-8, 0.05, lambda name: name in ("W_1", "b_1")),  # a caller's choice, a vector included
    ((0.0, 0.5), 1e-3, 0.0, None),  # β₁ = 0: RMSprop-like; no decay at all
])
def test_adamw_equals_torch_over_30_steps_with_a_changing_lr(betas, eps, weight_decay, decay):
    rng = np.random.default_rng(0)
    params = random_params(rng)
    decayed = {k for k, p in params.items() if (decay(k) if decay else p.ndim >= 2)}
    tensors, opt = torch_adamw(params, decayed, 1e-2, betas, eps, weight_decay)
    state = T.adamw_state(params)
    for t in range(30):
        lr = 0.05 * (1 + math.sin(t))  # changing, 0 included nearly, as a schedule would
        grads = {k: rng.standard_normal(p.shape) * (10.0 if k == "E" else 0.1) for k, p in params.items()}
        T.adamw_step(params, grads, state, lr, betas=betas, eps=eps, weight_decay=weight_decay, decay=decay)
        for g in opt.param_groups:
            g["lr"] = lr
        for k, x in tensors.items():
            x.grad = torch.tensor(grads[k])
        opt.step()
        for k, x in tensors.items():
            np.testing.assert_allclose(params[k], x.detach().numpy(), rtol=1e-6, atol=1e-12, err_msg=f"{k} step {t}")
    for k, x in tensors.items():  # the moments too
        np.testing.assert_allclose(state.m[k], opt.state[x]["exp_avg"].numpy(), rtol=1e-6, atol=1e-14)
        np.testing.assert_allclose(state.v[k], opt.state[x]["exp_avg_sq"].numpy(), rtol=1e-6, atol=1e-14)
    assert state.t == 30 == int(opt.state[tensors["E"]]["step"])


def test_adamw_float32_equals_torch_float32():
    rng = np.random.default_rng(1)
    params = random_params(rng, np.float32)
    tensors, opt = torch_adamw(params, {k for k, p in params.items() if p.ndim >= 2}, 3e-3, (0.9, 0.95), 1e-8, 0.1)
    state = T.adamw_state(params)
    for _ in range(10):
        grads = {k: rng.standard_normal(p.shape).astype(np.float32) for k, p in params.items()}
        T.adamw_step(params, grads, state, 3e-3)
        for k, x in tensors.items():
            x.grad = torch.tensor(grads[k])
        opt.step()
    for k, x in tensors.items():
        assert params[k].dtype == np.float32
        np.testing.assert_allclose(params[k], x.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_adamw_updates_in_place_and_decays_only_matrices_by_default():
    """A zero gradient leaves only the decay: W ← W(1 − ηλ) for matrices, vectors untouched."""
    params = {"W": np.full((2, 2), 2.0), "g": np.full(2, 2.0)}
    W = params["W"]
    T.adamw_step(params, {k: np.zeros_like(p) for k, p in params.items()}, T.adamw_state(params), 0.5,
                 weight_decay=0.1)
    assert params["W"] is W  # the same array, changed in place
    np.testing.assert_array_equal(W, np.full((2, 2), 2.0 * (1 - 0.5 * 0.1)))
    np.testing.assert_array_equal(params["g"], [2.0, 2.0])


def test_adamw_and_clipping_on_every_backend(xp):
    """The same 5 steps on NumPy and on xp (array-api-strict: no call may slip past xp)."""
    rng = np.random.default_rng(4)
    ref = random_params(rng)
    grads = [{k: rng.standard_normal(p.shape) for k, p in ref.items()} for _ in range(5)]
    on_xp = {k: xp.asarray(p.copy()) for k, p in ref.items()}
    s_ref, s_xp = T.adamw_state(ref), T.adamw_state(on_xp)
    for g in grads:
        g_xp = {k: xp.asarray(v.copy()) for k, v in g.items()}
        assert T.clip_by_global_norm(g_xp, 2.0) == pytest.approx(T.clip_by_global_norm(g, 2.0), rel=1e-12)
        T.adamw_step(ref, g, s_ref, 0.01)
        T.adamw_step(on_xp, g_xp, s_xp, 0.01)
    for k in ref:
        np.testing.assert_allclose(T.to_numpy(on_xp[k]), ref[k], rtol=1e-12)


# --- the schedule ---------------------------------------------------------------------------
def torch_schedule(lr_max, warmup, total, lr_min):
    """torch's learning rates for steps 0 … total − 1: LinearLR then CosineAnnealingLR."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr_max)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=lr_min)
    if warmup:
        linear = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, end_factor=1.0,
                                                   total_iters=warmup - 1)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [linear, cosine], milestones=[warmup])
    else:
        sched = cosine
    lrs = []
    for _ in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


@pytest.mark.parametrize("lr_max,warmup,total,lr_min", [
    (1e-3, 10, 100, 0.0), (3e-4, 5, 40, 3e-5), (1.0, 2, 7, 0.1), (0.5, 0, 30, 0.0), (2e-3, 1, 12, 1e-4)])
def test_lr_at_equals_torch_sequential_linear_then_cosine(lr_max, warmup, total, lr_min):
    ours = [T.lr_at(s, lr_max=lr_max, warmup=warmup, total=total, lr_min=lr_min) for s in range(total)]
    np.testing.assert_allclose(ours, torch_schedule(lr_max, warmup, total, lr_min), rtol=1e-12, atol=1e-15)


def test_lr_at_hand_worked_table():
    """warmup 4, total 12, η_max 1, η_min 0.1: warm-up by quarters; cosine over 8 steps, at its
    middle (step 8) η = 0.1 + 0.9·½ = 0.55; at step 6, 0.1 + 0.9·½(1 + cos π/4) = 0.86820…; flat after."""
    lr = lambda s: T.lr_at(s, lr_max=1.0, warmup=4, total=12, lr_min=0.1)
    table = {0: 0.25, 1: 0.5, 2: 0.75, 3: 1.0, 4: 1.0, 6: 0.1 + 0.45 * (1 + math.sqrt(0.5)), 8: 0.55,
             12: 0.1, 13: 0.1, 1000: 0.1}
    for step, want in table.items():
        assert lr(step) == pytest.approx(want, abs=1e-15), step
    assert lr(11) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 7 / 8)), abs=1e-15)


# --- clipping -------------------------------------------------------------------------------
@pytest.mark.parametrize("max_norm", [0.5, 3.0, 1e3])
def test_clip_equals_torch_clip_grad_norm(max_norm):
    rng = np.random.default_rng(2)
    grads = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
    tensors = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in SHAPES.values()]
    for x, g in zip(tensors, grads.values()):
        x.grad = torch.tensor(g.copy())
    want = float(torch.nn.utils.clip_grad_norm_(tensors, max_norm))
    got = T.clip_by_global_norm(grads, max_norm)
    assert got == pytest.approx(want, rel=1e-12)
    for x, g in zip(tensors, grads.values()):
        np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-12)


def test_clip_at_exactly_max_norm_shrinks_by_torchs_epsilon():
    g = {"a": np.array([3.0, 4.0])}  # ‖g‖ = 5
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    x.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    torch.nn.utils.clip_grad_norm_([x], 5.0)
    assert T.clip_by_global_norm(g, 5.0) == 5.0
    np.testing.assert_array_equal(g["a"], x.grad.numpy())  # 5 / (5 + 1e-6) applied, as torch does
    assert g["a"][0] < 3.0


def test_global_norm_by_hand():
    assert T.global_norm({"a": np.array([[1.0, 2.0]]), "b": np.array([2.0]), "c": np.array([4.0])}) == 5.0


@pytest.mark.parametrize("dtype, value", [(np.float16, 300.0), (np.float32, 2e19)])  # g² overflows in its own dtype
def test_global_norm_of_large_finite_gradients_is_finite_as_torchs(dtype, value):
    grads = {"W": np.full((2, 2), value, dtype), "b": np.full(3, -value, dtype)}
    want = float(torch.linalg.vector_norm(torch.cat([torch.from_numpy(g.astype(np.float64)).ravel()
                                                     for g in grads.values()])))
    assert T.global_norm(grads) == pytest.approx(want, rel=1e-12)  # √7 · value, computed in float64 both
    assert T.clip_by_global_norm(grads, 1.0) == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(np.concatenate([g.astype(np.float64).ravel() for g in grads.values()]),
                               np.array([1, 1, 1, 1, -1, -1, -1]) / np.sqrt(7), rtol=2e-3)  # clipped to norm 1


# --- refusals -------------------------------------------------------------------------------
def _step_call(**over):
    params = {"W": np.ones((2, 3)), "b": np.ones(3)}
    args = dict(params=params, grads={k: np.ones_like(p) for k, p in params.items()}, state=T.adamw_state(params),
                lr=0.1)
    args.update(over)
    return lambda: T.adamw_step(args["params"], args["grads"], args["state"], args["lr"],
                                **{k: v for k, v in over.items() if k in ("betas", "eps", "weight_decay", "decay")})


def _float16_step(eps):
    params = {"W": np.ones((2, 3), np.float16)}
    T.adamw_step(params, {"W": np.zeros((2, 3), np.float16)}, T.adamw_state(params), 0.1, eps=eps)


def test_float16_parameters_with_an_eps_they_hold_take_torchs_step():
    """ε = 1e-7 is 1.2e-7 in float16, not 0: a zero gradient moves nothing but the decay, as torch's AdamW
    in float64 on the same values (the default 1e-8 is refused, below)."""
    params = {"W": np.array([[1.0, -2.0, 0.5]], np.float16)}
    g = np.array([[0.25, 0.0, -3.0]], np.float16)
    T.adamw_step(params, {"W": g}, T.adamw_state(params), 0.1, eps=1e-7)
    w = torch.nn.Parameter(torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64))
    w.grad = torch.from_numpy(g.astype(np.float64))
    torch.optim.AdamW([w], lr=0.1, betas=(0.9, 0.95), eps=float(np.float16(1e-7)), weight_decay=0.1).step()
    np.testing.assert_allclose(params["W"].astype(np.float64), w.detach().numpy(), rtol=2 ** -10)  # half a float16 ulp


def _stepped_state(t):
    params = {"W": np.ones((2, 3))}
    state = T.adamw_state(params)
    state.t = t
    T.adamw_step(params, {"W": np.ones((2, 3))}, state, 0.1)


@pytest.mark.parametrize("call,err,match", [
    (_step_call(lr=-0.1), ValueError, r"lr must be ≥ 0, got lr=-0.1"),
    (_step_call(lr=math.nan), ValueError, r"lr must be a finite number"),
    (_step_call(betas=(0.9, 1.0)), ValueError, r"betas must lie in \[0, 1\), got betas=\(0.9, 1.0\)"),
    (_step_call(betas=(-0.1, 0.9)), ValueError, r"betas must lie in \[0, 1\)"),
    (_step_call(betas=0.9), TypeError, r"betas must be a pair"),
    (_step_call(eps=-1e-8), ValueError, r"eps must be ≥ 0"),
    (_step_call(weight_decay=-0.1), ValueError, r"weight_decay must be ≥ 0"),
    (_step_call(decay="W"), TypeError, r"decay must be a function or None"),
    (_step_call(grads={"W": np.ones((2, 3))}), ValueError, r"keys of grads ≠ keys of params: missing \['b'\]"),
    (_step_call(grads={"W": np.ones((2, 3)), "b": np.ones(3), "c": np.ones(1)}), ValueError,
     r"unexpected \['c'\]"),
    (_step_call(grads={"W": np.ones((3, 2)), "b": np.ones(3)}), ValueError,
     r"grads\['W'\] has shape \(3, 2\), params\['W'\] \(2, 3\)"),
    (_step_call(grads={"W": np.ones((2, 3), int), "b": np.ones(3)}), TypeError,
     r"grads\['W'\] must be a floating-point array"),
    (_step_call(state="fresh"), TypeError, r"state must be an AdamWState"),
    (_step_call(eps=0.0), ValueError, r"eps must be > 0: it keeps m̂ / \(√v̂ \+ ε\) finite"),  # 0/0 on a zero gradient
    (lambda: _float16_step(1e-8), ValueError,  # 1e-8 is 0 in float16: 0/0 = NaN on a zero gradient, as torch's
     r"eps=1e-08 is 0 in params\['W'\]'s float16 \(its smallest number is 6e-08\)"),
    (lambda: _stepped_state(-1), ValueError, r"state.t must be an integer ≥ 0, got state.t=-1"),  # ZeroDivisionError
    (lambda: _stepped_state(1.5), ValueError, r"state.t must be an integer ≥ 0, got state.t=1.5"),  # passed
    (lambda: T.adamw_state({}), ValueError, r"params is empty"),
    (lambda: T.adamw_state([np.ones(2)]), TypeError, r"params must be a dict"),
    (lambda: T.lr_at(0, lr_max=-1.0, warmup=1, total=2), ValueError, r"need 0 ≤ lr_min ≤ lr_max"),
    (lambda: T.lr_at(0, lr_max=1.0, warmup=1, total=2, lr_min=2.0), ValueError, r"lr_min=2.0, lr_max=1.0"),
    (lambda: T.lr_at(0, lr_max=1.0, warmup=5, total=2), ValueError, r"total must be ≥ warmup"),
    (lambda: T.lr_at(1.5, lr_max=1.0, warmup=0, total=2), ValueError, r"step must be an integer ≥ 0"),
    (lambda: T.clip_by_global_norm({"a": np.ones(2)}, 0.0), ValueError, r"max_norm must be a finite positive"),
    (lambda: T.clip_by_global_norm({"a": [1.0]}, 1.0), TypeError, r"grads\['a'\] must be an array"),
])
def test_bad_arguments_are_refused_in_one_line(call, err, match):
    with pytest.raises(err, match=match) as e:
        call()
    assert "\n" not in str(e.value)
