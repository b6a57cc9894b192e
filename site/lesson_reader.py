"""How a lesson (a jupytext percent script) becomes the notebook its page is built from.

myst-nb reads each lessons/NN_*.py through `reads` (conf.py's nb_custom_formats). The lesson's own
cells are kept as they are, code and prose, and run as they are; this adds, from the repository:

- after the title, a box: how to run the lesson yourself (the course's archive, `make lessons`, the
  lesson as a notebook) and the package's functions the lesson calls, in the order it first calls
  them, each linked to its API entry and to its source page (sphinx.ext.viewcode's);
- after the "Try it" exercises, the worked answers of lessons/solutions/NN_*.py, each behind a
  closed <details> ("show the answer"), as the Workbook page shows the package's versions;
- the gallery's caption (figures/README.md) as the alt text of the figure a cell saves;
- the tag `hide-input` on the setup cell (the imports) and on the cells that only draw a figure:
  their code folds under a "show" control, their output (the figure) stays.

Nothing here is written by hand per lesson: a new lesson, function or solution appears with no edit.
"""
from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "lessons" / "solutions"
ARCHIVE = "transformer-from-scratch.tar.gz"  # built by site/build.py into the site's downloads/
TITLE = re.compile(r"^# #\s+(\d\d)\s*·", re.MULTILINE)
CALL = re.compile(r"\bT\.([A-Za-z]\w*)")
# a line that draws: it names matplotlib's objects or the course's plotting helpers (P.), or it
# only closes a bracket or opens a loop (over the panels)
DRAWING = re.compile(r"\b(?:ax\w*|axes|axs|fig|plt|P|im|cbar)\b\s*[.\[=,)]|^\s*(?:[)\]}]+,?|for .*:)\s*$")


@lru_cache(maxsize=1)
def public_names() -> dict[str, object]:
    """name -> object for every public function and class of `import transformer as T`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import api_pages

    return {name: obj for names in api_pages.public_names().values() for name, obj in names}


def source_page(name: str, obj) -> str:
    """The viewcode page of T.name, from the site's root: '_modules/transformer/core/attention.html#softmax'.
    The anchor is the name T exports (site/conf.py's viewcode_source tags an alias such as llama_forward,
    which models/llama.py defines as `forward`)."""
    return f"_modules/{inspect.unwrap(obj).__module__.replace('.', '/')}.html#{name}"


def functions_used(nb) -> list[str]:
    """The public names of T the lesson's code calls (T.name), in the order of their first use."""
    names = public_names()
    seen: dict[str, None] = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            for name in CALL.findall(cell.source):
                if name in names:
                    seen.setdefault(name)
    return list(seen)


def top_box(number: str, stem: str, nb) -> str:
    """The box under the title: run it yourself, and the functions the lesson calls."""
    lines = ['<div class="tfs-lesson-box">', "",
             f'**Run it yourself.** <a class="tfs-archive" href="../downloads/{ARCHIVE}">Download the course</a> '
             f"(the package, the lessons, the workbook and the tests), unpack it and run `make lessons` in its "
             f"folder; then run `python lessons/{stem}.py`, or open this lesson as a notebook: "
             f'<a class="tfs-notebook" href="../notebooks/{stem}.ipynb" download>{stem}.ipynb</a> '
             "(saved into the course's `lessons/` folder).", ""]
    used = functions_used(nb)
    if used:
        objs = public_names()
        items = [f"{{py:obj}}`{name} <transformer.{name}>` "
                 f'<a class="tfs-source" href="../{source_page(name, objs[name])}" title="the source of {name}">(source)</a>'
                 for name in used]
        lines += ["**The package's functions in this lesson**, in the order it first calls them (each links to "
                  "its API entry, then to its source): " + " · ".join(items), ""]
    lines += ["</div>"]
    return "\n".join(lines)


def solution_groups(path: Path) -> tuple[str, list[tuple[int, str]]]:
    """(the lines the answers share, [(k, the source of exercise k's functions)]) of a solutions file.

    A top-level function belongs to exercise k if its name ends in _k (exercise_k, check_k, wrong_k);
    a helper goes with the next exercise that follows it in the file; what comes before the first
    function (imports, constants; not the docstring) is shared."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the module's docstring
    shared, groups, pending, current = [], {}, [], None
    for node in body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        src = "\n".join(lines[start - 1:node.end_lineno])
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            (shared if current is None and not groups else pending).append(src)
            continue
        m = re.search(r"_(\d+)$", node.name)
        if m:
            current = int(m.group(1))
            groups.setdefault(current, []).extend(pending + [src])
            pending = []
        else:
            pending.append(src)
    if pending and groups:
        groups[max(groups)].extend(pending)
    return "\n".join(shared), [(k, "\n\n\n".join(v)) for k, v in sorted(groups.items())]


def solutions_cell(number: str) -> str | None:
    """The worked answers of lessons/solutions/NN_*.py, each closed until the reader opens it."""
    found = sorted(SOLUTIONS.glob(f"{number}_*.py"))
    if not found:
        return None
    shared, groups = solution_groups(found[0])
    lines = ["### The answers", "",
             f"Worked answers from `lessons/solutions/{found[0].name}`: each `exercise_k()` works the answer "
             "out as a learner would, and `check_k(answer, T)` asserts that it agrees with the package "
             "(`python -m pytest tests/test_exercises.py` runs them all). Try first, then open.", ""]

    def details(summary: str, code: str) -> list[str]:
        return ['<details class="tfs-solution">', f"<summary>{summary}</summary>", "",
                "```python", textwrap.dedent(code).strip(), "```", "", "</details>", ""]

    if shared.strip():
        lines += details("show the lines the answers share (imports, data)", shared)
    for k, code in groups:
        lines += details(f"show the answer to exercise {k}", code)
    return "\n".join(lines)


DRAWS = re.compile(r"\b(?:plt\.|figure_path\(|savefig\(|subplots\()")


def only_draws(source: str) -> bool:
    """A code cell that draws a figure and computes little: at least 60 % of its lines are drawing."""
    if not DRAWS.search(source):
        return False
    lines = [ln for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    drawing = [ln for ln in lines if DRAWING.search(ln)]
    return len(drawing) >= 0.6 * len(lines)


def fold(nb) -> None:
    """Tag the setup cell (the first code cell) and the cells that only draw with hide-input."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        if i == 0 or only_draws(cell.source):
            tags = cell.metadata.setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")


SAVED = re.compile(r"""figure_path\(\s*["'](\d\d_[\w.-]+\.png)["']""")
CAPTION = re.compile(r"^!\[\]\(([\w.-]+\.png)\)\n(.+)$", re.MULTILINE)


@lru_cache(maxsize=1)
def captions() -> dict[str, str]:
    """figure file name -> its caption in figures/README.md (the gallery), as plain text."""
    text = (ROOT / "figures" / "README.md").read_text(encoding="utf-8")
    return {name: re.sub(r"[`*_]", "", caption).strip() for name, caption in CAPTION.findall(text)}


def alt_texts(nb) -> None:
    """A cell that saves a figure the gallery captions gets the caption as its image's alt text."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        said = [captions()[f] for f in SAVED.findall(cell.source) if f in captions()]
        if said:
            cell.metadata.setdefault("mystnb", {})["image"] = {"alt": " ".join(said), "classes": "tfs-figure"}


def reads(text: str, **kwargs):
    """A lesson's text -> its notebook for the page (myst-nb's custom format reader)."""
    nb = jupytext.reads(text, fmt="py:percent")
    m = TITLE.search(text)
    if not m:
        return nb
    number = m.group(1)
    stems = sorted(p.stem for p in (ROOT / "lessons").glob(f"{number}_*.py"))
    if len(stems) != 1:
        return nb
    fold(nb)
    alt_texts(nb)

    box = nbformat.v4.new_markdown_cell(top_box(number, stems[0], nb))
    title = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
    nb.cells.insert(title + 1, box)
    answers = solutions_cell(number)
    if answers:
        tries = [i for i, c in enumerate(nb.cells)
                 if c.cell_type == "markdown" and re.search(r"^## Try it", c.source, re.M)]
        at = tries[-1] + 1 if tries else len(nb.cells)
        nb.cells.insert(at, nbformat.v4.new_markdown_cell(answers))
    return nb
