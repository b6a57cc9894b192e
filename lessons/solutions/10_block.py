"""Solutions to lesson 10's "Try it" (the Transformer block)."""
import math

import numpy as np


def exercise_1():
    """LayerNorm of x = (1, 2, 3, 4) with γ = 1, β = 0, ε = 0: mean 2.5, variance
    (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, so (x − 2.5) / √1.25 = (−1.342, −0.447, 0.447, 1.342).
    RMSNorm: mean square (1 + 4 + 9 + 16) / 4 = 7.5, so x / √7.5 = (0.365, 0.730, 1.095, 1.461)."""
    s = math.sqrt(1.25)
    r = math.sqrt(7.5)
    return [-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s], [1 / r, 2 / r, 3 / r, 4 / r]


def check_1(answer, T):
    x, ones = np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4)
    np.testing.assert_allclose(answer[0], T.layer_norm(x, ones, eps=0.0), rtol=1e-12)
    np.testing.assert_allclose(answer[1], T.rms_norm(x, ones, eps=0.0), rtol=1e-12)


def exercise_2():
    """A SwiGLU FFN has three d × d_ff matrices. SmolLM2-135M: d = 576, d_ff = 1536, so one layer's
    FFN holds 3 · 576 · 1536 = 2 654 208 weights, and its L = 30 layers 79 626 240 (config.json of
    HuggingFaceTB/SmolLM2-135M: hidden_size 576, intermediate_size 1536, num_hidden_layers 30).
    A plain FFN of width 4d would hold 2 · 576 · 2304 = 2 654 208 per layer: the same, which is
    why d_ff ≈ 8d/3 is chosen."""
    return 30 * 3 * 576 * 1536, 2 * 576 * (4 * 576)


def check_2(answer, T):
    assert answer[0] == T.parameter_breakdown("smollm2-135m")["ffn"], answer
    assert answer[1] == answer[0] // 30


def ffn_weights():  # x (b, n, d) = (2, 3, 4), W_gate, W_up (d, d_ff) = (4, 6), W_down (6, 4)
    rng = np.random.default_rng(10)
    return rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), rng.normal(size=(6, 4))


def exercise_3():
    """SwiGLU in three lines of NumPy: SiLU(a) = a · σ(a) = a / (1 + e^(−a)) on the gate's projection,
    times the up projection element by element, then down: (SiLU(x W_gate) ∘ x W_up) W_down."""
    x, W_gate, W_up, W_down = ffn_weights()
    a = x @ W_gate  # (b, n, d_ff)
    hidden = a / (1 + np.exp(-a)) * (x @ W_up)  # (b, n, d_ff): the gate scales each unit
    return hidden @ W_down  # (b, n, d)


def check_3(answer, T):
    np.testing.assert_allclose(answer, T.swiglu_ffn(*ffn_weights()), rtol=1e-10, atol=1e-12)
