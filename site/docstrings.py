"""The package's docstrings, written as plain text, made into reStructuredText for the API pages.

The docstrings are written to be read in a terminal (`help(T.softmax)`): paragraphs, a formula
indented under the line that introduces it, doctest examples, `code` in backticks, an occasional
*emphasis*. Read as reST, the indented formula would be a block quote, `a|b` a substitution and
`fn(*args)` a broken emphasis. `to_rest` keeps the text and makes those explicit:

- an indented block is a literal block (the line before it ends with '::'), shown as written;
- `>>>` examples are doctest blocks, and lists ('- ', '1. ') lists, set off by blank lines;
- outside backticks, a `*` that does not close an emphasis, every `|`, and a `_` that would end a
  reference are escaped, so they print as themselves.

>>> to_rest(["Scores:", "    e = q·k", "f(*args) or *this*, a|b."])
['Scores::', '', '    e = q·k', '', 'f(\\\\*args) or *this*, a\\\\|b.']
"""
from __future__ import annotations

import re

EMPHASIS = re.compile(r"(?<![\w*\\])(\*\*?)(?=[^\s*])([^*]+?)(?<=\S)\1(?![\w*])")
CODE = re.compile(r"(``.+?``|`[^`]+`)")
LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)]) ")
REFERENCE_END = re.compile(r"(?<=[\w`])_(?=\W|$)")


def escape_text(text: str) -> str:
    """Escape reST markup in a line of prose, outside its `code` spans."""
    if text.count("`") % 2:  # an odd backtick cannot open code: print it
        return escape_plain(text.replace("`", "\x00")).replace("\x00", "\\`")
    parts = CODE.split(text)
    return "".join(p if i % 2 else escape_plain(p) for i, p in enumerate(parts))


def escape_plain(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    text = REFERENCE_END.sub(r"\\_", text)
    kept = [(m.start(), m.end()) for m in EMPHASIS.finditer(text)]
    out, last = [], 0
    for start, end in kept:
        out += [text[last:start].replace("*", "\\*"), text[start:end]]
        last = end
    out.append(text[last:].replace("*", "\\*"))
    return "".join(out)


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def to_rest(lines: list[str]) -> list[str]:
    """Plain-text docstring lines -> reST lines (see the module docstring)."""
    out: list[str] = []
    mode, item_indent = "text", 0  # text | item (of a list) | literal | doctest

    def blank():
        if out and out[-1] != "":
            out.append("")

    for line in lines:
        if not line.strip():
            if mode in ("doctest", "item"):
                mode = "text"
            out.append("")
            continue
        if line.lstrip().startswith(">>>") and mode != "doctest":
            blank()
            mode = "doctest"
            out.append(line.strip() if indent_of(line) == 0 else line)
            continue
        if mode == "doctest":
            out.append(line)
            continue
        if mode == "item" and indent_of(line) == item_indent:
            out.append(" " * item_indent + escape_text(line.strip()))  # the item goes on
            continue
        if indent_of(line) > 0:
            if mode != "literal":
                prev = next((i for i in range(len(out) - 1, -1, -1) if out[i] != ""), None)
                if prev is not None and mode == "text" and out[prev].endswith(":") and not out[prev].endswith("::"):
                    out[prev] += ":"  # "text:" + literal block = "text::"
                else:
                    blank()
                    out.append("::")
                blank()
                mode = "literal"
            out.append(line)
            continue
        item = LIST_ITEM.match(line)
        if item:
            if mode != "item":
                blank()
            mode, item_indent = "item", len(item.group(0))
            out.append(item.group(0) + escape_text(line[item_indent:]))
            continue
        if mode in ("literal", "item"):
            blank()
            mode = "text"
        out.append(escape_text(line))
    return out
