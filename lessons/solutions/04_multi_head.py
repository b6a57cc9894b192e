"""Solutions to the "Try it" exercises of lesson 04 (many heads).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
"""
import numpy as np


def exercise_1():
    """GPT-2 small: d_model = 768, h = 12, so d_k = 768 / 12 = 64. X of shape (b, n, d) = (1, 5, 768)
    splits into (b, h, n, d_k) = (1, 12, 5, 64), and head 3 holds columns 3·64 … 4·64 − 1 = 192 … 255."""
    d, h = 768, 12
    d_k = d // h
    return {"shape": (1, h, 5, d_k), "head_3_columns": (3 * d_k, 4 * d_k)}


def check_1(answer, T):
    x = np.random.default_rng(0).normal(size=(1, 5, 768))  # (b, n, d)
    heads = T.split_heads(x, 12)  # (b, h, n, d_k)
    lo, hi = answer["head_3_columns"]
    assert heads.shape == answer["shape"], heads.shape
    assert np.array_equal(heads[0, 3], x[0, :, lo:hi])


def projections():  # Q, K, V of (b, n, d) = (1, 5, 12), the same for the exercise and its check
    rng = np.random.default_rng(4)
    return rng.normal(size=(1, 5, 12)), rng.normal(size=(1, 5, 12)), rng.normal(size=(1, 5, 12))


def exercise_2():
    """Multi-head attention as a loop, h = 3 heads of d_k = 12 / 3 = 4: head i owns columns
    4i … 4i + 3 of Q, K and V; run attention on each slice by itself (scores, softmax, P V, written
    out), then glue the h outputs side by side. That is what split_heads → attention → merge_heads
    does in one batched call, without the loop."""
    Q, K, V = projections()  # (b, n, d) each
    h, d_k = 3, 12 // 3
    outs = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)  # head i's columns
        s = Q[:, :, cols] @ K[:, :, cols].swapaxes(-1, -2) / np.sqrt(d_k)  # (b, n, n)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)  # (b, n, n), rows sum to 1
        outs.append(p @ V[:, :, cols])  # (b, n, d_k)
    return np.concatenate(outs, axis=-1)  # (b, n, h·d_k)


def check_2(answer, T):
    Q, K, V = projections()
    heads = [T.split_heads(x, 3) for x in (Q, K, V)]  # (b, h, n, d_k) each
    got = T.merge_heads(T.scaled_dot_product_attention(*heads))  # (b, n, d)
    np.testing.assert_allclose(answer, got, rtol=1e-10, atol=1e-12)


def exercise_3():
    """Predict: does the number of heads change the attention parameters? No. With d_k = d / h, the
    h heads' W_q together are d × (h·d_k) = d × d, and so are W_k, W_v, W_o: 4·d² per layer
    (no biases in Llama-style layers). For d = 576 and 30 layers: 30 · 4 · 576² = 39,813,120."""
    return 30 * 4 * 576 * 576


def check_3(answer, T):
    for h in (1, 4, 9, 16):  # 576 = h · d_k for each of them
        cfg = {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
               "num_attention_heads": h, "num_key_value_heads": h, "vocab_size": 49152}
        got = T.parameter_breakdown(cfg)["attention"]
        assert answer == got, (h, answer, got)
