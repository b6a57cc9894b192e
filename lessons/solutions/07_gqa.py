"""Solutions to the "Try it" exercises of lesson 07 (grouped-query attention).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
"""
import numpy as np

# Qwen2.5-7B, as published in Qwen/Qwen2.5-7B's config.json and model card on the Hugging Face Hub:
# 28 layers, hidden size 3584, 28 query heads and 4 key/value heads ("Number of Attention Heads (GQA):
# 28 for Q and 4 for KV"), intermediate size 18944, vocabulary 152064. Weights in bfloat16.
QWEN2_5_7B = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
              "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
              "vocab_size": 152064, "tie_word_embeddings": False}


def exercise_1():
    """KV bytes per token of Qwen2.5-7B in bfloat16: d_h = 3584 / 28 = 128, h_kv = 4:
    2 · 28 · 4 · 128 · 2 = 57,344 bytes (56 KiB). With a KV head per query head (MHA) it would be
    2 · 28 · 28 · 128 · 2 = 401,408 bytes: GQA saves h / h_kv = 7×, 85.7 %."""
    L, h, h_kv, d_h, nbytes = 28, 28, 4, 3584 // 28, 2
    gqa = 2 * L * h_kv * d_h * nbytes
    mha = 2 * L * h * d_h * nbytes
    return {"gqa": gqa, "mha": mha, "saving": 1 - gqa / mha}


def check_1(answer, T):
    gqa = T.kv_cache_bytes_per_token(QWEN2_5_7B, dtype="bfloat16")
    mha = T.kv_cache_bytes_per_token(dict(QWEN2_5_7B, num_key_value_heads=28), dtype="bfloat16")
    assert (answer["gqa"], answer["mha"]) == (gqa, mha) == (57_344, 401_408), (answer, gqa, mha)
    assert abs(answer["saving"] - (1 - gqa / mha)) < 1e-12


def exercise_2():
    """Which KV head does query head 13 of Qwen2.5-7B read? h / h_kv = 28 / 4 = 7 query heads share
    each KV head: heads 0–6 read KV head 0, 7–13 read KV head 1, … so head 13 reads KV head 13 // 7 = 1."""
    return 13 // (28 // 4)


def check_2(answer, T):
    kv = np.arange(4, dtype=float)[None, :, None, None] * np.ones((1, 4, 2, 3))  # (b, h_kv, n, d_h): head j is all j
    expanded = T.repeat_kv(kv, 7)  # (b, h, n, d_h)
    assert np.all(expanded[0, 13] == answer), (answer, expanded[0, 13, 0, 0])


def heads():  # q (b, h, n, d_h) = (1, 4, 5, 3); k, v with h_kv = 2 heads; the same for exercise and check
    rng = np.random.default_rng(7)
    return rng.normal(size=(1, 4, 5, 3)), rng.normal(size=(1, 2, 5, 3)), rng.normal(size=(1, 2, 5, 3))


def exercise_3():
    """GQA with h = 4 query heads and h_kv = 2 groups, in NumPy: repeat each KV head h / h_kv = 2
    times along the head axis with np.repeat (heads 0, 0, 1, 1: query heads 0–1 read KV head 0,
    2–3 read KV head 1), then run ordinary attention head by head. np.tile would give 0, 1, 0, 1 and
    pair query heads 1 and 2 with the wrong group."""
    q, k, v = heads()
    k_rep, v_rep = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)  # (b, h, n, d_h)
    s = q @ k_rep.swapaxes(-1, -2) / np.sqrt(q.shape[-1])  # (b, h, n, n)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    tiled = np.tile(k, (1, 2, 1, 1))  # (b, h, n, d_h): KV heads 0, 1, 0, 1
    wrong = [i for i in range(4) if not np.array_equal(tiled[:, i], k_rep[:, i])]  # query heads tile misroutes
    return {"k_rep": k_rep, "out": e / e.sum(axis=-1, keepdims=True) @ v_rep, "tile_misroutes": wrong}


def check_3(answer, T):
    q, k, v = heads()
    np.testing.assert_array_equal(answer["k_rep"], T.repeat_kv(k, 2))
    got = T.scaled_dot_product_attention(q, k, v)  # GQA inside: h_kv = 2 heads serve 4 queries
    np.testing.assert_allclose(answer["out"], got, rtol=1e-10, atol=1e-12)
    tiled = np.tile(k, (1, 2, 1, 1))  # (b, h, n, d_h): KV heads 0, 1, 0, 1
    misrouted = [i for i in range(4) if not np.array_equal(tiled[:, i], T.repeat_kv(k, 2)[:, i])]
    assert answer["tile_misroutes"] == misrouted == [1, 2], (answer["tile_misroutes"], misrouted)
