"""The checker's cases for lesson 01's tokenizers: BPE's merge loop (merge_symbols) and WordPiece's greedy
longest match (wordpiece)."""
from __future__ import annotations

import numpy as np

from ..tokenizers.bpe import merge_symbols
from ..tokenizers.wordpiece import wordpiece
from .cases import Case, Mistake, Spec

__all__ = ["MERGE_SYMBOLS", "WORDPIECE"]

# the merges of a small byte-level BPE, in the order it learned them ("Ġ" is the space before a word)
LOWEST = [("Ġ", "l"), ("o", "w"), ("Ġl", "ow"), ("e", "s"), ("es", "t"), ("Ġlow", "est"), ("e", "r"), ("Ġlow", "er")]


def _ranks(pairs):
    return {pair: r for r, pair in enumerate(pairs)}


def _long_word():
    """300 symbols of a 4-letter alphabet and 12 ranked pairs, some over symbols that only merges make."""
    r = np.random.default_rng(11)
    word = [str(c) for c in r.choice(list("abcd"), 300)]
    pairs = [("a", "b"), ("c", "d"), ("ab", "cd"), ("b", "a"), ("d", "c"), ("ba", "ab"), ("a", "a"), ("cd", "ab"),
             ("abcd", "abcd"), ("c", "c"), ("aa", "b"), ("dc", "ba")]
    return word, _ranks(pairs)


def merge_cases():
    word, ranks = _long_word()
    return [Case("the docstring's example: 'abcab' with a·b, ab·c, c·a", (list("abcab"), _ranks(
                [("a", "b"), ("ab", "c"), ("c", "a")]))),
            Case("'abc' with b·c learned before a·b: the lowest rank merges first, wherever it is",
                 (list("abc"), _ranks([("b", "c"), ("a", "b")])), tags=frozenset({"rank"})),
            Case("'aaa' with a·a: of two equal pairs, the leftmost merges", (list("aaa"), _ranks([("a", "a")])),
                 tags=frozenset({"ties"})),
            Case("'Ġlowest' with 8 merges of a byte-level BPE", (list("Ġlowest"), _ranks(LOWEST))),
            Case("'Ġlower': a merge makes a pair that merges next", (list("Ġlower"), _ranks(LOWEST))),
            Case("'xyz', no pair ranked: the symbols as they are", (list("xyz"), _ranks(LOWEST)),
                 tags=frozenset({"none"})),
            Case("one symbol, and no symbol", (["a"], _ranks([("a", "b")])), tags=frozenset({"none"})),
            Case("300 symbols of a, b, c, d with 12 merges", (word, ranks), tags=frozenset({"long"}))]


def _merged(pick, rounds=None):
    """merge_symbols with a slip: pick(pairs) the index of the pair to merge among [(rank, i)] (ranked pairs only),
    for `rounds` merges (None: until no pair is ranked)."""
    def merge(symbols, ranks):
        sym = list(symbols)
        done = 0
        while rounds is None or done < rounds:
            pairs = [(ranks[p], i) for i, p in enumerate(zip(sym, sym[1:])) if p in ranks]
            if not pairs:
                break
            i = pick(pairs)
            sym[i:i + 2] = [sym[i] + sym[i + 1]]
            done += 1
        return sym
    return merge


MERGE_SYMBOLS = Spec(
    "merge_symbols", merge_symbols, merge_cases, "transformer/tokenizers/bpe.py",
    mistakes=[Mistake("the pair to merge is the one of LOWEST rank, the first merge learned (min over ranks[pair]), "
                      "not the highest", variant=_merged(lambda pairs: max(pairs)[1])),
              Mistake("merge by rank, not by position: the ranked pair learned first merges first, wherever it is "
                      "in the word (the leftmost only breaks ties between equal ranks)",
                      variant=_merged(lambda pairs: min(i for _, i in pairs))),
              Mistake("of two equal pairs the leftmost merges first: min over (rank, position)",
                      variant=_merged(lambda pairs: max(i for r, i in pairs if r == min(pairs)[0]))),
              Mistake("merge until no adjacent pair has a rank: a merge makes new pairs (Ġlow·est from Ġ·l, o·w …), "
                      "which may merge in turn", variant=_merged(lambda pairs: min(pairs)[1], rounds=1)),
              Mistake("merge until no adjacent pair has a rank: recount the pairs after each merge, and stop only "
                      "when none of them is in ranks", variant=_merged(lambda pairs: min(pairs)[1], rounds=2)),
              Mistake("a pair missing from ranks never merges: look it up with `pair in ranks` (or ranks.get(pair)), "
                      "and stop when no pair is found", raises=r"KeyError|^\('", tag="none")])


# --- WordPiece ---------------------------------------------------------------------------------------------------
UNAFFABLE = {"un", "##aff", "##able", "##a"}


def wordpiece_cases():
    return [Case("the docstring's example: 'unaffable'", ("unaffable", UNAFFABLE)),
            Case("'unaffable' where 'una' and '##ffable' are in the vocabulary: the longest prefix first",
                 ("unaffable", {"un", "una", "##ffable", "##aff", "##able"}), tags=frozenset({"longest"})),
            Case("'ab': a piece after the first is looked up as '##b'", ("ab", {"a", "b", "##b"}),
                 tags=frozenset({"##"})),
            Case("'ab' where only 'b' is in the vocabulary, not '##b': the whole word is [UNK]", ("ab", {"a", "b"}),
                 tags=frozenset({"unk", "##"})),
            Case("'unaffablez', no piece for the last letter: the whole word is [UNK], not a part",
                 ("unaffablez", UNAFFABLE), tags=frozenset({"unk"})),
            Case("unk='<unk>' given", ("xyz", UNAFFABLE), {"unk": "<unk>"}, frozenset({"unk", "unk-given"})),
            Case("'unaffable' longer than max_chars=5 given: [UNK] without looking", ("unaffable", UNAFFABLE),
                 {"max_chars": 5}, frozenset({"max_chars"})),
            Case("the vocabulary as a dict of ids, 'playing'", ("playing", {"play": 0, "##ing": 1, "##in": 2,
                                                                              "pl": 3, "##g": 4}))]


def _pieced(order="longest", hashes="after", on_miss="word"):
    """wordpiece with a slip: the shortest prefix first; '##' never or on every piece; on a remainder with no piece,
    [UNK] for that part only, or the character skipped."""
    def wp(word, vocab, unk="[UNK]", max_chars=100):
        if len(word) > max_chars:
            return [unk]
        pieces, start = [], 0
        while start < len(word):
            ends = range(len(word), start, -1) if order == "longest" else range(start + 1, len(word) + 1)
            mark = lambda s: "##" if (hashes == "all" or (hashes == "after" and s > 0)) else ""  # noqa: E731
            end = next((e for e in ends if mark(start) + word[start:e] in vocab), None)
            if end is None:
                if on_miss == "word":
                    return [unk]
                if on_miss == "part":
                    return pieces + [unk]
                start += 1  # "skip"
                continue
            pieces.append(mark(start) + word[start:end])
            start = end
        return pieces
    return wp


WORDPIECE = Spec(
    "wordpiece", wordpiece, wordpiece_cases, "transformer/tokenizers/wordpiece.py",
    mistakes=[Mistake("the LONGEST prefix in the vocabulary first: start from the whole rest of the word and shrink "
                      "it one character at a time", variant=_pieced(order="shortest")),
              Mistake("a piece after the first is looked up, and written, with '##' in front (it continues a word)",
                      variant=_pieced(hashes="never")),
              Mistake("the first piece has no '##': only the pieces after it continue a word",
                      variant=_pieced(hashes="all")),
              Mistake("when a remainder has no piece at all, the WHOLE word is [UNK] (the pieces found before it are "
                      "dropped)", variant=_pieced(on_miss="part")),
              Mistake("when a remainder has no piece at all, the whole word is [UNK]: a character with no piece is "
                      "not skipped", variant=_pieced(on_miss="skip")),
              Mistake("a word longer than max_chars is [UNK] at once, before any lookup", tag="max_chars"),
              Mistake("use the `unk` argument as the unknown piece", tag="unk-given"),
              Mistake("a remainder with no piece: shrink the candidate down to one character, and when even that is "
                      "not in the vocabulary, return [unk]", raises=r"index out of range|infinite|NoneType")])
