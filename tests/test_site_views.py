"""The course website's interactive views (site/views/*.js), in a real headless browser.

Each test opens a small harness page (the five placeholders, the view scripts, and data exported
with `export_all(fast=True)` from site/export_views.py) served on 127.0.0.1, works a view's
controls as a reader would, and compares what the page shows with the package computing the same
thing another way: the attention weights of a full uncached pass (the view shows the rows of a
cached generation), the KV-cache bytes by hand (2·L·h_kv·d_h·4·n), m and l from the whole score
matrix, block tables worked out by hand, and T.next_token_probs on the model's full logits (the
sampling view redoes softmax, top-k and top-p in JavaScript for drawing). No page may log a
console error, raise, or ask for anything outside 127.0.0.1.

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

import transformer as T

ROOT = Path(__file__).resolve().parent.parent
VIEWS_DIR = ROOT / "site" / "views"
CHROMIUM = Path("/usr/bin/chromium")
VIEW_NAMES = ("attention", "kv_cache", "flash", "paged_kv", "sampling")
PLACED = {"06_kv_cache.py": ["kv_cache"], "09_flash_tiling.py": ["flash"], "11_real_llm.py": ["sampling", "attention"],
          "12_real_encoder.py": ["attention"], "14_paged_kv.py": ["paged_kv"]}
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


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The fast export, written once: {name: data} and the folder holding the files."""
    out = tmp_path_factory.mktemp("views_data")
    paths = _export_module().export_all(out, fast=True)
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
def browser(site, browser):  # the session's one Chromium (tests/conftest_site.py): Playwright's sync API
    return browser            # allows one running instance per process, and test_site.py shares it


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = Path(os.environ["TFS_VIEWS_SHOTS"]) if os.environ.get("TFS_VIEWS_SHOTS") else \
        tmp_path_factory.mktemp("views_shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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


def set_range(view, role: str, value):
    """Move a slider as a reader's drag does: set the value, fire 'input'."""
    view.locator(f'input[data-role="{role}"]').evaluate(
        "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', {bubbles: true})); }", value)


# --- the package's answers, computed independently of the exported files -------------------------

@pytest.fixture(scope="module")
def smollm2():
    return T.load_smollm2(progress=False)


@pytest.fixture(scope="module")
def minilm():
    return T.load_minilm()


# --- 1. the attention explorer ----------------------------------------------------------------------

def hovered_row(view, page, i: int):
    view.locator(f'[data-role="query-token"][data-index="{i}"]').hover()
    info = view.locator('[data-role="row-info"]')
    page.page.wait_for_function("e => e.getAttribute('data-query') !== null", arg=info.element_handle())
    assert int(info.get_attribute("data-query")) == i
    return int(info.get_attribute("data-top-key")), float(info.get_attribute("data-top-weight"))


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
    lines_all = int(view.locator('[data-role="head-view"]').evaluate("e => e.parentNode.dataset.lines"))
    W = smollm2.attention_weights(seq, layer=13, head=8)  # [n, n], one full pass without a cache
    for i in (len(ids) - 1, len(ids) + 2, n - 1):  # "it" (a prefill row), two decode rows
        key, top = hovered_row(view, page, i)
        assert key == int(np.argmax(W[i])) and abs(top - float(W[i].max())) < 1e-3, (i, key, top)
    lines_row = int(view.locator('[data-role="head-view"]').evaluate("e => e.parentNode.dataset.lines"))
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
    view.screenshot(path=str(shots / "attention_minilm.png"))


# --- 2. the KV cache during a real generation -------------------------------------------------------

def test_kv_cache_view_shows_formula_and_measured_bytes(page, exported, smollm2, shots):
    data = exported[1]["kv_cache"]
    view = page.view("kv_cache")
    n_p = len(smollm2.tokenizer.encode(data["prompt"]))
    gen = smollm2.generate(data["prompt"], len(data["steps"]), stop_at_eos=False)
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
        assert "fetch(" not in f.read_text(encoding="utf-8")  # file:// pages may not fetch


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
