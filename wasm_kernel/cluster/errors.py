"""The session manager's domain errors (seed 004, section 4) and how the router answers them.

Each error carries a stable code, an HTTP status and a one-line message that a
Jupyter frontend shows the user as is (the router's JSON body is `{code, message}`).
"""

from __future__ import annotations


class SessionManagerError(Exception):
    """Base of the seed's errors. `code` is stable; `status` is the router's answer."""

    code = "internal"
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class InvalidSessionID(SessionManagerError):
    code = "invalid_session_id"
    status = 400


class SessionNotFound(SessionManagerError):
    """No such session for this tenant (404), or one that existed and is gone (410)."""

    code = "session_not_found"
    status = 404


class SessionGone(SessionNotFound):
    """A session that existed: it expired, its sandbox host was lost or drained, or
    it was deleted. 410. `reason` is the store's word for why (GONE_MESSAGES' keys)."""

    code = "session_gone"
    status = 410

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class RedisInternal(SessionManagerError):
    code = "redis_internal"
    status = 500


class CreateSandboxFailed(SessionManagerError):
    code = "create_sandbox_failed"
    status = 500


class UpstreamUnavailable(SessionManagerError):
    code = "upstream_unavailable"
    status = 503


class NoCapacity(SessionManagerError):
    """Every live host is full: the pool works, it has no room now. Distinct from
    UpstreamUnavailable (a part of the pool does not answer), so a frontend or an
    operator can tell "wait" from "something is down"."""

    code = "no_capacity"
    status = 503


__all__ = [
    "CreateSandboxFailed",
    "InvalidSessionID",
    "NoCapacity",
    "RedisInternal",
    "SessionGone",
    "SessionManagerError",
    "SessionNotFound",
    "UpstreamUnavailable",
]
