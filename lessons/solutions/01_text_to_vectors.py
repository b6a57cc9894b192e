"""Solutions to the "Try it" exercises of lesson 01 (from text to vectors).

Each exercise_k() works the answer out by hand; check_k(answer, T) recomputes it with the package.
"""


def exercise_1():
    """" naïve" in UTF-8, and the symbols byte-level BPE starts from.

    ' ' = 32, n = 110, a = 97, v = 118, e = 101, and ï (U+00EF) takes two bytes, 0xC3 0xAF = 195, 175:
    7 bytes for 6 characters. GPT-2's byte table (which SmolLM2 uses) keeps the printable bytes
    33–126, 161–172 and 174–255 as their own character; the others (0–32, 127–160, 173) go, in
    order, to chr(256), chr(257), …: the space, byte 32, is the 33rd of them, chr(256 + 32) = 'Ġ'.
    """
    values = [32, 110, 97, 0xC3, 0xAF, 118, 101]
    printable = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    shifted = [b for b in range(256) if b not in printable]  # the bytes that get a stand-in character
    symbols = [chr(b) if b in printable else chr(256 + shifted.index(b)) for b in values]
    return {"bytes": values, "symbols": symbols}


def check_1(answer, T):
    assert answer["bytes"] == list(" naïve".encode("utf-8"))
    no_merges = T.BPETokenizer([], [])  # no merge list: bpe() returns the byte symbols themselves
    assert answer["symbols"] == no_merges.bpe(" naïve") == ["Ġ", "n", "a", "Ã", "¯", "v", "e"], answer


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
