"""One REST call to a sandbox host's Jupyter Server, with the pool's host token."""

from __future__ import annotations

import json
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse

UNREACHABLE = 599  # tornado's code for no answer at all (refused, reset, timed out)
# What a host's session API answers when it has no room (sandbox_host.PoolSessionManager).
HOST_FULL = "wasm-kernel: this sandbox host has no room for another kernel"


class HostCallFailed(Exception):
    """The host answered with an HTTP error (`status`, and the start of its `body`),
    or not at all (UNREACHABLE)."""

    def __init__(self, status: int, detail: str, body: str = "") -> None:
        super().__init__(detail)
        self.status = status
        self.body = body


async def fetch(req: HTTPRequest) -> HTTPResponse:
    """One request on a client of its own, closed after it.

    Not `AsyncHTTPClient()`: that is one shared client per event loop, which sends at
    most 10 requests at a time and fails the others with "Timeout in request queue"
    once they have waited their connect timeout, so a class whose 40 kernels start at
    once saw creates fail that no host had refused. tornado's simple client keeps no
    connection open between requests, so a client per request costs nothing more, and
    none is ever used from an event loop it was not made on."""
    client = AsyncHTTPClient(force_instance=True)
    try:
        return await client.fetch(req)
    finally:
        client.close()


async def call_host(endpoint: str, token: str, method: str, path: str, body: Any = None,
                    timeout: float = 60.0) -> Any:
    """The JSON answer (None for an empty one); HostCallFailed otherwise."""
    req = HTTPRequest(f"{endpoint}{path}", method=method, body=None if body is None else json.dumps(body),
                      headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
                      request_timeout=timeout, connect_timeout=5.0, allow_nonstandard_methods=True)
    try:
        resp = await fetch(req)
    except HTTPClientError as err:
        body = err.response.body[:2000].decode("utf-8", "replace") if err.response is not None and err.response.body \
            else ""
        raise HostCallFailed(err.code, str(err), body) from None
    except OSError as err:
        raise HostCallFailed(UNREACHABLE, err.strerror or str(err)) from None
    return json.loads(resp.body) if resp.body else None


__all__ = ["HOST_FULL", "HostCallFailed", "UNREACHABLE", "call_host", "fetch"]
