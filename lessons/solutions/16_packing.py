"""Solutions to lesson 16's "Try it" (packing short documents)."""
import numpy as np


def exercise_1():
    """Documents of 5, 3, 7, 2, 6 tokens, rows of n_ctx = 8, first fit in input order:
    5 → row 0 (5); 3 → row 0 (8, full); 7 → row 1 (7); 2 → row 1 has 1 free, so row 2 (2);
    6 → row 2 (8). Three rows, 24 slots for 23 tokens; one per row padded to 8 would take 5 rows,
    40 slots."""
    return 3, [[0, 1], [2], [3, 4]]


def check_1(answer, T):
    p = T.pack_documents([[1] * 5, [1] * 3, [1] * 7, [1] * 2, [1] * 6], 8)
    rows = [sorted({int(d) for d in row if d >= 0}) for row in p.doc]
    assert answer == (p.ids.shape[0], rows), (answer, rows)


def exercise_2():
    """With the positions restarted per document, the third row holds documents 3 and 4 at
    positions 0, 1 and 0, 1, 2, 3, 4, 5."""
    return [0, 1, 0, 1, 2, 3, 4, 5]


def check_2(answer, T):
    p = T.pack_documents([[1] * 5, [1] * 3, [1] * 7, [1] * 2, [1] * 6], 8)
    assert answer == [int(t) for t in p.positions[2]], answer


def exercise_3():
    """The document mask of one packed row in NumPy: doc = [0, 0, 0, 1, 1, 2, −1, −1] (three
    documents of 3, 2 and 1 tokens, then two padding slots). Query i may read key j when both hold
    the same document (doc[i] == doc[j], one comparison of a column with a row), the key is not
    padding (doc[j] ≥ 0), and j ≤ i (np.tril). One causal triangle per document:
    3·4/2 + 2·3/2 + 1 = 10 pairs, against 36 for a causal mask over the 8 slots."""
    doc = np.array([0, 0, 0, 1, 1, 2, -1, -1])  # (n,)
    same = (doc[:, None] == doc[None, :]) & (doc[None, :] >= 0)  # (n, n)
    return same & np.tril(np.ones((8, 8), dtype=bool))  # (n, n)


def check_3(answer, T):
    got = T.document_mask(np.array([[0, 0, 0, 1, 1, 2, -1, -1]]))[0, 0]  # (n, n)
    np.testing.assert_array_equal(answer, got)
    assert T.attended_pairs(got) == 10
