"""Stop-on-error without ipykernel's race: the queue is marked aborting before the
failed cell's reply goes out, not after.

ipykernel's execute_request sends an error reply and only then calls _abort_queues,
whose "stop aborting" marker reaches the shell's queue through the shell channel
thread later still. A request the client sent after it saw the error reply (the
next Shift+Enter, a test's next cell) can land before the marker and is aborted,
though it was never queued behind the failed cell. Posting the marker while the reply
is being built puts it ahead of everything the client sends after the reply; the
requests already queued behind the failed cell are aborted, as ipykernel means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class EarlyAbort:
    """Per shell (main or subshell): whether the abort for the reply being sent has been
    posted already, so the base class's own call after the reply is skipped once."""

    def __init__(self, abort_queues: Callable[[str | None], None]) -> None:
        self._abort_queues = abort_queues  # ipykernel's Kernel._abort_queues, bound
        self._posted: set[str | None] = set()

    def before_reply(self, parent: dict[str, Any], reply: dict[str, Any], silent: bool) -> None:
        """Called with the reply's content before it is sent: abort now if ipykernel
        would abort after it (an error, not silent, stop_on_error left on)."""
        content = parent.get("content") or {}
        if reply.get("status") != "error" or silent or not content.get("stop_on_error", True):
            return
        subshell = (parent.get("header") or {}).get("subshell_id")
        self._abort_queues(subshell)
        self._posted.add(subshell)

    def already_posted(self, subshell_id: str | None) -> bool:
        """ipykernel's call after the reply: True (and forgotten) if posted before it."""
        if subshell_id in self._posted:
            self._posted.discard(subshell_id)
            return True
        return False


__all__ = ["EarlyAbort"]
