"""Every request gets a reply, whatever a client or the guest put in it.

Two doors:
- data from clients enters through the session's unpacker: every message part is
  cleaned of lone surrogates there (runtime/wire_text), and a part nested too
  deeply to decode becomes a content the handler refuses, instead of an exception
  that leaves the request without a reply;
- every request handler runs inside a guard: whatever it raises, the client gets
  a `<type>_reply` with status "error" and one fixed line naming a reference, and
  the exception goes to the kernel's log under that reference. Host exception text
  (host paths, library internals) never reaches a client.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..runtime.wire_text import TooDeep, clean
from .session_protocol import KernelChannels

if TYPE_CHECKING:
    from jupyter_client.session import Session

Handler = Callable[[Any, Any, dict[str, Any]], Awaitable[None]]
INVALID = "__wasm_kernel_invalid__"  # key of the content that stands in for an undecodable one
# What a request must carry, checked before its handler runs: ipykernel's own
# handlers drop a request that lacks them without a reply ("Got bad msg").
REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "execute_request": {"code": str},
    "complete_request": {"code": str},
    "inspect_request": {"code": str},
    "is_complete_request": {"code": str},
}
OPTIONAL: dict[str, dict[str, type | tuple[type, ...]]] = {
    "execute_request": {"silent": bool, "store_history": bool, "allow_stdin": bool, "user_expressions": dict,
                        "stop_on_error": bool},
    "complete_request": {"cursor_pos": (int, type(None))},
    "inspect_request": {"cursor_pos": int, "detail_level": int},
}


def new_reference() -> str:
    """A short id that ties a line shown to a client to the kernel log's entry."""
    return secrets.token_hex(4)


def internal_error_line(what: str, reference: str) -> str:
    return f"wasm-kernel could not {what} (internal error, reference {reference}); the kernel's log has the details"


def guard_unpacker(session: Session) -> None:
    """Clean whatever the session decodes from a client."""
    unpack = session.unpack

    def guarded(data: Any) -> Any:
        try:
            return clean(unpack(data))
        except (TooDeep, RecursionError):
            return {INVALID: "nested too deeply"}

    session.unpack = guarded


def guard_handlers(kernel: KernelChannels, handlers: dict[str, Handler]) -> None:
    """Wrap each handler so that it always answers."""
    for msg_type, handler in list(handlers.items()):
        handlers[msg_type] = _guarded(kernel, msg_type, handler)


def _guarded(kernel: KernelChannels, msg_type: str, handler: Handler) -> Handler:
    reply_type = msg_type[: -len("_request")] + "_reply" if msg_type.endswith("_request") else None

    async def answer(stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        problem = _malformed(msg_type, parent.get("content"))
        if problem is not None:
            kernel.log.warning("wasm-kernel: refused a malformed %s: %s", msg_type, problem)
            _reply(kernel, stream, ident, parent, reply_type, "BadRequest", f"malformed {msg_type}: {problem}")
            return
        try:
            await handler(stream, ident, parent)
        except Exception:
            reference = new_reference()
            kernel.log.exception("wasm-kernel: %s failed (reference %s)", msg_type, reference)
            _reply(kernel, stream, ident, parent, reply_type, "KernelError",
                   internal_error_line(f"answer this {msg_type}", reference))

    return answer


def _malformed(msg_type: str, content: Any) -> str | None:
    if not isinstance(content, dict) or INVALID in content:
        return "its content is not an object the kernel can read"
    for key, kind in REQUIRED.get(msg_type, {}).items():
        if not isinstance(content.get(key), kind):
            return f"{key} is missing or not a {_names(kind)}"
    for key, kind in OPTIONAL.get(msg_type, {}).items():
        if key in content and (not isinstance(content[key], kind) or content[key] is True and kind is int):
            return f"{key} must be a {_names(kind)}"
    return None


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "string", bool: "boolean", int: "whole number", dict: "object", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _reply(kernel: KernelChannels, stream: Any, ident: Any, parent: dict[str, Any], reply_type: str | None, ename: str,
           line: str) -> None:
    if reply_type is None or kernel.session is None:
        return  # comm messages and the like have no reply
    content: dict[str, Any] = {"status": "error", "ename": ename, "evalue": line, "traceback": [f"{ename}: {line}"]}
    if reply_type == "execute_reply":
        content["execution_count"] = kernel.execution_count
    kernel.session.send(stream, reply_type, content, parent, ident)


__all__ = ["guard_handlers", "guard_unpacker", "internal_error_line", "new_reference"]
