"""SessionSandbox: a PythonSandbox bound to a session, its lease and its metadata.

A subclass in the sessions layer, so the core sandbox stays session-agnostic: the
core already carries session_id into results and execution logs; this adds the two
things only sessions have, refreshing updated_at after each execute and releasing
the session's lease on close.
"""

from __future__ import annotations

from pathlib import Path

from ..core.logger import SandboxLogger
from ..core.policy import ExecutionPolicy
from ..core.sandbox import GuestOptions, PythonSandbox
from .leases import Lease
from .metadata import touch_metadata
from .session_workspace import SessionWorkspace


class SessionSandbox(PythonSandbox):
    refuses_sessions_root = False

    def __init__(
        self,
        workspace: Path,
        policy: ExecutionPolicy | None,
        logger: SandboxLogger | None,
        *,
        session_id: str,
        workspace_root: Path,
        lease: Lease,
        guest_options: GuestOptions | None = None,
        files: SessionWorkspace | None = None,
    ) -> None:
        # The lease is set first: if the guest fails to start, close() still releases it.
        self.lease = lease
        self.workspace_root = workspace_root
        # The workspace as the host writes to it, with the ledger the guest shares.
        self.files = files if files is not None else SessionWorkspace(workspace_root, session_id)
        super().__init__(workspace, policy, logger, session_id=session_id, guest_options=guest_options)

    def touch(self) -> None:
        """Record activity now (execute() does, unless its cell settles later). Every
        execute that returned counts, also one whose cell raised or hit a limit:
        updated_at measures idleness for prune, and a notebook whose last cell
        failed is not idle. Never raises."""
        assert self.session_id is not None
        touch_metadata(self.workspace_root, self.session_id, self.logger)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.files.close()
            self.lease.release()
