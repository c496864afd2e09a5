"""How host magics are declared, found and parsed; metakernel's organisation, kept lean.

Host magics touch the session (its files, limits, packages, the interpreter
itself) and so run on the host, never in the guest. Every other magic is
IPython's, run by the shell in the guest. A cell is split into steps in order:
guest code, and host magic lines at the top level of the cell; a host cell magic
(`%%writefile` on the first line) takes the whole cell. A cell with no host magic
goes to the guest exactly as written.
"""

from __future__ import annotations

import argparse
import io
import re
import shlex
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..magic_error import MagicError
from ..session_protocol import SessionView

_LINE_MAGIC = re.compile(r"^%(?!%)([A-Za-z_][\w]*)(?:[ \t]+(.*))?$")
_CELL_MAGIC = re.compile(r"^%%([A-Za-z_][\w]*)(?:[ \t]+(.*))?$")
# `!pip install x`, as notebooks write it (also pip3, python -m pip): the shell's pip
# would install on the host, so the line is %pip's, as IPython's own %pip advises.
_BANG_PIP = re.compile(r"^!\s*(?:pip3?|python3?\s+-m\s+pip)(?:[ \t]+(.*))?$")
_HELP = re.compile(r"^(\?{1,2})?(%{0,2}[A-Za-z_][\w.]*)(\?{1,2})?$")


@dataclass
class MagicOutput:
    """What a magic produced, for the kernel to send in order."""

    text: str = ""  # stdout stream
    bundles: list[dict[str, Any]] = field(default_factory=list)  # display_data bundles
    page: dict[str, Any] | None = None  # a `page` payload (help)
    # Files the magic itself changed on the host (the guest's tracker ignores those).
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


Handler = Callable[[SessionView, str, "str | None"], MagicOutput]  # (the session, its arguments, a cell magic's body)


Claims = Callable[[str], bool]


@dataclass(frozen=True)
class Magic:
    name: str
    kind: str  # "line", "cell" or "both"
    handler: Handler
    usage: str  # one line: how to call it
    help: str  # the rest of the help text
    # Whether this call is the host's: %config claims only the kernel's own class,
    # and leaves %config InlineBackend... to IPython in the guest.
    claims: Claims | None = None


class MagicRegistry:
    def __init__(self) -> None:
        self._magics: dict[str, Magic] = {}

    def add(self, name: str, kind: str, usage: str, help: str, claims: Claims | None = None) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._magics[name] = Magic(name, kind, handler, usage, help.strip(), claims)
            return handler

        return register

    def kinds(self) -> dict[str, str]:
        """name -> "line" | "cell" | "both", for the guest's %lsmagic."""
        return {name: m.kind for name, m in self._magics.items()}

    def claimed(self, name: str, cell: bool, args: str) -> Magic | None:
        """The host magic for `%name args` (or `%%name`), or None if it is the guest's."""
        magic = self._magics.get(name)
        if magic is None or magic.kind == ("line" if cell else "cell"):
            return None
        if magic.claims is not None and not magic.claims(args):
            return None
        return magic

    def line_names(self) -> list[str]:
        return sorted(n for n, m in self._magics.items() if m.kind in ("line", "both"))

    def cell_names(self) -> list[str]:
        return sorted(n for n, m in self._magics.items() if m.kind in ("cell", "both"))

    def lookup(self, name: str) -> Magic | None:
        return self._magics.get(name)


@dataclass(frozen=True)
class Step:
    kind: str  # "code", "line", "cell"
    text: str  # code, or the magic's argument string
    name: str = ""
    body: str | None = None


def split_cell(code: str, registry: MagicRegistry) -> list[Step]:
    """The cell's steps: host magics, and the guest code between them."""
    lines = code.split("\n")
    first = next((line for line in lines if line.strip()), "")
    match = _CELL_MAGIC.match(first.rstrip())
    if match:  # a cell magic takes the whole cell, as in IPython
        args = (match.group(2) or "").strip()
        if registry.claimed(match.group(1), True, args) is None:
            return [Step("code", code)]
        body = "\n".join(lines[lines.index(first) + 1:])
        return [Step("cell", args, match.group(1), body)]
    steps: list[Step] = []
    chunk: list[str] = []
    for line in lines:
        # Only unindented lines at a statement boundary are host magics: a `%files`
        # inside a block, a string or a bracket belongs to the guest's code.
        m = _LINE_MAGIC.match(line.rstrip())
        name, args = (m.group(1), (m.group(2) or "").strip()) if m else (None, "")
        if m is None and (bang := _BANG_PIP.match(line.rstrip())):
            name, args = "pip", (bang.group(1) or "").strip()
        if name is None or registry.claimed(name, False, args) is None or not _at_statement_boundary(chunk):
            chunk.append(line)
            continue
        if any(c.strip() for c in chunk):
            steps.append(Step("code", "\n".join(chunk)))
        chunk = []
        steps.append(Step("line", args, name))
    if not steps:
        return [Step("code", code)]
    if any(c.strip() for c in chunk):
        steps.append(Step("code", "\n".join(chunk)))
    return steps


def _at_statement_boundary(lines: list[str]) -> bool:
    """False inside an open bracket, string or continued line."""
    if not any(line.strip() for line in lines):
        return True
    source = "\n".join(lines) + "\n"
    try:
        for _token in tokenize.generate_tokens(io.StringIO(source).readline):
            pass
    except (tokenize.TokenError, SyntaxError):
        return False
    return not source.rstrip("\n").endswith("\\")


def help_request(code: str, registry: MagicRegistry) -> tuple[str, int] | None:
    """`%name?`, `%name??`, `?%name` for a host magic: (name, detail level), else None
    (every other help request is IPython's, in the guest)."""
    text = code.strip()
    if "\n" in text or "?" not in text:
        return None
    m = _HELP.match(text)
    if m is None or not (m.group(1) or m.group(3)) or (m.group(1) and m.group(3)):
        return None
    what = m.group(2)
    if not what.startswith("%") or registry.lookup(what.lstrip("%")) is None:
        return None
    marks = m.group(1) or m.group(3)
    return what.lstrip("%"), len(marks) - 1


def with_host_magics(found: dict[str, Any], code: str, cursor_pos: int, registry: MagicRegistry) -> dict[str, Any]:
    """A completion of the guest's (`found`, complete_reply's fields) with the host's
    magics added: the guest's IPython knows only its own, so `%fi<Tab>` also offers
    the host's %files, as one list, sorted as IPython sorts magics."""
    line_start = code.rfind("\n", 0, cursor_pos) + 1
    word = code[line_start:cursor_pos]
    if not word.startswith("%") or any(c.isspace() for c in word):
        return found
    cell = word.startswith("%%")
    names = registry.cell_names() if cell else registry.line_names()
    marks = "%%" if cell else "%"
    ours = [marks + n for n in names if n.startswith(word.lstrip("%"))]
    if not ours:
        return found
    if found.get("matches") and (found["cursor_start"], found["cursor_end"]) != (line_start, cursor_pos):
        return found  # the guest completed something else than the magic's name
    matches = sorted(set(found.get("matches", [])) | set(ours))
    types = [m for m in found.get("metadata", {}).get("_jupyter_types_experimental", []) if m.get("text") not in ours]
    types += [{"start": line_start, "end": cursor_pos, "text": m, "type": "magic", "signature": ""} for m in ours]
    return {"matches": matches, "cursor_start": line_start, "cursor_end": cursor_pos,
            "metadata": {"_jupyter_types_experimental": types}}


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
