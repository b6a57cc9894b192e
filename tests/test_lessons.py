"""Every lesson runs headless, in fast mode, exits 0 and writes the figures it saves.

A lesson's own printed checks are asserts, so a wrong number fails its run here.
The expected figures are read from the lesson's source: the literal names in its
`figure_path("NN_….png")` calls. A lesson that needs an optional package says so in a
`# requires: pkg, …` line and is skipped when one is missing.
"""
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lessons"))
import run_all  # noqa: E402

LESSONS = run_all.lessons()
REQUIRES = re.compile(r"^# requires:\s*(.+)$", re.MULTILINE)


def test_there_are_lessons_and_each_saves_figures():
    assert LESSONS, "no lessons/NN_*.py found"
    for lesson in LESSONS:
        assert run_all.expected_figures(lesson), f"{lesson.name} saves no figure"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_and_writes_its_figures(lesson, tmp_path):
    src = lesson.read_text(encoding="utf-8")
    for line in REQUIRES.findall(src):
        for pkg in (p.strip() for p in line.split(",")):
            if pkg and importlib.util.find_spec(pkg) is None:
                pytest.skip(f"{lesson.name} needs {pkg}, which is not installed")
    env = dict(os.environ, TRANSFORMER_FAST="1", TRANSFORMER_FIGURES=str(tmp_path))
    proc = run_all.run_lesson(lesson, env=env, timeout=300)
    out = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"{lesson.name} exited {proc.returncode}:\n{out}"
    expected = run_all.expected_figures(lesson)
    for name in expected:
        assert name.startswith(lesson.name[:3]), f"{name} should start with {lesson.name[:3]}"
    written = sorted(p.name for p in tmp_path.glob("*.png"))
    missing = sorted(set(expected) - set(written))
    assert not missing, f"{lesson.name} did not write {missing}; it wrote {written}"
    for name in expected:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, f"{name} is not a real PNG"
        assert b"Software" not in data[:4096], f"{name} carries a Software metadata chunk"


def test_every_figure_a_lesson_writes_has_a_caption():
    gallery = (ROOT / "figures" / "README.md").read_text(encoding="utf-8")
    captioned = set(re.findall(r"!\[\]\(([\w.]+\.png)\)", gallery))
    written = {name for lesson in LESSONS for name in run_all.expected_figures(lesson)}
    assert written - captioned == set(), f"figures without a caption in figures/README.md: {sorted(written - captioned)}"
    assert captioned - written == set(), f"captions for figures no lesson writes: {sorted(captioned - written)}"
