"""Command line: python -m transformer COMMAND ...

Each area of the package adds its own sub-commands through a `register(subparsers)`
function; the handlers import the heavy parts (models, plots) only when run.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer",
        description="Transformer attention in NumPy on real models: SmolLM2-135M (decoder) "
                    "and all-MiniLM-L6-v2 (encoder).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # sub-commands (one register() per area):
    from . import cli_decoder; cli_decoder.register(sub)
    from . import cli_count; cli_count.register(sub)
    from . import cli_encoder; cli_encoder.register(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
