"""Interpreter-state magics: %reset and %undo, which the host does to the guest as a whole."""

from __future__ import annotations

from ..session_protocol import SessionView
from .registry import MAGICS, MagicArgs, MagicError, MagicOutput


@MAGICS.add("reset", "line", "%reset [-f]", """Start a fresh interpreter: every variable and import is gone.
The workspace's files and In (the cell history) are kept. (-f and -s are accepted for IPython
compatibility; nothing is asked.) To delete some names only, use %reset_selective REGEX or del.""")
def reset_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    args = MagicArgs("%reset")
    args.add_argument("-f", action="store_true")
    args.add_argument("-s", action="store_true")
    try:
        args.parse_line(line)
    except MagicError:
        raise MagicError(
            f"%reset {line.strip()}: here %reset starts a fresh interpreter and takes only -f; "
            "to delete some names, use %reset_selective REGEX or del NAME"
        ) from None
    session.reset_interpreter()
    return MagicOutput(text="Fresh interpreter: variables and imports are gone; files in the workspace are kept. "
                            "%rewind goes back no further than this cell.\n")


@MAGICS.add("undo", "line", "%undo", """Roll the interpreter back to before the last cell that ran code: its variables,
imports and definitions are undone. Files are NOT rolled back: whatever it wrote to the
workspace stays. One level only.""")
def undo_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    if line.strip():
        raise MagicError("%undo takes no arguments")
    if not session.undo_last_cell():
        sandbox = session.sandbox
        reason = sandbox.undo_unavailable_reason() if sandbox is not None else None
        raise MagicError(f"%undo: nothing to undo: {reason or 'no cell has completed yet'}")
    return MagicOutput(
        text="Undid the last cell's changes to variables and imports. Files are not rolled back: "
        "anything it wrote to the workspace is still there.\n"
    )
