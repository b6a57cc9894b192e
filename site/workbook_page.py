"""The Workbook page, generated from workbook/ and the package: what the learner writes, lesson by lesson.

For each workbook/NN_*.py: the lesson it goes with (a link to the lesson's page), the command that
checks it, and each stub as the file holds it (signature, docstring with formula and shapes, the
hint). Under each stub, the package's own version, read from its source with `inspect`, sits in an
HTML <details> element, closed until the reader opens it ("show the package's version"). A stub's
docstring ends by naming that version: "After trying: the package's version is `PATH`, `NAME`."
That line is what this page follows, so the page and the stub can never name different code.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
WORKBOOK = ROOT / "workbook"
FILE = re.compile(r"^(\d\d)_\w+\.py$")
AFTER = re.compile(r"After trying: the package's version is `([\w/.]+\.py)`, `([\w.]+)`\.")
# the package function whose work happens in a helper of the same file, or a method that calls one the workbook's
# class leaves out: that helper is shown too
RUNS = {"flash_attention": "_flash2_forward", "PagedKVCache.write": "PagedKVCache.blocks_needed"}

INTRO = """\
# Workbook: write it yourself

The lessons show each formula computed by the package; the workbook is where you write it. The
folder `workbook/` holds one file per lesson with the functions that lesson teaches as stubs: the
package function's name and signature, a docstring with the formula and the shapes (in the
course's dimension names), and a body that raises `NotImplementedError` with a hint on how to
start. Fill in the bodies, keep the names and signatures, and check your work from the repository
root with the virtual environment active:

```bash
python -m transformer check 03      # workbook/03_attention.py
python -m transformer check all     # every workbook file
```

The checker runs your functions on the package's own cases and answers, for each function,
**passed**, **not written yet** (the stub still raises), or **failed**, with what is wrong in the
lesson's terms (the case, the first entry that differs, the known mistake it looks like). To work in
a copy, `cp -r workbook ~/my-workbook` and add `--workbook ~/my-workbook`: the untouched stubs stay in
`workbook/` to start a file over from; a function the workbook gained after your copy was made is
told as "not in …", with the file to copy its stub from. In a git clone, `git diff workbook/` shows
what you wrote and `git checkout workbook/03_attention.py` starts a file over (the course download has
no git history).

Once your functions pass, see them work inside the real models:

```bash
python -m transformer check all --on-model
```

SmolLM2-135M then answers a question with every function of yours that passed (embedding, RoPE,
attention, heads, the masks, your KV cache, RMSNorm, SwiGLU) in place of the package's, beside its
answer with the package's own; all-MiniLM-L6-v2 embeds sentences with your encoder's functions;
and, with lesson 18 or 19, lesson 19's decoder trains 40 steps with your loss,
backward passes and AdamW, its losses compared with the package's step by step, then its held-out
accuracy as your `induction_accuracy` scores it.

Below, each file's stubs as you will find them. The package's version of each is behind a
"show the package's version" button: open it after trying.
"""


def load(path: Path):
    """A workbook file as a module (its name starts with a digit: imported from its path)."""
    spec = importlib.util.spec_from_file_location(f"workbook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def def_source(path: Path, name: str) -> str:
    """The source of the top-level function `name` in `path`, decorators included, read with ast."""
    text = path.read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[start - 1:node.end_lineno])
    raise LookupError(f"{name} is not defined at the top of {path}")


def package_version(path: str, dotted: str) -> str:
    """The source of T.<dotted> (a function, or Class.method), checked to be in `path`."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import transformer as T

    obj = inspect.unwrap(lookup(T, dotted))
    where = Path(inspect.getsourcefile(obj)).resolve()
    if where != (ROOT / path).resolve():
        raise LookupError(f"the workbook says {dotted} is in {path}, but it is in {where.relative_to(ROOT)}")
    source = textwrap.dedent(inspect.getsource(obj)).rstrip()
    helper = RUNS.get(dotted)
    if helper and "." in helper:  # a method of the same class
        method = textwrap.dedent(inspect.getsource(inspect.unwrap(lookup(T, helper)))).rstrip()
        source += f"\n\n# the method it calls, in the same class:\n{method}"
    elif helper:
        source += f"\n\n\n# the loop it runs, in the same file:\n{def_source(ROOT / path, helper)}"
    return source


def lookup(root, dotted: str):
    """root.<dotted>, one attribute at a time (a function, or Class.method)."""
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


def stubs(module) -> list[tuple[str, object]]:
    """(package name, stub) for each stub of a workbook module, in the file's order; a class
    contributes the methods whose docstrings name a package version (KVCache.update)."""
    found = []
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue  # imported helpers
        if inspect.isfunction(obj):
            found.append((name, obj))
        elif inspect.isclass(obj):
            found += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                      if inspect.isfunction(f) and AFTER.search(inspect.getdoc(f) or "")]
    return found


def section(path: Path, lesson_title: Callable[[Path], str]) -> list[str]:
    lesson = ROOT / "lessons" / path.name
    title = lesson_title(lesson)
    module = load(path)
    lines = [f"## {title}", "",
             f"Goes with the lesson {{doc}}`{title} <lessons/{lesson.stem}>`. Your file: `workbook/{path.name}`. "
             "Check it with:", "",
             "```bash", f"python -m transformer check {path.name[:2]}", "```", ""]
    for name, obj in stubs(module):
        match = AFTER.search(inspect.getdoc(obj) or "")
        if not match:
            raise LookupError(f"workbook/{path.name}: {name}'s docstring does not name the package's version")
        pkg_path, pkg_name = match.groups()
        shown = name.split(".")[0]  # a method is shown inside its class, as the file holds it
        lines += [f"### `{name}`", "",
                  "```python", def_source(path, shown), "```", "",
                  '<details class="tfs-solution">',
                  "<summary>show the package's version</summary>", "",
                  f"`{pkg_name}` in `{pkg_path}`:", "",
                  "```python", package_version(pkg_path, pkg_name), "```", "",
                  "</details>", ""]
    return lines


def write(out: Path, lesson_title: Callable[[Path], str]) -> Path:
    """Write the page to `out` (e.g. _build/site_src/workbook.md) and return its path."""
    lines = [INTRO]
    for path in sorted(p for p in WORKBOOK.iterdir() if FILE.match(p.name)):
        lines += section(path, lesson_title)
    out.write_text("\n".join(lines), encoding="utf-8")
    return out
