"""Run every benchmark in turn (what `make bench` does); each writes its results under benchmarks/results/.

    python benchmarks/run_all.py            # decoder and FlashAttention benchmarks, 2 threads
    python benchmarks/run_all.py --quick    # shorter versions of both

Timings are medians of repeated runs with ratios against a peer measured in the same run;
run them on an otherwise idle machine.
"""
import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["bench_decoder.py", "bench_flash.py"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="pass --quick to each benchmark")
    args = ap.parse_args(argv)
    for name in BENCHMARKS:
        cmd = [sys.executable, str(HERE / name)] + (["--quick"] if args.quick else [])
        print(f"== {' '.join(cmd[1:])}", flush=True)
        rc = subprocess.call(cmd, cwd=HERE.parent)
        if rc:
            print(f"{name} failed with exit code {rc}", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
