"""The course website as a reader's browser sees it: build once, serve on 127.0.0.1, check a page.

Used by tests/test_site.py (and its fixtures in tests/support/conftest_site.py):

- `browser_missing()`: why the browser tests cannot run here, or None;
- `built_site()`: _build/site/, built by `site/build.py --fast` if it is not there yet (under a file
  lock: the suite runs on two pytest-xdist workers, and one build is enough);
- `serve(folder)`: a static HTTP server on 127.0.0.1 and a free port, in a thread;
- `open_page(context, url)` and `page_problems(...)`: load a page in headless Chromium, block and
  record every request that leaves 127.0.0.1, and list what a reader would stumble on.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
SITE_OUT = ROOT / "_build" / "site"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))

# what must not be on a page: the build machine's paths (in printed output or prose), raw TeX that
# MathJax did not typeset
MACHINE_PATH = re.compile(r"/work/|/home/|/root/|/tmp/|site-packages|" + re.escape(str(ROOT)))
RAW_TEX = re.compile(r"\$\$|\\(?:frac|sqrt|mathrm|mathbb|left|right|cdot|top|sum|text)\b")


def browser_missing() -> str | None:
    """Why headless Chromium cannot be driven here (a line for the skip and the summary), or None."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright not installed (pip install -r requirements-site.txt)"
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} not found (apt-get install chromium)"
    return None


# what the site is built from: a file here newer than the built index.html makes the site stale
SITE_SOURCES = ("lessons/*.py", "lessons/solutions/*.py", "docs/*.md", "site/**/*", "transformer/**/*.py", "README.md", "figures/README.md",
                "benchmarks/results/*.md", "workbook/*.py")


def stale_sources(index: Path) -> list[str]:
    """The source files changed since `index` was built (all of them when it is missing)."""
    built = index.stat().st_mtime if index.is_file() else float("-inf")
    return [str(p.relative_to(ROOT)) for pattern in SITE_SOURCES for p in ROOT.glob(pattern)
            if p.is_file() and "__pycache__" not in p.parts and p.stat().st_mtime > built]


def built_site(timeout: float = 1800) -> Path:
    """_build/site/, built again (fast mode) under a lock if it is missing or older than a source."""
    from filelock import FileLock

    SITE_OUT.parent.mkdir(exist_ok=True)
    with FileLock(str(SITE_OUT.parent / "site.lock"), timeout=timeout):
        if stale_sources(SITE_OUT / "index.html"):
            proc = subprocess.run([sys.executable, str(ROOT / "site" / "build.py"), "--fast"], cwd=ROOT,
                                  capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
                raise RuntimeError(f"site/build.py --fast failed (exit {proc.returncode}):\n{tail}")
    return SITE_OUT


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test output is not an access log
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a browser that closed its connection early: no traceback
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@contextmanager
def serve(folder: Path):
    """http://127.0.0.1:PORT/ serving folder, for the duration of the with-block."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def launch(playwright):
    """Headless Chromium from the system (Playwright cannot download its own here)."""
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=args, headless=True)


class PageLog:
    """What happened while a page loaded: console errors, page errors, requests that left 127.0.0.1."""

    def __init__(self):
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.external: list[str] = []


def open_page(context, url: str, wait_math: bool = True):
    """(page, log): url loaded in a new tab, its math typeset and images decoded."""
    page = context.new_page()
    log = PageLog()
    page.on("console", lambda m: log.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: log.page_errors.append(str(e)))

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:", "about:")) or host == "127.0.0.1":
            return r.continue_()
        log.external.append(r.request.url)  # recorded and blocked: nothing leaves the machine
        return r.abort()

    page.route("**/*", route)
    page.goto(url, wait_until="load")
    page.evaluate("""async () => {
        for (const img of document.images) img.loading = 'eager';
        await Promise.all([...document.images].map(i => i.decode().catch(() => null)));
    }""")
    if wait_math:
        page.evaluate("""async () => {
            if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
        }""")
    return page, log


PAGE_FACTS = """() => {
    const article = document.querySelector('article') || document.body;
    const prose = article.cloneNode(true);
    prose.querySelectorAll('pre, code, script, style, mjx-container, .cell_output').forEach(e => e.remove());
    const outputs = [...article.querySelectorAll('.cell_output')].map(e => e.innerText);
    return {
        images: [...document.images].map(i => ({src: i.getAttribute('src'), w: i.naturalWidth})),
        math: document.querySelectorAll('.math').length,
        typeset: document.querySelectorAll('mjx-container').length,
        untypeset: [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container'))
                   .map(e => e.textContent.slice(0, 80)),
        prose: prose.textContent,
        outputs: outputs.join('\\n'),
    };
}"""


def page_problems(page, log: PageLog, expect_math: bool | None = None) -> list[str]:
    """What a reader would stumble on in a loaded page; [] when it is clean.

    expect_math: the page's source has formulas (then MathJax must have typeset some); None: no claim.
    """
    facts = page.evaluate(PAGE_FACTS)
    problems = [f"console error: {e}" for e in log.console_errors]
    problems += [f"page error: {e}" for e in log.page_errors]
    problems += [f"request leaves 127.0.0.1: {u}" for u in log.external]
    problems += [f"image not loaded: {i['src']}" for i in facts["images"] if not i["w"]]
    if expect_math and not facts["typeset"]:
        problems.append("the source has math but MathJax typeset none")
    problems += [f"math left untypeset: {t!r}" for t in facts["untypeset"][:5]]
    prose, outputs = facts["prose"], facts["outputs"]
    for m in list(RAW_TEX.finditer(prose))[:3]:
        problems.append(f"raw TeX in the text: …{prose[max(0, m.start() - 40):m.end() + 40]!r}…")
    for name, text in (("prose", prose), ("outputs", outputs)):
        for m in list(MACHINE_PATH.finditer(text))[:3]:
            problems.append(f"machine path in the {name}: …{text[max(0, m.start() - 60):m.end() + 40]!r}…")
    return problems
