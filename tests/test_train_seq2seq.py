"""The trainable encoder–decoder against the same model written in torch (tests/support/torch_seq2seq.py):
logits and the gradient of every weight in float64 with padded sources and ignored targets, at odd
sizes; finite differences on a few weights; the forward against models/encoder_decoder.py's layers;
cached greedy decoding against uncached and against torch's logits; the translation run reaching
95 % held-out exact match, judged by torch decoding the saved checkpoint; and the loader's refusals."""
import json
import math
import zipfile

import numpy as np
import pytest
import torch

import transformer as T
from conftest import asarray
from torch_seq2seq import TorchSeq2Seq

REL = 1e-9  # float64: relative to each array's largest entry


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py: one torch thread


SIZES = {  # odd sizes: d_h = 3, d_ff not a multiple of d, more decoder than encoder layers and the reverse
    "odd": dict(v=13, d=12, h=4, d_ff=10, L_enc=1, L_dec=2, n_max=9),
    "deeper_encoder": dict(v=11, d=10, h=2, d_ff=14, L_enc=2, L_dec=1, n_max=9),
}


def params_of(cfg, seed=0):
    """init_seq2seq's weights, with every γ, β and bias moved off 1 and 0 so that a swap would show."""
    p = T.init_seq2seq(cfg, seed, dtype="float64")
    rng = np.random.default_rng(seed + 1)
    for k, w in p.items():
        if w.ndim == 1:
            p[k] = w + 0.3 * rng.standard_normal(w.shape)
    return p


def batch_of(cfg, b=3, n_src=6, n_tgt=5, seed=2):
    """Sources of lengths n_src, n_src − 2, 1 (PAD = 0 after them); targets with −100 on the padding."""
    rng = np.random.default_rng(seed)
    lengths = np.array([n_src, n_src - 2, 1][:b])
    src = rng.integers(3, cfg.v, (b, n_src))
    src[np.arange(n_src)[None, :] >= lengths[:, None]] = 0
    tgt_in = rng.integers(0, cfg.v, (b, n_tgt))
    tgt_out = rng.integers(0, cfg.v, (b, n_tgt))
    tgt_out[1, 3:] = -100
    tgt_out[2, 1:] = -100
    return T.TranslationBatch(src, lengths, tgt_in, tgt_out)


def assert_rel(ours, ref, what, rel=REL):
    ours, ref = np.asarray(T.to_numpy(ours), np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    err, scale = np.max(np.abs(ours - ref)), np.max(np.abs(ref))
    assert err <= rel * scale, f"{what}: max error {err:.3g} > {rel:g}·{scale:.3g}"


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
def test_logits_loss_and_every_gradient_equal_torch(sizes):
    cfg = T.Seq2SeqConfig(**sizes)
    params = params_of(cfg)
    batch = batch_of(cfg)
    model = TorchSeq2Seq(cfg, params)
    logits_ref, cross_ref = model(batch.src_ids, batch.tgt_in, batch.src_lengths)
    loss_ref = model.loss(*batch)
    loss_ref.backward()

    logits, saved = T.seq2seq_forward(params, batch.src_ids, batch.tgt_in, cfg, batch.src_lengths)
    assert_rel(logits, logits_ref.detach().numpy(), "logits")
    for l in range(cfg.L_dec):  # (b, h, n_tgt, n_src): not square, 0 on every padded source word
        assert_rel(saved["dec"][l]["cross"]["P"], cross_ref[l].detach().numpy(), f"cross-attention of layer {l}")
    assert np.all(saved["dec"][0]["cross"]["P"][2, :, :, 1:] == 0)
    loss, grads = T.seq2seq_loss_and_grads(params, batch, cfg)
    assert loss == pytest.approx(loss_ref.item(), rel=REL)
    assert list(grads) == list(params)
    for k, p in model.named_weights().items():
        assert_rel(grads[k], p.grad.numpy(), f"d{k}")


def test_gradients_against_finite_differences():
    """Central differences of the loss, (L(θ + ε) − L(θ − ε)) / 2ε, on one entry of weights from
    every part of the model: the shared table, the encoder, both attentions and the norms."""
    cfg = T.Seq2SeqConfig(**SIZES["odd"])
    params = params_of(cfg)
    batch = batch_of(cfg)
    _, grads = T.seq2seq_loss_and_grads(params, batch, cfg)
    rng = np.random.default_rng(5)
    eps = 1e-6
    for name in ("W_E", "enc.0.self.W_k", "enc.0.ln1_g", "enc.0.b_1", "dec.0.cross.W_v", "dec.1.cross.W_q",
                 "dec.1.ln3_b", "dec.0.W_2"):
        idx = tuple(int(rng.integers(0, s)) for s in params[name].shape)
        if name == "W_E":
            idx = (int(batch.src_ids[0, 0]), idx[1])  # a row the batch reads
        w = params[name]
        keep = w[idx]
        w[idx] = keep + eps
        up, _ = T.seq2seq_loss_and_grads(params, batch, cfg)
        w[idx] = keep - eps
        down, _ = T.seq2seq_loss_and_grads(params, batch, cfg)
        w[idx] = keep
        fd = (up - down) / (2 * eps)
        assert grads[name][idx] == pytest.approx(fd, rel=1e-5, abs=1e-8), name


def test_forward_equals_the_encoder_decoder_layers_of_models():
    """seq2seq_forward against T.seq2seq_encoder_layer and T.seq2seq_decoder_layer (models/encoder_decoder.py,
    tested against torch.nn's Transformer layers), driven by hand: the weight dict's layers cast into records
    here (not through encoder_decoder_params.py), the embeddings, positions and masks written out."""
    cfg = T.Seq2SeqConfig(**SIZES["deeper_encoder"])
    params = params_of(cfg)
    batch = batch_of(cfg)
    logits, _ = T.seq2seq_forward(params, batch.src_ids, batch.tgt_in, cfg, batch.src_lengths)

    def attn(p, pre):
        return T.AttentionWeights(p[pre + "W_q"], p[pre + "W_k"], p[pre + "W_v"], p[pre + "W_o"])

    def embed(ids):
        return T.embed(ids, params["W_E"]) * math.sqrt(cfg.d) + T.sinusoidal_positions(ids.shape[1], cfg.d,
                                                                                        dtype=np.float64)
    pad = T.padding_mask(batch.src_lengths, batch.src_ids.shape[1])
    x = embed(batch.src_ids)
    for l in range(cfg.L_enc):
        p = {k[len(f"enc.{l}."):]: w for k, w in params.items() if k.startswith(f"enc.{l}.")}
        lw = T.Seq2SeqEncoderLayer(self_attn=attn(p, "self."), W_1=p["W_1"], W_2=p["W_2"], b_1=p["b_1"],
                                   b_2=p["b_2"], ln1_g=p["ln1_g"], ln1_b=p["ln1_b"], ln2_g=p["ln2_g"], ln2_b=p["ln2_b"])
        x, _ = T.seq2seq_encoder_layer(x, lw, cfg.h, mask=pad)
    y = embed(batch.tgt_in)
    for l in range(cfg.L_dec):
        p = {k[len(f"dec.{l}."):]: w for k, w in params.items() if k.startswith(f"dec.{l}.")}
        lw = T.Seq2SeqDecoderLayer(self_attn=attn(p, "self."), cross_attn=attn(p, "cross."), W_1=p["W_1"],
                                   W_2=p["W_2"], b_1=p["b_1"], b_2=p["b_2"], ln1_g=p["ln1_g"], ln1_b=p["ln1_b"],
                                   ln2_g=p["ln2_g"], ln2_b=p["ln2_b"], ln3_g=p["ln3_g"], ln3_b=p["ln3_b"])
        y, _, _ = T.seq2seq_decoder_layer(y, x, lw, cfg.h, cross_mask=pad)
    assert_rel(logits, T.lm_head(y, params["W_E"]), "logits vs models/encoder_decoder.py", rel=1e-12)


def test_padding_words_change_nothing():
    """The ids written after a source's end are hidden by the padding mask: other PAD-slot ids give
    the same logits and the same gradients, bit for bit."""
    cfg = T.Seq2SeqConfig(**SIZES["odd"])
    params = params_of(cfg)
    batch = batch_of(cfg)
    src2 = batch.src_ids.copy()
    src2[np.arange(src2.shape[1])[None, :] >= batch.src_lengths[:, None]] = 7
    loss, grads = T.seq2seq_loss_and_grads(params, batch, cfg)
    loss2, grads2 = T.seq2seq_loss_and_grads(params, batch._replace(src_ids=src2), cfg)
    assert loss == loss2
    for k in grads:
        np.testing.assert_array_equal(grads[k], grads2[k], err_msg=k)


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
def test_cached_greedy_equals_uncached_and_torch(sizes):
    """The cached decoder (self-attention KV cache, cross K/V made once) writes the same tokens and the
    same cross-attention rows as re-running the whole decoder each step; torch's logits, teacher-forced
    on BOS + those tokens, have their argmax at exactly those tokens (until each row's EOS)."""
    cfg = T.Seq2SeqConfig(**sizes)
    params = params_of(cfg, seed=3)
    batch = batch_of(cfg, seed=4)
    max_len = 7
    c_fast, c_slow = {}, {}
    ids, rows = T.translate_greedy(params, cfg, batch.src_ids, batch.src_lengths, max_len, eos=5, counts=c_fast)
    ids_slow, rows_slow = T.translate_greedy_uncached(params, cfg, batch.src_ids, batch.src_lengths, max_len, eos=5,
                                                      counts=c_slow)
    np.testing.assert_array_equal(ids, ids_slow)
    assert_rel(rows, rows_slow, "cross-attention rows", rel=1e-12)
    steps = ids.shape[1]
    assert rows.shape == (cfg.L_dec, 3, cfg.h, steps, batch.src_ids.shape[1])
    assert c_fast == {"encoder": 1, "cross_kv": cfg.L_dec}
    assert c_slow == {"encoder": 1, "cross_kv": cfg.L_dec * steps}

    model = TorchSeq2Seq(cfg, params)
    tgt_in = np.concatenate([np.ones((3, 1), np.int64), ids[:, :-1]], axis=1)  # BOS + the tokens written
    with torch.no_grad():
        logits_ref, cross_ref = model(batch.src_ids, tgt_in, batch.src_lengths)
    pred = logits_ref.argmax(-1).numpy()
    for r in range(3):
        ends = np.flatnonzero(ids[r] == 5)
        n = ends[0] + 1 if ends.size else steps  # after EOS the row writes PAD
        np.testing.assert_array_equal(ids[r, :n], pred[r, :n])
        assert np.all(ids[r, n:] == 0)
        for l in range(cfg.L_dec):
            assert_rel(rows[l, r, :, :n], cross_ref[l][r, :, :n].numpy(), f"row {r}, layer {l}", rel=1e-12)


def test_the_model_runs_the_same_on_other_backends(other_xp):
    """Forward, backward and both greedy decoders on array-api-strict (and CuPy with a GPU) equal NumPy's."""
    cfg = T.Seq2SeqConfig(**SIZES["odd"])
    params = params_of(cfg)
    batch = batch_of(cfg)
    moved = {k: asarray(other_xp, p) for k, p in params.items()}
    batch_x = T.TranslationBatch(*(asarray(other_xp, a) for a in batch))
    loss, grads = T.seq2seq_loss_and_grads(params, batch, cfg)
    loss_x, grads_x = T.seq2seq_loss_and_grads(moved, batch_x, cfg)
    assert loss_x == pytest.approx(loss, rel=1e-12)
    for k in params:
        assert_rel(grads_x[k], grads[k], f"d{k}", 1e-12)
    for decode in (T.translate_greedy, T.translate_greedy_uncached):
        ids, rows = decode(params, cfg, batch.src_ids, batch.src_lengths, 6)
        ids_x, rows_x = decode(moved, cfg, batch_x.src_ids, batch_x.src_lengths, 6)
        np.testing.assert_array_equal(T.to_numpy(ids_x), ids)
        assert_rel(rows_x, rows, decode.__name__, 1e-12)


def torch_greedy(model, src, lengths, max_len):  # the reference decoder: torch, uncached, BOS = 1
    tgt = torch.ones((src.shape[0], 1), dtype=torch.int64)
    with torch.no_grad():
        for _ in range(max_len):
            logits, _ = model(src, tgt, lengths)
            tgt = torch.cat([tgt, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tgt[:, 1:].numpy()


def test_translation_run_reaches_95_percent_heldout_exact_match(tmp_path):
    """The real defaults (train_translation()), seeded; then the saved checkpoint read back and
    judged independently: torch decodes 512 held-out sentences (a batch, padded), which must be the
    source words in reversed order through the dictionary (ka → dog: id + 24), EOS after them."""
    run = T.train_translation(seed=0, out=tmp_path, progress=False)
    params, cfg, vocab = T.load_seq2seq(tmp_path)
    assert cfg == run["cfg"] and cfg.v == 51
    for k in params:
        np.testing.assert_array_equal(params[k], run["params"][k])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert len(metrics["loss"]) == T.DEFAULT_STEPS and metrics["seed"] == 0

    model = TorchSeq2Seq(cfg, {k: np.asarray(w, np.float64) for k, w in params.items()})
    rng = np.random.default_rng(12345)
    sentences = []
    while len(sentences) < 512:
        s = rng.integers(3, 27, rng.integers(4, 13))  # 4 to 12 source words
        if T.is_heldout(s):
            sentences.append(s)
    lengths = np.array([len(s) for s in sentences])
    src = np.zeros((512, 12), dtype=np.int64)  # PAD = 0 after each sentence
    for r, s in enumerate(sentences):
        src[r, :len(s)] = s
    out = torch_greedy(model, torch.as_tensor(src), torch.as_tensor(lengths), 14)
    right = sum(out[r, :len(s) + 1].tolist() == [t + 24 for t in s[::-1]] + [2] for r, s in enumerate(sentences))
    assert right / 512 >= 0.95, f"held-out exact match {right}/512"


def test_training_is_reproducible_from_its_seed():
    a = T.train_translation(steps=3, seed=4, progress=False)
    b = T.train_translation(steps=3, seed=4, progress=False)
    c = T.train_translation(steps=3, seed=5, progress=False)
    assert a["history"]["loss"] == b["history"]["loss"] != c["history"]["loss"]
    for k in a["params"]:
        np.testing.assert_array_equal(a["params"][k], b["params"][k])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("s2s")
    T.train_translation(steps=1, seed=0, out=out, progress=False)
    return out


def rewrite(src, dst, config=None, drop=None):  # a copy of the checkpoint with its config or a weight changed
    dst.mkdir()
    with zipfile.ZipFile(src / "checkpoint.npz") as z:
        arrays = {n[:-4]: np.load(z.open(n)) for n in z.namelist()}
    if config is not None:
        arrays["meta/config"] = np.array(json.dumps(config))
    if drop is not None:
        del arrays[drop]
    np.savez(dst / "checkpoint.npz", **arrays)
    return dst


@pytest.mark.parametrize("change,message", [
    (lambda c: c.update(kind="decoder"), "kind is 'decoder'"),
    (lambda c: c.update(d=32), "has shape"),
    (lambda c: c.update(h=5), "divisible"),
    (lambda c: c.pop("L_dec"), "lacks 'L_dec'"),
    (lambda c: c["vocab"]["tokens"].pop(), "holds 50 tokens"),
    (lambda c: c["vocab"].update(eos=99), "special and first ids"),
], ids=["kind", "shape", "heads", "missing-field", "vocab-size", "vocab-ids"])
def test_load_seq2seq_refuses_a_checkpoint_that_does_not_fit_its_config(checkpoint, tmp_path, change, message):
    _, config = T.load_checkpoint(checkpoint)
    change(config)
    bad = rewrite(checkpoint, tmp_path / "bad", config=config)
    with pytest.raises(ValueError, match=message) as e:
        T.load_seq2seq(bad)
    assert "\n" not in str(e.value)


def test_load_seq2seq_refuses_a_missing_weight(checkpoint, tmp_path):
    bad = rewrite(checkpoint, tmp_path / "bad", drop="params/dec.1.cross.W_k")
    with pytest.raises(ValueError, match="'dec.1.cross.W_k' is missing"):
        T.load_seq2seq(bad)


def test_bad_arguments_are_refused_with_their_value():
    cfg = T.Seq2SeqConfig(**SIZES["odd"])
    params = params_of(cfg)
    b = batch_of(cfg)
    with pytest.raises(ValueError, match="divisible by the number of heads h=5"):
        T.Seq2SeqConfig(**{**SIZES["odd"], "h": 5})
    with pytest.raises(ValueError, match=r"src_lengths must lie in \[1, n_src=6\].*max 7"):
        T.seq2seq_forward(params, b.src_ids, b.tgt_in, cfg, np.array([7, 2, 1]))
    with pytest.raises(ValueError, match="src_lengths must have shape"):
        T.seq2seq_forward(params, b.src_ids, b.tgt_in, cfg, np.array([6, 2]))
    with pytest.raises(ValueError, match=r"tgt_in must lie in \[0, 13\)"):
        T.seq2seq_forward(params, b.src_ids, b.tgt_in + 20, cfg, b.src_lengths)
    with pytest.raises(ValueError, match="max_len=10 exceeds n_max=9"):
        T.translate_greedy(params, cfg, b.src_ids, b.src_lengths, 10)
    with pytest.raises(TypeError, match="batch must be a TranslationBatch"):
        T.seq2seq_loss_and_grads(params, (b.src_ids, b.tgt_in), cfg)
    with pytest.raises(ValueError, match=r"tgt_out must lie in \[0, 13\) or be −100"):
        T.seq2seq_loss_and_grads(params, b._replace(tgt_out=b.tgt_out - 200), cfg)
    with pytest.raises(ValueError, match="steps must be an integer ≥ 1, got steps=0"):
        T.train_translation(steps=0)


def test_the_control_run_without_cross_attention_never_reads_the_source():
    run = T.train_translation(steps=3, seed=0, cross_attention=False, progress=False)
    cfg, params = run["cfg"], run["params"]
    assert all(np.all(params[f"dec.{l}.cross.W_o"] == 0) for l in range(cfg.L_dec))  # cut, and kept cut
    full = T.train_translation(steps=3, seed=0, progress=False)
    assert not np.all(full["params"]["dec.0.cross.W_o"] == T.init_seq2seq(cfg, 0)["dec.0.cross.W_o"])  # it trains
    b = T.translation_batch(np.random.default_rng(1), 4)
    logits, _ = T.seq2seq_forward(params, b.src_ids, b.tgt_in, cfg, b.src_lengths)
    other = b.src_ids.copy()
    other[b.src_ids != 0] = T.translation_vocab().first_source + 3  # another source, same lengths
    logits_other, _ = T.seq2seq_forward(params, other, b.tgt_in, cfg, b.src_lengths)
    np.testing.assert_array_equal(logits, logits_other)  # the source changes nothing
    with pytest.raises(TypeError, match="cross_attention must be True or False"):
        T.train_translation(steps=1, cross_attention="no", progress=False)


@pytest.mark.parametrize("sizes", [dict(v=51, d=16, h=2, d_ff=32, L_enc=2, L_dec=1, n_max=8),
                                   dict(v=7, d=8, h=1, d_ff=5, L_enc=1, L_dec=3, n_max=4)])
def test_the_parameter_count_is_the_numbers_init_seq2seq_draws(sizes):
    """The closed form the memory check uses (a config may ask for 2⁴⁰ weights, which no one lists) against the
    arrays init_seq2seq really makes."""
    cfg = T.Seq2SeqConfig(**sizes)
    assert cfg.parameter_count() == sum(a.size for a in T.init_seq2seq(cfg).values())
