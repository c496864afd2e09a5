"""What `wasm-kernel run` writes to the terminal: colours only where they show, and
the lines a notebook updates in place (a progress bar's carriage returns, a display
updated by its id, cleared output) drawn as one updating line on a terminal and, into
a pipe or a file, written once in their final state.

What the guest or the notebook controls goes through terminal_text or terminal_field
(terminal_text.py) before it is written, with one addition: in a line that holds no
other control than carriage returns (and colours), a carriage return does what it
does in Jupyter, back to the line's start with what follows overwriting, and the line
is shown in that final state, as the notebook shows it (so tqdm draws one line). The
terminal never receives the guest's `\r` itself, only the line redrawn whole by us.
A line that also holds any other control is shown escaped whole, overwritten text
included: a carriage return there is part of an attempt to drive the terminal.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TextIO

from .terminal_text import colour_ok, terminal_field, terminal_text

_SGR = re.compile(r"\x1b\[[0-9;]*m")

COLOR_CHOICES = ("auto", "always", "never")
ERASE_LINE = "\r\x1b[K"  # back to the line's start, and clear it


def wants_colour(choice: str, stream: TextIO) -> bool:
    """--color: auto colours a terminal (and honours NO_COLOR), always and never are what they say."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return colour_ok(stream)


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


@dataclass
class _Line:
    """A line being written. `raw` is everything written to it; its state is what a
    notebook shows: a carriage return goes back to the start and what follows
    overwrites. A display's text is literal: no carriage return is interpreted."""

    literal: bool = False
    raw: str = ""
    chars: list[str] = field(default_factory=list)
    column: int = 0
    hostile: bool = False  # a control besides carriage returns and colours: shown escaped whole

    def feed(self, text: str) -> None:
        self.raw += text
        if self.literal:
            self.chars.extend(text)
            return
        bare = _SGR.sub("", text).replace("\r", "")
        self.hostile = self.hostile or terminal_text(bare) != bare  # escaping would change it
        for ch in text:
            if ch == "\r":
                self.column = 0
                continue
            if self.column < len(self.chars):
                self.chars[self.column] = ch
            else:
                self.chars.append(ch)
            self.column += 1

    def source(self) -> str:
        """What to show, before escaping: the final state of a plain line, else all of it."""
        return self.raw if self.literal or self.hostile else "".join(self.chars)


@dataclass
class _Live:
    """The line that may still change: a stream's unfinished line, or a display that
    has a display_id (it may be updated or cleared)."""

    stream: str
    line: _Line = field(default_factory=_Line)
    display_id: str | None = None
    drawn: str = ""  # the source of what the terminal shows of it now ("" when nothing)


class Printer:
    """Writes to the terminal, flushing each write so stdout and stderr interleave in order."""

    def __init__(self, out: TextIO, err: TextIO, color: str = "auto") -> None:
        self.out, self.err = out, err
        self.color = wants_colour(color, out)
        self.err_color = wants_colour(color, err)
        self._tty = {"stdout": is_terminal(out), "stderr": is_terminal(err)}
        self._live: _Live | None = None
        self._clear_before_next = False
        self.at_line_start = True

    # --- untrusted text made safe ------------------------------------------------------

    def text(self, text: str, stream: str = "stdout") -> str:
        """Untrusted multi-line text for `stream`, its colours kept only where that stream shows them."""
        return terminal_text(text, keep_sgr=self.err_color if stream == "stderr" else self.color)

    @staticmethod
    def field(text: str) -> str:
        """An untrusted value that must stay on one line."""
        return terminal_field(text)

    def style(self, text: str, code: str, stream: str = "stdout") -> str:
        colour = self.err_color if stream == "stderr" else self.color
        return f"\033[{code}m{text}\033[0m" if colour and text else text

    # --- writing ---------------------------------------------------------------------

    def _target(self, stream: str) -> TextIO:
        return self.err if stream == "stderr" else self.out

    def _raw(self, text: str, stream: str) -> None:
        if not text:
            return
        if stream == "stderr":
            self.out.flush()
        target = self._target(stream)
        target.write(text)
        target.flush()
        self.at_line_start = text.endswith("\n")

    def write(self, text: str, stream: str = "stdout") -> None:
        """Text of ours (already safe), after whatever line was still changing."""
        self.settle()
        self._raw(text, stream)

    def line(self, text: str, stream: str = "stdout") -> None:
        """A whole line, on a line of its own even after a stream that did not end one."""
        self.settle()
        if not self.at_line_start:
            self._raw("\n", stream)
        self._raw(text + "\n", stream)

    def stream(self, text: str, stream: str = "stdout") -> None:
        """A cell's stream output: complete lines as they come, the unfinished last line
        kept live, carriage returns interpreted."""
        self._clear_pending()
        live = self._live
        if live is not None and (live.stream != stream or live.display_id is not None):
            self.settle()
            live = None
        if live is None:
            live = self._live = _Live(stream)
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            live.line.feed(piece)
            ended = i < len(pieces) - 1
            if ended:
                self._finish(live)
                live = self._live = _Live(stream)
            elif piece:
                self._draw(live)
        if not live.line.raw:
            self._live = None

    def display(self, text: str, display_id: str | None, stream: str = "stdout") -> None:
        """A display. One with a display_id on a single line stays live: it may be updated or cleared."""
        self._clear_pending()
        self.settle()
        if display_id is None or "\n" in text:
            self.line(self.text(text, stream), stream)
            return
        live = self._live = _Live(stream, _Line(literal=True), display_id)
        live.line.feed(text)
        self._draw(live)

    def update_display(self, text: str, display_id: str, stream: str = "stdout") -> None:
        """update_display_data: the live display redrawn; an earlier one shown again, updated."""
        live = self._live
        if live is None or live.display_id != display_id:
            self.display(text, display_id, stream)
            return
        live.line = _Line(literal=True)
        live.line.feed(text)
        self._draw(live)

    def clear(self, wait: bool = False) -> None:
        """clear_output: the live line goes (at once, or with wait=True when the next
        output comes). Lines already finished stay: a terminal cannot take them back."""
        if wait:
            self._clear_before_next = True
            return
        self._erase_live()

    def settle(self) -> None:
        """The live line stays as it is now: ended, on a terminal; written, into a pipe."""
        live, self._live = self._live, None
        if live is not None and live.line.raw:
            self._finish(live)

    # --- the live line -----------------------------------------------------------------

    def _clear_pending(self) -> None:
        if self._clear_before_next:
            self._clear_before_next = False
            self._erase_live()

    def _erase_live(self) -> None:
        live, self._live = self._live, None
        if live is not None and live.drawn:
            self._raw(ERASE_LINE, live.stream)
            self.at_line_start = True

    def _draw(self, live: _Live) -> None:
        """On a terminal, the line as it is now: what it adds appended (the cursor is at
        the end of what was drawn), else redrawn whole. Into a pipe, nothing yet."""
        if not self._tty[live.stream]:
            return
        now = live.line.source()
        if now == live.drawn:
            return
        if live.drawn and now.startswith(live.drawn):
            self._raw(self.text(now[len(live.drawn):], live.stream), live.stream)
        elif live.drawn:
            self._raw(ERASE_LINE + self.text(now, live.stream), live.stream)
        else:
            if not self.at_line_start:
                self._raw("\n", live.stream)
            self._raw(self.text(now, live.stream), live.stream)
        live.drawn = now

    def _finish(self, live: _Live) -> None:
        """The line is done: its final state, ended."""
        if live.drawn:
            self._draw(live)
            self._raw("\n", live.stream)
            return
        if not self.at_line_start:
            self._raw("\n", live.stream)
        self._raw(self.text(live.line.source(), live.stream) + "\n", live.stream)


def summary_line(cells: int, failed: list[int], elapsed: float, *extra: str) -> str:
    """The last line of a run: cells run, how many failed (and which), the time taken."""
    text = f"{cells} code cell{'s' if cells != 1 else ''} in {elapsed:.1f} s; {len(failed)} failed"
    if failed:
        text += ": " + ", ".join(f"In [{n}]" for n in failed)
    return "; ".join([text, *extra])
