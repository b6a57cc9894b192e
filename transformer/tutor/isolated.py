"""The check in a child process, so that code which crashes Python itself (ctypes, an `as_strided` view past its
array) fails one function, at the learner's line, and the check goes on with the next.

    reports = check_isolated(files, ["03", "05"], seconds=5, no_torch=False, say=print)

The child (`python -m transformer.tutor.isolated`, its job as JSON on stdin) runs `check_file` on each lesson and
writes what a learner reads, a line at a time, behind a marker on its stdout. Before each function it writes that
function's name. When it dies of a signal, the parent knows which function was running, reads the learner's line
from the fault handler's dump on the child's stderr, and starts a new child from that lesson, which reports the
function as failed without calling it. The lines already printed are not printed again.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .report import FileReport, Result

__all__ = ["check_isolated", "crash_message"]

MARK = "\x1etutor:"  # a record separator: a learner's own output is unlikely to hold it
WHY = {"SIGSEGV": ("a segmentation fault", "a read or write outside the memory an array owns: an as_strided view "
                    "whose shape or strides reach past its array, or a bad pointer through ctypes?"),
       "SIGBUS": ("a bus error", "a read of memory that is not there: an as_strided view past its array, or a file "
                  "mapped and then cut short?"),
       "SIGFPE": ("an arithmetic error", "an integer division by zero in compiled code?"),
       "SIGILL": ("an illegal instruction", "a compiled extension built for another processor?"),
       "SIGKILL": ("killed", "the system ends a process that takes too much memory: an n × n array for a large n, "
                   "or a list that never stops growing?")}


def crash_message(returncode: int, stderr: str, path: Path, importing: bool = False) -> str:
    """What a learner reads when their function (or their file, importing) ended Python: the signal, their line
    (the innermost frame of their file in the fault handler's dump), and why it usually comes."""
    name = _signal_name(returncode)
    plain, why = WHY.get(name, ("", "compiled code it called went wrong"))
    frames = re.findall(r'File "(.*)", line (\d+) in (\S+)', stderr)
    mine = next(((int(line), fn) for file, line, fn in frames if Path(file).name == Path(path).name), None)
    where = f" at {Path(path).name}, line {mine[0]}, in {mine[1]}" if mine else ""
    what = "importing it crashed" if importing else "— it crashed"
    return (f"{what} Python itself ({name}{', ' + plain if plain else ''}){where}\nhint: {why}\n"
            "(the check went on in a new process)")


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode:#x}" if returncode > 255 else f"exit status {returncode}"  # Windows: NTSTATUS


def _crashed(returncode: int) -> bool:
    """A signal (POSIX) or an NTSTATUS error code (Windows), not the exit of a child that ran to its end, nor an
    interrupt (Ctrl-C reaches the parent too, and ends the check)."""
    interrupted = (-signal.SIGINT, -signal.SIGTERM)
    return (returncode < 0 and returncode not in interrupted) or returncode >= 0xC0000000


def check_isolated(files: dict, lessons: list[str], seconds: float, no_torch: bool, say,
                   progress=None) -> list[FileReport]:
    """check_file on each lesson, in children; say(text) gets each line as it comes (the header first), and
    progress(name, i, n, counting), when given, each case as it starts (check_function's)."""
    crashed: dict[str, dict] = {}  # lesson -> {function name, or "" while importing: the crash's message}
    said: dict[str, int] = {}  # lesson -> lines already printed of it
    done: dict[str, FileReport] = {}
    header = True
    while True:
        todo = [lesson for lesson in lessons if lesson not in done]
        if not todo:
            return [done[lesson] for lesson in lessons]
        finished = len(done)
        job = {"files": {k: str(files[k]) for k in todo}, "lessons": todo, "seconds": seconds, "no_torch": no_torch,
               "header": header, "crashed": crashed}
        proc = subprocess.Popen([sys.executable, "-m", "transformer.tutor.isolated"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                errors="replace", env={**os.environ, "PYTHONFAULTHANDLER": "1"})
        errors: list[str] = []
        reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
        reader.start()
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        running, seen = None, {}  # (lesson, function) the child was in; lines of each lesson seen in this child
        for line in proc.stdout:
            before, marked, record = line.partition(MARK)
            if before.strip():
                say(before.rstrip("\n"))  # written by the learner's code outside print(), e.g. from C
            if not marked:
                continue
            kind, _, text = record.rstrip("\n").partition(" ")
            if kind == "say":
                say(json.loads(text))
                header = False
            elif kind == "line":
                lesson, text = json.loads(text)
                seen[lesson] = seen.get(lesson, 0) + 1
                if seen[lesson] > said.get(lesson, 0):  # a lesson checked again after a crash: only what is new
                    said[lesson] = seen[lesson]
                    say(text)
            elif kind == "case":
                if progress is not None:
                    progress(*json.loads(text))
            elif kind == "start":
                running = tuple(json.loads(text))
            elif kind == "report":
                done[running[0]] = _file_report(json.loads(text))
                running = None
        code = proc.wait()
        reader.join()
        stderr = "".join(errors)
        if code == 0 or not _crashed(code) or running is None or running[1] is None:  # not in a learner's code
            if stderr:
                sys.stderr.write(stderr)
            if code != 0 or len(done) == finished:  # a bug of the checker's own: said, never looped on
                raise RuntimeError(f"the checker's process ended with {_signal_name(code)} before its report")
            continue
        lesson, name = running
        crashed.setdefault(lesson, {})[name] = crash_message(code, stderr, files[lesson], importing=name == "")


def _file_report(record: dict) -> FileReport:
    """The parts of a FileReport the summary line reads: each function's status and message, and whether the file
    loaded."""
    report = FileReport(Path(record["path"]), record["lesson"], error=record["error"], note=record["note"])
    report.results = [Result(name, status, message) for name, status, message in record["results"]]
    return report


def _child() -> None:
    from .run import check_file, torch_version

    job = json.loads(sys.stdin.read())
    out = sys.stdout

    def record(kind, value):
        out.write(f"{MARK}{kind} {json.dumps(value)}\n")
        out.flush()

    version = None if job["no_torch"] else torch_version()
    if job["header"]:
        record("say", f"checking {Path(job['files'][job['lessons'][0]]).parent} against the package"
               + (f" and torch {version}" if version else ""))
    for lesson in job["lessons"]:
        report = check_file(Path(job["files"][lesson]), lesson, job["seconds"],
                            use_torch=bool(version), echo=lambda text, lesson=lesson: record("line", [lesson, text]),
                            starting=lambda name, lesson=lesson: record("start", [lesson, name]),
                            progress=lambda name, i, n, counting: record("case", [name, i, n, counting]),
                            crashed=job["crashed"].get(lesson, {}))
        record("start", [lesson, None])
        record("report", {"path": str(report.path), "lesson": lesson, "error": report.error, "note": report.note,
                          "results": [[r.name, r.status, r.message] for r in report.results]})


if __name__ == "__main__":
    _child()
