"""BPE on long words without spaces: our merge loop against HF `tokenizers`, same ids asserted.

    python benchmarks/bench_tokenizers.py            # words of 1k, 10k and 100k letters, 5 repeats (~1 minute)
    python benchmarks/bench_tokenizers.py --quick    # a check that it runs: 10k letters, 1 repeat (seconds)
    python benchmarks/bench_tokenizers.py --out /tmp/b

One pre-token is merged as a whole, so a word of n letters with no space in it is the worst
case of BPE: rescanning every pair after each merge costs O(n²); a heap of ranked pairs over a
linked list of symbols (transformer/tokenizers/bpe.py, `merge_symbols`) costs O(n log n), as
HF's Rust BPE does. Each row times SmolLM2's tokenizer (vocabulary and merges read from its
GGUF file) on fresh random words of n letters (a, …, z; a new word for every repeat, so no
word cache helps either side): ours (`BPETokenizer.encode`), HF `tokenizers` built from the
same vocabulary and merges, and, up to --rescan-max letters, the O(n²) loop (`bpe_quadratic`,
one run) the heap replaced. The ids of ours and HF's are asserted equal for every word.
Writes tokenizers.json and tokenizers.md under --out (default benchmarks/results/).
"""
import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402


def hf_reference(tok):  # -> HF tokenizers' BPE with SmolLM2's vocabulary, merges and pre-tokenizer
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    ref = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tok.tokens)}, merges=tok.merges))
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    ref.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in tok.special])
    return ref


def random_word(n, seed):  # -> n letters a … z, no space: one pre-token
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def clock(fn):  # -> (seconds, result)
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench(tok, ref, sizes, repeats, rescan_max):
    rows = []
    for n in sizes:
        ours_s, hf_s, rescan_s = [], [], []
        for k in range(repeats):
            word = random_word(n, seed=1000 * n + k)
            t, ids = clock(lambda: tok.encode(word))
            ours_s.append(t)
            t, enc = clock(lambda: ref.encode(word))
            hf_s.append(t)
            assert ids == enc.ids, f"ids differ from HF tokenizers on a {n}-letter word (seed {1000 * n + k})"
            if n <= rescan_max and k == 0:  # one run: it is there to show the O(n²), not to be timed finely
                t, pieces = clock(lambda: tok.bpe_quadratic(word))
                rescan_s.append(t)
                assert [tok.vocab[p] for p in pieces] == ids
        row = {"letters": n, "tokens": len(ids), "repeats": repeats,
               "ours_s": statistics.median(ours_s), "hf_s": statistics.median(hf_s),
               "ours_min_s": min(ours_s), "hf_min_s": min(hf_s), "same_ids": True}
        row["ours_over_hf"] = row["ours_s"] / row["hf_s"]
        if rescan_s:
            row["rescan_s"] = statistics.median(rescan_s)
        rows.append(row)
        rescan = f" | rescanning loop {row['rescan_s'] * 1e3:9.1f} ms" if rescan_s else ""
        print(f"{n:7d} letters -> {len(ids):6d} tokens | ours {row['ours_s'] * 1e3:8.1f} ms | "
              f"HF {row['hf_s'] * 1e3:7.1f} ms | ours/HF {row['ours_over_hf']:5.1f}×{rescan} | same ids", flush=True)
    return rows


def markdown(rows, meta):
    lines = ["# BPE on long words (CPU)", "",
             f"SmolLM2's byte-level BPE on one random word of n letters without a space (a … z; a fresh word "
             f"for each of the repeats), median time of one `encode`. {meta['machine']}. "
             f"Run: `{meta['command']}` ({meta['wall_s']:.0f} s, {meta['date']}).", "",
             meta["load_line"], "",
             "| letters | tokens | ours ms | HF tokenizers ms | ours / HF | rescanning loop ms | same ids |",
             "|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        rescan = f"{r['rescan_s'] * 1e3:.0f}" if "rescan_s" in r else "–"
        lines.append(f"| {r['letters']:,} | {r['tokens']:,} | {r['ours_s'] * 1e3:.1f} | {r['hf_s'] * 1e3:.1f} | "
                     f"{r['ours_over_hf']:.1f}× | {rescan} | {'yes' if r['same_ids'] else 'NO'} |")
    lines += ["", "ours: the heap of ranked pairs over a linked list, O(n log n). rescanning loop: the O(n²) "
              "`bpe_quadratic` it replaced (one run, only up to --rescan-max letters). HF: the Rust BPE of `tokenizers` "
              f"{meta['tokenizers']}.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a check that it runs: 10k letters, 1 repeat")
    ap.add_argument("--sizes", type=int, nargs="+", help="word lengths in letters (default 1000 10000 100000)")
    ap.add_argument("--repeats", type=int, help="fresh words per size, median reported (default 5; 1 quick)")
    ap.add_argument("--rescan-max", type=int, help="longest word for the O(n²) loop (default 10000; 0 quick)")
    M.add_out_argument(ap)
    args = ap.parse_args()
    sizes = args.sizes or ([10_000] if args.quick else [1_000, 10_000, 100_000])
    repeats = args.repeats or (1 if args.quick else 5)
    rescan_max = args.rescan_max if args.rescan_max is not None else (0 if args.quick else 10_000)
    if min(sizes) < 1 or repeats < 1:
        ap.error(f"sizes and repeats must be at least 1, got sizes={sizes} repeats={repeats}")

    import tokenizers
    start = M.load_average()
    print(M.start_line(start), flush=True)
    t0 = time.time()
    tok = T.read_gguf_tokenizer(T.open_gguf(T.smollm2_path()))
    rows = bench(tok, hf_reference(tok), sizes, repeats, rescan_max)
    load = M.load_record(start, M.load_average(), own=1)
    meta = {
        "command": "python benchmarks/bench_tokenizers.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, Python "
                   f"{platform.python_version()}",
        "tokenizers": tokenizers.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": time.time() - t0,
        "load": load, "load_line": M.load_line(load),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokenizers.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / "tokenizers.md").write_text(markdown(rows, meta))
    print(meta["load_line"])
    print(f"wrote {args.out / 'tokenizers.json'} and {args.out / 'tokenizers.md'}")


if __name__ == "__main__":
    main()
