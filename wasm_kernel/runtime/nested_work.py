"""A kernel subshell's work while the main shell's cell runs: a cell or a comm message
run in the same interpreter at the running cell's next safe point.

The guest has one thread, so a subshell's request cannot run beside the cell. It runs
inside it instead: the host queues the request and asks the guest to take it at its
next safe point (SoftInterrupt.ask_for_work, the signal the debugger's requests use);
the guest's host-work hook takes it (`work_take`), runs the guest function it names as
a turn would (`run`, `comm`) and says when it is done (`work_done`). Between the two
the door's turn and the streams' output are the subshell request's own, so its output
goes to its parent and its result to its reply; when it is done they are the running
cell's again. The time, CPU and fuel the work spent are given back to the running
cell's limits: it is not charged for its subshell's work. While it runs, the work has
its own deadline and CPU budget; one that passes stops the turn, running cell and all
(the guest cannot stop half of a turn), and both are rolled back.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from .door_turn import Turn, what_the_turn_sent
from .guest_config import OnDisplay, TurnLimits, TurnOutcome
from .guest_instance import GuestInstance, fuel_left
from .guest_streams import GuestStreams
from .output import OnOutput, TurnOutput
from .turn_stops import TurnStops


class Door(Protocol):
    """The host door, as the work swaps its current turn."""

    turn: Turn | None

NESTED_FUNCTIONS = frozenset({"run", "comm"})
STOPPED = "stopped with the running cell"


@dataclass
class _Item:
    name: str
    args: dict[str, Any]
    turn: Turn
    output: TurnOutput
    limits: TurnLimits
    done: threading.Event = field(default_factory=threading.Event)
    outcome: TurnOutcome | None = None
    saved: tuple[Any, Any] | None = None  # the running cell's turn and output, while this runs
    started: float = 0.0
    cpu_started: float = 0.0
    fuel_at: int = 0
    main_limits: tuple[float | None, float | None, float | None] = (None, None, None)


class NestedWork:
    """One guest's: the subshell work waiting for a safe point, and the one running."""

    def __init__(self, instance: GuestInstance, stops: TurnStops, streams: GuestStreams) -> None:
        self._instance = instance
        self._stops = stops
        self._streams = streams
        self._lock = threading.Lock()
        self._queue: list[_Item] = []
        self._active: _Item | None = None

    def run(self, name: str, args: dict[str, Any], *, limits: TurnLimits, on_output: OnOutput | None,
            on_display: OnDisplay | None) -> TurnOutcome | None:
        """From any thread but the guest's: run `name` at the running turn's next safe
        point and wait for it. None if no turn runs, or it ended before taking the
        work (the caller then runs it as a turn of its own)."""
        if name not in NESTED_FUNCTIONS:
            raise ValueError(f"not a subshell's work: {name!r}")
        output = TurnOutput(on_output, limits.stdout_max_bytes, limits.stderr_max_bytes,
                            on_pending=self._instance.ticker.wake, keep=False)
        turn = Turn(output, on_display, None, limits.display_max_bytes, False, limits=limits)
        item = _Item(name, dict(args), turn, output, limits)
        with self._lock:
            self._queue.append(item)
        if not self._stops.ask_for_work():
            with self._lock:
                if item in self._queue:
                    self._queue.remove(item)
                    return None
        item.done.wait()
        return item.outcome

    # --- the guest's thread, in door calls ----------------------------------------

    def take(self, door: Door) -> str:
        with self._lock:
            if self._active is not None or not self._queue or door.turn is None:
                return json.dumps({"ok": True})
            item = self._active = self._queue.pop(0)
        item.saved = (door.turn, self._streams.output)
        door.turn, self._streams.output = item.turn, item.output
        item.started = time.monotonic()
        item.cpu_started = self._cpu()
        # Its own limits while it runs; the running cell's come back when it is done.
        stops = self._stops
        item.main_limits = (stops.deadline_at, stops.fuel_deadline_at, stops.cpu_deadline_at)
        limits = item.limits
        stops.deadline_at = None if limits.deadline_seconds is None else item.started + limits.deadline_seconds
        stops.cpu_deadline_at = None if limits.cpu_seconds is None else item.cpu_started + limits.cpu_seconds
        store = self._instance.store
        item.fuel_at = fuel_left(store) if store is not None and self._instance.counts_fuel else 0
        return json.dumps({"ok": True, "name": item.name, "args": item.args})

    def done(self, door: Door) -> str:
        with self._lock:
            item, self._active = self._active, None
        if item is None or item.saved is None:
            return json.dumps({"ok": False, "error": "no subshell work is running"})
        self._streams.drain()
        item.output.finish()
        door.turn, self._streams.output = item.saved
        wall = time.monotonic() - item.started
        cpu = max(0.0, self._cpu() - item.cpu_started)
        stops = self._stops
        # Not the running cell's time: its limits move on by what the work spent.
        deadline, fuel_deadline, cpu_deadline = item.main_limits
        stops.deadline_at = None if deadline is None else deadline + wall
        stops.fuel_deadline_at = None if fuel_deadline is None else fuel_deadline + wall
        stops.cpu_deadline_at = None if cpu_deadline is None else cpu_deadline + cpu
        store = self._instance.store
        spent_fuel = 0
        if store is not None and self._instance.counts_fuel:
            spent_fuel = max(0, item.fuel_at - fuel_left(store))
            self._instance.refuel(store, item.fuel_at)
        item.outcome = _outcome(item, wall, cpu, spent_fuel)
        item.done.set()
        return json.dumps({"ok": True})

    def end_turn(self) -> None:
        """The running turn is over: work it did not take runs as a turn of its own
        (None); work it was running was stopped with it."""
        with self._lock:
            left, self._queue = self._queue, []
            active, self._active = self._active, None
        for item in left:
            item.done.set()
        if active is not None:
            active.outcome = TurnOutcome(status="trap", trap="interrupted", rolled_back=True,
                                         error={"ename": "SubshellStopped", "evalue": STOPPED, "traceback": []})
            active.done.set()

    def _cpu(self) -> float:
        clock = self._stops.cpu_clock
        return time.clock_gettime(clock) if clock is not None else time.monotonic()


def _outcome(item: _Item, wall: float, cpu: float, fuel: int) -> TurnOutcome:
    result = item.turn.result
    outcome = TurnOutcome(status="ok", **what_the_turn_sent(item.turn), fuel_consumed=fuel, cpu_ms=cpu * 1000,
                          duration_ms=wall * 1000)
    if result is None:  # the guest's function never reported: its code broke the library
        outcome.status = "error"
        outcome.error = {"ename": "SubshellError", "evalue": "the subshell's work sent no result", "traceback": []}
    else:
        outcome.status = "ok" if result.status == "exit" else result.status
        outcome.error, outcome.payload, outcome.exit_code = result.error, result.payload, result.exit_code
    return outcome


__all__ = ["NESTED_FUNCTIONS", "NestedWork"]
