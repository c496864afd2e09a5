"""The host door: the one host function the guest calls (host.call), and the answer
to each message it carries (guest_messages.py parses them): the turn's request (the
guest function the host calls, once per turn), the guest's stream ring, a cell's
result, display, error and comm outputs (capped per turn), history reads, input()
and boot-time immortal objects. A guest holds one HostDoor; the running turn's
stops, streams and network door are given to it."""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Mapping
from typing import Any

import wasmtime

from ..host.library_sources import read_source
from ..host.log import get_logger
from .guest_config import GuestOptions
from .guest_instance import GuestInstance
from .guest_streams import GuestStreams
from .guest_messages import (
    MAX_HISTORY_ROWS,
    BadMessage,
    CellResult,
    CommOutput,
    DisplayOutput,
    ErrorOutput,
    HistoryRequest,
    HttpClose,
    HttpOpen,
    HttpRead,
    Immortalize,
    InputRequest,
    Output,
    PythonRun,
    QueryResult,
    SourceRequest,
    RequestAsk,
    WorkDone,
    WorkTake,
    StreamRingAt,
    parse,
)
from .child_python import ChildRunner
from .debug_door import DebugDoor, DebugMessage
from .door_turn import Placed, Turn, what_the_turn_sent
from .nested_work import NestedWork
from .network_door import Gather, Gathered, NetworkDoor
from .stream_ring import StreamRing
from .turn_stops import TurnStops
from .wire import GUEST_FUNCTIONS, MAX_MESSAGE_BYTES, OP_REQUEST

log = get_logger("wasm_kernel.runtime")

HOST_CALL_OK = 0
HOST_CALL_FAULT = -2
ACK = '{"ok": true}'  # the answer to a message that needs none (sent as no bytes at all)
# CPython's initial reference count of an immortal object on a 32-bit build
# (_Py_IMMORTAL_INITIAL_REFCNT): Py_INCREF/Py_DECREF leave such an object alone.
IMMORTAL_REFCOUNT = 3 << 29
NO_REQUEST = json.dumps({"ok": False, "error": "no_request",
                         "message": "this turn has no request, or it was already taken"})
# The bytes the guest's serve() sends to ask for its request, recognised without parsing.
REQUEST_ASK = json.dumps({"op": OP_REQUEST}).encode()


def guest_request(name: str, args: Mapping[str, Any]) -> str:
    """The answer to a turn's request op: the guest function `name` (one of the
    wire's GUEST_FUNCTIONS) with `args` as its keyword arguments, in JSON, so nothing
    in them becomes code. Any other name is refused here, before a turn starts."""
    if name not in GUEST_FUNCTIONS:
        raise ValueError(f"unknown guest function {name!r}; allowed: {', '.join(sorted(GUEST_FUNCTIONS))}")
    return json.dumps({"ok": True, "name": name, "args": dict(args)}, default=str)


class HostDoor:
    """The door's side of a guest. The guest sets these as it starts and runs turns."""

    def __init__(self, instance: GuestInstance, stops: TurnStops, streams: GuestStreams, network: NetworkDoor,
                 children: ChildRunner, debug: DebugDoor, nested: NestedWork, options: GuestOptions) -> None:
        self.instance = instance
        self.debug = debug  # the guest's debugger, stopped or not
        self.nested = nested  # a subshell's work run inside the running cell
        self.stops = stops
        self.streams = streams
        self.network = network
        self.history = options.history  # where the shell's history comes from, if anywhere
        self.children = children  # the `python` programs a cell runs
        self.turn: Turn | None = None  # the running turn (or boot)
        self.booting = False  # a boot (not a start from an image) may make its objects immortal

    def host_call(self, caller: Any, ptr: int, length: int, out_ptr: int, out_len: int) -> int:
        try:
            length &= 0xFFFFFFFF
            if length > MAX_MESSAGE_BYTES:
                return HOST_CALL_FAULT
            # One fetch of the memory's base and size for the whole call (each is two
            # calls into wasmtime): no guest code runs until the answer is allocated.
            window = self.instance.mem.window(caller)
            answer = self._answer(window.read(ptr, length))
            if isinstance(answer, Gather):  # a body written into guest memory as it arrives
                answer = self.network.gather(caller, answer)
                if isinstance(answer, Gathered):  # guest code ran (its allocation): the window is stale
                    self.instance.mem.set_u32(caller, out_ptr, answer.address)
                    self.instance.mem.set_u32(caller, out_len, answer.size)
                    return HOST_CALL_OK
            if answer is ACK:
                # Most messages need no answer: an empty one spares a guest malloc
                # (a call back into wasm) and two writes per door call.
                window.set_u32(out_ptr, 0)
                window.set_u32(out_len, 0)
                return HOST_CALL_OK
            if isinstance(answer, Placed):  # a turn's request, already in guest memory
                window.set_u32(out_ptr, answer.address)
                window.set_u32(out_len, answer.size)
                return HOST_CALL_OK
            raw = answer if isinstance(answer, bytes) else answer.encode()  # bytes: a body's chunk
            if not raw:
                window.set_u32(out_ptr, 0)
                window.set_u32(out_len, 0)
                return HOST_CALL_OK
            p = self.instance.alloc(caller, len(raw))  # guest code: memory may grow, the window is stale
            if not p:
                return HOST_CALL_FAULT
            self.instance.mem.write(caller, p, raw)
            self.instance.mem.set_u32(caller, out_ptr, p)
            self.instance.mem.set_u32(caller, out_len, len(raw))
            return HOST_CALL_OK
        except wasmtime.Trap:
            # Only guest code this call ran (its malloc, for the answer) traps here: a
            # stop landed in it, or the guest's heap is broken. Either way the guest
            # is half-way through its allocator, and must not run on from there (a
            # fault answer did that: input() raised OSError and the cell went on with
            # a heap a later cell crashed on, and every rollback to a checkpoint taken
            # after it crashed again). The trap goes up: the whole turn traps and is
            # rolled back.
            raise
        except wasmtime.WasmtimeError:
            return HOST_CALL_FAULT  # the guest's own bad pointer or length
        except Exception:
            return HOST_CALL_FAULT

    def place_request(self, store: Any, turn: Turn) -> None:
        """Write the turn's request into guest memory before the turn starts: an
        allocation from inside a door call (a call back into wasm from a host
        function) costs about three made between turns. A turn that never asks for
        it (a guest its own cell broke) leaves it allocated: the guest's own loss."""
        if isinstance(turn.request, str):
            raw = turn.request.encode()
            p = self.instance.alloc(store, len(raw)) & 0xFFFFFFFF
            if p:  # else the door allocates it when asked
                self.instance.mem.write(store, p, raw)
                turn.request = Placed(p, len(raw))

    def _answer(self, raw: bytes) -> str | bytes | Placed | Gather:
        turn = self.turn
        if turn is None:
            return '{"ok": false, "error": "no turn"}'
        try:
            message = RequestAsk() if raw == REQUEST_ASK else parse(raw)
        except BadMessage as err:
            return _json_answer(ok=False, error="bad_message", message=str(err))
        if isinstance(message, RequestAsk):
            # Once per turn: a cell that asks again (or a turn that had none) is refused.
            request, turn.request = turn.request, None
            return NO_REQUEST if request is None else request
        self.streams.drain()
        turn.output.flush()  # prints before a display keep their order
        if isinstance(message, StreamRingAt):
            return self._register_ring(message)
        if isinstance(message, CellResult):
            turn.result = message
            return ACK
        if isinstance(message, QueryResult):
            if not turn.query:
                return _json_answer(ok=False, error="bad_message", message="query_result outside a query")
            turn.query_result = message
            return ACK
        if isinstance(message, (DisplayOutput, ErrorOutput, CommOutput)):
            self._display(turn, message, len(raw))
            return ACK
        if isinstance(message, HistoryRequest):
            return self._history(message)
        if isinstance(message, Immortalize):
            return self._immortalize(message)
        if isinstance(message, (HttpOpen, HttpRead, HttpClose)):
            return self.network.http(turn.net, message)
        if isinstance(message, PythonRun):
            return self.children.run(turn, message)
        if isinstance(message, WorkTake):
            return self.nested.take(self)
        if isinstance(message, WorkDone):
            return self.nested.done(self)
        if isinstance(message, DebugMessage):
            return self.debug.serve(message, self.stops)
        if isinstance(message, SourceRequest):
            return read_source(message.path) or b""  # nothing: the frame stays without source
        assert isinstance(message, InputRequest)
        return self._input(turn, message)

    def _register_ring(self, request: StreamRingAt) -> str:
        store = self.instance.require_store()
        if not StreamRing.valid(request.address, request.size, self.instance.memory.data_len(store)):
            return _json_answer(ok=False, error="bad ring")
        ring = StreamRing(request.address, request.size)
        ring.bind(self.instance.mem.window(store))
        self.streams.ring = ring
        words = request.interrupt_words
        if words is not None and words % 4 == 0 and words + 12 <= self.instance.memory.data_len(store):
            self.stops.soft.words_at = words
        return ACK

    def _immortalize(self, request: Immortalize) -> str:
        """Write CPython's immortal reference count into each object header. Only at
        boot (a cell's objects must stay mortal), and only into guest memory: a guest
        that lies about addresses can only damage itself."""
        if not self.booting:
            return _json_answer(ok=False, error="only at boot")
        store = self.instance.require_store()
        raw = self.instance.mem.read(store, request.address, 4 * request.count)
        window = self.instance.mem.window(store)
        for address in struct.unpack(f"<{request.count}I", raw):
            if address % 4 == 0:
                window.set_u32(address, IMMORTAL_REFCOUNT)
        return ACK

    def _history(self, request: HistoryRequest) -> str:
        provider = self.history
        if provider is None:
            return _json_answer(ok=True, history=[])
        try:
            rows = provider(request)[-MAX_HISTORY_ROWS:]
        except Exception as err:  # a broken store must not break the shell
            log.warning("guest.history_failed", error=str(err))
            return _json_answer(ok=False, error="history")
        return _json_answer(ok=True, history=[list(row) for row in rows])

    def _display(self, turn: Turn, output: Output, size: int) -> None:
        if turn.display_left is not None and not (isinstance(output, DisplayOutput) and output.kind == "clear_output"):
            # Past the cap every rich output is dropped, and the cell says so once:
            # a loop of display() calls must not flood the frontend or host memory.
            if turn.display_truncated or size > turn.display_left:
                turn.display_truncated = True
                return
            turn.display_left -= size
        if turn.keep and not isinstance(output, CommOutput):  # a comm message is only ever sent on
            turn.outputs.append(output)
        if turn.on_display is not None:
            try:
                turn.on_display(output)
            except Exception as err:
                log.warning("guest.on_display_failed", error=str(err))

    def _input(self, turn: Turn, request: InputRequest) -> str:
        if turn.on_input is None:
            return _json_answer(
                ok=False,
                error="eof",
                message="input() is not available here: the caller gave no way to answer it "
                "(in Jupyter, run the cell from a frontend that allows stdin)",
            )
        box: dict[str, Any] = {}
        done = threading.Event()

        def ask() -> None:
            try:
                box["value"] = turn.on_input(request.prompt, request.password)  # type: ignore[misc]
            except BaseException as err:
                box["error"] = err
            finally:
                done.set()

        threading.Thread(target=ask, name="wasm-kernel-input", daemon=True).start()
        if not self.stops.wait_for_person(done.wait):
            return _json_answer(ok=False, error="interrupted")
        if "error" in box:
            err = box["error"]
            if isinstance(err, KeyboardInterrupt):
                return _json_answer(ok=False, error="interrupted")
            return _json_answer(ok=False, error="eof", message=f"input() failed: {err}")
        return _json_answer(ok=True, value=str(box.get("value", "")))



def _json_answer(**fields: Any) -> str:
    return json.dumps(fields)


__all__ = ["ACK", "HostDoor", "Placed", "Turn", "guest_request", "what_the_turn_sent"]
