"""A sandbox host (`wasm-kernel host`): a real Jupyter Server serving wasm-python
kernels, which keeps its record in Redis with its load, and drops out of the pool by
itself when killed."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
import urllib.error
from pathlib import Path

import pytest

from support.cluster_procs import HostProcess, pool_store, wait_until
from support.paths import SUPPORT
from support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(180)


def _hosts(server: RedisServer) -> tuple[list, list]:
    async def read() -> tuple[list, list]:
        return await pool_store(server.url).hosts()
    return asyncio.run(read())


def test_a_host_registers_reports_its_kernels_and_lapses_when_killed(redis_server: RedisServer, tmp_path: Path) -> None:
    host = HostProcess(redis_server.url, tmp_path / "h1", "h1")
    try:
        live = wait_until(lambda: _hosts(redis_server)[0])
        assert [(h.id, h.endpoint, h.capacity, h.load) for h in live] == [("h1", host.url, 10, 0)]
        kernel = host.request("POST", "/api/kernels", {"name": "wasm-python"})
        assert kernel["name"] == "wasm-python"  # type: ignore[index]
        wait_until(lambda: [h for h in _hosts(redis_server)[0] if h.load == 1])
        with pytest.raises(urllib.error.HTTPError) as refused:  # a native kernel would run outside the sandbox
            host.request("POST", "/api/kernels", {"name": "python3"})
        assert refused.value.code in (400, 404, 500), refused.value.code
        kernels = host.request("GET", "/api/kernels")
        assert [k["name"] for k in kernels] == ["wasm-python"]  # type: ignore[union-attr]
        host.kill9()
        live, lost = wait_until(lambda: (lambda hl: hl if hl[1] else None)(_hosts(redis_server)), timeout=5)
        assert live == [] and lost == ["h1"]
    finally:
        host.stop()


def _beat_ms(server: RedisServer, host_id: str) -> float | None:
    async def read() -> float | None:
        store = pool_store(server.url)
        try:
            return await store.redis.zscore(store.key("hosts"), host_id)
        finally:
            await store.redis.aclose()
    return asyncio.run(read())


def test_a_host_whose_event_loop_is_held_keeps_beating_and_stays_in_the_pool(redis_server: RedisServer,
                                                                            tmp_path: Path) -> None:
    """While a class's kernels start, the server's event loop falls behind; the record
    (three heartbeats' TTL) must not lapse meanwhile, or the pool drops every session
    of a host that is serving them. The loop is held here for four heartbeats."""
    heartbeat = 0.5
    host = HostProcess(redis_server.url, tmp_path / "h", "held", heartbeat=heartbeat,
                       launcher=(str(SUPPORT / "blocking_host.py"),))
    try:
        first = wait_until(lambda: _beat_ms(redis_server, "held"))
        blocker = threading.Thread(target=host.request, args=("GET", "/test-block?seconds=2.0"), daemon=True)
        blocker.start()
        beats, absent = set(), 0
        while blocker.is_alive():
            live = {h.id for h in _hosts(redis_server)[0]}
            absent += "held" not in live
            beats.add(_beat_ms(redis_server, "held"))
            time.sleep(0.1)
        assert absent == 0, f"the host's record lapsed while its loop was held ({absent} samples without it)"
        assert len(beats - {first}) >= 2, f"no beats while the loop was held: {sorted(b for b in beats if b)}"
    finally:
        host.stop()


def test_a_host_that_cannot_bind_its_port_exits_and_is_never_advertised(redis_server: RedisServer,
                                                                        tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        host = HostProcess(redis_server.url, tmp_path / "h", "unbound", heartbeat=0.2, wait=False,
                           port=taken.getsockname()[1])
        try:
            code = host.proc.wait(60)
        except subprocess.TimeoutExpired:
            host.stop()
            raise AssertionError(f"the host still runs a minute after failing to bind its port: "
                                 f"{host.log_path.read_text()[-1500:]}") from None
        assert code != 0, host.log_path.read_text()[-1500:]
        assert _beat_ms(redis_server, "unbound") is None, "a host that never listened was advertised to the pool"
    finally:
        taken.close()
