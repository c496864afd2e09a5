"""Sandboxes: the public execute() API over a persistent guest interpreter."""

from __future__ import annotations

import json
import os
import threading
from abc import ABC, abstractmethod
from enum import Enum
from pathlib import Path
from typing import Any

from ..host.artifacts import guest_artifacts
from ..host.work_meter import Progress
from ..runtime.guest_messages import BadMessage, query_value
from ..runtime.debug_door import DebugDoor
from ..runtime.hibernation import Hibernated
from ..runtime.points import PointInfo, Rewound
from ..runtime.guest_thread import GuestThread
from ..runtime.guest_config import CellOptions, GuestOptions, OnDisplay, OnInput, TurnLimits, TurnOutcome
from ..runtime.output import OnOutput
from ..runtime.provisioning import new_guest
from .workspace_tracker import WorkspaceTracker
from .logger import SandboxLogger
from .policy import ExecutionPolicy
from .result import ErrorInfo, SandboxResult

DEFAULT_WORKSPACE = Path("workspace")
# The sessions layer keeps its private data (metadata, leases, registry) in this
# folder of a sessions root. Defined here, below that layer, so core can refuse to
# mount a sessions root: its guest would see every session and that data.
SESSIONS_PRIVATE_DIR = ".wasm-kernel"


class RuntimeType(str, Enum):
    """The guest language: Python is the only one. The seed's API passes it to
    create_sandbox and create_session_sandbox, so callers written to it run as they are."""

    PYTHON = "python"


class QueryError(RuntimeError):
    """A query (completion, inspection, ...) failed: a limit stopped it, or it raised.

    The interpreter is as it was before the query: a stopped query is rolled back
    like a stopped cell."""

    def __init__(self, op: str, message: str, trap: str | None = None) -> None:
        super().__init__(message)
        self.op = op
        self.trap = trap


def limit_message(trap: str | None, policy: ExecutionPolicy, *, after_grace: bool = False) -> str | None:
    """One line saying which limit stopped the cell and how to raise it."""
    if trap == "out_of_fuel":
        return (
            f"Cell stopped: it used its whole fuel budget of {policy.fuel_budget:,} instructions. "
            "Raise ExecutionPolicy.fuel_budget to allow more work per cell."
        )
    if trap == "cpu_time":
        return (
            f"Cell stopped: it used its whole CPU-time budget of {policy.cpu_seconds:g} s. "
            "Raise ExecutionPolicy.cpu_seconds to allow more work per cell."
        )
    if trap == "deadline":
        return (
            f"Cell stopped: it ran past its {policy.deadline_seconds:g} s deadline. "
            "Raise ExecutionPolicy.deadline_seconds to allow longer cells."
        )
    if trap == "memory":
        return (
            f"Cell stopped: the guest reached its {policy.memory_bytes / 2**20:,.0f} MiB memory cap. "
            "Raise ExecutionPolicy.memory_bytes to allow more memory."
        )
    if trap == "interrupted" and after_grace:
        return (
            f"Cell interrupted: it did not stop within {policy.interrupt_grace_seconds:g} s (a long call into "
            "compiled code), so it was stopped and rolled back to before it ran."
        )
    if trap == "interrupted":
        return "Cell interrupted (KeyboardInterrupt)."
    if trap == "stack_overflow":
        return "Cell stopped: the guest's native stack overflowed (recursion too deep in C code)."
    if trap == "crash":
        return "Cell stopped: the guest interpreter crashed."
    return None


class BaseSandbox(ABC):
    def __init__(
        self,
        workspace: Path,
        policy: ExecutionPolicy | None = None,
        logger: SandboxLogger | None = None,
        session_id: str | None = None,
    ) -> None:
        self.workspace = Path(workspace)
        self.policy = policy or ExecutionPolicy()
        self.logger = logger or SandboxLogger()
        self.session_id = session_id

    @abstractmethod
    def execute(
        self,
        code: str,
        *,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
        on_input: OnInput | None = None,
        cell: CellOptions | None = None,
    ) -> SandboxResult: ...

    @abstractmethod
    def disk_usage(self, remeasure: bool = False) -> tuple[int, int]:
        """(bytes, files and folders) the disk quota counts in /app and /tmp."""

    @abstractmethod
    def query(self, op: str, **args: Any) -> Any:
        """Ask the interpreter something without running a cell (completion,
        inspection, ...); QueryError when a limit stops it or it raises."""

    @abstractmethod
    def interrupt(self) -> bool:
        """Stop the running cell from any thread; True if one was running."""

    @abstractmethod
    def close(self) -> None:
        """End the interpreter and release the workspace."""

    def __enter__(self) -> BaseSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PythonSandbox(BaseSandbox):
    """CPython 3.15 (WASI) running IPython's shell, with the workspace mounted
    read-write at /app."""

    runtime = RuntimeType.PYTHON
    # A query answers a keystroke (Tab, Shift-Tab): it gets a small share of what a
    # cell may use, so a user's looping __dir__ or keys() cannot hang the kernel.
    query_fuel = 10_000_000_000  # about a second of pure-Python work
    query_cpu_seconds = 1.0
    query_deadline_seconds = 5.0
    query_output_bytes = 64 * 1024  # prints from user code during a query are dropped
    # A folder holding `.wasm-kernel` is a sessions root: mounted whole, its guest
    # would see every session. Session sandboxes turn this off: their folder is a
    # `<root>/<uuid>` the sessions layer chose, and what its guest made inside it
    # (a `.wasm-kernel` of its own included) must never stop it from opening again.
    refuses_sessions_root = True

    def __init__(
        self,
        workspace: Path = DEFAULT_WORKSPACE,
        policy: ExecutionPolicy | None = None,
        logger: SandboxLogger | None = None,
        session_id: str | None = None,
        progress: Progress | None = None,
        guest_options: GuestOptions | None = None,
    ) -> None:
        super().__init__(workspace, policy, logger, session_id)
        if self.refuses_sessions_root and os.path.lexists(self.workspace / SESSIONS_PRIVATE_DIR):
            raise ValueError(
                f"{self.workspace} is a sessions root (it holds {SESSIONS_PRIVATE_DIR}/); mounting it "
                "would expose every session: use create_session_sandbox() or another workspace folder"
            )
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.workspace = self.workspace.resolve()
        self._lock = threading.Lock()
        self._cells = 0
        self._files = WorkspaceTracker(self.workspace)
        self._host_touched: set[str] | None = set()  # see take_host_changes
        self._guest = new_guest(
            self.workspace, memory_bytes=self.policy.memory_bytes, progress=progress, options=guest_options
        )

    @property
    def python_version(self) -> str:
        return guest_artifacts().python_version

    @property
    def boot_notice(self) -> str | None:
        """Why the interpreter started without its warm image (slower), if it did."""
        return self._guest.boot_notice

    @property
    def started_from_image(self) -> bool:
        return self._guest.started_from_image

    @property
    def debug_door(self) -> DebugDoor:
        """Where a debugger's requests reach the guest while a cell is stopped in it."""
        return self._guest.debug

    @property
    def busy(self) -> bool:
        """A turn is running (a cell, a comm message or a query)."""
        return self._lock.locked()

    @property
    def executor(self) -> GuestThread:
        """The guest's own thread as an executor (`submit`): an execute() handed to it
        calls the guest where it already is, not through one more thread each way."""
        return self._guest.executor

    def execute(
        self,
        code: str,
        *,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
        on_input: OnInput | None = None,
        cell: CellOptions | None = None,
    ) -> SandboxResult:
        """Run one cell through the guest's IPython shell, as ipykernel runs it:
        magics, `_`, In/Out, rich display, IPython tracebacks. `cell` carries an
        execute_request's options (silent, store_history, the execution count...)
        and the caller's (CellOptions.keep_output, settle_later)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        with self._lock:
            self._cells += 1
            policy = self.policy
            self.logger.log_execution_start(self.runtime.value, policy, session_id=self.session_id)
            if self._track_start():
                self._guest.measure_disk()  # the host changed the workspace: the quota's count with it
            limits = self._cell_limits(policy)
            outcome = self._guest.run_cell(
                code,
                limits=limits,
                options=cell,
                on_output=on_output,
                on_display=on_display,
                on_input=on_input,
            )
            changes = self._files.finish_cell()
            settle_now = cell is None or not cell.settle_later
            if settle_now:
                self._guest.checkpoint_soon()
            result = self._result(outcome, policy)
            result.files_created = changes.created
            result.files_modified = changes.modified
            result.files_deleted = changes.deleted
            if self._files.cut:
                result.metadata["files_not_tracked"] = self._files.cut
            self.logger.log_execution_complete(result, session_id=self.session_id)
        if settle_now:
            self.touch()
        return result

    def execute_inside(
        self,
        code: str,
        *,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
        cell: CellOptions | None = None,
    ) -> SandboxResult | None:
        """A kernel subshell's cell while another cell runs: run inside it, at its
        next safe point, in the same interpreter, with a cell's limits of its own
        (the running cell is not charged for it). None if no cell runs, or it ended
        first: then execute() it. Its file changes are the running cell's."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        return self._inside(code, options=cell, on_output=on_output, on_display=on_display)

    def deliver_comm_inside(
        self,
        msg_type: str,
        msg: dict[str, Any],
        *,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
    ) -> SandboxResult | None:
        """A comm message (a widget's event) on a kernel subshell while a cell runs:
        handled inside it at its next safe point, as execute_inside runs a cell."""
        return self._inside(None, comm=(msg_type, msg), on_output=on_output, on_display=on_display)

    def _inside(self, code: str | None, **work: Any) -> SandboxResult | None:
        if not self.busy:
            return None
        policy = self.policy
        outcome = self._guest.run_inside(code, limits=self._cell_limits(policy), **work)
        return None if outcome is None else self._result(outcome, policy)

    def deliver_comm(
        self,
        msg_type: str,
        msg: dict[str, Any],
        *,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
    ) -> SandboxResult:
        """Hand a frontend's comm_open / comm_msg / comm_close to the guest's comm
        manager (a widget's change, a button's click), under a cell's limits: a
        handler that runs out of fuel or time is rolled back like a cell. What it
        sends goes to the callbacks; the files it changes are not shown (there is
        no cell to show them in) but are not blamed on the next cell either."""
        with self._lock:
            policy = self.policy
            if self._track_start():
                self._guest.measure_disk()
            outcome = self._guest.run_comm(
                msg_type, msg, limits=self._cell_limits(policy), on_output=on_output, on_display=on_display
            )
            changes = self._files.finish_cell()
            if self._host_touched is not None:  # not a cell's: the points take them in as the host's
                self._host_touched |= {*changes.created, *changes.modified, *changes.deleted}
            self._guest.checkpoint_soon()
            return self._result(outcome, policy)

    @property
    def metering(self) -> str:
        """What bounds a cell here: "time" (CPU time and the deadline) or "fuel"."""
        return self._guest.metering

    def _cell_limits(self, policy: ExecutionPolicy) -> TurnLimits:
        # Each metering has its budget; the other's is not applied (a fuel budget on an
        # engine that counts none would become a wall-clock limit).
        fuel = self._guest.metering == "fuel"
        return TurnLimits(
            fuel=policy.fuel_budget if fuel else None,
            cpu_seconds=None if fuel else policy.cpu_seconds,
            deadline_seconds=policy.deadline_seconds,
            memory_bytes=policy.memory_bytes,
            stdout_max_bytes=policy.stdout_max_bytes,
            stderr_max_bytes=policy.stderr_max_bytes,
            display_max_bytes=policy.display_max_bytes,
            disk_max_bytes=policy.disk_max_bytes,
            disk_max_files=policy.disk_max_files,
            interrupt_grace_seconds=policy.interrupt_grace_seconds,
        )

    def _result(self, outcome: TurnOutcome, policy: ExecutionPolicy) -> SandboxResult:
        error = None
        if outcome.error is not None:
            error = ErrorInfo(outcome.error["ename"], outcome.error["evalue"], list(outcome.error["traceback"]))
        metadata: dict[str, Any] = {"runtime": self.runtime.value, "python_version": self.python_version}
        if self.session_id is not None:
            metadata["session_id"] = self.session_id
        if outcome.restarted:
            metadata["restarted_reason"] = (
                f"the interpreter exited with status {outcome.exit_code} (os._exit): it was restarted, files kept"
                if outcome.process_exited
                else "exit() was called: the interpreter was restarted, files kept"
                if outcome.status == "exit"
                else "the interpreter could not be rolled back and was restarted, files kept"
            )
        return SandboxResult.from_outcome(
            outcome,
            success=outcome.status == "ok"
            or (outcome.status == "exit" and not outcome.process_exited and outcome.exit_code == 0),
            error=error,
            trap_message=limit_message(outcome.trap, policy, after_grace=outcome.interrupt_grace_expired),
            metering=self._guest.metering,
            workspace_path=str(self.workspace),
            metadata=metadata,
        )

    def disk_usage(self, remeasure: bool = False) -> tuple[int, int]:
        """(bytes, files and folders) the disk quota counts in /app and /tmp;
        remeasure=True counts again first, for a host write that must see what the
        host itself wrote since the last cell (the guest's count is kept live, the
        host's writes only at the next cell)."""
        # Never waits for a running cell (a panel's request must not hang behind it):
        # then the guest's live count is the answer.
        if remeasure and self._lock.acquire(blocking=False):
            try:
                self._guest.measure_disk()
            finally:
                self._lock.release()
        return self._guest.disk_usage()

    def query(self, op: str, **args: Any) -> Any:
        """Ask the guest about its live namespace without running a cell.

        op is one of complete(code, cursor_pos), inspect(code, cursor_pos,
        detail_level=0), is_complete(code), user_expressions(expressions), each
        answered by the guest's IPython shell; args must be JSON-serialisable. Returns the op's decoded
        value. A query is not a cell: no execution count, no `_`, no file tracking.
        Raises QueryError if it hits its limits (the interpreter is rolled back) or
        raises in the guest; ValueError for an op not in the allow-list."""
        payload = json.dumps(args)
        limits = self._query_limits()
        with self._lock:
            outcome = self._guest.run_query(op, payload, limits=limits)
        if outcome.status == "trap":
            raise QueryError(op, _query_stopped(op, outcome.trap, limits), outcome.trap)
        if outcome.status == "exit":
            raise QueryError(op, f"{op} query ended the interpreter; it was restarted, files kept")
        if outcome.status == "error":
            error = outcome.error or {}
            evalue = str(error.get("evalue", "")).strip().splitlines()
            detail = f"{error.get('ename', 'Error')}: {evalue[0][:200]}" if evalue else str(error.get("ename", "Error"))
            raise QueryError(op, f"{op} query failed in the guest: {detail}")
        try:
            return query_value(op, outcome.query_result)
        except BadMessage as err:
            raise QueryError(op, f"{op} query sent a malformed answer: {err}") from None

    def _query_limits(self) -> TurnLimits:
        policy = self.policy
        fuel, cpu, deadline = self.query_fuel, self.query_cpu_seconds, self.query_deadline_seconds
        metered = self._guest.metering == "fuel"
        return TurnLimits(
            fuel=None if not metered else fuel if policy.fuel_budget is None else min(fuel, policy.fuel_budget),
            cpu_seconds=None if metered else cpu if policy.cpu_seconds is None else min(cpu, policy.cpu_seconds),
            deadline_seconds=deadline if policy.deadline_seconds is None else min(deadline, policy.deadline_seconds),
            memory_bytes=policy.memory_bytes,
            stdout_max_bytes=self.query_output_bytes,
            stderr_max_bytes=self.query_output_bytes,
        )

    def interrupt(self) -> bool:
        return self._guest.interrupt()

    def checkpoint_soon(self) -> None:
        """Start the last cell's checkpoint in the background (see execute())."""
        self._guest.checkpoint_soon()

    def touch(self) -> None:
        """Record that the sandbox was used now: a plain sandbox keeps no record (a
        session's does, SessionSandbox.touch)."""

    def undo(self) -> bool:
        """Roll the interpreter back to before the last cell that completed: its
        variables, imports and definitions are undone. One level only.

        Files are NOT rolled back: what the cell wrote to the workspace stays. Files
        it opened and left open are closed (their Python objects are gone with it);
        files it closed that were open before it are open again, at their offsets.
        A cell that raised counts (it may have changed state before raising); a cell
        stopped by a limit or an interrupt was already rolled back and does not, so
        undo then goes back past the last cell that completed before it. Returns
        False, changing nothing, when there is nothing to undo: no cell since the
        sandbox started or restart() (or exit()), or the last one was already
        undone; `undo_unavailable_reason()` says which."""
        with self._lock:
            done = self._guest.undo()
        self.logger.log_event("sandbox.undo", undone=done, session_id=self.session_id)
        return done

    def undo_unavailable_reason(self) -> str | None:
        """None if undo() would undo a cell now, else a sentence saying why not."""
        with self._lock:
            return self._guest.undo_unavailable_reason()

    def _track_start(self) -> bool:
        """The tracker's start of a cell, the host's edits since the last one kept for
        take_host_changes(); whether anything may have changed meanwhile."""
        changed = self._files.start_cell()
        touched = self._files.host_touched
        if self._host_touched is not None:
            self._host_touched = None if touched is None else self._host_touched | touched
        return changed

    def take_host_changes(self) -> set[str] | None:
        """The paths the host changed between cells since the last call (None: not
        known, the tracker rescanned): the points' files take them in (kernel/rewinds.py)."""
        with self._lock:
            found, self._host_touched = self._host_touched, set()
        return found

    def timeline(self, wait: bool = True) -> list[PointInfo]:
        """The points to go back to, oldest first (runtime/points.py). wait=False: now,
        without waiting for a running cell (the panel asks during one)."""
        if not wait:
            return self._guest.timeline(wait=False)
        with self._lock:
            return self._guest.timeline()

    def rewind(self, seq: int, code: str, count: int | None, reopen: bool = False) -> Rewound:
        """The interpreter back to point `seq`, as it was just after that cell; the
        rewind (the cell `code`, number `count`) is a point of its own; reopen: the
        workspace's files were put back, so the guest's open files are opened again. Raises
        RewindRefused (nothing changed) or UndoFailed (restarted, files kept)."""
        with self._lock:
            done = self._guest.rewind(seq, code, count, reopen)
        self.logger.log_event("sandbox.rewind", to_count=done.target.count, steps=done.steps,
                              session_id=self.session_id)
        return done

    @property
    def history_bytes(self) -> int:
        """What the points keep on disk, counted apart from the workspace's quota."""
        return self._guest.history_bytes

    def restart(self) -> None:
        """A fresh interpreter on the same workspace; files are kept."""
        with self._lock:
            self._guest.restart()

    def set_network(self, policy: Any) -> None:
        """The network door's rules from the next request on (None: no network)."""
        self._guest.set_network(policy)

    @property
    def resumed(self) -> Hibernated | None:
        """The saved state this sandbox woke from, if it did (runtime/hibernation.py)."""
        return self._guest.resumed

    @property
    def resume_notice(self) -> str | None:
        """Why a saved state was found and not woken, if one was."""
        return self._guest.resume_notice

    def hibernate(self, cells: int, *, full: bool = False, host: dict[str, Any] | None = None) -> Hibernated:
        """Save the interpreter (between cells) for the session's next start; `host`
        (JSON) is kept beside it for the caller (the manifest's "host")."""
        with self._lock:
            return self._guest.hibernate(cells, full=full, host=host)

    def discard_state(self) -> bool:
        """Forget the session's saved interpreter; True if there was one."""
        return self._guest.discard_state()

    def close(self) -> None:
        # Stop a running cell first, then wait for its execute() to finish with the
        # tracker before tearing both down.
        self._guest.interrupt()
        with self._lock:
            self._guest.close()
            self._files.close()


def _query_stopped(op: str, trap: str | None, limits: TurnLimits) -> str:
    """One line naming the query and the limit that stopped it."""
    if trap == "out_of_fuel":
        return f"{op} query stopped: it used its whole fuel budget of {limits.fuel:,} instructions"
    if trap == "cpu_time":
        return f"{op} query stopped: it used its whole CPU-time budget of {limits.cpu_seconds:g} s"
    if trap == "deadline":
        return f"{op} query stopped: it ran past its {limits.deadline_seconds:g} s deadline"
    if trap == "memory":
        return f"{op} query stopped: the guest reached its {(limits.memory_bytes or 0) / 2**20:,.0f} MiB memory cap"
    if trap == "interrupted":
        return f"{op} query interrupted"
    if trap == "stack_overflow":
        return f"{op} query stopped: the guest's native stack overflowed"
    return f"{op} query stopped: the guest interpreter crashed"


def create_sandbox(
    runtime: RuntimeType = RuntimeType.PYTHON,
    workspace: Path = DEFAULT_WORKSPACE,
    policy: ExecutionPolicy | None = None,
    logger: SandboxLogger | None = None,
    *,
    session_id: str | None = None,
    progress: Progress | None = None,
    guest_options: GuestOptions | None = None,
) -> BaseSandbox:
    """A ready sandbox for `runtime` whose /app is `workspace` (created if missing).
    guest_options: what the guest's shell knows of its host (history, host magics)
    and a notebook folder to show read-only under /app."""
    if RuntimeType(runtime) is not RuntimeType.PYTHON:
        raise ValueError(f"unsupported runtime {runtime!r}; the only runtime is {RuntimeType.PYTHON.value!r}")
    return PythonSandbox(
        workspace, policy, logger, session_id=session_id, progress=progress, guest_options=guest_options
    )
