"""Sphinx configuration of the course website (built by site/build.py; `make site`).

Sphinx reads the staging folder site/build.py lays out (links to lessons/, docs/, … and generated
pages); this file says how: myst-nb executes each lesson (a jupytext percent script) in a Jupyter
kernel and puts its printed output and figures on the page, MathJax 3 typesets the formulas from a
local copy, and the interactive views of site/views/ are loaded on every page.
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

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
# the folder the gallery shows
SITE_FIGURES = Path(os.environ.get("SITE_FIGURES") or ROOT / "_build" / "site_src" / "figures")
os.environ["TRANSFORMER_FIGURES"] = str(SITE_FIGURES)  # with the cache, the cache's own folder: below
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

# viewcode: a page of highlighted source per module of the package, linked from each API entry
# ("[source]") and from the lessons' boxes (site/lesson_reader.py)
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.viewcode"]
viewcode_follow_imported_members = True  # transformer.softmax's source is transformer/core/attention.py's


@functools.lru_cache(maxsize=None)
def viewcode_source(app, modname: str):
    """viewcode's (code, tags) of a module of the package, with the names T exports under another name
    tagged where the object is defined: T.llama_forward is models/llama.py's `forward`, and viewcode,
    which looks its tags up by the documented name, would give it no [source] link and no anchor (the
    lessons' boxes, site/lesson_reader.py, link to the same anchors)."""
    import inspect

    from api_pages import public_names
    from sphinx.pycode import ModuleAnalyzer

    if not modname.startswith("transformer."):
        return None
    try:
        analyzer = ModuleAnalyzer.for_module(modname)
        analyzer.find_tags()
    except Exception:  # not a module of source: viewcode decides, as without this hook
        return None
    tags = dict(analyzer.tags)
    for name, obj in (pair for names in public_names().values() for pair in names):
        real = inspect.unwrap(obj)
        if real.__module__ == modname and real.__qualname__ != name:  # an alias; a class's methods too
            tags.update({name + key[len(real.__qualname__):]: tag for key, tag in analyzer.tags.items()
                         if key == real.__qualname__ or key.startswith(real.__qualname__ + ".")})
    return analyzer.code, tags


# Only these are pages; the staging folder also holds README.md, lessons/README.md and the lessons'
# table, which the home page includes.
include_patterns = ["index.md", "lessons/[0-9][0-9]_*.py", "figures/README.md", "docs/*.md",
                    "benchmarks/results/*.md", "api/*.md", "workbook.md"]
exclude_patterns = ["lessons/solutions/**", "lessons/run_all.py"]
if os.environ.get("SITE_LESSONS"):  # while working on the site: SITE_LESSONS="03 05" builds only these lessons
    include_patterns[1:2] = [f"lessons/{n.zfill(2)}_*.py" for n in os.environ["SITE_LESSONS"].split()]
root_doc = "index"

# ---------------------------------------------------------------- MyST and myst-nb
# jupytext reads each lesson; site/lesson_reader.py adds the run-it-yourself box, the functions the
# lesson calls (linked to their source), the worked answers of its "Try it", and folds the setup and
# the figure-drawing cells
nb_custom_formats = {".py": ["lesson_reader.reads", {}]}
# Every lesson runs unless this very lesson already ran on this very package: myst-nb's cache
# (jupyter-cache) matches a notebook by its code, and the cache's folder is named by a hash of the
# package's files, the kernel's startup file and the mode (fast or full), so a change to any of them
# runs every lesson again. The lessons to run are run beforehand, in parallel (one kernel per core:
# run_lessons_in_parallel below); myst-nb then reads their outputs from the cache. SITE_CACHE=0 runs
# every lesson, one after the other, as myst-nb does by itself.
USE_CACHE = os.environ.get("SITE_CACHE", "1") not in ("", "0")
nb_execution_mode = "cache" if USE_CACHE else "force"
nb_execution_timeout = 900  # seconds per cell: lesson 11 generates with a real model
# A failing lesson (an assert, an exception) is a warning that carries the cell's traceback; -W makes
# it fail the build, after every lesson ran, so one build names every failing lesson. (Raising
# instead would stop at the first and leave its traceback in a log file, not on the screen.)
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_execution_in_temp = False  # a lesson runs in lessons/, as a notebook opened there does
nb_merge_streams = True
nb_output_stderr = "warn"  # anything on stderr (a library warning, a progress bar) is a build warning: -W fails

# ---------------------------------------------------------------- the executed lessons' cache


def package_key() -> str:
    """A hash of what a lesson's outputs depend on besides its own code."""
    import hashlib

    h = hashlib.sha256(b"fast" if FAST else b"full")
    files = [p for p in sorted((ROOT / "transformer").rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    for p in files + [SITE / "kernel_startup.py", *sorted(ROOT.glob("requirements*.txt"))]:
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


CACHE_ROOT = ROOT / "_build" / "site_cache"
nb_execution_cache_path = str(CACHE_ROOT / f"{'fast' if FAST else 'full'}-{package_key()}")
if USE_CACHE:
    # the figures a cached lesson drew are kept beside its outputs; the gallery gets a copy (copy_figures)
    os.environ["TRANSFORMER_FIGURES"] = str(Path(nb_execution_cache_path) / "figures")
    for old in CACHE_ROOT.glob(f"{'fast' if FAST else 'full'}-*"):  # an older package's lessons: stale
        if str(old) != nb_execution_cache_path:
            shutil.rmtree(old, ignore_errors=True)


def run_lessons_in_parallel(app, env, docnames):
    """Before Sphinx reads the lessons one by one: run those the cache lacks, one per core at a time,
    and add each that succeeded to the cache. A lesson that failed is left out: myst-nb runs it
    again when it reads it, and its traceback fails the build as before."""
    if not USE_CACHE:
        return
    import concurrent.futures
    import multiprocessing
    import time

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from lesson_reader import reads
    from lesson_runs import execute_lesson

    Path(os.environ["TRANSFORMER_FIGURES"]).mkdir(parents=True, exist_ok=True)
    cache = get_cache(nb_execution_cache_path)
    todo = []
    for doc in docnames:
        if not doc.startswith("lessons/"):
            continue
        path = Path(app.srcdir) / f"{doc}.py"
        try:
            cache.match_cache_notebook(reads(path.read_text(encoding="utf-8")))
        except KeyError:
            todo.append(str(path))
    if not todo:
        return
    workers = min(len(todo), os.cpu_count() or 1)
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        runs = {pool.submit(execute_lesson, p, nb_execution_timeout): p for p in todo}
        for done in concurrent.futures.as_completed(runs):
            nb, seconds, error = done.result()
            if error is None:
                cache.cache_notebook_bundle(CacheBundleIn(nb, runs[done], data={"execution_seconds": seconds}),
                                            check_validity=False, overwrite=True)
    print(f"ran {len(todo)} lesson(s) on {workers} kernel(s) in {time.perf_counter() - start:.0f} s", flush=True)


def copy_figures(app, docname, source):
    """The gallery and the home page show the figures the lessons drew: with the cache, they are in
    the cache's folder, kept for the lessons that did not run again; SITE_FIGURES gets a copy."""
    drawn = Path(os.environ["TRANSFORMER_FIGURES"])
    if not USE_CACHE or docname.startswith("lessons/") or not drawn.is_dir():
        return
    SITE_FIGURES.mkdir(parents=True, exist_ok=True)
    for png in drawn.glob("*.png"):
        dest = SITE_FIGURES / png.name
        if not dest.exists() or dest.stat().st_mtime < png.stat().st_mtime:
            shutil.copy2(png, dest)


myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# ---------------------------------------------------------------- autodoc (the API reference)
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # a default as written (root=SYSFS_CACHE), not its repr (PosixPath('/sys/…'))
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
# the lessons as notebooks and the course's archive, made by site/build.py, at the site's root
EXTRA = ROOT / "_build" / "site_src" / "_extra"
html_extra_path = [str(EXTRA)] if EXTRA.is_dir() else []
html_favicon = str(SITE / "_static" / "favicon.svg")
html_css_files = ["site.css"]
html_js_files: list = [("site.js", {"defer": "defer"})]  # copy buttons, figures enlarged on click

# MathJax 3, local, taken from the pinned PyPI package sphinx-mathjax-offline (README.md, "Read it in
# the browser", says why), loaded in parts: the loader, the core, the TeX input (with AMS and
# autoload) and the CHTML output with its woff-v2 fonts, 0.75 MB where the all-in-one
# tex-chtml-full.js is 1.3 MB; a rarer TeX extension (boldsymbol, cancel, …) is fetched from the
# same folder when a page uses it. No menu, no speech. Sphinx adds MathJax only to pages with math.
MATHJAX_DIST = "sphinx-mathjax-offline"
mathjax_path = "mathjax/startup.js"
mathjax3_config = {"loader": {"load": ["input/tex", "output/chtml"]}}
MATHJAX_FILES = ["startup.js", "core.js", "input/tex.js", "input/tex/extensions", "output/chtml.js",
                 "output/chtml/fonts/tex.js", "output/chtml/fonts/woff-v2"]


def vendor_mathjax(dest: Path) -> None:
    src = Path(importlib.metadata.distribution(MATHJAX_DIST).locate_file("sphinx-mathjax-offline/static/mathjax"))
    for name in MATHJAX_FILES:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if (src / name).is_dir():
            shutil.copytree(src / name, dest / name, dirs_exist_ok=True)
        else:
            shutil.copy(src / name, dest / name)


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


def download_menu(app, pagename, templatename, context, doctree):
    """The theme's download menu: a lesson's page offers the lesson as a notebook, every page the
    course's archive; the lesson's .py (which imports the package) and the print-to-PDF stay."""
    from lesson_reader import ARCHIVE

    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        at = functools.partial(context["pathto"], resource=True)  # a file at the site's root, from this page
        extra = []
        if re.match(r"lessons/\d\d_\w+$", pagename):
            extra.append({"type": "link", "url": at(f"notebooks/{pagename.split('/')[1]}.ipynb"), "text": ".ipynb",
                          "tooltip": "this lesson as a notebook", "icon": "fas fa-code",
                          "label": "download-notebook-button"})
        extra.append({"type": "link", "url": at(f"downloads/{ARCHIVE}"), "text": "course (.tar.gz)",
                      "tooltip": "the whole course: download, then make lessons", "icon": "fas fa-file-zipper",
                      "label": "download-course-button"})
        group["buttons"][:0] = extra


IMG_WITHOUT_LOADING = re.compile(r"<img (?![^>]*\bloading=)")


def lazy_images(app, pagename, templatename, context, doctree):
    """Every image of a page loads when it nears the screen (the gallery holds ~70 figures)."""
    if "body" in context:
        context["body"] = IMG_WITHOUT_LOADING.sub('<img loading="lazy" ', context["body"])


FONTAWESOME_JS = re.compile(r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')


def drop_fontawesome_js(app, exception):
    """The theme loads Font Awesome twice: as a 1.5 MB script that swaps each icon for an SVG, and as
    the web font its stylesheet already declares (115 kB, only the glyphs used). The font is enough:
    the script goes from every page and from _static/."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        lean = FONTAWESOME_JS.sub("", html)
        if lean != html:
            page.write_text(lean, encoding="utf-8")
    for f in (out / "_static" / "scripts").glob("fontawesome.js*"):
        f.unlink()


class FileNameLinksAsTitles(SphinxPostTransform):
    """A Markdown link whose text is the file it points to (`[gpu.md](gpu.md)`, which reads well on
    GitHub) shows that page's title on the site; it runs before myst resolves the link (priority 9)."""
    default_priority = 5

    def run(self, **kwargs):
        for node in self.document.findall(addnodes.pending_xref):
            target, text = node.get("reftarget") or "", node.astext().strip()
            if (node.get("refdomain") != "doc" or not text.endswith(".md") or len(node) != 1
                    or not ("/" + target).endswith("/" + text.removesuffix(".md"))
                    or target not in self.env.titles):
                continue
            del node[0][:]
            node[0].extend(child.deepcopy() for child in self.env.titles[target].children)


def setup(app):
    app.connect("build-finished", drop_fontawesome_js)
    app.connect("html-page-context", download_menu, priority=502)  # after the theme made the menu (501)
    app.connect("html-page-context", lazy_images)
    app.connect("autodoc-process-docstring", docstring_to_rest)
    app.connect("env-before-read-docs", lessons_first)
    app.connect("env-before-read-docs", run_lessons_in_parallel, priority=600)  # after the sort
    app.connect("source-read", copy_figures)
    app.connect("builder-inited", export_views)
    app.connect("viewcode-find-source", viewcode_source)
    app.add_post_transform(FileNameLinksAsTitles)
