"""The debugger inside the guest: the Debug Adapter Protocol requests that
ipykernel's debugger (debugpy) answers for JupyterLab, answered here on CPython's
sys.monitoring, with no thread and no socket.

Between cells the host asks one request at a time as a query turn (`debug`). When
the running code reaches a breakpoint, a step's end or an exception the frontend
asked to stop at, the callback here sends the `stopped` event through the door and
asks for the next request: the guest thread waits in that host call (the host feeds
it from the control channel, and its clock stands still meanwhile) and answers each
request from the stopped frames, until one resumes it (continue, next, stepIn,
stepOut, disconnect) or an interrupt ends the wait (KeyboardInterrupt, raised
where the code stopped).

Monitoring costs nothing until a breakpoint or a step exists: PY_START then fires
once per code object and turns itself off for every code object outside the
breakpoints' files; LINE events fire only in those, and while stepping.
"""

import linecache
import sys

from IPython.core.inputtransformer2 import leading_empty_lines

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire
from _wasm_kernel_cell_names import is_cell
from _wasm_kernel_debug_vars import Variables, short_repr, type_name

mon = sys.monitoring
TOOL = mon.DEBUGGER_ID
EV = mon.events
THREAD_ID = 1
LIBRARY = (sys.prefix + "/lib/", _guest.SUPPORT_DIR)
RESUMING = ("continue", "next", "stepIn", "stepOut")
# The requests answered here (each by the method of its name with a leading _).
REQUESTS = frozenset({
    "attach", "setBreakpoints", "setExceptionBreakpoints", "stackTrace", "scopes", "variables", "evaluate",
    "setExpression", "copyToGlobals", "inspectVariables", "richInspectVariables", "source", "modules",
    "threads", "pause", "disconnect", *RESUMING,
})


class Breakpoint:
    __slots__ = ("id", "line", "condition", "hit_condition", "log_message", "hits")

    def __init__(self, number, spec):
        self.id = number
        self.line = spec["line"]
        self.condition = spec.get("condition") or None
        self.hit_condition = spec.get("hitCondition") or None
        self.log_message = spec.get("logMessage") or None
        self.hits = 0


class Refused(Exception):
    """A request this debugger cannot answer: its response says why, in one line."""


def _hit_due(condition, hits):
    text = condition.strip()
    for op, test in (("==", lambda n: hits == n), (">=", lambda n: hits >= n), (">", lambda n: hits > n),
                     ("%", lambda n: n > 0 and hits % n == 0)):
        if text.startswith(op):
            return test(int(text[len(op):]))
    return hits == int(text)


class GuestDebugger:
    def __init__(self, shell):
        self.shell = shell
        self.breakpoints = {}  # source path -> {line: Breakpoint}
        self._next_id = 0
        self.filters = set()  # the exception filters asked for ("raised", "uncaught")
        self.just_my_code = True
        self.step = None  # (kind, depth): stop at the first line at that depth or above
        self.variables = Variables()
        self.frames = {}  # frame id -> frame, while stopped
        self.stopped = False
        self.serving = False  # answering a request: no stop inside one (an evaluate's call)
        self._active = False
        self._events = []  # output events of log points, sent with the next message
        self._removed_transform = None  # where leading_empty_lines was, while attached
        self._stack = []  # the stopped frames' ids, innermost first

    # --- monitoring -------------------------------------------------------------

    def _activate(self):
        if self._active:
            return
        if mon.get_tool(TOOL) is None:
            mon.use_tool_id(TOOL, "wasm-kernel debugger")
        elif mon.get_tool(TOOL) != "wasm-kernel debugger":
            raise Refused("sys.monitoring's debugger slot is taken by the notebook's own code")
        mon.register_callback(TOOL, EV.PY_START, self._on_start)
        mon.register_callback(TOOL, EV.LINE, self._on_line)
        mon.register_callback(TOOL, EV.PY_RETURN, self._on_return)
        mon.register_callback(TOOL, EV.RAISE, self._on_raise)
        mon.register_callback(TOOL, EV.PY_UNWIND, self._on_unwind)
        self._active = True

    def _update_events(self):
        """Turn on the events the breakpoints, filters and step need, and nothing else."""
        wanted = 0
        if self.breakpoints:
            wanted |= EV.PY_START
        if self.step is not None:
            wanted |= EV.LINE | EV.PY_RETURN
        if "raised" in self.filters:
            wanted |= EV.RAISE
        if "uncaught" in self.filters:
            wanted |= EV.PY_UNWIND
        if not wanted and not self._active:
            return
        self._activate()
        mon.set_events(TOOL, wanted)
        # Code already running (the frames on the stack) started before its file had
        # breakpoints: its lines are watched from now on.
        frame = sys._getframe(1)
        while frame is not None:
            self._watch(frame.f_code)
            frame = frame.f_back
        mon.restart_events()

    def _watch(self, code):
        if code.co_filename in self.breakpoints:
            mon.set_local_events(TOOL, code, EV.LINE)
            return True
        return False

    def _on_start(self, code, offset):
        if self._watch(code) or self.step is not None:
            return None
        return mon.DISABLE

    def _is_mine(self, frame):
        """Code the debugger stops in: the cells and the notebook's own files, and
        with justMyCode off the libraries too, never this support code nor the
        frames of the shell below the cell."""
        filename = frame.f_code.co_filename
        if filename.startswith(_guest.SUPPORT_DIR):
            return False
        if self.just_my_code and filename.startswith(LIBRARY):
            return False
        if self.just_my_code or is_cell(filename):
            return True
        return _above_a_cell(frame)  # a library frame counts only above a cell's

    def _on_line(self, code, line):
        if self.serving or self.stopped:
            return None
        frame = sys._getframe(1)
        spot = self.breakpoints.get(code.co_filename)
        bp = spot.get(line) if spot else None
        if bp is not None and self.just_my_code and code.co_filename.startswith(LIBRARY):
            bp = None  # as debugpy: with justMyCode, a library's breakpoints do not stop
        if bp is not None and _reached_from_user_code(frame) and self._breakpoint_stops(bp, frame):
            self._stop(frame, "breakpoint", hit=[bp.id])
            return None
        if self.step is not None:
            kind, depth = self.step
            if self._is_mine(frame) and (kind == "in" or _depth(frame) <= depth) and _reached_from_user_code(frame):
                self._stop(frame, "step" if kind != "pause" else "pause")
            return None
        return None if bp is not None else mon.DISABLE

    def _on_return(self, code, offset, value):
        if self.step is None or self.step[0] in ("in", "pause") or self.serving:
            return
        frame = sys._getframe(1)
        depth = _depth(frame)
        if depth <= self.step[1]:
            # The frame stepped over (or out of) returns: the step ends in its caller,
            # or, if the caller is not the user's code (IPython runs each statement of
            # a cell as code of its own), at the next line of the user's code anywhere.
            caller = frame.f_back
            if caller is not None and self._is_mine(caller):
                self.step = (self.step[0], depth - 1)
            else:
                self.step = ("in", 0)

    def _on_raise(self, code, offset, exc):
        frame = sys._getframe(1)
        if not self.serving and not self.stopped and self._is_mine(frame) and _reached_from_user_code(frame):
            self._stop(frame, "exception", exc=exc)

    def _on_unwind(self, code, offset, exc):
        # An exception leaving a cell's own code: IPython shows it, ipykernel stops.
        if self.serving or self.stopped or not is_cell(code.co_filename) or code.co_name != "<module>":
            return
        if isinstance(exc, KeyboardInterrupt):
            return
        self._stop(sys._getframe(1), "exception", exc=exc)

    def _breakpoint_stops(self, bp, frame):
        if bp.condition:
            try:
                if not eval(bp.condition, frame.f_globals, frame.f_locals):
                    return False
            except BaseException:
                pass  # as debugpy: a condition that fails stops, so the user sees it
        bp.hits += 1
        if bp.hit_condition:
            try:
                if not _hit_due(bp.hit_condition, bp.hits):
                    return False
            except ValueError:
                pass
        if bp.log_message:
            self._events.append(_event("output", {
                "category": "console", "output": _log_line(bp.log_message, frame) + "\n",
                "source": {"path": frame.f_code.co_filename}, "line": frame.f_lineno,
            }))
            _guest.call({"op": wire.OP_DEBUG, "events": self._take_events(), "responses": [], "wait": False})
            return False
        return True

    # --- stopped ------------------------------------------------------------------

    def _stop(self, frame, reason, hit=None, exc=None):
        self.step = None
        self.stopped = True
        self._collect_frames(frame)
        body = {"reason": reason, "threadId": THREAD_ID, "preserveFocusHint": False, "allThreadsStopped": True}
        if hit:
            body["hitBreakpointIds"] = hit
        if exc is not None:
            body["description"] = body["text"] = f"{type(exc).__name__}: {short_repr(exc)[:200]}"
        _guest.flush_streams()
        events, responses = self._take_events() + [_event("stopped", body)], []
        try:
            while True:
                answer = _guest.call({"op": wire.OP_DEBUG, "events": events, "responses": responses, "wait": True})
                if isinstance(answer, dict) and answer.get("detached"):
                    self._detach()  # no frontend's debugger is attached any more: run on
                    break
                request = answer.get("request") if isinstance(answer, dict) else None
                if not isinstance(request, dict):
                    self._resume()
                    raise KeyboardInterrupt  # the wait was interrupted, or the kernel is going
                response = self.answer(request)
                events, responses = self._take_events(), [response]
                if request.get("command") in RESUMING + ("disconnect",) and response.get("success"):
                    continued = _event("continued", {"threadId": THREAD_ID, "allThreadsContinued": True})
                    _guest.call({"op": wire.OP_DEBUG, "events": events + [continued], "responses": responses,
                                 "wait": False})
                    break
        finally:
            self.stopped = False
            self.frames.clear()
            self.variables.clear()
        self._update_events()

    def _detach(self):
        self.breakpoints.clear()
        self.filters = set()
        self.step = None

    def _resume(self):
        self.step = None
        self.stopped = False

    def _collect_frames(self, frame):
        self.frames.clear()
        self.variables.clear()
        self._stack = []
        while frame is not None:
            filename = frame.f_code.co_filename
            if self._is_mine(frame) or (not self.just_my_code and not filename.startswith(_guest.SUPPORT_DIR)
                                        and _above_a_cell(frame)):
                number = self.variables.new_number()
                self.frames[number] = frame
                self._stack.append(number)
            if is_cell(filename) and frame.f_code.co_name == "<module>":
                break  # below it: the shell's own frames
            frame = frame.f_back

    def cell_ended(self):
        """A cell's turn is over: a step does not go on into the next cell."""
        if self.step is not None:
            self.step = None
            self._update_events()

    def _take_events(self):
        events, self._events = self._events, []
        return events

    # --- requests ---------------------------------------------------------------

    def answer(self, request):
        """One request's response, never an exception: a request that fails says so."""
        command = request.get("command")
        arguments = request.get("arguments") or {}
        response = {"type": "response", "request_seq": request.get("seq"), "command": command, "success": True}
        handler = getattr(self, "_" + command) if command in REQUESTS else None
        self.serving = True
        try:
            if handler is None:
                raise Refused(f"the debugger has no request {str(command)[:40]!r}")
            if not isinstance(arguments, dict):
                raise Refused("arguments must be an object")
            body = handler(arguments)
            if body is not None:
                response["body"] = body
        except Refused as err:
            response.update(success=False, message=str(err))
        except BaseException as err:  # user code (a __repr__, an evaluate) may raise anything
            response.update(success=False, message=f"{type(err).__name__}: {short_repr(err)[:300]}")
        finally:
            self.serving = False
        return response

    def _frame(self, arguments, required=True):
        frame = self.frames.get(arguments.get("frameId"))
        if frame is None and required:
            raise Refused("no such frame: the debugger is not stopped there")
        return frame

    def _attach(self, arguments):
        self.just_my_code = arguments.get("justMyCode", True) is not False
        # As ipykernel's Debugger.start: a cell's leading empty lines stay, so its
        # lines are the lines the frontend set breakpoints on.
        transforms = self.shell.input_transformer_manager.cleanup_transforms
        if leading_empty_lines in transforms:
            self._removed_transform = transforms.index(leading_empty_lines)
            transforms.remove(leading_empty_lines)
        return None

    def _setBreakpoints(self, arguments):
        source = arguments.get("source") or {}
        path = source.get("path") if isinstance(source, dict) else None
        specs = arguments.get("breakpoints") or []
        if not isinstance(path, str) or not isinstance(specs, list):
            raise Refused("setBreakpoints needs source.path and a list of breakpoints")
        if path.startswith(_guest.SUPPORT_DIR):
            raise Refused("no breakpoints in the kernel's own code")
        others = sum(len(b) for p, b in self.breakpoints.items() if p != path)
        if others + len(specs) > wire.MAX_BREAKPOINTS:
            raise Refused(f"at most {wire.MAX_BREAKPOINTS} breakpoints")
        placed = {}
        for spec in specs:
            if not isinstance(spec, dict) or not isinstance(spec.get("line"), int):
                raise Refused("each breakpoint needs a line")
            placed[spec["line"]] = Breakpoint(self._next_id, spec)
            self._next_id += 1
        if placed:
            self.breakpoints[path] = placed
        else:
            self.breakpoints.pop(path, None)
        self._update_events()
        return {"breakpoints": [{"verified": True, "id": bp.id, "source": {"path": path}, "line": bp.line}
                                for bp in placed.values()]}

    def _setExceptionBreakpoints(self, arguments):
        filters = arguments.get("filters") or []
        if not isinstance(filters, list):
            raise Refused("filters must be a list")
        self.filters = {f for f in filters if f in ("raised", "uncaught")}
        self._update_events()
        return {"breakpoints": [{"verified": True} for _ in self.filters]}

    def _stackTrace(self, arguments):
        start = max(0, int(arguments.get("startFrame") or 0))
        levels = int(arguments.get("levels") or 0)
        numbers = self._stack[start:start + levels] if levels else self._stack[start:]
        frames = []
        for number in numbers:
            frame = self.frames[number]
            frames.append({"id": number, "name": frame.f_code.co_name, "line": frame.f_lineno, "column": 1,
                           "source": {"path": frame.f_code.co_filename, "sourceReference": 0}})
        return {"stackFrames": frames, "totalFrames": len(self._stack)} if self.stopped else _not_stopped()

    def _scopes(self, arguments):
        frame = self._frame(arguments)
        local = self.variables.ref("scope", frame.f_locals, "")
        globals_ = self.variables.ref("scope", frame.f_globals, "")
        return {"scopes": [
            {"name": "Locals", "variablesReference": local, "expensive": False, "presentationHint": "locals",
             "source": {}},
            {"name": "Globals", "variablesReference": globals_, "expensive": False, "source": {}},
        ]}

    def _variables(self, arguments):
        entries = self.variables.children(arguments.get("variablesReference"), int(arguments.get("start") or 0),
                                          int(arguments.get("count") or 0))
        if entries is None:
            raise Refused("no such variablesReference (the debugger has resumed since)")
        return {"variables": entries}

    def _evaluate(self, arguments):
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            raise Refused("evaluate needs an expression")
        frame = self._frame(arguments, required=False)
        scope_globals = frame.f_globals if frame is not None else self.shell.user_ns
        scope_locals = frame.f_locals if frame is not None else self.shell.user_ns
        try:
            value = eval(compile(expression, "<debugger>", "eval"), scope_globals, scope_locals)
        except SyntaxError:
            if arguments.get("context") != "repl":
                raise
            exec(compile(expression, "<debugger>", "exec"), scope_globals, scope_locals)
            return {"result": "", "variablesReference": 0}
        entry = self.variables.entry(expression, value, expression)
        return {"result": entry["value"], "variablesReference": entry["variablesReference"],
                "type": entry["type"], "presentationHint": {}}

    def _setExpression(self, arguments):
        frame = self._frame(arguments)
        target, value = arguments.get("expression"), arguments.get("value")
        if not isinstance(target, str) or not isinstance(value, str):
            raise Refused("setExpression needs an expression and a value")
        exec(compile(f"{target} = {value}", "<debugger>", "exec"), frame.f_globals, frame.f_locals)
        result = eval(compile(target, "<debugger>", "eval"), frame.f_globals, frame.f_locals)
        return {"value": short_repr(result), "type": type_name(result)}

    def _copyToGlobals(self, arguments):
        source, target = arguments.get("srcVariableName"), arguments.get("dstVariableName")
        if not (isinstance(source, str) and source.isidentifier() and isinstance(target, str)
                and target.isidentifier()):
            raise Refused("dstVariableName and srcVariableName must be valid identifiers")
        frame = self._frame({"frameId": arguments.get("srcFrameId")})
        self.shell.user_ns[target] = eval(source, frame.f_globals, frame.f_locals)
        return None

    def _inspectVariables(self, arguments):
        self.variables.clear()
        number = self.variables.ref("scope", self.shell.user_ns, "")
        return {"variables": self.variables.children(number)}

    def _richInspectVariables(self, arguments):
        name = arguments.get("variableName")
        if not isinstance(name, str) or not name.isidentifier():
            return {"data": {}, "metadata": {}}
        frame = self._frame(arguments, required=False) if self.stopped else None
        space = (frame.f_globals, frame.f_locals) if frame is not None else (self.shell.user_ns, self.shell.user_ns)
        value = eval(name, *space)
        data, metadata = self.shell.display_formatter.format(value)
        return {"data": data, "metadata": {k: v for k, v in metadata.items() if k in data}}

    def _source(self, arguments):
        source = arguments.get("source") or {}
        path = source.get("path") if isinstance(source, dict) else None
        if not isinstance(path, str) or path.startswith(_guest.SUPPORT_DIR):
            raise Refused("source unavailable")
        lines = linecache.getlines(path)
        if not lines:
            raise Refused("source unavailable")
        return {"content": "".join(lines)}

    def _modules(self, arguments):
        found = []
        for number, module in enumerate(list(sys.modules.values())):
            origin = getattr(getattr(module, "__spec__", None), "origin", None)
            if isinstance(origin, str) and origin.endswith(".pyc"):
                origin = origin[:-1]  # the stdlib zip's bytecode: its code names the .py
            if isinstance(origin, str) and origin.endswith(".py") and not origin.startswith(_guest.SUPPORT_DIR):
                found.append({"id": number, "name": module.__name__, "path": origin})
        start = int(arguments.get("startModule") or 0)
        count = int(arguments.get("moduleCount") or 0)
        return {"modules": found[start:start + count] if count else found[start:], "totalModules": len(found)}

    def _threads(self, arguments):
        return {"threads": [{"id": THREAD_ID, "name": "MainThread"}]}

    def _continue(self, arguments):
        self._need_stop()
        return {"allThreadsContinued": True}

    def _next(self, arguments):
        self._step("over")

    def _stepIn(self, arguments):
        self._step("in")

    def _stepOut(self, arguments):
        self._step("out")

    def _pause(self, arguments):
        if not self.stopped:
            self.step = ("pause", 1 << 30)
            self._update_events()

    def _disconnect(self, arguments):
        if self._removed_transform is not None:
            transforms = self.shell.input_transformer_manager.cleanup_transforms
            transforms.insert(min(self._removed_transform, len(transforms)), leading_empty_lines)
            self._removed_transform = None
        self.breakpoints.clear()
        self.filters = set()
        self.step = None
        self._update_events()
        if self._active:
            mon.set_events(TOOL, 0)

    def _need_stop(self):
        if not self.stopped:
            raise Refused("the debugger is not stopped")

    def _step(self, kind):
        self._need_stop()
        top = self.frames[self._stack[0]] if self._stack else None
        depth = _depth(top) if top is not None else 0
        self.step = (kind, depth - 1 if kind == "out" else depth)


def _not_stopped():
    raise Refused("the debugger is not stopped")


def _depth(frame):
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def _reached_from_user_code(frame):
    """Whether this frame runs for a cell: its callers reach a cell's frame before any
    of the kernel's support code. A library the support code calls (json, as the door
    encodes a message) never stops: stopped there, the guest would wait on itself."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_cell(filename):
            return True
        if filename.startswith(_guest.SUPPORT_DIR):
            return False
        frame = frame.f_back
    return False


def _above_a_cell(frame):
    while frame is not None:
        if is_cell(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


def _event(name, body):
    return {"type": "event", "event": name, "body": body}


def _log_line(message, frame):
    """A log point's message, its {expressions} evaluated in the frame."""
    out, rest = [], message
    while "{" in rest and "}" in rest.split("{", 1)[1]:
        before, rest = rest.split("{", 1)
        expression, rest = rest.split("}", 1)
        try:
            value = eval(expression, frame.f_globals, frame.f_locals)
            out.append(before + str(value))
        except BaseException as err:
            out.append(f"{before}<{type(err).__name__}>")
    return "".join(out) + rest


_debugger = None


def debugger(shell):
    global _debugger
    if _debugger is None:
        _debugger = GuestDebugger(shell)
    return _debugger


def request(shell, message):
    """The `debug` query: one request answered between cells."""
    found = debugger(shell)
    response = found.answer(message)
    return {"response": response, "events": found._take_events()}


def answer_taken(shell, requests):
    """Host work at a safe point of a running cell: the requests the host queued (a
    pause, new breakpoints) answered, and any queued meanwhile; the cell runs on."""
    found = debugger(shell)
    while requests:
        responses = [found.answer(r) for r in requests if isinstance(r, dict)]
        answer = _guest.call({"op": wire.OP_DEBUG, "events": found._take_events(), "responses": responses,
                              "take": True})
        requests = answer.get("requests") if isinstance(answer, dict) else None


__all__ = ["GuestDebugger", "answer_taken", "debugger", "request"]
