"""The pool services' request handler: errors answer as JSON {code, message}.

A SessionManagerError raised by a handler answers with its own status (the seed's
table) and one line for the user; anything else is a 500 that names no internals
(the service's log has the traceback). `reason` repeats the message for Jupyter's
gateway client, which shows that field.
"""

from __future__ import annotations

import json
from typing import Any

from tornado import web

from .errors import SessionManagerError


class JsonErrorHandler(web.RequestHandler):
    service = "the service"

    def fail(self, status: int, code: str, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"code": code, "message": message, "reason": message}))

    def fail_with(self, err: SessionManagerError) -> None:
        self.fail(err.status, err.code, err.message)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        err = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(err, SessionManagerError):
            self.fail_with(err)
        else:
            self.fail(status_code, "internal", f"{self.service} failed; see its log")

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if not isinstance(value, SessionManagerError):  # expected answers, not faults
            super().log_exception(typ, value, tb)


__all__ = ["JsonErrorHandler"]
