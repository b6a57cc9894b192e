"""Command line: python -m transformer COMMAND ...

Each area of the package adds its own sub-commands through a `register(subparsers)`
function; the handlers import the heavy parts (models, plots) only when run.
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys

from . import check as cli_check, count as cli_count, decode as cli_decoder, encode as cli_encoder, train as cli_train
from . import serve as cli_serve
from .shown import shown
from .texts import read_text_arguments


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a bad or missing argument reported as one line, "error: …", status 2
    (argparse's own report is the usage block, then the message)."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {shown(with_guess(message))} (see {self.prog} --help)\n")


def with_guess(message: str) -> str:
    """argparse's message for a word outside a list of choices, with the closest choice added.

    >>> with_guess("argument COMMAND: invalid choice: 'generat' (choose from 'generate', 'tokenize', 'count')")
    "argument COMMAND: invalid choice: 'generat' (choose from 'generate', 'tokenize', 'count'); did you mean 'generate'?"
    """
    found = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
    if not found:
        return message
    guess = difflib.get_close_matches(found[1], re.findall(r"'(.*?)'", found[2]), n=1)
    return message + (f"; did you mean '{guess[0]}'?" if guess else "")


class CommandParser(OneLineParser):
    """A sub-command's parser: an argument it does not know is refused here, naming the command and the
    closest option it has (argparse hands a sub-command's leftovers to the top parser, whose message
    names neither)."""

    words: list[str] = []  # the command's arguments as typed, which argparse's messages do not quote

    def parse_known_args(self, args=None, namespace=None):
        self.words = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(self.words, namespace)
        if extras:
            words = self.words
            as_text = words[words.index("--") + 1:] if "--" in words else []  # argparse reads no option there
            self.error(unrecognized(extras, [s for a in self._actions for s in a.option_strings], as_text))
        return namespace, extras

    def error(self, message):
        super().error(with_dash_value(message, self.words, list(self._option_string_actions)))


def with_dash_value(message: str, words: list[str], options: list[str] = ()) -> str:
    """argparse's "expected one argument" for an option followed by a value that starts with '-' (-inf, -1e3,
    -nan: argparse reads it as an option), with how to give that value: joined to the option by '='. A word
    that is one of the command's options (`--top-p --chat`) is no value, and gets no such advice.

    >>> with_dash_value("argument --top-p: expected one argument", ["hi", "--top-p", "-inf"])
    "argument --top-p: expected one argument (a value that starts with '-' is read as an option: write --top-p=-inf)"
    """
    found = re.fullmatch(r"argument (\S+): expected one argument", message)
    if not found:
        return message
    names = found[1].split("/")  # "-o/--output": the option's spellings
    given = [(w, v) for w, v in zip(words, words[1:])
             if w in names and v.startswith("-") and v != "--" and v.split("=", 1)[0] not in options]
    if not given:
        return message
    option, value = given[0]
    return message + f" (a value that starts with '-' is read as an option: write {option}={value})"


def unrecognized(extras: list[str], options: list[str], as_text: list[str] = ()) -> str:
    """The message for arguments a command does not take: the mistyped options if any (a word after one
    is read as its value or as the next argument, and is no news), each with the closest option it has.
    An option written after `--` (as_text: the words there) is text to argparse: the message says so,
    rather than suggest the very option typed.

    >>> unrecognized(["--max-new-tokns", "hi"], ["--max-new-tokens", "--temperature"])
    'unrecognized arguments: --max-new-tokns; did you mean --max-new-tokens?'
    >>> unrecognized(["--chat"], ["--chat"], as_text=["--chat"])
    'unrecognized arguments: --chat (after --, every word is read as text, never as an option: put options before --)'
    """
    flags = [a for a in extras if a.startswith("-") and a != "--" and not a.lstrip("-").replace(".", "", 1).isdigit()]
    message = f"unrecognized arguments: {' '.join(flags or extras)}"
    if any(f in as_text for f in flags):
        message += " (after --, every word is read as text, never as an option: put options before --)"
    guesses = {}  # the closest option to each mistyped one, in order, once each; never the option as typed
    for name in (f.split("=", 1)[0] for f in flags):
        guesses.update(dict.fromkeys(g for g in difflib.get_close_matches(name, options, n=1) if g != name))
    return message + (f"; did you mean {' or '.join(guesses)}?" if guesses else "")


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__

    parser = OneLineParser(
        prog="python -m transformer",
        description="Transformer attention in NumPy on real models: SmolLM2-135M (decoder) "
                    "and all-MiniLM-L6-v2 (encoder).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Not required: with no command, main() prints this help rather than argparse's one line "required: COMMAND"
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    # sub-commands, one register() per area: generate, tokenize | count | embed, attention | train | check | serve
    cli_decoder.register(sub)
    cli_count.register(sub)
    cli_encoder.register(sub)
    cli_train.register(sub)
    cli_check.register(sub)
    cli_serve.register(sub)
    return parser


INTERRUPTED = 130  # 128 + SIGINT (2): the status a shell gives a command stopped by Ctrl-C


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `python -m transformer` alone: the commands, as --help lists them
        parser.print_help(sys.stderr)
        return 2
    try:
        read_text_arguments(args, getattr(sys.stdin, "buffer", None))
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line and 128 + SIGINT, as a shell and pip report it. Every file is
        # written beside its target and renamed over it (files.write_atomic): the earlier one stays whole
        print("error: interrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED
    except (ValueError, TypeError, OSError, RuntimeError) as e:  # OSError: files not found, not writable
        print(f"error: {shown(e)}", file=sys.stderr)  # one line: a path's newline or escape code is shown escaped
        return 2
    except MemoryError:
        print(f"error: out of memory: shorten the input (see `python -m transformer {args.command} --help` for the "
              "limits)", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: still one line, unless TRANSFORMER_TRACEBACK=1 asks for the traceback
        if os.environ.get("TRANSFORMER_TRACEBACK"):
            raise
        print(f"error: unexpected {type(e).__name__}: {shown(e)} (set TRANSFORMER_TRACEBACK=1 to see where)",
              file=sys.stderr)
        return 2
