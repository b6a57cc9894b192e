"""Solutions to lesson 13's "Try it" (counting a model)."""


def exercise_1():
    """Where attention FLOPs pass the weights' in a prefill of Llama-3-8B with a causal kernel.

    Config (meta-llama/Meta-Llama-3-8B config.json): L = 32, d = 4096, h = 32, h_kv = 8,
    d_h = 128, d_ff = 14336, v = 128256. Weights a token is multiplied by, per layer:
    W_q, W_o 2 · 4096 · 4096 = 33 554 432; W_k, W_v 2 · 4096 · 1024 = 8 388 608;
    SwiGLU 3 · 4096 · 14336 = 176 160 768; so 218 103 808 per layer, 6 979 321 856 for 32
    layers, plus the LM head 128256 · 4096 = 525 336 576: N = 7 504 658 432.
    Weights: 2Nn. Dense attention 4 L h d_h n²; a causal kernel computes about half,
    2 L h d_h n². Equal at n* = N / (L h d_h) = 7 504 658 432 / 131 072 ≈ 57 256 tokens,
    twice the dense crossover."""
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    N = 32 * per_layer + 128256 * 4096
    return N / (32 * 32 * 128)


def check_1(answer, T):
    n = round(answer)
    f = T.prefill_flops("llama-3-8b", n)  # dense n × n scores, logits at every position
    causal_attention = f["attention"] / 2
    assert abs(causal_attention / f["matmul"] - 1) < 1e-4, (answer, causal_attention, f["matmul"])


def exercise_2():
    """KV bytes per token of Mistral-7B (mistralai/Mistral-7B-v0.1 config.json:
    num_hidden_layers 32, num_key_value_heads 8, hidden_size 4096 / num_attention_heads 32 =
    d_h 128), in float16: 2 (K and V) · 32 · 8 · 128 · 2 bytes = 131 072 bytes = 128 KiB.
    Without GQA (h_kv = h = 32) it would be four times that, 512 KiB."""
    return 2 * 32 * 8 * 128 * 2


def check_2(answer, T):
    mistral = T.from_hf({"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
                         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                         "vocab_size": 32000, "max_position_embeddings": 32768, "tie_word_embeddings": False},
                        name="mistral-7b")
    assert answer == T.kv_cache_bytes_per_token(mistral, "float16"), answer
