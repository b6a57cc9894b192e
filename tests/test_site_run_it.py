"""From the course website to running code, read in headless Chromium (tests/support/site_support.py).

A lesson's page links each package function it calls to that function's source page (Sphinx's
viewcode), and the source page shows the function; the lesson's notebook link downloads a notebook
with the lesson's cells; the course's archive is in the site, small, and holds what `make lessons`
and `make test` need; the worked answers of "Try it" stay hidden until their "show" is clicked.
"""
from __future__ import annotations

import tarfile

import pytest

from site_support import ROOT, open_page

LESSON = "03_attention"
ARCHIVE = "downloads/transformer-from-scratch.tar.gz"
ARCHIVE_LIMIT = 3 * 2**20  # the package, lessons, workbook and tests gzip to ~0.8 MB; the figures stay out


def test_lesson_links_a_function_to_its_source(site_url, browser_context):
    p, log = open_page(browser_context, site_url + f"lessons/{LESSON}.html", wait_math=False)
    box = p.locator("article .tfs-lesson-box")
    assert box.count() == 1, "the lesson has no box with the functions it calls"
    source = box.locator("a.tfs-source[title='the source of softmax']")
    assert source.count() == 1, "the box does not link softmax to its source"
    api = box.locator("a.reference[href$='api/core.html#transformer.softmax']")
    assert api.count() == 1 and api.inner_text() == "softmax", "the box does not link softmax to its API entry"
    source.click()
    p.wait_for_load_state("load")
    assert p.url.endswith("_modules/transformer/core/attention.html#softmax"), p.url
    block = p.locator("div.viewcode-block#softmax")
    assert block.count() == 1 and block.is_visible(), "the source page does not show softmax"
    assert "def softmax(" in block.inner_text()
    assert block.bounding_box()["y"] < 600, "the source page is not scrolled to softmax"
    assert not log.console_errors and not log.page_errors and not log.external


def test_api_entry_links_to_its_source(site_url, browser_context):
    p, _ = open_page(browser_context, site_url + "api/core.html", wait_math=False)
    link = p.locator("dt.sig#transformer\\.softmax a:has(.viewcode-link)")
    assert link.count() == 1, "the API entry of softmax has no [source] link"
    assert link.get_attribute("href").endswith("_modules/transformer/core/attention.html#softmax")


def test_lesson_notebook_downloads_with_the_lessons_cells(site_url, browser_context, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    jupytext = pytest.importorskip("jupytext")
    p, _ = open_page(browser_context, site_url + f"lessons/{LESSON}.html", wait_math=False)
    menu = p.locator(".dropdown-download-buttons a[href$='notebooks/%s.ipynb']" % LESSON)
    assert menu.count() == 1, "the download menu does not offer the lesson's .ipynb"
    with p.expect_download() as download:
        p.locator(f"article a.tfs-notebook").click()
    path = tmp_path / f"{LESSON}.ipynb"
    download.value.save_as(path)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    lesson = jupytext.read(ROOT / "lessons" / f"{LESSON}.py", fmt="py:percent")
    assert [(c.cell_type, c.source) for c in nb.cells] == [(c.cell_type, c.source) for c in lesson.cells]
    assert nb.metadata.kernelspec.name == "python3"


def test_course_archive_is_offered_and_holds_the_course(site_dir, site_url, browser_context):
    archive = site_dir / ARCHIVE
    assert archive.is_file(), f"{ARCHIVE} is not in the built site"
    assert archive.stat().st_size < ARCHIVE_LIMIT, f"the course archive is {archive.stat().st_size} bytes"
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for needed in ["Makefile", "transformer/__init__.py", "lessons/03_attention.py", "workbook/03_attention.py",
                   "requirements.txt", "requirements-models.txt", "lessons/run_all.py", "tests/conftest.py"]:
        assert f"transformer-from-scratch/{needed}" in names, f"the archive lacks {needed}"
    assert not [n for n in names if n.endswith(".png")], "the archive carries drawn figures"
    for page, prefix in (("index.html", ""), (f"lessons/{LESSON}.html", "../")):
        p, _ = open_page(browser_context, site_url + page, wait_math=False)
        first = p.locator(f"article a[href='{prefix}{ARCHIVE}']").first
        assert first.count() == 1, f"{page} does not link the course's archive"
        step = first.locator("xpath=ancestor::*[self::p or self::li][1]").inner_text()
        assert "make lessons" in step, f"{page}: the archive's link is not followed by 'make lessons': {step!r}"
        menu = p.locator(f".dropdown-download-buttons a[href='{prefix}{ARCHIVE}']")
        assert menu.count() == 1, f"{page}: the download menu does not offer the course"
        response = p.request.get(site_url + ARCHIVE)
        assert response.ok and len(response.body()) == archive.stat().st_size


def test_try_it_answer_hidden_until_show_is_clicked(site_url, browser_context):
    p, _ = open_page(browser_context, site_url + f"lessons/{LESSON}.html", wait_math=False)
    answers = p.locator("article details.tfs-solution")
    assert answers.count() >= 3, "lesson 03's page does not carry its three worked answers"
    first = answers.filter(has_text="exercise 1").first
    code = first.locator("div.highlight")
    assert first.get_attribute("open") is None and not code.is_visible(), "an answer shows before 'show'"
    first.locator("summary").click()
    assert code.is_visible() and "def exercise_1" in code.inner_text()
    assert "def check_1" in code.inner_text()
