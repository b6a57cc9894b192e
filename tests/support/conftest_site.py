"""Fixtures of the website tests (tests/test_site.py), imported by tests/conftest.py.

`site_url`: the built site (_build/site/, built in fast mode if missing) served on 127.0.0.1;
`browser`: headless Chromium. Without Chromium or Playwright the tests skip, and the end of the
run says so in one line.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import site_support

__all__ = ["site_dir", "site_url", "browser", "browser_context", "shots", "pytest_terminal_summary"]


@pytest.fixture(scope="session")
def site_dir():
    reason = site_support.browser_missing()
    if reason:
        pytest.skip(f"browser tests skipped: {reason}")
    return site_support.built_site()


@pytest.fixture(scope="session")
def site_url(site_dir):
    with site_support.serve(site_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    reason = site_support.browser_missing()
    if reason:
        pytest.skip(f"browser tests skipped: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = site_support.launch(p)
        yield b
        b.close()


@pytest.fixture
def browser_context(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Where the browser tests leave their screenshots: TFS_VIEWS_SHOTS, or a temporary folder."""
    folder = Path(os.environ["TFS_VIEWS_SHOTS"]) if os.environ.get("TFS_VIEWS_SHOTS") else \
        tmp_path_factory.mktemp("shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pytest_terminal_summary(terminalreporter):
    """Say plainly, at the end of `make test`, that the browser tests did not run and why."""
    skipped = terminalreporter.stats.get("skipped", [])
    reasons = {str(r.longrepr[-1]) for r in skipped if isinstance(r.longrepr, tuple)}
    for reason in sorted(r for r in reasons if "browser tests skipped" in r):
        terminalreporter.write_line(reason.removeprefix("Skipped: "), yellow=True, bold=True)
