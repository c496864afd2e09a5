"""Interpreter-state magics: %reset, %undo, %who, %whos."""

from __future__ import annotations

from typing import Any

from .registry import MAGICS, MagicArgs, MagicError, MagicOutput


@MAGICS.add("reset", "line", "%reset [-f]", """Start a fresh interpreter: every variable and import is gone.
The workspace's files are kept. (-f is accepted for IPython compatibility; nothing is asked.)""")
def reset_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    args = MagicArgs("%reset")
    args.add_argument("-f", action="store_true")
    args.parse_line(line)
    kernel.reset_interpreter()
    return MagicOutput(text="Fresh interpreter: variables and imports are gone; files in the workspace are kept.\n")


@MAGICS.add("undo", "line", "%undo", """Roll the interpreter back to before the last cell that ran code: its variables,
imports and definitions are undone. Files are NOT rolled back: whatever it wrote to the
workspace stays. One level only.""")
def undo_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    if line.strip():
        raise MagicError("%undo takes no arguments")
    if not kernel.undo_last_cell():
        sandbox = kernel.sandbox
        reason = sandbox.undo_unavailable_reason() if sandbox is not None else None
        raise MagicError(f"%undo: nothing to undo: {reason or 'no cell has completed yet'}")
    return MagicOutput(
        text="Undid the last cell's changes to variables and imports. Files are not rolled back: "
        "anything it wrote to the workspace is still there.\n"
    )


def _query_text(kernel: Any, op: str, **args: Any) -> str:
    try:
        return str(kernel.query_sync(op, **args))
    except Exception as err:
        raise MagicError(f"%{op}: {err}") from None


@MAGICS.add("who", "line", "%who [TYPE ...]", "List the variables you defined, as IPython's %who does; TYPE names filter by type (e.g. %who int str).")
def who_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    types = line.split()
    text = _query_text(kernel, "who", types=types) if types else _query_text(kernel, "who")
    return MagicOutput(text=text if text.endswith("\n") else text + "\n")


@MAGICS.add("whos", "line", "%whos", "Like %who, with each variable's type and a short description.")
def whos_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    text = _query_text(kernel, "whos")
    return MagicOutput(text=text if text.endswith("\n") else text + "\n")
