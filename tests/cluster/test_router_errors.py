"""The router's answers when a part of the pool fails, each a real process: an
expired session is 410, a sandbox manager that is down is 503, Redis down is a
fast 500 and recovers by itself, and /metrics counts what happened."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from support.cluster_procs import STORE_TIMEOUT_S, RouterProcess, running_pool, sandbox_of_kernel
from support.redis_server import RedisServer, free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pool(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    with running_pool(redis_server, tmp_path_factory.mktemp("errors"), hosts={"host": {"host_id": "e1"}},
                      manager={"session_ttl": 2.0}, routers={"router": {"session_ttl": 2.0}}, wait=False) as pool:
        yield pool


def _start(router: RouterProcess, notebook: str) -> str:
    status, answer = router.call("POST", "/api/kernels", {"name": "wasm-python", "env": {"JPY_SESSION_NAME": notebook}})
    assert status == 201, answer
    return answer["id"]  # type: ignore[index]


def _metric(router: RouterProcess, name: str) -> float:
    text = router.call("GET", "/metrics", tenant=None)[1]
    for line in str(text).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} is not in /metrics")


def test_a_session_without_activity_expires_and_answers_410(pool: dict) -> None:
    router = pool["router"]
    kernel_id = _start(router, "/course/idle.ipynb")
    assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 200
    time.sleep(2.5)  # the session TTL is 2 s here
    status, answer = router.call("GET", f"/api/kernels/{kernel_id}")
    assert status == 410 and answer["code"] == "session_gone", answer  # type: ignore[index]
    assert "expired" in answer["message"] and "restart the kernel" in answer["message"]  # type: ignore[index]
    # A restart gives the notebook a new sandbox under the same kernel id.
    status, answer = router.call("POST", f"/api/kernels/{kernel_id}/restart")
    assert status == 200, answer
    assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 200


def test_activity_keeps_a_session_alive_past_its_ttl(pool: dict) -> None:
    router = pool["router"]
    kernel_id = _start(router, "/course/busy.ipynb")
    for _ in range(6):  # 3 s of use against a 2 s TTL
        time.sleep(0.5)
        assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 200


def test_a_sandbox_manager_that_is_down_is_503(pool: dict) -> None:
    orphan = RouterProcess(pool["redis"].url, f"http://127.0.0.1:{free_port()}", pool["base"] / "orphan-router")
    try:
        status, answer = orphan.call("POST", "/api/kernels", {"name": "wasm-python", "env": {"JPY_SESSION_NAME": "/a"}})
        assert status == 503 and answer["code"] == "upstream_unavailable", answer  # type: ignore[index]
        assert "sandbox manager is unavailable" in answer["message"]  # type: ignore[index]
    finally:
        orphan.stop()


def test_redis_down_is_a_fast_500_and_the_router_recovers_by_itself(pool: dict) -> None:
    router, redis = pool["router"], pool["redis"]
    kernel_id = _start(router, "/course/redis.ipynb")
    redis.stop()
    try:
        start = time.monotonic()
        status, answer = router.call("GET", f"/api/kernels/{kernel_id}")
        assert status == 500 and answer["code"] == "redis_internal", answer  # type: ignore[index]
        # Within the store's fail-fast timeout (no retries, no backoff), not a wait for Redis.
        assert time.monotonic() - start < 3 * STORE_TIMEOUT_S
        assert router.call("GET", "/healthz", tenant=None)[0] == 503
    finally:
        redis.start()
    # Nothing is recreated silently: the mapping went with Redis, and the router says so.
    assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 404
    deadline = time.monotonic() + 10
    while router.call("GET", "/healthz", tenant=None)[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    deadline = time.monotonic() + 10  # the host beats into the new Redis by itself
    while True:
        status, answer = router.call("POST", "/api/kernels", {"name": "wasm-python",
                                                              "env": {"JPY_SESSION_NAME": "/course/after.ipynb"}})
        if status == 201:
            break
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
    assert _metric(router, "router_redis_error_total") >= 1
    assert _metric(router, "sessionmgr_create_sandbox_success_total") >= 1
    assert _metric(router, "sessionmgr_session_not_found_total") >= 1
    assert _metric(router, "sessionmgr_get_by_session_success_total") >= 1


def test_metrics_count_exactly_what_a_run_did(pool: dict) -> None:
    redis = pool["redis"]
    router = RouterProcess(redis.url, pool["manager"].url, pool["base"] / "counted-router")
    try:
        first, second = _start(router, "/course/m1.ipynb"), _start(router, "/course/m2.ipynb")
        for _ in range(3):
            assert router.call("GET", f"/api/kernels/{first}")[0] == 200

        def sandbox_of(kernel_id: str) -> str:
            return sandbox_of_kernel(redis.url, kernel_id)[0]

        assert pool["manager"].call("DELETE", f"/v1/sandboxes/{sandbox_of(second)}")[0] == 204
        assert router.call("GET", f"/api/kernels/{second}")[0] == 410
        redis.stop()
        try:
            assert router.call("GET", f"/api/kernels/{first}")[0] == 500
        finally:
            redis.start()
        expected = {
            "sessionmgr_create_sandbox_success_total": 2, "sessionmgr_create_sandbox_error_total": 0,
            "sessionmgr_create_sandbox_latency_seconds_count": 2, "sessionmgr_get_by_session_success_total": 3,
            "sessionmgr_session_not_found_total": 1, "sessionmgr_get_by_session_latency_seconds_count": 4,
            "sessionmgr_redis_error_total": 0, "router_redis_error_total": 1,
        }
        assert {name: _metric(router, name) for name in expected} == expected
    finally:
        router.stop()
