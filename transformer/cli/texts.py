"""The commands' text arguments (generate's PROMPT, tokenize's and attention's TEXT, embed's TEXT...):
read from standard input where given as "-", then checked to be UTF-8.

    python -m transformer generate - < prompt.txt
    cat notes.md | python -m transformer tokenize -
"""
from __future__ import annotations

# Arguments holding text to read (not paths): the shell hands over bytes, and Python keeps
# bytes that are not UTF-8 as lone surrogates U+DC80 … U+DCFF ("surrogateescape").
TEXT_ARGUMENTS = ("prompt", "text", "texts")
STDIN = "-"  # a TEXT given as "-" is read from standard input, where a text of any length fits
# Linux caps one argument at 128 KiB; standard input is capped here, far above what any model's context holds
# (SmolLM2's 8,192 tokens are about 40 KB of English), so that a runaway pipe is refused rather than held
MAX_STDIN_BYTES = 4 << 20  # 4 MiB
STDIN_HELP = f"- reads it from standard input (up to {MAX_STDIN_BYTES >> 20} MiB)"  # the commands' --help says it


def check_utf8(value: str, name: str) -> str:
    """value, or a ValueError naming the argument and showing the bytes that are not UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raw = value[e.start:e.end].encode("utf-8", "surrogateescape")  # the bytes as typed
        shown = " ".join(f"0x{b:02x}" for b in raw)
        raise ValueError(f"{name} is not valid UTF-8: bytes {shown} at character {e.start} "
                         "(is the terminal set to UTF-8?)") from None
    return value


def read_stdin(stream, name: str, limit: int = MAX_STDIN_BYTES) -> str:
    """At most `limit` bytes of a binary stream as text, bytes that are not UTF-8 kept as lone surrogates as
    the shell's arguments are (check_utf8 then says the same of both). A longer input is refused once
    limit + 1 bytes are read, before any more is.

    >>> import io; read_stdin(io.BytesIO(b"ok"), "TEXT", limit=2)
    'ok'
    """
    if stream is None:  # started with standard input closed (`<&-`)
        raise ValueError(f"{name} -: there is no standard input to read the text from")
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{name} -: standard input holds more than {limit:,} bytes, the most a text read from it "
                         "may hold: shorten the text")
    return data.decode("utf-8", "surrogateescape")


def texts_of(value) -> list[str]:
    """A text argument's texts: one str (PROMPT, TEXT), a list of them (embed's TEXT...), or none (absent)."""
    return [value] if isinstance(value, str) else list(value or [])


def read_text_arguments(args, stdin) -> None:
    """Each text argument of the parsed args made ready: a TEXT given as "-" replaced by the text the binary
    stream stdin holds ("-" given twice is refused: it is read once), then every text checked to be UTF-8."""
    dashes = [name for name in TEXT_ARGUMENTS for text in texts_of(getattr(args, name, None)) if text == STDIN]
    if len(dashes) > 1:
        raise ValueError(f"{dashes[0].rstrip('s').upper()} - is given {len(dashes)} times: standard input holds "
                         "one text")
    for name in dashes:
        text, value = read_stdin(stdin, name.rstrip("s").upper()), getattr(args, name)
        setattr(args, name, text if isinstance(value, str) else [text if t == STDIN else t for t in value])
    for name in TEXT_ARGUMENTS:
        for text in texts_of(getattr(args, name, None)):
            check_utf8(text, name.rstrip("s").upper())
