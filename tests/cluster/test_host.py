"""A sandbox host (`wasm-kernel host`): a real Jupyter Server serving wasm-python
kernels, which keeps its record in Redis with its load, and drops out of the pool by
itself when killed."""

from __future__ import annotations

import asyncio
import urllib.error
from pathlib import Path

import pytest

from support.cluster_procs import HostProcess, pool_store, wait_until
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
