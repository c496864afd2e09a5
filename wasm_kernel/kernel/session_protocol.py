"""What the kernel's helpers may use of it, typed, instead of `kernel: Any`.

Two views, each listing exactly what its users touch (grep them before adding one):

- `SessionView`: the notebook's session, for the host magics (kernel/magics/*) and
  the lab panel's comm (session_comm.py). NotebookSession is the one implementation.
- `KernelChannels`: the kernel's sockets, for the helpers that answer requests and
  send outputs (message_guard.py, cell_run.py, frontend_input.py). WasmKernel, on
  ipykernel's Kernel, is the one implementation.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jupyter_client.session import Session

    from ..core.policy import ExecutionPolicy
    from ..host.network_policy import NetworkPolicy
    from ..sessions.history_store import SessionHistory
    from ..sessions.identity import SessionIdentity
    from ..sessions.pip_runner import PipSettings
    from ..sessions.pruning import PruneResult
    from ..sessions.sandbox import SessionSandbox
    from ..sessions.session_workspace import SessionWorkspace
    from .kernel_limits import Remedies
    from .kernel_settings import KernelSettings
    from .notebook_identity import NotebookSource
    from .rewinds import Rewinds


class SessionView(Protocol):
    """The notebook's session as the host magics and the session panel see it."""

    log: logging.Logger
    settings: KernelSettings  # %config's traits, %pip's settings
    session_id: str
    identity: SessionIdentity
    notebook: NotebookSource
    policy: ExecutionPolicy  # the notebook's limits now
    operator_limits: ExecutionPolicy  # the most the notebook may set them to
    sandbox: SessionSandbox | None  # None until it has opened (or when it failed to)
    network: NetworkPolicy | None  # the hosts this notebook may fetch from now (None: none)
    recent_cells: deque[dict[str, Any]]  # the last cells' cell_event, newest first
    rewinds: Rewinds | None  # %rewind's points, files included (None until the sandbox opened)
    history: SessionHistory  # the session's cells, for the panel's preview of a rewind
    operator_network: NetworkPolicy | None  # the most it may: the operator's list

    @property
    def workspace_root(self) -> Path: ...

    @property
    def limit_advice(self) -> tuple[ExecutionPolicy, Remedies]: ...  # for a limit's line: how far, and how, to raise it

    @property
    def files(self) -> SessionWorkspace: ...  # the host's writes, through the session's disk ledger

    def notebook_name(self) -> str | None: ...

    def notebook_folder_state(self) -> str: ...

    def state_summary(self) -> str: ...

    def set_limit(self, name: str, value: Any) -> None: ...

    def set_policy(self, policy: ExecutionPolicy) -> None: ...

    def set_network(self, policy: NetworkPolicy | None) -> None: ...

    def prune(self, older_than_hours: float, dry_run: bool) -> PruneResult: ...

    def reset_interpreter(self) -> None: ...

    def undo_last_cell(self) -> bool: ...

    def cell_count(self) -> int: ...  # the execution count of the cell running now

    def say(self, text: str) -> None: ...

    def interrupted(self) -> bool: ...

    def packages_changed(self) -> None: ...

    def pip_settings(self) -> PipSettings: ...  # the operator's, with the course's packages as installed


class KernelChannels(Protocol):
    """The kernel's sockets and counters, as ipykernel's Kernel has them."""

    log: logging.Logger
    session: Session | None
    iopub_socket: Any  # ipykernel's BackgroundSocket, sendable from any thread
    stdin_socket: Any  # a zmq ROUTER socket
    execution_count: int

    def _topic(self, topic: str) -> bytes: ...


__all__ = ["KernelChannels", "SessionView"]
