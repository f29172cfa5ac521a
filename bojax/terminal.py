"""Text from a run folder (or an objective's error) made safe to print.

A run folder is data that anyone may have written: a parameter name or an error text may
hold Rich markup (``[/data]`` crashes Rich's parser, ``[link=...]`` would render) or
terminal escape sequences (``\\x1b]0;...`` retitles the terminal, ``\\x1b[2J`` clears it).
The ``bojax`` commands print such text through :func:`plain` on a console made by
:func:`console`, which interprets no markup; their own styling goes through Rich ``Text``
objects instead.
"""

from __future__ import annotations

import os
import sys
import unicodedata

from rich.console import Console
from rich.text import Text


def plain(value: object) -> str:
    """``str(value)`` with every control and format character (escape sequences, bidi
    overrides, carriage returns) shown as a visible ``\\x..``/``\\u....`` code."""
    text = str(value)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == "\n" or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


PIPED_WIDTH = 1000  # columns when printing to a file or pipe and COLUMNS is unset


def console(markup: bool = False) -> Console:
    """A console that prints strings as they are: no markup (unless ``markup``, for
    bojax's own text), no highlighting.

    Printed to a file or a pipe, Rich would assume 80 columns and cut a wide table's cells
    (``bojax show run > run.txt`` lost its point column); there it lays lines out on
    ``PIPED_WIDTH`` columns unless ``COLUMNS`` says otherwise."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(markup=markup, highlight=False, width=PIPED_WIDTH if piped else None)


def styled(text: object, style: str) -> Text:
    """``plain(text)`` in ``style``."""
    return Text(plain(text), style=style)


def error_line(error: object) -> Text:
    """``error: <text>`` with the label in bold red and the text as it is."""
    return Text.assemble(("error: ", "bold red"), plain(error))


def print_error(console: Console, error: object) -> None:
    """Print :func:`error_line` unbroken: the terminal wraps it, so a path or a command
    in it copies as one piece (and a test's search for a phrase never meets a newline)."""
    console.print(error_line(error), soft_wrap=True)
