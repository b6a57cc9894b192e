"""How long the attention explorer waits for `python -m transformer serve` on a text of 64 tokens.

    python benchmarks/bench_serve.py            # 64 tokens, 5 timed requests per model after a warm-up (~1 minute)
    python benchmarks/bench_serve.py --quick    # a check that it runs: 1 timed request per model
    python benchmarks/bench_serve.py --out /tmp/b

The server is the command itself, `python -m transformer serve --port 0` in a subprocess (over an
empty site folder), and each request goes through HTTP as the page's does: POST /api/attention
with a text of exactly --tokens tokens (the model's own count, [CLS] and [SEP] included for
MiniLM), SmolLM2 with the 6 greedy tokens the explorer of `make site` asks for (their decode rows).
A request's time is from sending it to holding the parsed JSON: the forward pass with every
layer's and head's weights, rounding, encoding, transfer. The first request of each model also
loads it; it is reported apart and not in the median. The target is a median of 2 s per request
on a quiet machine. Writes serve.json and serve.md under --out.
"""
import argparse
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402  the tokenizers, to make a text of exactly --tokens tokens

TARGET_S = 2.0  # the explorer's answer for 64 tokens, on a quiet machine
NEW_TOKENS = {"smollm2": 6, "minilm": 0}  # what the explorer asks for: the model's n_new in the site's data
# (site/export_views.py: 6 in `make site`, 4 in its fast mode), the decode rows it draws
PROSE = ("The dog chased the squirrel because it was fast, and the squirrel ran up the old oak tree near the "
         "river. Later that afternoon the children walked along the bank, counting boats and talking about "
         "the summer holidays they had spent at their grandmother's house by the sea, where the evenings were "
         "long and the kitchen always smelled of fresh bread.")


def tokenizers() -> dict:  # model key -> text -> its token count, as the model counts it
    bpe = T.read_gguf_tokenizer(T.open_gguf(T.smollm2_path()))  # SmolLM2's tokenizer without its weights
    wordpiece = T.load_minilm().tokenizer
    return {"smollm2": lambda text: len(bpe.encode(text)),
            "minilm": lambda text: len(wordpiece.tokenize(text)) + 2}  # [CLS] and [SEP]


def text_of(count, n: int) -> str:
    """Words of PROSE until `count` says n tokens, the last ones made up with ' a' (one token in both)."""
    text = ""
    for w in PROSE.split():
        longer = (text + " " + w).strip()
        if count(longer) > n:
            break
        text = longer
    while count(text) < n:
        text += " a"
    assert count(text) == n, (n, count(text))
    return text


def cpu_seconds(pid: int):  # -> the process's CPU time so far, all threads (Linux /proc), or None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def start_server(folder: Path, threads: int | None):  # -> (process, port): the command, on a free port
    (folder / "index.html").write_text("<!doctype html><html><head></head><body></body></html>")
    extra = [] if threads is None else ["--threads", str(threads)]
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "serve", "--site", str(folder), "--port", "0"] + extra,
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # "serving … on http://127.0.0.1:PORT/ …"
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return proc, int(m.group(1))


def post(port: int, body: dict):  # -> (seconds, parsed answer, bytes)
    data = json.dumps(body).encode()
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/api/attention", data, {"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    out = json.loads(raw)
    seconds = time.perf_counter() - t0
    c.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {out.get('error')}")
    return seconds, out, len(raw)


def bench(tokens: int, repeats: int, threads: int | None) -> list[dict]:
    count = tokenizers()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        proc, port = start_server(Path(folder), threads)
        try:
            for key in ("minilm", "smollm2"):
                body = {"model": key, "text": "a", "new_tokens": NEW_TOKENS[key]}
                first_s, _, _ = post(port, body)  # loads the model (once per server)
                body["text"] = text_of(count[key], tokens)
                post(port, body)  # warm-up on the real length: buffers, RoPE tables
                times, cpus, size = [], [], 0
                for _ in range(repeats):
                    c0 = cpu_seconds(proc.pid)
                    s, out, size = post(port, body)
                    c1 = cpu_seconds(proc.pid)
                    times.append(s)
                    if c0 is not None and c1 is not None:
                        cpus.append(c1 - c0)
                assert len(out["text"]["layers"]) == out["L"], "every layer at once at this length"
                assert len(out["text"]["tokens"]) == tokens + NEW_TOKENS[key], "the model read the text counted"
                row = {"model": out["name"], "tokens": tokens, "new_tokens": NEW_TOKENS[key], "repeats": repeats,
                       "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                       "first_request_s": first_s, "answer_bytes": size, "weights": len(out["text"]["w"]),
                       "server_cpu_s": statistics.median(cpus) if cpus else None}
                row["within_target"] = row["median_s"] <= TARGET_S
                rows.append(row)
                print(f"{row['model']:13s} {tokens} tokens (+{row['new_tokens']} generated): median "
                      f"{row['median_s']:.3f} s (min {row['min_s']:.3f}, max {row['max_s']:.3f}, {repeats} requests); "
                      f"{size / 1e6:.2f} MB of JSON; server CPU {row['server_cpu_s'] or 0:.2f} s a request (all "
                      f"threads); first request with loading {first_s:.1f} s", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    return rows


def cpu(row) -> str:
    return "–" if row["server_cpu_s"] is None else f"{row['server_cpu_s']:.2f}"


def markdown(rows, meta) -> str:
    lines = ["# The live attention explorer (`python -m transformer serve`)", "",
             f"POST /api/attention over HTTP on 127.0.0.1 for a text of {rows[0]['tokens']} tokens: every layer's and "
             f"head's weights, rounded to 1e-4, as the explorer asks for them; time from sending the request to "
             f"holding the parsed JSON, median of the timed requests after a warm-up; the server's BLAS threads: "
             f"{meta['server_threads']}. {meta['machine']}. "
             f"Run: `{meta['command']}` ({meta['wall_s']:.0f} s, {meta['date']}).", "",
             meta["load_line"], "", meta["trustworthy"], "",
             "| model | tokens | generated | median s | min s | max s | server CPU s | JSON MB | weights | within 2 s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['tokens']} | {r['new_tokens']} | {r['median_s']:.3f} | {r['min_s']:.3f} | "
                     f"{r['max_s']:.3f} | {cpu(r)} | {r['answer_bytes'] / 1e6:.2f} | {r['weights']:,} | "
                     f"{'yes' if r['within_target'] else 'NO'} |")
    lines += ["", "server CPU s: the median CPU time the server process spent on one request, all its threads. "
              "generated: SmolLM2's greedy tokens after the text, whose decode rows the explorer draws. The first "
              "request of each model also loads it (" + ", ".join(f"{r['model']} {r['first_request_s']:.1f} s"
                                                                   for r in rows) + "), once per server.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a check that it runs: 1 timed request per model")
    ap.add_argument("--tokens", type=int, default=64, help="the text's length in tokens (default 64)")
    ap.add_argument("--repeats", type=int, help="timed requests per model, median reported (default 5; 1 quick)")
    ap.add_argument("--threads", type=int, help="the server's --threads (default: its own default, 1 BLAS thread)")
    M.add_out_argument(ap)
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 5)
    if repeats < 1 or not 2 <= args.tokens <= 96:
        ap.error(f"--repeats must be ≥ 1 and --tokens in 2 … 96 (every layer at once), got {repeats}, {args.tokens}")
    start, cpu0 = M.load_average(), M.cpu_snapshot()
    print(M.start_line(start), flush=True)
    t0 = time.time()
    rows = bench(args.tokens, repeats, args.threads)
    own = args.threads or (os.cpu_count() or 1) if args.threads is not None else 1  # the server's BLAS threads
    load = M.load_record(start, M.load_average(), own=own)
    use = M.others_cpu(cpu0, M.cpu_snapshot())
    meta = {"command": "python benchmarks/bench_serve.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, Python "
                       f"{platform.python_version()}",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "wall_s": time.time() - t0,
            "target_s": TARGET_S, "server_threads": args.threads if args.threads is not None else "default (1)",
            "load": load, "load_line": M.load_line(load), "other_cpu": use,
            "trustworthy": M.trust_line(load, use)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / "serve.md").write_text(markdown(rows, meta))
    print(meta["load_line"])
    print(meta["trustworthy"])
    print(f"wrote {args.out / 'serve.json'} and {args.out / 'serve.md'}")


if __name__ == "__main__":
    main()
