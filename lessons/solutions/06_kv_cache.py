"""Solutions to the "Try it" exercises of lesson 06 (the KV cache).

Each exercise_k() works the answer out by hand; check_k(answer, T) recomputes it with the package.
"""

# Llama-2-7B, as published in meta-llama/Llama-2-7b-hf's config.json on the Hugging Face Hub:
# 32 layers, hidden size 4096, 32 attention heads and no num_key_value_heads (so 32 KV heads: plain
# multi-head attention), intermediate size 11008, vocabulary 32000. Weights in float16.
LLAMA_2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
              "vocab_size": 32000, "tie_word_embeddings": False}


def exercise_1():
    """KV bytes per token of Llama-2-7B in float16: d_h = 4096 / 32 = 128, and every one of the
    32 heads keeps its own key and value: 2 · L · h_kv · d_h · 2 bytes = 2 · 32 · 32 · 128 · 2 =
    524,288 bytes = 512 KiB per token, 10 × SmolLM2's 46,080 (float32) and 22.8 × its 23,040 in float16."""
    L, h_kv, d_h, nbytes = 32, 32, 4096 // 32, 2
    return 2 * L * h_kv * d_h * nbytes


def check_1(answer, T):
    got = T.kv_cache_bytes_per_token(LLAMA_2_7B, dtype="float16")
    assert answer == got == 512 * 1024, (answer, got)


def exercise_2():
    """Llama-2-7B's full context, 4096 tokens, for a batch of 8 sequences: 8 · 4096 · 512 KiB =
    16 GiB of cache, more than the 13.5 GB (6.74 billion parameters · 2 bytes) of the weights."""
    return 8 * 4096 * 524_288


def check_2(answer, T):
    got = T.kv_cache_bytes(LLAMA_2_7B, 4096, batch=8, dtype="float16")
    assert answer == got == 16 * 2 ** 30, (answer, got)
    assert got > 2 * T.count_parameters(LLAMA_2_7B)  # the cache outweighs the float16 weights


def exercise_3():
    """SmolLM2-135M at its full context of 8192 tokens, float16: per token 2 · 30 · 3 · 64 · 2 = 23,040
    bytes (half the float32 figure of the lesson); times 8192 = 188,743,680 bytes = 180 MiB."""
    return 2 * 30 * 3 * 64 * 2 * 8192


def check_3(answer, T):
    got = T.kv_cache_bytes("smollm2-135m", 8192, dtype="float16")
    assert answer == got, (answer, got)
