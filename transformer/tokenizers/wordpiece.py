"""WordPiece, BERT's tokenizer, from vocab.txt alone (the encoder side of notes 000 §2.4, 002).

Two stages turn a string into ids:

1. The *basic* tokenizer cuts the text into words: clean control characters, put
   spaces around every CJK character (Chinese is written without spaces, so each
   character is its own word), lower-case, strip accents (é -> e), split on whitespace
   and cut every punctuation mark off as its own word.
2. *WordPiece* cuts each word into vocabulary pieces, greedily, longest match first;
   pieces after the first carry the prefix "##" ("embeddings" -> em ##bed ##ding ##s).
   A word with no complete cover, or longer than 100 characters, becomes [UNK].

A sequence is then framed as [CLS] pieces… [SEP] and cut to the model's positions.
Each public function with a refusal checks its input at the door (`wordpiece_checks.py`, same name).

>>> tok = WordPieceTokenizer({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3,
...                           "un": 4, "##aff": 5, "##able": 6, ",": 7})
>>> tok.tokenize("Unaffable, un-")
['un', '##aff', '##able', ',', 'un', '[UNK]']
>>> tok.encode("unaffable")
[1, 4, 5, 6, 2]
"""
from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from . import wordpiece_checks as checks
from .unicode_tables import category
from ..require import checked_by

__all__ = [
    "MAX_VOCAB_BYTES", "load_vocab", "clean_text", "is_whitespace", "is_control", "is_punctuation",
    "is_cjk", "strip_accents", "basic_tokenize", "wordpiece", "WordPieceTokenizer",
    "Batch", "check_texts",
]

# BERT's "CJK Unified Ideographs" blocks. Hangul, Hiragana and Katakana are not
# among them: those scripts use spaces or are split by WordPiece like any word.
# Extension E starts at 0x2B820, and BERT's original list says so; the Rust tokenizers
# that sentence-transformers runs start it at 0x2B920. We follow the tokenizer the model
# is used with, so 0x2B820–0x2B91F stays inside its word, as there.
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
MAX_CHARS_PER_WORD = 100  # longer "words" (URLs, base64) become one [UNK]
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


MAX_VOCAB_BYTES = 64 * 2**20  # BERT's vocab.txt is 226 KiB; a file 300× larger is not a vocabulary


def load_vocab(path) -> dict[str, int]:
    """vocab.txt -> {piece: id}: one piece per line, the id is the line number (a line may end in
    CR LF, as HF reads it). A file over MAX_VOCAB_BYTES, or a line that is not UTF-8, is refused
    in one line naming the limit or the token id; no more than the cap is ever read."""
    with open(path, "rb") as f:
        raw = f.read(MAX_VOCAB_BYTES + 1)  # never more than the cap, whatever the file holds
    if len(raw) > MAX_VOCAB_BYTES:
        raise ValueError(f"{path} is larger than {MAX_VOCAB_BYTES:,} bytes (MAX_VOCAB_BYTES): not a vocabulary file")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file ends with a newline
    vocab = {}
    for i, line in enumerate(lines):
        try:
            vocab[line.decode("utf-8").removesuffix("\r")] = i
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: token id {i} (line {i + 1}) is not valid UTF-8: byte 0x{line[e.start]:02X} "
                             f"at offset {e.start} of {line[:40]!r}") from None
    return vocab


# ---------------------------------------------------------------- character classes
# Categories come from `category`, the reference's Unicode 8.0 tables (unicode_tables.py):
# Python's newer tables would strip, drop or split a few hundred characters added since.

def is_whitespace(ch: str) -> bool:
    """Space, tab, newline, carriage return and the Unicode space separators (Zs)."""
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    """Controls, formats and private use (Cc, Cf, Co), except tab/newline/CR, which are whitespace.

    Unassigned code points (Cn) are not controls: the reference keeps them, and a word
    holding one becomes [UNK], so that unknown text still takes a position.
    """
    return ch not in "\t\n\r" and category(ch) in ("Cc", "Cf", "Co")


def is_punctuation(ch: str) -> bool:
    """Unicode punctuation (P*), plus every ASCII non-alphanumeric such as $ + < = > ^ ` | ~."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return category(ch).startswith("P")


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in _CJK_RANGES)  # 0x3400: the first block


# ---------------------------------------------------------------- basic tokenizer

def clean_text(text: str) -> str:
    """Drop NUL, U+FFFD (a failed decode) and control characters; every whitespace becomes ' '."""
    out = []
    for ch in text:
        if ch == "\x00" or ch == "\ufffd" or is_control(ch):
            continue
        out.append(" " if is_whitespace(ch) else ch)
    return "".join(out)


def strip_accents(text: str) -> str:
    """Decompose (NFD: é -> e + ◌́) and drop the combining marks (category Mn)."""
    if text.isascii():  # no accents to strip: the common case, answered at once
        return text
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if category(ch) != "Mn")


def _lower(word: str) -> str:
    """Lower-case one character at a time, as the reference tokenizers do.

    str.lower() on a whole word applies the Greek final-sigma rule (ΣΟΦΟΣ -> σοφος);
    character by character every Σ becomes σ, which is what the vocabulary was built with.
    """
    return "".join(ch.lower() for ch in word)


def _split_punctuation(word: str) -> list[str]:
    """"don't!" -> ["don", "'", "t", "!"]: every punctuation mark is a word of its own."""
    out, current = [], ""
    for ch in word:
        if is_punctuation(ch):
            if current:
                out.append(current)
            out.append(ch)
            current = ""
        else:
            current += ch
    if current:
        out.append(current)
    return out


@checked_by(checks.basic_tokenize)
def basic_tokenize(text: str, lower: bool = True) -> list[str]:
    """Text -> words, before WordPiece.

    >>> basic_tokenize("Héllo, 世界!")
    ['hello', ',', '世', '界', '!']
    """
    text = clean_text(text)
    text = "".join(f" {ch} " if is_cjk(ch) else ch for ch in text)  # one word per CJK character
    words = []
    for word in text.split():
        if lower:  # the uncased model: lower-case and strip accents go together
            word = strip_accents(_lower(word))
        words.extend(_split_punctuation(word))
    return words


CHUNK_CHARS = 4096  # tokenize reads this much text at a time, so that it can stop once it has enough pieces
# Characters that start a new word whatever surrounds them, so that a cut just before one splits no word:
# whitespace (ASCII and the space separators Zs, which clean_text makes ' '), a CJK ideograph (spaced out
# on its own) and ASCII punctuation (a word of its own, unchanged by lower-casing and NFD). Whitespace alone
# was not enough: Chinese is written without spaces, and 1 M characters of it were read whole for 256 ids.
_BREAK = re.compile("[ \t\n\r\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
                    + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)
                    + re.escape("".join(chr(c) for c in range(33, 127) if not chr(c).isalnum())) + "]")


def _word_boundary_chunks(text: str, size: int):
    """text in pieces of about `size` characters, each cut just before a character that starts a word
    whatever surrounds it (_BREAK: a space, a CJK ideograph, ASCII punctuation; a piece runs on to the next
    one when there is none, so a word is never cut): "".join of them is text.

    >>> list(_word_boundary_chunks("ab cd,ef", size=2))
    ['ab', ' cd', ',ef']
    """
    start = 0
    while start < len(text):
        found = _BREAK.search(text, start + size) if start + size < len(text) else None
        end = found.start() if found else len(text)
        yield text[start:end]
        start = end


# ---------------------------------------------------------------- WordPiece

def wordpiece(word: str, vocab, unk: str = "[UNK]", max_chars: int = MAX_CHARS_PER_WORD) -> list[str]:
    """Greedy longest-match-first: take the longest prefix in the vocabulary, repeat on the rest.

    Pieces after the first are looked up with "##" in front (a word continues).
    If some remainder has no piece at all, the whole word is [UNK].

    >>> wordpiece("unaffable", {"un", "##aff", "##able", "##a"})
    ['un', '##aff', '##able']
    """
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:  # shrink the candidate until it is in the vocabulary
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:  # not even one character matched
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


@dataclass
class Batch:
    """Texts encoded together, right-padded to the longest one.

    ids (b, n) int64, lengths (b,) int64: the real tokens of row i are ids[i, :lengths[i]],
    the rest is [PAD]. attention_mask (b, n) is 1 for real tokens, 0 for padding.
    """
    ids: np.ndarray  # (b, n)
    lengths: np.ndarray  # (b,)

    @property
    def attention_mask(self) -> np.ndarray:  # -> (b, n)
        n = self.ids.shape[1]
        return (np.arange(n)[None, :] < self.lengths[:, None]).astype(np.int64)  # [b, n]


class WordPieceTokenizer:
    """BERT's tokenizer (uncased): basic tokenizer, then WordPiece, then [CLS] … [SEP].

    max_length: the most positions a sequence may fill, [CLS] and [SEP] included
    (512 for BERT's position table; sentence-transformers cuts MiniLM at 256).
    """

    @checked_by(checks.wordpiece_tokenizer_init)
    def __init__(self, vocab: dict[str, int], *, lower: bool = True, max_length: int = 512):
        self.max_length = int(max_length)
        self.vocab = vocab
        self.inverse = {i: t for t, i in vocab.items()}
        self.lower = lower
        self.specials = [t for t in SPECIAL_TOKENS if t in vocab]
        self.cls_id, self.sep_id = vocab["[CLS]"], vocab["[SEP]"]
        self.pad_id, self.unk_id = vocab["[PAD]"], vocab["[UNK]"]

    @classmethod
    def from_file(cls, path, **kwargs) -> "WordPieceTokenizer":
        return cls(load_vocab(path), **kwargs)

    def __len__(self) -> int:
        return len(self.vocab)

    def _split_specials(self, text: str) -> list[str]:
        """Cut out special tokens written in the text ("[MASK]"), which are kept whole."""
        parts = [text]
        for special in self.specials:
            parts = [p for part in parts
                     for p in _interleave(part.split(special), special) if p]
        return parts

    @checked_by(checks.wordpiece_tokenizer_tokenize)
    def tokenize(self, text: str, limit: int | None = None) -> list[str]:
        """Text -> WordPiece strings, without [CLS]/[SEP]; the first `limit` of them when given.

        The text is read a few thousand characters at a time, cut where a word starts (a space, a CJK
        ideograph, ASCII punctuation; never inside a word), and reading stops once `limit` pieces are out:
        encode's time is bounded by max_length, not by the length of the text.
        """
        return list(itertools.islice(self._pieces(text), limit))  # limit None: every piece

    def _pieces(self, text: str):  # -> the pieces one by one, the text read a chunk at a time as they are taken
        for part in self._split_specials(text):
            if part in self.specials:
                yield part
                continue
            for chunk in _word_boundary_chunks(part, CHUNK_CHARS):
                for word in basic_tokenize(chunk, self.lower):  # the text was checked at tokenize's door
                    yield from wordpiece(word, self.vocab)

    @checked_by(checks.wordpiece_tokenizer_encode)
    def encode(self, text: str, max_length: int | None = None) -> list[int]:
        """Text -> [CLS] ids… [SEP], cut so the whole fits in max_length (default self.max_length)."""
        max_length = self.max_length if max_length is None else int(max_length)
        ids = [self.vocab[p] for p in self.tokenize(text, limit=max_length - 2)]
        return [self.cls_id, *ids, self.sep_id]

    def decode(self, ids, cleanup: bool = True) -> str:
        """Ids -> text: drop special tokens, glue "##" pieces to the previous piece.

        Lossy: case, accents and the original spacing are gone. cleanup also glues
        . ? ! , to the previous word ("it ." -> "it."), as the reference decoder does.
        """
        words = []
        for t in self.convert_ids_to_tokens(ids):
            if t in self.specials:
                continue
            if words and (t.startswith("##") or (cleanup and t in _GLUED_PUNCTUATION)):
                words[-1] += t[2:] if t.startswith("##") else t
            else:
                words.append(t)
        return " ".join(words)

    @checked_by(checks.wordpiece_tokenizer_convert_ids_to_tokens)
    def convert_ids_to_tokens(self, ids) -> list[str]:
        """Ids -> their WordPiece strings ("##" pieces as stored)."""
        return [self.inverse[int(i)] for i in ids]

    @checked_by(checks.wordpiece_tokenizer_encode_batch)
    def encode_batch(self, texts, max_length: int | None = None) -> Batch:
        """Several texts -> one right-padded (b, n) id array and the real lengths."""
        return self.pad([self.encode(t, max_length) for t in check_texts(texts)])

    def pad(self, rows: list[list[int]]) -> Batch:  # encoded rows, at least one
        """Encoded texts (lists of ids) -> one right-padded (b, n) id array and the real lengths."""
        lengths = np.array([len(r) for r in rows], dtype=np.int64)  # [b]
        ids = np.full((len(rows), int(lengths.max())), self.pad_id, dtype=np.int64)  # [b, n]
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
        return Batch(ids, lengths)


_GLUED_PUNCTUATION = {".", "?", "!", ","}  # decode() writes these without a space before


def _interleave(parts: list[str], sep: str) -> list[str]:
    """["a", "b", "c"], "X" -> ["a", "X", "b", "X", "c"]."""
    out = [parts[0]]
    for p in parts[1:]:
        out += [sep, p]
    return out


@checked_by(checks.check_texts)
def check_texts(texts) -> list[str]:
    """A batch of texts as a list: a single str is a batch of one. The door refuses anything but a
    str or a non-empty list/tuple of str.

    >>> check_texts("one"), check_texts(("a", "b"))
    (['one'], ['a', 'b'])
    """
    return [texts] if isinstance(texts, str) else list(texts)
