"""The GPU decode step's plan, as pure functions: its kernels, their grids, its buffers, its random stream.

A decode step of SmolLM2-135M on a GPU is ~1,200 array operations when written as `llama.forward`;
each one launched from Python costs more host time than the GPU needs to run it, so the GPU waits.
`decode_step.DecodeStep` writes the step as 5 kernels a layer instead, and a CUDA graph replays them
without the host (decode_graph.py). This module is what every launcher of that step shares, tested
without a GPU:

    KERNELS                 name -> (the .cu file in decode_kernels/, threads a block)
    DecodeSizes             the sizes a step is built for (from a LlamaConfig and the cache length)
    step_kernels(sizes)     the kernels of one step, in order, with their grids: 5 a layer + 4 (+ 1 to filter)
    sampling_arguments      temperature, top-k, top-p -> the sampling kernels' numbers, and whether to filter
    TOK, POS, STEP, DONE    the device state: four int32 the kernels read and write, so that a graph
                            recorded once serves every step (a Python int would be frozen into it)
    lowbias32, counter_uniforms   the random stream of on-device sampling: u(seed, step, i), a pure
                            function of three counters, the same bits in NumPy and in CUDA

One step, as the kernels run it (x the residual stream, [d]):

    embed                   x = W_E[tok]
    per layer:
      norm_matvec_rope      qkv = W_qkv · (γ₁ ⊙ x / rms(x)), then q = RoPE(q)/√d_h;  K[pos], V[pos] = RoPE(k), v
                            (the cache write; a warp computes a RoPE pair of rows and turns it at once)
      attend_split          per KV head and per range of `split` keys: (m, ℓ, Σ e^{s−m} v)   (flash-decoding);
                            the last block of a KV head to finish merges its splits:
                            o = Σ_s e^{m_s−M} o_s / Σ_s e^{m_s−M} ℓ_s  (the online-softmax merge)
      matvec_residual       x += W_o · o
      norm_matvec           gu = W_gate‖up · (γ₂ ⊙ x / rms(x))        [2·d_ff]
      swiglu_matvec_residual  x += W_down · (silu(g) ⊙ u)
    norm_matvec             logits = W_E · (γ ⊙ x / rms(x))            (the tied head)
    sample_filter           top-k and/or top-p only: the kept set, as a threshold on the logits (one block)
    sample_blocks           per block of the vocabulary: its best (value, index)   (argmax, or Gumbel-max over
                            the kept set: a draw from softmax over it, the host's filter_logits' distribution)
    sample_finish           tok = the best of the blocks; out[step] = tok; pos, step += 1; done?

Every matrix is stored as [d_out, d_in], one contiguous row per output (`device_matrices`): a warp
reads a row in consecutive addresses, and [W_q | W_k | W_v] is one matrix, one kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import decode_plan_checks as checks
from .llama_fast import half_to_interleaved_order
from ..require import checked_by

__all__ = ["KERNEL_DIR", "KERNELS", "TOK", "POS", "STEP", "DONE", "ROWS_PER_BLOCK", "DEFAULT_SPLIT",
           "VOCAB_BLOCK", "DecodeSizes", "LaunchSpec", "launch_specs", "step_kernels", "kernels_per_step", "sampling_arguments",
           "lowbias32", "counter_uniforms", "device_matrices"]

KERNEL_DIR = Path(__file__).with_name("decode_kernels")

# name -> (file, threads a block); each file holds one extern "C" kernel named decode_<name>
KERNELS = {
    "embed": ("embed.cu", 256),
    "norm_matvec": ("norm_matvec.cu", 256),
    "norm_matvec_rope": ("norm_matvec_rope.cu", 128),  # 4 warps of a row pair: 8 rows a block, as norm_matvec
    "attend_split": ("attend_split.cu", 256),  # 8 warps: 32 keys a block are one run of 4 a warp
    "matvec_residual": ("matvec_residual.cu", 256),
    "swiglu_matvec_residual": ("swiglu_matvec_residual.cu", 256),
    "sample_filter": ("sample.cu", 512),  # FILTER_THREADS in sample.cu: its shared tree is sized for 512
    "sample_blocks": ("sample.cu", 256),
    "sample_finish": ("sample.cu", 256),
}

TOK, POS, STEP, DONE = 0, 1, 2, 3  # state[4] int32: the input id, the cache length, the step, finished (0/1)
ROWS_PER_BLOCK = 8  # the matrix-vector kernels: a warp per output row, 8 warps a block
DEFAULT_SPLIT = 32  # keys per attention block (flash-decoding): 3 KV heads alone would fill 3 SMs.
# Measured on an H200 at position 512: 256 keys a block took 36.9 µs a layer (6 blocks, each warp 64 keys
# one after another); see benchmarks/results/decode_gpu.md for 32.
VOCAB_BLOCK = 1024  # logits per block of sample_blocks
SEED_MIX = np.uint32(0x9E3779B9)  # lowbias32(0) = 0: seed 0 must not start the stream at 0


@dataclass(frozen=True)
class DecodeSizes:
    """What one step is built for: the model's sizes (the legend of LlamaConfig), the cache's
    length max_len, keys per attention split, and the most tokens one run generates."""
    L: int
    d: int
    h: int
    h_kv: int
    d_h: int
    d_ff: int
    v: int
    max_len: int
    max_new: int
    split: int = DEFAULT_SPLIT
    eps: float = 1e-5

    def __post_init__(self):
        checks.decode_sizes(self)

    @classmethod
    def of(cls, cfg, max_len: int, max_new: int, split: int = DEFAULT_SPLIT) -> "DecodeSizes":
        return cls(cfg.L, cfg.d, cfg.h, cfg.h_kv, cfg.d_h, cfg.d_ff, cfg.v, int(max_len), int(max_new), int(split),
                   float(cfg.eps))

    @property
    def qkv(self) -> int:  # rows of [W_q | W_k | W_v]ᵀ
        return (self.h + 2 * self.h_kv) * self.d_h

    @property
    def n_splits(self) -> int:  # attention blocks per KV head: a fixed grid, so one graph serves every length
        return math.ceil(self.max_len / self.split)

    @property
    def vocab_blocks(self) -> int:
        return math.ceil(self.v / VOCAB_BLOCK)


@dataclass(frozen=True)
class LaunchSpec:
    """One kernel launch of a step: which kernel, its grid, its block and its dynamic shared memory."""
    name: str
    grid: tuple
    block: tuple
    shared_bytes: int = 0


def _blocks(rows: int) -> tuple:
    return (math.ceil(rows / ROWS_PER_BLOCK),)


def launch_specs(s: DecodeSizes) -> dict[str, LaunchSpec]:
    """Each launch of a step by its role (a kernel serves several: norm_matvec is the qkv, gate_up and head
    products), with its grid, block and dynamic shared memory: what DecodeStep launches."""
    def spec(name, grid, shared_bytes=0):
        return LaunchSpec(name, grid, (KERNELS[name][1],), shared_bytes)
    return {"embed": spec("embed", (1,)),
            "qkv": spec("norm_matvec_rope", _blocks(s.qkv)),
            "attend_split": spec("attend_split", (s.h_kv, s.n_splits)),
            "W_o": spec("matvec_residual", _blocks(s.d)),
            "gate_up": spec("norm_matvec", _blocks(2 * s.d_ff)),
            "W_down": spec("swiglu_matvec_residual", _blocks(s.d), 4 * s.d_ff),
            "head": spec("norm_matvec", _blocks(s.v)),
            "sample_filter": spec("sample_filter", (1,)),
            "sample_blocks": spec("sample_blocks", (s.vocab_blocks,)),
            "sample_finish": spec("sample_finish", (1,))}


LAYER = ("qkv", "attend_split", "W_o", "gate_up", "W_down")  # a layer's launches


def layer_kernels(s: DecodeSizes) -> list[LaunchSpec]:
    """The 5 launches of one decoder layer."""
    specs = launch_specs(s)
    return [specs[role] for role in LAYER]


@checked_by(checks.step_kernels)
def step_kernels(s: DecodeSizes, filtered: bool = False) -> list[LaunchSpec]:
    """Every launch of one step, in order: the embedding, L layers, the head, the sampling kernels (the
    filter of top-k and top-p first when `filtered`).

    >>> from transformer.models.llama import LlamaConfig  # SmolLM2-135M's sizes: L = 30
    >>> len(step_kernels(DecodeSizes.of(LlamaConfig(), max_len=1024, max_new=64)))
    154
    """
    specs = launch_specs(s)
    head = ("head", "sample_filter") if filtered else ("head",)
    return ([specs["embed"]] + layer_kernels(s) * s.L
            + [specs[role] for role in (*head, "sample_blocks", "sample_finish")])


@checked_by(checks.kernels_per_step)
def kernels_per_step(L: int, filtered: bool = False) -> int:
    """5 a layer, plus the embedding, the head and the two sampling kernels (three with top-k or top-p)."""
    return len(LAYER) * L + 4 + int(filtered)


def sampling_arguments(temperature: float, top_k, top_p, v: int) -> tuple:  # -> (inv_T, top_k, top_p, filtered)
    """The sampling kernels' numbers: 1/T (0: greedy), top_k (0: off), top_p (1: off) as np.int32 and
    np.float32, and whether the step filters at all: only at a temperature (greedy is the argmax whatever
    the filter keeps, as in core.sampling.filter_logits) and with top_k < v or top_p < 1.

    >>> sampling_arguments(0.5, 40, None, 300)
    (np.float32(2.0), np.int32(40), np.float32(1.0), True)
    >>> sampling_arguments(0.0, 40, 0.9, 300)[-1], sampling_arguments(0.7, 300, None, 300)[-1]
    (False, False)
    """
    inv_T = np.float32(0.0 if temperature == 0 else 1.0 / temperature)
    k, p = np.int32(0 if top_k is None else top_k), np.float32(1.0 if top_p is None else max(top_p, TOP_P_FLOOR))
    return inv_T, k, p, bool(temperature != 0 and (0 < k < v or p < 1))


# The smallest top_p the kernels get: a float32 top_p below 1.4e-45 is 0, which would keep no token. Any top_p
# this small keeps the most likely token alone (the next has mass ≥ e^0 = 1 before it, against top_p·Z ≤ 1e-30·v),
# as filter_logits does for every top_p down to 0; it is a normal float32, so no flush to zero touches it.
TOP_P_FLOOR = 1e-30


def lowbias32(x):  # uint32 [...] -> uint32 [...]
    """A 32-bit integer hash (Chris Wellons' "lowbias32"): every output bit depends on every input bit.
    Wraps around as uint32 arithmetic does in CUDA.

    >>> int(lowbias32(np.uint32(1)))
    1753845952
    """
    x = np.asarray(x, dtype=np.uint32)
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> np.uint32(15))
        x = x * np.uint32(0x846CA68B)
        x = x ^ (x >> np.uint32(16))
    return x


@checked_by(checks.counter_uniforms)
def counter_uniforms(seed: int, step: int, n: int):  # -> [n] float32 in (0, 1)
    """u(seed, step, i) for i < n: the uniforms on-device sampling draws at `step`, as the kernel computes them:

        h = lowbias32(lowbias32(lowbias32(seed ^ 0x9E3779B9) ^ step) ^ i),   u = ((h >> 9) + 0.5) · 2⁻²³

    The top 23 bits and a half: exact in float32, never 0 and never 1 (so −log(−log u) is finite).
    A pure function of three counters: no generator state to carry from step to step or into a graph.
    """
    i = np.arange(n, dtype=np.uint32)
    h = lowbias32(lowbias32(lowbias32(np.uint32(seed & 0xFFFFFFFF) ^ SEED_MIX) ^ np.uint32(step)) ^ i)  # [n]
    return (((h >> np.uint32(9)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0 ** -23))  # [n]


def device_matrices(w, cfg, xp=np) -> list:  # LlamaWeights -> per layer 4 × [d_out, d_in], then the head [v, d]
    """The matrices the kernels read, each [d_out, d_in] C-contiguous (a row per output): per layer
    [W_q | W_k | W_v]ᵀ, W_oᵀ, [W_gate | W_up]ᵀ, W_downᵀ; then the head, W_E itself when tied (it is
    already [v, d]) or W_outᵀ. New arrays (the readable weights are [d_in, d_out]): on a GPU the step
    holds the weights a second time, transposed (538 MB for SmolLM2 in float32).

    The kernels turn adjacent pairs (interleaved RoPE). For a model in the rotate-half layout
    (cfg.rope_layout = "half", a trained decoder) W_q's and W_k's columns are reordered per head to
    adjacent pairs, as FastForward does (llama_fast.half_to_interleaved_columns): q·k is unchanged, and
    the keys the step writes to the cache are in that order (generation.device_rows reorders the cache)."""
    def rows(*Ws):  # k × [d_in, d_j] -> [Σ d_j, d_in]
        return xp.ascontiguousarray(xp.concatenate([xp.asarray(W).T for W in Ws], axis=0))

    def pairs(W, heads):  # [d, heads·d_h] -> the same, each head's columns as adjacent RoPE pairs
        if cfg.rope_layout != "half":
            return W
        return xp.take(xp.asarray(W), xp.asarray(half_to_interleaved_order(heads, cfg.d_h)), axis=1)
    mats = []
    for lw in w.layers:
        mats.append([rows(pairs(lw.W_q, cfg.h), pairs(lw.W_k, cfg.h_kv), lw.W_v), rows(lw.W_o),
                     rows(lw.W_gate, lw.W_up), rows(lw.W_down)])
    head = w.W_E if w.W_out is None else rows(w.W_out)
    return mats, xp.ascontiguousarray(head)
