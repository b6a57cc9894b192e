"""Sphinx configuration of the course website (built by site/build.py; `make site`).

Sphinx reads the staging folder site/build.py lays out (links to lessons/, docs/, … and generated
pages); this file says how: myst-nb executes each lesson (a jupytext percent script) in a Jupyter
kernel and puts its printed output and figures on the page, MathJax 3 typesets the formulas from a
local copy, and the interactive views of site/views/ are loaded on every page.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
STATIC_BUILD = ROOT / "_build" / "site_static"  # what this build adds to _static: MathJax, the views
sys.path.insert(0, str(ROOT))  # autodoc imports transformer from the working tree
sys.path.insert(0, str(SITE))  # docstrings.py
FAST = os.environ.get("SITE_FAST", "0") not in ("", "0")

# ---------------------------------------------------------------- the kernel that runs the lessons
# The lessons write their figures into the build (never over the committed figures/), run in
# TRANSFORMER_FAST mode for a fast build, and draw with the inline backend (MPLBACKEND=Agg would
# leave the pages without figures). The kernel inherits this process's environment.
os.environ["TRANSFORMER_FIGURES"] = os.environ.get("SITE_FIGURES") or str(ROOT / "_build" / "site_src" / "figures")
os.environ["TRANSFORMER_FAST"] = "1" if FAST else "0"
os.environ.pop("MPLBACKEND", None)
os.environ["IPYTHONDIR"] = str(ROOT / "_build" / "site_ipython")  # the kernel's startup file, below
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's frozen-modules note on stderr
os.environ.setdefault("TQDM_DISABLE", "1")  # a progress bar is noise on a page: the printed results stay

project = "transformer-from-scratch"
author = ""
copyright = ""
html_title = "transformer-from-scratch"
language = "en"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax"]

# Only these are pages; the staging folder also holds README.md, lessons/README.md and the lessons'
# table, which the home page includes.
include_patterns = ["index.md", "lessons/[0-9][0-9]_*.py", "figures/README.md", "docs/*.md",
                    "benchmarks/results/*.md", "api/*.md", "workbook.md"]
exclude_patterns = ["lessons/solutions/**", "lessons/run_all.py"]
if os.environ.get("SITE_LESSONS"):  # while working on the site: SITE_LESSONS="03 05" builds only these lessons
    include_patterns[1:2] = [f"lessons/{n.zfill(2)}_*.py" for n in os.environ["SITE_LESSONS"].split()]
root_doc = "index"

# ---------------------------------------------------------------- MyST and myst-nb
nb_custom_formats = {".py": ["jupytext.reads", {"fmt": "py:percent"}]}
nb_execution_mode = "force"  # every build runs every lesson: the pages are the code's output today
nb_execution_timeout = 900  # seconds per cell: lesson 11 generates with a real model
# A failing lesson (an assert, an exception) is a warning that carries the cell's traceback; -W makes
# it fail the build, after every lesson ran, so one build names every failing lesson. (Raising
# instead would stop at the first and leave its traceback in a log file, not on the screen.)
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_execution_in_temp = False  # a lesson runs in lessons/, as a notebook opened there does
nb_merge_streams = True
nb_output_stderr = "warn"  # anything on stderr (a library warning, a progress bar) is a build warning: -W fails
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# ---------------------------------------------------------------- autodoc (the API reference)
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
default_role = "code"  # `name` in a docstring is code, as in the Markdown pages

SIGNATURE_COMMENT = re.compile(r"\)\s*(?:->\s*[^:]+)?:\s*#\s*(.+)$")


def shape_signature(obj) -> str | None:
    """The comment on a function's `def` line, e.g. '[..., n] -> [..., n]', if it has one."""
    import inspect

    try:
        lines, _ = inspect.getsourcelines(inspect.unwrap(obj))
    except (OSError, TypeError):
        return None
    for line in lines:
        if line.lstrip().startswith("@"):
            continue
        m = SIGNATURE_COMMENT.search(line)
        if m and "->" in m.group(1):
            return m.group(1).strip()
        if line.rstrip().endswith(":") or "#" in line and line.split("#")[0].rstrip().endswith(":"):
            return None  # the def line ended without a shape comment
    return None


def docstring_to_rest(app, what, name, obj, options, lines):
    """A plain-text docstring as reST (site/docstrings.py), with its shapes first."""
    from docstrings import to_rest

    lines[:] = to_rest(lines)
    shapes = shape_signature(obj) if what in ("function", "method") else None
    if shapes:
        lines[:0] = [f"Shapes: ``{shapes}``", ""]


# ---------------------------------------------------------------- HTML
html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
html_context = {"default_mode": "light"}  # the figures are drawn on white
html_show_sourcelink = False
html_show_sphinx = False
html_show_copyright = False
html_copy_source = True  # the download button offers each lesson's .py
html_last_updated_fmt = None
html_static_path = [str(SITE / "_static"), str(STATIC_BUILD)]
html_css_files = ["site.css"]
html_js_files: list = []

# MathJax 3, local: tex-chtml-full.js (all TeX extensions in one file) and its woff-v2 fonts, taken
# from the pinned PyPI package sphinx-mathjax-offline (README.md, "Read it in the browser", says why).
MATHJAX_DIST = "sphinx-mathjax-offline"
mathjax_path = "mathjax/tex-chtml-full.js"


def vendor_mathjax(dest: Path) -> None:
    src = Path(importlib.metadata.distribution(MATHJAX_DIST).locate_file("sphinx-mathjax-offline/static/mathjax"))
    (dest / "output" / "chtml" / "fonts").mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "tex-chtml-full.js", dest / "tex-chtml-full.js")
    shutil.copytree(src / "output" / "chtml" / "fonts" / "woff-v2", dest / "output" / "chtml" / "fonts" / "woff-v2",
                    dirs_exist_ok=True)


# ---------------------------------------------------------------- the interactive views (site/views/)
VIEWS = SITE / "views"
EXPORT_VIEWS = SITE / "export_views.py"


def view_files() -> tuple[list[Path], list[Path]]:
    """(scripts, stylesheets) of site/views/; common.js first, as the others may use it."""
    if not VIEWS.is_dir():
        return [], []
    scripts = sorted(VIEWS.glob("*.js"), key=lambda p: (p.name != "common.js", p.name))
    return scripts, sorted(VIEWS.glob("*.css"))


def prepare_static() -> None:
    """_build/site_static/: MathJax and the view scripts, copied to _static/ by Sphinx."""
    if STATIC_BUILD.exists():
        shutil.rmtree(STATIC_BUILD)
    vendor_mathjax(STATIC_BUILD / "mathjax")
    scripts, styles = view_files()
    if scripts or styles:
        (STATIC_BUILD / "views").mkdir(parents=True)
    for f in scripts + styles:
        shutil.copy(f, STATIC_BUILD / "views" / f.name)
    html_js_files.extend((f"views/{f.name}", {"defer": "defer"}) for f in scripts)
    html_css_files.extend(f"views/{f.name}" for f in styles)


def kernel_startup() -> None:
    """The kernel's IPython startup file (IPYTHONDIR above): site/kernel_startup.py."""
    startup = Path(os.environ["IPYTHONDIR"]) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    shutil.copy(SITE / "kernel_startup.py", startup / "00-site.py")
    # The kernel talks to this build over 127.0.0.1; its warning that TCP is not encrypted is noise
    # in the build log. Its errors still show.
    (startup.parent / "ipython_kernel_config.py").write_text('c.IPKernelApp.log_level = "ERROR"\n')


def export_views(app) -> None:
    """site/export_views.py's export_all(<outdir>/_static/views/data, fast=FAST), where it exists."""
    if not EXPORT_VIEWS.is_file():
        return
    spec = importlib.util.spec_from_file_location("export_views", EXPORT_VIEWS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass in it looks its module up there
    spec.loader.exec_module(module)
    module.export_all(Path(app.outdir) / "_static" / "views" / "data", fast=FAST)


def lessons_first(app, env, docnames):
    """Read (run) the lessons before the other pages: the gallery and the home page show the
    figures the lessons just drew."""
    docnames.sort(key=lambda d: (not d.startswith("lessons/"), d))


prepare_static()
kernel_startup()


def setup(app):
    app.connect("autodoc-process-docstring", docstring_to_rest)
    app.connect("env-before-read-docs", lessons_first)
    app.connect("builder-inited", export_views)
