"""Run the package's cases on a learner's workbook file and say, function by function, what is still wrong.

    python -m transformer check 03          # workbook/03_attention.py
    python -m transformer check all

For each function: passed, not written yet (it still raises NotImplementedError), or failed — with each
failing case (the first few, then a count), what is wrong in it (the shape with the legend's names, the
first wrong entry with both values, which of several returned values is wrong) and, under the case it
explains, a hint where the failure has a known cause. A function that changes its input arrays in place
fails; one that calls a failing function of the same file is told to fix that one first. A traceback
inside the learner's code is shown as their file and line; nothing of the checker's. What the learner's
code prints is kept out of the report and summed up in one line. A file that does not import (a syntax
error, a missing module) is one line, and the other files are still checked. Each case has a time limit,
so a loop that never ends costs seconds, not the session; os._exit and os.abort, which would end the
check with no word, raise instead.
"""
from __future__ import annotations

import difflib
import dis
import importlib.util
import io
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import (specs_attention as A, specs_backward as G, specs_block as B, specs_cache as C, specs_counting as Q,
               specs_decoders as D, specs_flash as F, specs_flash_backward as H, specs_gqa as V, specs_io as I,
               specs_layers as L, specs_linear as N, specs_loss as E, specs_masks as K, specs_models as M,
               specs_online as O, specs_sampling as S, specs_sublayers as U, specs_tokenizers as P)
from .cases import Case, NotingNamespace, Spec
from .guards import TimeLimit, captured_output, exits_refused, guarded, peak_bytes, time_limit
from .in_place import argument_names, in_place_message, watched
from .compare import FLOAT32_DIGITS, KEEP_DTYPE, Problem, Tolerance, compare, tolerance_for
from .refusals import refusal_failure
from .report import (CaseFailure, FileReport, Result, failure_lines, file_line, file_notes, format_report, format_result,
                     name_width, short)

__all__ = ["LESSON_SPECS", "Result", "CaseFailure", "FileReport", "check_file", "check_function",
           "load_workbook_file", "TimeLimit", "time_limit", "captured_output", "watched", "workbook_files",
           "lesson_files", "format_report"]

LESSON_SPECS: dict[str, list[Spec]] = {
    "01": [P.MERGE_SYMBOLS, P.WORDPIECE, L.EMBED, L.LM_HEAD],
    "02": [L.SINUSOIDAL, L.LEARNED_POSITIONS, L.ROPE_ANGLES, L.ROPE_HALF, L.ROPE_INTERLEAVED],
    "03": [A.SOFTMAX, A.SDPA, A.ADDITIVE_SCORES],
    "04": [L.SPLIT_HEADS, L.MERGE_HEADS, L.MHA],
    "05": [L.CAUSAL_MASK, L.PADDING_MASK, L.SLIDING_WINDOW_MASK, K.STRIDED_MASK, K.FIXED_MASK, K.GLOBAL_MASK],
    "06": [C.KV_CACHE_UPDATE, K.DECODER_MASK],
    "07": [A.REPEAT_KV, V.QKV_HEADS],
    "08": [F.MERGE_STATS, O.ONLINE_STATS, F.ONLINE_UPDATE],
    "09": [F.FLASH, I.VISIBLE_TILES, I.STANDARD_IO, I.FLASH2_IO, H.FLASH_BACKWARD],
    "10": [B.LAYER_NORM, B.RMS_NORM, B.GELU, U.FFN, B.SWIGLU, U.RESIDUAL],
    "11": [S.FILTER_LOGITS, S.SAMPLE_NEXT],
    "12": [M.BERT_EMBEDDINGS, M.MEAN_POOL, M.L2_NORMALIZE],
    "13": [M.COUNT_PARAMETERS, Q.FORWARD_FLOPS, Q.ARITHMETIC_INTENSITY, M.KV_BYTES_PER_TOKEN],
    "14": [C.PAGED_WRITE, M.PAGED_ATTENTION, M.PAGED_MEMORY_REPORT],
    "15": [D.ENCODER_LAYER, D.DECODER_LAYER],
    "16": [D.PACK_DOCUMENTS, D.DOCUMENT_MASK, F.KEY_TILES],
    "17": [F.FRAGMENTS],
    "18": [E.CROSS_ENTROPY, E.CROSS_ENTROPY_BACKWARD, G.LM_HEAD_BACKWARD, G.RMS_NORM_BACKWARD, G.SWIGLU_BACKWARD,
           N.LINEAR_BACKWARD, N.MERGE_HEADS_BACKWARD, B.SOFTMAX_BACKWARD, B.SDPA_BACKWARD, G.ROPE_BACKWARD,
           N.SPLIT_HEADS_BACKWARD, G.EMBED_BACKWARD, N.DROPOUT, N.DROPOUT_BACKWARD, E.CLIP_BY_GLOBAL_NORM, E.LR_AT,
           B.ADAMW_STEP],
    "19": [D.INDUCTION_SCORES, D.INDUCTION_ACCURACY],
}
DEFAULT_TIME_LIMIT = 5.0  # seconds per case: every case is small; only a loop that never ends gets near it
VARIANT_CHECKS = 8  # failing cases compared with the known mistakes' answers: more only repeat what these say


def learner_line(exc: BaseException, *paths: Path) -> tuple[str, str]:
    """(line text, function name) of the last frame of the learner's files in exc's traceback, or ('', '')."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if any(_same_file(f.filename, p) for p in paths)]
    if not frames:
        return "", ""
    f = frames[-1]
    return f"{Path(f.filename).name}, line {f.lineno}, in {f.name}: {(f.line or '').strip()}", f.name


def _same_file(filename: str, path: Path) -> bool:
    try:
        return Path(filename).resolve() == path.resolve()
    except OSError:
        return False


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def _raised(exc: BaseException, path: Path, keep: int = 4) -> str:
    """'raised ValueError: …' with up to `keep` lines of the message, then the learner's line that raised."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > keep:
        lines = lines[:keep - 1] + [f"… ({len(lines) - keep + 1} more lines)"]
    head = f"raised {type(exc).__name__}" + (f": {short(lines[0])}" if lines else "")
    if isinstance(exc, EOFError):
        head += " (the checker types nothing: a checked function must not wait for input())"
    where, _ = learner_line(exc, path)
    return "\n".join([head] + [short(line) for line in lines[1:]] + ([f"at {where}"] if where else []))


def _load(path: Path, seconds) -> tuple[Any, str, list[str]]:
    """(module, '', lines it printed) or (None, one line saying why the file cannot be used, lines it printed)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read {path}: {first_line(e) or type(e).__name__}", []
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        text = (e.text or "").strip()
        return None, f"{path.name}, line {e.lineno}: syntax error: {e.msg}" + (f": {text}" if text else ""), []
    name = f"workbook_{path.stem}_{abs(hash(path.resolve()))}"
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path))
    out = io.StringIO()
    try:
        with time_limit(seconds), captured_output(out), exits_refused():
            exec(code, module.__dict__)
    except TimeLimit as e:
        return None, f"{path.name}: importing it {e}: is there a loop at the top level of the file?", []
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: B902 - anything the file raises, SystemExit included
        where, _ = learner_line(e, path)
        kind = "cannot import" if isinstance(e, ImportError) else f"raised {type(e).__name__}"
        return None, f"{where or path.name}: {kind} while loading: {first_line(e)}", []
    return module, "", out.getvalue().splitlines()


def load_workbook_file(path: Path, seconds: float | None = DEFAULT_TIME_LIMIT):
    """(module, '') or (None, one line saying why the file cannot be used)."""
    module, error, _ = _load(Path(path), seconds)
    return module, error


# --- one function -----------------------------------------------------------------------------------------
@dataclass
class _Run:
    kind: str  # "ok", "raised", "time"
    value: Any  # the learner's answer, or the exception
    changed: list  # the arguments the call changed in place
    printed: list  # the lines it printed


def _outcome(spec: Spec, obj, case: Case, seconds) -> _Run:
    """One call of the learner's object on a fresh copy of the case, its prints captured."""
    changed, out = [], io.StringIO()
    try:
        with guarded(seconds, out):
            value = spec.call(watched(obj, changed), case)
        return _Run("ok", value, changed, out.getvalue().splitlines())
    except TimeLimit as e:
        return _Run("time", e, changed, out.getvalue().splitlines())
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: B902 - the learner's code may raise anything, SystemExit included
        return _Run("raised", e, changed, out.getvalue().splitlines())


# tracemalloc records every allocation, each Python float included: a loop of plain-Python steps runs 5 to 25 times
# slower under it (a flash loop over the rows of a tile: 1 s, 10 s traced), the checker's cost, not the learner's
TRACED_SLOWDOWN = 10


def _held(spec: Spec, obj, case: Case, seconds) -> int | None:
    """The bytes a call holds at its peak (tracemalloc), measured in a second call once the first, untraced, returned
    the right values within the time limit: so the limit times the learner's code, not tracemalloc's bookkeeping, and
    the copies `watched` keeps of the arguments (the checker's) are not counted. None: not returned within
    TRACED_SLOWDOWN times the limit."""
    try:
        with guarded(seconds and seconds * TRACED_SLOWDOWN, io.StringIO()), peak_bytes() as held:
            spec.call(obj, case)
    except TimeLimit:
        return None
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: B902 - it returned the first time: a second call that does not says nothing new
        return 0
    return held[0]


def _memory_problem(spec: Spec, obj, case: Case, seconds) -> Problem | None:
    """What is wrong with the bytes a case's call holds, where the case limits them."""
    if case.max_bytes is None:
        return None
    held = _held(spec, obj, case, seconds)
    if held is None:
        limit = seconds * TRACED_SLOWDOWN
        return Problem(f"right values, but its memory could not be counted: with tracemalloc counting each allocation, "
                       f"which slows every plain-Python step, the call took longer than {limit:g} s — do a tile's "
                       "arithmetic with NumPy arrays, not number by number", "memory")
    if held > case.max_bytes:
        return Problem(f"right values, but the call held {held / 1e6:.1f} MB at its peak, over the "
                       f"{case.max_bytes / 1e6:.1f} MB allowed here: {case.memory_note}", "memory")
    return None


XP_UNUSED = ("right values, but built with np although `xp` was given: make the arrays with the namespace the "
             "caller names (xp = namespace(xp), then xp.arange …), so that with xp=cupy they are made on the GPU")


def _variant_matches(spec: Spec, mistake, case, got) -> bool:
    try:
        with time_limit(DEFAULT_TIME_LIMIT), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            wrong = spec.call(mistake.variant, case)
    except Exception:  # noqa: BLE001 - a variant that cannot run on this case says nothing
        return False
    dims, names = spec.labels_for(wrong)
    return compare(got, wrong, dims, case.tol, names) is None


def _explain(spec: Spec, failures: list[CaseFailure], passed: list[Case]) -> None:
    """Give each failing case its known cause, first in its hints: the pattern of the exception it raised, or a
    known mistake whose answer equals the learner's. Then a tag's hint (only GQA fails, only float16 fails …) to
    the failures left unexplained, when every one of them carries the tag and no passing case does; never to a
    wrong shape, dtype or kind of answer, and not when a loop that never ends stopped the checking."""
    def matches(i, f, m) -> bool:
        if f.kind == "raised":  # a hint that says "only the GQA cases fail" must be true: the tag on every failure
            # of its sort, one that raised or got wrong values (a wrong kind of answer, a tuple for one array, is
            # another slip, told by its own line)
            return m.matches_exception(f.value, f.case) and (not m.hint.startswith("only ") or all(
                m.tag in g.case.tags for g in failures if g.kind in ("value", "raised")))
        # an answer to an input that must be refused (a slice past the end) may equal a slip's: no variant is tried
        return (f.kind not in ("time", "in place", "xp", "memory", "refused") and m.variant is not None
                and i < VARIANT_CHECKS and _variant_matches(spec, m, f.case, f.value))
    matched = [[m for m in spec.mistakes if matches(i, f, m)] for i, f in enumerate(failures)]
    # a failure past the first VARIANT_CHECKS is tried against the mistakes that explained those, so that a tag's
    # hint ("the mask is not applied") is not given to the 9th failure of a mistake that explains all of them
    explained = {id(m) for found in matched for m in found}
    found_early = [m for m in spec.mistakes if id(m) in explained]
    for i, f in enumerate(failures[VARIANT_CHECKS:], VARIANT_CHECKS):
        if f.kind == "value" and not matched[i]:
            matched[i] = [m for m in found_early if m.variant is not None and _variant_matches(spec, m, f.case, f.value)]
    # where two mistakes give the same answer on a case (no V, or no L, when L = 2), the one that explains more cases
    votes = Counter(id(m) for found in matched for m in found)  # how many failures each mistake explains
    unexplained = []
    for f, found in zip(failures, matched):
        if found:
            f.hints.insert(0, max(found, key=lambda m: votes[id(m)]).hint)  # max keeps the first of equals
        elif f.kind in ("value", "raised", "refused") and FLOAT32_DIGITS not in f.hints:
            unexplained.append(f)
    if not passed or not unexplained or any(f.kind == "time" for f in failures):
        return
    passing_tags = set().union(*(case.tags for case in passed))
    tagged = [m for m in spec.mistakes if m.tag and m.variant is None and m.raises is None and m.tag not in passing_tags]
    for m in tagged:
        if all(m.tag in f.case.tags for f in unexplained):
            for f in unexplained:
                f.hints.insert(0, m.hint)
            return
    # two slips at once (the causal mask and the activation ignored): each failure whose tags name one known slip
    # alone gets its hint; a hint that says "only … fail" claims every failure, so it is left to the loop above
    for f in unexplained:
        own = [m for m in tagged if m.tag in f.case.tags and not m.hint.startswith("only ")]
        if len({m.tag for m in own}) == 1:
            f.hints.insert(0, own[0].hint)


def _dtype_rule(spec: Spec, case: Case) -> str:
    if spec.dtype_rule is not None:
        return spec.dtype_rule
    return KEEP_DTYPE if any(a.dtype.kind == "f" for a in _arrays((case.args, case.kwargs))) else ""


def _arrays(value, depth=3):
    """The NumPy arrays in value: itself, or inside its tuples, lists and dicts (a few levels down)."""
    if isinstance(value, np.ndarray):
        yield value
    elif depth and isinstance(value, (tuple, list, dict)):
        for item in (value.values() if isinstance(value, dict) else value):
            yield from _arrays(item, depth - 1)


def _printed_note(printed: list[tuple[str, list]]) -> str:
    """'it printed 68 lines in 7 cases; the first, in case "…": …', or '' when it printed nothing."""
    printing = [(label, lines) for label, lines in printed if lines]
    if not printing:
        return ""
    total, label, lines = sum(len(ls) for _, ls in printing), printing[0][0], printing[0][1]
    return (f"it printed {total} line{'s' * (total != 1)} in {len(printing)} case{'s' * (len(printing) != 1)}; "
            f'the first, in case "{label}": {short(lines[0].strip(), 100)}')


def check_function(spec: Spec, obj, path: Path, seconds=DEFAULT_TIME_LIMIT, use_torch=False, progress=None) -> Result:
    """Run every case of `spec` on the learner's `obj` and say what is wrong, if anything. progress(i, n, counting),
    when given, is called before case i of n is run, and again with counting=True before its memory is counted."""
    failures, passed, printed, unwritten = [], [], [], []
    shown = spec.shown or spec.name
    writes = set(spec.writes or ())
    progress = progress or (lambda i, n, counting: None)
    cases = list(spec.cases())
    for i, case in enumerate(cases, 1):
        progress(i, len(cases), False)
        ref_changed = []
        expected = None if case.refuses else spec.call(watched(spec.reference, ref_changed), case)
        dims, names = spec.labels_for(expected)
        noting = case.kwargs.get("xp")
        noting = noting if isinstance(noting, NotingNamespace) else None
        if noting is not None:
            noting.read.clear()  # what the reference read is not the learner's
        run = _outcome(spec, obj, case, seconds)
        printed.append((case.label, run.printed))
        if run.kind == "raised" and isinstance(run.value, NotImplementedError):
            _, fn = learner_line(run.value, path)
            if fn and fn not in (spec.name, shown.split(".")[-1], "advance"):  # a class's stub: its method
                return Result(shown, "not written", f"not checked yet: it calls `{fn}`, which still reaches "
                                                          "`raise NotImplementedError`")
            unwritten.append(case)  # a part still to write: the cases that do not reach it are checked
            continue
        if run.kind == "time":
            where, _ = learner_line(run.value, path)
            failures.append(CaseFailure(case.label, f"{run.value} on this case: a loop that never ends? (checking "
                                        "stopped here)" + (f"\nat {where}" if where else ""), "time", case=case))
            break
        if case.refuses is not None:  # no answer to compare: the input must be refused
            said = _raised(run.value, path) if run.kind == "raised" else ""
            refused = refusal_failure(case, run.kind, run.value, said)
            (failures.append(refused) if refused else passed.append(case))
            continue
        if run.kind == "raised":
            failures.append(CaseFailure(case.label, _raised(run.value, path), "raised", case=case, value=run.value))
            continue
        problem = compare(run.value, expected, dims, case.tol, names, dtype_rule=_dtype_rule(spec, case))
        if problem is None and use_torch and spec.torch is not None:
            problem = _torch_problem(spec, case, run.value, dims, names)
        if problem is None and noting is not None and not noting.read:
            problem = Problem(XP_UNUSED, "xp")
        if problem is None and case.max_bytes is not None:
            progress(i, len(cases), True)
            problem = _memory_problem(spec, obj, case, seconds)
        changed = [(k, n) for k, n in zip(run.changed, argument_names(spec.reference, run.changed))
                   if k not in ref_changed and n not in writes]  # (position or keyword, name) of each
        given = dict(enumerate(case.args)) | case.kwargs
        a_list = next((n for k, n in changed if isinstance(given.get(k), list)), None)
        in_place = in_place_message([n for _, n in changed], a_list) if changed else ""
        if problem is None and not in_place:
            passed.append(case)
        elif problem is None:
            failures.append(CaseFailure(case.label, in_place, "in place", case=case, value=run.value))
        else:
            failures.append(CaseFailure(case.label, str(problem), problem.kind,
                                        [h for h in (problem.hint, in_place) if h],
                                        case=case, value=run.value))
    note = _printed_note(printed)
    if unwritten and not passed and not failures:
        return Result(shown, "not written", "not written yet")
    partial = (f"{len(unwritten)} case{'s' * (len(unwritten) != 1)} still reach{'es' * (len(unwritten) == 1)} "
               f"`raise NotImplementedError` (the first: \"{unwritten[0].label}\")" if unwritten else "")
    if not failures and unwritten:
        return Result(shown, "not written", f"written in part: {len(passed)} of {len(passed) + len(unwritten)} cases "
                      f"pass; {partial}", cases=len(passed), printed=note)
    if not failures:
        return Result(shown, "passed", cases=len(passed), printed=note)
    _explain(spec, failures, passed)
    return Result(shown, "failed", "\n".join(failure_lines(failures, hints=False)),
                  list(dict.fromkeys(h for f in failures for h in f.hints)), len(passed) + len(failures),
                  len(failures), failures, printed=note, unwritten=partial)


def _looser(tol: Tolerance | None, expected) -> Tolerance | None:
    """A case's own tolerance where it is looser than its dtype's, for the comparison with torch: the package's erf,
    written out, is 1.5e-7 from torch's, and a case that allows for it must allow for it against torch too; a
    tighter one (a float16 softmax rounded once) is the package's alone."""
    if tol is None:
        return None
    base = tolerance_for(getattr(expected, "dtype", np.float64) if not isinstance(expected, tuple) else np.float64)
    return Tolerance((max(tol.rtol, base.rtol), max(tol.atol, base.atol)))


def _torch_problem(spec, case, got, dims, names) -> Problem | None:
    try:
        expected = spec.torch(case)
    except Exception:  # noqa: BLE001 - torch absent or a case torch cannot run: the package's value stands
        return None
    if expected is None:
        return None
    problem = compare(got, expected, dims, _looser(case.tol, expected), names, dtype_rule=_dtype_rule(spec, case))
    return None if problem is None else Problem(f"agrees with the package but not with torch: {problem}",
                                                problem.kind)


def _globals_read(obj, module, seen: set) -> set[str]:
    """The global names obj's code reads, and those read by the functions and classes of the same file it reads."""
    codes = ([f.__code__ for f in vars(obj).values() if hasattr(f, "__code__")] if isinstance(obj, type)
             else [obj.__code__] if hasattr(obj, "__code__") else [])
    names = set()
    while codes:
        code = codes.pop()
        names |= {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        codes += [c for c in code.co_consts if hasattr(c, "co_code")]
    for name in sorted(names - seen):
        seen.add(name)
        value = module.__dict__.get(name)
        if value is not None and value is not obj and getattr(value, "__module__", None) == module.__name__:
            names |= _globals_read(value, module, seen)
    return names


def check_file(path: Path, lesson: str, seconds=DEFAULT_TIME_LIMIT, use_torch=False, echo=None, starting=None,
               crashed=None, progress=None) -> FileReport:
    """Every function of the lesson's workbook file, each on the package's cases. echo(text), when given, is
    called with the file's line and with each function's lines as soon as they are known; starting(name) before
    each function is called ("" before the file is imported); progress(name, i, n, counting) before each of its
    cases (check_function's). crashed: {name: message} for the functions that
    crashed Python in an earlier process ("" for the import): each fails with its message and is not called."""
    report, path = FileReport(Path(path), lesson), Path(path)
    say, starting, crashed = echo or (lambda text: None), starting or (lambda name: None), crashed or {}
    say(file_line(report))
    starting("")
    module, report.error, printed = (None, crashed[""], []) if "" in crashed else _load(path, seconds)
    if printed:
        report.note = (f"loading it printed {len(printed)} line{'s' * (len(printed) != 1)}; the first: "
                       f"{short(printed[0].strip(), 100)}")
    for line in file_notes(report):
        say(line)
    if module is None:
        return report
    width, failing = name_width(LESSON_SPECS[lesson]), []
    for spec in LESSON_SPECS[lesson]:
        obj = getattr(module, spec.name, None)
        if obj is None:
            result = absent(spec.name, module, path, lesson)
        elif spec.name in crashed:
            result = Result(spec.name, "failed", crashed[spec.name])
        else:
            starting(spec.name)
            each_case = progress and (lambda i, n, counting, name=spec.name: progress(name, i, n, counting))
            result = check_function(spec, obj, path, seconds, use_torch, each_case)
            if result.status == "failed" and failing:
                called = [name for name in failing if name in _globals_read(obj, module, {spec.name})]
                if called:
                    result.note = f"it calls `{called[0]}`, which fails: fix that first"
        if result.status in ("failed", "missing"):
            failing.append(spec.name)
        report.results.append(result)
        say("\n".join(format_result(result, width)))
    return report


WORKBOOK = Path(__file__).resolve().parents[2] / "workbook"  # the course's stubs, in a clone of the repository


def absent(name: str, module, path: Path, lesson: str) -> Result:
    """A function the learner's file does not define. A function of a close name is there: a renamed stub, a failure
    that names it. None is: a stub added to the workbook after this copy of it was made, not written yet, and where
    its stub is."""
    defined = [k for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module.__name__]
    near = difflib.get_close_matches(name, defined, n=1, cutoff=0.75)
    if near:
        return Result(name, "missing", f"no `{name}` in {path.name}, but a `{near[0]}`: keep the stub's name")
    stub = next(iter(sorted(WORKBOOK.glob(f"{lesson}_*.py"))), None)
    where = f"workbook/{stub.name}" if stub is not None else f"the course's workbook/{lesson}_*.py"
    return Result(name, "not written", f"not in {path.name}: the workbook gained it after this copy was made; copy its "
                                       f"stub from {where}")


def lesson_files(folder: Path) -> dict[str, list[Path]]:
    """{'03': [workbook/03_attention.py], …}: every NN_*.py in the folder for each lesson the checker knows."""
    found: dict[str, list[Path]] = {}
    for p in sorted(Path(folder).glob("[0-9][0-9]_*.py")):
        if p.name[:2] in LESSON_SPECS:
            found.setdefault(p.name[:2], []).append(p)
    return found


def workbook_files(folder: Path, lessons=None) -> dict[str, Path]:
    """{'03': workbook/03_attention.py, …} for the lessons the checker knows (those in `lessons`, when given).
    Two files for one lesson (a copy kept beside the work) are refused by name: which one is the work, the checker
    cannot tell, and checking the other would report on code the learner is not editing."""
    found = lesson_files(folder)
    for lesson, paths in sorted(found.items()):
        if len(paths) > 1 and (lessons is None or lesson in lessons):
            names = ", ".join(p.name for p in paths)
            raise ValueError(f"lesson {lesson} has {len(paths)} files in {folder}: {names} — the checker reads one "
                             "file a lesson: rename or move the others out of the folder")
    return {lesson: paths[0] for lesson, paths in found.items() if lessons is None or lesson in lessons}


def torch_version() -> str | None:
    """torch's version when it can be imported (the suite's reference), else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception:  # noqa: BLE001 - torch absent or broken: no reference
        return None
    return torch.__version__.split("+")[0]
