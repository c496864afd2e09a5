"""The messages the guest library sends through the `host.call` door, validated.

Guest code can forge any message, so every field is checked for type and size
before it reaches a caller; a malformed message is refused, never half-applied.
Every string is cleaned of lone surrogates here (wire_text), the one door where
guest data enters the host, so nothing downstream fails to send it on.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from . import wire
from .debug_door import BadDebugMessage, DebugMessage, parse_debug
from .wire import COMM_MSG_TYPES
from .wire_text import MAX_DEPTH, TooDeep, clean

MAX_ID_CHARS = 256

OutputKind = Literal["display_data", "update_display_data", "execute_result", "clear_output"]


class BadMessage(ValueError):
    pass


@dataclass(frozen=True)
class DisplayOutput:
    """One rich output, shaped like a Jupyter output: a MIME bundle and its metadata."""

    kind: OutputKind
    data: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    display_id: str | None = None
    wait: bool = False  # for clear_output

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"output_type": self.kind}
        if self.kind == "clear_output":
            out["wait"] = self.wait
            return out
        out["data"] = self.data
        out["metadata"] = self.metadata
        if self.display_id is not None:
            out["transient"] = {"display_id": self.display_id}
        return out


@dataclass(frozen=True)
class ErrorOutput:
    """A traceback as the shell showed it, when it showed it (an `error` output)."""

    ename: str
    evalue: str
    traceback: list[str]
    kind: Literal["error"] = "error"

    def to_dict(self) -> dict[str, Any]:
        return {"output_type": "error", "ename": self.ename, "evalue": self.evalue, "traceback": self.traceback}


@dataclass(frozen=True)
class CommOutput:
    """A comm message from guest code (comm_open, comm_msg, comm_close): published as
    it is, with the request being served as its parent; never kept in a result."""

    msg_type: Literal["comm_open", "comm_msg", "comm_close"]
    content: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    buffers: tuple[bytes, ...] = ()
    kind: Literal["comm"] = "comm"


Output = DisplayOutput | ErrorOutput | CommOutput


@dataclass(frozen=True)
class InputRequest:
    prompt: str
    password: bool


@dataclass(frozen=True)
class HistoryRequest:
    """The guest's shell reading its own session's history from the host's store."""

    kind: Literal["tail", "range", "search"]
    raw: bool = True
    output: bool = False
    n: int | None = None
    pattern: str = "*"
    unique: bool = False
    session: int = 0
    start: int = 1
    stop: int | None = None


@dataclass(frozen=True)
class CellResult:
    status: Literal["ok", "error", "exit"]
    exit_code: int = 0
    error: dict[str, Any] | None = None
    payload: list[dict[str, Any]] = field(default_factory=list)  # page, set_next_input...


@dataclass(frozen=True)
class QueryResult:
    """A query's value (JSON), checked by query_value() for the shape its op promises."""

    value: Any


@dataclass(frozen=True)
class WorkTake:
    """The guest, at a safe point, takes a subshell's work (nested_work.py)."""


@dataclass(frozen=True)
class WorkDone:
    """The subshell's work it took is done."""


@dataclass(frozen=True)
class RequestAsk:
    """The guest asking for its turn's request: which of its functions to call, with
    what arguments (host_door answers it once per turn)."""


@dataclass(frozen=True)
class Immortalize:
    """At boot: the guest's objects at these addresses become immortal (an array of
    `count` u32 addresses at `address`, in guest memory)."""

    address: int
    count: int


@dataclass(frozen=True)
class StreamRingAt:
    """The guest's stdout/stderr ring (stream_ring.py): its header at `address`,
    then `size` bytes of data."""

    address: int
    size: int
    interrupt_words: int | None = None  # the soft interrupt's two words (soft_interrupt.py)


@dataclass(frozen=True)
class HttpOpen:
    """A request through the network door (the host checks it against its rules)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    follow: bool = True  # False: the 3xx comes back (the guest's client follows it, each hop a request)


@dataclass(frozen=True)
class HttpRead:
    transfer: int
    size: int
    # exact: the next `size` bytes of the body in one answer, written into guest memory
    # as they arrive (network_door.Gather); else at most one chunk.
    exact: bool = False
    # into: where in guest memory an exact read's bytes go (the guest's own fresh
    # bytes object), instead of an allocation the guest then copies.
    into: int | None = None


@dataclass(frozen=True)
class HttpClose:
    transfer: int


@dataclass(frozen=True)
class SourceRequest:
    """A built-in library's source file, by its path inside the stdlib zip (unchecked
    here: host/library_sources.read_source checks it)."""

    path: str


@dataclass(frozen=True)
class PythonRun:
    """`python ...` as a command (runtime/child_python.py): the arguments after the
    program's name, run by a child interpreter of the same sandbox to its end."""

    args: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...]
    stdin: bytes
    stdout: Literal["inherit", "capture", "null"]
    stderr: Literal["inherit", "capture", "null", "stdout"]
    crlf: bool  # inherited output as a pseudo-terminal shows it (ipykernel's `!` lines)
    timeout: float | None  # seconds (subprocess's timeout=); the cell's own limits apply besides


Message = (
    DisplayOutput | ErrorOutput | CommOutput | InputRequest | HistoryRequest | CellResult | QueryResult | Immortalize
    | StreamRingAt | RequestAsk | HttpOpen | HttpRead | HttpClose | PythonRun | SourceRequest | DebugMessage | WorkTake | WorkDone
)
# What a `python` command may carry: about what Linux lets one exec carry (ARG_MAX),
# and a pipe's worth of input for a whole program.
MAX_PYTHON_ARGS = 4096
MAX_PYTHON_ARG_BYTES = 2 << 20
MAX_PYTHON_STDIN = 16 << 20
MAX_HTTP_HEADERS = 100
MAX_IMMORTAL = 2_000_000
MAX_PAYLOADS = 16
MAX_HISTORY_ROWS = 10_000
MAX_PATTERN_CHARS = 4096
MAX_BUFFERS = 64


def _bundle(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadMessage("data must be an object")
    for key, item in value.items():
        if not isinstance(key, str) or "/" not in key or len(key) > 255:
            raise BadMessage(f"bad MIME type {key!r}")
        if not isinstance(item, (str, dict, list)):
            raise BadMessage(f"bad value for {key}")
    return value


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadMessage("metadata must be an object")
    return value


def _display_id(message: dict[str, Any]) -> str | None:
    transient = message.get("transient")
    if transient is None:
        return None
    if not isinstance(transient, dict):
        raise BadMessage("transient must be an object")
    did = transient.get("display_id")
    if did is None:
        return None
    if not isinstance(did, str) or not did or len(did) > MAX_ID_CHARS:
        raise BadMessage("bad display_id")
    return did


def _error(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadMessage("error must be an object")
    tb = value.get("traceback", [])
    if not isinstance(tb, list) or not all(isinstance(line, str) for line in tb):
        raise BadMessage("traceback must be a list of strings")
    return {"ename": str(value.get("ename", "Error")), "evalue": str(value.get("evalue", "")), "traceback": tb}


def _payload(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PAYLOADS:
        raise BadMessage("payload must be a short list")
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("source"), str):
            raise BadMessage("each payload must be an object with a source")
    return value


def _comm(message: dict[str, Any]) -> CommOutput:
    msg_type = message.get("msg_type")
    if msg_type not in COMM_MSG_TYPES:
        raise BadMessage(f"bad comm message type {str(msg_type)[:40]!r}")
    content = message.get("content")
    if not isinstance(content, dict):
        raise BadMessage("comm content must be an object")
    comm_id = content.get("comm_id")
    if not isinstance(comm_id, str) or not comm_id or len(comm_id) > MAX_ID_CHARS:
        raise BadMessage("a comm message needs a comm_id of at most 256 characters")
    if msg_type == "comm_open":
        target = content.get("target_name")
        if not isinstance(target, str) or not target or len(target) > MAX_ID_CHARS:
            raise BadMessage("comm_open needs a target_name of at most 256 characters")
        module = content.get("target_module")
        if module is not None and (not isinstance(module, str) or len(module) > MAX_ID_CHARS):
            raise BadMessage("target_module must be a short string")
    if not isinstance(content.get("data", {}), dict):
        raise BadMessage("comm data must be an object")
    raw = message.get("buffers") or []
    if not isinstance(raw, list) or len(raw) > MAX_BUFFERS or not all(isinstance(b, str) for b in raw):
        raise BadMessage(f"comm buffers must be a list of at most {MAX_BUFFERS} base64 strings")
    try:
        buffers = tuple(base64.b64decode(b, validate=True) for b in raw)
    except (binascii.Error, ValueError):
        raise BadMessage("comm buffers must be base64") from None
    return CommOutput(msg_type, content, _metadata(message.get("metadata")), buffers)


def _int(message: dict[str, Any], key: str, default: int | None, minimum: int = 0) -> int | None:
    value = message.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= 1 << 40:
        raise BadMessage(f"{key} must be a whole number")
    return value


def _python_run(message: dict[str, Any]) -> PythonRun:
    args, cwd, env = message.get("args"), message.get("cwd"), message.get("env", {})
    if not isinstance(args, list) or len(args) > MAX_PYTHON_ARGS or not all(isinstance(a, str) for a in args):
        raise BadMessage(f"python needs args: a list of at most {MAX_PYTHON_ARGS} strings")
    if not isinstance(cwd, str) or not cwd.startswith("/") or len(cwd) > 4096 or "\0" in cwd:
        raise BadMessage("python needs cwd: an absolute guest path")
    if not isinstance(env, dict) or len(env) > MAX_PYTHON_ARGS or not all(
            isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\0" not in k + v
            for k, v in env.items()):
        raise BadMessage("python's env must map names (no '=') to strings")
    if sum(len(a) for a in args) + sum(len(k) + len(v) for k, v in env.items()) > MAX_PYTHON_ARG_BYTES \
            or any("\0" in a for a in args):
        raise BadMessage(f"python's arguments and environment hold more than {MAX_PYTHON_ARG_BYTES} characters, or a NUL")
    try:
        stdin = base64.b64decode(message.get("stdin", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise BadMessage("python's stdin must be base64") from None
    if len(stdin) > MAX_PYTHON_STDIN:
        raise BadMessage(f"python's stdin holds more than {MAX_PYTHON_STDIN} bytes")
    stdout, stderr = message.get("stdout", "inherit"), message.get("stderr", "inherit")
    if stdout not in ("inherit", "capture", "null") or stderr not in ("inherit", "capture", "null", "stdout"):
        raise BadMessage("python's stdout is inherit, capture or null; its stderr one of those or stdout")
    timeout = message.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout < 1e9):
        raise BadMessage("python's timeout is a positive number of seconds")
    return PythonRun(tuple(args), cwd, tuple(env.items()), stdin, stdout, stderr, bool(message.get("crlf", False)),
                     None if timeout is None else float(timeout))


def _http_open(message: dict[str, Any]) -> HttpOpen:
    method, url, headers = message.get("method"), message.get("url"), message.get("headers", [])
    if not isinstance(method, str) or not isinstance(url, str):
        raise BadMessage("http_open needs a method and a url")
    if not isinstance(headers, list) or len(headers) > MAX_HTTP_HEADERS or not all(
            isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h) for h in headers):
        raise BadMessage(f"headers must be at most {MAX_HTTP_HEADERS} [name, value] pairs of strings")
    body = message.get("body")
    if body is not None:
        if not isinstance(body, str) or len(body) > wire.MAX_HTTP_BODY * 4 // 3 + 4:
            raise BadMessage("a request body is base64 of at most 16 MiB")
        try:
            body = base64.b64decode(body, validate=True)
        except ValueError:
            raise BadMessage("the request body is not base64") from None
    follow = message.get("follow", True)
    if not isinstance(follow, bool):
        raise BadMessage("follow must be true or false")
    return HttpOpen(method[:32], url[:16384], tuple((h[0], h[1]) for h in headers), body, follow)


def _history(message: dict[str, Any]) -> HistoryRequest:
    kind = message.get("kind")
    if kind not in ("tail", "range", "search"):
        raise BadMessage(f"bad history kind {kind!r}")
    pattern = message.get("pattern", "*")
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        raise BadMessage("pattern must be a short string")
    n = _int(message, "n", None)
    return HistoryRequest(
        kind,
        raw=bool(message.get("raw", True)),
        output=bool(message.get("output", False)),
        n=None if n is None else min(n, MAX_HISTORY_ROWS),
        pattern=pattern,
        unique=bool(message.get("unique", False)),
        session=_int(message, "session", 0, minimum=-(1 << 40)) or 0,
        start=_int(message, "start", 1, minimum=-(1 << 40)) or 0,
        stop=_int(message, "stop", None, minimum=-(1 << 40)),
    )


def parse(raw: bytes) -> Message:
    try:
        message = clean(json.loads(raw))
    except TooDeep as err:
        raise BadMessage(f"the message is {err}") from None
    except RecursionError:
        raise BadMessage(f"the message is nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise BadMessage(f"not JSON: {err}") from None
    if not isinstance(message, dict):
        raise BadMessage("a message must be an object")
    op = message.get("op")
    if op in (wire.OP_DISPLAY, wire.OP_EXECUTE_RESULT):
        update = bool(message.get("update", False))
        did = _display_id(message)
        if update and did is None:
            raise BadMessage("update needs a display_id")
        kind: OutputKind = "execute_result" if op == wire.OP_EXECUTE_RESULT else (
            "update_display_data" if update else "display_data"
        )
        return DisplayOutput(kind, _bundle(message.get("data")), _metadata(message.get("metadata")), did)
    if op == wire.OP_CLEAR_OUTPUT:
        return DisplayOutput("clear_output", wait=bool(message.get("wait", False)))
    if op == wire.OP_ERROR:
        err = _error(message)
        return ErrorOutput(err["ename"], err["evalue"], err["traceback"])
    if op == wire.OP_HISTORY:
        return _history(message)
    if op == wire.OP_COMM:
        return _comm(message)
    if op == wire.OP_IMMORTALIZE:
        address, count = _int(message, "address", None), _int(message, "count", None)
        if address is None or count is None or count > MAX_IMMORTAL:
            raise BadMessage("immortalize needs an address and a count")
        return Immortalize(address, count)
    if op == wire.OP_STREAM_RING:
        address, size = _int(message, "address", None), _int(message, "size", None)
        if address is None or size is None:
            raise BadMessage("stream_ring needs an address and a size")
        return StreamRingAt(address, size, _int(message, "interrupt_words", None))
    if op == wire.OP_INPUT:
        prompt = message.get("prompt", "")
        if not isinstance(prompt, str):
            raise BadMessage("prompt must be a string")
        return InputRequest(prompt[:65536], bool(message.get("password", False)))
    if op == wire.OP_REQUEST:
        return RequestAsk()
    if op == wire.OP_QUERY_RESULT:
        if "value" not in message:
            raise BadMessage("query_result needs a value")
        return QueryResult(message["value"])
    if op == wire.OP_HTTP_OPEN:
        return _http_open(message)
    if op == wire.OP_HTTP_READ:
        transfer, size = _int(message, "transfer", None), _int(message, "size", 1 << 18, minimum=1)
        if transfer is None or size is None:
            raise BadMessage("http_read needs a transfer")
        exact = message.get("exact", False)
        if not isinstance(exact, bool):
            raise BadMessage("exact must be true or false")
        if exact:
            if not wire.EXACT_READ_MIN <= size <= wire.EXACT_READ_MAX:
                raise BadMessage(f"an exact read is of {wire.EXACT_READ_MIN} to {wire.EXACT_READ_MAX} bytes")
            into = _int(message, "into", None, minimum=1)
            if into is not None and into + size > 1 << 32:
                raise BadMessage("into is an address in guest memory")
            return HttpRead(transfer, size, True, into)
        return HttpRead(transfer, min(size, 1 << 20))
    if op == wire.OP_HTTP_CLOSE:
        transfer = _int(message, "transfer", None)
        if transfer is None:
            raise BadMessage("http_close needs a transfer")
        return HttpClose(transfer)
    if op == wire.OP_PYTHON:
        return _python_run(message)
    if op == wire.OP_WORK_TAKE:
        return WorkTake()
    if op == wire.OP_WORK_DONE:
        return WorkDone()
    if op == wire.OP_DEBUG:
        try:
            return parse_debug(message)
        except BadDebugMessage as err:
            raise BadMessage(str(err)) from None
    if op == wire.OP_SOURCE:
        path = message.get("path")
        if not isinstance(path, str) or len(path) > 1024:
            raise BadMessage("source needs a path inside the stdlib zip")
        return SourceRequest(path)
    if op == wire.OP_RESULT:
        status = message.get("status")
        if status not in ("ok", "error", "exit"):
            raise BadMessage(f"bad status {status!r}")
        code = message.get("exit_code", 0)
        if not isinstance(code, int) or isinstance(code, bool):
            raise BadMessage("exit_code must be an integer")
        err = message.get("error")
        return CellResult(status, code, None if err is None else _error(err), _payload(message.get("payload")))
    raise BadMessage(f"unknown op {op!r}")


# --- queries: a kernel's questions about the live namespace ------------------

# The guest's answers (_wasm_kernel_kernel.GuestKernel) to the queries a host may ask.


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise BadMessage(what)


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def query_value(op: str, answer: QueryResult | None) -> Any:
    """The value a query turn sent, checked for the shape `op` promises (the guest may
    be broken or forged by user code: a kernel relies on these shapes)."""
    _expect(answer is not None, "the query sent no value")
    assert answer is not None
    value = answer.value
    _expect(isinstance(value, dict), f"{op} must return an object")
    if op == "complete":
        start, end = value.get("cursor_start"), value.get("cursor_end")
        _expect(_str_list(value.get("matches")), "matches must be a list of strings")
        _expect(isinstance(start, int) and isinstance(end, int) and 0 <= start <= end, "bad cursor range")
        _metadata(value.get("metadata"))
    elif op == "inspect":
        _expect(isinstance(value.get("found"), bool), "found must be a boolean")
        _bundle(value.get("data"))
        _metadata(value.get("metadata"))
    elif op == "is_complete":
        _expect(value.get("status") in ("complete", "incomplete", "invalid", "unknown"), "bad is_complete status")
        _expect(isinstance(value.get("indent", ""), str), "indent must be a string")
    elif op == "comm_info":
        comms = value.get("comms")
        _expect(isinstance(comms, dict), "comms must be an object")
        for comm_id, info in comms.items():
            _expect(isinstance(info, dict) and isinstance(info.get("target_name"), str), f"bad comm {comm_id!r}")
    elif op == "debug":
        response, events = value.get("response"), value.get("events", [])
        try:
            parse_debug({"events": events, "responses": [response]})
        except BadDebugMessage as err:
            raise BadMessage(str(err)) from None
    elif op == "user_expressions":
        for key, item in value.items():
            _expect(isinstance(item, dict) and item.get("status") in ("ok", "error"), f"bad result for {key!r}")
            if item["status"] == "ok":
                _bundle(item.get("data"))
                _metadata(item.get("metadata"))
            else:
                value[key] = {"status": "error", **_error(item)}
    return value
