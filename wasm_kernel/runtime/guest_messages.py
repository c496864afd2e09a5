"""The messages the guest library sends through the `host.call` door, validated.

Guest code can forge any message, so every field is checked for type and size
before it reaches a caller; a malformed message is refused, never half-applied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

MAX_MESSAGE_BYTES = 64 << 20
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
class InputRequest:
    prompt: str
    password: bool


@dataclass(frozen=True)
class CellResult:
    status: Literal["ok", "error", "exit"]
    exit_code: int = 0
    error: dict[str, Any] | None = None
    execute_result: DisplayOutput | None = None  # the cell's value, sent with its end


Message = DisplayOutput | InputRequest | CellResult


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


def parse(raw: bytes) -> Message:
    try:
        message = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadMessage(f"not JSON: {err}") from None
    if not isinstance(message, dict):
        raise BadMessage("a message must be an object")
    op = message.get("op")
    if op in ("display", "execute_result"):
        update = bool(message.get("update", False))
        did = _display_id(message)
        if update and did is None:
            raise BadMessage("update needs a display_id")
        kind: OutputKind = "execute_result" if op == "execute_result" else (
            "update_display_data" if update else "display_data"
        )
        return DisplayOutput(kind, _bundle(message.get("data")), _metadata(message.get("metadata")), did)
    if op == "clear_output":
        return DisplayOutput("clear_output", wait=bool(message.get("wait", False)))
    if op == "input":
        prompt = message.get("prompt", "")
        if not isinstance(prompt, str):
            raise BadMessage("prompt must be a string")
        return InputRequest(prompt[:65536], bool(message.get("password", False)))
    if op == "result":
        status = message.get("status")
        if status not in ("ok", "error", "exit"):
            raise BadMessage(f"bad status {status!r}")
        code = message.get("exit_code", 0)
        if not isinstance(code, int) or isinstance(code, bool):
            raise BadMessage("exit_code must be an integer")
        err = message.get("error")
        value = message.get("execute_result")
        shown = None
        if value is not None:
            if not isinstance(value, dict):
                raise BadMessage("execute_result must be an object")
            shown = DisplayOutput("execute_result", _bundle(value.get("data")), _metadata(value.get("metadata")))
        return CellResult(status, code, None if err is None else _error(err), shown)
    raise BadMessage(f"unknown op {op!r}")


# --- queries: a kernel's questions about the live namespace ------------------

# The guest functions (in _wasm_kernel_introspect) a host may run as a query.
QUERY_OPS = frozenset({"complete", "inspect", "is_complete", "user_expressions", "who", "whos"})
QUERY_MIME = "application/json"


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise BadMessage(what)


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def query_value(op: str, answer: DisplayOutput | None) -> Any:
    """The value a query turn sent as its result, checked for the shape `op` promises
    (the guest may be broken or forged by user code: a kernel relies on these shapes)."""
    _expect(answer is not None and isinstance(answer.data.get(QUERY_MIME), dict), "the query sent no value")
    assert answer is not None
    box = answer.data[QUERY_MIME]
    _expect("value" in box, "the query sent no value")
    value = box["value"]
    if op in ("who", "whos"):
        _expect(isinstance(value, str), f"{op} must return text")
        return value
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
        _expect(value.get("status") in ("complete", "incomplete", "invalid"), "bad is_complete status")
        _expect(isinstance(value.get("indent", ""), str), "indent must be a string")
    elif op == "user_expressions":
        for key, item in value.items():
            _expect(isinstance(item, dict) and item.get("status") in ("ok", "error"), f"bad result for {key!r}")
            if item["status"] == "ok":
                _bundle(item.get("data"))
                _metadata(item.get("metadata"))
            else:
                value[key] = {"status": "error", **_error(item)}
    return value
