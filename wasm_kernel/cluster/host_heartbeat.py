"""A sandbox host's heartbeat: its signed record renewed in Redis at a fixed cadence,
from a thread of its own.

Not a task on the server's event loop: that loop also starts every kernel, relays
every kernel message and answers every REST call, and when a class's 40 kernels
start at once on two cores it falls seconds behind. A beat queued behind that work
came late enough for the record (three heartbeats' TTL) to lapse, and the pool then
dropped every session of a host that was serving them all. The thread has its own
event loop and its own Redis connection, so it waits for nothing the server does; it
beats at start + k * every (a late beat does not push the next ones back).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from ..host.log import get_logger
from .records import HostInfo, now_ms
from .session_store import SessionStore, connect

log = get_logger("wasm_kernel.cluster")


class HostHeartbeat:
    """Renews `info()`'s record every `every_s` seconds with a TTL of three beats
    until stop(). Started once the server listens (a host that could not bind its
    port must not be advertised), and a daemon thread, so that a server that exits for
    any reason never stays behind half-alive for its sake."""

    def __init__(self, redis_url: str, key: bytes, prefix: str, info: Callable[[], HostInfo],
                 every_s: float) -> None:
        self.redis_url = redis_url
        self.key = key
        self.prefix = prefix
        self.info = info
        self.every_s = every_s
        self.ttl_ms = int(every_s * 3000)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wk-host-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """No more beats (the record lapses by itself unless deleted)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        asyncio.run(self._beat_until_stopped())

    async def _beat_until_stopped(self) -> None:
        store = SessionStore(connect(self.redis_url), key=self.key, prefix=self.prefix)
        start = time.monotonic()
        beats = 0
        try:
            while not self._stop.is_set():
                try:
                    await store.register_host(self.info(), self.ttl_ms)
                except Exception as err:  # Redis down: keep serving, beat again when it is back
                    log.warning("host.heartbeat_failed", host=self.info().id, error=str(err)[:200])
                beats += 1
                due = start + beats * self.every_s
                now = time.monotonic()
                if due < now:  # this beat itself was slow (Redis): the next one is due now
                    beats = int((now - start) / self.every_s)
                    due = now
                # Event.wait in the loop's default executor would need a second thread;
                # short sleeps keep stop() prompt instead.
                while not self._stop.is_set() and time.monotonic() < due:
                    await asyncio.sleep(min(0.1, max(0.0, due - time.monotonic())))
        finally:
            await store.redis.aclose()


def host_info(host_id: str, endpoint: str, capacity: int, shared_root: bool, load: Callable[[], int]) -> HostInfo:
    """This host's record as of now."""
    return HostInfo(host_id, endpoint, capacity, load(), shared_root, now_ms())


__all__ = ["HostHeartbeat", "host_info"]
