"""Solutions to the "Try it" exercises of lesson 08 (online softmax).

Each exercise_k() works the answer out by hand; check_k(answer, T) recomputes it with the package.
"""
import math

import numpy as np


def exercise_1():
    """The running state (m, l) after each of the scores 1, 3, 2, one at a time.

    start: m = 1, l = e^0 = 1
    read 3: new max 3; the old sum is rescaled, l = 1·e^(1−3) + e^0 = 0.1353 + 1 = 1.1353
    read 2: max stays 3; l = 1.1353 + e^(2−3) = 1.1353 + 0.3679 = 1.5032
    """
    m1, l1 = 1.0, 1.0
    m2 = max(m1, 3.0)
    l2 = l1 * math.exp(m1 - m2) + math.exp(3.0 - m2)
    m3 = max(m2, 2.0)
    l3 = l2 * math.exp(m2 - m3) + math.exp(2.0 - m3)
    return {"m": [m1, m2, m3], "l": [l1, l2, l3]}


def check_1(answer, T):
    m, l = T.online_softmax_history(np.array([1.0, 3.0, 2.0]), block=1)
    assert np.allclose(answer["m"], m) and np.allclose(answer["l"], l, rtol=1e-12), (answer, m, l)
    assert np.allclose(answer["l"][-1], 1.5032, atol=5e-5)


def exercise_2():
    """Merge two halves of a row: (m_a, l_a) = (3, 1.5) and (m_b, l_b) = (5, 2).
    m = max(3, 5) = 5; l = 1.5·e^(3−5) + 2·e^(5−5) = 1.5·0.1353 + 2 = 2.2030."""
    m = max(3.0, 5.0)
    return m, 1.5 * math.exp(3.0 - m) + 2.0 * math.exp(5.0 - m)


def check_2(answer, T):
    m, l = T.merge_softmax_stats(np.array(3.0), np.array(1.5), np.array(5.0), np.array(2.0))
    assert np.allclose(answer, (m, l), rtol=1e-12), (answer, m, l)


def exercise_3():
    """The output after the scores 1, 3, 2 with values 10, 20, 30, kept unnormalised and rescaled:
    after 1: O = 10 (weight e^0);  after 3: O = 10·e^(1−3) + 20 = 21.353;
    after 2: O = 21.353 + 30·e^(2−3) = 32.389. Divide by l = 1.5032 at the end: 21.546,
    the softmax-weighted mean of the values."""
    o1 = 10.0
    o2 = o1 * math.exp(1.0 - 3.0) + 20.0
    o3 = o2 * math.exp(3.0 - 3.0) + 30.0 * math.exp(2.0 - 3.0)
    l3 = (1.0 * math.exp(1.0 - 3.0) + 1.0) + math.exp(2.0 - 3.0)
    return o3 / l3


def check_3(answer, T):
    s, v = np.array([[[[1.0, 3.0, 2.0]]]]), np.array([[[[10.0], [20.0], [30.0]]]])  # (b, h, 1, n), (b, h, n, 1)
    o = T.online_softmax(s[0, 0, 0]) @ v[0, 0, :, 0]  # the full softmax, then the weighted sum
    assert np.isclose(answer, o, rtol=1e-12), (answer, o)
    q, k = np.ones((1, 1, 1, 1)), s.reshape(1, 1, 3, 1)  # q·k_j = s_j with d_k = 1 and scale 1
    flash = T.flash_attention(q, k, v, scale=1.0, block_k=1)  # one key per step: the recurrence above
    assert np.isclose(answer, flash[0, 0, 0, 0], rtol=1e-12), (answer, flash)
