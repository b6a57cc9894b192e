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
    score = lambda W: float(T.induction_head_scores(W[None, None], 3)["induction"][0, 0])  # noqa: E731  (n, n)
    read = set()
    for q, k in np.ndindex(6, 6):  # the cells the package's score reads: a weight there moves it
        one = np.zeros((6, 6))
        one[q, k] = 1.0
        if score(one) != 0:
            read.add((q, k))
    assert {tuple(c) for c in answer[1]} == read and len(answer[1]) == len(read), \
        f"the induction score reads {len(read)} cells, not {sorted(map(tuple, answer[1]))}"
    W = np.zeros((6, 6))
    for q, k in read:  # a head putting all the weight of those rows on them
        W[q, k] = 1.0
    for q in sorted({q for q in range(6)} - {q for q, _ in read}):  # the other rows elsewhere: not read
        W[q, 0] = 1.0
    assert abs(answer[0] - score(W)) < 1e-12, (answer[0], score(W))


def wrong_3():
    """The usual slip: the key of the earlier copy itself (i − m), not the token after it (i − m + 1)."""
    return 1.0, [(3, 0), (4, 1)]


def exercise_4():
    """The weights do not depend on h: W_q, W_k, W_v are d × h·d_h = 64 × 64 and W_o 64 × 64 whether
    that is 2 heads of 32 or 8 of 8. One layer: W_E 32·64 = 2 048; norm1, norm2 64 each; W_q, W_k,
    W_v, W_o 4 · 4 096 = 16 384; W_gate, W_up, W_down 3 · 8 192 = 24 576; the final norm 64:
    43 200 weights, the same as with 2 heads.
    It cannot copy: in one layer every key holds its own token and nothing else (RoPE turns q and k,
    but writes no position into the residual stream), so no head, however many there are, can
    find "the key whose previous token is mine". More heads are more of the same layer-0 heads."""
    d, d_ff, v = 64, 128, 32
    weights = v * d + (2 * d + 4 * d * d + 3 * d * d_ff) + d
    return False, weights


def check_4(answer, T):
    sizes = {"L": 1, "h": 8, "h_kv": 8}
    count = lambda cfg: sum(w.size for w in T.init_decoder(cfg, 0).values())  # noqa: E731
    wide = T.DecoderConfig(**{**T.INDUCTION_SIZES, **sizes})
    narrow = T.DecoderConfig(**{**T.INDUCTION_SIZES, "L": 1})
    assert answer[1] == count(wide) == count(narrow), (answer[1], count(wide), count(narrow))
    # 300 steps (about 10 s): by then the two-layer run of the lesson is past 90 % held-out
    run = T.train_induction(steps=300, seed=0, sizes=sizes, snapshot_every=300, progress=False)
    learned = np.mean(run["history"]["loss"][-20:]) < run["history"]["loss"][0] - 0.5  # the slow phase's part
    copies = run["heldout_accuracy"] > 0.9
    assert learned, "the run learned nothing: its loss did not fall"
    assert answer[0] == copies, f"the one-layer run with 8 heads reached {run['heldout_accuracy']:.0%} held-out"

def wrong_4():
    """The usual slip: four times the heads, four times the attention matrices (64 × 256 each)."""
    d, d_ff, v = 64, 128, 32
    return False, v * d + (2 * d + 4 * d * 4 * d + 3 * d * d_ff) + d
