"""Pieces of the refusals that both tokenizers share: a text with a UTF-8 form, a sequence of ids."""
from __future__ import annotations


def utf8_text(text, name: str = "text"):
    """text must be a str that UTF-8 can encode (both tokenizers check their texts here).

    A lone surrogate (U+D800–U+DFFF, half of a UTF-16 pair; what Python's surrogateescape
    makes of undecodable bytes) is no character: it has no UTF-8 form, so no byte-level
    token, and HF tokenizers refuse such a str. It is refused here, by its position.
    Returns the UTF-8 bytes, for a caller that counts them."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name} is not valid Unicode: a lone surrogate U+{ord(text[e.start]):04X} at position "
                         f"{e.start} has no UTF-8 form") from None


def id_sequence(ids):
    """ids must be a sequence of token ids: a list, a tuple or a 1-D array (None, a str or an iterator is not
    one)."""
    if (isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__") or not hasattr(ids, "__len__")
            or getattr(ids, "ndim", 1) != 1):  # an iterator would be used up by the check: decode got nothing
        shape = f" of shape {tuple(ids.shape)}" if hasattr(ids, "shape") else ""
        raise TypeError(f"ids must be a list or 1-D array of token ids, got {type(ids).__name__}{shape}")
