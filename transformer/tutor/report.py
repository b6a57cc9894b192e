"""What a learner reads: a line per function, each failing case under it with the hints that explain it, and a
summary line for the whole run.

    softmax                       passed (8 cases)
    scaled_dot_product_attention  FAILED (2 of 13 cases fail)
                                  case "GQA: …": out: first wrong entry at [b=0, h=1, n_q=0, d_h=0]: …
                                    hint: …
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CaseFailure", "Result", "FileReport", "SHOWN", "short", "name_width", "failure_lines", "format_result",
           "file_line", "file_notes", "format_report", "format_summary"]

SHOWN = 4  # failing cases told one by one under a function; the others are counted
MARK = {"passed": "passed", "not written": "not written yet", "failed": "FAILED", "missing": "MISSING"}


def short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass
class CaseFailure:
    """One failing case: its label, what is wrong (a sentence; then maybe more lines: an exception's, the learner's
    line that raised) and the hints that explain it, the known mistake's first."""
    label: str
    message: str
    kind: str = "value"  # a compare Problem's kind ('value', 'shape', 'dtype' …), or 'raised', 'time', 'in place',
    # 'refused' (an input to refuse was answered)
    hints: list[str] = field(default_factory=list)
    case: Any = field(default=None, repr=False)  # the Case
    value: Any = field(default=None, repr=False)  # the learner's answer, or the exception it raised


@dataclass
class Result:
    """What the checker found for one function."""
    name: str
    status: str  # "passed", "not written", "failed", "missing"
    message: str = ""
    hints: list[str] = field(default_factory=list)  # every hint, in the order of the cases they explain
    cases: int = 0  # cases run
    failed: int = 0
    failures: list[CaseFailure] = field(default_factory=list)  # every failing case, in order
    note: str = ""  # "it calls `split_heads`, which fails: fix that first"
    printed: str = ""  # what the learner's print() calls wrote, summed up in one line
    unwritten: str = ""  # the cases that reach a part still raising NotImplementedError, in one line


@dataclass
class FileReport:
    path: Path
    lesson: str
    results: list[Result] = field(default_factory=list)
    error: str = ""  # the file could not be imported
    note: str = ""  # what importing it printed

    @property
    def ok(self) -> bool:
        return not self.error and all(r.status in ("passed", "not written") for r in self.results)


def name_width(specs) -> int:
    """The width of the name column for a file's functions."""
    return max(len(name) for s in specs for name in (s.name, s.shown or s.name))


def failure_lines(failures: list[CaseFailure], limit: int = SHOWN, hints: bool = True) -> list[str]:
    """A line per failing case (cases failing with the same words told once), each hint under the first case it
    explains; the first `limit` of them, preferring cases that bring a hint not told yet, then a count."""
    groups: list[tuple[str, list, list]] = []  # (message, labels, hints)
    for f in failures:
        same = next((g for g in groups if g[0] == f.message and g[2] == f.hints), None)
        if same:
            same[1].append(f.label)
        else:
            groups.append((f.message, [f.label], list(f.hints)))
    chosen, seen = [], set()
    for i, g in enumerate(groups):
        if len(chosen) < limit and any(h not in seen for h in g[2]):
            chosen.append(i)
            seen.update(g[2])
    chosen += [i for i in range(len(groups)) if i not in chosen][:max(0, limit - len(chosen))]
    lines, told = [], set()
    for message, labels, group_hints in (groups[i] for i in sorted(chosen)):
        first, *rest = message.split("\n")
        more = f" (and {len(labels) - 1} more)" if len(labels) > 1 else ""
        lines.append(f'case "{labels[0]}"{more}: {first}')
        lines += [f"  {line}" for line in rest]
        if hints:
            lines += [f"  hint: {h}" for h in group_hints if h not in told]
            told.update(group_hints)
    hidden = sum(len(groups[i][1]) for i in range(len(groups)) if i not in chosen)
    if hidden:
        lines.append(f"… and {hidden} more failing case{'s' * (hidden != 1)}")
    return lines


def format_result(r: Result, width: int, hints: bool = True) -> list[str]:
    """The lines of one function: its name and answer, then what is wrong in each failing case."""
    head, pad = f"  {r.name:<{width}}  ", f"  {'':<{width}}  "
    if r.status == "passed":
        lines = [f"{head}passed ({r.cases} cases)"]
    elif r.status == "not written":
        lines = [f"{head}{r.message}"]
    elif r.failures:
        lines = [f"{head}FAILED ({r.failed} of {r.cases} cases fail)" + (f": {r.note}" if r.note else "")]
        lines += [pad + line for line in failure_lines(r.failures, 1 if r.note else SHOWN, hints)]
    else:  # missing, or a result built without its cases
        count = f" ({r.failed} of {r.cases} cases fail)" if r.cases else ""
        first, *rest = r.message.split("\n")
        lines = [f"{head}{MARK[r.status]}{count} {first}".rstrip()] + [pad + line.strip() for line in rest]
        lines += [f"{pad}hint: {h}" for h in r.hints] if hints else []
    lines += [f"{pad}note: {text}" for text in (r.unwritten, r.printed) if text]
    return lines


def file_line(report: FileReport) -> str:
    """The file's own line, above its functions'."""
    return f"{report.path.name}  (lesson {report.lesson})"


def file_notes(report: FileReport) -> list[str]:
    """Under the file's line: why it could not be checked, or what importing it printed."""
    if report.error:
        first, *rest = report.error.split("\n")
        return [f"  could not be checked: {first}"] + [f"    {line}" for line in rest]
    return [f"  note: {report.note}"] if report.note else []


def format_report(report: FileReport) -> str:
    """What a learner reads for one file: a line per function, and under a failure what is wrong and why."""
    lines = [file_line(report)] + file_notes(report)
    if report.error:
        return "\n".join(lines)
    width = max((len(r.name) for r in report.results), default=0)
    for r in report.results:
        lines += format_result(r, width)
    return "\n".join(lines)


def format_summary(reports: list[FileReport]) -> str:
    """The last line of a run: '9 failed, 15 passed, 2 not written', or what to do when nothing is written."""
    counts = Counter(r.status for report in reports for r in report.results)
    failed, passed, todo = counts["failed"] + counts["missing"], counts["passed"], counts["not written"]
    unchecked = sum(1 for report in reports if report.error)
    if failed or unchecked:
        counted = f"{failed} failed, {passed} passed, {todo} not written"
        return counted + (f"; {unchecked} file{'s' * (unchecked != 1)} did not load" if unchecked else "")
    if not passed:
        begun = [r for report in reports for r in report.results if r.status == "not written" and r.message
                 and r.message != "not written yet" and not r.message.startswith("not in ")]  # written in part,
        # or waiting on a function not written yet; not a stub the learner's copy does not have
        if begun:
            part = next((r for r in begun if r.message.startswith("written in part")), None)
            what = (f"`{part.name}` is written in part: finish it" if part else
                    f"`{begun[0].name}` " + begun[0].message.removeprefix("not checked yet: it ") + ": write that first")
            return (f"nothing fails, and nothing passes whole yet: {what}, then run this again (0 failed, 0 passed, "
                    f"{todo} not written or in part)")
        first = next((report for report in reports if report.results), None)
        start = f" (start with `{first.results[0].name}` in {first.path.name})" if first else ""
        return (f"no function is written yet: replace a stub's `raise NotImplementedError(…)` with your code{start}, "
                "then run this again")
    return f"every function written so far passes ({passed} passed, {todo} not written)"
