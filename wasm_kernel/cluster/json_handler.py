"""The pool services' request handler: errors answer as JSON {code, message}.

A SessionManagerError raised by a handler answers with its own status (the seed's
table) and one line for the user; anything else is a 500 that names no internals
(the service's log has the traceback). `reason` repeats the message for Jupyter's
gateway client, which shows that field.

Request bodies and credentials are untrusted: json_body() caps the size and the
nesting depth (Python's parser recurses, so a deep body would be a 500 otherwise),
and token_matches() compares bytes, so a header with non-ASCII text is a plain
mismatch (401), not an exception.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from tornado import web

from .errors import SessionManagerError

MAX_BODY = 64 * 1024  # bytes: the largest request the pool takes is a few hundred
MAX_DEPTH = 16  # nesting levels of a request body


class BadBody(SessionManagerError):
    code = "bad_request"
    status = 400


def token_matches(header: str, expected: str) -> bool:
    """`Authorization: token T` or `Bearer T` carries `expected`, compared in
    constant time over bytes; any other header, or an empty expected token, is False."""
    if not expected:
        return False
    return secrets.compare_digest(bearer(header).encode("utf-8", "surrogateescape"), expected.encode())


def bearer(header: str) -> str:
    for scheme in ("token ", "Bearer "):
        if header.startswith(scheme):
            return header[len(scheme):]
    return ""


def parse_json(raw: bytes, default: Any) -> Any:
    """The body as JSON, or BadBody (too large, too deep, not JSON)."""
    if not raw:
        return default
    if len(raw) > MAX_BODY:
        raise BadBody(f"the body is larger than {MAX_BODY // 1024} KiB")
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:  # a depth count before the recursive parser ever sees it
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    if deepest > MAX_DEPTH:
        raise BadBody(f"the body is nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BadBody("the body is not JSON") from None


class JsonErrorHandler(web.RequestHandler):
    service = "the service"

    def fail(self, status: int, code: str, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"code": code, "message": message, "reason": message}))

    def fail_with(self, err: SessionManagerError) -> None:
        self.fail(err.status, err.code, err.message)

    def json_body(self, default: Any = None) -> Any:
        return parse_json(self.request.body, default)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        err = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(err, SessionManagerError):
            self.fail_with(err)
        else:
            self.fail(status_code, "internal", f"{self.service} failed; see its log")

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if not isinstance(value, SessionManagerError):  # expected answers, not faults
            super().log_exception(typ, value, tb)


__all__ = ["BadBody", "JsonErrorHandler", "bearer", "parse_json", "token_matches"]
