"""Build the course as a static website: every lesson executed, into _build/site/.

    python site/build.py            # the whole course, every lesson run in full (make site)
    python site/build.py --fast     # lessons in TRANSFORMER_FAST mode (make site FAST=1, or SITE_FAST=1)

The pages are built FROM the repository, never from copies kept beside it. Sphinx reads a staging
folder, _build/site_src/, laid out anew by each build:

    lessons/   a link to the repository's lessons/: a lesson runs in lessons/, as a notebook opened there does
    docs/*.md, benchmarks/results/*.md, README.md, figures/README.md (the gallery's captions): copies,
               as Sphinx resolves a link through a symbolic link to the file outside the folder it reads
    figures/   TRANSFORMER_FIGURES points here while the lessons run, so a build never rewrites the
               committed figures, and the gallery shows the figures this build drew
    index.md   site/index.md;  lessons_table.md, api/*.md  generated from the lessons and the docstrings;
               workbook.md  generated from workbook/ and the package (site/workbook_page.py)

A failing assert in a lesson stops the build with its traceback. Warnings fail it too (-W), and so
does anything a lesson writes to stderr (printed at the end). The new site is built into
_build/site.new/ and replaces _build/site/ only when the build succeeded.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
BUILD = ROOT / "_build"
OUT = BUILD / "site"
STAGE = BUILD / "site_src"
DOCTREES = BUILD / "site_doctrees"

LESSON = re.compile(r"^(\d\d)_\w+\.py$")
TOPIC_ROW = re.compile(r"^\|\s*`(\d\d)_\w+\.py`\s*\|\s*([^|]+?)\s*\|", re.MULTILINE)  # lessons/README.md
SEEN_ROW = re.compile(r"^\|\s*(\d\d)\s*\|[^|\n]+\|\s*(.+?)\s*\|\s*$", re.MULTILINE)  # README.md: | 03 | name | what you see |


def lessons() -> list[Path]:
    """lessons/NN_*.py in reading order."""
    return sorted(p for p in (ROOT / "lessons").iterdir() if LESSON.match(p.name))


def lesson_title(path: Path) -> str:
    """The lesson's first markdown heading, e.g. '03 · Scaled dot-product attention'."""
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^# # (.+)$", line)
        if m:
            return m.group(1).strip()
    return path.stem


def link(target: Path, name: Path) -> None:
    """name -> target as a relative symbolic link (replacing what was there)."""
    name.parent.mkdir(parents=True, exist_ok=True)
    if name.is_symlink() or name.is_file():
        name.unlink()
    elif name.is_dir():
        shutil.rmtree(name)
    name.symlink_to(os.path.relpath(target, name.parent))


def lessons_table() -> str:
    """The home page's table: each lesson, linked, with what it shows (README.md's course table,
    else its topic in lessons/README.md)."""
    topics = dict(TOPIC_ROW.findall((ROOT / "lessons" / "README.md").read_text(encoding="utf-8")))
    topics.update(SEEN_ROW.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    rows = ["| | lesson | what you see |", "| --- | --- | --- |"]
    for p in lessons():
        _, _, title = lesson_title(p).partition("·")
        title = title.strip() or lesson_title(p)
        rows.append(f"| {p.name[:2]} | {{doc}}`{title} <lessons/{p.stem}>` | {topics.get(p.name[:2], '')} |")
    return "\n".join(rows) + "\n"


SITE_PAGE_OF = re.compile(r"\]\(\.\./workbook/(?:README\.md)?(?=[)#])")  # a link to workbook/ from docs/ or figures/
GALLERY_HEADING = re.compile(r"^(## .+?) \(`lessons/(\d\d_\w+)\.py`\)$", re.MULTILINE)


GALLERY_FIGURE = re.compile(r"^!\[\]\(([\w.-]+\.png)\)\n(.+)$", re.MULTILINE)


def gallery(text: str) -> str:
    """figures/README.md for the site: each lesson's heading links to the lesson's page, and each
    figure's caption is also its alt text (what a screen reader says, and what shows if it fails)."""
    text = GALLERY_HEADING.sub(lambda m: f"{m.group(1)}\n\nDrawn in {{doc}}`../lessons/{m.group(2)}`.", text)
    alt = lambda caption: re.sub(r"([\[\]\\`*_<>!])", r"\\\1", caption.strip())  # as plain text: markup escaped
    return GALLERY_FIGURE.sub(lambda m: f"![{alt(m.group(2))}]({m.group(1)})\n{m.group(2)}", text)


def stage(stage_dir: Path = STAGE) -> None:
    """Lay out the folder Sphinx reads (links and generated pages only)."""
    sys.path.insert(0, str(SITE))
    import api_pages
    import workbook_page

    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True)
    link(ROOT / "lessons", stage_dir / "lessons")  # a lesson runs in lessons/: its paths are the repository's
    for page in ["README.md", "docs/*.md", "benchmarks/results/*.md", "figures/README.md"]:
        for src in ROOT.glob(page):  # copies: Sphinx resolves a link through a symbolic link to outside
            dest = stage_dir / src.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            text = src.read_text(encoding="utf-8")
            text = SITE_PAGE_OF.sub("](../workbook.md", text)  # the folder's README is the site's Workbook page
            dest.write_text(gallery(text) if page == "figures/README.md" else text, encoding="utf-8")
    shutil.copy(SITE / "index.md", stage_dir / "index.md")
    (stage_dir / "lessons_table.md").write_text(lessons_table(), encoding="utf-8")
    api_pages.write(stage_dir / "api")
    workbook_page.write(stage_dir / "workbook.md", lesson_title)
    notebooks(stage_dir / EXTRA / "notebooks")
    course_archive(stage_dir / EXTRA / "downloads" / ARCHIVE)


# ---------------------------------------------------------------- what a reader downloads
# _build/site_src/_extra/ is copied as it is into the site's root (conf.py's html_extra_path):
#   notebooks/NN_topic.ipynb                 each lesson as a notebook, made by jupytext (no outputs)
#   downloads/transformer-from-scratch.tar.gz  the course: every file git tracks or would track (the
#                                            working tree's, as the pages are built from it), but the
#                                            drawn figures (make lessons draws them again)
EXTRA = "_extra"
ARCHIVE = "transformer-from-scratch.tar.gz"
ARCHIVE_LEAVES_OUT = re.compile(r"^figures/.*\.png$")


def notebooks(dest: Path) -> list[Path]:
    """Each lesson as dest/NN_topic.ipynb, converted by jupytext from the lesson's percent script."""
    import jupytext

    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for p in lessons():
        written.append(dest / f"{p.stem}.ipynb")
        jupytext.write(jupytext.read(p, fmt="py:percent"), written[-1], fmt="ipynb")
    return written


def course_files() -> list[str]:
    """The course's files, relative to ROOT: `git ls-files` (tracked, and new files git does not
    ignore), less the drawn figures; without git, the same folders walked."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout.decode()
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):  # a copy of the course without .git
        skip = {".venv", "_build", "__pycache__", ".git", ".pytest_cache", ".hypothesis"}
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    return sorted(n for n in set(names) if (ROOT / n).is_file() and not ARCHIVE_LEAVES_OUT.match(n))


def course_archive(dest: Path) -> Path:
    """dest: the course as transformer-from-scratch/… in a .tar.gz (same bytes for the same files)."""
    import gzip
    import tarfile

    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in course_files():
            info = tar.gettarinfo(str(ROOT / name), arcname=f"transformer-from-scratch/{name}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(ROOT / name, "rb") as f:
                tar.addfile(info, f)
    return dest


def build(fast: bool) -> int:
    from sphinx.cmd.build import build_main

    stage()
    os.environ["SITE_FAST"] = "1" if fast else "0"
    os.environ["SITE_FIGURES"] = str(STAGE / "figures")
    os.environ.pop("MPLBACKEND", None)  # Agg would drop the figures from the pages: the kernel uses inline
    new = BUILD / "site.new"  # built beside the last site, which stays readable until this one is done
    for stale in (new, BUILD / "jupyter_execute"):  # the executed notebooks myst-nb keeps beside the site
        if stale.exists():
            shutil.rmtree(stale)
    start = time.perf_counter()
    code = build_main(["-b", "html", "-W", "--keep-going", "-E", "-q",  # serial: lessons first, timings honest
                       "-c", str(SITE), "-d", str(DOCTREES), str(STAGE), str(new)])
    seconds = time.perf_counter() - start
    if code == 0:
        if OUT.exists():
            shutil.rmtree(OUT)
        new.rename(OUT)
        size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
        print(f"site built in {seconds:.0f} s ({'fast' if fast else 'full'} mode), "
              f"{size / 2**20:.1f} MiB: {OUT.relative_to(ROOT)}/index.html")
    else:
        stderr_of_lessons()
        print(f"site build failed after {seconds:.0f} s (exit {code})", file=sys.stderr)
    return code


def stderr_of_lessons() -> None:
    """Print what each lesson wrote to stderr: myst-nb's warning names the cell, not the text."""
    import json

    for nb in sorted((BUILD / "jupyter_execute" / "lessons").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            for out in cell.get("outputs", []):
                if out.get("name") == "stderr":
                    text = "".join(out["text"]).strip().splitlines()
                    print(f"lessons/{nb.stem}.py, cell {i}, wrote to stderr:\n    " + "\n    ".join(text[-8:]),
                          file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true",
                    help="run the lessons in TRANSFORMER_FAST mode (smaller measurements), as CI does")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("SITE_FAST", "0") not in ("", "0")
    return build(fast)


if __name__ == "__main__":
    sys.exit(main())
