"""The course website, read in a real browser (headless Chromium through Playwright).

The site is _build/site/ (`make site`; built here in fast mode if it is missing), served on
127.0.0.1. Every page must load with no console or page error and no request leaving 127.0.0.1,
every image must load, the math must be typeset (no raw `$$` or `\\frac` left in the text), and no
path of the build machine may show. Every lesson has its page, in order, reached by "next" from the
home page; the search finds "softmax"; the gallery shows every figure figures/README.md captions; the
interactive views' scripts and placeholders reach the pages. The last test breaks a page on purpose
and checks that each check catches it.

Without Chromium or Playwright these tests skip, and `make test` ends by saying so.
"""
from __future__ import annotations

import inspect
import io
import re
import sys
from pathlib import Path

import pytest

import site_support
from site_support import ROOT, open_page, page_problems

LESSONS = sorted(p for p in (ROOT / "lessons").glob("[0-9][0-9]_*.py"))
GALLERY = re.findall(r"!\[\]\(([\w.]+\.png)\)", (ROOT / "figures" / "README.md").read_text(encoding="utf-8"))
PAGES = (["index.html"] + [f"lessons/{p.stem}.html" for p in LESSONS] + ["figures/README.html"]
         + [f"docs/{p.stem}.html" for p in sorted((ROOT / "docs").glob("*.md"))]
         + [f"benchmarks/results/{p.stem}.html" for p in sorted((ROOT / "benchmarks" / "results").glob("*.md"))]
         + ["api/index.html"])
INLINE_MATH = re.compile(r"\$\$|(?<![\w`$\\])\$[^\s$`][^$`\n]*\$")


def source_has_math(page: str) -> bool | None:
    """Whether the page's source writes a formula in $…$ (lessons and docs); None for generated pages."""
    if page.startswith("lessons/"):
        src = ROOT / "lessons" / (Path(page).stem + ".py")
    elif page.startswith("docs/"):
        src = ROOT / "docs" / (Path(page).stem + ".md")
    else:
        return None
    text = re.sub(r"`[^`\n]*`", "", src.read_text(encoding="utf-8"))  # code spans are not math
    return bool(INLINE_MATH.search(text))


@pytest.mark.parametrize("page", PAGES)
def test_page_is_clean(page, site_dir, site_url, browser_context):
    assert (site_dir / page).is_file(), f"{page} is not in the built site (rebuild it: make site)"
    p, log = open_page(browser_context, site_url + page)
    problems = page_problems(p, log, expect_math=source_has_math(page))
    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


def test_api_pages_are_clean_and_list_every_public_name(site_dir, site_url, browser_context):
    import transformer as T

    pages = sorted((site_dir / "api").glob("*.html"))
    assert len(pages) > 2, "the API reference has no folder pages"
    documented = set()
    for path in pages:
        p, log = open_page(browser_context, site_url + f"api/{path.name}")
        problems = page_problems(p, log)
        assert not problems, f"api/{path.name}:\n  " + "\n  ".join(problems)
        documented |= set(p.eval_on_selector_all("dt.sig[id^='transformer.']", "els => els.map(e => e.id)"))
        p.close()
    public = {f"transformer.{n}" for n in dir(T)
              if not n.startswith("_") and callable(getattr(T, n)) and not inspect.ismodule(getattr(T, n))}
    assert public - documented == set(), (f"public names without an API entry: {sorted(public - documented)} "
                                         "(if they are new, rebuild the site: make site)")


def test_every_lesson_reached_by_next_from_the_home_page(site_url, browser_context):
    """A reader who clicks "next" from the home page meets every lesson, in order; "previous" goes back."""
    p, _ = open_page(browser_context, site_url + "index.html", wait_math=False)
    sidebar = p.eval_on_selector_all("nav.bd-links a.reference.internal", "els => els.map(e => e.href)")
    in_sidebar = [h.rsplit("/", 1)[-1] for h in sidebar if "/lessons/" in h]
    assert in_sidebar == [f"{x.stem}.html" for x in LESSONS], "the sidebar does not list the lessons in order"
    before = "index.html"
    for lesson in LESSONS:  # the links and the title are in the document: no need to wait for its figures
        with p.expect_navigation(wait_until="domcontentloaded"):
            p.click("a.right-next")
        assert p.url.endswith(f"lessons/{lesson.stem}.html"), f"'next' led to {p.url}, not {lesson.stem}"
        assert lesson.stem[:2] in p.title(), f"{p.url} has title {p.title()!r}"
        back = p.eval_on_selector("a.left-prev", "a => a.href")  # where "previous" leads, resolved by the browser
        assert back.endswith(before), f"'previous' on {lesson.stem} leads to {back}, not {before}"
        before = f"lessons/{lesson.stem}.html"
    with p.expect_navigation(wait_until="domcontentloaded"):  # and following it goes there
        p.click("a.left-prev")
    assert p.url.endswith(f"lessons/{LESSONS[-2].stem}.html"), f"'previous' led to {p.url}, not {LESSONS[-2].stem}"


def test_search_finds_softmax(site_url, browser_context):
    p, log = open_page(browser_context, site_url + "search.html?q=softmax", wait_math=False)
    p.wait_for_selector("#search-results ul.search li", timeout=30_000)
    # the results arrive a few at a time; the summary line is written when the search has finished
    p.wait_for_function("() => /found/i.test(document.querySelector('#search-results .search-summary')?.textContent || '')",
                        timeout=60_000)
    hits = p.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.getAttribute('href'))")
    assert any("03_attention" in h for h in hits), f"searching 'softmax' does not find lesson 03: {hits[:10]}"
    assert not log.console_errors and not log.page_errors and not log.external


def test_gallery_shows_every_captioned_figure(site_url, browser_context):
    assert GALLERY, "figures/README.md captions no figure"
    p, log = open_page(browser_context, site_url + "figures/README.html", wait_math=False)
    shown = {i["src"].rsplit("/", 1)[-1]: i["w"] for i in
             p.eval_on_selector_all("article img", "els => els.map(i => ({src: i.src, w: i.naturalWidth}))")}
    missing = [f for f in GALLERY if not shown.get(f)]
    assert not missing, f"the gallery does not show {missing}"
    assert page_problems(p, log) == []


def test_views_reach_the_pages(site_dir, site_url, browser_context):
    """site/views/*.js and *.css are on every page (deferred); each lesson's view placeholder survives
    into its page; site/export_views.py's data files are in _static/views/data/."""
    scripts = sorted(p.name for p in (ROOT / "site" / "views").glob("*.js"))
    styles = sorted(p.name for p in (ROOT / "site" / "views").glob("*.css"))
    placed = {lesson: re.findall(r'<div class="tfs-view" data-view="(\w+)"', lesson.read_text(encoding="utf-8"))
              for lesson in LESSONS}
    if not scripts and not any(placed.values()):
        pytest.skip("no interactive views in site/views/ yet")
    for page in ["index.html", f"lessons/{LESSONS[0].stem}.html"]:
        html = (site_dir / page).read_text(encoding="utf-8")
        for name in scripts:
            assert re.search(rf'<script defer="defer" src="[./]*_static/views/{name}', html), f"{page} lacks {name}"
        for name in styles:
            assert f"_static/views/{name}" in html, f"{page} lacks {name}"
    for lesson, views in placed.items():
        if not views:
            continue
        p, _ = open_page(browser_context, site_url + f"lessons/{lesson.stem}.html", wait_math=False)
        for view in views:
            assert p.locator(f'article div.tfs-view[data-view="{view}"]').count() == 1, \
                f"the {view} view's placeholder is not in {lesson.stem}.html"
        p.close()
    if (ROOT / "site" / "export_views.py").is_file():
        data = sorted(f.name for f in (site_dir / "_static" / "views" / "data").glob("*.js"))
        assert data, "site/export_views.py wrote no data file into _static/views/data/"


def test_each_check_catches_a_broken_page(site_dir, browser_context, tmp_path):
    """Copies of a lesson page, broken on purpose: a missing image, a script from a CDN, TeX outside
    any math, a machine path in an output, a script error; and one without MathJax. Each check must
    report its own."""
    for entry in site_dir.iterdir():  # the site, by links, but for the lessons/ folder of ours
        if entry.name != "lessons":
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "lessons").mkdir()
    html = (site_dir / f"lessons/{LESSONS[2].stem}.html").read_text(encoding="utf-8")
    injected = ('<img src="no_such_figure.png" alt="">'
                '<script src="https://cdn.example.com/x.js"></script>'
                '<p>the weights \\frac{QK^T}{\\sqrt{d_k}} left as typed</p>'
                '<div class="cell_output"><pre>PosixPath(\'/work/main/figures/x.png\')</pre></div>'
                '<script>undefinedFunction()</script>')
    assert "</article>" in html
    (tmp_path / "lessons" / "broken.html").write_text(html.replace("</article>", injected + "</article>", 1),
                                                      encoding="utf-8")
    no_mathjax = re.sub(r'<script[^>]*src="[^"]*mathjax/[^"]*"[^>]*></script>', "", html)
    assert no_mathjax != html, "the lesson page loads no MathJax script"
    (tmp_path / "lessons" / "no_mathjax.html").write_text(no_mathjax, encoding="utf-8")
    with site_support.serve(tmp_path) as url:
        p, log = open_page(browser_context, url + "lessons/broken.html")
        broken = "\n".join(page_problems(p, log, expect_math=True))
        p, log = open_page(browser_context, url + "lessons/no_mathjax.html")
        untypeset = "\n".join(page_problems(p, log, expect_math=True))
    assert "image not loaded: no_such_figure.png" in broken
    assert "console error" in broken  # the missing image's 404
    assert "request leaves 127.0.0.1: https://cdn.example.com/x.js" in broken
    assert "raw TeX in the text" in broken and "frac{QK^T}" in broken
    assert "machine path in the outputs" in broken and "/work/main/figures/x.png" in broken
    assert "page error" in broken and "undefinedFunction" in broken
    assert "MathJax typeset none" in untypeset and "math left untypeset" in untypeset


def test_docstrings_become_valid_rest():
    """Every public docstring, made into reST for the API pages (site/docstrings.py), parses with no
    docutils warning: the site's -W build would fail on one."""
    docutils_core = pytest.importorskip("docutils.core")
    sys.path.insert(0, str(ROOT / "site"))
    from docstrings import to_rest
    import transformer as T

    objects = []
    for name in dir(T):
        obj = getattr(T, name)
        if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
            continue
        objects.append((name, obj))
        if inspect.isclass(obj):
            objects += [(f"{name}.{k}", v) for k, v in vars(obj).items()
                        if not k.startswith("_") and (callable(v) or isinstance(v, property))]
    objects += [(m.__name__, m) for m in {inspect.getmodule(o) for _, o in objects} if m]
    bad = []
    for name, obj in objects:
        doc = inspect.getdoc(obj)
        if not doc:
            continue
        warnings = io.StringIO()
        rest = "\n".join([".. default-role:: code", "", *to_rest(doc.splitlines())])
        docutils_core.publish_doctree(rest, settings_overrides={"report_level": 2, "halt_level": 5,
                                                                "warning_stream": warnings})
        if warnings.getvalue():
            bad.append(f"{name}: {warnings.getvalue().strip()}")
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------- what a reader saw go wrong (issue #33)
LESSON_PAGE = f"lessons/{LESSONS[2].stem}.html"  # lesson 03: formulas, wide figures, a setup cell


def test_in_page_contents_reachable_at_every_width(browser):
    """From 1200 to 1499 px the in-page contents sit behind the theme's button, as below 1200 px."""
    for width in (1000, 1300, 1450):
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        with site_support.serve(site_support.SITE_OUT) as url:
            p, _ = open_page(ctx, url + LESSON_PAGE, wait_math=False)
            toc = p.locator(".bd-sidebar-secondary nav.page-toc a").first
            if not toc.is_visible():
                button = p.locator(".article-header-buttons button.secondary-toggle")
                assert button.is_visible(), f"at {width} px the in-page contents are hidden and have no button"
                button.click()
                shown = p.locator("dialog[open] nav.page-toc a, .bd-sidebar-secondary nav.page-toc a").first
                shown.wait_for(state="visible", timeout=5_000)
        ctx.close()


def test_figures_have_captions_for_alt_text_and_open_larger(site_dir, site_url, browser_context):
    p, _ = open_page(browser_context, site_url + LESSON_PAGE, wait_math=False)
    figures = p.locator("article .cell_output img")
    assert figures.count() > 3
    alts = figures.evaluate_all("els => els.map(e => e.alt)")
    assert not [a for a in alts if ".png" in a or "_images" in a or len(a) < 20], f"alt texts: {alts[:4]}"
    wide = p.evaluate("""() => [...document.querySelectorAll('article .cell_output img')]
                         .findIndex(i => i.naturalWidth > i.clientWidth * 1.3)""")
    assert wide >= 0, "no figure of lesson 03 is shrunk: nothing to enlarge"
    # a shrunk figure says it enlarges (a button under it, the zoom-in cursor); one at its size does not
    p.wait_for_function("""() => [...document.querySelectorAll('article .cell_output img')].every(i =>
        i.nextElementSibling?.classList.contains('tfs-enlarge')
        && i.nextElementSibling.hidden === !(i.naturalWidth > i.clientWidth * 1.05))""", timeout=5_000)
    hint = figures.nth(wide).locator("xpath=following-sibling::button[1]")
    assert "enlarge" in hint.inner_text() and figures.nth(wide).evaluate("i => getComputedStyle(i).cursor") == "zoom-in"
    hint.click()
    p.locator(".tfs-zoom img").wait_for(state="visible", timeout=5_000)
    p.keyboard.press("Escape")
    figures.nth(wide).click()
    big = p.locator(".tfs-zoom img")
    big.wait_for(state="visible", timeout=5_000)
    assert big.evaluate("i => i.clientWidth >= i.naturalWidth - 1"), "the enlarged figure is not at full size"
    p.keyboard.press("Escape")
    assert p.locator(".tfs-zoom").count() == 0
    gallery = (site_dir / "figures" / "README.html").read_text(encoding="utf-8")
    imgs = re.findall(r"<img [^>]*>", gallery)
    assert len(imgs) >= len(GALLERY), "the gallery lacks figures"
    no_alt = [i for i in imgs if not re.search(r'alt="[^"]{20,}"', i) or re.search(r'alt="[^"]*\.png"', i)]
    assert not no_alt, f"gallery figures without their caption as alt text: {no_alt[:2]}"
    eager = [i for i in imgs if 'loading="lazy"' not in i]
    assert not eager, f"gallery figures loaded before they are near the screen: {eager[:2]}"


def test_setup_and_drawing_code_folds_and_code_copies(site_url, browser_context):
    p, _ = open_page(browser_context, site_url + LESSON_PAGE, wait_math=False)
    cells = p.locator("article div.cell")
    folded = p.locator("article div.cell.tag_hide-input")
    assert folded.count() >= 3, "the setup and figure cells of lesson 03 are not folded"
    assert folded.first.evaluate("c => c === document.querySelector('article div.cell')"), \
        "the setup cell is not folded"
    code = folded.first.locator("div.highlight")
    assert not code.is_visible(), "the setup cell's code shows before it is opened"
    folded.first.locator("summary").first.click()
    assert code.is_visible() and "import transformer as T" in code.inner_text()
    assert cells.count() > folded.count() + 5, "more than the setup and the drawing is folded"
    block = p.locator("article div.cell:not(.tag_hide-input) div.highlight").first
    block.hover()
    button = block.locator("button.tfs-copy")
    assert button.is_visible(), "a block of code has no copy button"
    browser_context.grant_permissions(["clipboard-read", "clipboard-write"])
    button.click()
    copied = p.evaluate("() => navigator.clipboard.readText()")
    assert copied.strip() and copied.strip() in block.inner_text()


def test_formulas_scroll_on_a_phone(browser):
    ctx = browser.new_context(viewport={"width": 375, "height": 800}, device_scale_factor=2, is_mobile=True)
    with site_support.serve(site_support.SITE_OUT) as url:
        p, _ = open_page(ctx, url + LESSON_PAGE)
        clipped = p.evaluate("""() => [...document.querySelectorAll('article mjx-container[display="true"]')]
            .filter(m => m.scrollWidth > m.clientWidth + 1 && getComputedStyle(m).overflowX !== 'auto')
            .map(m => m.textContent.slice(0, 40))""")
        assert not clipped, f"display formulas cut off on a phone: {clipped}"
        assert p.evaluate("() => document.documentElement.scrollWidth") <= 376, "the page scrolls sideways on a phone"
    ctx.close()


def test_favicon_titles_and_wording(site_dir, site_url, browser_context):
    p, log = open_page(browser_context, site_url + "index.html", wait_math=False)
    icon = p.locator("link[rel='icon']").get_attribute("href")
    assert icon and p.request.get(site_url + icon.lstrip("./")).ok, "no favicon"
    text = p.locator("article").inner_text()
    assert not re.search(r"\bnotes? 00\d", text, re.I), "the home page cites the source notes the reader lacks"
    for doc in sorted((site_dir / "docs").glob("*.html")):
        assert not re.search(r"\bnotes? 00\d", doc.read_text(encoding="utf-8"), re.I), f"{doc.name} cites a source note"
    titles = {}
    for page in sorted((site_dir / "benchmarks" / "results").glob("*.html")):
        title = re.search(r"<title>(.*?)</title>", page.read_text(encoding="utf-8"), re.S).group(1)
        assert title not in titles, f"{page.name} and {titles.get(title)} share the title {title!r}"
        titles[title] = page.name
    api = (site_dir / "api" / "flash.html").read_text(encoding="utf-8")
    assert "cache_bytes" in api and "PosixPath" not in api, "an API default shows as PosixPath(...)"


def test_search_snippets_are_text(site_url, browser_context):
    p, log = open_page(browser_context, site_url + "search.html?q=softmax", wait_math=False)
    p.wait_for_function("() => /found/i.test(document.querySelector('#search-results .search-summary')?.textContent || '')",
                        timeout=60_000)
    p.wait_for_function("() => document.querySelectorAll('#search-results p.context').length >= 3", timeout=30_000)
    snippets = p.eval_on_selector_all("#search-results p.context", "els => els.map(e => e.textContent)")
    for s in snippets:
        assert not RAW_TEX_OR_CHROME.search(s), f"search snippet with TeX or page chrome: {s!r}"


RAW_TEX_OR_CHROME = re.compile(r"\\(?:frac|sqrt|mathrm|top|left|right|cdot)\b|\\\(|Print to PDF|\.ipynb\b|Contents\s")


def test_figures_dimmed_in_dark_mode(site_url, browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    p, _ = open_page(ctx, site_url + LESSON_PAGE, wait_math=False)
    p.evaluate("() => document.documentElement.dataset.theme = 'dark'")
    img = p.locator("article .cell_output img").first
    assert img.evaluate("i => getComputedStyle(i).filter") not in ("", "none"), "figures glare in dark mode"
    ctx.close()


def test_lesson_page_weight(site_dir, site_url, browser_context):
    """A lesson's page, before the reader scrolls: under half its old 4.5 MB (the icon script, every
    figure loaded at once); no page loads the icon script; a page without formulas loads no MathJax."""
    p = browser_context.new_page()
    sizes = {}
    p.on("requestfinished", lambda r: sizes.__setitem__(r.url, (r.sizes()["responseBodySize"])))
    p.goto(site_url + LESSON_PAGE, wait_until="load")
    p.wait_for_timeout(500)
    total = sum(sizes.values())
    assert total < 2.25 * 2**20, f"{LESSON_PAGE} weighs {total / 2**20:.1f} MB: " + \
        ", ".join(f"{u.rsplit('/', 1)[-1]} {s // 1024} kB" for u, s in sorted(sizes.items(), key=lambda x: -x[1])[:5])
    assert not [u for u in sizes if "fontawesome.js" in u], "the icon script is back"
    html = (site_dir / "benchmarks" / "results" / "tokenizers.html").read_text(encoding="utf-8")
    if "class=\"math" not in html:
        assert "_static/mathjax/" not in html, "a page without formulas loads MathJax"


# ---------------------------------------------------------------- a reader on a phone and on a desktop
def test_menu_button_opens_the_lessons_on_a_phone_and_hides_them_on_a_desktop(browser):
    """The ☰ above the article: the theme binds the first .primary-toggle, in the hidden top bar;
    site.js forwards the visible one's click (a dialog below 992 px, the sidebar hidden above)."""
    with site_support.serve(site_support.SITE_OUT) as url:
        ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
        p, _ = open_page(ctx, url + "lessons/11_real_llm.html", wait_math=False)
        lessons = p.locator("dialog[open] nav.bd-links a", has_text="03 · ")
        assert lessons.count() == 0
        p.locator(".bd-header-article button.primary-toggle").click()
        lessons.wait_for(state="visible", timeout=5_000)
        ctx.close()
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        p, _ = open_page(ctx, url + "lessons/11_real_llm.html", wait_math=False)
        sidebar = p.locator("nav.bd-links a", has_text="03 · ").first
        assert sidebar.is_visible()
        p.locator(".bd-header-article button.primary-toggle").click()
        sidebar.wait_for(state="hidden", timeout=5_000)
        assert p.locator("article").evaluate("a => a.getBoundingClientRect().left") < 100, "the sidebar left a gap"
        ctx.close()


# pages that scrolled sideways at 390 px: a cuDNN kernel's name and file paths in
# code, API signatures, a path in a docstring's prose, a code span in a heading, the index's columns
PHONE_PAGES = ["benchmarks/results/gpu.html", "api/models.html", "api/flash.html", "workbook.html", "docs/gpu.html",
               "lessons/15_cross_attention.html", "lessons/17_flash_gpu_kernels.html",
               "lessons/19_training_from_scratch.html", "genindex.html"]


def test_no_page_scrolls_sideways_on_a_phone(browser):
    """A table, a block of code or a formula may scroll inside its own box; the page may not."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    with site_support.serve(site_support.SITE_OUT) as url:
        wide = {}
        for page in PHONE_PAGES:
            p, _ = open_page(ctx, url + page, wait_math=False)
            width = p.evaluate("() => document.documentElement.scrollWidth")
            if width > 390:
                wide[page] = width
            p.close()
    ctx.close()
    assert not wide, f"pages wider than a 390 px phone: {wide}"


def test_boxes_that_scroll_sideways_fade_where_more_lies(browser):
    """The GPU benchmark's table at 1280 px, and a view's drawing at 390 px: a fade on the right while
    more lies to the right, on the left once scrolled (site.js and site.css)."""
    def faded(box):
        return box.evaluate("b => [...b.classList].filter(c => c.startsWith('tfs-more-')).sort().join(' ') + "
                            "' ' + (getComputedStyle(b).maskImage || getComputedStyle(b).webkitMaskImage)")

    with site_support.serve(site_support.SITE_OUT) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        p, _ = open_page(ctx, url + "benchmarks/results/gpu.html", wait_math=False)
        box = p.locator("article .pst-scrollable-table-container").first
        assert box.evaluate("b => b.scrollWidth > b.clientWidth"), "the GPU table fits: nothing to hint"
        assert faded(box).startswith("tfs-more-right linear-gradient"), faded(box)
        box.evaluate("b => b.scrollLeft = b.scrollWidth")
        p.wait_for_function("b => !b.classList.contains('tfs-more-right')", arg=box.element_handle(), timeout=5_000)
        assert faded(box).startswith("tfs-more-left linear-gradient"), faded(box)
        ctx.close()
        ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
        p, _ = open_page(ctx, url + "lessons/06_kv_cache.html", wait_math=False)
        view = p.locator('div.tfs-view[data-view="kv_cache"]').first
        view.scroll_into_view_if_needed()
        strip = view.locator(".tfs-svg-scroll").first  # the weight strip: a drawing stops shrinking at 80 %
        strip.wait_for(timeout=20_000)
        assert strip.evaluate("b => b.scrollWidth > b.clientWidth"), "the strip fits a phone: nothing to hint"
        p.wait_for_function("t => t.classList.contains('tfs-more-right')", arg=strip.element_handle(), timeout=5_000)
        ctx.close()


def test_every_source_link_lands_on_its_definition(site_dir):
    """Each "(source)" of a lesson's box and each [source] of the API pages names an anchor that its
    source page holds: T.llama_forward, models/llama.py's `forward`, included."""
    links = set()
    for page in [*sorted((site_dir / "lessons").glob("*.html")), *sorted((site_dir / "api").glob("*.html"))]:
        html = page.read_text(encoding="utf-8")
        links |= {(page.parent / href).resolve().relative_to(site_dir.resolve()).as_posix() + "#" + anchor
                  for href, anchor in re.findall(r'href="([^"#]*_modules/[^"#]+)#([^"]+)"', html)}
    assert any(link.endswith("models/llama.html#llama_forward") for link in links), "llama_forward has no source link"
    missing = []
    for link in sorted(links):
        path, anchor = link.split("#")
        if f'id="{anchor}"' not in (site_dir / path).read_text(encoding="utf-8"):
            missing.append(link)
    assert not missing, f"source links to anchors their page lacks: {missing}"


def test_links_named_by_their_file_show_the_page_title(site_dir):
    """`[gpu.md](gpu.md)` reads well on GitHub; on the site the link shows the page's title (conf.py)."""
    bare = {}
    for page in sorted(site_dir.glob("docs/*.html")):
        texts = re.findall(r'<a [^>]*href="[^"]*"[^>]*>(?:<span[^>]*>)?([\w./-]+\.md)(?:</span>)?</a>',
                           page.read_text(encoding="utf-8"))
        if texts:
            bare[page.name] = texts
    assert not bare, f"links that show a file name: {bare}"
    title = re.search(r"^# (.+)$", (ROOT / "docs" / "gpu.md").read_text(encoding="utf-8"), re.M).group(1)
    packing = (site_dir / "docs" / "packing.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="reference internal" href="gpu.html"><span[^>]*>' + re.escape(title) + "</span></a>",
                     packing), f"docs/packing.md's link to gpu.md does not read {title!r}"
