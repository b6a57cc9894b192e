"""The checker's report (`python -m transformer check`): what a learner reads when something fails.

Each test plants learner-style code with one slip (or builds a small spec of its own, where the rule under test
must not depend on the package's specs) and asserts the exact words the learner should see: which returned value
is wrong, every failing case with its own hint, no hint that does not explain the failure, an input changed in
place, a failing function called by another, a constant factor or a reordering, where a loop was stopped, what
was printed, and the run's last line. Expected numbers are computed here, independently of the checker.
"""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from transformer.tutor import LESSON_SPECS, check_file, format_report
from transformer.tutor.cases import Case, Mistake, Spec
from transformer.tutor.compare import compare
from transformer.tutor.report import format_result, format_summary
from transformer.tutor.run import check_function, load_workbook_file

from test_tutor import result_of, write_workbook  # tests/ is on the path

ROOT = Path(__file__).resolve().parents[1]


def learner(tmp_path, source, name):
    """(the learner's function `name`, its file) from a file holding `source`."""
    path = tmp_path / "mine.py"
    path.write_text("import numpy as np\n\n" + textwrap.dedent(source), encoding="utf-8")
    module, error = load_workbook_file(path)
    assert module is not None, error
    return getattr(module, name), path


def fmt(x) -> str:  # how the report writes one entry
    return f"{float(x):.7g}"


# --- which value, which entry ---------------------------------------------------------------------------------
def test_a_wrong_value_among_several_is_named_and_a_leading_ellipsis_labels_the_last_axes():
    r = np.random.default_rng(0)
    m, O = r.standard_normal((2, 2, 3, 1)), r.standard_normal((2, 2, 3, 4))
    m_bad = m.copy()
    m_bad[1, 0, 2, 0] += 1.0
    problem = compare((m_bad, O), (m, O), (("…", "Br", "1"), ("…", "Br", "d_h")), names=("m_new", "O_new"))
    assert problem == (f"m_new: first wrong entry at [1, 0, Br=2, 0]: expected {fmt(m[1, 0, 2, 0])}, "
                       f"got {fmt(m_bad[1, 0, 2, 0])} (1 of 12 entries differ)")


def test_a_count_is_exact_and_the_difference_is_said():
    """A parameter or byte count is an integer: one parameter off fails, and the message gives both counts in
    full and their difference (576 = SmolLM2's d: a norm left out); a count 8 times too large says so."""
    smollm2 = 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536 + 2 * 576) + 49152 * 576 + 576  # published shapes
    assert smollm2 == 134_515_008
    assert compare(smollm2 + 1, smollm2) == "the result: expected 134,515,008, got 134,515,009 (1 more)"
    assert compare(smollm2 - 576, smollm2) == "the result: expected 134,515,008, got 134,514,432 (576 fewer)"
    assert compare(8 * 131_072, 131_072) == "the result: expected 131,072, got 1,048,576 (917,504 more; 8 × the expected)"
    assert compare(np.int64(smollm2), smollm2) is None  # NumPy's integers count too
    assert compare(float(smollm2), smollm2) == ("the result is the right count as a float (134515008.0): a count is a "
                                                "whole number, an int — divide with // or convert with int(…)")
    assert compare(2.5, 3) == "the result: expected the whole number 3, got 2.5"


def test_values_that_print_alike_get_more_digits_and_float32_rounding_is_named():
    """Seven digits of 0.1234567849 and 0.1234568149 read the same: the message shows both until they differ, and
    a float64 answer made in float32 (its entries float32 numbers, off by 3e-8) gets the hint that says so."""
    expected = np.array([0.1234567849, 2.0])
    problem = compare(np.array([0.1234568149, 2.0], dtype=np.float32).astype(np.float64), expected)
    assert problem == ("first wrong entry at [0]: expected 0.12345678, got 0.12345681 (1 of 2 entries differ)")
    assert problem.hint.startswith("the answer agrees only to about 7 digits, as float32 arithmetic does")
    assert compare(np.array([0.13, 2.0]), expected).hint == ""  # a real slip is not put down to rounding


def test_a_float64_slip_as_small_as_float32_rounding_is_not_put_down_to_it():
    """ε = 1e-6 outside RMSNorm's root moves each entry by about 1e-6 of itself: as small as float32's rounding,
    and the hint said "compute in float64" to code that did. Its entries are not float32 numbers."""
    r = np.random.default_rng(0)
    x = r.standard_normal((4, 8))
    inside = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    outside = x / (np.sqrt((x * x).mean(-1, keepdims=True)) + 1e-6)
    problem = compare(outside, inside)
    assert problem.startswith("first wrong entry") and problem.hint == "", (problem, problem.hint)
    in_float32 = (x.astype(np.float32) / np.sqrt((x.astype(np.float32) ** 2).mean(-1, keepdims=True) + np.float32(1e-6)))
    assert compare(in_float32.astype(np.float64), inside).hint.startswith("the answer agrees only to about 7 digits")


def test_a_factor_near_one_is_printed_with_the_digits_that_tell_it_from_one():
    problem = compare(np.array([1.0, 2.0, 3.0]) * 1.000005, np.array([1.0, 2.0, 3.0]))
    assert problem.endswith("every entry is 1.000005 × the expected one: off by a constant factor"), problem


def test_an_answer_of_another_library_is_told_to_be_a_numpy_array():
    torch = pytest.importorskip("torch")
    problem = compare(torch.zeros(3, dtype=torch.float64), np.zeros(3))
    assert problem.kind == "type" and problem.startswith("the result should be a NumPy array, got a torch.Tensor")
    assert compare(0, 3) == "the result: expected 3, got 0 (3 fewer)"  # no "0 × the expected"
    assert compare(6, 0) == "the result: expected 0, got 6"  # no "(6 more)"


def test_a_count_without_the_final_norm_is_told_which_part(tmp_path):
    path = write_workbook(tmp_path, "13", """
        def count_parameters(config):
            c = config
            layer = c.d * c.h * c.d_h * 2 + 2 * c.d * c.h_kv * c.d_h + 3 * c.d * c.d_ff + 2 * c.d
            return c.v * c.d + c.L * layer + (0 if c.tied else c.v * c.d)
        """)
    text = format_report(check_file(path, "13"))
    assert "expected 134,515,008, got 134,514,432 (576 fewer)" in text  # SmolLM2: d = 576
    assert "expected 8,030,261,248, got 8,030,257,152 (4,096 fewer)" in text  # Llama-3-8B: d = 4096
    assert "hint: the final RMSNorm after the last layer has d numbers too" in text, text


def test_adamw_names_the_step_whose_parameters_go_wrong(tmp_path):
    # state.m and state.v are never written back: step 1 starts from zeros and is right, step 2 is not
    path = write_workbook(tmp_path, "18", """
        from transformer.train.optim import decays_by_default
        def adamw_step(params, grads, state, lr, *, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
            b1, b2 = betas
            state.t += 1
            for k, p in params.items():
                g = grads[k]
                m = b1 * state.m[k] + (1 - b1) * g
                v = b2 * state.v[k] + (1 - b2) * g * g
                mh, vh = m / (1 - b1 ** state.t), v / (1 - b2 ** state.t)
                if decays_by_default(k, p):
                    p *= 1 - lr * weight_decay
                p -= lr * mh / (np.sqrt(vh) + eps)
        """)
    result = result_of(check_file(path, "18"), "adamw_step")
    assert result.status == "failed" and result.failed == result.cases == 3
    assert all(f.message.startswith("W after step 2: first wrong entry at [") for f in result.failures), result.message


# --- a pattern in the whole answer --------------------------------------------------------------------------------
def test_an_answer_off_by_a_constant_factor_says_the_factor_and_names_the_axis_of_that_size():
    e = np.random.default_rng(1).standard_normal((2, 3, 8))
    problem = compare(e / math.sqrt(8), e, ("b", "n", "d"))
    assert problem.endswith(f"; every entry is {1 / math.sqrt(8):.4g} × the expected one (1/√8 = 1/√d?): off by a "
                            "constant factor"), problem
    wide = np.random.default_rng(7).standard_normal((3, 16))
    assert compare(wide / 4, wide).endswith("every entry is 0.25 × the expected one (1/√16?): off by a constant factor")
    assert compare(wide * 2, wide).endswith("every entry is 2 × the expected one: off by a constant factor")
    assert compare(-e, e).endswith("every entry has the wrong sign (−1 × the expected one)")


def test_a_factor_is_read_only_from_values_that_vary():
    same = np.full((2, 1), 0.7)  # every entry equal: any wrong answer would look like a factor
    assert "factor" not in compare(same * 3, same)
    e = np.random.default_rng(2).standard_normal((3, 5))
    noisy = e * 2 + np.random.default_rng(3).standard_normal((3, 5)) * 0.1
    assert "factor" not in compare(noisy, e) and "wrong order" not in compare(noisy, e)


def test_the_right_values_in_the_wrong_places_are_told_so():
    e = np.random.default_rng(4).standard_normal((2, 3, 8))
    per_row = np.concatenate([e[..., 0::2], e[..., 1::2]], axis=-1)  # [evens | odds] instead of interleaved
    assert compare(per_row, e, ("b", "n", "d_h")).endswith(
        "; each row along d_h holds the right values in the wrong order: check the order of your reshape, transpose, "
        "concatenate or stack")
    mixed = e.reshape(2, 8, 3).swapaxes(1, 2).reshape(2, 3, 8)
    assert compare(mixed, e, ("b", "n", "d")).endswith(
        "; the right values in the wrong places: check the order of your reshape, transpose, concatenate or stack")


def test_rms_norm_with_the_sum_is_off_by_sqrt_d(tmp_path):
    path = write_workbook(tmp_path, "10", """
        def rms_norm(x, gamma, eps=1e-6):
            return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps) * gamma
        """)
    failure = result_of(check_file(path, "10"), "rms_norm").failures[0]
    assert failure.label == "x (2, 3, 8): b=2, n=3, d=8"
    assert f"every entry is {1 / math.sqrt(8):.4g} × the expected one (1/√8" in failure.message, failure.message


# --- hints: only where they explain, each under its case ----------------------------------------------------------
def _tagged_spec(cases, mistakes):
    return Spec("f", lambda x: x * 2.0, lambda: cases, "nowhere.py", mistakes=mistakes)


def test_a_tag_hint_needs_every_unexplained_failure_to_carry_the_tag(tmp_path):
    r = np.random.default_rng(5)
    cases = [Case("plain", (r.standard_normal(2),)), Case("tagged A", (r.standard_normal(3),), tags=frozenset("t")),
             Case("tagged B", (r.standard_normal(4),), tags=frozenset("t")),
             Case("untagged, long", (r.standard_normal(5),))]
    tag = Mistake("only the t cases fail", tag="t")
    long = Mistake("length 5 gets x * 3", variant=lambda x: x * (3.0 if x.size == 5 else 2.0))
    # wrong on both tagged cases: every failure carries t, and no passing case does
    fn, path = learner(tmp_path, "def f(x):\n    return x * (9.0 if x.size in (3, 4) else 2.0)\n", "f")
    result = check_function(_tagged_spec(cases, [tag, long]), fn, path)
    assert [(f.label, f.hints) for f in result.failures] == [("tagged A", ["only the t cases fail"]),
                                                            ("tagged B", ["only the t cases fail"])]
    # the long case fails too, explained by its variant: the tagged ones still share t
    fn, path = learner(tmp_path, "def f(x):\n    return x * {3: 9.0, 4: 9.0, 5: 3.0}.get(x.size, 2.0)\n", "f")
    result = check_function(_tagged_spec(cases, [tag, long]), fn, path)
    assert [(f.label, f.hints) for f in result.failures] == [("tagged A", ["only the t cases fail"]),
                                                            ("tagged B", ["only the t cases fail"]),
                                                            ("untagged, long", ["length 5 gets x * 3"])]
    # without that variant the long case is unexplained and lacks t: no tag hint at all
    assert check_function(_tagged_spec(cases, [tag]), fn, path).hints == []
    # a passing case that carries t switches the hint off
    fn, path = learner(tmp_path, "def f(x):\n    return x * (9.0 if x.size == 4 else 2.0)\n", "f")
    assert check_function(_tagged_spec(cases, [tag]), fn, path).hints == []


def test_padding_mask_off_by_one_gets_no_hint_about_n(tmp_path):
    path = write_workbook(tmp_path, "05", """
        def padding_mask(lengths, n=None, *, xp=None):
            lengths = np.asarray(lengths)
            n = int(lengths.max()) if n is None else n
            return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]
        """)
    result = result_of(check_file(path, "05"), "padding_mask")
    assert result.status == "failed" and not any("`n` argument" in h for h in result.hints), result.hints


def test_a_wrong_dtype_gets_no_tag_hint_and_a_rule_that_fits_the_inputs(tmp_path):
    path = write_workbook(tmp_path, "02", """
        def sinusoidal_positions(n, d, *, base=10000.0, xp=None, dtype=None):
            angle = np.arange(n)[:, None] / base ** (np.arange(0, d, 2) / d)[None, :]
            pe = np.zeros((n, d))
            pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
            return pe if dtype is None else pe.astype(dtype)
        """)
    result = result_of(check_file(path, "02"), "sinusoidal_positions")
    assert result.failures and all(f.kind == "dtype" for f in result.failures)
    assert "has dtype float64, expected float32" in result.message
    assert "keep the input's dtype" not in result.message  # its inputs are integers
    assert not any("base" in h for h in result.hints), result.hints


def test_softmax_float64_for_float32_is_not_called_a_float16_problem(tmp_path):
    path = write_workbook(tmp_path, "03", """
        import transformer as T
        def softmax(x, axis=-1, mask=None):
            return T.softmax(np.asarray(x, dtype=np.float64), axis, mask)
        """)
    result = result_of(check_file(path, "03"), "softmax")
    assert [f.label for f in result.failures] == ["float32 x of shape (2, 9)", "float16 logits around 20",
                                                  "float16 rows of 1,000 logits (σ = 3), rounded once: within one "
                                                  "float16 step"]
    assert not any("float16 fails alone" in h for h in result.hints)
    assert ("has dtype float64, expected float32: keep the input's dtype (compute in float32 if you need to, then "
            "cast back with .astype)") in result.message


def test_every_failing_case_is_listed_with_its_own_hint_under_it(tmp_path):
    r = np.random.default_rng(6)
    cases = [Case(f"case {i}", (r.standard_normal(i + 2),)) for i in range(7)]
    odd = Mistake("odd lengths get x * 3", variant=lambda x: x * (3.0 if x.size % 2 else 2.0))
    big = Mistake("lengths over 5 get x * 4", variant=lambda x: x * (4.0 if x.size > 5 else 2.0))
    fn, path = learner(tmp_path, "def f(x):\n    return x * (4.0 if x.size > 5 else 3.0 if x.size % 2 else 2.0)\n",
                       "f")
    result = check_function(_tagged_spec(cases, [odd, big]), fn, path)
    assert result.failed == 5 and result.cases == 7  # sizes 3, 5 (odd) and 6, 7, 8 (over 5)
    lines = format_report_lines(result)
    assert lines[0] == "  f  FAILED (5 of 7 cases fail)"
    assert lines[1].startswith('     case "case 1": first wrong entry at [0]: ')
    assert lines[2] == "       hint: odd lengths get x * 3"
    assert lines[3].startswith('     case "case 3": ')
    assert lines[4].startswith('     case "case 4": ') and lines[5] == "       hint: lengths over 5 get x * 4"
    assert lines[6].startswith('     case "case 5": ')
    assert lines[7:] == ["     … and 1 more failing case"]  # case 6: over 5, its hint already told


def format_report_lines(result):
    return format_result(result, len(result.name))


def test_a_spec_can_say_what_its_dtype_follows(tmp_path):
    cases = lambda: [Case("n=3", (3,))]  # noqa: E731
    spec = Spec("table", lambda n: np.zeros(n, dtype=np.float32), cases, "nowhere.py",
                dtype_rule="the table is float32 unless dtype= is given")
    fn, path = learner(tmp_path, "def table(n):\n    return np.zeros(n)\n", "table")
    assert check_function(spec, fn, path).message == ('case "n=3": the result has dtype float64, expected float32: '
                                                      "the table is float32 unless dtype= is given "
                                                      "(its values are right)")


# --- inputs changed in place --------------------------------------------------------------------------------------
def test_a_softmax_that_writes_into_x_fails_even_with_the_right_answer(tmp_path):
    path = write_workbook(tmp_path, "03", """
        def softmax(x, axis=-1, mask=None):
            dt = x.dtype
            if mask is not None:
                x[~np.broadcast_to(mask, x.shape)] = -np.inf
            x32 = x.astype(np.float32)  # float16 is computed in float32
            m = x.max(axis=axis, keepdims=True)
            m[~np.isfinite(m)] = 0
            x -= m
            y = np.exp(x32 - m.astype(np.float32)) if dt == np.float16 else np.exp(x, out=x)
            s = y.sum(axis=axis, keepdims=True)
            s[s == 0] = 1
            return (y / s).astype(dt)
        """)
    result = result_of(check_file(path, "03"), "softmax")
    assert result.status == "failed" and result.failed == result.cases, result.message
    assert all(f.kind == "in place" for f in result.failures)
    assert result.message.startswith(f'case "x of shape (3, 5)" (and {result.cases - 1} more): your function '
                                     "changed its input `x` in place: the caller's `x` must come back as it was")


def test_adamw_may_write_params_and_state_but_not_grads(tmp_path):
    path = write_workbook(tmp_path, "18", """
        import transformer as T
        def adamw_step(params, grads, state, lr, **kwargs):
            for k in grads:
                grads[k] += 0.5  # into the caller's array
            return T.adamw_step(params, grads, state, lr, **kwargs)
        """)
    failure = result_of(check_file(path, "18"), "adamw_step").failures[0]
    assert failure.kind == "value" and failure.hints[-1].startswith("your function changed its input `grads` in place")


def test_an_argument_a_spec_declares_written_may_change(tmp_path):
    def fill(out, x):  # the package's version writes nothing: only `writes` allows the learner's to write `out`
        return x + 1
    cases = lambda: [Case("x (3,)", (np.zeros(3), np.arange(3.0)))]  # noqa: E731
    fn, path = learner(tmp_path, "def fill(out, x):\n    out[...] = x + 1\n    return out.copy()\n", "fill")
    assert check_function(Spec("fill", fill, cases, "nowhere.py", writes=("out",)), fn, path).status == "passed"
    refused = check_function(Spec("fill", fill, cases, "nowhere.py"), fn, path)
    assert refused.failures[0].message.startswith("your function changed its input `out` in place")


# --- a failure caused by another function of the file ------------------------------------------------------------
def test_a_function_calling_a_failing_one_of_its_file_is_told_to_wait_for_it(tmp_path):
    path = write_workbook(tmp_path, "04", """
        def split_heads(x, h):
            b, n, d = x.shape
            return x.reshape(b, n, d // h, h).transpose(0, 3, 1, 2)

        def _heads(t, h):
            return split_heads(t, h)

        def multi_head_attention(x, w, h, h_kv=None, *, mask=None, context=None, return_weights=False):
            h_kv = h if h_kv is None else h_kv
            c = x if context is None else context
            lin = lambda a, W, b: a @ W if b is None else a @ W + b
            q = _heads(lin(x, w.W_q, w.b_q), h)
            k, v = _heads(lin(c, w.W_k, w.b_k), h_kv), _heads(lin(c, w.W_v, w.b_v), h_kv)
            res = scaled_dot_product_attention(q, k, v, mask, return_weights=return_weights)
            o, p = res if return_weights else (res, None)
            out = lin(merge_heads(o), w.W_o, w.b_o)
            return (out, p) if return_weights else out
        from transformer import scaled_dot_product_attention
        """)
    report = check_file(path, "04")
    mha = result_of(report, "multi_head_attention")
    assert result_of(report, "split_heads").status == "failed" and mha.status == "failed"
    assert mha.note == "it calls `split_heads`, which fails: fix that first"
    assert ("multi_head_attention  FAILED (6 of 6 cases fail): it calls `split_heads`, which fails: fix that first"
            in format_report(report))
    assert "… and 5 more failing cases" in format_report(report)  # the rest waits for split_heads


# --- the run: time, prints, exceptions, order, last line ---------------------------------------------------------
def test_a_loop_that_never_ends_shows_the_line_it_was_running(tmp_path):
    path = write_workbook(tmp_path, "03", """
        def softmax(x, axis=-1, mask=None):
            while True: x = x + 0
        """)
    line = path.read_text().splitlines().index("    while True: x = x + 0") + 1
    message = result_of(check_file(path, "03", seconds=0.3), "softmax").message
    assert message.endswith(f"\n  at {path.name}, line {line}, in softmax: while True: x = x + 0"), message


def test_what_the_learner_prints_is_summed_up_in_one_line(tmp_path):
    path = write_workbook(tmp_path, "03", """
        import transformer as T
        def softmax(x, axis=-1, mask=None):
            print("hello", x.shape)
            print("second debug line")
            return T.softmax(x, axis, mask)
        """)
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "03", "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    n = len(LESSON_SPECS["03"][0].cases())
    assert proc.returncode == 0 and "second debug line" not in proc.stdout, proc.stdout
    notes = [line.strip() for line in proc.stdout.splitlines() if "note:" in line]
    assert notes == [f'note: it printed {2 * n} lines in {n} cases; the first, in case "x of shape (3, 5)": '
                     "hello (3, 5)"], proc.stdout


def test_a_function_that_waits_for_input_is_told_so(tmp_path):
    path = write_workbook(tmp_path, "07", """
        def repeat_kv(x, n_rep):
            input("continue? ")
            return np.repeat(x, n_rep, axis=1)
        """)
    message = result_of(check_file(path, "07"), "repeat_kv").message
    assert ("raised EOFError: EOF when reading a line (the checker types nothing: a checked function must not wait "
            "for input())") in message


def test_a_multi_line_exception_keeps_its_lines(tmp_path):
    path = write_workbook(tmp_path, "07", """
        class ShapeError(Exception):
            pass

        def repeat_kv(x, n_rep):
            if n_rep == 1:
                raise ShapeError(f"nothing to repeat:\\n  x has shape {x.shape}\\n  n_rep = {n_rep}")
            return np.repeat(x, n_rep, axis=1)
        """)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "raise ShapeError" in text)
    lines = format_report(check_file(path, "07")).splitlines()
    at = lines.index('             case "n_rep=1: nothing to repeat": raised ShapeError: nothing to repeat:')
    assert lines[at + 1:at + 3] == ["               x has shape (1, 2, 3, 2)", "               n_rep = 1"]
    assert lines[at + 3].startswith(f"               at 07_planted.py, line {line}, in repeat_kv: raise ShapeError(")


def test_each_function_is_reported_as_soon_as_it_is_checked(tmp_path):
    marker = tmp_path / "sdpa_started"
    path = write_workbook(tmp_path, "03", f"""
        import transformer as T
        from pathlib import Path
        def scaled_dot_product_attention(*args, **kwargs):
            Path({str(marker)!r}).touch()
            return T.scaled_dot_product_attention(*args, **kwargs)
        """)
    said = []
    check_file(path, "03", echo=lambda text: said.append((text, marker.exists())))
    assert [text.split()[0] for text, _ in said] == ["03_planted.py", "softmax", "scaled_dot_product_attention",
                                                     "additive_scores"]
    n = len(LESSON_SPECS["03"][0].cases())
    assert said[1] == (f"  {'softmax':<28}  passed ({n} cases)", False)  # said before SDPA's first case ran


def test_the_last_line_counts_the_run(tmp_path):
    write_workbook(tmp_path, "07")
    write_workbook(tmp_path, "03", "def softmax(x, axis=-1, mask=None):\n    return x\n")
    (tmp_path / "01_stubs.py").write_text((ROOT / "workbook" / "01_text_to_vectors.py").read_text())
    proc = subprocess.run([sys.executable, "-m", "transformer", "check", "all", "--workbook", str(tmp_path),
                           "--no-torch"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == "1 failed, 4 passed, 4 not written", proc.stdout  # 03: 1 + 2, 07: 2, 01: 4


def test_with_every_stub_untouched_the_last_line_says_where_to_start():
    reports = [check_file(ROOT / "workbook" / "03_attention.py", "03")]
    assert format_summary(reports) == ("no function is written yet: replace a stub's `raise NotImplementedError(…)` "
                                       "with your code (start with `softmax` in 03_attention.py), then run this again")


SOFTMAX_NO_MASK_YET = """
    def softmax(x, axis=-1, mask=None):
        if mask is not None:
            raise NotImplementedError("masks next")
        xf = x.astype(np.float32) if x.dtype == np.float16 else x
        e = np.exp(xf - xf.max(axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)
    """
SDPA_STUB = """
    def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
        raise NotImplementedError("to do")
    """
ADDITIVE_STUB = """
    def additive_scores(q, k, W_q, W_k, w):
        raise NotImplementedError("to do")
    """
SDPA_CALLING_SOFTMAX = """
    def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
        p = softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]), mask=mask)
        return (p @ v, p) if return_weights else p @ v
    """


@pytest.mark.parametrize("source, told", [
    (SOFTMAX_NO_MASK_YET + SDPA_STUB, "`softmax` is written in part: finish it"),
    (SDPA_STUB.replace("scaled_dot_product_attention", "softmax").replace(
        "(q, k, v, mask=None, *, scale=None, return_weights=False)", "(x, axis=-1, mask=None)") + SDPA_CALLING_SOFTMAX,
     "`scaled_dot_product_attention` calls `softmax`, which still reaches `raise NotImplementedError`: write that "
     "first"),
])
def test_work_begun_is_not_told_that_no_function_is_written(tmp_path, source, told):
    """A softmax written but for its masks, or an attention waiting on an unwritten softmax: the last line said "no
    function is written yet … start with `softmax`", to a learner who had written code."""
    report = check_file(write_workbook(tmp_path, "03", textwrap.dedent(source + ADDITIVE_STUB)), "03")
    assert format_summary([report]) == (f"nothing fails, and nothing passes whole yet: {told}, then run this again "
                                        "(0 failed, 0 passed, 3 not written or in part)"), format_summary([report])


@pytest.mark.skipif(sys.platform == "win32", reason="Ctrl-C is sent as POSIX's SIGINT")
def test_watch_checks_again_at_each_save_and_ctrl_c_ends_it_with_the_last_status(tmp_path):
    """`check 03 --watch`: the report, then, once the file is saved with its mistake mended, a line naming the file and
    the report again; Ctrl-C ends it with the last check's status and no 'interrupted' line."""
    import signal
    import threading

    path = write_workbook(tmp_path, "03", "def softmax(x, axis=-1, mask=None):\n    return x\n")
    # as a terminal starts it: Ctrl-C raises KeyboardInterrupt (an xdist worker ignores SIGINT, and its children
    # would inherit that)
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "check", "03", "--workbook", str(tmp_path),
                             "--no-torch", "--watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    timer = threading.Timer(120, proc.kill)  # a hung watch fails the test, not the suite
    timer.start()
    try:
        lines = []

        def until(text):
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if text in line:
                    return
            raise AssertionError(f"never printed {text!r}: {lines}")

        until("1 failed, 2 passed, 0 not written")
        path.write_text(path.read_text().replace("def softmax", "def _unused"))  # the package's softmax again
        until(f"{path.name} was saved: checking again (Ctrl-C stops)")
        until("every function written so far passes (3 passed, 0 not written)")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, proc.stderr.read()
        assert "interrupted" not in proc.stderr.read()
    finally:
        timer.cancel()
        proc.kill()
    assert sum(line.startswith("  softmax") for line in lines) == 2  # checked twice, FAILED then passed
