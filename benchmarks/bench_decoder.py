"""SmolLM2-135M generation speed: our NumPy decoder against HF transformers, same weights, same run.

    python benchmarks/bench_decoder.py               # ~6 minutes on 2 cores
    python benchmarks/bench_decoder.py --quick       # a check that it runs: short prompt, one timed run (~30 s)
    python benchmarks/bench_decoder.py --threads 1   # BLAS and torch on one thread
    python benchmarks/bench_decoder.py --out /tmp/b  # write the results elsewhere

Both models load the same GGUF file (dequantized to float32; HF's conversion, ~15 s, is kept in
$TMPDIR/transformer-hf-smollm2/ for the next run) and run on the CPU with the
same number of threads (OMP/OPENBLAS/MKL variables set before NumPy and torch load). Ours and
HF's runs alternate, so load from other work hits both. Measured, each as the median of
--repeats runs after a warm-up:
  prefill   tokens/s of one pass over a --prompt-tokens prompt through the KV cache: the logits
            of the last position (what generation needs), and of every position
  decode    tokens/s of greedy decoding with the KV cache: --new-tokens steps after the first new
            token, timed token by token (HF: a streamer's timestamps; ours: the generator's own
            clock); ours both by the fast path (llama_fast.FastForward) and by the readable
            forward() it rewrites
  batched   total tokens/s of --batch prompts decoded side by side (generate_batch; HF: a
            left-padded generate), against one sequence at a time
  no cache  the same new tokens recomputing the whole sequence each step (use_cache=False),
            and the KV-cache speed-up T(no cache) / T(cache) (note 002: 4.45 s vs 33.4 s on a T4)
  roofline  a decode step reads every weight once: one matrix-vector product with each matrix the
            step reads (T.decode_matrices: the model's own shapes and memory), timed here, is the
            fastest a step can be; and the bandwidth of one large matrix-vector product, for scale.
The load average at start and end and the CPU time other programs took while it ran are
printed and stored, and a line says plainly whether the timings can be trusted; quote only
runs that say yes.
Writes decoder.{json,md} (decoder_threads{N}.* for other thread counts) under --out
(default benchmarks/results/).
"""
import argparse
import os
import sys


def _threads_from_argv(default=2):  # BLAS reads its thread count when it loads: set it first
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return str(default)


THREADS = _threads_from_argv()
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # hf_llama: the HF reference
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402
from hf_llama import hf_smollm2_from_gguf  # noqa: E402

# The prompt of note 002's KV-cache timing.
SHORT_PROMPT = ("Write a very long email apologizing to Sarah for the tragic gardening mishap. "
                "Explain how it happened.")
LONG_TEXT = ("The Transformer is a neural network architecture built on attention. Each token's query "
             "is compared with the keys of earlier tokens; the softmax of those scores weighs the values, "
             "and the weighted sum becomes the token's new representation. Stacking many such blocks, "
             "each with a feed-forward network, residual connections and normalisation, gives a language "
             "model that predicts the next token from all the previous ones. Generation repeats that "
             "prediction one token at a time, and a cache of keys and values spares the model from "
             "recomputing the past at every step, trading memory for time.")


# Batched decoding: prompts of different lengths, left-padded to the longest.
BATCH_PROMPTS = ["The capital of France is", "Once upon a time, in a small village,", "def fib(n):",
                 "The three primary colours are", "Water boils at", "A short poem about the sea:",
                 "The KV cache stores", "My favourite book is"]


def timed(fn, repeats, bar=None):  # -> list of seconds, after one warm-up run
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        if bar is not None:
            bar.update(1)
    return ts


def gemv_pass(mats):  # -> a function: one matrix-vector product with each matrix, into buffers made once
    xs = [np.ones(W.shape[0], dtype=W.dtype) for W in mats]
    ys = [np.empty(W.shape[1], dtype=W.dtype) for W in mats]

    def run():
        for x, W, y in zip(xs, mats, ys):
            np.matmul(x, W, out=y)  # [d_in] @ [d_in, d_out]: the x @ W form, BLAS's fastest stream here
    return run


def roofline(weights, repeats):  # -> seconds of one pass over the decode matrices (fused, unfused) and big-GEMV bytes/s
    fused, unfused = T.decode_matrices(weights), T.decode_matrices(weights, fused=False)
    rows = 4096  # one large matrix-vector product: the bandwidth BLAS reaches at its best
    A = np.ones((rows, (64 if repeats < 5 else 256) * 2**20 // 4 // rows), dtype=np.float32)
    x, y = np.ones(A.shape[1], dtype=np.float32), np.empty(rows, dtype=np.float32)
    runs = {"fused": gemv_pass(fused), "unfused": gemv_pass(unfused), "big": lambda: np.matmul(A, x, out=y)}
    ts = {k: [] for k in runs}
    for f in runs.values():
        f()
    for _ in range(repeats):  # interleaved, like everything else here
        for k, f in runs.items():
            t0 = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in ts.items()}
    return {"pass_s": {"fused": med["fused"], "unfused": med["unfused"]},  # apart from the decode runs
            "matrices": {"fused": len(fused), "unfused": len(unfused)},
            "pass_bytes": int(sum(W.nbytes for W in fused)),
            "big_gemv_GB_s": A.nbytes / med["big"] / 1e9}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="BLAS and torch threads (default 2)")
    ap.add_argument("--repeats", type=int, help="timed runs per measurement, median reported (default 5; 1 quick)")
    ap.add_argument("--nocache-repeats", type=int,
                    help="timed runs without the cache, slow (default 1; 0 quick)")
    ap.add_argument("--prompt-tokens", type=int, help="prompt of the prefill rows (default 100; 32 quick)")
    ap.add_argument("--new-tokens", type=int, help="tokens to generate (default 100; 8 quick)")
    ap.add_argument("--batch", type=int, default=8, help="prompts decoded side by side in the batched rows (default 8)")
    ap.add_argument("--quick", action="store_true",
                    help="a check that the benchmark runs: 1 repeat after the warm-up, 32-token prompt, 8 new tokens, no uncached runs")
    M.add_out_argument(ap)
    args = ap.parse_args()
    for name, full, quick in (("repeats", 5, 1), ("nocache_repeats", 1, 0), ("prompt_tokens", 100, 32),
                              ("new_tokens", 100, 8)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)

    import torch
    torch.set_num_threads(args.threads)
    load_before, cpu_before = M.load_average(), M.cpu_snapshot()
    print(M.start_line(load_before), flush=True)

    ours = T.load_smollm2()
    hf = hf_smollm2_from_gguf()  # HF's own reading of the GGUF, its conversion kept in $TMPDIR
    tok = ours.tokenizer
    long_ids = (tok.encode(LONG_TEXT) * 4)[:args.prompt_tokens]
    assert len(long_ids) == args.prompt_tokens
    short_ids = tok.encode(SHORT_PROMPT)
    N, b = args.new_tokens, args.batch
    batch_prompts = (BATCH_PROMPTS * (b // len(BATCH_PROMPTS) + 1))[:b]
    batch_rows = [tok.encode(p) for p in batch_prompts]
    n_p, PAD = max(map(len, batch_rows)), 2  # left padding to the longest, HF with the same pad id
    hf_batch = torch.tensor([[PAD] * (n_p - len(r)) + r for r in batch_rows])
    hf_batch_mask = torch.tensor([[0] * (n_p - len(r)) + [1] * len(r) for r in batch_rows])

    from transformers.generation.streamers import BaseStreamer

    class Stamps(BaseStreamer):  # HF calls put() with the prompt, then once per new token (all rows at once)
        def __init__(self):
            self.t = []

        def put(self, value):
            self.t.append(time.perf_counter())

        def end(self):
            pass

    # per run: seconds from the first new token to the last
    decode_s = {"ours": [], "hf": [], "ours readable": [], "ours batch": [], "hf batch": []}

    def hf_generate(ids, n, use_cache=True, record=None, mask=None):
        st = Stamps()
        ids = torch.tensor([ids]) if isinstance(ids, list) else ids
        with torch.no_grad():
            hf.generate(ids, attention_mask=torch.ones_like(ids) if mask is None else mask,
                        max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=use_cache,
                        pad_token_id=PAD, streamer=st)
        if record:
            decode_s[record].append(st.t[-1] - st.t[1])  # t[0]: prompt in, t[1]: first token out

    def hf_prefill(ids, last_only=True):
        with torch.no_grad():
            hf(torch.tensor([ids]), use_cache=True, logits_to_keep=1 if last_only else 0)

    cos, sin = ours.rope_tables(args.prompt_tokens)

    def ours_prefill_all(ids):  # the fast path's pass over the prompt, the logits of every position
        fast = T.FastForward(ours.weights, ours.config)
        fast(np.asarray([ids]), ours.new_cache(1, len(ids)), cos, sin, np.arange(len(ids))[None], last_only=False)

    def ours_generate(ids, n, use_cache=True, record=None, fast_path=True):
        ours.fast_path = fast_path
        ours.generate(ids, max_new_tokens=n, use_cache=use_cache, stop_at_eos=False)
        ours.fast_path = True
        if record:
            decode_s[record].append(ours.last_stats.decode_s)  # the steps after the first token

    def ours_batch(n):
        ours.generate_batch(batch_rows, max_new_tokens=n, stop_at_eos=False)
        decode_s["ours batch"].append(ours.last_stats.decode_s)

    weights_pass = gemv_pass(T.decode_matrices(ours.weights))  # the roofline: every matrix a step reads, once

    R = args.repeats
    measures = [  # (name, [(who, fn)], repeats); the participants alternate
        ("prefill", [("ours", lambda: ours_generate(long_ids, 1)), ("hf", lambda: hf_prefill(long_ids))], R),
        ("prefill all", [("ours", lambda: ours_prefill_all(long_ids)),
                         ("hf", lambda: hf_prefill(long_ids, last_only=False))], R),
        ("1+N new", [("ours", lambda: ours_generate(short_ids, N + 1, record="ours")),
                     ("hf", lambda: hf_generate(short_ids, N + 1, record="hf")),
                     ("ours readable", lambda: ours_generate(short_ids, N + 1, record="ours readable",
                                                             fast_path=False)),
                     ("roofline", lambda: [weights_pass() for _ in range(N)])], R),  # N steps' worth of weights
        ("batch 1+N new", [("ours", lambda: ours_batch(N + 1)),
                           ("hf", lambda: hf_generate(hf_batch, N + 1, record="hf batch", mask=hf_batch_mask))], R),
        ("N new, no cache", [("ours", lambda: ours_generate(short_ids, N, use_cache=False)),
                             ("hf", lambda: hf_generate(short_ids, N, use_cache=False))], args.nocache_repeats),
        ("N new, cache", [("ours", lambda: ours_generate(short_ids, N)), ("hf", lambda: hf_generate(short_ids, N))],
         args.nocache_repeats),
    ]
    times = {}
    with tqdm(total=sum(len(p) * r for _, p, r in measures), desc="benchmark", unit="run") as bar:
        for name, players, reps in measures:
            if reps < 1:
                continue
            kept = {w: len(v) for w, v in decode_s.items()}
            for _, fn in players:
                fn()  # warm-up: BLAS threads, caches, first touch of pages
            for w, k in kept.items():
                del decode_s[w][k:]  # the warm-up's timings are not kept
            for who, _ in players:
                times[f"{who} {name}"] = []
            for _ in range(reps):
                for who, fn in players:
                    t0 = time.perf_counter()
                    fn()
                    times[f"{who} {name}"].append(time.perf_counter() - t0)
                    bar.update(1)
    med = {k: statistics.median(v) for k, v in times.items()}
    roof = roofline(ours.weights, 3 if args.quick else 7)

    # The same generation gives the same text in both models.
    same_tokens = ours.generate(short_ids, max_new_tokens=20) == hf.generate(
        torch.tensor([short_ids]), attention_mask=torch.ones(1, len(short_ids), dtype=torch.long),
        max_new_tokens=20, do_sample=False, pad_token_id=PAD)[0, len(short_ids):].tolist()

    load = M.load_record(load_before, M.load_average(), own=int(THREADS))
    use = M.others_cpu(cpu_before, M.cpu_snapshot())
    weight_bytes = 4 * T.count_parameters(ours.config)  # float32, every weight read once per decode step
    P = args.prompt_tokens
    rate = {w: N / statistics.median(decode_s[w]) for w in ("ours", "hf", "ours readable")}
    res = {
        "threads": args.threads, "repeats": R, "nocache_repeats": args.nocache_repeats, "prompt_tokens": P,
        "short_prompt_tokens": len(short_ids), "new_tokens": N, "batch": b,
        "prefill_tok_s": {"ours": P / med["ours prefill"], "hf": P / med["hf prefill"]},
        "prefill_all_logits_tok_s": {"ours": P / med["ours prefill all"], "hf": P / med["hf prefill all"]},
        "decode_tok_s": {"ours": rate["ours"], "hf": rate["hf"]},
        "decode_readable_tok_s": rate["ours readable"],
        "batch_decode_tok_s": {"ours": b * N / statistics.median(decode_s["ours batch"]),
                               "hf": b * N / statistics.median(decode_s["hf batch"])},
        "roofline": roof,
        "roofline_decode_tok_s": N / med["roofline 1+N new"],  # timed alternating with the decode runs
        "gemv_bandwidth_GB_s": roof["big_gemv_GB_s"],
        "weight_bytes": weight_bytes,
        "bandwidth_decode_tok_s": roof["big_gemv_GB_s"] * 1e9 / weight_bytes,
        "greedy_tokens_identical": same_tokens,
        "median_s": med, "all_s": times, "decode_s": decode_s,
        "load_average": load, "other_cpu": use, "trustworthy": M.trust_line(load, use),
        "command": " ".join(["python benchmarks/bench_decoder.py"] + sys.argv[1:]),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__},
    }
    best = {k: min(v) for k, v in times.items()}  # the least disturbed run: closest to an idle machine
    res["best_run"] = {
        "prefill_tok_s": {w: P / best[f"{w} prefill"] for w in ("ours", "hf")},
        "decode_tok_s": {w: N / min(decode_s[w]) for w in ("ours", "hf")}}
    res["ratio_vs_hf"] = {k: res[k]["ours"] / res[k]["hf"]
                          for k in ("prefill_tok_s", "prefill_all_logits_tok_s", "decode_tok_s", "batch_decode_tok_s")}
    res["fast_over_readable_decode"] = rate["ours"] / rate["ours readable"]
    res["batch_over_single_decode"] = res["batch_decode_tok_s"]["ours"] / rate["ours"]
    res["roofline_fraction"] = rate["ours"] / res["roofline_decode_tok_s"]
    res["fused_over_unfused_pass"] = roof["pass_s"]["unfused"] / roof["pass_s"]["fused"]
    if "ours N new, no cache" in med:
        res["no_cache_s"] = {"ours": med["ours N new, no cache"], "hf": med["hf N new, no cache"]}
        res["cache_s"] = {"ours": med["ours N new, cache"], "hf": med["hf N new, cache"]}
        res["kv_speedup"] = {k: res["no_cache_s"][k] / res["cache_s"][k] for k in ("ours", "hf")}

    args.out.mkdir(parents=True, exist_ok=True)
    stem = "decoder" if args.threads == 2 else f"decoder_threads{args.threads}"  # the README quotes decoder.md
    (args.out / f"{stem}.json").write_text(json.dumps(res, indent=2))
    (args.out / f"{stem}.md").write_text(to_markdown(res))
    print(to_markdown(res))


def to_markdown(r) -> str:
    pf, pa, dc, bt, rt = (r["prefill_tok_s"], r["prefill_all_logits_tok_s"], r["decode_tok_s"], r["batch_decode_tok_s"],
                          r["ratio_vs_hf"])
    roof = r["roofline"]
    lines = [
        f"# SmolLM2-135M on the CPU, {r['threads']} thread{'s' if r['threads'] != 1 else ''}: NumPy decoder vs HF transformers",
        "",
        r["trustworthy"],
        "",
        f"Same GGUF weights dequantized to float32, same run, {r['threads']} thread(s) "
        f"({r['machine']['cores']} cores, {r['machine']['cpu']}; NumPy {r['machine']['numpy']}, "
        f"torch {r['machine']['torch']}). "
        + (f"Medians of {r['repeats']} runs" if r["repeats"] > 1 else "One timed run")
        + " after a warm-up, ours and HF's alternating"
        + (f" ({r['nocache_repeats']} run(s) each for the rows without the cache)" if r.get("nocache_repeats") else
           " (the runs without the cache left out)" if "nocache_repeats" in r else "")
        + f". Reproduce with `{r['command']}`.",
        "",
        M.load_line(r["load_average"]),
        "",
        "| measure | ours (NumPy) | HF transformers (torch) | ours / HF |",
        "| --- | ---: | ---: | ---: |",
        f"| prefill, {r['prompt_tokens']}-token prompt (tokens/s) | {pf['ours']:.0f} | {pf['hf']:.0f} | "
        f"{rt['prefill_tok_s']:.2f}× |",
        f"| the same, logits of every position (tokens/s) | {pa['ours']:.0f} | {pa['hf']:.0f} | "
        f"{rt['prefill_all_logits_tok_s']:.2f}× |",
        f"| decode with KV cache, {r['new_tokens']} new tokens (tokens/s) | {dc['ours']:.1f} | {dc['hf']:.1f} | "
        f"{rt['decode_tok_s']:.2f}× |",
        f"| batched decode, {r['batch']} prompts side by side (total tokens/s) | {bt['ours']:.1f} | {bt['hf']:.1f} | "
        f"{rt['batch_decode_tok_s']:.2f}× |",
    ]
    if "kv_speedup" in r:
        nc, c, sp = r["no_cache_s"], r["cache_s"], r["kv_speedup"]
        lines += [
            f"| {r['new_tokens']} new tokens after a {r['short_prompt_tokens']}-token prompt, with cache (s) | "
            f"{c['ours']:.2f} | {c['hf']:.2f} | |",
            f"| the same without cache (s) | {nc['ours']:.2f} | {nc['hf']:.2f} | |",
            f"| KV-cache speed-up | {sp['ours']:.1f}× | {sp['hf']:.1f}× | |",
        ]
    bst = r["best_run"]
    lines += [
        "",
        f"Ours decodes with the fast path (`T.FastForward`: fused Q/K/V and gate/up, buffers made once); the "
        f"readable `forward()` it rewrites decodes at {r['decode_readable_tok_s']:.1f} tokens/s in the same run "
        f"(fast / readable = {r['fast_over_readable_decode']:.2f}×). Batched, {r['batch']} sequences reach "
        f"{r['batch_over_single_decode']:.1f}× the tokens/s of one: each step reads every weight once for all "
        "of them.",
        "",
        f"Roofline: a decode step reads every weight once. One matrix-vector product with each of the "
        f"{roof['matrices']['fused']} matrices a step reads ({roof['pass_bytes'] / 1e6:.0f} MB, the model's own "
        f"shapes and memory) takes {1e3 / r['roofline_decode_tok_s']:.1f} ms here, alternating with the decode "
        f"runs, so decode cannot beat "
        f"{r['roofline_decode_tok_s']:.1f} tokens/s; ours reaches {100 * r['roofline_fraction']:.0f}% of it. "
        f"The same weights as {roof['matrices']['unfused']} unfused matrices take "
        f"{1e3 * roof['pass_s']['unfused']:.1f} ms ({r['fused_over_unfused_pass']:.2f}× slower); one large "
        f"matrix-vector product streams {r['gemv_bandwidth_GB_s']:.1f} GB/s, which would allow "
        f"{r['bandwidth_decode_tok_s']:.1f} tokens/s for all {r['weight_bytes'] / 1e6:.0f} MB.",
        "",
        f"Fastest of the runs instead of the median (least disturbed by other work): prefill "
        f"{bst['prefill_tok_s']['ours']:.0f} vs {bst['prefill_tok_s']['hf']:.0f} tokens/s, decode "
        f"{bst['decode_tok_s']['ours']:.1f} vs {bst['decode_tok_s']['hf']:.1f} tokens/s (ours vs HF).",
        "",
        f"Greedy continuations identical token for token (20 tokens): {r['greedy_tokens_identical']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
