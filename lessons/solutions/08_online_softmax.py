"""Solutions to the "Try it" exercises of lesson 08 (online softmax).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
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


def row():  # one row of n = 100 scores and its values (n, d_v) = (100, 4), the same for exercise and check
    rng = np.random.default_rng(8)
    return 3 * rng.normal(size=100), rng.normal(size=(100, 4))


def exercise_3():
    """The recurrence of §3 as a NumPy loop, one key at a time, on a row of 100 scores with values of
    d_v = 4: carry m, l and the unnormalised output o; when the max grows, rescale l and o by
    e^(m_old − m_new) before adding the new key's e^(s_j − m_new) and e^(s_j − m_new)·v_j. Divide by l
    at the end. By hand, on the scores 1, 3, 2 with values 10, 20, 30: o = 10, then
    10·e^(1−3) + 20 = 21.353, then 21.353 + 30·e^(2−3) = 32.389; l = 1.5032; o / l = 21.546."""
    s, v = row()  # (n,), (n, d_v)
    m, l, o = -np.inf, 0.0, np.zeros(v.shape[1])
    for s_j, v_j in zip(s, v):
        m_new = max(m, s_j)
        alpha = np.exp(m - m_new)  # 0 on the first key (m = −inf), 1 while the max holds
        l = l * alpha + np.exp(s_j - m_new)
        o = o * alpha + np.exp(s_j - m_new) * v_j  # (d_v,)
        m = m_new
    return {"out": o / l, "m": m, "l": l}


def check_3(answer, T):
    s, v = row()
    np.testing.assert_allclose(answer["out"], T.softmax(s) @ v, rtol=1e-10, atol=1e-12)  # the two-pass result
    m, l = T.online_softmax_history(s, block=1)  # the package's running (m, l); the last step is the row's
    assert np.isclose(answer["m"], m[-1], rtol=1e-12) and np.isclose(answer["l"], l[-1], rtol=1e-10), (answer, m[-1], l[-1])
