"""all-MiniLM-L6-v2 in NumPy vs sentence-transformers and transformers' BertModel (torch, CPU).

Both references read the same files as our loader. Measured on this model (float32):
sentence embeddings differ from sentence-transformers by at most ~2e-7 per coordinate,
attention weights from BertModel's by ~1e-6, hidden states by ~4e-6.
"""
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is read from the local wheel

import transformer as T  # noqa: E402
from transformer.bert import (BertConfig, l2_normalize, load_minilm,  # noqa: E402
                              mean_pool, minilm_dir)

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
    assert BertConfig.from_dir(minilm_dir()) == cfg


def test_weights_are_transposed_once(model):
    from safetensors.numpy import load_file
    t = load_file(os.path.join(minilm_dir(), "model.safetensors"))
    lw = model.weights.layers[2]
    np.testing.assert_array_equal(lw.attn.W_q, t["encoder.layer.2.attention.self.query.weight"].T)
    assert lw.W_1.shape == (384, 1536) and lw.W_2.shape == (1536, 384)
    assert all(a.dtype == np.float32 for a in (lw.W_1, lw.attn.W_o, model.weights.W_E))


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
