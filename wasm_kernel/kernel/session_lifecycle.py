"""What becomes of a kernel's session when the kernel ends.

A kernel that no notebook names (notebook_identity.is_unnamed: nbconvert, nbclient,
papermill, nbgrader and otter runs without JPY_SESSION_NAME) has a session of its
own, which nothing opens again once the kernel is gone: kept, every such run would
leave a folder in the user's sessions root. So, for such a kernel:

- at start its session is marked as an unattended run's (sessions/unattended.py)
  and leased at once, before the guest is ready: a prune in another process never
  takes it from a kernel that is still starting;
- a shutdown_request removes it, as `wasm-kernel sessions rm` would, once the sandbox
  has closed. Not one with restart=True: jupyter_client then ends this process and
  starts another on the same connection file, which binds the same session (the
  marker, refreshed here, covers the moment when neither process holds it);
- a kernel that is killed (SIGKILL; SIGTERM too, which Python does not turn into an
  exit) leaves its session marked, for the next prune, which every kernel's start
  runs (prune_unattended_sessions) and which takes it once no kernel holds it;
- WasmKernel.keep_unnamed_sessions_hours > 0 keeps it that long after its last
  cell, for inspection; the automatic prune removes it afterwards.

A named kernel's session is kept, as it always was; every kernel runs the prune.

The exit hook also orders ipykernel's shutdown (see _at_exit).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from ..core.logger import SandboxLogger
from ..sessions.leases import Lease, acquire_lease
from ..sessions.unattended import mark_unattended, refresh_mark, remove_unattended_session

# The automatic prune waits for the first cell's reply, or this long after the sandbox
# opened if no cell comes: beside a first cell, its scan and its imports held the GIL
# the guest's thread needs for every call it makes out of wasm.
PRUNE_SETTLE_S = 2.0
CONTROL_JOIN_S = 5.0  # jupyter_client sends SIGTERM 2.5 s after its shutdown_request anyway


class SessionLifecycle:
    """One kernel's session from start to exit. Never raises: a session that could not
    be marked or removed is logged and left for a prune, and the kernel goes on."""

    def __init__(
        self, workspace_root: Path, session_id: Callable[[], str], *, unnamed: bool, keep_hours: float,
        logger: SandboxLogger, log: logging.Logger, control_thread: threading.Thread | None,
    ) -> None:
        self.root = Path(workspace_root)
        self._session_id = session_id  # the kernel's current one (it may rebind as it opens)
        self.unnamed = unnamed
        self.keep_hours = keep_hours
        self.logger = logger
        self.log = log
        self._control_thread = control_thread
        self._lease: Lease | None = None
        self._shutdown_requested = False
        self._lock = threading.Lock()
        if unnamed:
            self._mark(self._session_id())
        # Registered after ipykernel's own exit hooks, so it runs before them (atexit is LIFO).
        atexit.register(self._at_exit)

    def _mark(self, session_id: str) -> None:
        try:
            self._lease = acquire_lease(self.root, session_id)
            mark_unattended(self.root, session_id, self.keep_hours)
        except (OSError, ValueError) as err:
            self.log.warning("wasm-kernel: this run's session could not be marked for removal: %s", err)

    def prune_when_ready(self, ready: threading.Event, settled: threading.Event) -> None:
        """Run the automatic prune in the background once `ready` is set (the sandbox
        is open) and `settled` (the first cell replied; PRUNE_SETTLE_S at most): it
        never delays a start or a first cell, nor competes with the guest's compile."""
        def prune() -> None:
            ready.wait()
            settled.wait(PRUNE_SETTLE_S)
            from ..sessions.pruning import prune_unattended_sessions  # imported here, off the start's path

            current = self._session_id()
            try:
                result = prune_unattended_sessions(self.root, self.logger, skip=lambda sid: sid == current)
            except Exception as err:  # a broken root costs the prune, never the kernel
                self.log.warning("wasm-kernel: the automatic prune of unattended runs failed: %s", err)
                return
            if result.deleted_sessions:
                self.log.info("wasm-kernel: removed %d session(s) of earlier unattended runs",
                              len(result.deleted_sessions))

        threading.Thread(target=prune, name="wasm-kernel-prune", daemon=True).start()

    def shutdown(self, restart: bool) -> None:
        """After a shutdown_request, once the sandbox has closed."""
        with self._lock:
            self._shutdown_requested = True
            if not self.unnamed:
                return
            session_id = self._session_id()
            try:
                if restart:
                    refresh_mark(self.root, session_id)
                    return
                self._release()
                if self.keep_hours > 0:
                    mark_unattended(self.root, session_id, self.keep_hours)  # again: the kernel may have rebound
                    return
                if remove_unattended_session(self.root, session_id, self.logger):
                    self.log.info("wasm-kernel: removed this run's session %s", session_id)
            except (OSError, ValueError) as err:
                self.log.warning("wasm-kernel: this run's session was left for the next prune: %s", err)

    def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def _at_exit(self) -> None:
        """Wait for the control thread to finish the shutdown_request it handled.

        ipykernel 7.4.0's shutdown_request (kernelbase.py:1156-1159) stops the main
        loop before process_control has published the request's "idle" status
        (kernelbase.py:409), so the process may be exiting while the control thread
        still sends. At exit IOPubThread.stop (iostream.py:304: registered after
        IPKernelApp.close, so it runs before it and before the control thread is
        stopped) closes every thread's event pipe, and the control thread, past its
        is_alive() check in IOPubThread.schedule (iostream.py:340-343), sends on a
        closed socket: "ZMQError: Socket operation on non-socket", printed by tornado
        for about one run in thirty under load. (ipykernel#1518 caught the same race
        in _really_send only.) Joining the control thread first (it stops its loop
        right after that status) closes the window."""
        thread = self._control_thread
        if self._shutdown_requested and thread is not None and thread is not threading.current_thread():
            thread.join(CONTROL_JOIN_S)
