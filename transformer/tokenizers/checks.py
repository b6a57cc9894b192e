"""Every refusal of the tokenizers' public functions, one check per function and of the same name.

A function in `tokenizers/` names its check at the door (`@checked_by(checks.basic_tokenize)`);
a method's check takes `self` first and is named after its class (`bpe_tokenizer_encode`).
The check receives every argument by keyword, the function's defaults filled in (it states none), and
raises a one-line error naming the bad value, or returns None. Checks shared by several doors (a
text, a token id) are the functions at the top.
"""
from __future__ import annotations

from ..require import require_int


# --- shared pieces --------------------------------------------------------------------------
def utf8_text(text, name: str = "text"):
    """text must be a str that UTF-8 can encode (both tokenizers check their texts here).

    A lone surrogate (U+D800–U+DFFF, half of a UTF-16 pair; what Python's surrogateescape
    makes of undecodable bytes) is no character: it has no UTF-8 form, so no byte-level
    token, and HF tokenizers refuse such a str. It is refused here, by its position."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name} is not valid Unicode: a lone surrogate U+{ord(text[e.start]):04X} at position "
                         f"{e.start} has no UTF-8 form") from None


def token_id(i, vocab_size: int, name: str = "token id"):
    """An integer id in [0, vocab_size): Python and NumPy integers, 0-d integer arrays; not 1.5, not True."""
    require_int(**{name: i}, low=None)
    if not 0 <= int(i) < vocab_size:
        raise ValueError(f"{name}={int(i)} is outside the vocabulary [0, {vocab_size})")


def sequence_length(max_length):
    """The positions a sequence may fill: an integer with room for [CLS] and [SEP]."""
    require_int(max_length=max_length, low=None)
    if max_length < 2:
        raise ValueError(f"max_length must leave room for [CLS] and [SEP], got {max_length}")


# --- bpe.py ---------------------------------------------------------------------------------
def pre_tokenize(text, pre):
    if pre not in ("smollm", "gpt2"):
        raise ValueError(f"unknown pre-tokenizer {pre!r}: use 'smollm' or 'gpt2'")


def token_strings(tokens):
    """Every token is a str with a UTF-8 form, named by its id if not.

    A vocabulary file's token that is not valid UTF-8 reaches Python either as bytes or, decoded
    with errors="surrogateescape", as a str holding lone surrogates (U+DC80–U+DCFF); both are
    refused here, at load, rather than as a codec error when the token is first decoded."""
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"tokens must be a list of str, got {type(tokens).__name__}")
    try:
        "".join(tokens).encode("utf-8")  # one pass over the whole vocabulary when all is well
    except (TypeError, UnicodeEncodeError):
        for i, t in enumerate(tokens):
            if not isinstance(t, str):
                raise TypeError(f"token id {i} must be a str, got {type(t).__name__}: {t!r:.60}") from None
            try:
                t.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(f"token id {i} is not valid UTF-8: {t!r:.60} holds the lone surrogate "
                                 f"U+{ord(t[e.start]):04X} (an undecodable byte)") from None


def bpe_tokenizer_post_init(self):
    token_strings(self.tokens)
    tokens = set(self.tokens)
    missing = [s for s in self.special if s not in tokens]
    if missing:
        raise ValueError(f"special tokens {missing} are not in the vocabulary")


def bpe_tokenizer_encode(self, text, *, allow_special):
    utf8_text(text)
    pre_tokenize(text, self.pre)  # the tokenizer's pre-tokenizer, as its words are cut


def bpe_tokenizer_pieces(self, ids):
    for k, i in enumerate(ids):
        token_id(i, self.vocab_size, f"ids[{k}]")


def bpe_tokenizer_token_bytes(self, i):
    token_id(i, self.vocab_size)


def bpe_tokenizer_decode(self, ids):
    bpe_tokenizer_pieces(self, ids)


def bpe_tokenizer_apply_chat_template(self, messages, add_generation_prompt):
    if isinstance(messages, str):
        return
    if not messages:
        raise ValueError("apply_chat_template needs at least one message")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {k} must be a dict with 'role' and 'content', got {m!r}")


# --- wordpiece.py ---------------------------------------------------------------------------
def basic_tokenize(text, lower):
    utf8_text(text)


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


def wordpiece_tokenizer_init(self, vocab, *, lower, max_length):
    missing = [t for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]") if t not in vocab]
    if missing:
        raise ValueError(f"vocabulary lacks the special tokens {missing}")
    sequence_length(max_length)


def wordpiece_tokenizer_tokenize(self, text):
    utf8_text(text)


def wordpiece_tokenizer_encode(self, text, max_length):
    if max_length is not None:
        sequence_length(max_length)
    utf8_text(text)


def wordpiece_tokenizer_convert_ids_to_tokens(self, ids):
    for k, i in enumerate(ids):
        require_int(**{f"ids[{k}]": i}, low=None)  # Python and NumPy integers, 0-d integer arrays; not 1.5
        if int(i) not in self.inverse:
            raise ValueError(f"ids[{k}]={int(i)} is outside the vocabulary [0, {len(self.vocab)})")


def wordpiece_tokenizer_encode_batch(self, texts, max_length):
    check_texts(texts)
    if max_length is not None:
        sequence_length(max_length)
