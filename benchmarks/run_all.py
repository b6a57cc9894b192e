"""Run every benchmark in turn (what `make bench` does); each writes its results under --out.

    python benchmarks/run_all.py                  # every CPU benchmark, full size, into benchmarks/results/
    python benchmarks/run_all.py --quick          # short versions: a check that each one runs
    python benchmarks/run_all.py --out /tmp/b     # write the results elsewhere
    python benchmarks/run_all.py --gpu            # bench_gpu.py and bench_decode_gpu.py as well (CuPy, a GPU)

The CPU benchmarks are every benchmarks/bench_*.py but the GPU ones (bench_decoder, bench_flash,
bench_serve, bench_tokenizers, bench_train, …). Timings are medians of
repeated runs with ratios against a peer measured in the same run; each benchmark prints the
load average and says when the machine was too busy for its timings to be trusted, so run them
on an otherwise idle machine.
"""
import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU_BENCHMARKS = ("bench_gpu.py", "bench_decode_gpu.py")


def cpu_benchmarks() -> list[str]:  # -> file names, in name order
    return sorted(p.name for p in HERE.glob("bench_*.py") if p.name not in GPU_BENCHMARKS)


def commands(quick: bool = False, out=None, gpu: bool = False) -> list[list[str]]:
    """The command line of each benchmark, --quick and --out passed through."""
    names = cpu_benchmarks() + (list(GPU_BENCHMARKS) if gpu else [])
    flags = (["--quick"] if quick else []) + ([] if out is None else ["--out", str(out)])
    return [[sys.executable, str(HERE / name)] + flags for name in names]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="pass --quick to each benchmark")
    ap.add_argument("--out", type=Path, metavar="DIR",
                    help="pass --out DIR to each benchmark (default: theirs, benchmarks/results/)")
    ap.add_argument("--gpu", action="store_true", help="run the GPU benchmarks too")
    args = ap.parse_args(argv)
    import machine_state as M
    for cmd in commands(args.quick, args.out, args.gpu):
        if not args.quick:  # the last benchmark's own load decays over minutes: let it settle first
            print(f"waiting for a quiet machine (load {M.load_average()[0]:.2f})", flush=True)
            M.wait_for_quiet()
        print(f"== {' '.join(cmd[1:])}", flush=True)
        rc = subprocess.call(cmd, cwd=HERE.parent)
        if rc:
            print(f"{Path(cmd[1]).name} failed with exit code {rc}", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
