"""The refusals of `tokenizers/wordpiece.py`, one check per public function and method
(`wordpiece_tokenizer_METHOD`)."""
from __future__ import annotations

from ..require import require_bool, require_int
from .shared_checks import id_sequence, utf8_text


def sequence_length(max_length):
    """The positions a sequence may fill: an integer with room for [CLS] and [SEP]."""
    require_int(max_length=max_length, low=None)
    if max_length < 2:
        raise ValueError(f"max_length must leave room for [CLS] and [SEP], got {max_length}")


def basic_tokenize(text, lower):
    utf8_text(text)
    require_bool(lower=lower)  # "no" is truthy


def wordpiece_tokenizer_init(self, vocab, *, lower, max_length):
    if not isinstance(vocab, dict):
        raise TypeError(f"vocab must be a dict of token -> id (load_vocab reads vocab.txt into one), got "
                        f"{type(vocab).__name__}")
    bad = next(((t, i) for t, i in vocab.items()
                if not isinstance(t, str) or isinstance(i, bool) or not isinstance(i, int) or i < 0), None)
    if bad:
        raise ValueError(f"vocab must map str tokens to ids ≥ 0, got {bad[0]!r:.40} -> {bad[1]!r:.40}")
    if len(set(vocab.values())) < len(vocab):
        raise ValueError("vocab gives two tokens the same id: decode could not tell them apart")
    require_bool(lower=lower)
    missing = [t for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]") if t not in vocab]
    if missing:
        raise ValueError(f"vocabulary lacks the special tokens {missing}")
    sequence_length(max_length)


def wordpiece_tokenizer_tokenize(self, text, limit):
    utf8_text(text)
    if limit is not None:
        require_int(limit=limit)


def wordpiece_tokenizer_encode(self, text, max_length):
    if max_length is not None:
        sequence_length(max_length)
    utf8_text(text)


def wordpiece_tokenizer_convert_ids_to_tokens(self, ids):
    id_sequence(ids)
    for k, i in enumerate(ids):
        require_int(**{f"ids[{k}]": i}, low=None)  # Python and NumPy integers, 0-d integer arrays; not 1.5
        if int(i) not in self.inverse:
            raise ValueError(f"ids[{k}]={int(i)} is outside the vocabulary [0, {len(self.vocab)})")


def wordpiece_tokenizer_encode_batch(self, texts, max_length):
    check_texts(texts)
    if max_length is not None:
        sequence_length(max_length)


def check_texts(texts):
    """A batch must be a non-empty list/tuple of str; a single str is a batch of one."""
    if isinstance(texts, str):
        return
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts must be a str or a list of str, got {type(texts).__name__}")
    if not texts:
        raise ValueError("texts is empty: give at least one string")
    bad = [(i, type(t).__name__) for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        i, name = bad[0]
        raise TypeError(f"every text must be a str, but texts[{i}] is a {name}: {texts[i]!r:.60}")
    for i, t in enumerate(texts):
        utf8_text(t, f"texts[{i}]")  # a lone surrogate, named by its text and position
