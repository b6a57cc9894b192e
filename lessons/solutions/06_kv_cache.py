"""Solutions to the "Try it" exercises of lesson 06 (the KV cache).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
"""
import numpy as np

# Llama-2-7B, as published in meta-llama/Llama-2-7b-hf's config.json on the Hugging Face Hub:
# 32 layers, hidden size 4096, 32 attention heads and no num_key_value_heads (so 32 KV heads: plain
# multi-head attention), intermediate size 11008, vocabulary 32000. Weights in float16.
LLAMA_2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
              "vocab_size": 32000, "tie_word_embeddings": False}


def exercise_1():
    """KV bytes per token of Llama-2-7B in float16: d_h = 4096 / 32 = 128, and every one of the
    32 heads keeps its own key and value: 2 · L · h_kv · d_h · 2 bytes = 2 · 32 · 32 · 128 · 2 =
    524,288 bytes = 512 KiB per token, 11.4 × SmolLM2's 46,080 (float32) and 22.8 × its 23,040 in float16."""
    L, h_kv, d_h, nbytes = 32, 32, 4096 // 32, 2
    return 2 * L * h_kv * d_h * nbytes


def check_1(answer, T):
    got = T.kv_cache_bytes_per_token(LLAMA_2_7B, dtype="float16")
    assert answer == got == 512 * 1024, (answer, got)
    assert round(answer / 46_080, 1) == 11.4 and round(answer / 23_040, 1) == 22.8  # the ratios the docstring quotes


def exercise_2():
    """Llama-2-7B's full context, 4096 tokens, for a batch of 8 sequences: 8 · 4096 · 512 KiB =
    16 GiB of cache, more than the 13.5 GB (6.74 billion parameters · 2 bytes) of the weights."""
    return 8 * 4096 * 524_288


def check_2(answer, T):
    got = T.kv_cache_bytes(LLAMA_2_7B, 4096, batch=8, dtype="float16")
    assert answer == got == 16 * 2 ** 30, (answer, got)
    assert got > 2 * T.count_parameters(LLAMA_2_7B)  # the cache outweighs the float16 weights


def sequence():  # q, k, v of (b, h, n, d_h) = (1, 2, 8, 4) for 8 positions, the same for exercise and check
    rng = np.random.default_rng(6)
    return tuple(rng.normal(size=(1, 2, 8, 4)) for _ in range(3))


def exercise_3():
    """A KV cache in a few lines of NumPy: allocate K, V once for n_max = 8 positions, prefill the
    first 5 (their keys and values written at [0, 5)), then decode positions 5, 6, 7 one at a time:
    write the new key and value at [length], and let the one new query attend to keys [0, length + 1).
    No mask is needed: every cached key is in the past. The three decoded rows are the last three
    rows of causal attention over all 8 positions, computed once without a cache."""
    q, k, v = sequence()  # (b, h, n, d_h) each
    b, h, n_max, d_h = k.shape
    K, V = np.zeros((b, h, n_max, d_h)), np.zeros((b, h, n_max, d_h))  # the cache, allocated once
    K[:, :, :5], V[:, :, :5] = k[:, :, :5], v[:, :, :5]  # prefill
    length, rows = 5, []
    for t in range(5, 8):  # decode: one new position per step
        K[:, :, length], V[:, :, length] = k[:, :, t], v[:, :, t]  # written by slice, nothing copied
        length += 1
        s = q[:, :, t:t + 1] @ K[:, :, :length].swapaxes(-1, -2) / np.sqrt(d_h)  # (b, h, 1, length)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        rows.append(e / e.sum(axis=-1, keepdims=True) @ V[:, :, :length])  # (b, h, 1, d_h)
    return np.concatenate(rows, axis=2)  # (b, h, 3, d_h)


def check_3(answer, T):
    q, k, v = sequence()
    full = T.scaled_dot_product_attention(q, k, v, mask=T.causal_mask(8))  # (b, h, n, d_h), no cache
    np.testing.assert_allclose(answer, full[:, :, 5:], rtol=1e-10, atol=1e-12)
