"""`python -m transformer train induction|translate` and `generate --checkpoint DIR`.

The trained induction decoder must continue a repeated sequence as the task defines it (written
out here); its printed held-out accuracy must be the one torch computes from the checkpoint's
weights; the translation model's output must be `translate_greedy`'s, detokenized; every bad
argument and a corrupt checkpoint give one line, "error: …", and exit 2 — before any training."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import transformer as T
from transformer.cli.main import main
from torch_tiny import TorchTinyDecoder

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error_line(rc, out, err, match):
    assert rc == 2 and out == "", (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert match in lines[0], lines[0]


STEPS = 40  # a short run through the command line; the default run is conftest.py's default_induction_run


@pytest.fixture(scope="module")
def induction_dir(tmp_path_factory):
    """A short induction run through the command line (a subprocess, as a user runs it)."""
    out = tmp_path_factory.mktemp("cli") / "induction"
    env = dict(os.environ, TQDM_DISABLE="1")
    res = subprocess.run([sys.executable, "-m", "transformer", "train", "induction", "--steps", str(STEPS),
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return out, res.stdout


def test_train_induction_writes_its_files_and_ends_with_the_accuracy(induction_dir):
    out, stdout = induction_dir
    assert (out / "checkpoint.npz").is_file() and (out / "metrics.json").is_file()
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("held-out accuracy: ")
    printed = float(last.split(": ")[1].split("%")[0]) / 100
    params, cfg, _ = T.load_decoder(out)
    # the printed number against torch's greedy accuracy on the same held-out documents (seed 0 + 10 000)
    docs = T.induction_documents(np.random.default_rng(T.HELDOUT_SEED_OFFSET), 256, cfg.v, (4, 16), split="heldout")
    model = TorchTinyDecoder(cfg, {k: np.asarray(w, np.float64) for k, w in params.items()})
    right = total = 0
    with torch.no_grad():
        for d in docs:
            m = len(d) // 2
            pred = model(np.asarray(d)[None]).argmax(-1).numpy()[0]
            right += int((pred[m:-1] == d[m + 1:]).sum())
            total += m - 1
    assert abs(printed - right / total) < 6e-5  # (the default run's ≥ 99 %: test_train_induction.py)
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["loss"]) == metrics["steps"] == STEPS


def test_generate_continues_a_repeated_sequence(default_induction_run, capsys):
    out, _ = default_induction_run
    first = [3, 17, 5, 9, 11, 26, 30, 2]
    prompt = first + first[:2]
    rc, stdout, _ = run_cli(capsys, "generate", "--checkpoint", out, " ".join(map(str, prompt)),
                            "--max-new-tokens", 6)
    assert rc == 0
    given, new = stdout.strip().split(" | ")
    assert given.split() == [str(t) for t in prompt]
    assert [int(t) for t in new.split()] == first[2:]  # the rest of the copy: induction


def test_generate_defaults_to_filling_n_max(induction_dir, capsys):
    out, _ = induction_dir
    rc, stdout, _ = run_cli(capsys, "generate", "--checkpoint", out, "3,17,5")
    assert rc == 0 and len(stdout.replace("|", " ").split()) == T.induction_config().n_max


def test_train_translate_and_translate_a_sentence(tmp_path, capsys):
    out = tmp_path / "translate"
    rc, stdout, _ = run_cli(capsys, "train", "translate", "--steps", 3, "--seed", 2, "--out", out)
    assert rc == 0 and stdout.strip().splitlines()[-1].startswith("held-out accuracy: ")
    assert (out / "checkpoint.npz").is_file() and (out / "metrics.json").is_file()
    rc, stdout, _ = run_cli(capsys, "generate", "--checkpoint", out, "ka lu mi")
    assert rc == 0
    params, cfg, vocab = T.load_seq2seq(out)
    src = np.array([[vocab.id_of(w) for w in ("ka", "lu", "mi")]])
    ids, _ = T.translate_greedy(params, cfg, src, np.array([3]), cfg.n_max, bos=vocab.bos, eos=vocab.eos,
                                pad=vocab.pad)
    assert stdout.strip() == T.detokenize(np.asarray(ids)[0], vocab)
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", out, "ka lu", "--max-new-tokens", 0),
                   "a translation takes at least one step")
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", out, "ka 3"),
                   "'3' is not a word of the source language")
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", out, "ka " + "z" * 100_000),
                   "'zzzzzzzzzzzzzzzzzzzz…' is not a word of the source language")  # the whole word was quoted
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", out, "ka lu", "--temperature", "0.7"),
                   "--temperature: the translation model decodes greedily")


def test_train_without_out_saves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, stdout, _ = run_cli(capsys, "train", "induction", "--steps", 2)
    assert rc == 0 and "nothing saved" in stdout and list(tmp_path.iterdir()) == []
    assert stdout.strip().splitlines()[-1].startswith("held-out accuracy: ")


def test_train_with_two_workers_gives_one_workers_loss(capsys):
    """--workers 2 splits each batch over two threads: the printed final loss is one thread's."""
    from transformer.cli.train import usable_cores

    if usable_cores() < 2:
        pytest.skip("--workers 2 needs two cores this process may use")
    losses = []
    for workers in ("1", "2"):
        rc, stdout, _ = run_cli(capsys, "train", "induction", "--steps", 3, "--workers", workers)
        assert rc == 0
        losses.append(float(stdout.split("final loss ")[1].split()[0]))
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)


@pytest.mark.parametrize("argv, match", [
    (["train", "induction", "--steps", "0"], "--steps must be an integer from 1 to 100,000, got 0"),
    (["train", "induction", "--steps", "-5"], "--steps must be an integer from 1 to 100,000, got -5"),
    (["train", "induction", "--seed", "-1"], "--seed must be an integer ≥ 0, got -1"),
    (["train", "translate", "--packed"], "--packed applies to the induction task only"),
    (["train", "induction", "--workers", "0"], "--workers must be an integer from 1 to"),
    (["train", "translate", "--workers", "2"], "--workers applies to the induction task only"),
    (["train", "induction", "--out", ""], "--out must name a folder"),
])
def test_bad_train_options_are_one_line(argv, match, capsys):
    t0 = time.perf_counter()
    one_error_line(*run_cli(capsys, *argv), match)
    assert time.perf_counter() - t0 < 5  # refused before any training


def test_steps_and_workers_have_an_upper_bound(capsys, monkeypatch):
    """--steps past MAX_STEPS ran for ever, its history growing every step; --workers past the cores this
    process may use (its affinity mask, as `taskset` sets it) only waited for a core: both refused at once."""
    from transformer.cli import train as cli_train

    t0 = time.perf_counter()
    rc, out, err = run_cli(capsys, "train", "induction", "--steps", 99999999999999999999)
    assert (rc, out, err) == (2, "", "error: --steps must be an integer from 1 to 100,000, got 99999999999999999999\n")
    rc, out, err = run_cli(capsys, "train", "induction", "--steps", 10 ** 40)
    assert err == "error: --steps must be an integer from 1 to 100,000, got a number of 41 digits\n"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cli_train.usable_cores() == cores
    rc, out, err = run_cli(capsys, "train", "induction", "--workers", 100000)
    assert (rc, out, err) == (2, "", f"error: --workers must be an integer from 1 to {cores} (the cores this process "
                                     "may use), got 100000\n")
    monkeypatch.setattr(cli_train, "usable_cores", lambda: 3)  # the bound is the cores, not a number of its own
    rc, out, err = run_cli(capsys, "train", "induction", "--workers", 4)
    assert err == "error: --workers must be an integer from 1 to 3 (the cores this process may use), got 4\n"
    assert time.perf_counter() - t0 < 5  # refused before any training


def test_unknown_task_and_bad_numbers_are_argparse_one_liners(capsys):
    for argv, match in ((["train", "sorting"], "invalid choice: 'sorting'"),
                        (["train", "induction", "--steps", "ten"], "invalid int value: 'ten'")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        out, err = capsys.readouterr()
        assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and match in err, err


def test_out_that_cannot_hold_the_files_is_refused_before_training(tmp_path, capsys):
    f = tmp_path / "a_file"
    f.write_text("x")
    t0 = time.perf_counter()
    one_error_line(*run_cli(capsys, "train", "induction", "--out", f), "exists and is not a folder")
    one_error_line(*run_cli(capsys, "train", "induction", "--out", f / "below"), "cannot write into")
    (tmp_path / "d" / "checkpoint.npz").mkdir(parents=True)
    one_error_line(*run_cli(capsys, "train", "translate", "--out", tmp_path / "d"), "checkpoint.npz is a folder")
    assert time.perf_counter() - t0 < 5


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_out_is_refused(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        one_error_line(*run_cli(capsys, "train", "induction", "--out", ro / "run"), "cannot write into")
    finally:
        ro.chmod(0o700)


def test_corrupt_or_missing_checkpoint_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "checkpoint.npz").write_bytes(b"PK\x03\x04 not really a zip")
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", bad, "3 4"), "not a checkpoint")
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", tmp_path / "none", "3 4"), "no checkpoint")
    T.save_checkpoint(tmp_path / "odd", {"W": np.ones((2, 2), np.float32)}, {"kind": "mystery"})
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", tmp_path / "odd", "3 4"), "unknown model kind")
    cfg = T.induction_config()
    T.save_checkpoint(tmp_path / "lying", T.init_decoder(cfg, 0), {**T.INDUCTION_SIZES, "kind": "decoder", "L": 3})
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", tmp_path / "lying", "3 4"),
                   "parameter 'layers.2.norm1' is missing")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):  # an untrained decoder checkpoint: enough for the refusals
    out = tmp_path_factory.mktemp("tiny")
    T.save_checkpoint(out, T.init_decoder(T.induction_config(), 0),
                      {**T.INDUCTION_SIZES, "kind": "decoder", "task": "induction", "first_token": 1})
    return out


@pytest.mark.parametrize("extra, match", [
    (["3 x"], "prompt token 'x' is not a token id"),
    (["3 32"], "prompt token id 32 is outside this model's vocabulary 1…31"),
    (["0 3"], "prompt token id 0 is outside"),  # 0 is padding: never a prompt token
    (["  "], "the prompt is empty"),
    (["3,,4"], 'the prompt has no id before the comma at character 3 ("3,,4")'),  # not read as "3 4"
    ([", 3 4"], "the prompt has no id before the comma at character 1"),
    ([" ".join(["3"] * 65)], "longer than the model's n_max=64"),
    (["3 4", "--max-new-tokens", "63"], "lower --max-new-tokens to at most 62"),
    (["3 4", "--max-new-tokens", "-1"], "--max-new-tokens must be ≥ 0"),
    (["3 4", "--top-k", "3"], "--top-k 3: sampling options, used only with --temperature > 0"),
    (["3 4", "--temperature", "0.7", "--top-p", "1.5"], "--top-p must lie in (0, 1] (1 = off), got 1.5"),
    (["3 4", "--temperature", "0.7", "--top-k", "-2"], "--top-k must be an integer ≥ 0 (0 = off), got -2"),
    (["3", "--max-new-tokens", "64"], "a prompt of 1 token + --max-new-tokens 64 = 65 is over the model's n_max=64: "
                                      "lower --max-new-tokens to at most 63"),
    (["3 4", "--chat"], "--chat: not used with --checkpoint"),
    (["3 4", "--backend", "cupy"], "a checkpoint runs on numpy"),
])
def test_bad_generate_requests_are_one_line(tiny_dir, extra, match, capsys):
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", tiny_dir, *extra), match)


@pytest.mark.parametrize("prompt, says", [
    ("3 " + "9" * 5000, "prompt token id of 5,000 digits is outside this model's vocabulary 1…31"),  # Python's
    # own "Exceeds the limit (4300 digits) for integer string conversion"
    ("3 " + "9" * 4000, "prompt token id of 4,000 digits is outside"),  # the 4,000 digits were the message
    ("3 " + "x" * 100_000, "prompt token 'xxxxxxxxxxxxxxxxxxxx…' is not a token id"),  # the whole word was
])
def test_a_long_word_in_the_prompt_is_named_in_a_short_line(tiny_dir, prompt, says, capsys):
    rc, out, err = run_cli(capsys, "generate", "--checkpoint", tiny_dir, prompt)
    one_error_line(rc, out, err, says)
    assert len(err) < 200, err


def test_leading_zeros_make_no_long_id():
    from transformer.cli.train import parse_ids
    assert parse_ids("0" * 5000 + "3 007", 32) == [3, 7]  # was Python's 4,300-digit refusal


@pytest.mark.parametrize("first", [32, 40, -1])
def test_a_first_token_outside_the_vocabulary_is_one_line(tmp_path, capsys, first):
    """A config whose first_token leaves no id of the vocabulary (v = 32): one line naming the file and the key,
    not "outside this model's vocabulary 40…31"."""
    T.save_checkpoint(tmp_path, T.init_decoder(T.induction_config(), 0),
                      {**T.INDUCTION_SIZES, "kind": "decoder", "task": "induction", "first_token": first})
    one_error_line(*run_cli(capsys, "generate", "--checkpoint", tmp_path, "3 4"),
                   f"its config's first_token {first} leaves no id of the vocabulary 0 … 31")


@pytest.fixture(scope="module")
def pad_likeliest_dir(tmp_path_factory):
    """An untrained decoder whose padding id 0 is by far the likeliest token after a 5: the LM head is tied,
    and W_E[0] = 20 · W_E[5] scores 20 times what 5 scores (about 20 against 1)."""
    out = tmp_path_factory.mktemp("pad")
    params = T.init_decoder(T.induction_config(), 0)
    params["W_E"][0] = 20 * params["W_E"][5]
    T.save_checkpoint(out, params, {**T.INDUCTION_SIZES, "kind": "decoder", "task": "induction", "first_token": 1})
    return out


def test_generate_checkpoint_never_prints_the_padding_id(pad_likeliest_dir, capsys):
    """Id 0 is refused as a prompt id (vocabulary 1…31), so it is never generated either, greedy or sampled.
    Reference: each step's argmax over ids 1…31 of torch's logits for the whole sequence so far."""
    params, cfg, _ = T.load_decoder(pad_likeliest_dir)
    model = T.llama_from_params(params, cfg)
    assert model.generate([3, 5], 4, stop_at_eos=False) == [0, 0, 0, 0]  # what was printed before
    assert 0 in model.generate([3, 5], 4, temperature=1.0, seed=0, stop_at_eos=False)
    torch_model = TorchTinyDecoder(cfg, {k: np.asarray(w, np.float64) for k, w in params.items()})
    seq = [3, 5]
    with torch.no_grad():
        for _ in range(6):
            seq.append(1 + int(torch_model(np.asarray([seq]))[0, -1, 1:].argmax()))
    rc, stdout, err = run_cli(capsys, "generate", "--checkpoint", pad_likeliest_dir, "3 5", "--max-new-tokens", 6)
    assert rc == 0 and stdout == "3 5 | " + " ".join(map(str, seq[2:])) + "\n", stdout
    rc, stdout, err = run_cli(capsys, "generate", "--checkpoint", pad_likeliest_dir, "3 5", "--max-new-tokens", 62,
                              "--temperature", "1", "--seed", "0")
    new = [int(t) for t in stdout.split(" | ")[1].split()]
    assert rc == 0 and len(new) == 62 and 0 not in new


def test_generate_checkpoint_prints_the_seed_it_drew(tiny_dir, capsys):
    """Sampled without --seed: "seed: N" on stderr, and --seed N gives the same tokens again."""
    args = ["generate", "--checkpoint", tiny_dir, "3 4", "--temperature", "3", "--max-new-tokens", 20]
    rc, stdout, err = run_cli(capsys, *args)
    seed = err.splitlines()[0]
    assert rc == 0 and seed.startswith("seed: ") and seed[6:].isdigit(), err
    rc, again, err = run_cli(capsys, *args, "--seed", seed[6:])
    assert rc == 0 and again == stdout and "seed:" not in err


def test_train_out_keeps_a_checkpoint_of_the_other_task_unless_force(tiny_dir, tmp_path, capsys, monkeypatch):
    """`train translate --out DIR` over an induction checkpoint is refused before any step, naming the task;
    --force replaces it (the progress bar names the task as the command does: "translate")."""
    out = tmp_path / "run"
    T.save_checkpoint(out, *T.load_checkpoint(tiny_dir)[:2])  # an induction model
    t0 = time.perf_counter()
    one_error_line(*run_cli(capsys, "train", "translate", "--steps", 1, "--out", out),
                   f"error: {out / 'checkpoint.npz'} holds a model of the induction task, which training translate "
                   "would replace: give another --out, or add --force to replace it")
    assert time.perf_counter() - t0 < 5 and T.checkpoint_contents(out)[0]["kind"] == "decoder"
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    rc, stdout, err = run_cli(capsys, "train", "translate", "--steps", 1, "--out", out, "--force")
    assert rc == 0 and T.checkpoint_contents(out)[0]["kind"] == "seq2seq"
    assert "translate: 100%" in err and "translation:" not in err


def test_generate_checkpoint_samples_through_the_same_loop_as_smollm2(induction_dir, capsys):
    """A trained decoder samples (--temperature, --top-k, --top-p, --seed) as SmolLM2 does: top-k = 1 at
    any temperature is the argmax of torch's logits at each step; a seed gives the same tokens twice and
    other seeds other tokens at a high temperature."""
    out, _ = induction_dir
    prompt = [3, 17, 5, 9, 11, 3]
    args = ["generate", "--checkpoint", out, " ".join(map(str, prompt)), "--max-new-tokens", 8]

    def new_ids(*extra):
        rc, stdout, err = run_cli(capsys, *args, *extra)
        assert rc == 0, err
        assert "engine)" in err
        return [int(t) for t in stdout.strip().split(" | ")[1].split()]

    params, cfg, _ = T.load_decoder(out)
    model = TorchTinyDecoder(cfg, {k: np.asarray(w, np.float64) for k, w in params.items()})
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(8):  # torch's greedy continuation, one token a step over the whole sequence
            seq.append(int(model(np.asarray([seq])).argmax(-1)[0, -1]))
    assert new_ids("--temperature", "1.5", "--top-k", "1", "--seed", "3") == seq[len(prompt):]
    hot = ("--temperature", "5", "--top-p", "0.99")
    assert new_ids(*hot, "--seed", "1") == new_ids(*hot, "--seed", "1")
    assert any(new_ids(*hot, "--seed", "1") != new_ids(*hot, "--seed", str(s)) for s in (2, 3, 4))


def test_generate_without_checkpoint_still_defaults_to_64_new_tokens(monkeypatch, capsys):
    """--max-new-tokens now defaults to None (a checkpoint's n_max); SmolLM2's path still asks for 64."""
    import types
    from transformer.models import llama_gguf
    seen = {}

    def stream(ids, max_new_tokens, **kw):
        seen["max_new_tokens"] = max_new_tokens
        raise ValueError("no model in this test")

    fake = types.SimpleNamespace(tokenizer=types.SimpleNamespace(encode=lambda text: [1, 2]), stream=stream,
                                 encode=lambda text: [1, 2])  # the model's encode: generate tokenizes through it
    monkeypatch.setattr(llama_gguf, "load_llama", lambda path=None, backend="numpy": fake)
    rc, _, err = run_cli(capsys, "generate", "Hello")
    assert rc == 2 and "no model in this test" in err and seen["max_new_tokens"] == 64
