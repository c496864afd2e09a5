"""The kernel's debugger: debug_request on the control channel, answered as
ipykernel's Debugger answers JupyterLab, with the guest's own debugger
(runtime/guest_lib/_wasm_kernel_debugger.py) doing the work inside the sandbox.

What needs no interpreter is answered here: initialize (the capabilities),
configurationDone, debugInfo (the breakpoints, the stopped thread, how JupyterLab
names a cell's file), dumpCell (that name; the guest's compiler gives each cell the
same one). The rest goes to the guest, one request at a time and in order: to a
stopped guest through its debug door (runtime/debug_door.py), which answers from
the stopped frames; between cells as a `debug` query turn. A request that arrives
while a cell runs and is not stopped waits for the cell to stop or end.

Events (stopped, continued, a log point's output) go out as debug_event on iopub.
Guests never see host paths, so neither do the frames, sources and modules here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import threading
from typing import TYPE_CHECKING, Any

from ipykernel.compiler import murmur2_x86

from ..runtime.wire import CELL_FILE_PREFIX, CELL_HASH_SEED, MAX_BREAKPOINTS

if TYPE_CHECKING:
    from .sandbox_kernel import WasmKernel

MAX_COMMAND_CHARS = 64
MAX_REQUEST_BYTES = 16 << 20  # as a comm message: a dumpCell carries a whole cell
MAX_PENDING = 256  # requests waiting for their turn; past it a request fails at once
_RETRY = "__wasm_kernel_retry__"  # marks a request the guest's turn ended without taking
THREAD_ID = 1  # the guest's one thread, as debugpy numbers the main thread
# As debugpy's capabilities for the requests the guest's debugger answers.
CAPABILITIES: dict[str, Any] = {
    "supportsConditionalBreakpoints": True,
    "supportsConfigurationDoneRequest": True,
    "supportsDelayedStackTraceLoading": True,
    "supportsEvaluateForHovers": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsModulesRequest": True,
    "supportsSetExpression": True,
    "supportsTerminateDebuggee": True,
    "supportsClipboardContext": True,
    "exceptionBreakpointFilters": [
        {"filter": "raised", "label": "Raised Exceptions", "default": False,
         "description": "Break whenever any exception is raised."},
        {"filter": "uncaught", "label": "Uncaught Exceptions", "default": True,
         "description": "Break when the process is exiting due to unhandled exception."},
    ],
}
# Answered even before initialize, as ipykernel's static_debug_msg_types.
STATIC = frozenset({"debugInfo", "inspectVariables", "richInspectVariables", "modules", "copyToGlobals"})


def cell_file(code: str) -> str:
    """The guest's file name for a cell of this code (its CellCompiler's)."""
    return f"{CELL_FILE_PREFIX}{murmur2_x86(code, CELL_HASH_SEED)}.py"


class DebugService:
    """One kernel's debugger state: started or not, the breakpoints set, and the
    requests waiting for a stopped guest's responses."""

    def __init__(self, kernel: WasmKernel) -> None:
        self.kernel = kernel
        self.started = False
        self.breakpoints: dict[str, list[dict[str, int]]] = {}
        self._seq = itertools.count(1)
        self._waiting: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._order: asyncio.Lock | None = None  # made on the control thread's loop
        self._parent: dict[str, Any] | None = None  # the latest debug_request: events' parent
        self._pending = 0  # requests being answered or waiting for their turn

    # --- the control channel's side ----------------------------------------------

    async def handle(self, request: Any, parent: dict[str, Any] | None = None) -> dict[str, Any]:
        """One debug_request's content; its debug_reply's content."""
        problem = _malformed(request)
        if problem is not None:
            seq = request.get("seq") if isinstance(request, dict) else None
            command = request.get("command") if isinstance(request, dict) else None
            return _response(seq if isinstance(seq, int) else 0, str(command)[:MAX_COMMAND_CHARS], False,
                             message=f"bad debug_request: {problem}")
        self._parent = parent
        if self._order is None:
            self._order = asyncio.Lock()
        if self._pending >= MAX_PENDING:
            return self._numbered(_response(request["seq"], request["command"], False,
                                            message=f"{MAX_PENDING} debug requests are already waiting; "
                                            "wait for their replies"))
        self._pending += 1
        try:
            async with self._order:  # in order, as one debugpy connection answers them
                return self._numbered(await self._answer(request))
        finally:
            self._pending -= 1

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        command, seq = request["command"], request["seq"]
        arguments = request.get("arguments") or {}
        if command == "initialize":
            self.started = True
            self.debug_event({"type": "event", "event": "initialized"})
            return _response(seq, command, True, body=dict(CAPABILITIES))
        if command == "configurationDone":
            return _response(seq, command, True)
        if command == "debugInfo":
            return _response(seq, command, True, body=self._debug_info())
        if command == "dumpCell":
            code = arguments.get("code")
            if not isinstance(code, str):
                return _response(seq, command, False, message="dumpCell needs the cell's code")
            return _response(seq, command, True, body={"sourcePath": cell_file(code)})
        if not self.started and command not in STATIC:
            return _response(seq, command, False, message="the debugger is not started: send initialize first")
        if command == "setBreakpoints" and len(arguments.get("breakpoints") or []) > MAX_BREAKPOINTS:
            return _response(seq, command, False, message=f"at most {MAX_BREAKPOINTS} breakpoints")
        if command == "attach":  # the kernel's own setting, as ipykernel's debug_just_my_code
            request = {**request, "arguments": {**arguments, "justMyCode": bool(self.kernel.debug_just_my_code)}}
        response = await self._in_guest(request)
        self._after(request, response)
        return response

    def _after(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        command = request["command"]
        if command == "setBreakpoints" and response.get("success"):
            path = ((request.get("arguments") or {}).get("source") or {}).get("path")
            placed = [{"line": bp["line"]} for bp in (response.get("body") or {}).get("breakpoints", [])
                      if isinstance(bp, dict) and isinstance(bp.get("line"), int)]
            if isinstance(path, str):
                if placed:
                    self.breakpoints[path] = placed
                else:
                    self.breakpoints.pop(path, None)
        if command == "disconnect":
            self.started = False
            self.breakpoints = {}
            sandbox = self.kernel.notebook_session.sandbox
            if sandbox is not None:
                sandbox.debug_door.attached = False

    def _debug_info(self) -> dict[str, Any]:
        sandbox = self.kernel.notebook_session.sandbox
        stopped = sandbox is not None and sandbox.debug_door.stopped
        return {
            "isStarted": self.started,
            "hashMethod": "Murmur2",
            "hashSeed": CELL_HASH_SEED,
            "tmpFilePrefix": CELL_FILE_PREFIX,
            "tmpFileSuffix": ".py",
            "breakpoints": [{"source": path, "breakpoints": list(lines)} for path, lines in self.breakpoints.items()],
            "stoppedThreads": [THREAD_ID] if stopped else [],
            "richRendering": True,
            "exceptionPaths": ["Python Exceptions"],
            "copyToGlobals": True,
        }

    async def _in_guest(self, request: dict[str, Any]) -> dict[str, Any]:
        notebook = self.kernel.notebook_session
        sandbox = await notebook.wait_until_open(None)
        door = sandbox.debug_door
        door.listener = self
        door.attached = self.started
        seq = request["seq"]
        while True:
            future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            with self._lock:
                self._waiting[seq] = future
            try:
                given = door.give(request)
            except OverflowError as err:
                given = False
                future.set_result(_response(seq, request["command"], False, message=str(err)))
            if given or future.done():
                try:
                    response = await asyncio.wrap_future(future)
                finally:
                    with self._lock:
                        self._waiting.pop(seq, None)
                if not response.pop(_RETRY, False):
                    return response
                continue
            with self._lock:
                self._waiting.pop(seq, None)
            if not sandbox.busy:
                try:
                    return await self._between_cells(request)
                except _Busy:
                    pass  # a cell started meanwhile: ask again
            await asyncio.sleep(0.02)  # a turn starts or ends: ask again

    async def _between_cells(self, request: dict[str, Any]) -> dict[str, Any]:
        sandbox = self.kernel.notebook_session.sandbox
        assert sandbox is not None
        loop = asyncio.get_running_loop()

        def ask() -> dict[str, Any]:
            if sandbox.busy:
                raise _Busy
            return sandbox.query("debug", request=request)

        try:
            answer = await loop.run_in_executor(self.kernel.host_threads, ask)
        except _Busy:
            raise
        except Exception as err:
            return _response(request["seq"], request["command"], False, message=str(err).splitlines()[0][:300])
        for event in answer.get("events", []):
            self.debug_event(event)
        return answer["response"]

    # --- the guest's side (DebugListener), on the guest's thread --------------------

    def debug_event(self, event: dict[str, Any]) -> None:
        event = {**event, "seq": next(self._seq)}
        self.kernel.publish_debug_event(event, self._parent)

    def debug_response(self, response: dict[str, Any]) -> None:
        with self._lock:
            future = self._waiting.get(response.get("request_seq"))  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(response)

    def debug_dropped(self, request: dict[str, Any], why: str, retry: bool) -> None:
        response = _response(request["seq"], request["command"], False, message=why)
        if retry:  # the cell ended before it took the request: asked again between cells
            response[_RETRY] = True
        self.debug_response(response)

    def _numbered(self, response: dict[str, Any]) -> dict[str, Any]:
        return {"seq": next(self._seq), **response}


class _Busy(Exception):
    """A cell took the guest between the check and the query."""


def _response(seq: int, command: str, success: bool, *, body: dict[str, Any] | None = None,
              message: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"type": "response", "request_seq": seq, "success": success, "command": command}
    if body is not None:
        response["body"] = body
    if message is not None:
        response["message"] = message
    return response


def _malformed(request: Any) -> str | None:
    if not isinstance(request, dict):
        return "the content must be a DAP request object"
    if request.get("type") != "request":
        return "type must be \"request\""
    seq, command = request.get("seq"), request.get("command")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return "seq must be a non-negative integer"
    if not isinstance(command, str) or not command or len(command) > MAX_COMMAND_CHARS:
        return f"command must be a name of at most {MAX_COMMAND_CHARS} characters"
    if not isinstance(request.get("arguments", {}), dict):
        return "arguments must be an object"
    try:
        size = len(json.dumps(request))
    except (TypeError, ValueError):
        return "the request must be JSON"
    if size > MAX_REQUEST_BYTES:
        return f"it is {size} bytes, more than {MAX_REQUEST_BYTES}"
    return None


__all__ = ["CAPABILITIES", "DebugService", "cell_file"]
