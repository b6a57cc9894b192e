"""Every benchmark runs: each CPU benchmark in --quick mode into a temporary folder, its files checked.

A benchmark nothing runs breaks silently (an attribute renamed in the package, a key renamed in
its results), and the README would go on quoting numbers no one can reproduce. Here each
benchmarks/bench_*.py but the GPU ones runs as a subprocess with `--quick --out tmp_path`, must
exit 0, leave the committed benchmarks/results/ untouched, and write results that parse: no NaN
or infinity, every ratio a positive number, the load average recorded with a verdict that agrees
with it, and the peers' answers where the benchmark compares (HF's greedy tokens, naive attention's
output). bench_gpu.py and bench_decode_gpu.py need a GPU: without one, their --help, their refusal
and their report writers (on hand-made rows) are checked. The timings themselves are not judged: they depend on the machine.
"""
from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
GPU_BENCHMARKS = ("bench_gpu.py", "bench_decode_gpu.py")
CPU_BENCHMARKS = sorted(p.name for p in BENCH.glob("bench_*.py") if p.name not in GPU_BENCHMARKS)
# One BLAS thread in the suite: the other core runs the suite's other worker.
EXTRA = {"bench_decoder.py": ["--threads", "1"], "bench_flash.py": ["--threads", "1"],
         "bench_train.py": ["--threads", "1"]}


def load(name):  # a benchmark script as a module, without running its main()
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), BENCH / name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def committed_results() -> dict:  # file name -> sha256 of the committed results
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((BENCH / "results").glob("*"))}


def strict_json(path: Path):
    def refuse(constant):
        raise ValueError(f"{path.name} holds {constant}")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def numbers_under(value):  # every number in a JSON value, recursively
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from numbers_under(v)
    elif isinstance(value, list):
        for v in value:
            yield from numbers_under(v)


def ratio_fields(value, path=""):  # -> [(path, number)] for every number under a key that names a ratio
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if any(word in str(k).lower() for word in ("ratio", "speedup", "_over_")):
                found += [(f"{path}/{k}", x) for x in numbers_under(v)]
            else:
                found += ratio_fields(v, f"{path}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += ratio_fields(v, f"{path}/{i}")
    return found


def load_records(value):  # every {"start", "end", "cores", "limit", "trusted"} in a JSON value
    if isinstance(value, dict):
        if {"start", "end", "cores", "limit", "trusted"} <= value.keys():
            yield value
        for v in value.values():
            yield from load_records(v)
    elif isinstance(value, list):
        for v in value:
            yield from load_records(v)


def check_load_record(r):
    """The verdict follows the numbers: trusted iff the 1-minute load was at most 0.5 per core at the
    start, and at most that plus the benchmark's own threads at the end."""
    assert len(r["start"]) == len(r["end"]) == 3 and r["cores"] >= 1
    assert r["limit"] == pytest.approx(0.5 * r["cores"])
    assert r["trusted"] is (r["start"][0] <= r["limit"] and r["end"][0] <= r["limit"] + r["own"])


def check_decoder(out: Path):
    res = strict_json(out / "decoder_threads1.json")
    assert res["greedy_tokens_identical"] is True  # the peer: HF transformers' greedy tokens on the same weights
    for key in ("prefill_tok_s", "decode_tok_s"):
        assert all(res[key][who] > 0 for who in ("ours", "hf")), res[key]
    assert res["new_tokens"] == 8 and res["prompt_tokens"] == 32  # the quick sizes
    md = (out / "decoder_threads1.md").read_text(encoding="utf-8")
    assert "| prefill, 32-token prompt (tokens/s) |" in md and "Greedy continuations identical" in md


def check_flash(out: Path):
    runs = strict_json(out / "flash.json")["runs"]
    assert list(runs) == ["1 thread"]
    rows = runs["1 thread"]["rows"]
    assert sorted((r["n"], r["causal"]) for r in rows) == [(n, c) for n in (256, 512, 1024) for c in (False, True)]
    for r in rows:
        assert r["max_abs_diff_tiled_vs_naive"] < 1e-4  # the tiled output against the naive one, float32
        assert r["tiled_io_elements"] == r["tiled_io_formula"] and r["naive_io_elements"] == r["naive_io_formula"]
        assert all(r[k] > 0 for k in ("torch_s", "tiled_s", "naive_s", "core_s"))
    with open(out / "flash.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert "| 1024 | yes |" in (out / "flash.md").read_text(encoding="utf-8")


def check_tokenizers(out: Path):
    rows = strict_json(out / "tokenizers.json")["rows"]
    assert [r["letters"] for r in rows] == [10_000]  # the quick size
    assert all(r["same_ids"] is True and r["tokens"] > 0 for r in rows)  # the peer: HF tokenizers' ids


def check_train(out: Path):
    res = strict_json(out / "train.json")["result"]
    assert res["steps"] == 30 and res["docs_per_step"] == 64  # the quick size
    o, t = res["ours"], res["torch"]  # the peer: the same decoder in torch, same weights and documents
    assert abs(o["first_loss"] - t["first_loss"]) < 1e-4 and abs(o["first_loss"] - math.log(31)) < 0.3
    assert all(0 <= r["heldout_accuracy"] <= 1 and r["steps_per_s"] > 0 for r in (o, t))
    assert "| torch eager |" in (out / "train.md").read_text(encoding="utf-8")


def check_serve(out: Path):
    rows = {r["model"]: r for r in strict_json(out / "serve.json")["rows"]}
    assert set(rows) == {"MiniLM-L6", "SmolLM2-135M"} and all(r["tokens"] == 64 for r in rows.values())
    # every layer's and head's weights for 64 tokens: MiniLM 6·12·64², SmolLM2 30·9 lower triangles of 64 + 6 tokens
    assert rows["MiniLM-L6"]["weights"] == 6 * 12 * 64 * 64 and rows["SmolLM2-135M"]["weights"] == 30 * 9 * 70 * 71 // 2
    assert all(0 < r["min_s"] <= r["median_s"] <= r["max_s"] and r["answer_bytes"] > 0 for r in rows.values())
    assert "| SmolLM2-135M | 64 | 6 |" in (out / "serve.md").read_text(encoding="utf-8")


SPECIFIC = {"bench_decoder.py": check_decoder, "bench_flash.py": check_flash, "bench_tokenizers.py": check_tokenizers,
            "bench_train.py": check_train, "bench_serve.py": check_serve}


def test_there_are_cpu_benchmarks_to_run():
    assert {"bench_decoder.py", "bench_flash.py"} <= set(CPU_BENCHMARKS)
    assert set(SPECIFIC) <= set(CPU_BENCHMARKS)


@pytest.mark.parametrize("name", CPU_BENCHMARKS)
def test_benchmark_runs_quick_into_a_folder(name, tmp_path):
    before = committed_results()
    out = tmp_path / "results"
    res = subprocess.run([sys.executable, str(BENCH / name), "--quick", "--out", str(out)] + EXTRA.get(name, []),
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"{name} --quick failed:\n{res.stderr[-3000:]}"
    assert committed_results() == before, f"{name} --out {out} wrote into benchmarks/results/"
    written = sorted(p.name for p in out.iterdir())
    assert any(w.endswith(".json") for w in written) and any(w.endswith(".md") for w in written), written
    assert "Load average" in res.stdout, f"{name} does not print the load average"
    for path in out.glob("*.json"):
        data = strict_json(path)
        assert all(math.isfinite(x) for x in numbers_under(data)), path.name
        bad = [(k, x) for k, x in ratio_fields(data) if not x > 0]
        assert not bad, f"{path.name}: ratios that are not positive numbers: {bad}"
        records = list(load_records(data))
        assert records, f"{path.name} does not record the load average"
        for r in records:
            check_load_record(r)
            assert r["trusted"] or "CANNOT BE TRUSTED" in res.stdout.upper(), f"{name} hides a busy machine"
    for path in out.glob("*.md"):
        assert "load average" in path.read_text(encoding="utf-8").lower(), f"{path.name} omits the load average"
    if name in SPECIFIC:
        SPECIFIC[name](out)


def test_run_all_passes_quick_and_out_to_every_cpu_benchmark(tmp_path):
    run_all = load("run_all.py")
    cmds = run_all.commands(quick=True, out=tmp_path)
    assert [Path(c[1]).name for c in cmds] == CPU_BENCHMARKS
    assert all(c[0] == sys.executable and c[2:] == ["--quick", "--out", str(tmp_path)] for c in cmds)
    assert [Path(c[1]).name for c in run_all.commands(gpu=True)][-2:] == ["bench_gpu.py", "bench_decode_gpu.py"]
    assert all(len(c) == 2 for c in run_all.commands())  # the full benchmarks, their own default folder


def test_machine_state_verdict():
    """Hand-worked: on 2 cores the limit is 1.0; a load of 1.0 is quiet, 1.01 at either end is busy;
    a benchmark of 2 threads may end at 3.0 (its own 2 included), not at 3.01."""
    M = load("machine_state.py")
    quiet = M.load_record([1.0, 3.0, 3.0], [0.2, 0.1, 0.1], cores=2)
    assert quiet["trusted"] and quiet["limit"] == 1.0 and "CANNOT" not in M.load_line(quiet)
    assert M.load_record([0.1, 0, 0], [3.0, 0, 0], cores=2, own=2)["trusted"]
    assert not M.load_record([0.1, 0, 0], [3.01, 0, 0], cores=2, own=2)["trusted"]
    for start, end in (([1.01, 0, 0], [0, 0, 0]), ([0, 0, 0], [1.01, 0, 0])):
        busy = M.load_record(start, end, cores=2)
        assert not busy["trusted"] and "CANNOT BE TRUSTED" in M.load_line(busy)
    assert "busy" in M.start_line([4.0, 0, 0], cores=2) and "busy" not in M.start_line([0.5, 0, 0], cores=2)


def test_bench_gpu_report_writes_into_out(tmp_path):
    """The report writer on a hand-made row: gpu.json and gpu.md land in --out, with the load verdict."""
    bench = load("bench_gpu.py")
    row = {"n": 1024, "dtype": "float16", "causal": True, "flops": 1e10, "naive_peak_formula": 2 ** 26,
           "kernel_peak_formula": 2 ** 20, "torch_s": 1e-4, "torch_peak_bytes": 2 ** 20, "naive_s": 4e-4,
           "naive_peak_bytes": 2 ** 26, "simt_s": 3e-4, "simt_peak_bytes": 2 ** 20}
    busy = bench.M.load_record([9.0, 9.0, 9.0], [9.0, 9.0, 9.0], cores=16)
    meta = {"device": "a GPU", "command": "python benchmarks/bench_gpu.py --quick", "wall_s": 1.0, "date": "d",
            "cupy": "x", "torch": "y", "cuda_runtime": 0, "load_average": busy}
    bench.write_report(tmp_path / "out", meta, [row], None)
    data = strict_json(tmp_path / "out" / "gpu.json")
    assert data["attention"] == [row] and data["meta"]["load_average"] == busy
    md = (tmp_path / "out" / "gpu.md").read_text(encoding="utf-8")
    assert "CANNOT BE TRUSTED" in md and "| 1024 | float16 | yes | 0.10 | 0.40 |" in md


def ragged_table_rows(text: str) -> list[str]:
    """The rows of a Markdown table whose number of cells differs from their header's: a bare `|` inside
    a cell (`max |Δ|`) splits it, on GitHub as on the site. An escaped pipe (`\\|`) does not."""
    bad, header = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line.strip().strip("|")))
        if header is None:
            header = cells
        elif cells != header:
            bad.append(f"line {number}: {cells} cells under a header of {header}: {line[:70]}")
    return bad


def test_ragged_table_rows_are_found():  # hand-made: the bare pipes of the old GPU report, then escaped
    assert ragged_table_rows("| a | max |Δ| |\n|---|---|\n| 1 | 2 |\n") != []
    assert ragged_table_rows("| a | max \\|Δ\\| |\n|---|---|\n| 1 | 2 |\n\ntext\n| x |\n|---|\n") == []


def test_gpu_reports_tables_keep_their_columns(tmp_path, capsys):
    """The GPU writers on the committed results (every section: attention, packed rows, backward, the
    model; the decode stages), and every committed report: each table row has its header's cells."""
    gpu, decode = load("bench_gpu.py"), load("bench_decode_gpu.py")
    data = strict_json(BENCH / "results" / "gpu.json")
    assert data["packed"] and data["backward"] and data["model"], "the committed GPU results lack a section"
    gpu.write_report(tmp_path, data["meta"], data["attention"], data["model"], data["packed"], data["backward"])
    decode.write_report(tmp_path, strict_json(BENCH / "results" / "decode_gpu.json"))
    reports = [tmp_path / "gpu.md", tmp_path / "decode_gpu.md"] + sorted((BENCH / "results").glob("*.md"))
    for path in reports:
        text = path.read_text(encoding="utf-8")
        assert text.count("\n|") > 3, f"{path} has no table"
        bad = ragged_table_rows(text)
        assert not bad, f"{path}:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("name", GPU_BENCHMARKS)
def test_a_gpu_benchmark_without_a_gpu_refuses_in_one_line_and_writes_nothing(tmp_path, name):
    bench = load(name)
    try:
        bench.T.import_cupy()
        pytest.skip("CuPy and a GPU are here: the benchmark would run")
    except RuntimeError:
        pass
    res = subprocess.run([sys.executable, str(BENCH / name), "--quick", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    help_ = subprocess.run([sys.executable, str(BENCH / name), "--help"], capture_output=True, text=True)
    assert help_.returncode == 0 and "--quick" in help_.stdout and "--out DIR" in help_.stdout


def test_bench_decode_gpu_report_names_the_issue_keys_and_the_verdict(tmp_path):
    """The report writer on hand-made stages: the keys the GPU issue asks for at the top of decode_gpu.json,
    the goal judged from the numbers (600 tok/s and 2.0× HF static: met; a failed stage is named)."""
    bench = load("bench_decode_gpu.py")
    data = {"meta": {"command": "c", "date": "d"}, "model": "m", "errors": {"peers": "RuntimeError: x"},
            "env": {"device": "a GPU", "sms": 132},
            "micro": {"eager_launch_us": 4.9, "graph_node_us": 0.5},
            "correctness": {"steps": 64, "first_near_tie": 64, "graph_max_rel_logit_err": 2e-6,
                            "kernels_max_rel_logit_err": 2e-6, "passed": True},
            "speed": {"cupy_graph_decode_tok_s": 600.0, "kernels_per_step": 214, "graph_pct_of_floor": 7.0,
                      "bandwidth_floor_tok_s": 8900.0, "cupy_readable_decode_tok_s_n64": 22.0},
            "peers": {"hf_eager_decode_tok_s": 40.0, "hf_static_compiled_decode_tok_s": 300.0}}
    bench.write_report(tmp_path, data)
    got = strict_json(tmp_path / "decode_gpu.json")
    assert (got["cupy_graph_decode_tok_s"], got["hf_eager_decode_tok_s"], got["hf_static_compiled_decode_tok_s"],
            got["kernels_per_step"]) == (600.0, 40.0, 300.0, 214)
    md = (tmp_path / "decode_gpu.md").read_text(encoding="utf-8")
    assert "2.00× — goal ≥ 500 tok/s and ≥ 1.5×: met" in md and "stage peers failed" in md
    data["speed"]["cupy_graph_decode_tok_s"] = 400.0
    bench.write_report(tmp_path, data)
    assert "NOT met" in (tmp_path / "decode_gpu.md").read_text(encoding="utf-8")
