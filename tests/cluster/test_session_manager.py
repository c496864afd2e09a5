"""sessionMgr (seed 004) on a real redis-server: lookups read Redis only and raise
exactly the seed's errors, each counted under the seed's metric names; 200
concurrent lookups all succeed; a sandbox manager that is down is a 503."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from prometheus_client import generate_latest

from support.redis_server import RedisServer, free_port
from wasm_kernel.cluster.errors import InvalidSessionID, RedisInternal, SessionNotFound, UpstreamUnavailable
from wasm_kernel.cluster.session_manager import GetSandboxBySessionRequest, SessionManager
from wasm_kernel.cluster.records import HostInfo, Sandbox, SessionRecord, now_ms, session_identity
from wasm_kernel.cluster.session_store import SessionStore, connect

KEY = b"test-pool-signing-key-0123456789abcdef"
USER = "user:alice"


def _manager(server: RedisServer, manager_url: str = "http://127.0.0.1:9") -> SessionManager:
    store = SessionStore(connect(server.url), key=KEY, prefix=f"t{uuid.uuid4().hex[:8]}")
    return SessionManager(store, manager_url, create_timeout_s=2.0, token="test-manager-token-0123456789")


async def _bind(manager: SessionManager, tenant: str = "course-a") -> SessionRecord:
    """A session on host h1, whose signed record says it lives at http://127.0.0.1:8901."""
    await manager.store.register_host(HostInfo("h1", "http://127.0.0.1:8901", 10, 0, beat_at=now_ms()), 60_000)
    sid = str(uuid.uuid4())
    record = SessionRecord(sid, Sandbox(f"sb-{uuid.uuid4().hex}", "h1", str(uuid.uuid4())), tenant, USER,
                           session_identity(tenant, USER, "ns", sid), now_ms(), now_ms() + 60_000)
    await manager.store.bind_session_with_sandbox(record)
    return record


def _metric(manager: SessionManager, name: str) -> float:
    value = manager.registry.get_sample_value(name)
    return 0.0 if value is None else value


def test_a_known_session_resolves_to_its_endpoint_and_is_counted(redis_server: RedisServer) -> None:
    async def go() -> None:
        manager = _manager(redis_server)
        record = await _bind(manager)
        got = await manager.get_sandbox_by_session(GetSandboxBySessionRequest(record.session_id.upper(),
                                                                              tenant="course-a", principal=USER))
        assert (got.session_id, got.endpoint, got.kernel_id) == (record.session_id, "http://127.0.0.1:8901",
                                                                 record.sandbox.kernel_id)
        assert _metric(manager, "sessionmgr_get_by_session_success_total") == 1
        assert _metric(manager, "sessionmgr_get_by_session_latency_seconds_count") == 1
    asyncio.run(go())


def test_two_hundred_concurrent_lookups_all_succeed(redis_server: RedisServer) -> None:
    async def go() -> None:
        manager = _manager(redis_server)
        records = [await _bind(manager) for _ in range(20)]
        got = await asyncio.gather(*(
            manager.get_sandbox_by_session(GetSandboxBySessionRequest(records[i % 20].session_id, tenant="course-a", principal=USER))
            for i in range(200)
        ))
        assert [g.session_id for g in got] == [records[i % 20].session_id for i in range(200)]
        assert _metric(manager, "sessionmgr_get_by_session_success_total") == 200
    asyncio.run(go())


@pytest.mark.parametrize("bad", ["x", "../etc", "1b4e28ba-2fa1-41d2-883f-0016d3cca42", "{1b4e28ba-2fa1-41d2-883f-0016d3cca427}"])
def test_a_malformed_session_id_is_invalid_before_redis_is_asked(redis_server: RedisServer, bad: str) -> None:
    manager = _manager(redis_server)
    with pytest.raises(InvalidSessionID) as err:
        asyncio.run(manager.get_sandbox_by_session(GetSandboxBySessionRequest(bad, tenant="course-a", principal=USER)))
    assert err.value.status == 400
    assert _metric(manager, "sessionmgr_get_by_session_latency_seconds_count") == 0


def test_another_tenants_session_and_an_unknown_one_are_both_not_found(redis_server: RedisServer) -> None:
    async def go() -> None:
        manager = _manager(redis_server)
        record = await _bind(manager, tenant="course-a")
        for request in (GetSandboxBySessionRequest(record.session_id, tenant="course-b", principal=USER),
                        GetSandboxBySessionRequest(str(uuid.uuid4()), tenant="course-a", principal=USER)):
            with pytest.raises(SessionNotFound) as err:
                await manager.get_sandbox_by_session(request)
            assert err.value.status == 404
        assert _metric(manager, "sessionmgr_session_not_found_total") == 2
        assert _metric(manager, "sessionmgr_get_by_session_success_total") == 0
    asyncio.run(go())


def test_redis_down_is_a_counted_internal_error(redis_server: RedisServer) -> None:
    async def go() -> None:
        manager = _manager(redis_server)
        record = await _bind(manager)
        redis_server.stop()
        try:
            with pytest.raises(RedisInternal):
                await manager.get_sandbox_by_session(GetSandboxBySessionRequest(record.session_id, tenant="course-a", principal=USER))
        finally:
            redis_server.start()
        assert _metric(manager, "sessionmgr_redis_error_total") == 1
        assert _metric(manager, "sessionmgr_get_by_session_latency_seconds_count") == 1
    asyncio.run(go())


def test_a_sandbox_manager_that_is_down_is_upstream_unavailable(redis_server: RedisServer) -> None:
    async def go() -> None:
        manager = _manager(redis_server, f"http://127.0.0.1:{free_port()}")  # nothing listens there
        with pytest.raises(UpstreamUnavailable) as err:
            await manager.get_sandbox_by_session(GetSandboxBySessionRequest(kind="wasm-python", namespace="course-a",
                                                                            tenant="course-a", principal=USER))
        assert err.value.status == 503
        assert _metric(manager, "sessionmgr_create_sandbox_error_total") == 1
        assert _metric(manager, "sessionmgr_create_sandbox_success_total") == 0
        exposed = generate_latest(manager.registry).decode()
        for name in ("sessionmgr_get_by_session_success_total", "sessionmgr_session_not_found_total",
                     "sessionmgr_redis_error_total", "sessionmgr_get_by_session_latency_seconds",
                     "sessionmgr_create_sandbox_success_total", "sessionmgr_create_sandbox_error_total",
                     "sessionmgr_create_sandbox_latency_seconds"):
            assert f"\n{name}" in exposed, name
    asyncio.run(go())
