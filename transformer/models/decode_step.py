"""A Llama decode step as kernel launches on buffers made once: the body a CUDA graph replays.

`DecodeStep.enqueue(launch)` issues the step's 5L + 4 kernels (5L + 5 with top-k or top-p; decode_plan.py
lists them) and does nothing else: no array is allocated, no value is read back, no Python number in it
changes from one step to the next. What changes (the token, the position, the step, whether the run is
over) lives in `state`, four int32 the kernels themselves read and advance. So one recording of the body
serves every step, and the same body runs under any launcher:

    TwinLauncher        each kernel's NumPy twin (decode_twins.py), on the CPU: the step, readable
    RecordingLauncher   records the launches, a CPU model of a CUDA graph; `replay` re-issues them
    CupyLauncher        the CUDA kernels on a GPU (decode_graph.py), eagerly or inside a capture

Every buffer is a view of one arena allocated at construction (plus `state`, the generated ids `out`,
the per-block sampling results, attention's count of finished blocks and the weights in the kernels'
layout, `decode_plan.device_matrices`).
The KV cache is the model's own `KVCache` (b = 1): layer l's keys are `cache.k[l][0]`, [h_kv, n_max, d_h],
and the step writes the new token's at slot state[POS], as `KVCache.update` would.
"""
from __future__ import annotations

import numpy as np

from .decode_plan import DecodeSizes, LaunchSpec, device_matrices, launch_specs, sampling_arguments
from .decode_twins import TWINS, sample_blocks, sample_filter

__all__ = ["DecodeStep", "TwinLauncher", "RecordingLauncher", "first_token"]


class DecodeStep:
    """One decode step of a Llama model for one sequence, float32, as kernels (see the module docstring).

    w, cfg: the model's LlamaWeights and LlamaConfig; cache: its KVCache (b = 1), n_max ≥ the last position;
    cos, sin: RoPE tables [≥ n_max, d_h/2]; max_new: the ids `out` holds. temperature 0 is greedy, else
    Gumbel-max sampling from softmax(logits / temperature) with the counter stream u(seed, step, i), over
    the tokens top_k and top_p keep (core.sampling.filter_logits' rule; the filter kernel is launched only
    then); eos: the id that ends the run (−1: none). mats: `device_matrices(w)` made earlier, to share them.
    """

    def __init__(self, w, cfg, cache, cos, sin, max_new: int, *, temperature: float = 0.0, seed: int = 0,
                 top_k: int | None = None, top_p: float | None = None, eos: int = -1, split: int | None = None,
                 mats=None, xp=np):
        s = DecodeSizes.of(cfg, cache.n_max, max_new) if split is None else DecodeSizes.of(cfg, cache.n_max, max_new,
                                                                                            split)
        self.sizes, self.xp = s, xp
        self.mats, self.head = device_matrices(w, cfg, xp) if mats is None else mats  # L × 4 × [d_out, d_in], [v, d]
        self.W_E, self.final_norm = w.W_E, w.norm  # [v, d], [d]
        self.norms = [(lw.attn_norm, lw.ffn_norm) for lw in w.layers]  # L × 2 × [d]
        self.caches = [(cache.k[i][0], cache.v[i][0]) for i in range(s.L)]  # L × 2 × [h_kv, n_max, d_h]
        self.cos, self.sin = xp.ascontiguousarray(cos[:s.max_len]), xp.ascontiguousarray(sin[:s.max_len])
        inv_T, top_k, top_p, self.filtered = sampling_arguments(temperature, top_k, top_p, s.v)
        # the arena: every scratch buffer of the step, one allocation
        qd, S, nb = s.h * s.d_h, s.n_splits, s.vocab_blocks
        sizes = {"x": s.d, "q": qd, "part_o": qd * S, "part_ml": 2 * s.h * S, "o": qd,
                 "gu": 2 * s.d_ff, "logits": s.v, "best_v": nb, "bounds": 2 * self.filtered}
        self.arena = xp.empty(sum(sizes.values()), dtype=xp.float32)  # [Σ sizes]
        edges = np.cumsum([0, *sizes.values()])
        self.buf = {k: self.arena[int(a):int(b)] for k, a, b in zip(sizes, edges[:-1], edges[1:])}  # views
        self.best_i = xp.empty(nb, dtype=xp.int32)  # [blocks of the vocabulary]
        self.arrivals = xp.zeros(s.h_kv, dtype=xp.int32)  # attend_split's finished blocks a KV head: 0 between steps
        self.state = xp.zeros(4, dtype=xp.int32)  # TOK, POS, STEP, DONE
        self.out = xp.zeros(max(s.max_new, 1), dtype=xp.int32)  # [max_new] the generated ids
        # sample_filter's (threshold, last), or a null pointer (8 zero bytes, as CuPy passes one): keep every token
        self.bounds = self.buf["bounds"] if self.filtered else np.uint64(0)
        # every launch and every scalar argument, fixed here: enqueue only launches
        i32, f32 = np.int32, np.float32
        self.k = launch_specs(s)  # each launch by its role, its grid from the plan
        self.a = {"d": i32(s.d), "eps": f32(s.eps), "h": i32(s.h), "h_kv": i32(s.h_kv),
                  "d_h": i32(s.d_h), "max_len": i32(s.max_len), "q_scale": f32(s.d_h ** -0.5), "split": i32(s.split),
                  "qd": i32(qd), "gu": i32(2 * s.d_ff), "d_ff": i32(s.d_ff), "v": i32(s.v),
                  "inv_T": inv_T, "top_k": top_k, "top_p": top_p, "seed": np.uint32(seed & 0xFFFFFFFF),
                  "nb": i32(nb), "max_new": i32(s.max_new), "eos": i32(eos)}

    @property
    def nbytes(self) -> int:
        """Bytes the step allocates beyond the model and its cache: the weights in the kernels' layout
        (all of them again: [d_out, d_in]), the arena, the blocks' counts, the state and the ids."""
        mats = sum(int(M.nbytes) for layer in self.mats for M in layer) + (0 if self.head is self.W_E
                                                                           else int(self.head.nbytes))
        return mats + sum(int(a.nbytes) for a in (self.arena, self.best_i, self.arrivals, self.state, self.out))

    def enqueue(self, launch):
        """The step: every kernel in order, nothing else. launch(spec, *args) runs or records one kernel."""
        k, a, b, state = self.k, self.a, self.buf, self.state
        x = b["x"]
        launch(k["embed"], self.W_E, state, x, a["d"])  # x = W_E[tok]
        for (W_qkv, W_o, W_gu, W_down), (g1, g2), (K, V) in zip(self.mats, self.norms, self.caches):
            launch(k["qkv"], x, g1, W_qkv, self.cos, self.sin, b["q"], K, V, state, a["h"], a["h_kv"], a["d_h"],
                   a["max_len"], a["d"], a["eps"], a["q_scale"])  # q = RoPE(q)/√d_h; K[pos], V[pos] = RoPE(k), v
            launch(k["attend_split"], b["q"], K, V, b["part_o"], b["part_ml"], b["o"], self.arrivals, state, a["h"],
                   a["h_kv"], a["d_h"], a["max_len"], a["split"])  # per split: (m, ℓ, Σ e^{s−m} v); merged: o
            launch(k["W_o"], b["o"], W_o, x, state, a["d"], a["qd"])  # x += W_o·o
            launch(k["gate_up"], x, g2, W_gu, b["gu"], state, a["gu"], a["d"], a["eps"])  # gu = W_gu·RMSNorm(x)
            launch(k["W_down"], b["gu"], W_down, x, state, a["d"], a["d_ff"])  # x += W_down·(silu(g) ⊙ u)
        launch(k["head"], x, self.final_norm, self.head, b["logits"], state, a["v"], a["d"], a["eps"])  # logits
        if self.filtered:  # top-k or top-p, fixed at construction: the kept set as bounds on the logits
            launch(k["sample_filter"], b["logits"], b["bounds"], state, a["v"], a["inv_T"], a["top_k"], a["top_p"])
        launch(k["sample_blocks"], b["logits"], self.bounds, b["best_v"], self.best_i, state, a["v"], a["inv_T"],
               a["seed"])  # per block: the best (Gumbel-max) score among the kept tokens
        launch(k["sample_finish"], b["best_v"], self.best_i, state, self.out, a["nb"], a["max_new"], a["eos"])

    def start(self, first: int, n_prompt: int) -> bool:
        """The state after prefill: the first new id (chosen from the prefill's logits) is out[0] and the
        input of step 1, at position n_prompt. Returns whether the run is over already (the end token)."""
        s, eos = self.sizes, int(self.a["eos"])
        done = int(first == eos or s.max_new <= 1)
        self.state[...] = self.xp.asarray(np.array([first, n_prompt, 1, done], dtype=np.int32))  # TOK, POS, STEP, DONE
        self.out[...] = 0
        self.out[0] = first
        return bool(done)

    @property
    def scratch(self) -> list:
        """The buffers no step reads before writing them: poisoning them between steps changes nothing."""
        return [self.arena, self.best_i]


def first_token(logits, temperature: float, seed: int, top_k=None, top_p=None) -> int:  # [v] NumPy -> id
    """The first new id, from the prefill's logits, by the device's rule at step 0, through the kernels'
    twins (one vocabulary block): argmax, or argmax(logits / T + Gumbel(u(seed, 0, i))) over the tokens
    that top_k and top_p keep (decode_twins.sample_filter, then sample_blocks).

    >>> x = np.array([0.0, 2.0, 1.0, 2.5], np.float32)
    >>> first_token(x, 0.0, seed=0), first_token(x, 1.0, seed=0, top_k=1)  # greedy; top-1 at any temperature
    (3, 3)
    """
    z = np.ascontiguousarray(logits, dtype=np.float32)  # [v]
    v, state = z.shape[-1], np.zeros(4, np.int32)  # TOK, POS, STEP = 0, DONE = 0
    inv_T, top_k, top_p, filtered = sampling_arguments(temperature, top_k, top_p, v)
    bounds = np.empty(2, np.float32) if filtered else np.uint64(0)  # as DecodeStep.bounds
    if filtered:
        sample_filter(z, bounds, state, v, inv_T, top_k, top_p)
    best_v, best_i = np.empty(1, np.float32), np.empty(1, np.int32)  # one block: the whole vocabulary
    sample_blocks(z, bounds, best_v, best_i, state, v, inv_T, np.uint32(seed & 0xFFFFFFFF), grid=(1,))
    return int(best_i[0])


class TwinLauncher:
    """Runs each launch as its kernel's NumPy twin (decode_twins.TWINS), on the CPU."""

    def __init__(self):
        self.twins = TWINS

    def __call__(self, spec: LaunchSpec, *args):
        self.twins[spec.name](*args, grid=spec.grid)


class RecordingLauncher:
    """Records each launch (spec, args) instead of running it: a CUDA graph's model on the CPU.
    `replay(launch)` issues the recorded launches again, in order, through another launcher."""

    def __init__(self):
        self.calls: list[tuple[LaunchSpec, tuple]] = []

    def __call__(self, spec: LaunchSpec, *args):
        self.calls.append((spec, args))

    def replay(self, launch):
        for spec, args in self.calls:
            launch(spec, *args)

