"""`python -m transformer embed` and `attention`: printed cosines vs sentence-transformers,
drawn weights vs the model's own (MiniLM: themselves tested against BertModel in test_bert.py;
SmolLM2: against HF's LlamaForCausalLM on the same GGUF)."""
import os
import re
import sys
import types

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformer  # noqa: E402
from transformer import plotting  # noqa: E402
from transformer.models.bert_files import load_minilm, minilm_dir  # noqa: E402
from transformer.cli.main import main  # noqa: E402

SENTENCE = "The dog chased the squirrel because it was fast"


@pytest.fixture(scope="module")
def model():
    return load_minilm()


@pytest.fixture
def drawn(monkeypatch):
    """Keep the figures the CLI saves, so the test can read back what was drawn."""
    figs = []
    real_save = plotting.save

    def keep(fig, path, **kw):
        figs.append(fig)
        return real_save(fig, path, close=False, **kw)

    monkeypatch.setattr(plotting, "save", keep)
    yield figs
    import matplotlib.pyplot as plt
    for fig in figs:
        plt.close(fig)


def test_embed_prints_reference_cosines(capsys):
    from sentence_transformers import SentenceTransformer
    texts = ["A dog chases a squirrel.", "A puppy runs after a squirrel.", "Stock markets fell sharply."]
    assert main(["embed", *texts]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if re.match(r"\[\d\]\s+-?\d", line)]
    printed = np.array([[float(v) for v in r.split()[1:]] for r in rows])  # (3, 3)
    ref = SentenceTransformer(minilm_dir(), device="cpu").encode(texts)
    np.testing.assert_allclose(printed, ref @ ref.T, atol=6e-4)  # printed with 3 decimals
    assert all(t in out for t in texts)


def test_attention_one_head_draws_the_models_weights(tmp_path, drawn, model, capsys):
    out = tmp_path / "sub" / "it.png"
    assert main(["attention", "--model", "minilm", SENTENCE, "--layer", "2", "--head", "5",
                 "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in data
    ax = drawn[0].axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), model.attention_weights(SENTENCE)[2][5])
    assert [t.get_text() for t in ax.get_xticklabels()] == model.tokens(SENTENCE)
    assert "head 5" in capsys.readouterr().out


def test_attention_grid_and_causal(tmp_path, drawn, model):
    assert main(["attention", SENTENCE, "--layer", "-1", "--causal", "-o", str(tmp_path / "g.png")]) == 0
    panels = [a for a in drawn[0].axes if a.images]
    assert len(panels) == 12  # one panel per head (the colour bar has no image)
    expected = model.attention_weights(SENTENCE, causal=True)[-1]
    for head, ax in enumerate(panels):
        shown = np.asarray(ax.images[0].get_array())
        np.testing.assert_array_equal(shown, expected[head])
        assert np.all(np.triu(shown, 1) == 0)


@pytest.mark.parametrize("argv, message", [
    (["attention", "x", "-o", ""], "-o is empty: give the figure's file name, such as attention.png"),
    (["attention", "x", "--layer", "6"], "layer 6 does not exist"),
    (["attention", "x", "--layer", "-7"], "layer -7 does not exist"),
    (["attention", "x", "--head", "12"], "head 12 does not exist"),
    (["attention", "", "--head", "0"], "non-empty text"),
    (["attention", "   ", "--head", "0"], "non-empty text"),  # spaces alone, as embed refuses them
    (["attention", "x", "--model", "smollm2", "--causal"], "always causal"),
    (["embed", "x", "--path", "/no/such/folder"], "not found"),
])
def test_bad_arguments_give_a_clear_error(tmp_path, argv, message, capsys):
    assert main([*argv, *(["-o", str(tmp_path / "x.png")] if argv[0] == "attention" and "-o" not in argv else [])]) == 2
    assert message in capsys.readouterr().err


def test_smollm2_uses_the_decoders_api(tmp_path, drawn, monkeypatch):
    """The plumbing for --model smollm2, with a stand-in decoder of 2 layers, 3 heads."""
    ids = [7, 8, 9]
    rng = np.random.default_rng(0)
    maps = [np.tril(rng.random((3, 3, 3))).astype(np.float32) for _ in range(2)]
    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(L=2, h=3, n_ctx=8192),
        attention_weights=lambda ids, layer=None, head=None: maps[layer] if head is None else maps[layer][head],
        encode=lambda text: ids,  # the model's encode, which attention tokenizes through
        tokenizer=types.SimpleNamespace(encode=lambda text: ids, decode=lambda i: {7: "The", 8: " dog", 9: " ran"}[i[0]]))
    monkeypatch.setattr(transformer.models.llama_gguf, "load_smollm2", lambda path, backend="numpy": fake)
    assert main(["attention", "--model", "smollm2", "The dog ran", "--layer", "1", "--head", "2",
                 "-o", str(tmp_path / "s.png")]) == 0
    ax = drawn[0].axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), maps[1][2])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["The", "␣dog", "␣ran"]


@pytest.mark.parametrize("layer,head", [(-1, 0), (3, 7)])
def test_smollm2_real_model_draws_hf_attention(tmp_path, drawn, hf_smollm2, layer, head):
    """The drawn weights against HF transformers' LlamaForCausalLM reading the same GGUF
    (eager attention, output_attentions=True), fed the ids of SmolLM2's tokenizer."""
    import torch
    from transformer.models.llama_gguf import open_gguf, read_tokenizer, smollm2_path

    text = "The dog chased the squirrel because it"
    assert main(["attention", "--model", "smollm2", text, "--layer", str(layer), "--head", str(head),
                 "-o", str(tmp_path / "s.png")]) == 0
    ax = drawn[0].axes[0]
    w = np.asarray(ax.images[0].get_array())
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "".join(labels).replace("␣", " ") == text  # the labels spell the text back
    ids = read_tokenizer(open_gguf(smollm2_path())).encode(text)
    with torch.no_grad():
        ref = hf_smollm2(torch.tensor([ids]), output_attentions=True).attentions[layer][0, head].numpy()
    assert w.shape == ref.shape == (len(labels), len(labels))
    np.testing.assert_allclose(w, ref, atol=1e-5)  # probabilities in float32 through up to 30 layers
    assert np.all(np.triu(w, 1) == 0)  # a decoder: causal, exactly


def stand_in_decoder():  # 4 layers of 9 heads, a byte-level tokenizer: one token a character
    from transformer.models import llama as L
    from transformer.models.llama_random import random_llama
    from transformer.tokenizers.bpe import BPETokenizer, bytes_to_unicode

    m = random_llama(L.LlamaConfig(L=4, d=32, h=9, h_kv=3, d_h=8, d_ff=48, v=256, n_ctx=1024))
    m.tokenizer = BPETokenizer(tokens=[bytes_to_unicode()[b] for b in range(256)], merges=[])
    return m


def test_attention_memory_is_counted_and_checked_before_any_layer(tmp_path, monkeypatch, capsys):
    """The count, 5 arrays of h·n² float32 and the n² mask, against tracemalloc's peak of the layers it runs (400
    tokens: 29 MB counted, 24 MB measured); over the memory available, one line before any layer runs."""
    import tracemalloc

    import transformer.cli.memory
    from transformer.models import llama_gguf

    m, n = stand_in_decoder(), 400
    tracemalloc.start()
    m.attention_weights("ab" * (n // 2), layer=2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    need = 5 * 9 * n * n * 4 + n * n
    assert 0.6 * need < peak <= need, (peak, need)
    monkeypatch.setattr(llama_gguf, "load_smollm2", lambda path=None, backend="numpy": m)
    monkeypatch.setattr(m, "attention_weights", lambda *a, **k: pytest.fail("a layer ran"))
    monkeypatch.setattr(transformer.cli.memory, "available_bytes", lambda: need - 1)
    assert main(["attention", "--model", "smollm2", "ab" * (n // 2), "-o", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: the text is 400 tokens: its attention needs about 29.0 MB (5 arrays of h·n² = 9·400² "
                   f"floats), over the memory available (29.0 MB): shorten the text\n"), err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_attention_on_a_long_text_stays_bounded(tmp_path):
    """400 tokens (a byte-level stand-in decoder, 9 heads): once, the grid of all heads needed GBs
    (the figure grew with n² pixels). Now the PNG is at most MAX_FIGURE_INCHES · DPI pixels a side
    (bbox_inches="tight" trims it, or widens it by the labels, within 5 %), the whole process peaks
    under 1 GB (its VmHWM, in a process of its own so that no earlier test counts), and past
    --max-tokens the text is refused in one line."""
    import struct
    import subprocess
    script = f"""
from transformer.models import llama as L, llama_gguf
from transformer.tokenizers.bpe import BPETokenizer, bytes_to_unicode
from transformer.models.llama_random import random_llama
m = random_llama(L.LlamaConfig(L=4, d=32, h=9, h_kv=3, d_h=8, d_ff=48, v=256, n_ctx=1024))
m.tokenizer = BPETokenizer(tokens=[bytes_to_unicode()[b] for b in range(256)], merges=[])
llama_gguf.load_smollm2 = lambda path=None, backend="numpy": m
from transformer.cli.main import main
assert main(["attention", "--model", "smollm2", "ab" * 200, "--layer", "2", "-o", {str(tmp_path / 'g.png')!r}]) == 0
assert main(["attention", "--model", "smollm2", "ab" * 300, "-o", {str(tmp_path / 'x.png')!r}]) == 2
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert run.returncode == 0, run.stderr
    assert "600 tokens, over the limit of --max-tokens 512" in run.stderr
    assert int(run.stdout.split()[-1]) * 1024 < 1e9  # VmHWM, in kB (ru_maxrss would carry pytest's own peak
    # across fork and exec)
    width, height = struct.unpack(">II", (tmp_path / "g.png").read_bytes()[16:24])  # the PNG's IHDR
    cap = plotting.MAX_FIGURE_INCHES * plotting.DPI
    assert 1000 < width <= 1.05 * cap and 1000 < height <= 1.05 * cap, (width, height)  # 5 %: the tight box


def test_a_long_sentence_is_listed_cut_with_its_length():
    """embed lists each sentence above its table: a 130,000-character one was echoed whole."""
    from transformer.cli.encode import similarity_table

    lines = similarity_table(["a dog", "ab" * 65_000], np.eye(2)).splitlines()
    assert lines[:2] == ["[0] a dog", "[1] " + "ab" * 50 + "… (130,000 characters)"]


ELEVEN = ["A dog chases a squirrel.", "A puppy runs after a squirrel.", "Stock markets fell sharply.",
          "Shares dropped today.", "The cat sleeps.", "A kitten naps on the sofa.", "I love pizza.",
          "Pasta is my favourite food.", "It is raining.", "The weather is wet.", "Bonds rallied."]


def test_embed_past_ten_sentences_lists_each_ones_nearest(capsys):
    """Past MAX_TABLE = 10 sentences the b × b matrix (3,000 sentences: 24,006-character lines) gives way to
    each sentence's 3 closest others, checked against sentence-transformers' cosines; 10 still get the matrix."""
    from sentence_transformers import SentenceTransformer

    assert main(["embed", *ELEVEN]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:11] == [f"[{i}] {t}" for i, t in enumerate(ELEVEN)] and lines[11] == ""
    assert lines[12] == ("nearest sentences by cosine similarity, 3 for each (over 10 sentences: the whole 11 × 11 "
                         "matrix would be too wide to read)")
    ref = SentenceTransformer(minilm_dir(), device="cpu").encode(ELEVEN)
    s = ref @ ref.T
    np.fill_diagonal(s, -np.inf)
    for i, line in enumerate(lines[13:]):
        cells = re.findall(r"\[(\d+)\]\s+(-?\d\.\d{3})", line)
        assert line.startswith(f"[{i}] ") and [int(j) for j, _ in cells] == list(np.argsort(-s[i])[:3]), line
        np.testing.assert_allclose([float(c) for _, c in cells], np.sort(s[i])[::-1][:3], atol=6e-4)
    assert len(lines) == 13 + 11
    assert main(["embed", *ELEVEN[:10]]) == 0
    assert "cosine similarity\n" + " " * 5 + "".join(f"{f'[{j}]':>8}" for j in range(10)) in capsys.readouterr().out


@pytest.mark.parametrize("b,k,pass_floats", [(50, 3, 7 * 50), (50, 3, 10 ** 6), (3, 3, 10), (40, 39, 3 * 40)])
def test_nearest_others_is_the_sorted_full_matrix(b, k, pass_floats):
    """Against the whole (b, b) matrix sorted row by row (its own entry left out): passes of 7 rows that do not
    divide 50, one pass, k ≥ b − 1. Small integer rows make every dot product exact (a pass's BLAS sums as the
    whole matrix's do) and ties frequent: of rows tied at the cut any may be kept, so the ids are checked by the
    products they stand for, and the ties above the cut by index."""
    from transformer.cli.encode import nearest_others

    e = np.random.default_rng(0).integers(-2, 3, (b, 4)).astype(np.float64)
    ids, sims = nearest_others(e, k, pass_floats)
    s = e @ e.T
    np.fill_diagonal(s, -np.inf)
    want = np.argsort(-s, axis=1, kind="stable")[:, :min(k, b - 1)]  # ties by index
    np.testing.assert_array_equal(sims, np.take_along_axis(s, want, axis=1))
    np.testing.assert_array_equal(np.take_along_axis(s, ids, axis=1), sims)  # each id has the cosine printed
    assert all(len(set(row)) == len(row) and i not in row for i, row in enumerate(ids.tolist()))
    whole = sims[:, :-1] != sims[:, -1:]  # [b, k − 1]: above the cut, where the ties are all kept
    np.testing.assert_array_equal(ids[:, :-1][whole], want[:, :-1][whole])


def test_nearest_others_holds_a_pass_not_the_matrix():
    """2,000 sentences: the whole matrix is 2,000² float32 = 16 MB; passes of 50,000 similarities hold about 1 MB."""
    import tracemalloc
    from transformer.cli.encode import nearest_others

    e = np.random.default_rng(0).standard_normal((2000, 384)).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    tracemalloc.start()
    nearest_others(e, 3, pass_floats=50_000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2000 ** 2 * 4 / 4, peak
