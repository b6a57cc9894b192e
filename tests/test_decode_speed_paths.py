"""The fast path (`llama_fast.FastForward`: fused weights, buffers made once) against the readable one.

References: `llama.forward` through the KV cache, the formulas as written (itself checked against HF
in test_llama.py), fed the same tokens into a second cache; HF transformers' greedy tokens, on
SmolLM2 and on small random Llamas (MHA, GQA, MQA; tied and untied; d ≠ h·d_h); hand-worked
examples for the fused storage and the left padding. Tolerance: the fast path's logits within
1e-5 of the largest |logit| (measured ~1.5e-6 on SmolLM2: float32 sums in another order).
"""
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformer as T  # noqa: E402
from transformer.core.paged_kv import PagedKVCache  # noqa: E402
from transformer.models import llama as llama_mod  # noqa: E402
from transformer.models import generation, llama_fast  # noqa: E402
from transformer.models.llama_fast import FastForward  # noqa: E402
from conftest import fresh_llama  # noqa: E402

REL = 1e-5  # |fast − readable| ≤ REL · max |readable logit|, every step
PROMPTS = ["The capital of France is",
           "def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n# 1, 1, 2, 3, 5 机器学习 😀",
           "Write a very long email apologizing to Sarah for the tragic gardening mishap."]


@pytest.fixture(scope="module")
def model(smollm2_loaded):  # conftest.py: read once per worker
    return fresh_llama(smollm2_loaded)


def assert_close_logits(fast, ref, what="logits"):
    fast, ref = np.asarray(fast), np.asarray(ref)
    err = np.abs(fast - ref).max() / np.abs(ref).max()
    assert err <= REL, f"fast {what} differ from the readable ones by {err:.2e} of the largest (limit {REL})"


def side_by_side(m, ids, n_new, *, fused=True, chunk=None):  # -> tokens of both, after checking each step
    """Greedy decoding of n_new tokens by forward() and by FastForward, each with its own cache; the
    prompt fed in chunks of `chunk` tokens (default all at once). Every step's logits are compared."""
    cfg, w = m.config, m.weights
    cos, sin = m.rope_tables(len(ids) + n_new)
    c_ref, c_fast = m.new_cache(1, len(ids) + n_new), m.new_cache(1, len(ids) + n_new)
    fast = FastForward(w, cfg, fused=fused)
    chunk = chunk or len(ids)
    for c0 in range(0, len(ids), chunk):
        part = np.asarray([ids[c0:c0 + chunk]])  # [1, n]
        ref = llama_mod.forward(part, w, cfg, cos, sin, cache=c_ref, last_only=True)[:, -1]  # [1, v]
        got = fast(part, c_fast, cos, sin, np.arange(c0, c0 + part.shape[1])[None])  # [1, v]
        assert_close_logits(got, ref)
    toks = []
    for _ in range(n_new):
        nxt = int(ref[0].argmax())
        assert int(got[0].argmax()) == nxt
        toks.append(nxt)
        t = c_ref.length
        ref = llama_mod.forward(np.asarray([[nxt]]), w, cfg, cos, sin, cache=c_ref, last_only=True)[:, -1]
        got = fast(np.asarray([[nxt]]), c_fast, cos, sin, np.asarray([[t]]))
        assert_close_logits(got, ref)
    assert c_ref.length == c_fast.length == len(ids) + n_new
    for layer in (0, cfg.L - 1):  # the caches hold the same keys and values
        assert_close_logits(c_fast.k[layer], c_ref.k[layer], f"keys of layer {layer}")
        assert_close_logits(c_fast.v[layer], c_ref.v[layer], f"values of layer {layer}")
    return toks


# --- the fused storage -------------------------------------------------------------------
def test_fuse_columns_hand_worked():
    """[W_1 | W_2] by hand; the parts are views: writing through one changes the fused matrix."""
    W1, W2 = np.array([[1.0], [2.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])
    W, (A, B) = llama_fast.fuse_columns(W1, W2)
    assert W.tolist() == [[1.0, 3.0, 4.0], [2.0, 5.0, 6.0]] and W.flags["C_CONTIGUOUS"]
    assert A.base is W and B.base is W and A.tolist() == W1.tolist() and B.tolist() == W2.tolist()
    x = np.array([[1.0, 10.0]])
    assert (x @ W).tolist() == [[21.0, 53.0, 64.0]] == np.concatenate([x @ A, x @ B], axis=1).tolist()
    B[1, 0] = 7.0
    assert W[1, 1] == 7.0


def test_joined_columns_finds_the_fused_matrix_only_from_its_own_consecutive_views():
    """The fast path finds [W_1 | W_2 | W_3] from the views alone: the same base, in order, covering it
    exactly; views out of order, of another base, of part of it, or a copy are not fused storage."""
    W, (A, B, C) = llama_fast.fuse_columns(np.ones((3, 2)), np.zeros((3, 1)), np.ones((3, 4)))
    assert llama_fast.joined_columns(A, B, C) is W
    assert llama_fast.joined_columns(B, A, C) is None  # out of order
    assert llama_fast.joined_columns(A, B) is None  # part of the base
    assert llama_fast.joined_columns(A.copy(), B, C) is None  # a copy: no base
    other, (D, E, F) = llama_fast.fuse_columns(np.ones((3, 2)), np.zeros((3, 1)), np.ones((3, 4)))
    assert llama_fast.joined_columns(A, E, C) is None  # another base


def test_left_padding_hand_worked():
    """Rows [7, 8] and [9], one new token, pad id 0: the short row is padded on the left, its
    positions count from its first real token, and the new column is real for both."""
    ids, valid, pos = generation.left_padded([[7, 8], [9]], 1, pad=0)
    assert ids.tolist() == [[7, 8], [0, 9]]
    assert valid.tolist() == [[True, True, True], [False, True, True]]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 1]]


def test_decode_matrices_hold_every_weight_once(model):
    """One decode step reads every parameter but the norm gains: (2L + 1)·d of them fewer than
    count_parameters (tested equal to HF's count), in 4 matrices a layer fused, 7 unfused, + the head."""
    cfg, w = model.config, model.weights
    mats = llama_fast.decode_matrices(w)
    assert len(mats) == 4 * cfg.L + 1 and mats[0].shape == (cfg.d, (cfg.h + 2 * cfg.h_kv) * cfg.d_h)
    assert sum(W.size for W in mats) == T.count_parameters(cfg) - (2 * cfg.L + 1) * cfg.d  # 134,480,448
    unfused = llama_fast.decode_matrices(w, fused=False)
    assert len(unfused) == 7 * cfg.L + 1 and sum(W.size for W in unfused) == sum(W.size for W in mats)


# --- the fast path equals the readable one -----------------------------------------------
@pytest.mark.parametrize("prompt", PROMPTS)
def test_fast_equals_forward_step_by_step(model, prompt):
    """Prefill in one pass, then 12 decode steps: logits within REL, the same greedy tokens, the
    same cache contents; greedy generate (which runs the fast path) gives those tokens too."""
    ids = model.tokenizer.encode(prompt)
    toks = side_by_side(model, ids, 12)
    assert model.generate(ids, max_new_tokens=12, stop_at_eos=False) == toks


def test_fast_equals_forward_unfused_and_in_chunks(model):
    """Reading the separate matrices (fused=False), and a prompt fed in chunks of 5 tokens (each
    chunk causal within itself and reading the earlier ones from the cache): the same."""
    ids = model.tokenizer.encode(PROMPTS[1])
    assert side_by_side(model, ids, 6, fused=False) == side_by_side(model, ids, 6, chunk=5)


def test_fast_all_positions_equal_forward(model):
    """last_only=False: the logits of every prompt position, as forward() gives them."""
    ids = model.tokenizer.encode(PROMPTS[0])
    cos, sin = model.rope_tables(len(ids))
    ref = llama_mod.forward(np.asarray([ids]), model.weights, model.config, cos, sin)  # [1, n, v], no cache
    got = FastForward(model.weights, model.config)(np.asarray([ids]), model.new_cache(1, len(ids)), cos, sin,
                                                   np.arange(len(ids))[None], last_only=False)
    assert got.shape == ref.shape
    assert_close_logits(got, ref)


def test_generate_runs_forward_only_where_the_fast_path_cannot(model, monkeypatch):
    """With the fast path, generate never calls forward(); fast_path=False and a paged cache do, and
    all three give the same tokens, as does recomputing without a cache."""
    calls = []
    real = llama_mod.forward
    monkeypatch.setattr(llama_mod, "forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    ids = model.tokenizer.encode(PROMPTS[2])
    fast = model.generate(ids, max_new_tokens=8, stop_at_eos=False)
    assert not calls and model.last_stats.engine == "fast"
    try:
        model.fast_path = False
        readable = model.generate(ids, max_new_tokens=8, stop_at_eos=False)
    finally:
        model.fast_path = True
    assert len(calls) == 8 and model.last_stats.engine == "readable"  # the prefill and 7 decode steps
    cfg = model.config
    paged = PagedKVCache(cfg.L, 1, cfg.h_kv, len(ids) + 8, cfg.d_h, block_size=4)
    assert not FastForward.applies(model.weights, paged)
    assert fast == readable == model.generate(ids, max_new_tokens=8, stop_at_eos=False, cache=paged)
    assert model.last_stats.engine == "readable"
    assert fast == model.generate(ids, max_new_tokens=8, stop_at_eos=False, use_cache=False)
    assert model.last_stats.engine == "no cache"


def test_batch_fast_equals_readable_and_one_by_one(model):
    """Prompts of different lengths, left-padded: the batched fast path (each step reads the
    weights once for all rows) gives each row the tokens it gets alone, and the readable batch's."""
    prompts = ["Hi", PROMPTS[0], "2 + 2 =", "Once upon a time, in a small village,"]
    fast = model.generate_batch(prompts, 8, stop_at_eos=False)
    st = model.last_stats
    assert st.batch == 4 and st.new_tokens == 32 and len(st.steps) == 8 and st.decode_tok_s > 0
    try:
        model.fast_path = False
        readable = model.generate_batch(prompts, 8, stop_at_eos=False)
    finally:
        model.fast_path = True
    assert fast == readable == [model.generate(p, 8, stop_at_eos=False) for p in prompts]


def test_batch_prefill_with_padding_equals_forward(model):
    """The padded prefill pass itself: a padded query sees no key at all, and gets the readable
    path's zero attention rather than NaN, so the real rows' logits agree (every position)."""
    rows = [model.tokenizer.encode(p) for p in ("Hi", PROMPTS[0])]
    ids, valid, pos = generation.left_padded(rows, 0, pad=0)
    n = ids.shape[1]
    cos, sin = model.rope_tables(n)
    ref = llama_mod.forward(ids, model.weights, model.config, cos, sin, cache=model.new_cache(2, n),
                            positions=pos, key_valid=valid)  # [2, n, v]
    got = FastForward(model.weights, model.config)(ids, model.new_cache(2, n), cos, sin, pos, valid,
                                                      last_only=False)
    assert np.isfinite(got).all()
    assert_close_logits(got[valid], ref[valid])


@pytest.mark.parametrize("h_kv,tied,d", [(4, True, 64), (2, False, 64), (1, True, 48)])  # MHA, GQA, MQA
def test_small_random_llamas_fast_equals_forward_and_hf(h_kv, tied, d):
    """h_kv ∈ {h, a divisor, 1}, tied and untied, d = 48 ≠ h·d_h = 64: the fast path step by step
    against forward(), and its greedy tokens against HF's LlamaForCausalLM holding the same weights."""
    pytest.importorskip("torch")
    import torch
    from hf_llama import hf_llama_holding

    cfg = llama_mod.LlamaConfig(L=2, d=d, h=4, h_kv=h_kv, d_h=16, d_ff=96, v=300, n_ctx=64, tied=tied)
    m = T.random_llama(cfg, seed=2, std=0.1)
    ids = [5, 17, 250, 3, 99, 42, 7]
    toks = side_by_side(m, ids, 8)
    with torch.no_grad():
        hf = hf_llama_holding(m).generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                          max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
    assert toks == hf[0, len(ids):].tolist()


def test_a_replaced_matrix_is_read_not_the_stale_fused_one(model):
    """A matrix replaced after loading breaks its link to the fused storage: the fast path then
    reads the separate matrices, so it still computes what forward() computes."""
    cfg, w = model.config, model.weights
    layers = list(w.layers)
    lw = layers[3]
    layers[3] = llama_mod.LayerWeights(**{**lw.__dict__, "W_q": lw.W_q * 1.5, "W_up": lw.W_up * 0.5})
    changed = llama_mod.LlamaWeights(W_E=w.W_E, layers=layers, norm=w.norm, W_out=w.W_out)
    assert llama_fast.fused_layer(changed, 3) is None and llama_fast.fused_layer(changed, 2) is not None
    m = llama_mod.Llama(cfg, changed, model.tokenizer)
    ids = model.tokenizer.encode(PROMPTS[0])
    side_by_side(m, ids, 4)
    assert np.abs(m.logits(ids) - model.logits(ids)).max() > 1.0  # the change is far above the tolerance


def test_full_cache_is_refused(model):
    cos, sin = model.rope_tables(8)
    cache = model.new_cache(1, 3)
    fast = FastForward(model.weights, model.config)
    fast(np.asarray([[1, 2, 3]]), cache, cos, sin, np.arange(3)[None])
    with pytest.raises(ValueError, match=r"n_max=3 tokens: 3 cached \+ 1 new do not fit"):
        fast(np.asarray([[4]]), cache, cos, sin, np.asarray([[3]]))


def test_generation_bytes_follow_the_path_that_runs():
    """The peak a 1,500-token prefill (passes of 512) holds, measured with tracemalloc, within 15 % of
    generation_bytes for each path: forward()'s SDPA_BUFFERS arrays of scores, the fast path's one
    array softmaxed in place (with its mask as booleans and a float32 bias), about 4× less."""
    import tracemalloc
    cfg = llama_mod.LlamaConfig(L=2, d=32, h=8, h_kv=2, d_h=4, d_ff=64, v=256, n_ctx=2048)  # the scores dominate
    m = T.random_llama(cfg, seed=1)
    ids = list(np.random.default_rng(0).integers(0, 256, 1500))
    peaks, formulas = {}, {}
    for fast in (True, False):
        m.fast_path = fast
        m.generate(ids[:600], max_new_tokens=1)  # warm-up: one-off buffers
        tracemalloc.start()
        tracemalloc.reset_peak()
        m.generate(ids, max_new_tokens=2, stop_at_eos=False)
        peaks[fast] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        formulas[fast] = m.generation_bytes(1500, 2)
    m.fast_path = True
    for fast in (True, False):
        assert abs(peaks[fast] - formulas[fast]) <= 0.15 * formulas[fast], (fast, peaks, formulas)
    assert formulas[False] > 3 * formulas[True]


def test_float16_weights_take_the_readable_engine_and_integer_weights_are_refused():
    """The fast engine views pairs of floats as complex numbers, which float16 has no NumPy type for: float16
    weights failed inside a reshape as soon as the cache was used. They take the readable engine, whose
    tokens equal the uncached pass's; integer weights are refused when the model is built."""
    cfg = llama_mod.LlamaConfig(L=2, d=32, h=4, h_kv=2, d_h=8, d_ff=48, v=64, n_ctx=64)
    w = T.random_llama(cfg, seed=0).weights

    def cast(dt):
        f = lambda a: None if a is None else a.astype(dt)  # noqa: E731
        layers = [type(lw)(**{k: f(v) for k, v in vars(lw).items()}) for lw in w.layers]
        return type(w)(**{**{k: f(v) for k, v in vars(w).items() if k != "layers"}, "layers": layers})
    m16 = llama_mod.Llama(cfg, cast(np.float16))
    cached = m16.generate([1, 2, 3], 8, stop_at_eos=False)
    assert m16.last_stats.engine == "readable"
    assert cached == m16.generate([1, 2, 3], 8, stop_at_eos=False, use_cache=False)
    with pytest.raises(TypeError, match="W_E must be a floating-point array, got dtype int32"):
        llama_mod.Llama(cfg, cast(np.int32))


def test_generation_bytes_count_what_grows_with_the_batch():
    """2,000 short prompts at once: the logits (b, v) and the copy sampling makes hold the peak, not the
    cache (2.6 MB). tracemalloc's peak within 15 % of generation_bytes (it counted the cache and the
    scores alone, 50× under, and a batch of 10⁵ prompts passed its memory check and took 13 GB)."""
    import tracemalloc
    cfg = llama_mod.LlamaConfig(L=2, d=32, h=4, h_kv=2, d_h=8, d_ff=64, v=8192, n_ctx=64)
    m = T.random_llama(cfg, seed=1)
    rows = [[1, 2, 3]] * 2000
    m.generate_batch(rows[:50], 1)  # warm-up: one-off buffers
    tracemalloc.start()
    tracemalloc.reset_peak()
    m.generate_batch(rows, 2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    formula = m.generation_bytes(3, 2, b=2000)
    assert abs(peak - formula) <= 0.15 * formula, (peak, formula)
    assert m.kv_cache_bytes(5, 2000) < 0.05 * formula


def test_a_batch_larger_than_the_memory_is_refused_before_its_cache(monkeypatch):
    from transformer.core import shared_checks
    monkeypatch.setattr(shared_checks, "available_bytes", lambda: 16 * 10**9)  # as a 16 GB machine
    m = T.random_llama()  # SmolLM2's shapes
    need = m.generation_bytes(2, 1, b=10**5)
    with pytest.raises(ValueError, match=rf"generating 100000 rows of 2 \+ 1 tokens would take {need / 1e9:,.1f} GB, "
                                         r"more than the 16.0 GB of memory available"):
        m.generate_batch([[1, 2]] * 10**5, 1)
    with pytest.raises(ValueError, match=r"n_prompt=10000000000 \+ max_new_tokens=1 tokens exceed the model's context"):
        m.generation_bytes(10**10, 1)  # took 6 s (a loop over its prefill passes), then answered 670 GB


# --- the benchmark's verdict on the machine -------------------------------------------------
def machine_state():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "machine_state.py"
    spec = importlib.util.spec_from_file_location("machine_state", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_others_cpu_hand_worked():
    """Over 10 s of wall time the machine was busy 14 CPU-seconds, 12 of them this process's own:
    other programs kept 0.2 cores busy on average, above the 0.1 allowed."""
    M = machine_state()
    a = {"busy_s": 100.0, "own_s": 5.0, "clock_s": 50.0}
    b = {"busy_s": 114.0, "own_s": 17.0, "clock_s": 60.0}
    use = M.others_cpu(a, b)
    assert use["others_cores"] == pytest.approx(0.2) and use["quiet"] is False
    assert M.others_cpu(a, {**b, "busy_s": 112.5})["quiet"] is True  # 0.05 cores
    assert M.others_cpu(None, b) is None
    snap = M.cpu_snapshot()
    assert snap is None or snap["busy_s"] >= 0 and snap["own_s"] > 0


def test_trust_line_says_why():
    M = machine_state()
    quiet_load = M.load_record([0.3, 0.2, 0.1], [1.9, 0.5, 0.2], cores=2, own=2)
    quiet_cpu = {"others_cores": 0.02, "limit_cores": 0.1, "quiet": True}
    line = M.trust_line(quiet_load, quiet_cpu)
    assert line.startswith("Trustworthy: yes") and "0.02 cores" in line
    busy_cpu = {"others_cores": 0.84, "limit_cores": 0.1, "quiet": False}
    line = M.trust_line(quiet_load, busy_cpu)
    assert line.startswith("Trustworthy: no") and "0.84 cores" in line and "load average" not in line
    line = M.trust_line(M.load_record([2.5, 2, 2], [1.0, 1, 1], cores=2, own=2), None)
    assert line.startswith("Trustworthy: no") and "2.50 at the start, above 1.0" in line


def test_bad_calls_are_refused_naming_the_value(model):
    """Shapes, ids, positions and the cache are checked at the door, one line each, never a
    traceback from inside NumPy."""
    cfg = model.config
    cos, sin = model.rope_tables(16)
    fast, cache = FastForward(model.weights, cfg), model.new_cache(1, 8)
    one = np.asarray([[5]])
    cases = [
        (lambda: fast(one, PagedKVCache(cfg.L, 1, cfg.h_kv, 8, cfg.d_h), cos, sin, one), TypeError,
         r"contiguous KVCache on NumPy arrays, got PagedKVCache"),
        (lambda: fast(np.asarray([5]), cache, cos, sin, one), ValueError, r"ids must be a NumPy \(b, n\) integer"),
        (lambda: fast(np.asarray([[1.0]]), cache, cos, sin, one), ValueError, r"integer array"),
        (lambda: fast(np.asarray([[cfg.v]]), cache, cos, sin, one), ValueError, r"token ids must lie in \[0, 49152\)"),
        (lambda: fast(np.asarray([[5], [6]]), cache, cos, sin, one), ValueError, r"ids hold b=2 sequences, the cache 1"),
        (lambda: fast(one, cache, cos, sin, np.asarray([[0, 1]])), ValueError,
         r"positions must have shape \(b, n\) = \(1, 1\) or \(1, 1\), got \(1, 2\)"),
        (lambda: fast(one, cache, cos, sin, np.asarray([[cos.shape[0]]])), ValueError, r"positions must lie in \[0, "),
        (lambda: fast(one, cache, cos, sin, one, np.ones((1, 3), bool)), ValueError,
         r"key_valid must be a \(b, t \+ n\) = \(1, 1\) boolean array, got \(1, 3\)"),
    ]
    for call, err, match in cases:
        with pytest.raises(err, match=match):
            call()
    assert cache.length == 0  # nothing was written
