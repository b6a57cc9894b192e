"""Solutions to the "Try it" exercises of lesson 02 (positions).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
"""
import cmath
import math

import numpy as np


def exercise_1():
    """Write the sinusoidal table in NumPy, n = 8 positions, d = 6: PE[pos, 2i] = sin(pos·ω_i) and
    PE[pos, 2i+1] = cos(pos·ω_i) with ω_i = 10000^(-2i/d). One outer product gives every angle.

    By hand, row pos = 1 has the clocks ω = (1, 10000^(-1/3) = 0.0464, 10000^(-2/3) = 0.00215):
    PE[1] = [sin 1, cos 1, sin 0.0464, cos 0.0464, …] = [0.8415, 0.5403, 0.0464, 0.9989, 0.00215, 1.0000].
    """
    n, d = 8, 6
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)  # (d/2,)
    angles = np.outer(np.arange(n), omega)  # (n, d/2): pos · ω_i
    pe = np.zeros((n, d))  # (n, d)
    pe[:, 0::2] = np.sin(angles)  # even columns
    pe[:, 1::2] = np.cos(angles)  # odd columns
    assert np.allclose(pe[1], [0.8415, 0.5403, 0.0464, 0.9989, 0.00215, 1.0000], atol=5e-5)  # the row by hand
    return pe


def check_1(answer, T):
    pe = T.sinusoidal_positions(8, 6, dtype=np.float64)  # (n, d)
    np.testing.assert_allclose(answer, pe, rtol=0, atol=1e-12)


def exercise_2():
    """RoPE in complex numbers: x = (1, 2, 3, 4) at position m = 2, d_h = 4. The pairs are
    z_0 = 1 + 2i and z_1 = 3 + 4i, turned by m·θ_i with θ = (1, 0.01):
    z_0·e^{2i} = (1 + 2i)(cos 2 + i sin 2) = (cos 2 − 2 sin 2) + i(sin 2 + 2 cos 2) = −2.235 + 0.077i,
    z_1·e^{0.02i} = 2.920 + 4.059i; read back as (re, im) pairs."""
    z = [complex(1, 2) * cmath.exp(2j * 1.0), complex(3, 4) * cmath.exp(2j * 0.01)]
    return [z[0].real, z[0].imag, z[1].real, z[1].imag]


def check_2(answer, T):
    cos, sin = T.rope_cos_sin(np.array([2]), 4, dtype=np.float64)  # (1, d_h/2)
    got = T.apply_rope_interleaved(np.array([[1.0, 2.0, 3.0, 4.0]]), cos, sin)[0]
    assert np.allclose(answer, got, atol=1e-12), (answer, got)


def exercise_3():
    """One pair, θ = 1, q = k = (1, 0). After RoPE, q at m is (cos m, sin m) and k at n is (cos n, sin n);
    their dot product is cos m cos n + sin m sin n = cos(n − m). Query at 5, key at 3: cos(−2) = −0.416;
    query at 2, key at 0: cos(−2), the same number. Query at 5, key at 5: cos 0 = 1."""
    return {(5, 3): math.cos(3 - 5), (2, 0): math.cos(0 - 2), (5, 5): math.cos(0)}


def check_3(answer, T):
    cos, sin = T.rope_cos_sin(np.arange(6), 2, dtype=np.float64)  # θ_0 = 1 for d_h = 2
    x = T.apply_rope_interleaved(np.tile([1.0, 0.0], (6, 1)), cos, sin)  # (n, d_h): (1, 0) placed at 0 … 5
    for (m, n), score in answer.items():
        assert np.isclose(score, x[m] @ x[n], atol=1e-12), ((m, n), score, x[m] @ x[n])
