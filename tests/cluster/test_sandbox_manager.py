"""sandboxMgr (seed 004) as a real process, over a real redis-server and two real
sandbox hosts: creates land on a live host and are mapped in Redis, one
idempotency key makes one sandbox under 50 concurrent creates, deletes stop the
kernel, a host killed mid-session has its sessions answer 410, and Redis down
then back fails fast and recovers with no restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.cluster_procs import STORE_TIMEOUT_S, ManagerProcess, pool_store, running_pool
from support.redis_server import RedisServer
from wasm_kernel.cluster.errors import SessionGone

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pool(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    with running_pool(redis_server, tmp_path_factory.mktemp("pool"), hosts={"h1": {}, "h2": {}}, routers={}) as pool:
        yield pool


def _lookup(server: RedisServer, session_id: str, tenant: str):  # noqa: ANN202
    async def read():  # noqa: ANN202
        return await pool_store(server.url).get_sandbox_by_session_id(session_id, tenant, "user:alice")
    return asyncio.run(read())


def _create(manager: ManagerProcess, **fields: str) -> tuple[int, dict]:
    body = {"kind": "wasm-python", "namespace": "course-a", "tenant": "course-a", "principal": "user:alice", **fields}
    status, answer = manager.call("POST", "/v1/sandboxes", body)
    return status, answer  # type: ignore[return-value]


def test_a_create_starts_a_kernel_on_a_live_host_and_maps_it(pool: dict) -> None:
    manager, hosts = pool["manager"], pool["hosts"]
    status, answer = _create(manager, name="lesson-1")
    assert status == 201, answer
    sandbox = answer["sandbox"]
    host = next(h for h in hosts if h.url == sandbox["endpoint"])
    assert sandbox["kernel_id"] in [k["id"] for k in host.request("GET", "/api/kernels")]  # type: ignore[union-attr]
    record = _lookup(pool["redis"], answer["session_id"], "course-a")
    assert (record.sandbox.id, record.sandbox.kernel_id, record.sandbox.host_id) == (sandbox["id"],
                                                                                     sandbox["kernel_id"], host.host_id)


def test_fifty_concurrent_creates_with_one_idempotency_key_make_one_sandbox(pool: dict) -> None:
    manager, hosts = pool["manager"], pool["hosts"]
    before = sum(len(h.request("GET", "/api/kernels")) for h in hosts)  # type: ignore[arg-type]
    with ThreadPoolExecutor(50) as threads:
        answers = list(threads.map(lambda _: _create(manager, name="lesson-2", idempotency_key="course-a/nb-2"),
                                   range(50)))
    assert {status for status, _ in answers} == {201}, answers[:3]
    assert len({a["session_id"] for _, a in answers}) == 1
    assert len({a["sandbox"]["id"] for _, a in answers}) == 1
    assert sum(len(h.request("GET", "/api/kernels")) for h in hosts) == before + 1  # type: ignore[arg-type]
    status, other = _create(manager, name="lesson-2", idempotency_key="course-a/nb-3")
    assert status == 201 and other["session_id"] != answers[0][1]["session_id"]


@pytest.mark.parametrize("body, message", [
    ({"kind": "python3", "namespace": "a"}, "kind must be one of"),
    ({"kind": "wasm-python"}, "namespace is required"),
    ({"kind": "wasm-python", "namespace": "a", "tenant": "../x"}, "tenant is required"),
    ([1, 2], "JSON object"),
])
def test_bad_create_requests_are_400_with_one_line(pool: dict, body: object, message: str) -> None:
    status, answer = pool["manager"].call("POST", "/v1/sandboxes", body)
    assert status == 400 and answer["code"] == "bad_request" and message in answer["message"]  # type: ignore[index]


def test_the_manager_wants_its_token(pool: dict) -> None:
    for token in (None, "wrong"):
        status, answer = pool["manager"].call("POST", "/v1/sandboxes", {"kind": "wasm-python", "namespace": "a"},
                                              token=token)
        assert status == 401 and answer["code"] == "unauthorized"  # type: ignore[index]


def test_a_delete_stops_the_kernel_and_the_session_answers_gone(pool: dict) -> None:
    manager, hosts = pool["manager"], pool["hosts"]
    status, answer = _create(manager, name="lesson-4")
    assert status == 201
    host = next(h for h in hosts if h.url == answer["sandbox"]["endpoint"])
    assert manager.call("DELETE", f"/v1/sandboxes/{answer['sandbox']['id']}")[0] == 204
    assert answer["sandbox"]["kernel_id"] not in [k["id"] for k in host.request("GET", "/api/kernels")]  # type: ignore[union-attr]
    with pytest.raises(SessionGone):
        _lookup(pool["redis"], answer["session_id"], "course-a")
    assert manager.call("DELETE", f"/v1/sandboxes/{answer['sandbox']['id']}")[0] == 404


def test_a_killed_host_loses_its_sessions_and_new_creates_go_to_the_live_one(pool: dict) -> None:
    manager, hosts = pool["manager"], pool["hosts"]
    made = [_create(manager, name=f"lesson-5-{i}")[1] for i in range(4)]
    victim = next(h for h in hosts if any(m["sandbox"]["endpoint"] == h.url for m in made))
    survivor = next(h for h in hosts if h is not victim)
    victim.kill9()
    deadline = time.monotonic() + 10
    while manager.call("GET", "/healthz", token=None)[1]["live_hosts"] != 1:  # type: ignore[index]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(0.5)  # a reap or two
    for m in made:
        if m["sandbox"]["endpoint"] == victim.url:
            with pytest.raises(SessionGone) as err:
                _lookup(pool["redis"], m["session_id"], "course-a")
            assert err.value.message.startswith("the sandbox host was lost")
        else:
            assert _lookup(pool["redis"], m["session_id"], "course-a").sandbox.host_id == survivor.host_id
    status, answer = _create(manager, name="lesson-5-after")
    assert status == 201 and answer["sandbox"]["endpoint"] == survivor.url
    metrics = manager.call("GET", "/metrics", token=None)[1]
    assert "sandboxmgr_hosts_lost_total 1.0" in metrics  # type: ignore[operator]


def test_redis_down_fails_fast_then_recovers_without_a_restart(pool: dict) -> None:
    manager, redis = pool["manager"], pool["redis"]
    redis.stop()
    try:
        start = time.monotonic()
        status, answer = _create(manager, name="lesson-6")
        assert status == 500 and answer["code"] == "redis_internal", answer
        assert time.monotonic() - start < 3 * STORE_TIMEOUT_S  # the store's fail-fast timeout, no retries
        assert manager.call("GET", "/healthz", token=None)[0] == 503
    finally:
        redis.start()
    # The hosts heartbeat into the restarted (empty) Redis by themselves.
    deadline = time.monotonic() + 10
    while manager.call("GET", "/healthz", token=None)[1].get("live_hosts", 0) < 1:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    status, answer = _create(manager, name="lesson-6")
    assert status == 201, answer
