"""Hostile text for both tokenizers: random Unicode of every kind (controls, lone surrogates,
combining marks, unassigned code points, very long runs without a space). The property, for
SmolLM2's BPE and MiniLM's WordPiece alike: the ids equal the reference's (HF `tokenizers`
built from the same files), or the call is refused with a one-line ValueError/TypeError that
names the bad value — never any other exception."""
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from transformer.tokenizers.wordpiece import WordPieceTokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Any code point, surrogates included (a str can hold them; UTF-8 cannot).
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
CONTROL = st.sampled_from([chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x200B, 0x200D, 0xFEFF, 0xFFFD]])
MARK = st.characters(categories=("Mn", "Mc", "Me"))
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())
UNASSIGNED = st.characters(categories=("Cn",))
PIECE = st.one_of(ANY_CHAR, CONTROL, MARK, UNASSIGNED, st.sampled_from(list("aé 1!\n中😀")))
RUN = st.builds(lambda ch, n: ch * n, st.one_of(st.sampled_from(list("aZé中-1 ")), ANY_CHAR),
                st.integers(1, 3000))  # very long runs: one huge word, one huge number, …
HOSTILE = st.lists(st.one_of(PIECE, PIECE, PIECE, RUN, SURROGATE), max_size=30).map("".join)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def surrogate_in(text):
    return next((k for k, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF), None)


def assert_one_line_naming(error, text, *, missing_bytes=()):
    """A refusal is one line that names what is wrong: the first lone surrogate and where it is,
    or (BPE) the first character whose UTF-8 bytes have no token."""
    message = str(error)
    assert "\n" not in message, message
    k = surrogate_in(text)
    if k is not None:
        assert isinstance(error, ValueError)
        assert re.search(rf"lone surrogate U\+{ord(text[k]):04X} at position {k}\b", message), message
        return
    bad = next(ch for ch in text if set(ch.encode("utf-8")) & set(missing_bytes))
    assert isinstance(error, ValueError) and f"U+{ord(bad):04X}" in message, message


@pytest.fixture(scope="module")
def bpe():
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformer.models.llama_gguf import open_gguf, read_tokenizer, smollm2_path
    tok = read_tokenizer(open_gguf(smollm2_path()))
    ref = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tok.tokens)}, merges=tok.merges))
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    ref.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in tok.special])
    return tok, ref


@pytest.fixture(scope="module")
def wordpiece():
    from test_wordpiece import VOCAB, bert_fast
    return WordPieceTokenizer.from_file(VOCAB), bert_fast()


@PROPERTY
@given(HOSTILE)
def test_bpe_equals_reference_or_names_the_bad_character(bpe, text):
    tok, ref = bpe
    try:
        ids = tok.encode(text)
    except (ValueError, TypeError) as e:
        # the reference either refuses the str too (a lone surrogate) or drops the character
        # whose byte has no token (see test_bpe.test_unencodable_bytes); we name it instead
        assert_one_line_naming(e, text, missing_bytes=tok.missing_bytes())
        return
    assert surrogate_in(text) is None
    assert ids == ref.encode(text).ids
    assert tok.decode(ids) == text  # byte-level: nothing is lost


@PROPERTY
@given(HOSTILE)
def test_wordpiece_equals_reference_or_names_the_surrogate(wordpiece, text):
    tok, ref = wordpiece
    try:
        pieces = tok.tokenize(text)
    except (ValueError, TypeError) as e:
        assert_one_line_naming(e, text)  # WordPiece has an answer for every character but a surrogate
        return
    assert surrogate_in(text) is None
    assert [tok.vocab[p] for p in pieces] == ref.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, max_length=len(pieces) + 2) == ref.encode(text).ids  # framed: [CLS] … [SEP]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=20), st.lists(st.text(max_size=3), max_size=3)))
def test_a_non_string_is_a_type_error_naming_its_type(bpe, wordpiece, value):
    for encode in (bpe[0].encode, wordpiece[0].encode, wordpiece[0].tokenize):
        with pytest.raises(TypeError, match=rf"^text must be a str, got {type(value).__name__}"):
            encode(value)
