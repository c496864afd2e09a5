"""Seed 004's Redis primitives against a real redis-server: the lock, the atomic bind
and delete, expiry (410 after it, 404 for what never was or another tenant's), a
lost host's sessions dropped in one step, and Redis down then back."""

from __future__ import annotations

import asyncio
import uuid
import pytest

from support.redis_server import RedisServer
from wasm_kernel.cluster.errors import RedisInternal, SessionGone, SessionNotFound
from wasm_kernel.cluster.records import HostInfo, Sandbox, SessionRecord, now_ms, session_identity
from wasm_kernel.cluster.session_store import SessionStore, connect


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


KEY = b"test-pool-signing-key-0123456789abcdef"


def _store(server: RedisServer, **kw: float) -> SessionStore:
    return SessionStore(connect(server.url), key=KEY, prefix=f"t{uuid.uuid4().hex[:8]}", **kw)


def _record(host: str = "h1", tenant: str = "alice", ttl_ms: int = 60_000) -> SessionRecord:
    sid = str(uuid.uuid4())
    return SessionRecord(session_id=sid, sandbox=Sandbox(id=f"sb-{uuid.uuid4().hex}", host_id=host,
                                                         kernel_id=str(uuid.uuid4())),
                         tenant=tenant, principal="user:alice", identity=session_identity(tenant, "user:alice", "ns", sid),
                         created_at=now_ms(), expires_at=now_ms() + ttl_ms)


def test_a_bound_session_is_found_by_its_tenant_and_not_by_another(redis_server: RedisServer) -> None:
    async def go() -> None:
        store, rec = _store(redis_server), _record()
        await store.bind_session_with_sandbox(rec)
        assert await store.get_sandbox_by_session_id(rec.session_id, "alice", "user:alice") == rec
        with pytest.raises(SessionNotFound) as err:
            await store.get_sandbox_by_session_id(rec.session_id, "mallory", "user:alice")
        assert type(err.value) is SessionNotFound and err.value.status == 404
        with pytest.raises(SessionNotFound):
            await store.get_sandbox_by_session_id(str(uuid.uuid4()), "alice", "user:alice")
    run(go())


def test_the_session_lock_is_held_by_one_owner_until_released_or_expired(redis_server: RedisServer) -> None:
    async def go() -> None:
        store, sid = _store(redis_server), str(uuid.uuid4())
        got = await asyncio.gather(*(store.set_session_lock_if_absent(sid, f"o{i}", 5_000) for i in range(20)))
        assert sum(got) == 1
        owner = f"o{got.index(True)}"
        await store.release_session_lock(sid, "someone-else")  # not theirs: kept
        assert not await store.set_session_lock_if_absent(sid, "late", 5_000)
        await store.release_session_lock(sid, owner)
        assert await store.set_session_lock_if_absent(sid, "late", 50)
        await asyncio.sleep(0.1)
        assert await store.set_session_lock_if_absent(sid, "after-expiry", 5_000)
    run(go())


def test_deleting_by_sandbox_id_drops_both_mappings_and_says_why_after(redis_server: RedisServer) -> None:
    async def go() -> None:
        store, rec = _store(redis_server), _record()
        await store.bind_session_with_sandbox(rec)
        assert await store.delete_session_by_sandbox_id_tx(rec.sandbox.id) == rec.session_id
        assert await store.redis.get(store.key("sandbox", rec.sandbox.id)) is None
        assert not await store.redis.sismember(store.key("hostsessions", "h1"), rec.session_id)
        with pytest.raises(SessionGone) as err:
            await store.get_sandbox_by_session_id(rec.session_id, "alice", "user:alice")
        assert err.value.status == 410 and "deleted" in err.value.message
        assert await store.delete_session_by_sandbox_id_tx(rec.sandbox.id) is None
    run(go())


def test_an_expired_session_answers_gone_and_activity_keeps_one_alive(redis_server: RedisServer) -> None:
    async def go() -> None:
        store = _store(redis_server, ttl_s=0.3)
        idle, busy = _record(ttl_ms=300), _record(ttl_ms=300)
        await store.bind_session_with_sandbox(idle)
        await store.bind_session_with_sandbox(busy)
        for _ in range(4):
            await asyncio.sleep(0.15)
            assert await store.touch(busy.session_id)
        with pytest.raises(SessionGone) as err:
            await store.get_sandbox_by_session_id(idle.session_id, "alice", "user:alice")
        assert "expired" in err.value.message and err.value.status == 410
        assert not await store.touch(idle.session_id)
        found = await store.get_sandbox_by_session_id(busy.session_id, "alice", "user:alice")
        assert found.expires_at > now_ms()
        assert await store.redis.pttl(store.key("sandbox", busy.sandbox.id)) > 0
    run(go())


def test_a_lost_hosts_sessions_go_in_one_step_and_answer_host_lost(redis_server: RedisServer) -> None:
    async def go() -> None:
        store = _store(redis_server)
        await store.register_host(HostInfo("h1", "http://127.0.0.1:1", 10, 0, beat_at=now_ms()), ttl_ms=100)
        await store.register_host(HostInfo("h2", "http://127.0.0.1:2", 10, 0, beat_at=now_ms()), ttl_ms=60_000)
        on_h1 = [_record("h1") for _ in range(5)]
        on_h2 = _record("h2")
        for rec in (*on_h1, on_h2):
            await store.bind_session_with_sandbox(rec)
        await asyncio.sleep(0.2)  # h1 stops beating
        live, lost = await store.hosts()
        assert [h.id for h in live] == ["h2"] and lost == ["h1"]
        assert await store.delete_host_tx("h1") == 5
        for rec in on_h1:
            with pytest.raises(SessionGone) as err:
                await store.get_sandbox_by_session_id(rec.session_id, "alice", "user:alice")
            assert err.value.message.startswith("the sandbox host was lost")
            assert await store.redis.get(store.key("sandbox", rec.sandbox.id)) is None
        assert await store.get_sandbox_by_session_id(on_h2.session_id, "alice", "user:alice") == on_h2
        assert await store.hosts() == (live, [])
    run(go())


def test_redis_down_fails_fast_and_the_same_store_recovers_when_it_is_back(redis_server: RedisServer) -> None:
    async def go() -> None:
        store, rec = _store(redis_server), _record()
        await store.bind_session_with_sandbox(rec)
        redis_server.stop()
        try:
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(RedisInternal) as err:
                await store.get_sandbox_by_session_id(rec.session_id, "alice", "user:alice")
            assert loop.time() - start < 2.0 and err.value.status == 500
            assert "Redis" in err.value.message
        finally:
            redis_server.start()
        # No persistence: the restarted server is empty, and nothing recreated the session.
        with pytest.raises(SessionNotFound):
            await store.get_sandbox_by_session_id(rec.session_id, "alice", "user:alice")
        await store.bind_session_with_sandbox(rec)
        assert await store.get_sandbox_by_session_id(rec.session_id, "alice", "user:alice") == rec
    run(go())
