"""How magics are declared, found and parsed; metakernel's organisation, kept lean.

A cell is split into steps in order: guest code, host line magics, or one cell
magic (`%%name` on the first line takes the whole cell). Magics always run on the
host; a magic that needs the guest (`%time`, `%timeit`) returns code for it.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_LINE_MAGIC = re.compile(r"^%(?!%)([A-Za-z_][\w]*)(?:[ \t]+(.*))?$")
_CELL_MAGIC = re.compile(r"^%%([A-Za-z_][\w]*)(?:[ \t]+(.*))?$")
_HELP = re.compile(r"^(\?{1,2})?(%{0,2}[A-Za-z_][\w.]*)(\?{1,2})?$")


class MagicError(Exception):
    """A refused or malformed magic: shown as one line, `UsageError: ...`."""


@dataclass
class MagicOutput:
    """What a magic produced, for the kernel to send in order."""

    text: str = ""  # stdout stream
    bundles: list[dict[str, Any]] = field(default_factory=list)  # display_data bundles
    page: dict[str, Any] | None = None  # a `page` payload (help)
    guest_code: str | None = None  # run this in the guest next
    timed: bool = False  # ... with %time's report
    # Files the magic itself changed on the host (the guest's tracker ignores those).
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


Handler = Callable[[Any, str, "str | None"], MagicOutput]


@dataclass(frozen=True)
class Magic:
    name: str
    kind: str  # "line", "cell" or "both"
    handler: Handler
    usage: str  # one line: how to call it
    help: str  # the rest of the help text


class MagicRegistry:
    def __init__(self) -> None:
        self._magics: dict[str, Magic] = {}

    def add(self, name: str, kind: str, usage: str, help: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._magics[name] = Magic(name, kind, handler, usage, help.strip())
            return handler

        return register

    def line_names(self) -> list[str]:
        return sorted(n for n, m in self._magics.items() if m.kind in ("line", "both"))

    def cell_names(self) -> list[str]:
        return sorted(n for n, m in self._magics.items() if m.kind in ("cell", "both"))

    def get(self, name: str, cell: bool) -> Magic:
        magic = self._magics.get(name)
        if magic is None or (cell and magic.kind == "line") or (not cell and magic.kind == "cell"):
            prefix = "%%" if cell else "%"
            known = " ".join(("%%" if cell else "%") + n for n in (self.cell_names() if cell else self.line_names()))
            raise MagicError(f"{prefix}{name} is not a magic of this kernel; the known ones are: {known}")
        return magic

    def lookup(self, name: str) -> Magic | None:
        return self._magics.get(name)


@dataclass(frozen=True)
class Step:
    kind: str  # "code", "line", "cell"
    text: str  # code, or the magic's argument string
    name: str = ""
    body: str | None = None


def split_cell(code: str) -> list[Step]:
    """The cell's steps. `!cmd` lines are refused here, before anything runs."""
    lines = code.split("\n")
    first = lines[0].strip() if lines else ""
    match = _CELL_MAGIC.match(first)
    if match:
        return [Step("cell", (match.group(2) or "").strip(), match.group(1), "\n".join(lines[1:]))]
    if first.startswith("%%"):
        raise MagicError(f"{first.split()[0]!r} is not a cell magic; write its name after %%, e.g. %%writefile notes.txt")
    steps: list[Step] = []
    chunk: list[str] = []
    for line in lines:
        # Only unindented lines are magics, as in IPython for everything that matters
        # here; an indented `%x` reaches the guest and is a SyntaxError there.
        if line.startswith("!"):
            raise MagicError(
                "shell commands (!cmd) are not available: the sandbox has no shell, and nothing "
                "runs on the host; use Python (os, pathlib, subprocess-free code) instead"
            )
        m = _LINE_MAGIC.match(line.rstrip())
        if m is None:
            if line.startswith("%%"):
                raise MagicError(f"cell magic {line.split()[0]} must be on the first line of the cell")
            chunk.append(line)
            continue
        if any(c.strip() for c in chunk):
            steps.append(Step("code", "\n".join(chunk)))
        chunk = []
        steps.append(Step("line", (m.group(2) or "").strip(), m.group(1)))
    if any(c.strip() for c in chunk) or not steps:
        steps.append(Step("code", "\n".join(chunk)))
    return steps


def help_request(code: str) -> tuple[str, int] | None:
    """`name?`, `name??`, `?name`, `%magic?`: (what, detail level), else None."""
    text = code.strip()
    if "\n" in text or "?" not in text:
        return None
    m = _HELP.match(text)
    if m is None or not (m.group(1) or m.group(3)) or (m.group(1) and m.group(3)):
        return None
    marks = m.group(1) or m.group(3)
    return m.group(2), len(marks) - 1


class MagicArgs(argparse.ArgumentParser):
    """argparse that reports a bad call as MagicError instead of exiting the kernel."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        super().__init__(prog=prog, add_help=False, exit_on_error=False, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise MagicError(f"{self.prog}: {message}; usage: {self.format_usage().strip().removeprefix('usage: ')}")

    def parse_line(self, line: str) -> argparse.Namespace:
        try:
            words = shlex.split(line)
        except ValueError as err:
            raise MagicError(f"{self.prog}: {err}") from None
        try:
            return self.parse_args(words)
        except argparse.ArgumentError as err:
            self.error(str(err))
            raise  # unreachable: error() raises


MAGICS = MagicRegistry()
