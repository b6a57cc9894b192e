"""The decode step's CUDA kernels (transformer/models/decode_kernels/) on the CPU: each equals its NumPy
twin (decode_twins.py) in every buffer it writes, and each twin equals a float64 formula written here.

No GPU is needed: `cuda_emulator` runs the kernels' own CUDA C with g++, NVRTC compiles them as CuPy
does, and ThreadSanitizer and AddressSanitizer watch them run (in a subprocess each). Every output
buffer starts as NaN (ids as −7), so a write the kernel should not make, or one it misses, shows;
the cache slots past the new token hold NaN too, so a kernel that reads a key it should not gets NaN.
"""
import json
import math
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from transformer.core.sampling import filter_logits, next_token_probs
from transformer.models import decode_twins as twins
from transformer.models.decode_plan import DONE, KERNEL_DIR, KERNELS, POS, ROWS_PER_BLOCK, STEP, TOK, counter_uniforms
import cuda_emulator
import nvrtc

TESTS = Path(__file__).parent
needs_gxx = pytest.mark.skipif(cuda_emulator.CXX is None, reason="needs g++")

# Each kernel's parameters, as the step's launcher (decode_step.DecodeStep.enqueue) passes them
SIGNATURES = {
    "embed": "const float* W_E, const int* state, float* x, int d",
    "norm_matvec": "const float* x, const float* gamma, const float* W, float* y, const int* state, int n_rows, "
                   "int d_in, float eps",
    "norm_matvec_rope": "const float* x, const float* gamma, const float* W, const float* cos, const float* sin, "
                        "float* q, float* K, float* V, const int* state, int h, int h_kv, int d_h, int max_len, "
                        "int d_in, float eps, float q_scale",
    "attend_split": "const float* q, const float* K, const float* V, float* part_o, float* part_ml, float* o, "
                    "int* arrivals, const int* state, int h, int h_kv, int d_h, int max_len, int split",
    "matvec_residual": "const float* a, const float* W, float* x, const int* state, int n_rows, int d_in",
    "swiglu_matvec_residual": "const float* gu, const float* W, float* x, const int* state, int n_rows, int d_ff",
    "sample_filter": "const float* logits, float* bounds, const int* state, int v, float inv_temperature, int top_k, "
                     "float top_p",
    "sample_blocks": "const float* logits, const float* bounds, float* best_v, int* best_i, const int* state, int v, "
                     "float inv_temperature, unsigned int seed",
    "sample_finish": "const float* best_v, const int* best_i, int* state, int* out, int n_blocks, int max_new, int eos",
}
PARAMS = {name: [(p.rsplit(" ", 1)[1], p.rsplit(" ", 1)[0]) for p in sig.split(", ")]  # [(name, C type)]
          for name, sig in SIGNATURES.items()}


# ---------------------------------------------------------------- launching a kernel and its twin

@dataclass
class Case:
    name: str      # the kernel
    grid: tuple
    values: dict   # parameter name -> array or number
    shared_bytes: int = 0
    reference: dict = field(default_factory=dict)  # what a case builder knows of the answer

    def args(self, to_scalar):
        return tuple(self.values[n] if ctype.endswith("*") else to_scalar(self.values[n], ctype)
                     for n, ctype in PARAMS[self.name])

    def copy(self):
        return Case(self.name, self.grid, {n: v.copy() if isinstance(v, np.ndarray) else v
                                           for n, v in self.values.items()}, self.shared_bytes, self.reference)


def launcher_scalar(value, ctype):  # a number as decode_step passes it (CuPy takes np.uint32 as unsigned int)
    return {"int": np.int32, "float": np.float32, "unsigned int": np.uint32}[ctype](value)


def emulator_scalar(value, ctype):  # the emulator takes int32 and float32: an unsigned passes its 32 bits as int
    if ctype == "unsigned int":
        return np.uint32(value & 0xFFFFFFFF).view(np.int32)
    return launcher_scalar(value, ctype)


def run_kernel(case, folder=KERNEL_DIR):
    """Launch kernel `case.name` (from `folder`) on the emulator, in place on case.values."""
    for n, ctype in PARAMS[case.name]:
        if ctype.endswith("*") and isinstance(case.values[n], np.ndarray):  # else np.uint64(0), a null pointer
            assert case.values[n].dtype == (np.int32 if "int" in ctype else np.float32), n
    file, threads = KERNELS[case.name]
    kernel = cuda_emulator.load(folder / file, f"decode_{case.name}")
    kernel(case.grid, (threads,), case.args(emulator_scalar), shared_bytes=case.shared_bytes)


def run_twin(case, to_scalar=launcher_scalar):
    twins.TWINS[case.name](*case.args(to_scalar), grid=case.grid)


def assert_close(actual, expected, rtol, name):
    """Ids and the state exactly; floats within rtol of the largest finite value (NaN and ±∞ where expected)."""
    if expected.dtype.kind == "i":
        np.testing.assert_array_equal(actual, expected, err_msg=name)
        return
    finite = np.abs(expected[np.isfinite(expected)])
    scale = finite.max() if finite.size else 0.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=name)


def outputs(case):
    return {n: case.values[n] for n, ctype in PARAMS[case.name]
            if ctype.endswith("*") and not ctype.startswith("const")}


def check_against_twin(case, folder=KERNEL_DIR):
    """The kernel and its twin, each on its own copy of the case: every argument the same afterwards."""
    on_kernel, on_twin = case.copy(), case.copy()
    run_kernel(on_kernel, folder)
    run_twin(on_twin)
    for n, a in on_twin.values.items():
        if isinstance(a, np.ndarray):
            assert_close(on_kernel.values[n], a, 1e-5, f"{case.name}: {n}")
    return on_kernel, on_twin


# ---------------------------------------------------------------- cases

def state(tok=0, pos=0, step=0, done=0):
    return np.array([tok, pos, step, done], np.int32)  # TOK, POS, STEP, DONE


def normal(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def nans(*shape):  # an output buffer: what the kernel does not write stays NaN
    return np.full(shape, np.nan, np.float32)


def row_blocks(n_rows):
    return (math.ceil(n_rows / ROWS_PER_BLOCK),)


def embed_case(d, tok=5, v=7):
    rng = np.random.default_rng(d)
    return Case("embed", (1,), dict(W_E=normal(rng, v, d), state=state(tok=tok), x=nans(d), d=d))


def norm_matvec_case(n_rows, d_in, x_scale=3.0):
    rng = np.random.default_rng(n_rows * d_in)
    return Case("norm_matvec", row_blocks(n_rows), dict(
        x=normal(rng, d_in, scale=x_scale), gamma=1 + normal(rng, d_in, scale=0.2), W=normal(rng, n_rows, d_in),
        y=nans(n_rows), state=state(), n_rows=n_rows, d_in=d_in, eps=1e-5))


def norm_matvec_rope_case(h, h_kv, d_h, max_len, pos, d_in):
    rng = np.random.default_rng(h * d_h + pos + d_in)
    theta = rng.uniform(0, 2 * np.pi, (max_len, d_h // 2))  # [max_len, d_h/2] any angles
    K, V = normal(rng, h_kv, max_len, d_h), normal(rng, h_kv, max_len, d_h)  # the cache: only slot pos changes
    K[:, pos], V[:, pos] = np.nan, np.nan
    return Case("norm_matvec_rope", (math.ceil((h + 2 * h_kv) * d_h / ROWS_PER_BLOCK),), dict(
        x=normal(rng, d_in, scale=3.0), gamma=1 + normal(rng, d_in, scale=0.2),
        W=normal(rng, (h + 2 * h_kv) * d_h, d_in), cos=np.cos(theta).astype(np.float32),
        sin=np.sin(theta).astype(np.float32), q=nans(h * d_h), K=K, V=V, state=state(pos=pos), h=h, h_kv=h_kv,
        d_h=d_h, max_len=max_len, d_in=d_in, eps=1e-5, q_scale=d_h ** -0.5))


def attend_split_case(h, h_kv, d_h, max_len, split, pos):
    rng = np.random.default_rng(h * max_len + pos)
    K, V = normal(rng, h_kv, max_len, d_h), normal(rng, h_kv, max_len, d_h)  # [h_kv, max_len, d_h] each
    K[:, pos + 1:], V[:, pos + 1:] = np.nan, np.nan  # slots not yet written: a kernel that reads one gets NaN
    n_splits = math.ceil(max_len / split)
    return Case("attend_split", (h_kv, n_splits), dict(
        q=normal(rng, h * d_h, scale=2.0 / math.sqrt(d_h)), K=K, V=V, part_o=nans(h, n_splits, d_h),
        part_ml=nans(h, n_splits, 2), o=nans(h * d_h), arrivals=np.zeros(h_kv, np.int32), state=state(pos=pos),
        h=h, h_kv=h_kv, d_h=d_h, max_len=max_len, split=split))


def matvec_residual_case(n_rows, d_in):
    rng = np.random.default_rng(n_rows + d_in)
    return Case("matvec_residual", row_blocks(n_rows), dict(
        a=normal(rng, d_in), W=normal(rng, n_rows, d_in), x=normal(rng, n_rows), state=state(), n_rows=n_rows,
        d_in=d_in))


def swiglu_case(n_rows, d_ff):
    rng = np.random.default_rng(n_rows + d_ff)
    return Case("swiglu_matvec_residual", row_blocks(n_rows), dict(
        gu=normal(rng, 2 * d_ff, scale=2.0), W=normal(rng, n_rows, d_ff), x=normal(rng, n_rows), state=state(),
        n_rows=n_rows, d_ff=d_ff), shared_bytes=4 * d_ff)


NULL = np.uint64(0)  # a null pointer, as CuPy passes one: sample_blocks keeps every token


def sample_blocks_case(v, n_blocks, temperature=0.0, seed=0, step=0, ties=False, bounds=NULL):
    rng = np.random.default_rng(v + n_blocks + step)
    logits = rng.integers(0, 3, v).astype(np.float32) if ties else normal(rng, v, scale=2.0)  # [v]
    if callable(bounds):  # from the logits: (threshold, last)
        bounds = np.array(bounds(logits), np.float32)
    return Case("sample_blocks", (n_blocks,), dict(
        logits=logits, bounds=bounds, best_v=nans(n_blocks), best_i=np.full(n_blocks, -7, np.int32),
        state=state(step=step), v=v, inv_temperature=0.0 if temperature == 0 else 1.0 / temperature, seed=seed),
        reference={"T": temperature})


def tie_free_logits(rng, v, scale=0.4):  # [v] float32, no two equal
    """Logistic quantiles of one random point in each of v equal cells of (0, 1), in random order: the
    points are distinct and the map is increasing, steep enough that float32 keeps them apart."""
    u = (rng.permutation(v) + rng.uniform(0.1, 0.9, v)) / v  # [v] one point in each cell (i/v, (i+1)/v)
    return (scale * np.log(u / (1 - u))).astype(np.float32)  # [v]


def sample_filter_case(v, top_k=0, top_p=1.0, temperature=0.8, ties=False, logits=None):
    """Tie-free logits, or small integers (ties everywhere, at the top-k and at the top-p boundary)."""
    rng = np.random.default_rng(v + top_k + int(1000 * top_p))
    if logits is None:
        logits = rng.integers(0, 6, v).astype(np.float32) if ties else tie_free_logits(rng, v)  # [v]
    return Case("sample_filter", (1,), dict(
        logits=logits, bounds=nans(2), state=state(step=3), v=v, inv_temperature=1.0 / temperature, top_k=top_k,
        top_p=top_p), reference={"T": temperature})


def sample_finish_case(n_blocks, step, max_new, eos_wins=False):
    rng = np.random.default_rng(n_blocks + step)
    best_v = rng.integers(0, 4, n_blocks).astype(np.float32)  # [n_blocks] small integers: ties
    best_i = rng.permutation(10 * n_blocks)[:n_blocks].astype(np.int32)  # [n_blocks] distinct ids, in no order
    tok = min(i for value, i in zip(best_v, best_i) if value == best_v.max())  # the lowest id of the largest value
    return Case("sample_finish", (1,), dict(
        best_v=best_v, best_i=best_i, state=state(tok=3, pos=11, step=step), out=np.full(max_new, -7, np.int32),
        n_blocks=n_blocks, max_new=max_new, eos=int(tok) if eos_wins else -1), reference={"tok": int(tok)})


CASES = {
    "embed-d70": lambda: embed_case(70),
    "embed-d576": lambda: embed_case(576, tok=0),
    "norm_matvec-13x40": lambda: norm_matvec_case(13, 40),
    "norm_matvec-5x70": lambda: norm_matvec_case(5, 70),
    "norm_matvec-21x576": lambda: norm_matvec_case(21, 576),
    "norm_matvec-9x1536": lambda: norm_matvec_case(9, 1536),
    "norm_matvec-x_near_eps": lambda: norm_matvec_case(6, 40, x_scale=3e-3),  # Σx²/d_in ≈ ε: ε matters
    "norm_matvec_rope-mqa-pos0": lambda: norm_matvec_rope_case(3, 1, 16, 8, 0, 40),  # 5 heads: a spare warp
    "norm_matvec_rope-gqa-last_pos": lambda: norm_matvec_rope_case(9, 3, 64, 6, 5, 70),
    "norm_matvec_rope-mha": lambda: norm_matvec_rope_case(4, 4, 16, 5, 2, 576),
    "norm_matvec_rope-d_h6": lambda: norm_matvec_rope_case(2, 1, 6, 4, 3, 33),  # 3 pairs a head: heads cross warps
    "attend_split-g3-d64-boundary": lambda: attend_split_case(3, 1, 64, 40, 16, 37),
    "attend_split-g1-d16-empty_splits": lambda: attend_split_case(2, 2, 16, 50, 16, 20),
    "attend_split-g3-d16-pos0": lambda: attend_split_case(6, 2, 16, 20, 8, 0),
    "attend_split-g1-d64-last_pos": lambda: attend_split_case(3, 3, 64, 33, 16, 32),
    "attend_split-g9-two_passes": lambda: attend_split_case(9, 1, 16, 12, 8, 10),
    "attend_split-g3-d128": lambda: attend_split_case(6, 2, 128, 20, 8, 19),
    "attend_split-g3-d64-runs": lambda: attend_split_case(3, 1, 64, 200, 80, 193),  # 2½ runs a warp, a short last run
    "attend_split-g9-chunks": lambda: attend_split_case(9, 1, 16, 300, 2, 290),  # 146 splits: 2 chunks of the merge
    "matvec_residual-13x70": lambda: matvec_residual_case(13, 70),
    "matvec_residual-20x576": lambda: matvec_residual_case(20, 576),
    "swiglu_matvec_residual-11x1536": lambda: swiglu_case(11, 1536),
    "swiglu_matvec_residual-9x37": lambda: swiglu_case(9, 37),
    # the first: what the sanitizers run, both filters and a cut through the ties at the top-p boundary
    "sample_filter-ties-k40-p.3-cut": lambda: sample_filter_case(301, top_k=40, top_p=0.3, ties=True),
    "sample_filter-300-k5": lambda: sample_filter_case(300, top_k=5),
    "sample_filter-300-k1": lambda: sample_filter_case(300, top_k=1),
    "sample_filter-300-k_v-1": lambda: sample_filter_case(300, top_k=299),
    "sample_filter-300-p.05": lambda: sample_filter_case(300, top_p=0.05),
    "sample_filter-300-p_floor": lambda: sample_filter_case(300, top_p=1e-30),  # the smallest top_p a kernel gets
    "sample_filter-300-p.5": lambda: sample_filter_case(300, top_p=0.5, temperature=1.7),
    "sample_filter-300-p.95": lambda: sample_filter_case(300, top_p=0.95),
    "sample_filter-300-k40-p.5": lambda: sample_filter_case(300, top_k=40, top_p=0.5),
    "sample_filter-300-k5-p.95": lambda: sample_filter_case(300, top_k=5, top_p=0.95),
    "sample_filter-4999-k5": lambda: sample_filter_case(4999, top_k=5),
    "sample_filter-4999-k_v-1": lambda: sample_filter_case(4999, top_k=4998),
    "sample_filter-4999-p.05": lambda: sample_filter_case(4999, top_p=0.05, temperature=1.2),
    "sample_filter-4999-p.95": lambda: sample_filter_case(4999, top_p=0.95),
    "sample_filter-4999-k1000-p.5": lambda: sample_filter_case(4999, top_k=1000, top_p=0.5, temperature=0.5),
    "sample_filter-49152-k50-p.9": lambda: sample_filter_case(49152, top_k=50, top_p=0.9),  # SmolLM2's v
    "sample_filter-49152-p.95": lambda: sample_filter_case(49152, top_p=0.95),
    "sample_filter-49152-peaked-p.9": lambda: sample_filter_case(  # an LM's few likely tokens: 59 candidates
        49152, top_p=0.9, logits=tie_free_logits(np.random.default_rng(5), 49152, scale=2.0)),
    "sample_filter-1000-k512": lambda: sample_filter_case(1000, top_k=512),  # the largest k with candidates
    "sample_filter-49152-k513-p.9": lambda: sample_filter_case(49152, top_k=513, top_p=0.9),  # top-k over v
    "sample_filter-49152-ties-k50-p.5": lambda: sample_filter_case(49152, top_k=50, top_p=0.5, ties=True),
    "sample_filter-ties-k7": lambda: sample_filter_case(301, top_k=7, ties=True),
    "sample_filter-ties-p.5-cut": lambda: sample_filter_case(301, top_p=0.5, temperature=0.9, ties=True),
    "sample_filter-off": lambda: sample_filter_case(300),
    "sample_filter-signed_zeros": lambda: sample_filter_case(  # −0 = +0: the four zeros tie at the 4th largest
        8, top_k=4, logits=np.array([1, -0.0, 2, 0, -1, 0, 3, -0.0], np.float32)),
    "sample_filter-signed_zeros-p_cut": lambda: sample_filter_case(  # the cut after the first zero, id 1 (−0)
        8, top_p=0.89, temperature=1.0, logits=np.array([1, -0.0, 2, 0, -1, 0, 3, -0.0], np.float32)),
    "sample_blocks-greedy": lambda: sample_blocks_case(1000, 3),
    "sample_blocks-greedy-ties": lambda: sample_blocks_case(700, 2, ties=True),
    "sample_blocks-empty_block": lambda: sample_blocks_case(5, 4, temperature=0.7, seed=3, step=1),
    "sample_blocks-gumbel": lambda: sample_blocks_case(2500, 3, temperature=0.8, seed=7, step=4),
    "sample_blocks-gumbel-seed_past_2^31": lambda: sample_blocks_case(600, 2, temperature=1.3, seed=0xDEADBEEF, step=9),
    "sample_blocks-kept": lambda: sample_blocks_case(2500, 3, temperature=0.8, seed=7, step=4,
                                                     bounds=lambda x: (np.sort(x)[-40], 2500)),
    "sample_blocks-kept-tie_cut": lambda: sample_blocks_case(700, 2, temperature=0.8, seed=1, ties=True,
                                                             bounds=lambda x: (2.0, np.flatnonzero(x == 2)[30])),
    "sample_blocks-greedy-kept": lambda: sample_blocks_case(1000, 3, bounds=lambda x: (np.sort(x)[-3], 1000)),
    "sample_finish-3": lambda: sample_finish_case(3, step=2, max_new=8),
    "sample_finish-300-eos": lambda: sample_finish_case(300, step=0, max_new=8, eos_wins=True),
    "sample_finish-max_new": lambda: sample_finish_case(40, step=4, max_new=5),
    "sample_finish-one_before_max_new": lambda: sample_finish_case(40, step=3, max_new=5),
}
FIRST_CASE = {}  # one small case a kernel: for DONE and the sanitizers
for case_id in CASES:
    FIRST_CASE.setdefault(CASES[case_id]().name, case_id)


# ---------------------------------------------------------------- float64 references

def f64(case):
    return {n: v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
            for n, v in case.values.items()}


def reference_embed(c):
    return {"x": c["W_E"][c["state"][TOK]]}


def reference_norm_matvec(c):
    x = c["x"]
    return {"y": c["W"] @ (c["gamma"] * x / np.sqrt(np.mean(x ** 2) + c["eps"]))}


def reference_norm_matvec_rope(c):
    """qkv as norm_matvec's formula; RoPE as a complex product: pair (a, b) is a + ib, turned by
    e^{iθ} = cos θ + i sin θ."""
    h, h_kv, d_h, pos = c["h"], c["h_kv"], c["d_h"], c["state"][POS]
    heads = reference_norm_matvec(c)["y"].reshape(h + 2 * h_kv, d_h)
    z = heads[:h + h_kv, 0::2] + 1j * heads[:h + h_kv, 1::2]  # [h + h_kv, d_h/2]
    turned = z * (c["cos"][pos] + 1j * c["sin"][pos])
    rotated = np.stack([turned.real, turned.imag], axis=-1).reshape(h + h_kv, d_h)  # interleaved again
    K, V = c["K"].copy(), c["V"].copy()
    K[:, pos], V[:, pos] = rotated[h:], heads[h + h_kv:]
    return {"q": rotated[:h].reshape(-1) * c["q_scale"], "K": K, "V": V}


def reference_attend_split(c):
    h, h_kv, d_h, split, pos = c["h"], c["h_kv"], c["d_h"], c["split"], c["state"][POS]
    g, n_splits = h // h_kv, c["part_o"].shape[1]
    part_o, part_ml = np.zeros((h, n_splits, d_h)), np.zeros((h, n_splits, 2))
    for head in range(h):
        for s in range(n_splits):
            keys = range(s * split, min(s * split + split, pos + 1))
            if not keys:  # past pos: not written, the NaN stays
                part_o[head, s], part_ml[head, s] = np.nan, np.nan
                continue
            scores = np.array([c["q"][head * d_h:(head + 1) * d_h] @ c["K"][head // g, k] for k in keys])
            m = scores.max()
            part_ml[head, s] = m, np.exp(scores - m).sum()
            part_o[head, s] = sum(np.exp(sc - m) * c["V"][head // g, k] for sc, k in zip(scores, keys))
    return {"part_o": part_o, "part_ml": part_ml, "o": softmax_attention(c).reshape(-1), "arrivals": c["arrivals"]}


def softmax_attention(c):  # -> [h, d_h]: softmax(q·Kᵀ)·V over keys 0 … pos, the GQA heads sharing K and V
    h, h_kv, d_h, pos = c["h"], c["h_kv"], c["d_h"], c["state"][POS]
    q = c["q"].reshape(h, d_h)
    K, V = np.repeat(c["K"][:, :pos + 1], h // h_kv, axis=0), np.repeat(c["V"][:, :pos + 1], h // h_kv, axis=0)
    scores = np.einsum("hd,hkd->hk", q, K)  # [h, pos + 1]
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return np.einsum("hk,hkd->hd", weights / weights.sum(axis=1, keepdims=True), V)  # [h, d_h]


def reference_matvec_residual(c):
    return {"x": c["x"] + c["W"] @ c["a"]}


def reference_swiglu_matvec_residual(c):
    g, u = np.split(c["gu"], 2)
    return {"x": c["x"] + c["W"] @ (g / (1 + np.exp(-g)) * u)}


def gumbel_scores(logits, T, seed, step):  # float64: logits / T + Gumbel noise of the counter stream
    u = counter_uniforms(seed, step, len(logits)).astype(np.float64)
    return logits / T - np.log(-np.log(u))


def reference_sample_filter(c):
    """The host's own filter (core.sampling.filter_logits) keeps a set; its bounds: the smallest kept logit,
    and the last kept id at it when some token at it is dropped (else v)."""
    x, v = c["logits"], c["v"]
    if not (0 < c["top_k"] < v or c["top_p"] < 1):
        return {"bounds": [-np.inf, v]}
    kept = np.isfinite(filter_logits(x, c["T"], c["top_k"] or None, c["top_p"]))  # [v] bool
    threshold = x[kept].min()
    at = x == threshold
    return {"bounds": [threshold, np.flatnonzero(kept & at).max() if (at & ~kept).any() else v]}


def reference_sample_blocks(c):
    v, n_blocks, T = c["v"], c["best_v"].shape[0], c["T"]
    score = c["logits"] if T == 0 else gumbel_scores(c["logits"], T, c["seed"], c["state"][STEP])
    if isinstance(c["bounds"], np.ndarray):  # −∞ outside the kept set
        (threshold, last), ids = c["bounds"], np.arange(v)
        score = np.where((c["logits"] > threshold) | ((c["logits"] == threshold) & (ids <= last)), score, -np.inf)
    chunk = -(-v // n_blocks)
    best_v, best_i = np.full(n_blocks, -np.inf), np.full(n_blocks, v, np.int32)
    for b in range(n_blocks):
        lo, hi = b * chunk, min(v, b * chunk + chunk)
        if lo < hi:
            best_i[b] = lo + np.argmax(score[lo:hi])
            best_v[b] = score[best_i[b]]
    return {"best_v": best_v, "best_i": best_i}


def reference_sample_finish(c):
    tok, (_, pos, step, _) = c["tok"], c["state"]
    out = c["out"].copy()
    out[step] = tok
    done = tok == c["eos"] or step + 1 >= c["max_new"]
    return {"out": out, "state": np.array([tok, pos + 1, step + 1, done], np.int32)}


REFERENCES = {name: globals()[f"reference_{name}"] for name in KERNELS}


# ---------------------------------------------------------------- the tests

def test_each_kernel_has_the_launchers_signature():
    """The argument order and types the step launches with: the kernel's, and its twin's names in the same order."""
    for name, (file, _) in KERNELS.items():
        text = (KERNEL_DIR / file).read_text()
        found = re.search(rf'extern "C" __global__ void decode_{name}\(([^)]*)\)', text)
        assert found, f"{file} has no extern \"C\" decode_{name}"
        assert re.sub(r"\s+", " ", found.group(1)).strip() == SIGNATURES[name]
        twin = twins.TWINS[name].__code__
        assert twin.co_varnames[:twin.co_argcount] == tuple(n for n, _ in PARAMS[name])
        assert twin.co_varnames[twin.co_argcount:twin.co_argcount + twin.co_kwonlyargcount] == ("grid",)
        assert "if (state[DONE]) return;" in text.split(f"decode_{name}(")[1].split("{", 1)[1][:40]


@needs_gxx
@pytest.mark.parametrize("case_id", CASES)
def test_kernel_equals_its_twin(case_id):
    """(a) Every buffer the kernel writes, on the emulator, equals its twin's: outputs and partials, ids, the state."""
    check_against_twin(CASES[case_id]())


@pytest.mark.parametrize("case_id", CASES)
def test_twin_equals_the_float64_formula(case_id):
    """(b) The twin (fed Python numbers) against the formula in float64; what it should not write stays NaN."""
    case = CASES[case_id]()
    expected = REFERENCES[case.name]({**f64(case), **case.reference})
    run_twin(case, to_scalar=lambda value, ctype: value)
    for n, want in expected.items():
        assert_close(case.values[n], np.asarray(want).reshape(case.values[n].shape), 2e-5, f"{case.name}: {n}")


@needs_gxx
@pytest.mark.parametrize("case_id", [i for i in CASES if i.startswith("attend_split")])
def test_the_kernels_merged_splits_are_softmax_attention_and_its_count_is_reset(case_id):
    """attend_split's last block of each KV head merges the splits: o = softmax(q·Kᵀ)·V over keys 0 … pos,
    the GQA heads sharing K and V; its count of finished blocks is 0 again, for the next step. Launched a
    second time on the same buffers (the next token of a graph), it merges again."""
    case = CASES[case_id]()
    expected = softmax_attention(f64(case))
    for _ in range(2):
        case.values["o"][:] = np.nan
        run_kernel(case)
        np.testing.assert_allclose(case.values["o"].reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
        assert case.values["arrivals"].tolist() == [0] * case.values["h_kv"]


@needs_gxx
@pytest.mark.parametrize("runner", ["kernel", "twin"])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_blocks_then_finish_draw_the_argmax_of_the_whole_vocabulary(runner, temperature):
    """sample_blocks over 5 blocks, then sample_finish: the id is argmax of the logits (greedy) or of
    logits / T + Gumbel(u(seed, step, i)), written to out[step], and the state moves on."""
    case = sample_blocks_case(3001, 5, temperature=temperature, seed=11, step=2)
    logits = case.values["logits"].astype(np.float64)
    expected = np.argmax(logits if temperature == 0 else gumbel_scores(logits, temperature, 11, 2))
    finish = Case("sample_finish", (1,), dict(best_v=case.values["best_v"], best_i=case.values["best_i"],
                                             state=case.values["state"], out=np.full(6, -7, np.int32), n_blocks=5,
                                             max_new=6, eos=-1))
    run = run_kernel if runner == "kernel" else run_twin
    run(case)
    run(finish)
    assert finish.values["out"].tolist() == [-7, -7, expected, -7, -7, -7]
    assert finish.values["state"].tolist() == [expected, 1, 3, 0]


FILTER_CASES = [i for i in CASES if i.startswith("sample_filter")]


def filter_candidates(case) -> int:
    """How many tokens sample_filter's top-p searches in shared memory: w_i ≥ (1 − top_p)·Z / 2v over the
    tokens top-k keeps (w_i = e^{(x_i − max)/T}), in float32 as the kernel computes it."""
    c = case.values
    x, v, k = c["logits"], c["v"], c["top_k"]
    keep = x >= np.sort(x)[-k] if 0 < k < v else np.ones(v, bool)
    w = np.where(keep, np.exp((x - x.max()) * np.float32(c["inv_temperature"])), 0).astype(np.float32)
    return int((w >= (1 - np.float32(c["top_p"])) * w.sum() / (2 * v)).sum())


def top_k_candidates(case) -> int | None:
    """How many tokens sample_filter's top-k searches in shared memory: those at or above the k-th largest
    of the 512 threads' own largest logits (thread t holds t, t + 512, …); None: k > 512, over the vocabulary."""
    c, threads = case.values, KERNELS["sample_filter"][1]
    x, v, k = c["logits"] + np.float32(0), c["v"], c["top_k"]
    if not (0 < k < v and k <= threads):
        return None
    own = np.array([x[t::threads].max() for t in range(min(v, threads))])  # [threads] each thread's largest
    return int((x >= np.sort(own)[-k]).sum())


@needs_gxx
def test_the_filters_candidate_searches_and_its_vocabulary_search_give_the_same_bounds():
    """top-k (k ≤ 512) searches its candidates in shared memory, and top-p after it, when there are at most
    2,048 of them; top-p alone searches its own candidates (an LM's peaked logits); else the whole
    vocabulary. The cases take every way; each, with the kernel built for 1 candidate (every search over
    the vocabulary), writes the same bounds, the twin's."""
    vocabulary_search = cuda_emulator.load(KERNEL_DIR / "sample.cu", "decode_sample_filter", ("-DCAPACITY=1",))
    counts = {}
    for case_id in ("sample_filter-300-p.5", "sample_filter-4999-k1000-p.5", "sample_filter-49152-k50-p.9",
                    "sample_filter-49152-peaked-p.9", "sample_filter-4999-p.95", "sample_filter-49152-p.95",
                    "sample_filter-4999-k5", "sample_filter-1000-k512", "sample_filter-49152-k513-p.9",
                    "sample_filter-49152-ties-k50-p.5", "sample_filter-ties-k40-p.3-cut"):
        on_kernel, on_twin = check_against_twin(CASES[case_id]())
        again = CASES[case_id]()
        vocabulary_search((1,), (KERNELS["sample_filter"][1],), again.args(emulator_scalar))
        assert np.array_equal(again.values["bounds"], on_kernel.values["bounds"]), case_id
        counts[case_id] = (top_k_candidates(on_twin), filter_candidates(on_twin))
    # top-p's own candidates: 3 in shared memory, 2 not
    assert [counts[i][1] for i in ("sample_filter-300-p.5", "sample_filter-4999-k1000-p.5",
                                   "sample_filter-49152-peaked-p.9")] == [299, 1000, 59], counts
    assert min(counts["sample_filter-4999-p.95"][1], counts["sample_filter-49152-p.95"][1]) > 2048, counts
    # top-k's: about k on tie-free logits; none past k = 512; the vocabulary on 8,000-odd tokens tied at the bound
    assert counts["sample_filter-4999-k5"][0] == 5 and 50 <= counts["sample_filter-49152-k50-p.9"][0] <= 60, counts
    assert 512 <= counts["sample_filter-1000-k512"][0] <= 2048 and counts["sample_filter-49152-k513-p.9"][0] is None
    assert counts["sample_filter-49152-ties-k50-p.5"][0] > 2048 and counts["sample_filter-ties-k40-p.3-cut"][0] > 40


def test_the_filter_is_launched_with_the_block_its_shared_tree_is_sized_for():
    assert f"#define FILTER_THREADS {KERNELS['sample_filter'][1]} " in (KERNEL_DIR / "sample.cu").read_text()


def draw(run, filtered, n_blocks=3, seed=21, step=5):  # -> the id sample_blocks then sample_finish choose
    c = filtered.values
    blocks = Case("sample_blocks", (n_blocks,), dict(
        logits=c["logits"], bounds=c["bounds"], best_v=nans(n_blocks), best_i=np.full(n_blocks, -7, np.int32),
        state=state(step=step), v=c["v"], inv_temperature=c["inv_temperature"], seed=seed))
    run(blocks)
    finish = Case("sample_finish", (1,), dict(
        best_v=blocks.values["best_v"], best_i=blocks.values["best_i"], state=blocks.values["state"],
        out=np.full(step + 1, -7, np.int32), n_blocks=n_blocks, max_new=step + 1, eos=-1))
    run(finish)
    return int(finish.values["out"][step])


@needs_gxx
@pytest.mark.parametrize("case_id", FILTER_CASES)
def test_the_filter_kernel_writes_the_twins_bounds_and_the_same_id_is_drawn(case_id):
    """The kernel's bounds are the twin's bit for bit (a logit and an id: nothing to round), and sample_blocks
    (3 blocks) then sample_finish, on each side's bounds, draw the same id, one the bounds keep."""
    on_kernel, on_twin = check_against_twin(CASES[case_id]())
    assert np.array_equal(on_kernel.values["bounds"], on_twin.values["bounds"]), (on_kernel.values["bounds"],
                                                                                   on_twin.values["bounds"])
    tok = draw(run_kernel, on_kernel)
    assert tok == draw(run_twin, on_twin)
    assert twins.kept(on_twin.values["logits"], on_twin.values["bounds"], on_twin.values["v"])[tok]


@pytest.mark.parametrize("v", [300, 4999, 49152])
@pytest.mark.parametrize("top_k, top_p", [(1, 1.0), (5, 1.0), (-1, 1.0), (0, 0.05), (0, 0.5), (0, 0.95), (5, 0.95),
                                          (1000, 0.5), (-1, 0.05)])
def test_the_twins_kept_set_is_the_host_filters(v, top_k, top_p):
    """On tie-free logits the tokens the twin's bounds keep are those the host's filter_logits leaves finite
    (top_k = −1: v − 1), at SmolLM2's vocabulary size too (49,152: the twin alone, the emulator is slow there)."""
    T, top_k = 0.7, v - 1 if top_k == -1 else top_k
    logits = tie_free_logits(np.random.default_rng(v + top_k), v)  # [v]
    assert np.unique(logits).size == v
    bounds = nans(2)
    twins.sample_filter(logits, bounds, state(), v, np.float32(1 / T), top_k, np.float32(top_p))
    want = np.isfinite(filter_logits(logits, T, top_k or None, top_p))  # [v] bool
    np.testing.assert_array_equal(twins.kept(logits, bounds, v), want)
    assert 1 <= want.sum() <= (top_k or v)


@pytest.mark.parametrize("top_p", [1e-50, 1e-300, 1e-30])
def test_a_top_p_below_float32s_range_keeps_the_most_likely_token(top_p):
    """float32(1e-50) is 0, which would keep nothing: the device gets top_p ≥ 1e-30, and keeps what the host's
    filter keeps (the argmax alone), on tie-free logits and with the top logit tied."""
    from transformer.models.decode_plan import sampling_arguments
    for logits in (tie_free_logits(np.random.default_rng(1), 300), np.array([1.0, 3.0, 0.0, 3.0, 2.0], np.float32)):
        v = logits.size
        inv_T, k, p, filters = sampling_arguments(0.7, None, top_p, v)
        assert filters and p > 0
        bounds = nans(2)
        twins.sample_filter(logits, bounds, state(), v, inv_T, k, p)
        want = np.isfinite(filter_logits(logits, 0.7, None, top_p))  # [v] bool
        assert want.sum() == 1 and want[np.argmax(logits)]
        np.testing.assert_array_equal(twins.kept(logits, bounds, v), want)


CRITICAL = {3: 16.266}  # χ²₃ at p = 0.001, where scipy is missing


@pytest.mark.parametrize("logits, top_k, top_p", [
    ([0.5, -1.0, 2.0, 0.0, 1.0, -0.5, 1.5, 0.2, -2.0, 0.8, 1.2, -0.1], 6, 0.8),  # both filters, no tie: 4 kept
    ([1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 1.0, -1.0], 0, 0.75),  # top-p cuts the four 1s after the first two
], ids=["top_k-top_p", "top_p-cut_in_a_tie"])
def test_gumbel_max_over_the_kept_set_draws_the_hosts_distribution(logits, top_k, top_p):
    """(d) sample_filter, then Gumbel-max over the kept set with the counter stream, is a draw from the host's
    next_token_probs(logits, T, top_k, top_p): 20,000 (seed, step) draws of the twins (2 blocks), never a
    token the host gives probability 0, and Pearson's χ² over the rest; the same counts fail against the
    unfiltered softmax."""
    logits, T = np.array(logits, np.float32), 0.8
    v = len(logits)
    bounds, best_v, best_i = nans(2), np.zeros(2, np.float32), np.zeros(2, np.int32)
    twins.sample_filter(logits, bounds, state(), v, np.float32(1 / T), top_k, np.float32(top_p))
    counts = np.zeros(v)
    for seed in range(100):
        for step in range(200):
            twins.sample_blocks(logits, bounds, best_v, best_i, state(step=step), v, np.float32(1 / T), seed, grid=(2,))
            counts[best_i[np.argmax(best_v)]] += 1  # the better block (no two Gumbel scores are equal)
    want = next_token_probs(logits, T, top_k or None, top_p)  # [v] the host's distribution
    support = want > 0
    assert counts[~support].sum() == 0, counts
    df = int(support.sum()) - 1
    try:
        from scipy.stats import chi2
        critical = chi2.ppf(1 - 1e-3, df=df)
    except ImportError:
        critical = CRITICAL[df]
    expected = counts.sum() * want[support]
    assert ((counts[support] - expected) ** 2 / expected).sum() < critical, (counts, want)
    unfiltered = counts.sum() * next_token_probs(logits, T)  # [v] every token > 0
    assert ((counts - unfiltered) ** 2 / unfiltered).sum() > critical


@needs_gxx
@pytest.mark.parametrize("name", list(FIRST_CASE))
def test_a_finished_run_changes_nothing(name):
    """state[DONE] = 1: every kernel and every twin returns before writing anything (a captured graph
    keeps launching after the end token)."""
    case = CASES[FIRST_CASE[name]]()
    case.values["state"][DONE] = 1
    on_kernel, on_twin = case.copy(), case.copy()
    run_kernel(on_kernel)
    run_twin(on_twin)
    for n in outputs(case):
        assert np.array_equal(on_kernel.values[n], case.values[n], equal_nan=True), n
        assert np.array_equal(on_twin.values[n], case.values[n], equal_nan=True), n


@pytest.mark.skipif(not nvrtc.available(), reason="needs NVRTC and the CUDA headers (requirements-dev.txt)")
@pytest.mark.parametrize("file", sorted({file for file, _ in KERNELS.values()}))
def test_kernel_compiles_as_cupy_compiles_it(file):
    """CuPy's RawModule with `-I` the kernels' folder (decode_graph.CupyLauncher): NVRTC, no <math.h>, no
    warning, for the oldest GPU CUDA 13 builds (sm_75) and an H100 (sm_90)."""
    for arch in (75, 90):
        ok, log = nvrtc.compile_cuda((KERNEL_DIR / file).read_text(), (f"-I{KERNEL_DIR}", f"-arch=sm_{arch}"), file)
        assert ok and "warning" not in log, f"sm_{arch}:\n{log}"


UNIFORMS = r"""
#include "decode_common.cuh"
extern "C" __global__ void uniforms(float* u, int n, unsigned int seed, int step) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) u[i] = counter_uniform(seed, step, i);
}
"""


@needs_gxx
def test_the_device_stream_has_the_bits_of_counter_uniforms(tmp_path):
    """decode_common.cuh's counter_uniform (unsigned int arithmetic) and decode_plan.counter_uniforms
    (NumPy uint32): the same float32 bits, seeds past 2³¹ included."""
    shutil.copy(KERNEL_DIR / "decode_common.cuh", tmp_path)
    (tmp_path / "uniforms.cu").write_text(UNIFORMS)
    kernel = cuda_emulator.load(tmp_path / "uniforms.cu", "uniforms")
    for seed, step in [(0, 0), (1, 7), (0xDEADBEEF, 123456), (2 ** 32 - 1, 3)]:
        u = nans(1000)
        kernel((1,), (256,), (u, np.int32(1000), emulator_scalar(seed, "unsigned int"), np.int32(step)))
        assert np.array_equal(u.view(np.uint32), counter_uniforms(seed, step, 1000).view(np.uint32)), (seed, step)


def test_gumbel_max_draws_follow_the_softmax():
    """(d) Gumbel-max over the counter stream is a draw from softmax(logits / T): 20,000 (seed, step)
    draws of the twins on 8 logits (2 blocks) against the softmax by Pearson's χ² with 7 degrees of
    freedom; the same counts fail against softmax(logits), the distribution at T = 1."""
    logits, T, v = np.array([0.5, -1.0, 2.0, 0.0, 1.0, -0.5, 1.5, 0.2], np.float32), 0.8, 8
    best_v, best_i, out = np.zeros(2, np.float32), np.zeros(2, np.int32), np.zeros(1, np.int32)
    counts = np.zeros(v)
    for seed in range(100):
        for step in range(200):
            st = state(step=step)
            twins.sample_blocks(logits, NULL, best_v, best_i, st, v, 1 / T, seed, grid=(2,))
            st[STEP] = 0  # sample_finish writes out[step]: one slot is enough
            twins.sample_finish(best_v, best_i, st, out, 2, 1, -1)
            counts[out[0]] += 1
    try:
        from scipy.stats import chi2
        critical = chi2.ppf(1 - 1e-3, df=v - 1)
    except ImportError:
        critical = 24.322  # χ²₇ at p = 0.001
    for temperature, should_pass in [(T, True), (1.0, False)]:
        p = np.exp(logits / temperature) / np.exp(logits / temperature).sum()
        statistic = ((counts - counts.sum() * p) ** 2 / (counts.sum() * p)).sum()
        assert (statistic < critical) == should_pass, (temperature, statistic, critical, counts)


# ---------------------------------------------------------------- under the sanitizers

def require(sanitizer):  # in the test, not at import: the sanitizers' subprocesses import this file too
    if not cuda_emulator.sanitizer_works(sanitizer):
        pytest.skip(f"needs g++ and its {sanitizer} sanitizer, working on this machine")


def check_cases(case_ids, folder=str(KERNEL_DIR)):
    """Run in the sanitizer's subprocess: each case's kernel against its twin; prints how many passed."""
    for case_id in case_ids:
        check_against_twin(CASES[case_id](), Path(folder))
    print(json.dumps({"passed": len(case_ids)}))


def _in_subprocesses(sanitizer, parts, folder=KERNEL_DIR):
    """check_cases(part) for each part of the case ids, each in a subprocess under `sanitizer`, all at
    once: each builds its kernels with g++, so two parts keep both cores busy."""
    def start(case_ids):
        code = (f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'support')!r}]; "
                f"import test_decode_kernels as t; t.check_cases({list(case_ids)!r}, {str(folder)!r})")
        return subprocess.Popen([sys.executable, "-c", code], env=cuda_emulator.sanitizer_env(sanitizer),
                                cwd=TESTS.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = [(start(part), part) for part in parts]
    finished = []
    for proc, part in running:
        stdout, stderr = proc.communicate(timeout=600)
        finished.append((proc.returncode, stdout, stderr, part))
    return finished


# One case a kernel (and attention's second pass over the shared arrays). ThreadSanitizer watches the
# kernels whose threads share memory (a barrier orders them); in the others no two threads touch one
# address, and each sanitizer build costs g++ ~4 s.
SANITIZER_CASES = {"address": list(FIRST_CASE.values()) + ["attend_split-g9-two_passes", "attend_split-g9-chunks"]}
SHARING = ("norm_matvec", "norm_matvec_rope", "attend_split", "swiglu_matvec_residual", "sample_filter",
           "sample_blocks", "sample_finish")
SANITIZER_CASES["thread"] = [i for i in SANITIZER_CASES["address"] if i.split("-")[0] in SHARING]


@pytest.mark.parametrize("sanitizer", ["thread", "address"])
def test_kernels_run_clean_under_the_sanitizer(sanitizer):
    """(e) Built under ThreadSanitizer (a thread per CUDA thread: any two accesses of an address by two
    threads, one a write, with no barrier between) or AddressSanitizer (any access outside an array or
    the launch's shared memory): each kernel equals its twin, and nothing is reported."""
    require(sanitizer)
    cases = SANITIZER_CASES[sanitizer]
    for returncode, stdout, stderr, part in _in_subprocesses(sanitizer, [cases[0::2], cases[1::2]]):
        assert returncode != cuda_emulator.SANITIZER_EXIT, stderr[-4000:]
        assert returncode == 0, stdout[-2000:] + stderr[-2000:]
        assert json.loads(stdout.splitlines()[-1])["passed"] == len(part)


BARRIER = "        __syncthreads();  // every warp's statistics are in shared memory\n"
MUTANT_CASE = "attend_split-g3-d64-boundary"


def without_the_barrier(tmp_path, file="attend_split.cu", barrier=BARRIER):
    """The kernels' folder with one barrier removed: by default attend_split.cu's before the warps' merge."""
    folder = tmp_path / "decode_kernels"
    shutil.copytree(KERNEL_DIR, folder)
    text = (folder / file).read_text()
    assert text.count(barrier) == 1, f"{file} no longer holds the barrier this test removes"
    (folder / file).write_text(text.replace(barrier, ""))
    return folder


def test_thread_sanitizer_catches_the_merge_without_its_barrier(tmp_path):
    """Without the barrier, warp 0 merges the 4 warps' (m, ℓ, o) while the others still write theirs."""
    require("thread")
    [(returncode, stdout, stderr, _)] = _in_subprocesses("thread", [[MUTANT_CASE]], without_the_barrier(tmp_path))
    assert returncode == cuda_emulator.SANITIZER_EXIT, stdout[-2000:] + stderr[-2000:]
    assert "ThreadSanitizer: data race" in stderr and "decode_attend_split" in stderr, stderr[-4000:]


LAST_BARRIER = "    __syncthreads();  // every thread knows whether to merge\n"


def test_thread_sanitizer_catches_the_last_block_read_before_it_is_known(tmp_path):
    """Without the barrier after thread 0 counts the block in, the other threads read the shared flag
    `last` while thread 0 writes it."""
    require("thread")
    folder = without_the_barrier(tmp_path, barrier=LAST_BARRIER)
    [(returncode, stdout, stderr, _)] = _in_subprocesses("thread", [[MUTANT_CASE]], folder)
    assert returncode == cuda_emulator.SANITIZER_EXIT, stdout[-2000:] + stderr[-2000:]
    assert "ThreadSanitizer: data race" in stderr and "decode_attend_split" in stderr, stderr[-4000:]


TREE_BARRIER = "    __syncthreads();  // every thread has its totals before the tree is written again\n"


def test_thread_sanitizer_catches_the_filters_tree_written_while_read(tmp_path):
    """Without block_reduce's last barrier (sample.cu), a thread writes the next reduction's leaves into the
    tree while others still read the last one's totals from it."""
    require("thread")
    folder = without_the_barrier(tmp_path, "sample.cu", TREE_BARRIER)
    [(returncode, stdout, stderr, _)] = _in_subprocesses("thread", [[FIRST_CASE["sample_filter"]]], folder)
    assert returncode == cuda_emulator.SANITIZER_EXIT, stdout[-2000:] + stderr[-2000:]
    assert "ThreadSanitizer: data race" in stderr and "decode_sample_filter" in stderr, stderr[-4000:]


@needs_gxx
def test_the_merge_without_its_barrier_goes_wrong_on_fibers(tmp_path):
    """On fibers the lowest thread that may go on runs first: warp 0 reaches the merge before warps 1–3
    have written their statistics, and reads stale ones. The partials are wrong, no sanitizer needed."""
    case = CASES[MUTANT_CASE]()
    expected = reference_attend_split(f64(case))
    run_kernel(case, without_the_barrier(tmp_path))
    error = np.abs(case.values["part_o"] - expected["part_o"]).max()
    assert not error < 1e-2, error  # NaN or far off
