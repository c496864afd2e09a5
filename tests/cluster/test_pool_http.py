"""The pool's HTTP calls when a class starts at once: many kernel creates in flight
together, each slow on a loaded host, must all be sent, none failed for waiting
behind the others in the client's queue; and a client is never carried from one
event loop to another."""

from __future__ import annotations

import asyncio
import socket

import pytest
from tornado import web
from tornado.httpserver import HTTPServer

from wasm_kernel.cluster.host_client import call_host
from wasm_kernel.cluster.session_manager import SessionManager

pytestmark = pytest.mark.slow

AT_ONCE = 16  # above tornado's default of 10 connections per client


class _Slow(web.RequestHandler):
    """Answers every request after `delay` seconds, as a host starting a kernel under load does."""

    delay = 0.0
    seen = 0

    async def _answer(self) -> None:
        type(self).seen += 1
        await asyncio.sleep(self.delay)
        self.set_status(200)
        self.finish({"ok": True})

    async def post(self, *_: str) -> None:
        await self._answer()

    async def delete(self, *_: str) -> None:
        await self._answer()


def _serve(delay: float) -> tuple[HTTPServer, str]:
    handler = type("Slow", (_Slow,), {"delay": delay, "seen": 0})
    server = HTTPServer(web.Application([(r"/(.*)", handler)]))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    server.add_sockets([sock])
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_sixteen_slow_host_calls_at_once_all_get_their_answer() -> None:
    async def main() -> list[object]:
        # Longer than call_host's 5 s connect timeout, which is also how long a call
        # may wait for a free connection in tornado's queue.
        server, url = _serve(6.0)
        try:
            return await asyncio.gather(*(call_host(url, "t", "POST", "/api/sessions", {}) for _ in range(AT_ONCE)),
                                        return_exceptions=True)
        finally:
            server.stop()

    answers = asyncio.run(main())
    assert answers == [{"ok": True}] * AT_ONCE, [str(a) for a in answers if a != {"ok": True}]


def test_sixteen_slow_sandbox_manager_calls_at_once_all_get_their_answer() -> None:
    async def main() -> list[object]:
        server, url = _serve(3.0)  # longer than the router's 2 s connect timeout to the manager
        manager = SessionManager(None, url, token="t")  # type: ignore[arg-type]  # no Redis for a delete call
        try:
            return await asyncio.gather(*(manager.delete_sandbox(f"sb-{i:032x}") for i in range(AT_ONCE)),
                                        return_exceptions=True)
        finally:
            server.stop()

    answers = asyncio.run(main())
    assert answers == [True] * AT_ONCE, [repr(a) for a in answers if a is not True]


def test_a_host_call_works_from_one_event_loop_after_another() -> None:
    async def once() -> object:
        server, url = _serve(0.0)
        try:
            return await call_host(url, "t", "POST", "/api/sessions", {})
        finally:
            server.stop()

    assert [asyncio.run(once()) for _ in range(3)] == [{"ok": True}] * 3
