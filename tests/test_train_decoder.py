"""The tiny trainable decoder against the same model written in torch (tests/support/torch_tiny.py): logits
and the gradient of every weight in float64, with GQA and MQA, padding, packed rows; the tiled
attention against the plain one; the activation-memory formula against the saved arrays' bytes;
cached greedy decoding against uncached; and 20 training steps against torch's AdamW."""
import numpy as np
import pytest
import torch

import transformer as T
from conftest import asarray
from torch_tiny import TorchTinyDecoder

REL = 1e-9  # float64: relative to each array's largest entry


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py: one torch thread


def cfg_of(h_kv=2, tied=True, **kw):
    base = dict(v=23, d=24, h=6, h_kv=h_kv, L=2, d_ff=20, n_max=16, rope_base=100.0, eps=1e-5, tied=tied)
    return T.DecoderConfig(**{**base, **kw})


def params_of(cfg, seed=0, spread=10.0):
    """GPT-2's init times `spread`: 0.02 would leave near-uniform logits and tiny gradients, a weak test."""
    p = T.init_decoder(cfg, seed, dtype="float64")
    return {k: w if "norm" in k else w * spread for k, w in p.items()}


def tokens(cfg, b, n, seed=1):
    return np.random.default_rng(seed).integers(0, cfg.v, (b, n))


def assert_rel(ours, ref, what, rel=REL):
    ours, ref = np.asarray(T.to_numpy(ours), np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    err, scale = np.max(np.abs(ours - ref)), np.max(np.abs(ref))
    assert err <= rel * scale, f"{what}: max error {err:.3g} > {rel:g}·{scale:.3g}"


def torch_loss_and_grads(cfg, params, ids, targets, attention=None, **kw):  # torch's attention is torch's
    model = TorchTinyDecoder(cfg, params)
    logits = model(ids, **kw)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.v), torch.as_tensor(targets).reshape(-1),
                                             ignore_index=-100)
    loss.backward()
    return logits.detach().numpy(), loss.item(), {k: p.grad.numpy() for k, p in model.named_weights().items()}


def compare_with_torch(cfg, params, ids, targets, keep=None, **kw):
    logits_ref, loss_ref, grads_ref = torch_loss_and_grads(cfg, params, ids, targets, **kw)
    logits, _ = T.decoder_forward(params, ids, cfg, **kw)
    keep = np.ones(ids.shape, bool) if keep is None else keep
    assert_rel(logits[keep], logits_ref[keep], "logits")
    loss, grads = T.decoder_loss_and_grads(params, ids, targets, cfg, **kw)
    assert loss == pytest.approx(loss_ref, rel=REL)
    assert list(grads) == list(params)
    for k in params:
        assert_rel(grads[k], grads_ref[k], f"d{k}")


@pytest.mark.parametrize("h_kv,tied", [(6, True), (2, True), (1, True), (3, False)], ids=["mha", "gqa", "mqa", "untied"])
def test_logits_and_every_gradient_equal_torch(h_kv, tied):
    cfg = cfg_of(h_kv, tied)
    params = params_of(cfg)
    ids = tokens(cfg, 3, 9)
    targets = np.roll(ids, -1, axis=1)
    targets[:, -1] = -100
    targets[1, 5:] = -100  # a right-padded row: ignore_index from position 5 on
    compare_with_torch(cfg, params, ids, targets)


@pytest.mark.parametrize("attention", ["plain", "tiled"])
def test_packed_rows_with_document_mask_and_restarted_positions_equal_torch(attention):
    cfg = cfg_of(2)
    params = params_of(cfg)
    rng = np.random.default_rng(4)
    docs = [rng.integers(0, cfg.v, k).tolist() for k in (4, 7, 3, 2, 5, 6)]
    packed = T.pack_documents(docs, 11)  # rows of 11, the last partly padding (doc = -1)
    ids, doc, pos = packed.ids, packed.doc, packed.positions
    targets = np.where((doc[:, 1:] == doc[:, :-1]) & (doc[:, :-1] >= 0), ids[:, 1:], -100)  # next token, same doc
    targets = np.concatenate([targets, np.full((ids.shape[0], 1), -100)], axis=1)
    assert (doc < 0).any() and len(set(doc[0].tolist())) > 1  # padding, and several documents in a row
    compare_with_torch(cfg, params, ids, targets, keep=doc >= 0, positions=pos, doc_ids=doc, attention=attention)


@pytest.mark.parametrize("h_kv", [6, 2, 1])
@pytest.mark.parametrize("packed", [False, True])
def test_tiled_attention_equals_plain(h_kv, packed):
    """Tiles of 3 × 2 (neither divides n = 13): the same logits, loss and gradients."""
    cfg = cfg_of(h_kv)
    params = params_of(cfg, seed=2)
    ids = tokens(cfg, 2, 13, seed=3)
    targets = np.roll(ids, -1, axis=1)
    kw = {}
    if packed:
        doc = np.array([[0] * 5 + [1] * 6 + [-1] * 2, [2] * 13])
        pos = np.array([list(range(5)) + list(range(6)) + [0, 0], list(range(13))])
        kw = dict(doc_ids=doc, positions=pos)
    plain = T.decoder_forward(params, ids, cfg, **kw)[0]
    tiled = T.decoder_forward(params, ids, cfg, attention="tiled", block_q=3, block_k=2, **kw)[0]
    assert_rel(tiled, plain, "logits", 1e-12)
    lp, gp = T.decoder_loss_and_grads(params, ids, targets, cfg, **kw)
    lt, gt = T.decoder_loss_and_grads(params, ids, targets, cfg, attention="tiled", block_q=3, block_k=2, **kw)
    assert lt == pytest.approx(lp, rel=1e-12)
    for k in params:
        assert_rel(gt[k], gp[k], f"d{k}", 1e-11)


@pytest.mark.parametrize("attention", ["plain", "tiled"])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("dtype,itemsize", [("float32", 4), ("float64", 8)])
def test_activation_bytes_formula_equals_the_saved_arrays(attention, packed, dtype, itemsize):
    cfg = cfg_of(2, L=3)
    params = T.init_decoder(cfg, 0, dtype=dtype)
    b, n = 2, 10
    kw = dict(doc_ids=np.array([[0] * 4 + [1] * 6, [3] * 7 + [-1] * 3])) if packed else {}
    _, saved = T.decoder_forward(params, tokens(cfg, b, n), cfg, attention=attention, **kw)
    measured = sum(int(a.nbytes) for a in saved.values())
    assert T.activation_bytes(cfg, b, n, attention=attention, packed=packed, itemsize=itemsize) == measured


def test_tiled_backward_keeps_no_n_by_n_array():
    cfg = cfg_of(2)
    n = 16
    _, saved = T.decoder_forward(T.init_decoder(cfg), tokens(cfg, 1, n), cfg, attention="tiled")
    assert not any(a.ndim >= 2 and a.shape[-2:] == (n, n) for a in saved.values())
    plain, tiled = (T.activation_bytes(cfg, 1, n, attention=a) for a in ("plain", "tiled"))
    assert plain - tiled == cfg.L * cfg.h * (n * n - n) * 4  # exactly the weights P, less the lse


def test_cached_greedy_equals_uncached_argmax():
    cfg = cfg_of(2, n_max=14)
    params = params_of(cfg, seed=5)
    prompt = tokens(cfg, 2, 4, seed=6)
    cached = T.greedy_generate(params, cfg, prompt, 9)
    seq = prompt
    for _ in range(9):  # uncached: the whole sequence again at every step
        logits, _ = T.decoder_forward(params, seq, cfg)
        seq = np.concatenate([seq, logits[:, -1].argmax(-1)[:, None]], axis=1)
    np.testing.assert_array_equal(cached, seq)
    assert len(set(seq[:, 4:].ravel().tolist())) > 1  # not one token over and over: a real comparison


@pytest.mark.parametrize("h_kv, tied", [(6, True), (2, False), (1, True)])
def test_a_trained_decoder_as_a_llama_equals_torch(h_kv, tied):
    """llama_from_params: the weight dict read into SmolLM2's Llama (RoPE columns reordered to the
    interleaved layout) gives torch's logits at every position, and generates through the Llama's loop:
    its fast engine (float32 on NumPy) picks torch's argmax at every step."""
    cfg = cfg_of(h_kv, tied)
    params = params_of(cfg, seed=3)
    ids = tokens(cfg, 1, 11, seed=4)
    ref = TorchTinyDecoder(cfg, params)(ids).detach().numpy()  # [1, n, v]
    model = T.llama_from_params(params, cfg)
    assert_rel(model.logits(ids[0]), ref[0], "logits of the Llama", rel=1e-6)  # its RoPE tables are float32
    f32 = T.llama_from_params({k: w.astype(np.float32) for k, w in params.items()}, cfg)
    new = f32.generate(ids[0, :4], max_new_tokens=6, stop_at_eos=False)
    assert f32.last_stats.engine == "fast"
    seq = list(ids[0, :4])
    with torch.no_grad():
        for _ in range(6):
            seq.append(int(TorchTinyDecoder(cfg, params)(np.asarray([seq])).argmax(-1)[0, -1]))
    assert new == seq[4:]


def test_whole_model_gradient_equals_finite_differences():
    cfg = cfg_of(2, L=1)
    params = params_of(cfg, seed=7)
    ids = tokens(cfg, 2, 6, seed=8)
    targets = np.roll(ids, -1, axis=1)
    _, grads = T.decoder_loss_and_grads(params, ids, targets, cfg)
    rng, eps = np.random.default_rng(9), 1e-6
    for _ in range(3):
        u = {k: rng.standard_normal(p.shape) for k, p in params.items()}
        plus = T.decoder_loss_and_grads({k: p + eps * u[k] for k, p in params.items()}, ids, targets, cfg)[0]
        minus = T.decoder_loss_and_grads({k: p - eps * u[k] for k, p in params.items()}, ids, targets, cfg)[0]
        exact = sum(float(np.sum(grads[k] * u[k])) for k in params)
        assert (plus - minus) / (2 * eps) == pytest.approx(exact, rel=1e-6, abs=1e-8)


def test_decoder_runs_the_same_on_other_backends(other_xp):
    cfg = cfg_of(2)
    params = params_of(cfg, seed=10)
    ids, doc = tokens(cfg, 2, 7), np.array([[0, 0, 0, 1, 1, 1, 1], [0] * 5 + [-1] * 2])
    targets = np.roll(ids, -1, axis=1)
    moved = {k: asarray(other_xp, p) for k, p in params.items()}
    for attention in ("plain", "tiled"):
        kw = dict(doc_ids=doc, attention=attention, block_q=3, block_k=2)
        loss, grads = T.decoder_loss_and_grads(params, ids, targets, cfg, **kw)
        loss_x, grads_x = T.decoder_loss_and_grads(moved, asarray(other_xp, ids), asarray(other_xp, targets), cfg,
                                                   **{**kw, "doc_ids": asarray(other_xp, doc)})
        assert loss_x == pytest.approx(loss, rel=1e-12)
        for k in params:
            assert_rel(grads_x[k], grads[k], f"d{k}", 1e-12)


def test_init_follows_gpt2():
    cfg = cfg_of(2, L=8, d=48, d_ff=64, v=200)
    p = T.init_decoder(cfg, 3)
    assert all(w.dtype == np.float32 for w in p.values())
    assert list(p)[:3] == ["W_E", "layers.0.norm1", "layers.0.W_q"] and list(p)[-1] == "norm"
    assert (p["layers.0.norm1"] == 1).all()
    assert np.std(p["W_E"]) == pytest.approx(0.02, rel=0.05)
    assert np.std(np.stack([p[f"layers.{l}.W_down"] for l in range(8)])) == pytest.approx(0.02 / 4, rel=0.05)
    np.testing.assert_array_equal(T.init_decoder(cfg, 3)["layers.7.W_o"], p["layers.7.W_o"])  # seeded


@pytest.mark.parametrize("call,err,match", [
    (lambda c, p: T.decoder_forward(p, np.array([[1, 23]]), c), ValueError, r"ids must lie in \[0, 23\)"),
    (lambda c, p: T.decoder_forward(p, np.zeros((1, 17), int), c), ValueError, r"1 ≤ n ≤ n_max=16"),
    (lambda c, p: T.decoder_forward(p, np.zeros((2, 3), int), c, positions=np.zeros((1, 3), int)), ValueError,
     r"positions must have the shape of ids \(2, 3\), got \(1, 3\)"),
    (lambda c, p: T.decoder_forward(p, np.zeros((1, 3), int), c, attention="flash"), ValueError,
     r"attention must be 'plain' or 'tiled'"),
    (lambda c, p: T.decoder_forward({**p, "layers.1.W_k": p["layers.1.W_q"]}, np.zeros((1, 3), int), c), ValueError,
     r"params\['layers.1.W_k'\] must have shape \(24, 8\), got \(24, 24\)"),
    (lambda c, p: T.DecoderConfig(v=5, d=24, h=6, h_kv=4, L=1, d_ff=4, n_max=8), ValueError,
     r"query heads h=6 must be a multiple of key/value heads h_kv=4"),
    (lambda c, p: T.greedy_generate(p, c, np.zeros((1, 10), int), 7), ValueError, r"exceeds n_max=16"),
])
def test_bad_input_is_refused_in_one_line(call, err, match):
    cfg = cfg_of(2)
    with pytest.raises(err, match=match):
        call(cfg, T.init_decoder(cfg))


# --- 20 training steps against torch -----------------------------------------------------------

def counting_batch(cfg, step, b=4, n=12):  # tokens that count up by 1 (mod v) from a random start
    start = np.random.default_rng(100 + step).integers(0, cfg.v, (b, 1))
    tok = (start + np.arange(n + 1)) % cfg.v
    return tok[:, :-1], tok[:, 1:]


def test_training_trajectory_equals_torch_adamw():
    """20 steps of our decoder + adamw_step + clip_by_global_norm + lr_at against torch's model,
    torch.optim.AdamW (decay on matrices only), clip_grad_norm_ and LambdaLR: the same loss at every step."""
    cfg = cfg_of(2, v=32, d=16, h=4, L=2, d_ff=24)
    params = T.init_decoder(cfg, 0)  # float32 on both sides
    sched = dict(lr_max=1e-2, warmup=5, total=20)
    model = TorchTinyDecoder(cfg, params, dtype=torch.float32)
    named = model.named_weights()
    opt = torch.optim.AdamW([{"params": [p for p in named.values() if p.ndim >= 2], "weight_decay": 0.1},
                             {"params": [p for p in named.values() if p.ndim < 2], "weight_decay": 0.0}],
                            lr=sched["lr_max"], betas=(0.9, 0.95), eps=1e-8)
    lr_sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: T.lr_at(s, **sched) / sched["lr_max"])
    state = T.adamw_state(params)
    ours, theirs = [], []
    for step in range(20):
        ids, targets = counting_batch(cfg, step)
        loss, grads = T.decoder_loss_and_grads(params, ids, targets, cfg)
        T.clip_by_global_norm(grads, 1.0)
        T.adamw_step(params, grads, state, T.lr_at(step, **sched), betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
        ours.append(loss)
        opt.zero_grad()
        tl = model.loss(ids, targets)
        tl.backward()
        torch.nn.utils.clip_grad_norm_(named.values(), 1.0)
        opt.step()
        lr_sched.step()
        theirs.append(tl.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    assert ours[-1] < 0.8 * ours[0]  # it learned something: the trajectory is not flat
