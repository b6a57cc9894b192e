"""Solutions to lesson 18's "Try it" (one training step, by hand)."""
import math

import numpy as np


def exercise_1():
    """Logits z = (2, 0, 0), target 0, one scored position (N = 1). softmax(z) = (e², 1, 1) / (e² + 2)
    = (0.7870, 0.1065, 0.1065); minus the one-hot (1, 0, 0): ∂L/∂z = (−0.2130, 0.1065, 0.1065).
    The three add up to 0: raising every logit by the same amount changes nothing."""
    s = math.exp(2) + 2
    return [math.exp(2) / s - 1, 1 / s, 1 / s]


def check_1(answer, T):
    logits = np.array([[[2.0, 0.0, 0.0]]])  # (b, n, v) = (1, 1, 3)
    got = T.cross_entropy_backward(logits, np.array([[0]]))[0, 0]
    np.testing.assert_allclose(answer, got, rtol=1e-12)


def exercise_2():
    """Step 1 of AdamW, η = 0.01, λ = 0.1, g = −0.2, θ = 0.5.
    Matrix entry: decay first, θ(1 − ηλ) = 0.5 · 0.999 = 0.4995; then m̂ = g, v̂ = g², so the step is
    −η · g / (|g| + ε) = +0.01 · 0.2 / (0.2 + 10⁻⁸) ≈ +0.01: θ = 0.5095.
    A norm's gain is not decayed: θ = 0.5 + 0.01 = 0.51."""
    step = 0.01 * 0.2 / (0.2 + 1e-8)
    return 0.5 * (1 - 0.01 * 0.1) + step, 0.5 + step


def check_2(answer, T):
    params = {"W": np.array([[0.5]]), "gain": np.array([0.5])}  # a matrix (decayed) and a vector (not)
    grads = {"W": np.array([[-0.2]]), "gain": np.array([-0.2])}
    T.adamw_step(params, grads, T.adamw_state(params), 0.01, weight_decay=0.1)
    np.testing.assert_allclose(answer, (params["W"][0, 0], params["gain"][0]), rtol=1e-12)


def exercise_3():
    """The model: d = 64, h = h_kv = 2, d_h = 32, L = 2; b = 1, n = 512, float32 (4 bytes), ids int64.
    Per layer: 4·n·d = 131 072 (x, a, x_mid, f) + 2·h·n·d_h = 65 536 (q, o) + 2·h_kv·n·d_h = 65 536 (k, v)
    + the weights P, h·n² = 524 288 (plain) or the log-sum-exp, h·n = 1 024 (tiled).
    Once: 2·n·d = 65 536 (x_final, h) + n·d_h = 16 384 (cos and sin), and 8·n = 4 096 bytes of ids.
    Plain: (2 · 786 432 + 81 920) · 4 + 4 096 = 6 623 232 bytes (6.3 MiB);
    tiled: (2 · 263 168 + 81 920) · 4 + 4 096 = 2 437 120 bytes (2.3 MiB)."""
    per_layer = 4 * 512 * 64 + 2 * 2 * 512 * 32 + 2 * 2 * 512 * 32
    once = 2 * 512 * 64 + 512 * 32
    plain = (2 * (per_layer + 2 * 512 * 512) + once) * 4 + 8 * 512
    tiled = (2 * (per_layer + 2 * 512) + once) * 4 + 8 * 512
    return plain, tiled


def check_3(answer, T):
    cfg = T.DecoderConfig(**{**T.INDUCTION_SIZES, "n_max": 512})
    assert answer == (T.activation_bytes(cfg, 1, 512), T.activation_bytes(cfg, 1, 512, attention="tiled")), answer
