"""`python` as a command: a child interpreter of the same sandbox, run to its end
while its parent's turn waits in the door (wire.OP_PYTHON).

A notebook runs `!python script.py`, `subprocess.run([sys.executable, ...])` or
`os.system("python ...")`; the guest's process layer (guest_lib/_wasm_kernel_processes)
sends the program's arguments here instead of failing. The child is a bare
interpreter (no IPython shell, as `python` is) on the parent's mounts: the same
workspace at /app, the notebook's folder read-only, the same /tmp (otter writes its
results there for the parent to read), the site, the course's environment and the
%pip packages, and the session's disk ledger, so every byte it writes is counted
before it is written as the parent's are.

It runs under what is left of the parent's cell: the deadline, CPU time and fuel
(spent from the parent's budget), the same memory ceiling, the cell's output caps for
what it writes to the cell, the disk quota. A limit the child reaches is the cell's,
and stops the cell as it would have stopped the parent; a timeout the program gave
(subprocess's timeout=) ends only the child. An interrupt of the parent reaches the
child first, as SIGINT reaches a terminal's foreground process group: it raises
KeyboardInterrupt there, and then in the parent. Children may run children, at most
MAX_CHILD_DEPTH deep, and a cell starts at most MAX_CHILDREN_PER_CELL in all: the
children alive at once are one per level, so host memory is bounded by the depth.

Nothing runs on the host but the child's wasm, on a guest thread of its own.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from ..host.log import get_logger
from .guest_config import TrapReason, TurnLimits, TurnOutcome
from .guest_instance import GuestInstance, fuel_left
from .guest_messages import PythonRun
from .output import TurnOutput
from .start_files import StartFiles
from .turn_stops import BASELINE_FUEL_PER_SECOND, TurnStops
from .wire import CHILD_FUNCTION, MAX_CHILD_DEPTH

log = get_logger("wasm_kernel.runtime")

MAX_CHILDREN_PER_CELL = 256
# What one stream a program's caller captures may hold (it comes back in the parent's
# memory, base64 in a JSON answer): past it the rest is dropped, and the caller told.
CAPTURE_MAX_BYTES = 32 << 20
WAIT_SLICE_SECONDS = 0.02
# The exit status a caller sees for a child the sandbox ended, as a process killed by a
# signal reads in Python (a negative returncode): memory or a hard stop as SIGKILL
# (the kernel's OOM killer), a crash as SIGSEGV.
_KILLED = -9
_CRASHED = -11
_INTERRUPTED = -2
# The stops that are the cell's own limits: the parent has reached them too.
_CELL_LIMITS: frozenset[TrapReason] = frozenset({"deadline", "cpu_time", "out_of_fuel"})


class ChildTally:
    """How many children one cell has started, its whole tree counted (shared by the
    cell's guest and every child below it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = 0

    def take(self) -> bool:
        with self._lock:
            if self.started >= MAX_CHILDREN_PER_CELL:
                return False
            self.started += 1
            return True


class ChildGuest(Protocol):
    executor: Any

    def run_child(self, args: dict[str, Any], *, limits: TurnLimits, output: TurnOutput) -> TurnOutcome: ...
    def interrupt(self) -> bool: ...
    def close(self) -> None: ...


class ChildOutput(TurnOutput):
    """A child's streams, each where its caller sent it: into the parent's turn (the
    cell's streams, under the cell's caps), captured as bytes, or nowhere."""

    def __init__(self, parent: TurnOutput, request: PythonRun) -> None:
        super().__init__(None, None, None, keep=False)
        self._parent = parent
        self._modes = {1: request.stdout, 2: request.stderr}
        self._crlf = request.crlf
        self.captured = {1: bytearray(), 2: bytearray()}
        self.dropped = False

    def _write(self, fd: int, data: bytes) -> None:
        mode = self._modes[fd]
        if mode == "stdout":
            fd, mode = 1, self._modes[1]
        if mode == "null" or not data:
            return
        if mode == "capture":
            kept = self.captured[fd]
            room = CAPTURE_MAX_BYTES - len(kept)
            kept += data[:room]
            self.dropped = self.dropped or len(data) > room
            return
        self._parent.write(fd, data.replace(b"\n", b"\r\n") if self._crlf else data)


class ChildRunner:
    """The parent's side of its children: one at a time, on the parent's thread."""

    def __init__(self, instance: GuestInstance, stops: TurnStops, files: StartFiles, *, shell_commands: bool,
                 depth: int, new_child: Callable[[ChildTally], ChildGuest]) -> None:
        """The parent's parts: its instance (fuel, memory), stops (the cell's deadline,
        budgets and interrupts) and files (the quota the child writes against).
        depth: the parent's own, 0 for a cell's guest."""
        self._instance = instance
        self._stops = stops
        self._files = files
        self._shell_commands = shell_commands
        self._depth = depth
        self._new_child = new_child

    def run(self, turn: Any, request: PythonRun) -> str:
        """Run the child to its end and answer the door (JSON)."""
        if self._depth >= MAX_CHILD_DEPTH:
            return _refusal("depth", f"python: children of this sandbox nest at most {MAX_CHILD_DEPTH} deep; "
                                     "run the work in this interpreter instead")
        tally: ChildTally = turn.children
        if not tally.take():
            return _refusal("count", f"python: a cell starts at most {MAX_CHILDREN_PER_CELL} child interpreters; "
                                     "run the work in this interpreter, or in more cells")
        stops = self._stops
        limits, by_timeout = self._child_limits(turn.limits, request)
        # The parent's lazily counted writes are counted now, and its reservation given
        # back: the child is another writer of the same ledger.
        self._files.settle_quota(self._instance.require_store())
        try:
            child = self._new_child(tally)
        except Exception as err:  # the sandbox could not make one: the program cannot run
            log.warning("guest.child_start_failed", error=str(err)[:2000])
            return _refusal("start", "python: the child interpreter could not start (the kernel's log says why)")
        output = ChildOutput(turn.output, request)
        try:
            outcome = self._wait(child, request, limits, output)
        finally:
            child.close()
            self._files.quota.measure()  # the child's writes, as the ledger (or a walk) has them now
            self._files.listings.clear()
        if outcome is None:  # the parent itself is being stopped
            stops.stop_soon()
            return _refusal("interrupted", "python: the cell was stopped")
        self._spend(turn, outcome)
        status, timed_out = self._status(outcome, by_timeout)
        log.info("guest.child", depth=self._depth + 1, status=status, cpu_ms=round(outcome.cpu_ms, 1),
                 ms=round(outcome.duration_ms, 1), trap=outcome.trap)
        answer = {
            "ok": True, "status": status, "timed_out": timed_out, "dropped": output.dropped,
            "stdout": base64.b64encode(bytes(output.captured[1])).decode(),
            "stderr": base64.b64encode(bytes(output.captured[2])).decode(),
        }
        if outcome.trap in _CELL_LIMITS and not timed_out:
            # The cell's limit, reached by its child: the parent stops for it as the
            # door returns (the guest never runs on past a limit).
            stops.reason = outcome.trap
            stops.stop_soon()
        return json.dumps(answer)

    def _child_limits(self, limits: TurnLimits, request: PythonRun) -> tuple[TurnLimits, bool]:
        """What is left of the parent's cell, and whether the program's own timeout
        is the tighter deadline."""
        stops, instance = self._stops, self._instance
        now = time.monotonic()
        deadline = None if stops.deadline_at is None else max(0.001, stops.deadline_at - now)
        by_timeout = request.timeout is not None and (deadline is None or request.timeout < deadline)
        if by_timeout:
            deadline = request.timeout
        cpu = None
        if stops.cpu_deadline_at is not None and limits.cpu_seconds is not None:
            cpu = max(0.001, limits.cpu_seconds - stops.turn_cpu_seconds())
        fuel = None
        if limits.fuel is not None:
            if instance.counts_fuel and instance.store is not None:
                fuel = max(1, fuel_left(instance.store))
            elif stops.fuel_deadline_at is not None:
                fuel = max(1, int((stops.fuel_deadline_at - now) * BASELINE_FUEL_PER_SECOND))
        return TurnLimits(
            fuel=fuel, cpu_seconds=cpu, deadline_seconds=deadline, memory_bytes=instance.memory_bytes,
            stdout_max_bytes=None, stderr_max_bytes=None, display_max_bytes=0,
            disk_max_bytes=limits.disk_max_bytes, disk_max_files=limits.disk_max_files,
            interrupt_grace_seconds=limits.interrupt_grace_seconds,
        ), by_timeout

    def _wait(self, child: ChildGuest, request: PythonRun, limits: TurnLimits,
              output: ChildOutput) -> TurnOutcome | None:
        """Run the child on its thread while this (the parent's) thread watches for an
        interrupt to pass on, or a stop of the parent. None: the parent is stopping."""
        args = {"args": list(request.args), "cwd": request.cwd, "env": dict(request.env),
                "stdin": base64.b64encode(request.stdin).decode(),
                "shell": self._shell_commands}
        future: Future[TurnOutcome] = child.executor.submit(
            lambda: child.run_child(args, limits=limits, output=output))
        stops = self._stops
        passed_on = False
        while True:
            try:
                return future.result(timeout=WAIT_SLICE_SECONDS)
            except FutureTimeout:
                pass
            if stops.soft.pending and not passed_on:
                passed_on = child.interrupt()  # the parent's own stays asked: it raises there next
            if stops.reason is not None or stops.interrupt_overdue():
                child.close()  # its turn stops at its next tick; close waits for that
                return None

    def _spend(self, turn: Any, outcome: TurnOutcome) -> None:
        """The child's CPU time and fuel are the cell's: spent from the parent's budget."""
        stops, instance = self._stops, self._instance
        cpu = outcome.cpu_ms / 1000
        turn.child_cpu_seconds += cpu
        if stops.cpu_deadline_at is not None:
            stops.cpu_deadline_at -= cpu
        store = instance.store
        if instance.counts_fuel and store is not None and turn.limits.fuel is not None:
            instance.refuel(store, max(0, fuel_left(store) - outcome.fuel_consumed))

    @staticmethod
    def _status(outcome: TurnOutcome, by_timeout: bool) -> tuple[int, bool]:
        """The exit status the program's caller sees, and whether its timeout ended it."""
        if outcome.status in ("ok", "exit"):
            return int(outcome.exit_code or 0), False
        if outcome.status == "error":
            return 1, False
        trap = outcome.trap
        if trap == "deadline" and by_timeout:
            return _KILLED, True
        if trap == "interrupted":
            return _INTERRUPTED if not outcome.interrupt_grace_expired else _KILLED, False
        if trap in ("crash", "stack_overflow"):
            return _CRASHED, False
        return _KILLED, False


def child_request(args: dict[str, Any]) -> str:
    """The one request a child's turn serves (CHILD_TURN asks for it as every turn does)."""
    return json.dumps({"ok": True, "name": CHILD_FUNCTION, "args": args})


def _refusal(error: str, message: str) -> str:
    return json.dumps({"ok": False, "error": error, "message": message})


__all__ = ["CAPTURE_MAX_BYTES", "ChildRunner", "ChildTally", "MAX_CHILDREN_PER_CELL", "child_request"]
