"""Solutions to the "Try it" exercises of lesson 01 (from text to vectors).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
"""
import numpy as np


def table():  # (v, d) = (6, 4): a tiny embedding table, the same for the exercise and its check
    return np.random.default_rng(1).normal(size=(6, 4))


def exercise_1():
    """Write the embedding lookup and the tied LM head in NumPy, on a table of v = 6 rows, d = 4.

    The lookup is indexing: ids (b, n) = [[3, 1, 3]] pick rows 3, 1, 3 of W_E, a (1, 3, 4) array
    (rows 0 and 2 equal: one id, one vector). The tied head compares each vector with every row of
    the same table: logits = x @ W_Eᵀ, (1, 3, 4) @ (4, 6) = (1, 3, 6), one score per vocabulary
    entry. Its largest entry in row 0 is token 3's own score, ‖e_3‖², since no row here has a
    larger dot product with e_3.
    """
    W_E = table()  # (v, d)
    ids = np.array([[3, 1, 3]])  # (b, n)
    x = W_E[ids]  # (b, n, d): row ids[b, n] of the table
    logits = x @ W_E.T  # (b, n, v)
    return {"x": x, "logits": logits, "top_of_row_0": int(logits[0, 0].argmax())}


def check_1(answer, T):
    W_E, ids = table(), np.array([[3, 1, 3]])
    x = T.embed(ids, W_E)  # (b, n, d)
    np.testing.assert_allclose(answer["x"], x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(answer["logits"], T.lm_head(x, W_E), rtol=1e-12, atol=1e-12)
    assert answer["top_of_row_0"] == int(T.lm_head(x, W_E)[0, 0].argmax()) == 3, answer["top_of_row_0"]


def exercise_2():
    """MiniLM's WordPiece lower-cases and strips accents before it looks words up (BERT's
    "uncased" normalisation), so "Naïve" becomes "naive", a word of its vocabulary: one piece,
    framed by [CLS] and [SEP]."""
    return ["[CLS]", "naive", "[SEP]"]


def check_2(answer, T):
    wp = T.load_minilm().tokenizer
    assert answer == wp.convert_ids_to_tokens(wp.encode("Naïve")), wp.convert_ids_to_tokens(wp.encode("Naïve"))


def exercise_3():
    """SmolLM2's embedding table is v × d = 49,152 × 576 = 28,311,552 numbers; tied to the LM head,
    it is counted once. Of the 134,515,008 parameters that is 21.0 %: a small model spends a fifth
    of itself on its vocabulary."""
    table = 49_152 * 576
    return {"embeddings": table, "share": table / 134_515_008}


def check_3(answer, T):
    parts = T.parameter_breakdown("smollm2-135m")
    assert answer["embeddings"] == parts["embeddings"] and parts["lm_head"] == 0, parts
    assert abs(answer["share"] - parts["embeddings"] / parts["total"]) < 1e-12
