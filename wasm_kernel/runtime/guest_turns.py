"""Running one turn of a guest: its limits armed, the request placed, the guest's turn
export called under the ticker, and the outcome collected (output, costs, the trap and
what recovered from it: a rollback, a restart). The boot's first turn runs here too.
A guest holds one TurnRunner, made of its parts."""

from __future__ import annotations

import time
from collections.abc import Callable

import wasmtime

from ..host.log import get_logger
from .checkpoints import Checkpoints, first_line
from .child_python import ChildTally
from .engine_upgrade import EngineUpgrade
from .guest_config import GuestUnavailable, OnDisplay, OnInput, TurnLimits, TurnOutcome
from .guest_instance import UNLIMITED_FUEL, GuestInstance, fuel_left
from .guest_streams import GuestStreams
from .door_turn import Turn, what_the_turn_sent
from .host_door import HostDoor
from .output import OnOutput, TurnOutput
from .start_files import StartFiles
from .turn_stops import StopNow, TurnStops

log = get_logger("wasm_kernel.runtime")


class TurnRunner:
    """Runs one guest's turns, on the guest's thread."""

    def __init__(self, instance: GuestInstance, stops: TurnStops, door: HostDoor, streams: GuestStreams,
                 files: StartFiles, checkpoints: Checkpoints, upgrade: EngineUpgrade, *,
                 restart: Callable[[], None], one_shot: bool, child_tally: ChildTally | None) -> None:
        """restart: a fresh interpreter (an exit the cell asked for). one_shot: a
        `python` child's guest (one turn, never moved, never checkpointed).
        child_tally: the children of the cell a child's guest belongs to."""
        self._instance = instance
        self._stops = stops
        self._door = door
        self._streams = streams
        self._files = files
        self._checkpoints = checkpoints
        self._upgrade = upgrade
        self._restart = restart
        self._one_shot = one_shot
        self._child_tally = child_tally

    def boot(self, store: wasmtime.Store, code: str, request: str | None, *, booting: bool) -> None:
        output = TurnOutput(None, None, None)
        turn = Turn(output, None, None, None, True, request=request)
        door, streams, instance = self._door, self._streams, self._instance
        door.turn, streams.output = turn, output
        # Booting (not starting from an image) may make its objects immortal.
        door.booting = booting
        try:
            ptr = instance.alloc(store, len(code))
            instance.mem.write(store, ptr, code.encode())
            door.place_request(store, turn)
            status = instance.turn_export(store, ptr, len(code))
        except (wasmtime.Trap, wasmtime.WasmtimeError) as err:
            raise GuestUnavailable(f"the guest interpreter failed to start: {first_line(err)}") from None
        finally:
            door.booting = False
            streams.drain()
            door.turn, streams.output = None, None
            output.finish()
        if status != 0:
            stderr = output.text("stderr")
            log.warning("guest.boot_failed", stderr=stderr[-4000:])
            # The exception's own line (a traceback ends with it) says what went wrong.
            lines = [line.strip() for line in stderr.splitlines() if line.strip()]
            raise GuestUnavailable(f"the guest interpreter failed to start: {lines[-1] if lines else 'no output'}")

    def run(
        self,
        code: str,
        limits: TurnLimits,
        on_output: OnOutput | None,
        on_display: OnDisplay | None,
        on_input: OnInput | None,
        undo_point: bool,
        keep_output: bool = True,
        query: bool = False,
        request: str | None = None,
        output: TurnOutput | None = None,
    ) -> TurnOutcome:
        """undo_point: a cell, the turn undo() undoes; queries are not. query: a
        query turn, whose value comes back in the outcome's query_result. request:
        the guest function the turn's code asks for (guest_request), if any."""
        if not self._one_shot:
            self._upgrade.maybe_upgrade()
        instance, stops, door, streams = self._instance, self._stops, self._door, self._streams
        store = instance.require_store()
        if output is None:
            output = TurnOutput(on_output, limits.stdout_max_bytes, limits.stderr_max_bytes,
                                on_pending=instance.ticker.wake, keep=keep_output)
        turn = Turn(output, on_display, on_input, limits.display_max_bytes, keep_output, query, request, limits,
                    self._child_tally)
        # The checkpoint the last turn owes comes first: its bookkeeping calls run
        # with unlimited fuel, and its time is not this turn's.
        self._checkpoints.settle()
        self._files.listings.clear()
        budget = UNLIMITED_FUEL if limits.fuel is None else max(1, int(limits.fuel))
        instance.refuel(store, budget)
        if limits.memory_bytes != instance.memory_bytes and limits.memory_bytes is not None:
            instance.memory_bytes = limits.memory_bytes
            store.set_limits(memory_size=limits.memory_bytes)
        stops.arm(limits)
        quota = self._files.quota
        quota.set_limits(limits.disk_max_bytes, limits.disk_max_files)
        quota.hit = False
        door.turn, streams.output = turn, output
        data = code.encode()
        memory_at_start = instance.size(store)  # one call: the turn's growth is measured against it
        start = time.perf_counter()
        trapped: BaseException | None = None
        stops.running = True
        ticker = instance.ticker
        ticker.enter(id(self), stops.needs_ticks, None if instance.epochs else stops.tick)
        try:
            if instance.epochs:  # an engine without epochs has no deadline to set
                store.set_epoch_deadline(1)
            ptr = instance.alloc(store, len(data))
            instance.mem.write(store, ptr, data)
            door.place_request(store, turn)
            instance.turn_export(store, ptr, len(data))
        except (wasmtime.Trap, wasmtime.WasmtimeError, StopNow) as err:
            trapped = err
        finally:
            ticker.leave(id(self))
            stops.running = False
            stops.soft.end_turn()
            self._files.settle_quota(store)
            streams.drain()
            turn.net.close_all()  # a transfer never outlives its turn
            door.debug.end_turn()  # nor does a debugger's stop (a trap, a rollback ended it)
            door.nested.end_turn()  # nor a subshell's work waiting for it
            door.turn, streams.output = None, None
            output.finish()
        duration = (time.perf_counter() - start) * 1000
        cpu_ms = (stops.turn_cpu_seconds() + turn.child_cpu_seconds) * 1000
        remaining = fuel_left(store) if instance.counts_fuel else 0  # a store without fuel raises inside
        memory_at_end = instance.size(store)  # before a rollback or restart swaps the memory
        outcome = TurnOutcome(
            status="ok",
            **what_the_turn_sent(turn),
            disk_full=quota.hit,
            interrupt_grace_expired=stops.soft.grace_expired,
            fuel_consumed=0 if not instance.counts_fuel else max(0, budget - remaining) if limits.fuel is not None
            else UNLIMITED_FUEL - remaining,
            cpu_ms=cpu_ms,
            memory_used_bytes=memory_at_end,
            memory_growth_bytes=max(0, memory_at_end - memory_at_start),
            duration_ms=duration,
            query_result=turn.query_result,
        )
        if isinstance(trapped, wasmtime.ExitTrap):
            # os._exit() and friends call proc_exit directly: an exit the cell asked
            # for, not a fault, so the interpreter restarts instead of rolling back.
            outcome.status = "exit"
            outcome.exit_code = trapped.code
            outcome.process_exited = True
            if not self._one_shot:  # a child ends with its one turn
                self._restart()
                outcome.restarted = True
        elif self._one_shot and (trapped is not None or turn.result is None):
            outcome.status, outcome.exit_code = "trap", None
            outcome.trap = stops.classify(trapped)
        elif trapped is not None:
            self._checkpoints.recover(outcome, trapped)
        elif turn.result is None:
            # The guest library was broken by the cell: treat as a crash.
            self._checkpoints.recover(outcome, None)
        elif turn.result.status == "exit":
            outcome.status = "exit"
            outcome.exit_code = turn.result.exit_code
            outcome.payload = turn.result.payload
            self._restart()
            outcome.restarted = True
        else:
            outcome.status = turn.result.status
            outcome.error = turn.result.error
            outcome.payload = turn.result.payload
            outcome.exit_code = turn.result.exit_code
            self._checkpoints.owed = undo_point
        stops.disarm()
        return outcome


__all__ = ["TurnRunner"]
