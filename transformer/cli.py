"""Command line: python -m transformer COMMAND ...

Each area of the package adds its own sub-commands through a `register(subparsers)`
function; the handlers import the heavy parts (models, plots) only when run.
"""
from __future__ import annotations

import argparse
import sys

from . import cli_count, cli_decoder, cli_encoder


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


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        sys.stderr.close()
        return 0
