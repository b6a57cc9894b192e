"""Command line: python -m transformer COMMAND ...

Each area of the package adds its own sub-commands through a `register(subparsers)`
function; the handlers import the heavy parts (models, plots) only when run.
"""
from __future__ import annotations

import argparse
import sys

from . import count as cli_count, decode as cli_decoder, encode as cli_encoder


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer",
        description="Transformer attention in NumPy on real models: SmolLM2-135M (decoder) "
                    "and all-MiniLM-L6-v2 (encoder).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # sub-commands, one register() per area: generate, tokenize | count | embed, attention
    cli_decoder.register(sub)
    cli_count.register(sub)
    cli_encoder.register(sub)
    return parser


# Arguments holding text to read (not paths): the shell hands over bytes, and Python keeps
# bytes that are not UTF-8 as lone surrogates U+DC80 … U+DCFF ("surrogateescape").
TEXT_ARGUMENTS = ("prompt", "text", "texts")


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


def _check_text_arguments(args) -> None:
    for name in TEXT_ARGUMENTS:
        value = getattr(args, name, None)  # one str, a list of them (embed's TEXT...), or absent
        for text in [value] if isinstance(value, str) else (value or []):
            check_utf8(text, name.rstrip("s").upper())


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _check_text_arguments(args)
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        sys.stderr.close()
        return 0
    except (ValueError, TypeError, OSError, RuntimeError) as e:  # OSError: files not found, not writable
        print(f"error: {e}", file=sys.stderr)
        return 2
