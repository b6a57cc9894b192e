"""How the command line shows a path or a text it did not write itself: control characters escaped.

A file name may hold a newline, an escape sequence or bytes that are not UTF-8 (kept by Python
as lone surrogates); printed raw, it would split an error across lines or drive the terminal.

>>> shown("out\\n.png"), shown("plain/path ≥ ok.png")
('out\\\\n.png', 'plain/path ≥ ok.png')
"""
from __future__ import annotations

import os

__all__ = ["shown", "counted", "shown_int", "cut"]


def shown(text) -> str:
    """str(text) (a path too) with each non-printable character written as repr writes it:
    '\\n', '\\x1b', '\\udcff'; printable text, spaces and non-ASCII letters stay as they are."""
    s = os.fsdecode(text) if isinstance(text, (bytes, os.PathLike)) else str(text)
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)


def counted(n: int, noun: str) -> str:
    """n and the noun, plural unless n is 1: counted(1, "token") is '1 token', counted(3, "token") '3 tokens'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def shown_int(n: int) -> str:
    """An integer as typed, or its number of digits where it would fill the line (an option's value in an error).

    >>> shown_int(-5), shown_int(10 ** 40)
    ('-5', 'a number of 41 digits')
    """
    return str(n) if len(str(n)) <= 30 else f"a number of {len(str(abs(n)))} digits"


def cut(text: str, most: int = 20) -> str:
    """A value quoted in an error line, cut to `most` characters with an ellipsis (a word of a 4 MiB text is
    not repeated whole).

    >>> cut("1" * 23)
    '11111111111111111111…'
    """
    return text if len(text) <= most else f"{text[:most]}…"
