"""Training speed: the induction run in NumPy against the same model trained in torch eager.

    python benchmarks/bench_train.py               # the default run, 600 steps each (~1 minute on 2 cores)
    python benchmarks/bench_train.py --quick       # a check that it runs: 30 steps each (seconds)
    python benchmarks/bench_train.py --threads 1   # both on one thread
    python benchmarks/bench_train.py --out /tmp/b  # write the results elsewhere

Ours is `T.train_induction` as the lesson and the CLI run it (NumPy, one BLAS thread, padded
rows) with workers=--threads: each batch's rows split over that many threads (data parallelism),
the same cores torch's threads get; and once more with one thread, for the record. Its clock
leaves out the snapshots. The peer is the same decoder written here with torch's
modules (RMSNorm, RoPE in the rotate-half layout, SDPA with the causal mask, SwiGLU, tied LM head),
from the same initial weights, on the same documents (re-drawn from the same seed), with
torch.optim.AdamW and the same schedule, clip and weight decay, torch.set_num_threads(--threads).
Both are timed over one whole run, data drawing included; the first step's loss must agree
(the same model), and both final models are scored on the same held-out documents. One run
each: the ratio is of two single runs, so quote it with the load average printed with it.
Writes train.json and train.md under --out (default benchmarks/results/).
"""
import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine_state as M  # noqa: E402
import transformer as T  # noqa: E402


def torch_decoder(cfg, params):  # -> (forward(ids) -> logits, {name: torch parameter})
    import torch
    import torch.nn.functional as F

    w = {k: torch.nn.Parameter(torch.tensor(np.asarray(a))) for k, a in params.items()}
    d_h = cfg.d // cfg.h
    inv_freq = cfg.rope_base ** (-torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)

    def rope(x, cos, sin):  # rotate-half: (x₁, x₂) -> (x₁ cos − x₂ sin, x₂ cos + x₁ sin)
        x1, x2 = x[..., :d_h // 2], x[..., d_h // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(ids):  # [b, n] -> [b, n, v]
        b, n = ids.shape
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq  # [n, d_h/2]
        cos, sin = ang.cos().float(), ang.sin().float()
        x = F.embedding(ids, w["W_E"])
        for l in range(cfg.L):
            p = lambda k: w[f"layers.{l}.{k}"]  # noqa: E731
            a = F.rms_norm(x, (cfg.d,), p("norm1"), eps=cfg.eps)
            q = rope((a @ p("W_q")).view(b, n, cfg.h, d_h).transpose(1, 2), cos, sin)
            k = rope((a @ p("W_k")).view(b, n, cfg.h_kv, d_h).transpose(1, 2), cos, sin)
            v = (a @ p("W_v")).view(b, n, cfg.h_kv, d_h).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + o.transpose(1, 2).reshape(b, n, cfg.d) @ p("W_o")
            f = F.rms_norm(x, (cfg.d,), p("norm2"), eps=cfg.eps)
            x = x + (F.silu(f @ p("W_gate")) * (f @ p("W_up"))) @ p("W_down")
        return F.rms_norm(x, (cfg.d,), w["norm"], eps=cfg.eps) @ w["W_E"].T

    return forward, w


def train_torch(cfg, steps, seed, threads):  # -> (seconds, losses, forward)
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    r = T.INDUCTION_RECIPE
    forward, w = torch_decoder(cfg, T.init_decoder(cfg, seed))
    decay = [p for p in w.values() if p.ndim >= 2]  # the matrices, as T.adamw_step's default
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": r["weight_decay"]},
                             {"params": [p for p in w.values() if p.ndim < 2], "weight_decay": 0.0}],
                            lr=r["lr_max"], betas=r["betas"], eps=1e-8)
    rng = np.random.default_rng(seed)  # the documents of T.train_induction(seed=seed)
    losses = []
    t0 = time.perf_counter()
    for s in range(steps):
        docs = T.induction_documents(rng, r["docs_per_step"], cfg.v, r["n_half_range"])
        rows = T.induction_rows(docs, packed=False)
        T.induction_rows(docs, packed=True)  # ours lays out both (it counts both layouts' slots): so does the peer
        for g in opt.param_groups:
            g["lr"] = T.lr_at(s, lr_max=r["lr_max"], warmup=min(r["warmup"], steps), total=steps, lr_min=r["min_lr"])
        logits = forward(torch.as_tensor(rows.ids))
        loss = F.cross_entropy(logits.reshape(-1, cfg.v), torch.as_tensor(rows.targets).reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), r["clip"])
        opt.step()
        losses.append(loss.item())
    return time.perf_counter() - t0, losses, forward


def torch_accuracy(forward, docs):  # greedy accuracy on the second halves
    import torch
    right = total = 0
    with torch.no_grad():
        for d in docs:
            m = len(d) // 2
            pred = forward(torch.as_tensor(np.asarray(d)[None])).argmax(-1).numpy()[0]
            right += int((pred[m:-1] == d[m + 1:]).sum())
            total += m - 1
    return right / total


def markdown(res, meta):
    o, t = res["ours"], res["torch"]
    return "\n".join([
        "# Training the induction decoder (CPU)", "",
        f"`T.train_induction(workers={meta['torch_threads']})` (NumPy, one BLAS thread a worker, each worker "
        f"a share of the batch's rows) against the same decoder in torch eager "
        f"({meta['torch_threads']} thread(s)), same initial weights and documents, {res['steps']} steps of "
        f"{res['docs_per_step']} documents each, one run each. {meta['machine']}. "
        f"Run: `{meta['command']}` ({meta['wall_s']:.0f} s, {meta['date']}).", "",
        meta["load_line"], "", f"Trustworthy: {'yes' if meta['load']['trusted'] else 'no'}.", "",
        "| | steps/s | tokens/s | seconds | first loss | last loss | held-out accuracy |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| ours (NumPy, {meta['torch_threads']} worker(s)) | {o['steps_per_s']:.1f} | {o['tokens_per_s']:,.0f} | "
        f"{o['seconds']:.1f} | {o['first_loss']:.5f} | {o['last_loss']:.4f} | {o['heldout_accuracy']:.2%} |",
        *([f"| ours (NumPy, 1 thread) | {res['ours_one_thread']['steps_per_s']:.1f} | "
           f"{res['ours_one_thread']['tokens_per_s']:,.0f} | {res['ours_one_thread']['seconds']:.1f} | | | |"]
          if "ours_one_thread" in res else []),
        f"| torch eager | {t['steps_per_s']:.1f} | {t['tokens_per_s']:,.0f} | {t['seconds']:.1f} | "
        f"{t['first_loss']:.5f} | {t['last_loss']:.4f} | {t['heldout_accuracy']:.2%} |", "",
        f"torch / ours (steps per second): **{res['torch_over_ours']:.2f}×**. Tokens: the real tokens of the "
        f"padded rows ({res['tokens']:,} in all). Torch {meta['torch']}, NumPy {meta['numpy']}.", ""])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a check that it runs: 30 steps each")
    ap.add_argument("--steps", type=int, help=f"training steps of each run (default {T.INDUCTION_STEPS}; 30 quick)")
    ap.add_argument("--threads", type=int, default=2,
                    help="torch's threads and our workers (default 2); ours runs once more on one thread")
    M.add_out_argument(ap)
    args = ap.parse_args()
    steps = args.steps or (30 if args.quick else T.INDUCTION_STEPS)
    if steps < 1 or args.threads < 1:
        ap.error(f"steps and threads must be at least 1, got steps={steps} threads={args.threads}")

    import torch
    start = M.load_average()
    print(M.start_line(start), flush=True)
    t_wall = time.time()
    cfg = T.induction_config()
    held = T.induction_documents(np.random.default_rng(T.HELDOUT_SEED_OFFSET + 7), 256, cfg.v,
                                 T.INDUCTION_RECIPE["n_half_range"], split="heldout")
    ours = T.train_induction(steps=steps, seed=0, progress=False, snapshot_every=steps, workers=args.threads)
    print(f"ours:  {steps / ours['history']['seconds']:6.1f} steps/s ({args.threads} worker(s))", flush=True)
    one = ours if args.threads == 1 else T.train_induction(steps=steps, seed=0, progress=False, snapshot_every=steps)
    print(f"ours:  {steps / one['history']['seconds']:6.1f} steps/s (1 thread)", flush=True)
    t_seconds, t_losses, forward = train_torch(cfg, steps, 0, args.threads)
    print(f"torch: {steps / t_seconds:6.1f} steps/s ({args.threads} thread(s))", flush=True)
    first = ours["history"]["loss"][0]
    assert abs(first - t_losses[0]) < 1e-4 * max(1.0, abs(first)), (first, t_losses[0])  # the same model
    tokens = ours["history"]["tokens_seen"]
    res = {"steps": steps, "docs_per_step": T.INDUCTION_RECIPE["docs_per_step"], "tokens": tokens,
           "ours": {"seconds": ours["history"]["seconds"], "steps_per_s": steps / ours["history"]["seconds"],
                    "tokens_per_s": tokens / ours["history"]["seconds"], "first_loss": first,
                    "last_loss": ours["history"]["loss"][-1],
                    "heldout_accuracy": T.induction_heldout_accuracy(ours["params"], cfg, held)[0]},
           "ours_one_thread": {"seconds": one["history"]["seconds"], "steps_per_s": steps / one["history"]["seconds"],
                               "tokens_per_s": tokens / one["history"]["seconds"]},
           "torch": {"seconds": t_seconds, "steps_per_s": steps / t_seconds, "tokens_per_s": tokens / t_seconds,
                     "first_loss": t_losses[0], "last_loss": t_losses[-1],
                     "heldout_accuracy": torch_accuracy(forward, held)}}
    res["torch_over_ours"] = res["torch"]["steps_per_s"] / res["ours"]["steps_per_s"]
    load = M.load_record(start, M.load_average(), own=max(args.threads, 1))
    meta = {"command": "python benchmarks/bench_train.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, Python "
                       f"{platform.python_version()}",
            "torch": torch.__version__, "numpy": np.__version__, "torch_threads": args.threads,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "wall_s": time.time() - t_wall,
            "load": load, "load_line": M.load_line(load)}
    assert all(math.isfinite(x) for x in (res["torch_over_ours"], res["ours"]["last_loss"], res["torch"]["last_loss"]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train.json").write_text(json.dumps({"meta": meta, "result": res}, indent=1))
    (args.out / "train.md").write_text(markdown(res, meta))
    print(f"torch / ours: {res['torch_over_ours']:.2f}× steps per second")
    print(meta["load_line"])
    print(f"trustworthy: {'yes' if load['trusted'] else 'no'}")
    print(f"wrote {args.out / 'train.json'} and {args.out / 'train.md'}")


if __name__ == "__main__":
    main()
