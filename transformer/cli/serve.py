"""Sub-command `serve`: the built course website, and a JSON API that runs the real models on a
text the reader types.

    python -m transformer serve                      # _build/site/ on http://127.0.0.1:8000/
    python -m transformer serve --site DIR --port 8080

The pages are the static site (`make site`); served this way, each HTML page carries
<meta name="tfs-live-api" content="/api/">, and the attention explorer and the sampling view
then show a text box whose text is sent to the API (cli/serve_api.py) and drawn from the
package's answer. On a static host there is no such tag, and the views keep their precomputed texts.

Bounds: 127.0.0.1 unless --host says otherwise (an IPv6 address such as ::1 works too); a request
body of at most MAX_BODY bytes, refused from its Content-Length before it is used (a refused body of
up to DRAIN_MAX bytes is read and dropped while it keeps coming, so that a client that sends it all
before reading sees the 413, not a reset), and all of it within READ_TIMEOUT_S; one model request at
a time, at most --queue waiting behind it (then 503); at most MAX_CONNECTIONS connections open at
once (the next is answered 503 and closed, with no thread of its own); a text of at most 512 tokens;
every error a JSON {"error": "one line"}; files inside the site folder only (a symlink out of it is a 404).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .shown import shown

__all__ = ["register", "run_serve", "make_server", "inject_live_tag", "MAX_BODY", "DRAIN_MAX", "QUEUE_LIMIT",
           "MAX_CONNECTIONS", "THREADS", "LIVE_TAG"]

DEFAULT_SITE = Path("_build") / "site"
MAX_BODY = 64 * 1024  # bytes of a request body: 512 tokens of text are a few KiB, JSON escapes at most ×6
QUEUE_LIMIT = 4  # model requests waiting behind the running one; more are answered 503 at once
READ_TIMEOUT_S = 30  # a request, headers and body, arrives whole within this: a client that drips it frees its thread
DRAIN_MAX = 1 << 20  # a body refused as too long is read and dropped up to this many bytes, then the connection closes
DRAIN_IDLE_S = 1  # … while its bytes keep coming: a client that waits for the answer first gets it after this
# connections open at once, each a thread (and its READ_TIMEOUT_S watch): a browser opens 6 to a host, so
# 64 is many readers' tabs; a client that opens thousands and sends nothing no longer gets a thread each
MAX_CONNECTIONS = 64
# BLAS threads of a model request. One: a request is small (64 tokens: about 14 GFLOP), and threads that
# share their cores with other programs (the browser drawing the last answer, a build) wait for one
# another at every matmul: on a busy 2-core machine (load 3.2) SmolLM2's 64-token answer took a median
# of 1.06 s on one thread and 4.07 s on two (benchmarks/bench_serve.py, --threads 2 for the second).
THREADS = 1
LIVE_TAG = '<meta name="tfs-live-api" content="/api/">'  # what tells a page's views the API is here


def register(sub) -> None:
    """Add `serve` to the CLI's sub-parsers."""
    p = sub.add_parser("serve", help="serve the course website with a live API on the real models",
                       description="Serve the built website (make site) and a JSON API that computes "
                                   "attention weights, next-token probabilities and KV-cache steps of the "
                                   "real models for a text you type. Ctrl-C stops it.")
    p.add_argument("--site", default=str(DEFAULT_SITE), metavar="DIR",
                   help=f"the built site (default {DEFAULT_SITE}, written by `make site`)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; ::1 for IPv6)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--threads", type=int, default=THREADS,
                   help=f"BLAS threads of a model request (default {THREADS}; 0: the BLAS library's own count)")
    p.add_argument("--queue", type=int, default=QUEUE_LIMIT,
                   help=f"model requests that may wait behind the running one (default {QUEUE_LIMIT}); "
                        "more are answered 503")
    p.add_argument("--connections", type=int, default=MAX_CONNECTIONS,
                   help=f"connections open at once (default {MAX_CONNECTIONS}); the next is answered 503")
    p.set_defaults(func=run_serve)


def inject_live_tag(html: bytes) -> bytes:
    """The page with LIVE_TAG right after its <head> (or first, if it has none).

    >>> inject_live_tag(b'<html><head lang="en"><title>x</title>')
    b'<html><head lang="en"><meta name="tfs-live-api" content="/api/"><title>x</title>'
    """
    import re

    m = re.search(rb"<head(\s[^>]*)?>", html, flags=re.IGNORECASE)
    at = m.end() if m else 0
    return html[:at] + LIVE_TAG.encode() + html[at:]


def make_server(site_dir, host: str = "127.0.0.1", port: int = 0, queue_limit: int = QUEUE_LIMIT,
                models=None, log=None, threads: int = THREADS, max_connections: int = MAX_CONNECTIONS):
    """The server, bound and not yet serving (call serve_forever()). site_dir None: the API only.
    models: a serve_api.Models (default: one that loads each model on first use). log: a function
    that takes one line per API request (default: none). threads: BLAS threads of a model request
    (0: leave BLAS as it is). max_connections: connections served at once; the next is answered 503."""
    import contextlib
    import http.server
    import json
    import os
    import re
    import select
    import socket
    import threading
    import time

    from threadpoolctl import ThreadpoolController

    from .serve_api import ApiError, Models, answer, cut, status

    blas = ThreadpoolController()  # the BLAS libraries loaded in this process, found once

    class RequestQueue:
        """Model requests run one at a time; at most `limit` wait behind the running one."""

        def __init__(self, limit: int):
            self.limit, self.count = limit, 0  # count: waiting + running
            self.lock, self.running = threading.Lock(), threading.Lock()

        @contextlib.contextmanager
        def turn(self):  # yields the seconds the request waited for the running one
            with self.lock:
                if self.count > self.limit:
                    raise ApiError(503, f"busy: {self.count} requests are queued or running (at most "
                                        f"{self.limit + 1}); try again in a moment")
                self.count += 1
            try:
                queued = time.monotonic()
                with self.running, (blas.limit(limits=threads, user_api="blas") if threads else
                                    contextlib.nullcontext()):
                    yield time.monotonic() - queued
            finally:
                with self.lock:
                    self.count -= 1

    class Handler(http.server.SimpleHTTPRequestHandler):
        server_version = "transformer-serve"
        timeout = READ_TIMEOUT_S

        def log_message(self, *args):  # static files are not logged; API requests are, by send_json
            pass

        # --- the request line, headers and body arrive within READ_TIMEOUT_S of the connection, together
        def setup(self):
            super().setup()
            self.late, self.arrived, self.reading = False, False, threading.Lock()
            self.watch = threading.Timer(READ_TIMEOUT_S, self.stop_reading)
            self.watch.daemon = True
            self.watch.start()

        def stop_reading(self):  # the time is up: a read still waiting on the client returns what came
            with self.reading:
                if not self.arrived:
                    self.late = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RD)

        def request_arrived(self):
            with self.reading:
                self.arrived = True
            self.watch.cancel()

        def finish(self):
            self.request_arrived()
            super().finish()

        def parse_request(self) -> bool:
            ok = super().parse_request()
            if ok and self.late:  # the headers were cut off by the watch
                self.close_connection = True
                self.send_error(408, f"the request did not arrive within {READ_TIMEOUT_S} s")
                return False
            if ok and self.command != "POST":  # no body to wait for
                self.request_arrived()
            return ok

        def translate_path(self, path):  # a name that leads out of the site folder (a symlink) is no file here
            local = super().translate_path(path)
            root = os.path.realpath(self.directory)
            real = os.path.realpath(local)
            return local if real == root or real.startswith(root + os.sep) else os.path.join(root, "\0outside")

        def send_json(self, status_code: int, obj, seconds: float | None = None, headers: dict | None = None,
                      waited: float = 0.0):
            body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
            self.send_response(status_code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            if log is not None:
                took = "" if seconds is None else f" in {seconds:.2f} s"
                took += f" after {waited:.2f} s in the queue" if waited >= 0.005 else ""
                err = f": {obj['error']}" if "error" in obj else ""
                log(f"{self.command} {self.path[:80]} -> {status_code}{took}, {len(body):,} bytes{err}")

        def api_name(self) -> str | None:
            path = self.path.split("?", 1)[0]
            return path[len("/api/"):] if path.startswith("/api/") else None

        # --- GET: the site's files (HTML pages with the live tag), and /api/status
        def do_GET(self):
            try:
                return self.get()
            except (OSError, ValueError):  # a name too long for the file system, a NUL byte: no such file
                if not self.wfile.closed:
                    self.send_error(404, "File not found")

        def get(self):
            name = self.api_name()
            if name is not None:
                if name == "status":
                    return self.send_json(200, status(self.server.models))
                return self.send_json(405 if name in ("attention", "next", "kv_cache") else 404,
                                      {"error": f"GET /api/{name[:40]} is not an endpoint: POST a JSON body "
                                                "to /api/attention, /api/next or /api/kv_cache"})
            if self.server.site_dir is None:
                return self.send_json(404, {"error": "this server has no site folder: only /api/"})
            path = Path(self.translate_path(self.path))
            if path.is_dir() and self.path.split("?", 1)[0].endswith("/"):
                path = path / "index.html"
            if path.suffix == ".html" and path.is_file():
                page = inject_live_tag(path.read_bytes())
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(page)
                return None
            return super().do_GET() if self.command == "GET" else super().do_HEAD()

        do_HEAD = do_GET  # the same headers, the same Content-Length (the live tag counted), no body

        # --- POST: the API
        def do_POST(self):
            name, seconds, waited, headers = self.api_name(), None, 0.0, None
            try:
                if name is None:
                    raise ApiError(404, f"POST {self.path[:60]} is not an endpoint: POST to /api/NAME")
                body = self.read_body()
                if name == "status":  # it exists, for GET: the method is what is wrong
                    headers = {"Allow": "GET"}
                    raise ApiError(405, "POST /api/status: the status is read with GET")
                with self.server.queue.turn() as waited:
                    if self.client_gone():  # closed while it waited: its turn is not spent on an unread answer
                        self.close_connection = True
                        if log is not None:
                            log(f"{self.command} {self.path[:80]} -> not run: the client left while it waited")
                        return
                    out, seconds = answer(self.server.models, name, body)
                code = 200
            except ApiError as e:
                code, out = e.status, {"error": e.message}
            except MemoryError:
                code, out = 503, {"error": "out of memory: try a shorter text"}
            except Exception as e:  # a bug: one line for the client and the log, never a traceback
                code, out = 500, {"error": f"unexpected {type(e).__name__}: {' '.join(str(e).split())[:200]}"}
            try:  # apart: a client that stops reading mid-answer gets no second response inside the first
                self.send_json(code, out, seconds, headers=headers, waited=waited)
            except OSError as e:  # gone (a reset, a broken pipe) or not reading (the timeout)
                self.close_connection = True
                if log is not None:
                    log(f"{self.command} {self.path[:80]} -> {code}, not delivered: the client "
                        f"{'stopped reading' if isinstance(e, TimeoutError) else 'left'}")

        def client_gone(self) -> bool:
            """The client closed its end: its socket reads as at an end (the body was read in full)."""
            if not select.select([self.connection], [], [], 0)[0]:
                return False
            try:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def refuse_method(self):  # PUT, DELETE … on /api/: JSON, as every API error; elsewhere the usual 501
            if self.api_name() is None:
                return self.send_error(501, f"Unsupported method ({self.command!r})")
            return self.send_json(405, {"error": f"{self.command} is not an API method: GET /api/status, POST the "
                                                 "others"}, headers={"Allow": "GET, POST"})

        do_PUT = do_DELETE = do_PATCH = do_OPTIONS = refuse_method

        def read_body(self):
            """The JSON body, refused from its headers before it is read when it is missing, too long
            or not JSON, and after reading when it does not parse."""
            try:
                return self.parse_body()
            finally:
                self.request_arrived()

        def parse_body(self):
            lengths = self.headers.get_all("Content-Length") or []
            if not lengths:
                self.close_connection = True  # a body may follow, and nothing says where it ends
                raise ApiError(411, "a request body needs a Content-Length header")
            if len(lengths) > 1:  # which one a proxy in front believed is unknown: the request is ambiguous
                self.close_connection = True
                raise ApiError(400, f"{len(lengths)} Content-Length headers: send one")
            length = lengths[0].strip()
            if not re.fullmatch(r"[0-9]+", length):  # ASCII digits: '²' passes isdigit()
                self.close_connection = True
                said = lengths[0].encode("latin-1", "replace").decode("utf-8", "replace")  # http.client read latin-1
                raise ApiError(400, f"bad Content-Length {cut(said)!r}: a number of bytes, in ASCII digits")
            if len(length) > 12:  # a terabyte or more: int() of thousands of digits is refused, and no body is read
                self.close_connection = True
                raise ApiError(413, f"the request body is a Content-Length of {len(length):,} digits, over the limit "
                                    f"of {MAX_BODY:,} bytes")
            n = int(length)
            if n > MAX_BODY:
                self.drop_body(n)
                raise ApiError(413, f"the request body is {n:,} bytes, over the limit of {MAX_BODY:,}")
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if kind != "application/json":  # a page elsewhere cannot send this without asking first (CORS)
                self.drop_body(n)
                raise ApiError(415, f"Content-Type must be application/json, got {kind[:40] or 'none'!r}")
            raw = self.read_exactly(n)
            try:
                return json.loads(raw.decode("utf-8"), parse_constant=refuse_constant)
            except UnicodeDecodeError as e:
                raise ApiError(400, f"the body is not UTF-8 (byte {e.start})") from None
            except ValueError as e:
                raise ApiError(400, f"bad JSON: {e}") from None
            except RecursionError:  # '[' × 30,000 fits in the 64 KiB
                raise ApiError(400, "bad JSON: nested deeper than Python's recursion limit") from None

        def read_exactly(self, n: int, idle: float | None = None) -> bytes:
            """n bytes of body. Reads wait for the client until READ_TIMEOUT_S after the request began
            (setup's watch), however its bytes trickle in. idle: seconds one read may wait for more."""
            if idle is not None:
                self.connection.settimeout(idle)
            try:
                raw = self.rfile.read(n)
            except TimeoutError:
                self.close_connection = True
                raise ApiError(408, f"the body stopped arriving for {idle} s") from None
            finally:
                self.connection.settimeout(self.timeout)
            if len(raw) < n:
                self.close_connection = True
                if self.late:
                    raise ApiError(408, f"the request did not arrive within {READ_TIMEOUT_S} s")
                raise ApiError(400, f"the body ended after {len(raw):,} of its {n:,} bytes")
            return raw

        def drop_body(self, n: int):
            """Read a refused body and drop it, so that a client still sending it reads the refusal and not
            a reset; over DRAIN_MAX bytes, or when nothing comes for DRAIN_IDLE_S (a client waiting for
            the answer before it sends), the connection closes instead."""
            if n > DRAIN_MAX:
                self.close_connection = True
                return
            try:
                self.read_exactly(n, idle=DRAIN_IDLE_S)
            except ApiError:
                self.close_connection = True

    def refuse_constant(name):
        raise ValueError(f"{name} is not a number JSON allows")

    class LiveServer(http.server.ThreadingHTTPServer):
        daemon_threads = True  # a client that hangs does not keep the process alive at Ctrl-C
        request_queue_size = 128  # the listen backlog: at 5, 12 pages' parallel requests waited 1 s for a retry

        def finish_request(self, request, client_address):
            Handler(request, client_address, self, directory=str(self.site_dir or "."))

        def process_request(self, request, client_address):  # on the listening thread, before a thread starts
            if not self.open_slots.acquire(blocking=False):
                self.refuse_busy(request)
                if log is not None and time.monotonic() - self.busy_logged > 10:  # a line per 10 s of a flood
                    self.busy_logged = time.monotonic()
                    log(f"refused a connection from {client_address[0]}: {max_connections} are open")
                return
            try:
                super().process_request(request, client_address)
            except BaseException:  # no thread started: its slot is free again
                self.open_slots.release()
                raise

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.open_slots.release()

        def refuse_busy(self, request):
            """503 to a connection over the limit, written without waiting on the client, then closed."""
            body = json.dumps({"error": f"busy: {max_connections} connections are open (at most "
                                        f"{max_connections}); try again in a moment"}).encode()
            head = (f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n").encode()
            with contextlib.suppress(OSError):
                request.setblocking(False)  # a small answer fits the socket's buffer; a full one is dropped
                request.send(head + body)
            self.shutdown_request(request)

        def handle_error(self, request, client_address):  # socketserver's default prints a traceback
            exc = sys.exc_info()[1]
            if log is not None and not isinstance(exc, (BrokenPipeError, ConnectionResetError)):  # a client gone
                log(f"error serving {client_address[0]}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")

    if ":" in host:  # an IPv6 address: ::1, ::
        LiveServer.address_family = socket.AF_INET6
    server = LiveServer((host, port), Handler)
    server.site_dir = None if site_dir is None else Path(site_dir)
    server.models = Models() if models is None else models
    server.queue = RequestQueue(queue_limit)
    server.open_slots = threading.BoundedSemaphore(max_connections)
    server.busy_logged = -float("inf")
    return server


def run_serve(args) -> int:
    site = Path(args.site)
    if not (site / "index.html").is_file():
        raise ValueError(f"no built site at {shown(site)} (no index.html): run `make site` first, or give --site DIR")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0 … 65535, got {args.port}")
    if args.queue < 0:
        raise ValueError(f"--queue must be ≥ 0, got {args.queue}")
    if args.threads < 0:
        raise ValueError(f"--threads must be ≥ 0, got {args.threads}")
    if args.connections < 1:
        raise ValueError(f"--connections must be ≥ 1, got {args.connections}")
    try:
        server = make_server(site, args.host, args.port, args.queue,
                             log=lambda line: print(line, file=sys.stderr, flush=True), threads=args.threads,
                             max_connections=args.connections)
    except OSError as e:
        raise OSError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    host, port = server.server_address[:2]
    if host not in ("127.0.0.1", "::1", "localhost"):
        print(f"note: listening on {host}: other machines can reach the pages and the API", file=sys.stderr)
    url_host = f"[{host}]" if ":" in host else host
    print(f"serving {shown(site)} on http://{url_host}:{port}/ with the live API at /api/ "
          "(models load on first use; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
