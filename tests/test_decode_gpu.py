"""The decode step on a GPU: the CUDA graph, the same kernels launched eagerly, and the readable CuPy path agree.

Runs only where CuPy finds a GPU (CI has none: test_decode_step.py carries the same checks on the CPU,
under the twins and the CUDA emulator). Teacher-forced against NumPy's `Llama.logits`: every step's
logits within 1e-4 of the largest, and the greedy ids equal until the reference's first near-tie.
"""
from __future__ import annotations

import numpy as np
import pytest

import transformer as T
from transformer.models import generation
from transformer.models.decode_graph import StepRunner
from transformer.models.decode_step import DecodeStep
from transformer.models.llama import LlamaConfig

cupy = pytest.importorskip("cupy")
try:
    cupy.cuda.runtime.getDeviceCount()
except Exception:  # CuPy installed, no GPU
    pytest.skip("needs a GPU", allow_module_level=True)

SMALL = LlamaConfig(L=4, d=576, h=9, h_kv=3, d_h=64, d_ff=1536, v=49152, n_ctx=2048)  # SmolLM2's widths, 4 layers
PROMPT = list(range(100, 116))
N_NEW = 64


@pytest.fixture(scope="module")
def models():
    host = T.random_llama(SMALL, seed=0, std=0.05)
    gpu = T.random_llama(SMALL, "cupy", seed=0, std=0.05)
    return host, gpu


@pytest.fixture(scope="module")
def reference(models):
    host, _ = models
    ids = host.generate(PROMPT, N_NEW, stop_at_eos=False)
    return ids, host.logits(PROMPT + ids)[len(PROMPT) - 1:]  # [N_NEW + 1, v]


def first_near_tie(logits, gap=1e-3) -> int:
    top2 = np.sort(logits, axis=-1)[:, -2:]
    close = np.flatnonzero(top2[:, 1] - top2[:, 0] < gap)
    return int(close[0]) if close.size else len(logits)


def runner(gpu, kind, max_new=N_NEW):
    cache = gpu.new_cache(1, len(PROMPT) + max_new)
    cos, sin = gpu.rope_tables(len(PROMPT) + max_new)
    generation.through_cache(gpu.readable_engine, np.asarray([PROMPT]), cache, cos, sin)
    step = DecodeStep(gpu.weights, gpu.config, cache, cos, sin, max_new, xp=cupy)
    return StepRunner(step, kind)


@pytest.mark.parametrize("kind", ["graph", "kernels"])
def test_teacher_forced_logits_within_1e4_of_numpy(models, reference, kind):
    ids, want = reference
    got = runner(models[1], kind).teacher_forced(ids, len(PROMPT))  # [N_NEW − 1, v]
    err = np.abs(got - want[1:N_NEW]).max(axis=-1) / np.abs(want[1:N_NEW]).max(axis=-1)
    assert err.max() <= 1e-4, f"step {int(err.argmax())}: {err.max():.2e}"


@pytest.mark.parametrize("kind", ["graph", "kernels", None])
def test_greedy_ids_equal_numpy_until_a_near_tie(models, reference, kind):
    ids, want = reference
    gpu = models[1]
    gpu.device_step = kind
    try:
        got = gpu.generate(PROMPT, N_NEW, stop_at_eos=False)
        assert gpu.last_stats.engine == (kind or "readable")
    finally:
        del gpu.device_step
    k = first_near_tie(want[:N_NEW])
    assert got[:k] == ids[:k]


def test_the_capture_allocates_nothing_and_holds_every_kernel(models):
    r = runner(models[1], "graph")  # StepRunner.capture raises if the pool's bytes in use changed
    assert r.kernels_per_step == 5 * SMALL.L + 4


def test_a_graph_replayed_after_the_end_token_changes_nothing(models, reference):
    ids, _ = reference
    r = runner(models[1], "graph", max_new=8)
    got = [ids[0]] + [i for chunk in r.run(ids[0], len(PROMPT)) for i in chunk]
    before = r.step.out.get()
    for _ in range(5):
        r.graph.launch(r.stream)
    r.stream.synchronize()
    assert np.array_equal(r.step.out.get(), before) and len(got) == 8


def test_top_k_and_top_p_in_the_graph_draw_from_the_host_filters_kept_set(models):
    """The graph with the filter kernel (5L + 5 nodes; sample_blocks reads its bounds, or a null pointer
    without it): every id is one the host's filter_logits keeps from NumPy's Llama.logits of its prefix."""
    from transformer.core.sampling import filter_logits
    host, gpu = models
    T_, top_k, top_p = 1.0, 50, 0.9
    gpu.device_step = "graph"
    try:
        ids = gpu.generate(PROMPT, 32, temperature=T_, top_k=top_k, top_p=top_p, seed=7, stop_at_eos=False)
        assert gpu.last_stats.engine == "graph"
    finally:
        del gpu.device_step
    logits = host.logits(PROMPT + ids)[len(PROMPT) - 1:-1]  # [32, v]
    for step, row in enumerate(logits):
        assert np.isfinite(filter_logits(row, T_, top_k, top_p))[ids[step]], f"step {step}"
    cache = gpu.new_cache(1, len(PROMPT) + 8)
    cos, sin = gpu.rope_tables(len(PROMPT) + 8)
    generation.through_cache(gpu.readable_engine, np.asarray([PROMPT]), cache, cos, sin)
    step = DecodeStep(gpu.weights, gpu.config, cache, cos, sin, 8, temperature=T_, top_k=top_k, top_p=top_p, xp=cupy)
    assert StepRunner(step, "graph").kernels_per_step == 5 * SMALL.L + 5
