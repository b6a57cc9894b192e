"""The generation loop, written once: prefill in chunks, then one token a step, sampled, for b rows at a time.

    prompt ids --prefill (chunks of PREFILL_CHUNK through the cache)--> logits of the last position
    repeat: sample the next id of every row -> feed it (one token a row) -> its logits

The loop does not know how a pass is computed. An *engine* does: a callable

    engine(ids [b, n] NumPy int, cache, cos, sin, positions [b | 1, n], key_valid [b, t + n] | None) -> [b, v]

that feeds n new tokens per row through the cache (after its t tokens) and returns the last position's
logits. `readable_engine(model)` is `llama.forward` through the cache, the reference; `FastForward`
(llama_fast.py: the same maths in buffers made once) is the engine on NumPy with the contiguous cache.
`engine_for` picks one and says which, so a run can report the path it took. `Llama.stream`,
`Llama.generate` and `Llama.generate_batch` all run `decode_rows`.

On a GPU the loop itself moves to the device: `device_rows` prefills as above, then runs the decode
step as kernels that choose the next token themselves (decode_step.py), replayed as a CUDA graph
(decode_graph.py), the host reading the new ids 16 at a time. `device_kind` says where that applies.
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from .decode_graph import StepRunner
from .decode_plan import device_matrices
from .decode_step import DecodeStep, first_token
from .llama_fast import FastForward, half_to_interleaved_order
from ..backend import get_xp, progress_enabled, to_host
from ..core import sampling_checks
from ..core.kv_cache import KVCache
from ..core.sampling import sample_next

__all__ = ["PREFILL_CHUNK", "GenerationStats", "left_padded", "engine_for", "through_cache", "overflow_named",
           "streams", "sample_rows", "decode_rows", "device_kind", "device_rows", "reorder_keys"]

# Prefill feeds the prompt through the cache in passes of this many tokens: naive attention holds
# SDPA_BUFFERS arrays of (b, h, n_q, n_k) floats at once (llama.py), so one pass over an 8,000-token
# prompt would hold 4 · 9 · 8000² · 4 bytes = 9.2 GB; passes of 512 queries hold 0.6 GB at most.
PREFILL_CHUNK = 512


@dataclass
class GenerationStats:
    """Timing of the last generation: prefill = prompt -> first token, decode = the rest.
    For a batch, the counts are all b sequences' together: decode_tok_s is the total throughput.
    engine: which engine computed the passes ("fast" NumPy buffers, "readable" forward(), "no cache"), or
    which runner of the device step ran the decode (device_kind: "graph", "kernels", "recorded", "twins")."""
    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    steps: list = field(default_factory=list)  # seconds per step; step 0 is the prefill
    batch: int = 1  # sequences generated side by side, b new tokens a step
    engine: str = ""

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else float("nan")

    @property
    def decode_tok_s(self) -> float:  # the first new token of each sequence comes from prefill
        done = self.new_tokens - self.batch
        return done / self.decode_s if self.decode_s > 0 and done > 0 else float("nan")


def left_padded(rows: list, n_new: int, pad: int):  # b id lists -> [b, n_p], [b, n_p + n_new] bool, [b, n_p + n_new]
    """A batch of prompts padded on the left to the longest, n_p: the ids, which keys are real
    (False = padding) and each token's position, counted from 0 at the row's first real token.

    >>> ids, valid, pos = left_padded([[7, 8], [9]], 1, pad=0)
    >>> ids.tolist(), valid.astype(int).tolist(), pos.tolist()
    ([[7, 8], [0, 9]], [[1, 1, 1], [0, 1, 1]], [[0, 1, 2], [0, 0, 1]])
    """
    b, n_p = len(rows), max(len(r) for r in rows)
    ids = np.full((b, n_p), pad, dtype=np.int64)
    valid = np.zeros((b, n_p + n_new), dtype=bool)
    for i, r in enumerate(rows):
        ids[i, n_p - len(r):] = r
        valid[i, n_p - len(r):] = True
    valid[:, n_p:] = True  # the generated tokens
    positions = np.maximum(np.cumsum(valid, axis=1) - 1, 0)  # [b, n_p + n_new]
    return ids, valid, positions


def engine_for(model, cache):  # -> (engine, its name)
    """The fast engine where it applies (NumPy weights, the contiguous KVCache, model.fast_path), else the
    model's readable one, `llama.forward` through the cache (CuPy, a paged cache)."""
    fast = FastForward.for_model(model, cache)
    return (fast, "fast") if fast is not None else (model.readable_engine, "readable")


def through_cache(engine, ids, cache, cos, sin, positions=None, key_valid=None):  # [b, n] -> [b, v]
    """The last position's logits after feeding ids (NumPy) through the cache in passes of PREFILL_CHUNK
    tokens, each reading the earlier ones from the cache. positions, key_valid: (b, n_max) or None.
    A prompt of several passes shows a progress bar on stderr (8,000 tokens take minutes on a CPU; TQDM_DISABLE=1
    hides it), gone once the first token is chosen."""
    from tqdm.auto import tqdm

    hidden = ids.shape[1] <= PREFILL_CHUNK or not progress_enabled()  # one pass: no bar
    with tqdm(total=ids.shape[1], desc="prefill", unit="token", leave=False, disable=hidden) as bar:
        for c0 in range(0, ids.shape[1], PREFILL_CHUNK):
            chunk = ids[:, c0:c0 + PREFILL_CHUNK]  # [b, n]
            t, n = cache.length, chunk.shape[1]
            pos = np.arange(t, t + n)[None, :] if positions is None else positions[:, t:t + n]  # [b or 1, n]
            kv = None if key_valid is None else key_valid[:, :t + n]  # [b, t + n]
            logits = engine(chunk, cache, cos, sin, pos, kv)  # [b, v]
            bar.update(n)
    return logits


def overflow_named(fn, whose: str, when: str):
    """fn(), where a product that overflows float32 is one line: "{whose} numbers overflow float32 {when}: …".
    Finite weights can overflow without leaving NaN in the result: x² of an RMSNorm goes to inf, x / √inf to
    0, and the logits come out finite and equal. Overflow is never a model's right answer (softmaxes subtract
    their max; a masked score is −inf from the start), so the computation stops where NumPy sees it; a NaN
    that appears (inf − inf) is left to the caller's own check of the result. On CuPy errstate does nothing,
    and that check stands alone. Generation names the step; `embed` and `attention` what they computed."""
    try:
        with np.errstate(over="raise", invalid="ignore"):
            return fn()
    except FloatingPointError:
        raise ValueError(f"{whose} numbers overflow float32 {when}: its weights are too large for a product (x² of "
                         "a norm, a matrix product: a damaged or rescaled file?)") from None


def streams(seed):  # -> a Generator, or a list of them
    """The random stream of a generation: one seed (or None) gives one stream for every row, a list of
    seeds one stream a row."""
    return [np.random.default_rng(s) for s in seed] if isinstance(seed, (list, tuple)) else np.random.default_rng(seed)


def sample_rows(logits, sampling: tuple, rng):  # [b, v] -> [b]
    """One id a row, from one random stream for the whole batch (a Generator: row i takes the batch's
    i-th uniform of each step), or from each row's own (a list of b Generators: row i draws what it
    draws alone)."""
    if isinstance(rng, list):
        if float(sampling[0]) != 0:
            return np.concatenate([np.asarray(sample_next.unchecked(logits[i:i + 1], *sampling, r)).reshape(-1)
                                   for i, r in enumerate(rng)])  # [b]
        rng = None  # greedy needs no stream: one call for the batch
    return np.asarray(sample_next.unchecked(logits, *sampling, rng)).reshape(-1)  # [b]


def decode_rows(step, x, max_new_tokens: int, sampling: tuple, *, rng, stop=frozenset(), pad: int = 0,
                stats: GenerationStats | None = None, suppress=()):
    """The loop: yields (the b new ids [b], which rows were still live [b] bool) at each step (NumPy), after
    feeding the prompts x [b, n_p]. A row that is no longer live was fed padding: its id is no output.

    step(ids [b, n]) -> logits [b, v] feeds new tokens and returns the last position's logits: the prompt
    at step 0 (prefill), then one token a row. sampling = (temperature, top_k, top_p), already checked:
    each token is sampled by the bare core, from rng (sample_rows: one stream, or one a row). A row that
    produced a stop id is done: it is fed `pad` from then on, and the loop ends when every row is done or
    after max_new_tokens steps. The logits are checked (NaN, +inf, a row of -inf) before anything is
    sampled from them. Timings go to `stats`.
    suppress: ids that are never chosen (padding, ids outside a trained vocabulary): their logits are set
    to -inf before sampling, so greedy and sampled steps alike pick among the others (HF's suppress_tokens).
    """
    stats = GenerationStats() if stats is None else stats
    stop_ids = np.fromiter(stop, dtype=np.int64, count=len(stop))
    banned = np.fromiter(suppress, dtype=np.int64, count=len(suppress))
    done = np.zeros(x.shape[0], dtype=bool)
    t0 = time.perf_counter()
    for s in range(max_new_tokens):
        logits = overflow_named(lambda: step(x), "the model's", f"at generation step {s}")  # [b, v]
        logits = to_host(logits)  # on the host (syncs the device)
        sampling_checks.step_logits(logits, s)  # NaN or +inf: named with the step, never sampled
        if banned.size:  # a copy: an engine may reuse its logits buffer at the next step
            logits = logits.copy()
            logits[:, banned] = -np.inf  # [b, v]
            sampling_checks.step_logits(logits, s)  # every id left at -inf: "no token is possible", named
        nxt = sample_rows(logits, sampling, rng)  # [b]
        t1 = time.perf_counter()
        stats.steps.append(t1 - t0)
        stats.prefill_s, stats.decode_s = stats.steps[0], sum(stats.steps[1:])
        stats.new_tokens += x.shape[0]
        yield nxt, ~done
        done = done | np.isin(nxt, stop_ids)  # a new array: the live mask just yielded stays as it was
        if done.all():
            return
        x = np.where(done, pad, nxt)[:, None].astype(np.int64)  # [b, 1]; finished rows feed padding
        t0 = time.perf_counter()


def device_kind(model, cache, sampling: tuple, stop, suppress=()) -> str | None:
    """Where the decode step runs on the device, how (decode_graph.RUNNERS), else None.

    model.device_step says which runner a model asks for: "graph" by default, which applies to a CuPy
    model in float32 with the contiguous KVCache of one sequence, sampling greedy or at a temperature, with
    or without top-k and top-p (filtered on the device by the host's rule), at most one end token, no ids
    suppressed (the device samples over every id; the host loop masks them); RoPE in
    either layout (a trained decoder's rotate-half one through reordered columns, decode_plan.device_matrices).
    "recorded" and "twins" run the same step's NumPy twins on the CPU (slow: for tests and lessons).
    None: the host loop, always."""
    kind, w = getattr(model, "device_step", None), model.weights
    on_gpu = type(w.W_E).__module__.split(".")[0] == "cupy"  # not NumPy, nor array-api-strict
    if kind is None or kind not in (("graph", "kernels") if on_gpu else ("recorded", "twins")):
        return None
    one_row = type(cache) is KVCache and cache.k[0].shape[0] == 1 and cache.length == 0
    plain = len(stop) <= 1 and not suppress and model.fast_path
    return kind if one_row and plain and w.W_E.dtype == np.float32 else None


_MATRICES: dict = {}  # id(weights) -> (a weak reference to them, their device_matrices): made once per model


def matrices_of(w, cfg):  # LlamaWeights -> device_matrices(w, cfg), made on the first call for these weights
    held = _MATRICES.get(id(w))
    if held is None or held[0]() is not w:
        held = _MATRICES[id(w)] = (weakref.ref(w), device_matrices(w, cfg, get_xp(w.W_E)))
        weakref.finalize(w, _MATRICES.pop, id(w), None)
    return held[1]


def device_rows(kind: str, model, x, cache, cos, sin, max_new_tokens: int, sampling: tuple, seed, stop,
                stats: GenerationStats):
    """The loop of decode_rows with its steps on the device: yields (the new id [1], [True]) as decode_rows.

    Prefill through the readable engine gives the first id (by the device's rule: argmax, or Gumbel-max on
    the counter stream u(seed, step, i) over the tokens top-k and top-p keep); then a DecodeStep runs in
    `kind` (decode_graph.StepRunner), which samples on the device and stops at the end token or after
    max_new_tokens. The cache advances by the tokens the steps fed through it."""
    temperature, top_k, top_p = sampling
    seed = int(np.random.SeedSequence().entropy) & 0xFFFFFFFF if seed is None else int(seed)  # the stream u(seed, ·, ·)
    t0 = time.perf_counter()
    logits = to_host(through_cache(model.readable_engine, x, cache, cos, sin))  # [1, v] on the host
    sampling_checks.step_logits(logits, 0)
    first = first_token(logits[0], temperature, seed, top_k, top_p)
    stats.engine, stats.new_tokens = kind, 1
    stats.prefill_s = time.perf_counter() - t0
    stats.steps.append(stats.prefill_s)
    yield np.array([first]), np.array([True])
    eos = next(iter(stop), -1)
    if max_new_tokens <= 1 or first == eos:
        return
    step = DecodeStep(model.weights, model.config, cache, cos, sin, max_new_tokens, temperature=temperature,
                      seed=seed, top_k=top_k, top_p=top_p, eos=eos, mats=matrices_of(model.weights, model.config),
                      xp=get_xp(model.weights.W_E))
    runner, fed = StepRunner(step, kind), 0
    order = half_to_interleaved_order(1, model.config.d_h) if model.config.rope_layout == "half" else None
    if order is not None:  # the step's keys come in adjacent pairs (decode_plan.device_matrices): so must the prompt's
        reorder_keys(cache, order)
    try:
        for ids in runner.run(first, x.shape[1]):
            fed += len(ids)
            stats.decode_s += runner.seconds[-1]
            stats.steps += [runner.seconds[-1] / max(len(ids), 1)] * len(ids)
            for i in ids:
                stats.new_tokens += 1
                yield np.array([i]), np.array([True])
    finally:  # also when the caller stops early: the cache is left as the readable engine writes it
        if order is not None:
            reorder_keys(cache, np.argsort(order))
    cache.written = [cache.length + fed] * len(cache.written)  # each step wrote its input token's keys and values
    cache.advance(fed)


def reorder_keys(cache, order):  # KVCache, [d_h] -> the same cache, each key's features in that order
    """K[..., j] ← K[..., order[j]] in every layer: the rotate-half layout's keys as adjacent RoPE pairs, or back."""
    for K in cache.k:
        K[...] = get_xp(K).take(K, get_xp(K).asarray(order), axis=-1)  # [b, h_kv, n_max, d_h]
