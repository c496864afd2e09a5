"""The scale-out pool (issue 13): what the router costs, how fast sessionMgr looks
sessions up, how long a create takes. Real processes: redis-server, two sandbox
hosts, the sandbox manager, the router (tests/support/cluster_procs.py starts them).

    .venv/bin/python benchmarks/run_all.py --only cluster [--cells 200] [--lookup-seconds 3]

Rows:
- `1+1` execute -> reply through the router's websocket against the same kernel's
  websocket on its host, alternating, median of N each: the router's overhead
  (target <= 1 ms);
- sessionMgr lookups per second (get_sandbox_by_session on 1,000 bound sessions,
  64 concurrent callers in one process; target >= 5,000/s on 2 cores);
- create latency: a new notebook's kernel through the router (sessionMgr ->
  sandboxMgr -> host), median of 10.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the pool's process helpers

from _common import Row, log  # noqa: E402


def _ws(url: str, token: str):  # noqa: ANN202
    import websocket

    return websocket.create_connection(url, header=[f"Authorization: token {token}"], timeout=60)


def _execute(ws, code: str) -> float:  # noqa: ANN001
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "bench", "session": "bench",
              "date": "2026-01-01T00:00:00.000000Z", "version": "5.4"}
    start = time.perf_counter()
    ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                                    "allow_stdin": False}}))
    while True:
        msg = json.loads(ws.recv())
        if msg.get("channel") == "shell" and msg["parent_header"].get("msg_id") == msg_id:
            return time.perf_counter() - start


def run_cluster(cells: int = 200, lookup_seconds: float = 3.0, creates: int = 10) -> list[Row]:
    from support.cluster_procs import ROUTER_TOKENS, TOKEN, HostProcess, ManagerProcess, RouterProcess
    from support.redis_server import RedisServer

    base = Path(tempfile.mkdtemp(prefix="wk-bench-cluster-"))
    redis = RedisServer(base / "redis")
    hosts = [HostProcess(redis.url, base / f"h{i}", f"b{i}", heartbeat=1.0) for i in (1, 2)]
    manager = ManagerProcess(redis.url, base / "manager")
    router = RouterProcess(redis.url, manager.url, base / "router")
    rows: list[Row] = []
    try:
        status, kernel = router.call("POST", "/api/kernels", {"name": "wasm-python",
                                                              "env": {"JPY_SESSION_NAME": "/bench/one.ipynb"}})
        assert status == 201, kernel
        rid = kernel["id"]  # type: ignore[index]
        found, endpoint = asyncio.run(_record_of(redis.url, rid))
        via_router = _ws(router.url.replace("http", "ws") + f"/api/kernels/{rid}/channels",
                         ROUTER_TOKENS["course-a"])
        direct = _ws(endpoint.replace("http", "ws") + f"/api/kernels/{found.sandbox.kernel_id}/channels", TOKEN)
        for _ in range(20):
            _execute(via_router, "1+1")
            _execute(direct, "1+1")
        routed, plain = [], []
        for _ in range(cells):
            routed.append(_execute(via_router, "1+1"))
            plain.append(_execute(direct, "1+1"))
        via_router.close()
        direct.close()
        over = [(r - p) * 1000 for r, p in zip(routed, plain)]
        log(f"cluster: 1+1 routed {statistics.median(routed) * 1000:.2f} ms, direct "
            f"{statistics.median(plain) * 1000:.2f} ms")
        rows.append(Row("cluster", "1+1 through the router, median", "ms", statistics.median(routed) * 1000,
                        statistics.median(plain) * 1000, note="native = the same kernel's websocket on its host"))
        rows.append(Row("cluster", "router overhead on 1+1, median of paired differences", "ms",
                        statistics.median(over), target_max=1.0))
        rate = asyncio.run(_lookups(redis.url, lookup_seconds))
        log(f"cluster: {rate:,.0f} lookups/s")
        rows.append(Row("cluster", "sessionMgr lookups per second (64 concurrent, one process)", "1/s", rate,
                        extra={"target_min": 5000}, note=f"target >= 5,000/s: {'PASS' if rate >= 5000 else 'FAIL'}"))
        latencies = []
        for i in range(creates):
            start = time.perf_counter()
            status, answer = router.call("POST", "/api/kernels", {
                "name": "wasm-python", "env": {"JPY_SESSION_NAME": f"/bench/create-{i}-{uuid.uuid4()}.ipynb"}})
            latencies.append(time.perf_counter() - start)
            assert status == 201, answer
        rows.append(Row("cluster", "create: a new notebook's kernel through the router, median", "s",
                        statistics.median(latencies), extra={"samples_s": latencies}))
    finally:
        router.stop()
        manager.stop()
        for host in hosts:
            host.stop()
        redis.stop()
    return rows


async def _record_of(redis_url: str, router_kernel_id: str):  # noqa: ANN202
    from support.cluster_procs import pool_store

    store = pool_store(redis_url)
    raw = await store.redis.get(store.key("rkernel", router_kernel_id))
    record = await store.session_record(json.loads(raw)["session_id"])
    host = await store.host(record.sandbox.host_id)
    return record, host.endpoint


async def _lookups(redis_url: str, seconds: float) -> float:
    from wasm_kernel.cluster.session_manager import GetSandboxBySessionRequest, SessionManager
    from support.cluster_procs import POOL_KEY
    from wasm_kernel.cluster.records import HostInfo, Sandbox, SessionRecord, now_ms, session_identity
    from wasm_kernel.cluster.session_store import SessionStore, connect

    # A lookup now verifies two signed records (the session's and its host's).
    store = SessionStore(connect(redis_url), key=POOL_KEY.encode(), prefix="bench")
    manager = SessionManager(store, "http://127.0.0.1:9", token="bench-manager-token-0123456789")
    await store.register_host(HostInfo("h", "http://127.0.0.1:1", 10, 0, beat_at=now_ms()), 3_600_000)
    ids = []
    for _ in range(1000):
        sid = str(uuid.uuid4())
        await store.bind_session_with_sandbox(SessionRecord(
            sid, Sandbox(f"sb-{uuid.uuid4().hex}", "h", sid), "t", "user:u", session_identity("t", "user:u", "n", sid),
            now_ms(), now_ms() + 3_600_000))
        ids.append(sid)
    done = 0
    deadline = time.perf_counter() + seconds

    async def caller(offset: int) -> None:
        nonlocal done
        i = offset
        while time.perf_counter() < deadline:
            await manager.get_sandbox_by_session(GetSandboxBySessionRequest(ids[i % 1000], tenant="t",
                                                                                     principal="user:u"))
            done += 1
            i += 64

    start = time.perf_counter()
    await asyncio.gather(*(caller(k) for k in range(64)))
    return done / (time.perf_counter() - start)
