"""The refusals of `tokenizers/bpe.py`, one check per public function and method (`bpe_tokenizer_METHOD`)."""
from __future__ import annotations

from ..require import require_bool, require_int
from .shared_checks import id_sequence, utf8_text


def token_id(i, vocab_size: int, name: str = "token id"):
    """An integer id in [0, vocab_size): Python and NumPy integers, 0-d integer arrays; not 1.5, not True."""
    require_int(**{name: i}, low=None)
    if not 0 <= int(i) < vocab_size:
        raise ValueError(f"{name}={int(i)} is outside the vocabulary [0, {vocab_size})")


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
    n = len(self.tokens)
    if not isinstance(self.merges, (list, tuple)):
        raise TypeError(f"merges must be a list of (left, right) pairs of token strings, got {type(self.merges).__name__}")
    for r, pair in enumerate(self.merges):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise ValueError(f"merge {r} must be a (left, right) pair of token strings, got {pair!r:.60}")
    if isinstance(self.special, str) or not isinstance(self.special, (list, tuple)):  # "<s>" is 3 tokens otherwise
        raise TypeError(f"special must be a list of token strings, got {type(self.special).__name__} {self.special!r:.60}"
                        + (f": write [{self.special!r}]" if isinstance(self.special, str) else ""))
    tokens = set(self.tokens)
    missing = [s for s in self.special if s not in tokens]
    if missing:
        raise ValueError(f"special tokens {missing} are not in the vocabulary")
    for name in ("bos_id", "eos_id", "pad_id"):
        if getattr(self, name) is not None:
            token_id(getattr(self, name), n, name)
    require_bool(add_bos=self.add_bos)
    pre_tokenize("", self.pre)  # at construction, not at the first encode


def bpe_tokenizer_encode(self, text, *, allow_special):
    utf8_text(text)
    require_bool(allow_special=allow_special)
    pre_tokenize(text, self.pre)  # the tokenizer's pre-tokenizer, as its words are cut


def bpe_tokenizer_pieces(self, ids):
    id_sequence(ids)
    for k, i in enumerate(ids):
        token_id(i, self.vocab_size, f"ids[{k}]")


def bpe_tokenizer_token_bytes(self, i):
    token_id(i, self.vocab_size)


def bpe_tokenizer_decode(self, ids):
    bpe_tokenizer_pieces(self, ids)


def bpe_tokenizer_apply_chat_template(self, messages, add_generation_prompt):
    require_bool(add_generation_prompt=add_generation_prompt)
    if isinstance(messages, str):
        return
    if isinstance(messages, dict):
        raise TypeError("messages must be a list of {'role', 'content'} dicts, got one dict: wrap it in [ ]")
    if not isinstance(messages, (list, tuple)):  # an iterator would be used up here, and the template get nothing
        raise TypeError(f"messages must be a str or a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    if not messages:
        raise ValueError("apply_chat_template needs at least one message")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {k} must be a dict with 'role' and 'content', got {m!r:.80}")
        for field in ("role", "content"):
            if not isinstance(m[field], str):  # None was written as the text "None"
                raise TypeError(f"message {k}'s {field} must be a str, got {type(m[field]).__name__} {m[field]!r:.40}")
