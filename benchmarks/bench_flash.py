"""Time and peak memory of attention four ways, in one run: standard NumPy, the readable tiled loop,
the fast tiled path, torch SDPA.

    python benchmarks/bench_flash.py            # n = 256 … 8192 (a few minutes on 2 cores)
    python benchmarks/bench_flash.py --quick    # n = 256 … 1024, 2 repeats: a check that it runs (under a minute)
    python benchmarks/bench_flash.py --out /tmp/b   # write the results elsewhere

b = 1, h = 8, d_h = 64, float32, causal and not. For each n:
  standard  `standard_attention`: S and P whole (two n × n buffers per head)
  core      `scaled_dot_product_attention`, the readable core (n ≤ --core-max-n; it keeps more n × n temporaries)
  tiled     `flash_attention` (FA2 order), the readable loop, at each block size of --blocks; the fastest is reported
  fast      `flash_attention_fast`, the same loop with preallocated buffers and --threads workers, at the
            block its cache rule picks (`fast_block_size`) and, to check that rule, at each of --blocks
  torch     torch.nn.functional.scaled_dot_product_attention on the CPU
Times are medians of --repeats rounds; each round runs every contender once, in turn, so load from
other work falls on all of them alike (the minimum is kept too). NumPy peaks are measured with
tracemalloc; torch's allocations are invisible to it, so its peak is the running sum of the
allocation events its profiler records (profile_memory=True) during one call.
Formulas for the same quantities (io_count.py) are written beside each measurement.
--threads N (default 2) sets BLAS/OpenMP threads for NumPy and torch alike. Each run is
stored under its --label (default "2 threads") in flash.json under --out (default
benchmarks/results/); flash.csv and flash.md are rewritten from every run stored there.
The load average at start and end, and the CPU time other programs used meanwhile, are printed
and stored with the run, with a plain "Trustworthy: yes/no (why)" line (machine_state.trust_line).
"""
import os
import sys


def _threads_from_argv(default=2):  # read --threads before NumPy starts its BLAS thread pool
    argv = sys.argv[1:]
    for a, b in zip(argv, argv[1:] + [""]):
        if a == "--threads":
            return int(b)
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return default


THREADS = _threads_from_argv()
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before NumPy loads BLAS
    os.environ[_var] = str(THREADS)
os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep torch's profiler quiet

import argparse  # noqa: E402
import csv  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402

B, H, D_H = 1, 8, 64


def inputs(n, seed=0):  # -> q, k, v each [B, H, n, D_H] float32
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((B, H, n, D_H), dtype=np.float32) for _ in range(3))


def interleaved(fns, repeats, cold=()):  # {name: fn} -> {name: (median s, min s)}
    """Each round calls every contender once, in turn: a burst of load from other work lands on
    all of them alike, and the medians compare like with like. Each is called once beforehand
    (BLAS threads, caches, first touch of pages) unless its name is in `cold` (a call of seconds,
    where that warm-up is negligible)."""
    for name, fn in fns.items():
        if name not in cold:
            fn()
    ts = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            ts[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(t), min(t)) for name, t in ts.items()}


def torch_peak(fn):  # -> bytes: the peak of torch's CPU allocations during fn()
    """torch's allocator does not report to tracemalloc; its profiler records every allocation
    and free ("[memory]" events, bytes ±), whose running sum peaks at the call's extra memory."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    del out
    cur = peak = 0
    for _, nbytes in events:
        cur += nbytes
        peak = max(peak, cur)
    return peak


def bench(ns, blocks, repeats_for, core_max_n):
    import torch
    torch.set_num_threads(THREADS)
    fast_block = T.fast_block_size(D_H, 4)  # float32
    fast_blocks = sorted(set(blocks) | {fast_block})
    rows = []
    for n in ns:
        q, k, v = inputs(n)
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        reps = repeats_for(n)
        for causal in (False, True):
            row = {"n": n, "causal": causal, "threads": THREADS, "b": B, "h": H, "d_h": D_H, "repeats": reps}
            sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)  # noqa: E731
            fns = {"torch": sdpa}
            for blk in blocks:  # the readable loop
                fns[f"tiled_b{blk}"] = functools.partial(T.flash_attention, q, k, v, causal=causal, block_q=blk,
                                                         block_k=blk)
            for blk in fast_blocks:  # the fast path, THREADS workers
                fns[f"fast_b{blk}"] = functools.partial(T.flash_attention_fast, q, k, v, causal=causal, block_q=blk,
                                                        block_k=blk, threads=THREADS)
            fns["naive"] = functools.partial(T.standard_attention, q, k, v, causal=causal)
            if n <= core_max_n:
                fns["core"] = functools.partial(T.scaled_dot_product_attention, q, k, v,
                                                T.causal_mask(n) if causal else None)
            times = interleaved(fns, reps, cold=("naive", "core") if n >= 4096 else ())
            for name, (t_med, t_min) in times.items():
                row[f"{name}_s"], row[f"{name}_min_s"] = t_med, t_min
            row["torch_peak_bytes"] = torch_peak(sdpa)
            # the readable loop: the fastest block
            blk = min(blocks, key=lambda b_: row[f"tiled_b{b_}_s"])
            row["tiled_block"], row["tiled_s"], row["tiled_min_s"] = blk, row[f"tiled_b{blk}_s"], row[f"tiled_b{blk}_min_s"]
            for b_ in blocks:
                _, row[f"tiled_b{b_}_peak_bytes"] = T.measure_peak_bytes(
                    T.flash_attention, q, k, v, causal=causal, block_q=b_, block_k=b_)
            io = T.IOCounter()
            out_t, row["tiled_peak_bytes"] = T.measure_peak_bytes(
                T.flash_attention, q, k, v, causal=causal, block_q=blk, block_k=blk, io=io)
            row["tiled_peak_formula"] = T.flash_attention_peak_bytes(B, H, n, n, D_H, 4, blk, blk)
            row["tiled_io_elements"] = io.total
            row["tiled_io_formula"] = T.flash2_io(n, n, D_H, blk, blk, causal, B * H)["total"]
            # the fast path: the block of the cache rule, and the fastest one measured beside it
            row["fast_block"], row["fast_threads"] = fast_block, THREADS
            row["fast_s"], row["fast_min_s"] = row[f"fast_b{fast_block}_s"], row[f"fast_b{fast_block}_min_s"]
            row["fast_best_block"] = min(fast_blocks, key=lambda b_: row[f"fast_b{b_}_s"])
            out_f, row["fast_peak_bytes"] = T.measure_peak_bytes(
                T.flash_attention_fast, q, k, v, causal=causal, threads=THREADS)
            row["fast_peak_formula"] = T.flash_attention_fast_peak_bytes(B, H, n, n, D_H, 4, fast_block, fast_block,
                                                                         THREADS, causal)
            # standard (naive) NumPy, S and P whole
            io = T.IOCounter()
            out_n, row["naive_peak_bytes"] = T.measure_peak_bytes(T.standard_attention, q, k, v, causal=causal, io=io)
            row["naive_peak_formula"] = T.standard_attention_peak_bytes(B, H, n, n, D_H, 4, causal)
            row["naive_io_elements"] = io.total
            row["naive_io_formula"] = T.standard_attention_io(n, n, D_H, B * H)["total"]
            row["max_abs_diff_tiled_vs_naive"] = float(np.max(np.abs(out_t - out_n)))
            row["max_abs_diff_fast_vs_naive"] = float(np.max(np.abs(out_f - out_n)))
            row["max_abs_diff_fast_vs_torch"] = float(np.max(np.abs(out_f - sdpa().numpy())))
            del out_n
            if n <= core_max_n:
                _, row["core_peak_bytes"] = T.measure_peak_bytes(T.scaled_dot_product_attention, q, k, v,
                                                                 T.causal_mask(n) if causal else None)
            rows.append(row)
            print(f"n={n:5d} causal={causal!s:5} torch {row['torch_s'] * 1e3:8.1f} ms "
                  f"{row['torch_peak_bytes'] / 2**20:7.1f} MiB | fast(B={fast_block}) {row['fast_s'] * 1e3:8.1f} ms "
                  f"{row['fast_peak_bytes'] / 2**20:7.1f} MiB | tiled(B={blk}) {row['tiled_s'] * 1e3:8.1f} ms "
                  f"{row['tiled_peak_bytes'] / 2**20:7.1f} MiB | naive {row['naive_s'] * 1e3:8.1f} ms "
                  f"{row['naive_peak_bytes'] / 2**20:8.1f} MiB | load {M.load_average()[0]:.2f}", flush=True)
    return rows


def markdown(rows, meta):
    mib = 2 ** 20
    trust = [meta["trustworthy"]] if "trustworthy" in meta else []
    lines = [
        f"## {meta['label']}", "",
        f"b = {B}, h = {H}, d_h = {D_H}, float32. {meta['machine']}. Run: `{meta['command']}` "
        f"({meta['wall_s']:.0f} s, {meta['date']}"
        + (f", load average {meta['load_average_at_end']} at the end" if "load_average_at_end" in meta else "") + ")."
        + (f" {M.load_line(meta['load_average'])}" if "load_average" in meta else ""), "",
        *[f"**{t}**" for t in trust], *([""] if trust else []),
        "Times: median of the " + ("interleaved rounds" if any("fast_s" in r for r in rows) else "repeats")
        + " (the minimum in the JSON/CSV). Peaks: extra bytes during one call "
        "(NumPy: tracemalloc; torch: its profiler's allocation events). "
        "`formula` columns come from `transformer/flash/io_count.py` and `tiled_fast.py`. fast: "
        "`flash_attention_fast` at its cache rule's block"
        + (f" ({meta['fast_block']}, L2 = {meta['l2_bytes'] // 1024} KiB), {meta['threads']} worker(s)"
           if "fast_block" in meta else "") + "; tiled: the readable `flash_attention` at its fastest block.", "",
        "| n | causal | torch SDPA ms | fast ms | fast / torch | tiled ms (block) | tiled / torch | naive ms | core ms | "
        "torch MiB | fast MiB (formula) | tiled MiB (formula) | naive MiB (formula) | fast / naive memory |",
        "|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def fast(r, text):  # runs stored before the fast path existed have no fast columns
        return text(r) if "fast_s" in r else "–"
    for r in rows:
        cells = [
            str(r["n"]), "yes" if r["causal"] else "no", f"{r['torch_s'] * 1e3:.1f}",
            fast(r, lambda r: f"{r['fast_s'] * 1e3:.0f}"), fast(r, lambda r: f"{r['fast_s'] / r['torch_s']:.2f}×"),
            f"{r['tiled_s'] * 1e3:.0f} ({r['tiled_block']})", f"{r['tiled_s'] / r['torch_s']:.2f}×",
            f"{r['naive_s'] * 1e3:.0f}", f"{r['core_s'] * 1e3:.0f}" if "core_s" in r else "–",
            f"{r['torch_peak_bytes'] / mib:.1f}",
            fast(r, lambda r: f"{r['fast_peak_bytes'] / mib:.1f} ({r['fast_peak_formula'] / mib:.1f})"),
            f"{r['tiled_peak_bytes'] / mib:.1f} ({r['tiled_peak_formula'] / mib:.1f})",
            f"{r['naive_peak_bytes'] / mib:.0f} ({r['naive_peak_formula'] / mib:.0f})",
            fast(r, lambda r: f"{100 * r['fast_peak_bytes'] / r['naive_peak_bytes']:.2f} %"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Slow-memory traffic counted by the readable loops (elements, all heads) equals the IO formulas:", "",
              "| n | causal | naive counted = formula | tiled counted = formula |", "|---:|:---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['n']} | {'yes' if r['causal'] else 'no'} | {r['naive_io_elements']:,} "
                     f"{'=' if r['naive_io_elements'] == r['naive_io_formula'] else '≠'} {r['naive_io_formula']:,} | "
                     f"{r['tiled_io_elements']:,} {'=' if r['tiled_io_elements'] == r['tiled_io_formula'] else '≠'} "
                     f"{r['tiled_io_formula']:,} |")
    lines += ["", "## Summary", ""] + [f"- {s}" for s in meta["summary"]] + [""]
    return "\n".join(lines)


def summarise(rows, blocks):
    out = []
    for r in rows:
        if r["n"] != 4096:
            continue
        fb, naive = r["fast_block"], r["naive_peak_bytes"]
        out.append(
            f"n = 4096, causal={r['causal']}: fast path (block {fb} from the cache rule, {r['fast_threads']} "
            f"worker(s)) {r['fast_s'] * 1e3:.0f} ms = {r['fast_s'] / r['torch_s']:.2f}× torch SDPA "
            f"({r['torch_s'] * 1e3:.0f} ms; target ≤ 2×), peak {r['fast_peak_bytes'] / 2**20:.1f} MiB = "
            f"{100 * r['fast_peak_bytes'] / naive:.2f} % of naive's {naive / 2**20:.0f} MiB (target ≤ 2 %); "
            f"fastest block measured: {r['fast_best_block']} (" + "; ".join(
                f"{b}: {r[f'fast_b{b}_s'] / r['torch_s']:.2f}×" for b in sorted(
                    int(k[6:-2]) for k in r if k.startswith("fast_b") and k.endswith("_s") and k[6:-2].isdigit()))
            + f"). Readable loop: block {r['tiled_block']} {r['tiled_s'] * 1e3:.0f} ms = "
            f"{r['tiled_s'] / r['torch_s']:.2f}× torch, peak {100 * r['tiled_peak_bytes'] / naive:.2f} % of naive's "
            "(per block: " + "; ".join(f"{b}: {r[f'tiled_b{b}_s'] / r['torch_s']:.2f}×, "
                                       f"{100 * r[f'tiled_b{b}_peak_bytes'] / naive:.2f} %" for b in blocks) + ").")
    for kind in ("tiled", "fast"):
        worst = max(abs(r[f"{kind}_peak_bytes"] / r[f"{kind}_peak_formula"] - 1) for r in rows)
        out.append(f"Measured peaks vs formulas, {kind}: within {100 * worst:.1f} %.")
    worst_n = max(abs(r["naive_peak_bytes"] / r["naive_peak_formula"] - 1) for r in rows)
    out.append(f"Measured peaks vs formulas, naive: within {100 * worst_n:.1f} %.")
    out.append("IO counters equal the formulas in every row: "
               f"{all(r['tiled_io_elements'] == r['tiled_io_formula'] and r['naive_io_elements'] == r['naive_io_formula'] for r in rows)}.")
    out.append(f"Largest |tiled - naive| over all outputs: {max(r['max_abs_diff_tiled_vs_naive'] for r in rows):.1e}; "
               f"|fast - naive|: {max(r['max_abs_diff_fast_vs_naive'] for r in rows):.1e}; "
               f"|fast - torch|: {max(r['max_abs_diff_fast_vs_torch'] for r in rows):.1e}.")
    return out


READING = """Reading these numbers: the readable loop makes 2·Tr·Tc small matrix products per head
(S_ij = Q_i K_jᵀ and P̃_ij V_j); with 2 BLAS threads each one is a meeting point of the two
threads, so when other jobs share the cores the readable time rises far more than that of the
standard path (a few large products) or of torch (one parallel kernel). The fast path shares
the query blocks among its workers, each with single-threaded BLAS, so it has no such meeting
points. Compare runs made at the same load (each run says whether it is trustworthy); the
1-thread run avoids the effect. Memory and IO counts do not depend on the load.

"""


def formula_curves(rows):  # the formula lines for a memory-vs-n plot, at every power of two
    ns = [2 ** p for p in range(8, 14)]  # 256 … 8192
    blk = max((r["tiled_block"] for r in rows if r["n"] == max(x["n"] for x in rows)), default=256)
    return {
        "n": ns, "tiled_block": blk,
        "naive_peak_bytes": [T.standard_attention_peak_bytes(B, H, n, n, D_H, 4) for n in ns],
        "naive_causal_peak_bytes": [T.standard_attention_peak_bytes(B, H, n, n, D_H, 4, True) for n in ns],
        "tiled_peak_bytes": [T.flash_attention_peak_bytes(B, H, n, n, D_H, 4, blk, blk) for n in ns],
        "fast_block": T.fast_block_size(D_H, 4), "fast_threads": THREADS,
        "fast_peak_bytes": [T.flash_attention_fast_peak_bytes(B, H, n, n, D_H, 4, T.fast_block_size(D_H, 4),
                                                              T.fast_block_size(D_H, 4), THREADS) for n in ns],
        "naive_io_elements": [T.standard_attention_io(n, n, D_H, B * H)["total"] for n in ns],
        "tiled_io_elements": [T.flash2_io(n, n, D_H, blk, blk, False, B * H)["total"] for n in ns],
        "tiled_causal_io_elements": [T.flash2_io(n, n, D_H, blk, blk, True, B * H)["total"] for n in ns],
    }


def write_results(runs, out):  # {label: {"meta", "rows", "formula_curves"}} -> out/flash.json, flash.csv, flash.md
    out.mkdir(parents=True, exist_ok=True)
    (out / "flash.json").write_text(json.dumps({"runs": runs}, indent=1))
    all_rows = [r for key in runs for r in runs[key]["rows"]]
    keys = sorted({k for r in all_rows for k in r}, key=lambda k: (k not in ("run", "threads", "n", "causal"), k))
    with open(out / "flash.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(all_rows)
    md = [markdown(runs[key]["rows"], runs[key]["meta"]) for key in runs]
    (out / "flash.md").write_text("# FlashAttention benchmark (CPU)\n\n" + READING + "\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a check that it runs: n = 256 … 1024, 2 repeats")
    ap.add_argument("--ns", type=int, nargs="+", help="sequence lengths (default 256 … 8192)")
    ap.add_argument("--blocks", type=int, nargs="+", default=[128, 256, 512],
                    help="block sizes to try (the readable loop; the fast path also at its own rule's block)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs per point (default 5, 3 for n ≥ 4096; 2 with --quick)")
    ap.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP threads for NumPy and torch")
    ap.add_argument("--label", help="name of this run in the results (default: '2 threads'); "
                    "a run with the same label is replaced")
    ap.add_argument("--core-max-n", type=int, default=4096, help="largest n for the core SDPA (memory)")
    ap.add_argument("--note", default="", help="a line about the machine's state, written into the results")
    ap.add_argument("--render", action="store_true", help="only rewrite flash.csv and flash.md from flash.json")
    M.add_out_argument(ap)
    args = ap.parse_args()
    if args.render:
        return write_results(json.loads((args.out / "flash.json").read_text())["runs"], args.out)
    ns = args.ns or ([256, 512, 1024] if args.quick else [256, 512, 1024, 2048, 4096, 8192])
    repeats = args.repeats or (2 if args.quick else None)
    repeats_for = (lambda n: repeats) if repeats else (lambda n: 3 if n >= 4096 else 5)
    import torch
    load_start, cpu_start = M.load_average(), M.cpu_snapshot()
    print(M.start_line(load_start), flush=True)
    t0 = time.time()
    rows = bench(ns, args.blocks, repeats_for, args.core_max_n)
    load = M.load_record(load_start, M.load_average(), own=int(THREADS))
    use = M.others_cpu(cpu_start, M.cpu_snapshot())  # other programs' CPU time while the clock ran
    meta = {
        "command": "python benchmarks/bench_flash.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, {THREADS} thread{'s' if THREADS > 1 else ''} "
                   f"(NumPy {np.__version__}, torch {torch.__version__})" + (f"; {args.note}" if args.note else ""),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": time.time() - t0,
        "load_average": load, "other_cpu": use, "trustworthy": M.trust_line(load, use),
        "threads": THREADS,
        "fast_block": T.fast_block_size(D_H, 4), "l2_bytes": T.cache_bytes(2),
    }
    meta["summary"] = summarise(rows, args.blocks)
    path = args.out / "flash.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else {}
    label = args.label or f"{THREADS} thread{'s' if THREADS > 1 else ''}"
    meta["label"] = label
    runs[label] = {"meta": meta, "rows": [dict(r, run=label) for r in rows], "formula_curves": formula_curves(rows)}
    write_results(runs, args.out)
    print("\n".join(meta["summary"]))
    print(M.load_line(load))
    print(meta["trustworthy"])


if __name__ == "__main__":
    main()
