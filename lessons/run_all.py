"""Run every lesson in order, each in its own headless Python process, and write all figures.

    python lessons/run_all.py            # every lessons/NN_*.py
    python lessons/run_all.py 03 05      # only the lessons whose number is given

Each lesson runs from the repository root with MPLBACKEND=Agg (no windows). The run stops
at the first lesson that fails, names it and shows the end of its output.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
SAVE_CALL = re.compile(r"""figure_path\(\s*["'](\d\d_[^"']+\.png)["']""")


def lessons(numbers=()) -> list[Path]:
    """lessons/NN_*.py in numeric order (only the given NN if any)."""
    found = sorted(p for p in LESSONS.glob("[0-9][0-9]_*.py"))
    return [p for p in found if not numbers or p.name[:2] in numbers]


def expected_figures(lesson: Path) -> list[str]:
    """The figure names a lesson saves: the literal names in its figure_path("NN_….png") calls."""
    return sorted(set(SAVE_CALL.findall(lesson.read_text(encoding="utf-8"))))


def run_lesson(lesson: Path, env=None, timeout=None) -> subprocess.CompletedProcess:
    """One lesson as `python lessons/NN_topic.py` from the repository root, headless."""
    env = dict(os.environ if env is None else env)
    env["MPLBACKEND"] = "Agg"
    path = lesson.relative_to(ROOT) if lesson.is_relative_to(ROOT) else lesson
    return subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def main(argv) -> int:
    todo = lessons(tuple(a.zfill(2)[:2] for a in argv))
    if not todo:
        print("no lessons found" + (f" for {' '.join(argv)}" if argv else ""), file=sys.stderr)
        return 1
    fig_dir = Path(os.environ.get("TRANSFORMER_FIGURES") or ROOT / "figures")
    summary = []
    bar = tqdm(todo, unit="lesson", file=sys.stdout, dynamic_ncols=True)
    for lesson in bar:
        bar.set_description(lesson.stem)
        start = time.perf_counter()
        proc = run_lesson(lesson)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            bar.close()
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
            print(f"\n✗ lesson {lesson.name} failed (exit code {proc.returncode}) after {seconds:.1f} s.\n"
                  f"--- last lines of its output ---\n{tail}\n---\n"
                  f"Run it alone to see everything:  python lessons/{lesson.name}", file=sys.stderr)
            return proc.returncode or 1
        figures = expected_figures(lesson)
        missing = [f for f in figures if not (fig_dir / f).is_file()]
        if missing:
            bar.close()
            print(f"\n✗ lesson {lesson.name} ran but did not write {', '.join(missing)} in {fig_dir}",
                  file=sys.stderr)
            return 1
        summary.append((lesson.name, seconds, len(figures)))
    bar.close()
    width = max(len(name) for name, _, _ in summary)
    print(f"\n{'lesson':<{width}}  {'seconds':>8}  figures")
    for name, seconds, n_fig in summary:
        print(f"{name:<{width}}  {seconds:8.1f}  {n_fig:7d}")
    total = sum(s for _, s, _ in summary)
    print(f"{'total':<{width}}  {total:8.1f}  {sum(n for *_, n in summary):7d}   → {fig_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
