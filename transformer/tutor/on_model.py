"""Your functions inside SmolLM2-135M: the readable decoder (`llama.forward`) run with every function of the
workbook that passed its check in place of the package's, against the same model run with the package's own;
all-MiniLM-L6-v2 embedding sentences with the encoder's; and, with lesson 18 checked, the induction decoder of
lesson 19 trained by them.

    python -m transformer check all --on-model

A function is swapped in only once it passed its cases in this run; the others stay the package's, each with
why. The decoder's run compares the first step's logits (the largest difference, relative to the largest logit)
and the greedy tokens of a short chat reply: the same tokens, or where they part. The training run compares the
losses of its first steps, step by step. Nothing here is graded; a function that raises inside the model (a shape
the cases did not have) is shown at its line.
"""
from __future__ import annotations

import functools
import io
from collections import Counter
import textwrap
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .guards import TimeLimit, captured_output, time_limit
from .report import FileReport
from .run import first_line, learner_line, load_workbook_file

__all__ = ["MODEL_FUNCTIONS", "ENCODER_FUNCTIONS", "TRAINING_FUNCTIONS", "ModelRun", "EncoderRun", "TrainingRun",
           "run_on_model", "format_model_run", "run_on_encoder", "format_encoder_run", "run_training",
           "format_training_run"]

# the workbook's functions the decoder calls, the lesson of each, and the module names each replaces: the decoder's
# own calls, and softmax and repeat_kv inside the package's attention (where the learner's is not swapped in)
MODEL_FUNCTIONS = {
    "embed": ("01", [("models.llama", "embed")]),
    "lm_head": ("01", [("models.llama", "lm_head")]),
    "apply_rope_interleaved": ("02", [("models.llama", "apply_rope_interleaved")]),
    "apply_rope_half": ("02", [("models.llama", "apply_rope_half")]),
    "softmax": ("03", [("core.attention", "softmax")]),
    "scaled_dot_product_attention": ("03", [("models.llama", "scaled_dot_product_attention")]),
    "split_heads": ("04", [("models.llama", "split_heads")]),
    "merge_heads": ("04", [("models.llama", "merge_heads")]),
    "causal_mask": ("05", [("models.llama", "causal_mask"), ("train.decoder", "causal_mask")]),
    "KVCache": ("06", []),  # the learner's class is the cache the generation writes through
    "decoder_mask": ("06", [("models.llama", "decoder_mask")]),
    "repeat_kv": ("07", [("core.attention", "repeat_kv")]),
    "rms_norm": ("10", [("models.llama", "rms_norm")]),
    "swiglu_ffn": ("10", [("models.llama", "swiglu_ffn")]),
}
# what training adds: the loss, every backward of the block and the optimiser (lesson 18), where the training code
# calls them; softmax_backward also runs inside the package's attention backward (where the learner's is not in)
TRAINING_FUNCTIONS = {
    **{name: entry for name, entry in MODEL_FUNCTIONS.items()
       if name not in ("KVCache", "decoder_mask")},  # the forward pass: training runs no cache, and masks by its own
    **{name: ("18", [(module, name)]) for module, names in [
        ("train.decoder", ["cross_entropy", "cross_entropy_backward"]),
        ("models.llama_backward", ["lm_head_backward", "rms_norm_backward", "swiglu_ffn_backward", "linear_backward",
                                   "merge_heads_backward", "scaled_dot_product_attention_backward",
                                   "apply_rope_half_backward", "split_heads_backward", "embed_backward"]),
        ("core.attention", ["softmax_backward"]),
        ("train.loop", ["clip_by_global_norm", "lr_at", "adamw_step"])] for name in names},
    "induction_accuracy": ("19", [("tasks.induction", "induction_accuracy")]),  # the held-out accuracy at the end
}
# the encoder's: all-MiniLM-L6-v2 embeds sentences with them (lesson 12)
ENCODER_FUNCTIONS = {
    "embed": ("01", [("models.bert", "embed")]),
    "softmax": ("03", [("core.attention", "softmax")]),
    "scaled_dot_product_attention": ("03", [("models.encoder_decoder", "scaled_dot_product_attention")]),
    "split_heads": ("04", [("models.encoder_decoder", "split_heads")]),
    "merge_heads": ("04", [("models.encoder_decoder", "merge_heads")]),
    "padding_mask": ("05", [("models.bert", "padding_mask")]),
    "layer_norm": ("10", [("models.bert", "layer_norm"), ("models.encoder_decoder", "layer_norm")]),
    "gelu": ("10", [("models.bert", "gelu")]),
    "ffn": ("10", [("models.encoder_decoder", "ffn")]),
    "bert_embeddings": ("12", [("models.bert", "bert_embeddings")]),
    "mean_pool": ("12", [("models.bert", "mean_pool")]),
    "l2_normalize": ("12", [("models.bert", "l2_normalize")]),
    "seq2seq_encoder_layer": ("15", [("models.bert", "seq2seq_encoder_layer")]),  # a BERT layer is one
}
SENTENCES = ["A man is playing a guitar.", "Someone is playing an instrument.", "The stock market fell today."]
TRAIN_STEPS = 40  # about 2 s a run: enough for AdamW's moments and the learning rate's warm-up to matter
PROMPT = "What is the capital of France?"
NEW_TOKENS = 12
ROPE = {"interleaved": "apply_rope_interleaved", "half": "apply_rope_half"}
LOADED: dict = {}  # the model, read once per process
TIME_LIMIT = 120.0  # seconds for the learner's run: the package's takes about 1 s; a loop over numbers, minutes


@dataclass
class ModelRun:
    """What the run found: whose each function was, the logits' difference, both replies."""
    yours: list[str] = field(default_factory=list)
    package: list[tuple[str, str]] = field(default_factory=list)  # (name, why it stayed the package's)
    logit_difference: float | None = None  # max |Δ| of the first step's logits / max |logit|
    reply: str = ""  # the package's
    mine: str = ""
    same_tokens: int = 0  # how many of the reply's tokens agree from the start
    tokens: int = 0
    error: str = ""  # a function raised inside the model, or the model is not installed
    printed: str = ""  # what the learner's functions printed, in one line
    unused: list[str] = field(default_factory=list)  # the learner's that passed, but nothing called
    seconds: float = 0.0


def chosen_functions(reports: list[FileReport], files: dict, rope: str | None,
                     table: dict = MODEL_FUNCTIONS) -> tuple[dict, dict, list[tuple[str, str]]]:
    """({lesson: the learner's module} of the table's lessons in files, {name: the learner's object} for the
    table's functions that passed, in the table's order, [(name, why not) for the others])."""
    modules = {lesson: load_workbook_file(files[lesson])[0]
               for lesson in {lesson for lesson, _ in table.values()} & set(files)}
    status = {(r.lesson, res.name.split(".")[0]): res.status for r in reports for res in r.results}  # KVCache.update
    status.update({(r.lesson, name): "unloadable" for r in reports if r.error
                   for name, (lesson, _) in table.items() if lesson == r.lesson})
    mine, stay = {}, []
    for name, (lesson, _) in table.items():
        if name in ROPE.values() and name != ROPE.get(rope):
            continue  # the other layout: this model's weights never call it
        got = status.get((lesson, name))
        if got == "passed" and getattr(modules.get(lesson), name, None) is not None:
            mine[name] = getattr(modules[lesson], name)
        else:
            why = {None: "not checked in this run", "not written": "not written yet", "failed": "failed its check",
                   "missing": "not in your file", "unloadable": "its file does not import"}.get(got, got)
            stay.append((name, why))
    return modules, mine, stay


def read_once(name: str, load):
    """The model `load()` reads, read once a process: --watch runs again at each save."""
    if name not in LOADED:
        LOADED[name] = load()
    return LOADED[name]


@contextmanager
def swapped(functions: dict, table: dict, own: tuple, calls: Counter):
    """The package's module names replaced by the learner's functions, and put back however the block ends. Each
    call of one of them adds to calls[its name], through the package's names and through those of the learner's
    own modules `own` that hold it (their attention calling their softmax)."""
    import importlib

    counted = {name: _counting(f, name, calls) for name, f in functions.items()}
    places = [(module, name, counted[name]) for module in own if module is not None
              for name, f in functions.items() if vars(module).get(name) is f]
    places += [(importlib.import_module(f"transformer.{module_name}"), attr, counted[name])
               for name in functions for module_name, attr in table[name][1]]
    old = []
    try:
        for module, attr, f in places:
            old.append((module, attr, getattr(module, attr)))
            setattr(module, attr, f)
        yield
    finally:
        for module, attr, f in reversed(old):
            setattr(module, attr, f)


def _counting(f, name: str, calls: Counter):
    """f, adding 1 to calls[name] at each call (its name and docstring kept: an activation's __name__ is read)."""
    @functools.wraps(f)
    def counted(*args, **kwargs):
        calls[name] += 1
        return f(*args, **kwargs)
    return counted


def learners_run(work, functions: dict, table: dict, seconds: float, modules: dict, files: dict, where: str,
                 task: str):
    """work() with the learner's functions swapped in, a time limit and its prints kept: (its value or None, the
    error in one line or '', what it printed in one line or '', the names of the learner's functions nothing
    called). modules, files: the learner's modules and files, by lesson. where: "the model", "the encoder" or
    "training"; task: what the time limit was for, with the package's time ("for 12 tokens (the package's take
    about 1 s)")."""
    said = _said(where)
    out, value, error, calls = io.StringIO(), None, "", Counter()
    try:
        with swapped(functions, table, tuple(modules.values()), calls), time_limit(seconds), captured_output(out):
            value = work()
    except TimeLimit:
        error = f"{said} your functions took longer than {seconds:g} s {task}: is one of them a loop over numbers?"
    except FloatingPointError as e:  # train_loop stops on a loss or gradient norm that is NaN or infinite
        error = f"{said} your functions stopped the run: {e}"
    except Exception as e:  # noqa: BLE001 - the learner's code may raise anything inside the model
        error = _raised_inside(e, [files[lesson] for lesson in modules], where)
    lines = out.getvalue().splitlines()
    printed = f"your functions printed {len(lines)} lines {said}; the first: {lines[0][:80]}" if lines else ""
    return value, error, printed, [] if error else [name for name in functions if not calls[name]]


def run_on_model(reports: list[FileReport], files: dict, *, prompt: str = PROMPT, new_tokens: int = NEW_TOKENS,
                 model=None, seconds: float = TIME_LIMIT) -> ModelRun:
    """SmolLM2-135M greedy on `prompt` (as a chat turn) with the package's functions, then with the learner's that
    passed; files: {lesson: the workbook file} of the lessons checked. model: a loaded Llama (default: SmolLM2).
    seconds: how long the learner's run may take."""
    from ..models.llama import forward

    run, start = ModelRun(), time.perf_counter()
    if model is None:
        from ..models.llama_gguf import load_smollm2

        try:
            model = read_once("smollm2", load_smollm2)
        except FileNotFoundError as e:
            run.error = f"the run on the model is skipped: {e}"
            return run
    modules, mine, run.package = chosen_functions(reports, files, model.config.rope_layout)
    run.yours = list(mine)
    cache_class = mine.pop("KVCache", None)
    text = model.tokenizer.apply_chat_template(prompt)
    ids = np.asarray([model.encode(text)])  # [1, n]
    cos, sin = model.rope_tables(ids.shape[1] + new_tokens)
    fast = model.fast_path
    model.fast_path = False  # forward() through the cache, whose names are the ones swapped
    try:
        ref_logits = forward(ids, model.weights, model.config, cos, sin, last_only=True)[0, -1]  # [v]
        ref_ids = model.generate(text, new_tokens, stop_at_eos=True)
        cfg = model.config

        def mine_run():  # the first step's logits [v], and the reply's ids
            cache = None if cache_class is None else cache_class(cfg.L, 1, cfg.h_kv, ids.shape[1] + new_tokens,
                                                                 cfg.d_h, dtype=model.weights.W_E.dtype)
            return (forward(ids, model.weights, cfg, cos, sin, last_only=True)[0, -1],
                    model.generate(text, new_tokens, stop_at_eos=True, cache=cache))
        got, run.error, run.printed, run.unused = learners_run(
            mine_run, mine, MODEL_FUNCTIONS, seconds, modules, files, "the model",
            f"for {new_tokens} tokens (the package's take about 1 s)")
        run.yours = [n for n in run.yours if n not in run.unused]
    finally:
        model.fast_path = fast
    if run.error:
        return run
    logits, my_ids = got
    logits, ref_logits = np.asarray(logits, np.float64), np.asarray(ref_logits, np.float64)
    run.logit_difference = float(np.max(np.abs(logits - ref_logits)) / np.max(np.abs(ref_logits)))
    shown = lambda ids: model.tokenizer.decode([i for i in ids if i != model.tokenizer.eos_id])  # noqa: E731
    run.reply, run.mine = shown(ref_ids), shown(my_ids)
    run.tokens = len(ref_ids)
    run.same_tokens = next((i for i, (a, b) in enumerate(zip(ref_ids, my_ids)) if a != b), min(len(ref_ids),
                                                                                               len(my_ids)))
    run.seconds = time.perf_counter() - start
    return run


@dataclass
class EncoderRun:
    """all-MiniLM-L6-v2's sentence embeddings with the package's functions and with the learner's."""
    yours: list[str] = field(default_factory=list)
    package: list[tuple[str, str]] = field(default_factory=list)
    difference: float | None = None  # max |Δ| of the unit-length embeddings
    similarity: list[list[float]] = field(default_factory=list)  # the package's cosine similarities
    mine: list[list[float]] = field(default_factory=list)
    error: str = ""
    printed: str = ""
    unused: list[str] = field(default_factory=list)  # the learner's that passed, but nothing called
    seconds: float = 0.0


def run_on_encoder(reports: list[FileReport], files: dict, *, sentences=SENTENCES, model=None,
                   seconds: float = TIME_LIMIT) -> EncoderRun:
    """all-MiniLM-L6-v2 embeds `sentences` with the package's functions, then with the learner's that passed."""

    run, start = EncoderRun(), time.perf_counter()
    if model is None:
        from ..models.bert_files import load_minilm

        try:
            model = read_once("minilm", load_minilm)
        except FileNotFoundError as e:
            run.error = f"the run on the encoder is skipped: {e}"
            return run
    modules, mine, run.package = chosen_functions(reports, files, None, ENCODER_FUNCTIONS)
    run.yours = list(mine)
    ref = np.asarray(model.embed(list(sentences)), np.float64)  # [b, d], unit rows
    got, run.error, run.printed, run.unused = learners_run(
        lambda: np.asarray(model.embed(list(sentences)), np.float64), mine, ENCODER_FUNCTIONS, seconds, modules,
        files, "the encoder", f"for {len(sentences)} sentences (the package's take a tenth of a second)")
    run.yours = [n for n in run.yours if n not in run.unused]
    if run.error:
        return run
    run.difference = float(np.max(np.abs(got - ref)))
    run.similarity, run.mine = (ref @ ref.T).tolist(), (got @ got.T).tolist()
    run.seconds = time.perf_counter() - start
    return run


def format_encoder_run(run: EncoderRun, sentences=SENTENCES) -> str:
    """The lines the encoder's run prints."""
    if run.error and not run.yours and not run.package:
        return run.error
    lines, compared = _opening("all-MiniLM-L6-v2 with your functions (--on-model):", run, run.yours, ENCODER_FUNCTIONS)
    if not compared:
        return "\n".join(lines)
    if run.difference == 0:
        lines.append("  the sentence embeddings: the package's, bit for bit")
    else:
        lines.append(f"  the sentence embeddings (unit length) differ by at most {run.difference:.1e}"
                     + (" (float32 rounding: another order of the same sums)" if run.difference < 1e-4 else
                        " — far above float32 rounding: a slip the check's cases missed"))
    lines.append("  cosine similarity, yours (the package's):")
    for j in range(1, len(sentences)):
        lines.append(f"    {sentences[0]!r} ~ {sentences[j]!r}: {run.mine[0][j]:.3f} ({run.similarity[0][j]:.3f})")
    return "\n".join(lines)


@dataclass
class TrainingRun:
    """The induction decoder trained TRAIN_STEPS steps by the package's functions and by the learner's."""
    yours: list[str] = field(default_factory=list)
    package: list[tuple[str, str]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # the package's, one a step
    mine: list[float] = field(default_factory=list)
    accuracy: float | None = None  # the package's held-out accuracy after the last step
    mine_accuracy: float | None = None
    error: str = ""
    printed: str = ""
    unused: list[str] = field(default_factory=list)  # the learner's that passed, but nothing called
    seconds: float = 0.0
    steps: int = TRAIN_STEPS

    @property
    def difference(self) -> float:
        """The largest difference of two losses of the same step, relative to the first loss."""
        return max(abs(a - b) for a, b in zip(self.losses, self.mine)) / abs(self.losses[0])


def run_training(reports: list[FileReport], files: dict, *, steps: int = TRAIN_STEPS,
                 seconds: float = TIME_LIMIT) -> TrainingRun:
    """Lesson 19's induction decoder trained `steps` steps from the same seed twice: with the package's functions,
    and with every function of the learner's that passed (the forward's, the loss, the backward's, AdamW's, and
    the held-out accuracy's)."""
    from ..tasks.induction import train_induction

    run, start = TrainingRun(steps=steps), time.perf_counter()
    modules, mine, run.package = chosen_functions(reports, files, "half", TRAINING_FUNCTIONS)  # trained: half
    run.yours = list(mine)
    if not mine:  # nothing of the learner's to train with: said so, without training the package's twice
        return run
    def train():  # -> (the loss of each step, the held-out accuracy at the end)
        result = train_induction(steps=steps, progress=False, snapshot_every=10 ** 9)
        return result["history"]["loss"], result["heldout_accuracy"]

    run.losses, run.accuracy = train()
    trained, run.error, run.printed, run.unused = learners_run(
        train, mine, TRAINING_FUNCTIONS, seconds, modules, files, "training",
        f"for {steps} steps (the package's take about 2 s)")
    run.yours = [n for n in run.yours if n not in run.unused]
    run.mine, run.mine_accuracy = trained or ([], None)
    run.seconds = time.perf_counter() - start
    return run


def format_training_run(run: TrainingRun) -> str:
    """The lines the training run prints after the decoder's."""
    lines, compared = _opening(f"Lesson 19's induction decoder trained {run.steps} steps with your functions "
                               "(--on-model):", run, run.yours)
    if not compared:
        return "\n".join(lines)
    lines.append(f"  loss {run.mine[0]:.4f} -> {run.mine[-1]:.4f} with yours, {run.losses[0]:.4f} -> "
                 f"{run.losses[-1]:.4f} with the package's ({run.seconds:.1f} s)")
    if run.difference == 0:
        lines.append(f"  the {len(run.losses)} losses are the package's, bit for bit")
    elif run.difference < 1e-4:
        lines.append(f"  the {len(run.losses)} losses differ by at most {run.difference:.1e} of the first "
                     "(float32 rounding: another order of the same sums)")
    else:
        step = next(i for i, (a, b) in enumerate(zip(run.losses, run.mine)) if abs(a - b) / abs(run.losses[0])
                    >= 1e-4)
        lines.append(f"  the losses part at step {step}: {run.mine[step]:.4f} against {run.losses[step]:.4f} — far "
                     "above float32 rounding: a slip the check's cases missed")
    if run.accuracy is not None and run.mine_accuracy is not None:
        same = run.mine_accuracy == run.accuracy
        lines.append(f"  held-out accuracy after step {run.steps}: {run.mine_accuracy:.2%} with yours, "
                     f"{run.accuracy:.2%} with the package's" + ("" if same else " — a slip the check's cases missed, "
                                                              "or the weights above differ"))
    return "\n".join(lines)


def _opening(title: str, run, names: list[str], table: dict | None = None) -> tuple[list[str], bool]:
    """A run's first lines: its title, the functions that were the learner's and those that stayed the package's,
    what the learner's printed and the error; and whether the comparison follows (something of theirs ran to the
    end)."""
    lines = ["", title, *textwrap.wrap("yours: " + (", ".join(names) or "none yet: a function is used once it passes "
                                                                        "its check"), 116,
                                       initial_indent="  ", subsequent_indent="    ")]
    lines += _package_lines(run.package, table)
    if run.unused:
        lines += textwrap.wrap("yours, but nothing called them in this run (a function of yours above does their "
                               f"work): {', '.join(run.unused)}", 116, initial_indent="  ", subsequent_indent="    ")
    if not run.yours:  # the package's run twice: nothing to compare
        return lines, False
    lines += [f"  {line}" for line in (run.printed, run.error) if line]
    return lines, not run.error


def _package_lines(package: list[tuple[str, str]], table: dict | None = None) -> list[str]:
    """The functions that stayed the package's, one line a reason."""
    if not package:
        return []
    lines = ["  the package's:"]
    for why in dict.fromkeys(why for _, why in package):  # in the model's order
        names = [n for n, w in package if w == why]
        if why == "not checked in this run":
            lesson = {**MODEL_FUNCTIONS, **TRAINING_FUNCTIONS, **(table or {})}
            names = [f"{n} ({lesson[n][0]})" for n in names]
        lines += textwrap.wrap(f"{why}: {', '.join(names)}", 116, initial_indent="    ", subsequent_indent="      ")
    return lines


def _raised_inside(e: BaseException, paths: list[Path], where_run: str = "the model") -> str:
    """One line: what the learner's function raised inside the model, at the learner's line if the traceback has
    one of their files."""
    line, _ = learner_line(e, *paths)
    shapes = {"training": "a batch of rows, RoPE's tables per row, float32",
              "the encoder": "a padded batch of sentences, 6 layers, float32"}.get(where_run,
                                                                                 "a batch of 1, 30 layers, float32")
    return (f"{_said(where_run)} your code raised {type(e).__name__}: {first_line(e)}{' at ' + line if line else ''}"
            f" — {where_run.removeprefix('the ')} calls it with shapes the check's cases may not have ({shapes})")


def _said(where: str) -> str:
    """'in training', 'inside the model', 'inside the encoder'."""
    return "in training" if where == "training" else f"inside {where}"


def format_model_run(run: ModelRun) -> str:
    """The lines the run prints after the check's report."""
    if run.error and not run.yours and not run.package:
        return run.error
    lines, compared = _opening("SmolLM2-135M with your functions (--on-model):", run,
                               [n if n != "KVCache" else "KVCache.update" for n in run.yours])
    if not compared:
        return "\n".join(lines)
    if run.logit_difference == 0:
        lines.append("  the first step's logits: the package's, bit for bit")
    else:
        lines.append(f"  the first step's logits differ by at most {run.logit_difference:.1e} of the largest logit"
                     + (" (float32 rounding: another order of the same sums)" if run.logit_difference < 1e-4 else
                        " — far above float32 rounding: a slip the check's cases missed"))
    lines.append(f"  the package's reply: {run.reply!r}")
    lines.append(f"  yours:               {run.mine!r}")
    if run.same_tokens == run.tokens:
        lines.append(f"  the same {run.tokens} tokens ({run.seconds:.1f} s)")
    else:
        lines.append(f"  the same first {run.same_tokens} of {run.tokens} tokens, then they part: after float32 "
                     "rounding a near-tie can go the other way; a difference far above 1e-5 in the logits is a "
                     "slip the cases missed")
    return "\n".join(lines)
