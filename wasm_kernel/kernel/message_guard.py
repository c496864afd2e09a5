"""Every request gets a reply, whatever a client or the guest put in it.

Two doors:
- data from clients enters through the session's unpacker: every message part is
  cleaned of lone surrogates there (runtime/wire_text), and a part nested too
  deeply to decode becomes a content the handler refuses, instead of an exception
  that leaves the request without a reply;
- every request handler runs inside a guard: whatever it raises, the client gets
  a `<type>_reply` with status "error" and one fixed line naming a reference, and
  the exception goes to the kernel's log under that reference. Host exception text
  (host paths, library internals) never reaches a client;
- a request of a type the kernel does not serve (a debug_request on the shell
  channel, a type from a newer protocol or a typo) gets a `<type>_reply` with status "error" naming what is
  not supported. ipykernel logs "Unknown message type" and sends nothing, so a
  client waits for a reply that never comes.
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


# What a request the kernel does not serve is told, by type; any other: UNSUPPORTED.
NOT_SERVED = {
    "debug_request": "a debug_request goes on the control channel, where this kernel's debugger answers it",
}
UNSUPPORTED = "{msg_type} is not supported by this kernel"


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


class HandlerTable(dict[str, Handler]):
    """A channel's handlers, as ipykernel's dispatchers look them up (`.get(msg_type,
    None)`): a request type without a handler gets one that answers it is not
    supported, instead of None (no reply). A message that is not a request (no
    `_request` suffix) has no reply to give, and stays unhandled, as on ipykernel."""

    def __init__(self, kernel: KernelChannels, handlers: dict[str, Handler]) -> None:
        super().__init__(handlers)
        self._kernel = kernel

    def get(self, msg_type: str, default: Handler | None = None) -> Handler | None:  # type: ignore[override]
        handler = super().get(msg_type)
        if handler is None and isinstance(msg_type, str) and msg_type.endswith("_request"):
            return _not_served(self._kernel, msg_type)
        return handler if handler is not None else default


def guard_handlers(kernel: KernelChannels, handlers: dict[str, Handler]) -> HandlerTable:
    """Each handler wrapped so that it always answers, and an answer for the request
    types no handler serves: the table to use in place of `handlers`."""
    return HandlerTable(kernel, {msg_type: _guarded(kernel, msg_type, handler) for msg_type, handler in handlers.items()})


def not_served_line(msg_type: str) -> str:
    return NOT_SERVED.get(msg_type) or UNSUPPORTED.format(msg_type=msg_type[:100])


def _not_served(kernel: KernelChannels, msg_type: str) -> Handler:
    async def answer(stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        kernel.log.warning("wasm-kernel: answered a %s as not supported", msg_type[:100])  # as ipykernel's "Unknown message type"
        _reply(kernel, stream, ident, parent, msg_type[: -len("_request")][:100] + "_reply", "NotSupported",
               not_served_line(msg_type))

    return answer


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


__all__ = ["HandlerTable", "guard_handlers", "guard_unpacker", "internal_error_line", "new_reference", "not_served_line"]
