"""The GPU decode step without a GPU: its body, recorded and replayed as a CUDA graph would be, on the CPU.

The step (transformer/models/decode_step.py) is 5L + 4 kernel launches on buffers made once. Here it
runs under the kernels' NumPy twins and under the CUDA emulator, against `Llama.logits` (a full
forward pass with no cache, no kernel, no twin) and the host loop's greedy ids. A CUDA graph replays
what was recorded, so the tests look for what a graph would get wrong: a value frozen at record time
(replayed 20 times, the ids still follow the reference), a buffer read before it is written (scratch
poisoned with NaN between replays), an allocation or a host read inside the body (the body records with
opaque buffers; its source calls nothing but `launch`).
"""
from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

import transformer as T
from transformer.core.sampling import filter_logits, greedy
from transformer.models import decode_plan, generation
from transformer.models.decode_graph import StepRunner
from transformer.models.decode_step import DecodeStep, RecordingLauncher, TwinLauncher
from transformer.models.llama import LlamaConfig

TINY = LlamaConfig(L=2, d=40, h=4, h_kv=2, d_h=16, d_ff=72, v=300, n_ctx=64)  # d ≠ h·d_h, nothing a multiple of 32
PROMPT = [3, 17, 42, 99, 5]
N_NEW = 24
SPLIT = 8  # keys per attention block: the 29 positions cross three split boundaries


@pytest.fixture(scope="module")
def model():
    return T.random_llama(TINY, seed=1, std=0.3)  # std 0.3: logits far apart enough that greedy is not a near-tie


@pytest.fixture(scope="module")
def reference(model):
    """The host loop's greedy ids, and every position's logits from one forward pass over prompt + ids."""
    ids = model.generate(PROMPT, N_NEW, stop_at_eos=False)
    return ids, model.logits(PROMPT + ids)[len(PROMPT) - 1:]  # [N_NEW + 1, v]: the logits each id was chosen from


def prefilled(model, max_new=N_NEW, **kw):  # -> a DecodeStep after the prompt's prefill, and the prefill's logits
    cache = model.new_cache(1, len(PROMPT) + max_new)
    cos, sin = model.rope_tables(len(PROMPT) + max_new)
    logits = generation.through_cache(model.readable_engine, np.asarray([PROMPT]), cache, cos, sin)  # [1, v]
    return DecodeStep(model.weights, model.config, cache, cos, sin, max_new, **kw), logits[0]


def teacher_forced(step, launch, ids, poison=False):  # -> logits [len(ids), v] of each step fed the reference ids
    """Run the step len(ids) − 1 times, each fed the reference's id (not its own choice): every step's logits."""
    out = []
    step.start(ids[0], len(PROMPT))
    for k in range(1, len(ids)):
        if poison:
            for buffer in step.scratch:
                buffer[...] = np.nan if buffer.dtype.kind == "f" else -7
        step.state[decode_plan.TOK] = ids[k - 1]
        launch()
        out.append(step.buf["logits"].copy())
    return np.array(out)


def first_near_tie(logits, gap=1e-3) -> int:  # [n, v] -> steps before the first whose top-2 gap < gap
    top2 = np.sort(logits, axis=-1)[:, -2:]
    close = np.flatnonzero(top2[:, 1] - top2[:, 0] < gap)
    return int(close[0]) if close.size else len(logits)


def test_a_step_is_5_kernels_a_layer_and_4(model):
    step, _ = prefilled(model)
    recording = RecordingLauncher()
    step.enqueue(recording)
    names = [spec.name for spec, _ in recording.calls]
    assert len(names) == decode_plan.kernels_per_step(TINY.L) == 5 * 2 + 4
    assert names[:6] == ["embed", "norm_matvec_rope", "attend_split", "matvec_residual", "norm_matvec",
                         "swiglu_matvec_residual"]
    assert names[-3:] == ["norm_matvec", "sample_blocks", "sample_finish"]
    assert [s.name for s in decode_plan.step_kernels(step.sizes)] == names
    assert decode_plan.kernels_per_step(30) == 154  # SmolLM2-135M: 30 layers, 5 a layer


@pytest.mark.parametrize("sampling, filtered", [((0.7, 5, None), True), ((0.7, None, 0.9), True),
                                                ((0.7, 40, 0.5), True), ((0.0, 5, 0.9), False),
                                                ((0.7, TINY.v, 1.0), False)])
def test_top_k_or_top_p_adds_the_filter_kernel_only_where_it_filters(model, sampling, filtered):
    """5L + 5 launches at a temperature with top_k < v or top_p < 1 (the filter before sample_blocks, which
    reads its bounds), else the 5L + 4 of before, sample_blocks given a null pointer; greedy needs no filter."""
    T_, top_k, top_p = sampling
    step, _ = prefilled(model, temperature=T_, top_k=top_k, top_p=top_p)
    recording = RecordingLauncher()
    step.enqueue(recording)
    names = [spec.name for spec, _ in recording.calls]
    assert len(names) == decode_plan.kernels_per_step(TINY.L, filtered) == 5 * 2 + 4 + filtered
    assert [s.name for s in decode_plan.step_kernels(step.sizes, filtered)] == names
    blocks_bounds = recording.calls[-2][1][1]  # sample_blocks(logits, bounds, …)
    if filtered:
        assert names[-4:] == ["norm_matvec", "sample_filter", "sample_blocks", "sample_finish"]
        assert blocks_bounds is recording.calls[-3][1][1] and np.shares_memory(blocks_bounds, step.arena)
    else:
        assert names[-3:] == ["norm_matvec", "sample_blocks", "sample_finish"]
        assert isinstance(blocks_bounds, np.uint64) and blocks_bounds == 0


def test_the_twins_step_gives_the_forward_pass_logits(model, reference):
    """Teacher-forced: fed the reference ids, each step's logits equal Llama.logits' at that position."""
    ids, want = reference
    step, first_logits = prefilled(model, split=SPLIT)
    np.testing.assert_allclose(first_logits, want[0], rtol=1e-5, atol=1e-5 * np.abs(want[0]).max())
    got = teacher_forced(step, lambda: step.enqueue(TwinLauncher()), ids)  # [N_NEW − 1, v]
    scale = np.abs(want[1:N_NEW]).max(axis=-1, keepdims=True)
    assert np.abs(got - want[1:N_NEW]).max() <= 1e-5 * scale.max()


@pytest.mark.parametrize("kind", ["recorded", "twins"])
def test_generate_on_the_device_path_gives_the_host_loop_ids(model, reference, kind):
    ids, want = reference
    model.device_step = kind
    try:
        got = model.generate(PROMPT, N_NEW, stop_at_eos=False)
        assert model.last_stats.engine == kind
    finally:
        del model.device_step  # back to the class's "graph", which NumPy never takes
    k = first_near_tie(want[:N_NEW])
    assert k >= 10, "the reference has a near-tie early: pick another seed"
    assert got[:k] == ids[:k]
    assert len(got) == N_NEW and model.last_stats.new_tokens == N_NEW


def test_replayed_20_times_with_scratch_poisoned_the_recording_follows_the_reference(model, reference):
    """A graph replays values recorded once: any per-token value frozen in, or any scratch read before it is
    written, would change the ids. Replayed 20 times, scratch filled with NaN before each, they stay."""
    ids, want = reference
    step, _ = prefilled(model, split=SPLIT)
    recording = RecordingLauncher()
    step.enqueue(recording)
    twins = TwinLauncher()
    step.start(ids[0], len(PROMPT))
    for k in range(1, 21):
        for buffer in step.scratch:
            buffer[...] = np.nan if buffer.dtype.kind == "f" else -7
        recording.replay(twins)
        assert int(step.state[decode_plan.STEP]) == k + 1 and int(step.state[decode_plan.POS]) == len(PROMPT) + k
        if k < first_near_tie(want[:N_NEW]):
            assert int(step.out[k]) == ids[k], f"step {k}"
        step.state[decode_plan.TOK] = ids[k]  # teacher-forced from here: one near-tie would end the comparison


def test_every_argument_is_made_before_the_step_and_none_depends_on_the_position(model):
    """The arena check: each array a kernel gets is one the step made at construction (a view of the arena,
    the blocks' counts, the state, the ids, the cache, the weights in the kernels' layout); the numbers are the same whatever
    the position, the step and the token."""
    step, _ = prefilled(model, split=SPLIT)
    owned = [step.arena, step.best_i, step.arrivals, step.state, step.out, step.head, step.W_E, step.final_norm, step.cos, step.sin,
             *(M for layer in step.mats for M in layer), *(g for pair in step.norms for g in pair),
             *(c for pair in step.caches for c in pair)]
    records = []
    for first, at in [(7, len(PROMPT)), (123, len(PROMPT) + 9)]:
        step.start(first, at)
        recording = RecordingLauncher()
        step.enqueue(recording)
        records.append(recording.calls)
        for spec, args in recording.calls:
            for a in args:
                if isinstance(a, np.ndarray):
                    assert any(np.shares_memory(a, o) for o in owned), f"{spec.name}: an array the step did not make"
                elif not (isinstance(a, np.uint64) and a == 0):  # a null pointer: sample_blocks' bounds
                    assert isinstance(a, (np.int32, np.uint32, np.float32)), f"{spec.name}: {a!r}"
    for (s1, a1), (s2, a2) in zip(*records):
        assert s1 == s2
        assert all(x is y if isinstance(x, np.ndarray) else x == y for x, y in zip(a1, a2))


class Opaque:
    """A device buffer while a graph is captured: anything but passing it along raises."""
    def __init__(self, name):
        self.name = name

    def _refuse(self, *_, **__):
        raise AssertionError(f"the step body read or changed {self.name} while recording")

    __array__ = __int__ = __index__ = __bool__ = __float__ = __len__ = __getitem__ = __setitem__ = _refuse
    __add__ = __mul__ = __iadd__ = __sub__ = __truediv__ = __matmul__ = __iter__ = _refuse


@pytest.mark.parametrize("top_k, top_p", [(None, None), (5, 0.9)])
def test_the_body_reads_no_buffer_and_calls_nothing_but_launch(model, top_k, top_p):
    step, _ = prefilled(model, temperature=0.8, top_k=top_k, top_p=top_p)
    for name, value in vars(step).items():  # every array the step holds, at any depth, made opaque
        if isinstance(value, np.ndarray):
            setattr(step, name, Opaque(name))
        elif isinstance(value, dict):
            setattr(step, name, {k: Opaque(f"{name}[{k}]") if isinstance(v, np.ndarray) else v for k, v in value.items()})
        elif isinstance(value, list):
            setattr(step, name, [[Opaque(f"{name}[{i}]") for _ in pair] for i, pair in enumerate(value)])
    recording = RecordingLauncher()
    step.enqueue(recording)  # would raise on a host read, an allocation from a buffer, arithmetic on one
    assert len(recording.calls) == decode_plan.kernels_per_step(TINY.L, top_k is not None)
    body = ast.parse(textwrap.dedent(inspect.getsource(DecodeStep.enqueue)))
    called = {node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
              for node in ast.walk(body) if isinstance(node, ast.Call)}
    assert called <= {"launch", "zip"}, called  # no cupy.matmul, no xp.empty, no .get()


def test_sampling_at_a_temperature_is_gumbel_max_on_the_counter_stream(model):
    """Each id is argmax(logits / T + g), g = −log(−log u(seed, step, i)) (decode_plan.counter_uniforms):
    computed here from Llama.logits of the prefix, the ids the device path drew are those."""
    T_, seed = 0.8, 5
    model.device_step = "recorded"
    try:
        ids = model.generate(PROMPT, 12, temperature=T_, seed=seed, stop_at_eos=False)
        again = model.generate(PROMPT, 12, temperature=T_, seed=seed, stop_at_eos=False)
    finally:
        del model.device_step
    assert ids == again
    logits = model.logits(PROMPT + ids)[len(PROMPT) - 1:-1].astype(np.float64)  # [12, v]
    for step, row in enumerate(logits):
        u = decode_plan.counter_uniforms(seed, step, TINY.v).astype(np.float64)
        z = row / T_ - np.log(-np.log(u))
        best = np.sort(z)[-2:]
        if best[1] - best[0] < 1e-3:
            break  # a near-tie: float32 on the device may pick the other
        assert ids[step] == int(np.argmax(z)), f"step {step}"


@pytest.mark.parametrize("top_k, top_p", [(8, None), (None, 0.6), (20, 0.8)])
def test_top_k_and_top_p_on_the_device_draw_from_the_host_filters_kept_set(model, top_k, top_p):
    """Through Llama.generate on the "recorded" device path: each id is one the host's filter_logits keeps
    from Llama.logits of its prefix, and the Gumbel-max over that kept set on the counter stream; the
    same seed gives the same ids. The kept sets are several tokens wide: the filter is what picks."""
    T_, seed, n = 1.5, 3, 16
    model.device_step = "recorded"
    try:
        ids = model.generate(PROMPT, n, temperature=T_, top_k=top_k, top_p=top_p, seed=seed, stop_at_eos=False)
        assert model.last_stats.engine == "recorded"
        assert model.generate(PROMPT, n, temperature=T_, top_k=top_k, top_p=top_p, seed=seed,
                              stop_at_eos=False) == ids
    finally:
        del model.device_step
    logits = model.logits(PROMPT + ids)[len(PROMPT) - 1:-1]  # [n, v] each id's logits, no cache, no kernel
    widths = []
    for step, row in enumerate(logits):
        kept = np.isfinite(filter_logits(row, T_, top_k, top_p))  # [v] the host's rule
        assert kept[ids[step]], f"step {step}: id {ids[step]} is outside the host's kept set"
        z = np.where(kept, row / T_ - np.log(-np.log(decode_plan.counter_uniforms(seed, step, TINY.v))), -np.inf)
        if np.diff(np.sort(z)[-2:])[0] > 1e-3:  # no near-tie: float32 on the device picks the same
            assert ids[step] == int(np.argmax(z)), f"step {step}"
        widths.append(int(kept.sum()))
    assert min(widths) >= 2 and max(widths) < TINY.v, widths


def test_the_end_token_stops_the_device_loop(model, reference):
    ids, _ = reference
    eos = ids[7]
    model.device_step = "recorded"
    model.tokenizer = type("Tok", (), {"eos_id": eos, "pad_id": None})()
    try:
        got = model.generate(PROMPT, N_NEW)
    finally:
        del model.device_step
        model.tokenizer = None
    assert got == ids[:ids.index(eos) + 1]


@pytest.mark.parametrize("why", ["numpy asks for the graph", "off", "paged cache", "two end tokens", "ids suppressed"])
def test_where_the_device_step_does_not_apply_the_host_loop_runs(model, why):
    cache = model.new_cache(1, 30)
    sampling = (0.7, 5, 0.9)  # top-k and top-p apply on the device: they are not why
    stop = {1, 2} if why == "two end tokens" else set()
    suppress = (0,) if why == "ids suppressed" else ()
    model.device_step = {"numpy asks for the graph": "graph", "off": None}.get(why, "recorded")
    if why == "paged cache":
        cache = T.PagedKVCache(TINY.L, 1, TINY.h_kv, 30, TINY.d_h)
    try:
        assert generation.device_kind(model, cache, sampling, stop, suppress) is None
        assert generation.device_kind(model, model.new_cache(1, 30), sampling, set()) == (
            None if why in ("numpy asks for the graph", "off") else "recorded")
    finally:
        del model.device_step


@pytest.mark.parametrize("steps", [3])
def test_the_cuda_kernels_on_the_emulator_give_the_twins_logits(model, reference, steps):
    """The same body under the CUDA emulator: each kernel's CUDA C, run on the CPU, teacher-forced. The
    count of attention's finished blocks is back at 0 after every step, as the next step needs it."""
    decode_emulator = pytest.importorskip("decode_emulator")
    import cuda_emulator
    if cuda_emulator.CXX is None:
        pytest.skip("needs g++")
    ids, want = reference
    step, _ = prefilled(model, split=SPLIT)
    emulator = decode_emulator.EmulatorLauncher()
    got = teacher_forced(step, lambda: step.enqueue(emulator), ids[:steps + 1], poison=True)  # [steps, v]
    scale = np.abs(want[1:steps + 1]).max()
    assert np.abs(got - want[1:steps + 1]).max() <= 1e-5 * scale
    assert [int(i) for i in greedy(got)] == [int(i) for i in np.argmax(want[1:steps + 1], axis=-1)]
    assert step.arrivals.tolist() == [0] * TINY.h_kv


def test_the_step_counts_its_own_bytes(model):
    step, _ = prefilled(model)
    mats = sum(M.nbytes for layer in step.mats for M in layer)  # the tied head is W_E itself: not held again
    scratch = 4 * (TINY.d + 2 * TINY.h * TINY.d_h + TINY.h * TINY.d_h * 1
                   + 2 * TINY.h * 1 + 2 * TINY.d_ff + TINY.v + 1)  # one split (n_max 29 < 32), one vocabulary block
    assert step.nbytes == mats + scratch + 4 * (1 + TINY.h_kv + 4 + N_NEW)  # best_i, arrivals, state, out
    assert mats == 4 * TINY.L * (TINY.d * (TINY.h + 2 * TINY.h_kv) * TINY.d_h + TINY.h * TINY.d_h * TINY.d
                                 + 3 * TINY.d * TINY.d_ff)  # the layers' weights, once more


@pytest.mark.parametrize("kind", ["graph", "kernels"])
def test_the_gpu_runners_host_code_on_a_stand_in_for_cupy(model, reference, monkeypatch, kind):
    """StepRunner's CuPy code (compile, stream, warm-up, capture, upload, replay, read back 16 at a time) on
    fake_cupy, whose kernels are the twins: the warm-up leaves the cache as it was, the graph holds the
    step's 5L + 4 kernels, one replay a token gives the reference ids, and the loop advances the cache."""
    import fake_cupy
    fake_cupy.install(monkeypatch)
    ids, want = reference
    step, _ = prefilled(model)
    before = [K.copy() for K, _ in step.caches]
    runner = StepRunner(step, kind)
    assert all(np.array_equal(K, k0) for (K, _), k0 in zip(step.caches, before)), "the warm-up wrote the cache"
    got = [ids[0]] + [i for chunk in runner.run(ids[0], len(PROMPT)) for i in chunk]
    k = first_near_tie(want[:N_NEW])
    assert got[:k] == ids[:k] and len(got) == N_NEW and len(runner.seconds) == 2  # 16 steps, then 7
    if kind == "graph":
        assert runner.graph.uploaded and runner.graph.launches == N_NEW - 1
        assert runner.kernels_per_step == decode_plan.kernels_per_step(TINY.L)
    model.device_step = kind
    cache = model.new_cache(1, len(PROMPT) + N_NEW)
    cos, sin = model.rope_tables(len(PROMPT) + N_NEW)
    stats = generation.GenerationStats()
    rows = generation.device_rows(kind, model, np.asarray([PROMPT]), cache, cos, sin, N_NEW, (0.0, None, None), None,
                                  set(), stats)
    try:
        assert [int(i[0]) for i, _ in rows][:k] == ids[:k]
    finally:
        del model.device_step
    assert stats.engine == kind and stats.new_tokens == N_NEW and cache.length == len(PROMPT) + N_NEW - 1


def test_a_rotate_half_model_decodes_on_the_device_and_its_cache_comes_back_in_its_layout():
    """A trained decoder's RoPE turns pairs (i, i + d_h/2); the kernels turn adjacent pairs. With W_q's and
    W_k's columns reordered per head and the prompt's keys reordered to match, the device path gives the host
    loop's ids, and the cache it leaves holds the keys as the readable engine writes them."""
    import dataclasses
    half = T.random_llama(dataclasses.replace(TINY, rope_layout="half"), seed=2, std=0.3)
    host_cache, device_cache = half.new_cache(1, len(PROMPT) + 12), half.new_cache(1, len(PROMPT) + 12)
    half.fast_path = False  # the readable engine: its cache holds the keys in the model's own layout
    want = half.generate(PROMPT, 12, stop_at_eos=False, cache=host_cache)
    del half.fast_path
    half.device_step = "recorded"
    got = half.generate(PROMPT, 12, stop_at_eos=False, cache=device_cache)
    assert half.last_stats.engine == "recorded"
    logits = half.logits(PROMPT + want)[len(PROMPT) - 1:len(PROMPT) + 11]
    k = first_near_tie(logits)
    assert k >= 6 and got[:k] == want[:k]
    assert device_cache.length == host_cache.length == len(PROMPT) + 11
    for K_dev, K_host in zip(device_cache.k, host_cache.k):
        np.testing.assert_allclose(K_dev[:, :, :len(PROMPT) + k], K_host[:, :, :len(PROMPT) + k], rtol=1e-5, atol=1e-5)
