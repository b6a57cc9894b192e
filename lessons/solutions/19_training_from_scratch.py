"""Solutions to lesson 19's "Try it" (training from scratch)."""
import math

import numpy as np


def exercise_1():
    """Knowing nothing, the best guess is uniform over the 31 real tokens: loss ln 31 = 3.434 nats,
    the chance line of the loss curve. Knowing the answer is one of the m = 10 first-half tokens:
    uniform over them, ln 10 = 2.303 nats."""
    return math.log(31), math.log(10)


def check_1(answer, T):
    logits = np.zeros((1, 1, 32))
    logits[..., 0] = -np.inf  # id 0 is padding, never an answer: 31 tokens left, all equal
    assert abs(answer[0] - float(T.cross_entropy(logits, np.array([[5]])))) < 1e-12
    logits = np.full((1, 1, 32), -np.inf)
    logits[..., 1:11] = 0.0  # ten candidates, all equal
    assert abs(answer[1] - float(T.cross_entropy(logits, np.array([[5]])))) < 1e-12


def exercise_2():
    """Documents of 8, 12, 20 and 24 tokens (64 in all). Padded to the longest, 4 rows of 24 = 96 slots,
    96 − 64 = 32 of them padding. Packed first fit into rows of 64: 8, then 12 (20), then 20 (40), then 24
    (64, full): one row, no padding at all."""
    return 32, 0


def check_2(answer, T):
    docs = [np.arange(1, k + 1) for k in (8, 12, 20, 24)]
    got = T.padded_rows(docs, 24).padded_slots, T.packed_rows(docs, 64).padded_slots
    assert answer == got, (answer, got)


def exercise_3():
    """t₁ t₂ t₃ t₁ t₂ t₃, m = 3: the induction score reads rows i = m … 2m − 2 = 3, 4 at keys
    i − m + 1 = 1, 2 (query 3 holds t₁, whose earlier copy is at 0, followed by t₂ at key 1). A head
    putting all its weight on (3, 1) and (4, 2) scores (1 + 1) / 2 = 1."""
    return 1.0, [(3, 1), (4, 2)]


def check_3(answer, T):
    W = np.zeros((1, 1, 6, 6))  # (L, h, n, n)
    for q, k in answer[1]:
        W[0, 0, q, k] = 1.0
    for q in (0, 1, 2, 5):  # the other rows somewhere else: the score must not read them
        W[0, 0, q, 0] = 1.0
    assert abs(answer[0] - float(T.induction_head_scores(W, 3)["induction"][0, 0])) < 1e-12
