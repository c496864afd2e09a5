"""Text that untrusted code controls, made safe to write on the operator's terminal.

A cell's output, the names of the files it makes and the notebook names sessions
keep reach the CLI from the sandbox or from whoever named the notebook. Written
raw, their control characters would drive the terminal: retitle it (OSC 0), clear
it (CSI 2J), plant a hyperlink (OSC 8), overwrite a line (CR, BS), do the same
through the 8-bit C1 controls (0x9B is CSI), reorder what is shown (bidi
overrides and isolates), or split one table row into two (a newline in a name).

Two rules, one visible form for whatever is neutralised (Python's escapes:
`\\x1b`, `\\r`, `\\u202e`), so what was there can still be read:

- terminal_text, for streams and multi-line results: newline and tab stay. SGR
  colour sequences (ESC [ digits ; ... m) are removed, or kept when the caller
  writes to a terminal that takes colour (colour_ok), and then ended by a reset so
  that no colour outlives the text that set it. Everything else is shown escaped.
- terminal_field, for one-line values (table cells, file and notebook names):
  nothing is kept and nothing dropped; newline and tab are escaped too.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from typing import TextIO

RESET = "\x1b[0m"
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")
# Categories that are never text on a terminal: Cc (C0, DEL and C1 controls), Zl
# and Zp (line and paragraph separators: line breaks to some viewers and to
# str.splitlines), Cs (lone surrogates: the undecodable bytes of a file name,
# which would also make the write itself fail). All of them lie in the BMP.
_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})
# The bidi controls of UAX #9: the explicit embeddings, overrides and isolates and
# the implicit marks. They are Cf, as are the zero-width joiners emoji need, so
# they are listed rather than found by category; only these reorder text.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def colour_ok(stream: TextIO) -> bool:
    """Whether colours may be written to `stream`: a terminal, and NO_COLOR unset
    (no-color.org). Into a pipe or a file they would only be noise."""
    try:
        return stream.isatty() and "NO_COLOR" not in os.environ
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def terminal_text(text: str, *, keep_sgr: bool = False) -> str:
    """A stream or multi-line result as it may be written: newlines and tabs kept,
    SGR colours kept only if keep_sgr (then reset at the end), the rest escaped."""
    if not keep_sgr:
        return _escape(_SGR.sub("", text), _unsafe(one_line=False))
    pieces = _SGR.split(text)  # text, colour, text, colour, ..., text
    pattern = _unsafe(one_line=False)
    out = [piece if i % 2 else _escape(piece, pattern) for i, piece in enumerate(pieces)]
    return "".join(out) + (RESET if len(pieces) > 1 else "")


def terminal_field(text: str) -> str:
    """A one-line value (a table cell, a file or notebook name) with every control,
    newline and tab included, shown escaped: it stays on its line, and whole."""
    return _escape(text, _unsafe(one_line=True))


def _escape(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: _visible(m.group()), text)


def _visible(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


@functools.cache
def _unsafe(one_line: bool) -> re.Pattern[str]:
    """A character class of what must not reach the terminal, from the Unicode
    tables (scanned once per process, a few milliseconds) so the escaping is one
    regex substitution even for megabytes of output."""
    codes = {c for c in range(0x10000) if unicodedata.category(chr(c)) in _CATEGORIES}
    codes |= {ord(c) for c in BIDI_CONTROLS}
    if not one_line:
        codes -= {ord("\n"), ord("\t")}
    return re.compile("[" + "".join(_class_ranges(sorted(codes))) + "]")


def _class_ranges(codes: list[int]) -> list[str]:
    """Sorted code points as regex class ranges, e.g. [0, 1, 2, 5] -> \\x00-\\x02, \\x05."""
    ranges: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code == prev + 1:
            prev = code
            continue
        ranges.append(f"\\U{start:08x}" if start == prev else f"\\U{start:08x}-\\U{prev:08x}")
        start = prev = code
    return ranges
