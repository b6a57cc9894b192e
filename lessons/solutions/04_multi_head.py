"""Solutions to the "Try it" exercises of lesson 04 (many heads).

Each exercise_k() works the answer out by hand; check_k(answer, T) recomputes it with the package.
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


def exercise_2():
    """The original Transformer (base): d_model = 512. One attention block has W_q, W_k, W_v, W_o of
    512 × 512 and a bias of 512 each: 4·(512² + 512) = 1,050,624 parameters, whatever h is. The model
    has 18 such blocks (6 encoder self-attention, 6 decoder self-attention, 6 decoder cross-attention):
    18,911,232."""
    d = 512
    return 18 * 4 * (d * d + d)


def check_2(answer, T):
    got = T.parameter_breakdown("transformer-base")["attention"]
    assert answer == got, (answer, got)


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
