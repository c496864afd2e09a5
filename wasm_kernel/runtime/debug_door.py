"""The debugger's door: how the guest's debugger (guest_lib/_wasm_kernel_debugger.py)
and the kernel's control channel meet while a cell runs.

The guest sends its Debug Adapter Protocol events and responses in one `debug`
message; a message that says `wait` is sent by a stopped guest, whose thread then
waits in the host call for its next request. The kernel hands requests over from its
control thread (give); the wait's clock stands still, as input()'s does, and an
interrupt or a stop ends it. A request for a guest that runs and is not stopped is
queued, and the guest is asked to take it at its next safe point (`wake`: the
interrupt's signal, marked as host work, soft_interrupt.ask_for_work); it takes the
queue with a message that says `take`, answers, and runs on. Every field comes from guest code and is checked here
before anything reaches the kernel: only DAP events and responses, of bounded count
and size, in JSON.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..host.log import get_logger
from .wire import MAX_DEBUG_QUEUE

if TYPE_CHECKING:
    from .turn_stops import TurnStops

log = get_logger("wasm_kernel.runtime")

MAX_ITEMS = 64  # events or responses in one message
# The events a guest may send on: what the debugger emits (debugpy's names).
EVENTS = frozenset({"stopped", "continued", "output", "breakpoint", "module", "thread", "exited", "terminated"})


class DebugListener(Protocol):
    """The kernel's side: where events and responses go (from the guest's thread)."""

    def debug_event(self, event: dict[str, Any]) -> None: ...

    def debug_response(self, response: dict[str, Any]) -> None: ...

    def debug_dropped(self, request: dict[str, Any], why: str, retry: bool) -> None: ...


@dataclass(frozen=True)
class DebugMessage:
    events: tuple[dict[str, Any], ...]
    responses: tuple[dict[str, Any], ...]
    wait: bool  # the guest is stopped and asks for its next request
    take: bool = False  # the guest, at a safe point, takes the requests queued for it


class BadDebugMessage(ValueError):
    pass


def parse_debug(message: dict[str, Any]) -> DebugMessage:
    events, responses = message.get("events", []), message.get("responses", [])
    if not isinstance(events, list) or not isinstance(responses, list):
        raise BadDebugMessage("events and responses must be lists")
    if len(events) > MAX_ITEMS or len(responses) > MAX_ITEMS:
        raise BadDebugMessage(f"at most {MAX_ITEMS} events and {MAX_ITEMS} responses in one message")
    for event in events:
        if not isinstance(event, dict) or event.get("type") != "event" or event.get("event") not in EVENTS:
            raise BadDebugMessage("an event must be a DAP event the debugger sends")
        if not isinstance(event.get("body", {}), dict):
            raise BadDebugMessage("an event's body must be an object")
    for response in responses:
        if not isinstance(response, dict) or response.get("type") != "response":
            raise BadDebugMessage("a response must be a DAP response")
        if not isinstance(response.get("request_seq"), int) or not isinstance(response.get("success"), bool):
            raise BadDebugMessage("a response needs its request_seq and success")
    wait, take = message.get("wait", False), message.get("take", False)
    if not isinstance(wait, bool) or not isinstance(take, bool):
        raise BadDebugMessage("wait and take must be true or false")
    return DebugMessage(tuple(events), tuple(responses), wait, take)


class DebugDoor:
    """One guest's: the requests for a stopped debugger, and the listener."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[dict[str, Any]] = deque()
        # Requests the guest took and has not answered, by seq: if its turn ends first
        # (a limit stopped an evaluate), each still gets its failed response.
        self._taken: dict[Any, dict[str, Any]] = {}
        self.stopped = False  # the guest waits for a request
        self.listener: DebugListener | None = None
        # Asks the running guest to take its queue at its next safe point; False if
        # no turn runs (set by the guest that owns this door).
        self.wake: Callable[[], bool] | None = None
        # A frontend's debugger is attached (initialize until disconnect): only then
        # may the guest stop and wait, with its clock standing still. A guest that
        # asks otherwise is told to run on, so no cell stops its own deadline.
        self.attached = False

    def give(self, request: dict[str, Any]) -> bool:
        """From the control thread: hand a request to the guest while a turn runs,
        stopped or not. False if no turn runs (the caller asks between cells)."""
        with self._cond:
            if not self.stopped and self.wake is None:
                return False
            if len(self._queue) >= MAX_DEBUG_QUEUE:
                raise OverflowError(f"the stopped debugger already has {MAX_DEBUG_QUEUE} requests waiting")
            self._queue.append(request)
            self._cond.notify_all()
            if self.stopped:
                return True
        if self.wake is not None and self.wake():
            return True
        with self._cond:  # no turn to wake: unless the guest took it meanwhile, it is not given
            if request in self._queue:
                self._queue.remove(request)
                return False
            return True

    def serve(self, message: DebugMessage, stops: TurnStops) -> str:
        """On the guest's thread, in the host call: pass the message on; if the guest
        is stopped, wait for its next request."""
        listener = self.listener
        # Decided once: a stop waits only with a frontend's debugger attached (a
        # disconnect on another thread meanwhile must not leave it marked stopped).
        waits = message.wait and self.attached and listener is not None
        if waits:
            with self._cond:  # before its stopped event goes out: a debugInfo then says so
                self.stopped = True
        for event in message.events:
            self._tell(lambda: listener and listener.debug_event(event))
        for response in message.responses:
            with self._cond:
                self._taken.pop(response["request_seq"], None)
            self._tell(lambda: listener and listener.debug_response(response))
        if message.take:
            with self._cond:
                taken, self._queue = list(self._queue), deque()
                self._taken.update((request.get("seq"), request) for request in taken)
            return json.dumps({"ok": True, "requests": taken})
        if not message.wait:
            with self._cond:
                self.stopped = False
            return json.dumps({"ok": True})
        if not waits:
            return json.dumps({"ok": False, "detached": True})
        taken: list[dict[str, Any]] = []

        def next_request(timeout: float) -> bool:
            with self._cond:
                if not self._queue:
                    self._cond.wait(timeout)
                if self._queue:
                    request = self._queue.popleft()
                    self._taken[request.get("seq")] = request
                    taken.append(request)
                    return True
                return False

        if stops.wait_for_person(next_request):
            return json.dumps({"ok": True, "request": taken[0]})
        self._drop("the cell was interrupted while the debugger was stopped", retry=False)
        return json.dumps({"ok": False, "interrupted": True})

    def end_turn(self) -> None:
        """The turn is over: requests it did not take are asked again between cells;
        those it took and did not answer (a limit stopped it meanwhile) fail."""
        self._drop("the cell ended first", retry=True)

    def _drop(self, why: str, retry: bool) -> None:
        with self._cond:
            self.stopped = False
            left, self._queue = list(self._queue), deque()
            unanswered, self._taken = list(self._taken.values()), {}
        listener = self.listener
        for request in left:
            self._tell(lambda: listener and listener.debug_dropped(request, why, retry))
        for request in unanswered:
            self._tell(lambda: listener and listener.debug_dropped(
                request, "the cell was stopped before the debugger answered", False))

    @staticmethod
    def _tell(call: Any) -> None:
        try:
            call()
        except Exception as err:  # the kernel's trouble must not break the guest's turn
            log.warning("debug.listener_failed", error=str(err))


__all__ = ["BadDebugMessage", "DebugDoor", "DebugListener", "DebugMessage", "parse_debug"]
