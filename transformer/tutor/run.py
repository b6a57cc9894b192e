"""Run the package's cases on a learner's workbook file and say, function by function, what is still wrong.

    python -m transformer check 03          # workbook/03_attention.py
    python -m transformer check all

For each function: passed, not written yet (it still raises NotImplementedError), or failed — with the
first case that fails, what is wrong in it (the shape with the legend's names, the first wrong entry with
both values), and a hint where the failure has a known cause. A traceback inside the learner's code is
shown as their file and line; nothing of the checker's. A file that does not import (a syntax error, a
missing module) is one line, and the other files are still checked. Each case has a time limit, so a
loop that never ends costs seconds, not the session.
"""
from __future__ import annotations

import importlib.util
import signal
import threading
import traceback
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import specs_attention as A, specs_block as B, specs_flash as F, specs_layers as L
from .cases import Spec
from .compare import compare

__all__ = ["LESSON_SPECS", "Result", "FileReport", "check_file", "check_function", "load_workbook_file",
           "TimeLimit", "time_limit", "workbook_files", "format_report"]

LESSON_SPECS: dict[str, list[Spec]] = {
    "01": [L.EMBED, L.LM_HEAD],
    "02": [L.SINUSOIDAL, L.ROPE_HALF, L.ROPE_INTERLEAVED],
    "03": [A.SOFTMAX, A.SDPA],
    "04": [L.SPLIT_HEADS, L.MERGE_HEADS, L.MHA],
    "05": [L.CAUSAL_MASK, L.PADDING_MASK, L.SLIDING_WINDOW_MASK],
    "06": [L.KV_CACHE_UPDATE],
    "07": [A.REPEAT_KV],
    "08": [F.MERGE_STATS, F.ONLINE_UPDATE],
    "09": [F.FLASH],
    "10": [B.LAYER_NORM, B.RMS_NORM, B.SWIGLU],
    "11": [B.FILTER_LOGITS],
    "18": [B.SOFTMAX_BACKWARD, B.SDPA_BACKWARD, B.ADAMW_STEP],
}
DEFAULT_TIME_LIMIT = 5.0  # seconds per case: every case is small; only a loop that never ends gets near it


class TimeLimit(Exception):
    """A case ran past its time limit."""


@contextmanager
def time_limit(seconds: float | None):
    """Raise TimeLimit inside the block after `seconds` (on the main thread of a Unix process; else no limit)."""
    usable = (seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise TimeLimit(f"took longer than {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Result:
    """What the checker found for one function."""
    name: str
    status: str  # "passed", "not written", "failed", "missing"
    message: str = ""
    hints: list[str] = field(default_factory=list)
    cases: int = 0  # cases run
    failed: int = 0


@dataclass
class FileReport:
    path: Path
    lesson: str
    results: list[Result] = field(default_factory=list)
    error: str = ""  # the file could not be imported

    @property
    def ok(self) -> bool:
        return not self.error and all(r.status in ("passed", "not written") for r in self.results)


def _where(exc: BaseException, path: Path) -> tuple[str, str]:
    """(line text, function name) of the last frame of the learner's file in exc's traceback, or ('', '')."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _same_file(f.filename, path)]
    if not frames:
        return "", ""
    f = frames[-1]
    return f"{path.name}, line {f.lineno}, in {f.name}: {(f.line or '').strip()}", f.name


def _same_file(filename: str, path: Path) -> bool:
    try:
        return Path(filename).resolve() == path.resolve()
    except OSError:
        return False


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def load_workbook_file(path: Path, seconds: float | None = DEFAULT_TIME_LIMIT):
    """(module, '') or (None, one line saying why the file cannot be used)."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read {path}: {_first_line(e) or type(e).__name__}"
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        text = (e.text or "").strip()
        return None, f"{path.name}, line {e.lineno}: syntax error: {e.msg}" + (f": {text}" if text else "")
    name = f"workbook_{path.stem}_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        with time_limit(seconds):
            exec(code, module.__dict__)
    except TimeLimit as e:
        return None, f"{path.name}: importing it {e}: is there a loop at the top level of the file?"
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: B902 - anything the file raises, SystemExit included
        where, _ = _where(e, path)
        kind = "cannot import" if isinstance(e, ImportError) else f"raised {type(e).__name__}"
        return None, f"{where or path.name}: {kind} while loading: {_first_line(e)}"
    return module, ""


def _outcome(spec: Spec, obj, case, path: Path, seconds):
    """('ok', result) or ('raised', exc) or ('time', exc) for one call of the learner's object."""
    try:
        with time_limit(seconds), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # an overflow warning from the learner's exp: the hint says more
            return "ok", spec.call(obj, case)
    except TimeLimit as e:
        return "time", e
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: B902 - the learner's code may raise anything, SystemExit included
        return "raised", e


def _variant_matches(spec: Spec, mistake, case, got) -> bool:
    try:
        with time_limit(DEFAULT_TIME_LIMIT), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            wrong = spec.call(mistake.variant, case)
    except Exception:  # noqa: BLE001 - a variant that cannot run on this case says nothing
        return False
    dims, names = spec.labels_for(wrong)
    return compare(got, wrong, dims, names=names) is None


def _hints(spec: Spec, failures, passed) -> list[str]:
    """A known cause for each failing case, in order, at most three in all: the pattern of the exception it
    raised, a known mistake whose answer equals the learner's, or else a tag of the case that no passing case
    carries (only GQA fails, only float16 fails …)."""
    passing_tags = set().union(*(case.tags for case in passed)) if passed else None
    found = []
    for i, (case, kind, value) in enumerate(failures):
        hint = None
        for m in spec.mistakes:
            if kind == "raised" and m.matches_exception(value, case):
                hint = m.hint
            elif kind == "wrong" and m.variant is not None and i < 4 and _variant_matches(spec, m, case, value):
                hint = m.hint
            if hint:
                break
        if hint is None and passing_tags is not None:
            hint = next((m.hint for m in spec.mistakes if m.tag and m.variant is None and m.raises is None
                         and m.tag in case.tags and m.tag not in passing_tags), None)
        if hint and hint not in found:
            found.append(hint)
        if len(found) == 3:
            break
    return found


def check_function(spec: Spec, obj, path: Path, seconds=DEFAULT_TIME_LIMIT, use_torch=False) -> Result:
    """Run every case of `spec` on the learner's `obj` and say what is wrong, if anything."""
    failures, passed, first_message = [], [], ""
    shown = spec.shown or spec.name
    cases = spec.cases()
    for case in cases:
        expected = spec.call(spec.reference, case)
        dims, names = spec.labels_for(expected)
        kind, value = _outcome(spec, obj, case, path, seconds)
        if kind == "raised" and isinstance(value, NotImplementedError):
            _, fn = _where(value, path)
            if fn and fn not in (spec.name, "update", "advance"):
                return Result(shown, "not written", f"not checked yet: it calls `{fn}`, which is not written yet")
            return Result(shown, "not written", "not written yet")
        if kind == "time":
            failures.append((case, kind, value))
            first_message = first_message or (f"{value} on this case: a loop that never ends? (checking stopped "
                                              "here)")
            break
        if kind == "raised":
            where, _ = _where(value, path)
            message = f"raised {type(value).__name__}: {_short(_first_line(value))}" + (f"\n    at {where}" if where else "")
            failures.append((case, kind, value))
            first_message = first_message or message
            continue
        problem = compare(value, expected, dims, names=names)
        if problem is None and use_torch and spec.torch is not None:
            problem = _torch_problem(spec, case, value, dims, names)
        if problem is None:
            passed.append(case)
        else:
            failures.append((case, "wrong", value))
            first_message = first_message or problem
    if not failures:
        return Result(shown, "passed", cases=len(passed))
    label = failures[0][0].label
    return Result(shown, "failed", f'on case "{label}":\n    {first_message}', _hints(spec, failures, passed),
                  cases=len(passed) + len(failures), failed=len(failures))


def _torch_problem(spec, case, got, dims, names) -> str | None:
    try:
        expected = spec.torch(case)
    except Exception:  # noqa: BLE001 - torch absent or a case torch cannot run: the package's value stands
        return None
    if expected is None:
        return None
    problem = compare(got, expected, dims, names=names)
    return None if problem is None else f"agrees with the package but not with torch: {problem}"


def check_file(path: Path, lesson: str, seconds=DEFAULT_TIME_LIMIT, use_torch=False) -> FileReport:
    """Every function of the lesson's workbook file, each on the package's cases."""
    report = FileReport(Path(path), lesson)
    module, error = load_workbook_file(path, seconds)
    if module is None:
        report.error = error
        return report
    for spec in LESSON_SPECS[lesson]:
        obj = getattr(module, spec.name, None)
        if obj is None:
            report.results.append(Result(spec.name, "missing", f"no `{spec.name}` in {Path(path).name}: keep the "
                                                                "stub's name"))
            continue
        report.results.append(check_function(spec, obj, Path(path), seconds, use_torch))
    return report


def workbook_files(folder: Path) -> dict[str, Path]:
    """{'03': workbook/03_attention.py, …} for the lessons the checker knows."""
    found = {}
    for p in sorted(Path(folder).glob("[0-9][0-9]_*.py")):
        if p.name[:2] in LESSON_SPECS:
            found[p.name[:2]] = p
    return found


MARK = {"passed": "passed", "not written": "not written yet", "failed": "FAILED", "missing": "MISSING"}


def format_report(report: FileReport) -> str:
    """What a learner reads for one file: a line per function, and under a failure what is wrong and why."""
    lines = [f"{report.path.name}  (lesson {report.lesson})"]
    if report.error:
        return "\n".join(lines + [f"  could not be checked: {report.error}"])
    width = max(len(r.name) for r in report.results)
    for r in report.results:
        if r.status == "passed":
            lines.append(f"  {r.name:<{width}}  passed ({r.cases} cases)")
        elif r.status == "not written":
            lines.append(f"  {r.name:<{width}}  {r.message}")
        else:
            count = f" ({r.failed} of {r.cases} cases fail)" if r.cases else ""
            head, *rest = r.message.split("\n")
            lines.append(f"  {r.name:<{width}}  {MARK[r.status]}{count} {head}".rstrip())
            lines += [f"  {'':<{width}}  {line.strip()}" for line in rest]
            lines += [f"  {'':<{width}}  hint: {h}" for h in r.hints]
    return "\n".join(lines)


def torch_version() -> str | None:
    """torch's version when it can be imported (the suite's reference), else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception:  # noqa: BLE001 - a broken torch is no reference
        return None
    return torch.__version__.split("+")[0]
