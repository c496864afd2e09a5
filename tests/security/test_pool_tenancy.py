"""The pool as an attacker inside it sees it: two tenants with two users each, all on
the same notebook path, against real processes (redis-server with AUTH, a sandbox
host, the sandbox manager, the router).

- Four callers, one path: four sessions, four kernels, four host-side folders; no
  caller reaches another's kernel, variables or files.
- Users share only in a sharing group the operator names.
- Closing a kernel frees its slot on the host; "no room" is its own answer.
- A host serves nothing beyond kernels and sessions; its session paths are the pool's.
- Tokens that are not ASCII, bodies nested deep: a 401 and a 400, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.cluster_procs import pool_store, running_pool

from support.security_pool import (
    USER_TOKENS, HostProcess, RouterChannels, RouterProcess, host_kernels, host_session_paths,
    start_kernel, wait_for_hosts, wait_until,
)

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]  # the pool's processes on a real Redis

PEOPLE = [("course-a", "alice"), ("course-a", "bob"), ("course-b", "alice"), ("course-b", "bob")]
NOTEBOOK = "/home/jovyan/hw1.ipynb"  # the same path for everyone


@pytest.fixture(scope="module")
def pool(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:  # noqa: ANN001
    with running_pool(redis_server, tmp_path_factory.mktemp("tenancy"),
                      hosts={"host": {"host_id": "tenancy-h1", "capacity": 6}},
                      routers={"router": {}, "shared": {"extra": ("--share-group", "course-a/team=alice,bob")}}) as pool:
        yield pool  # a test that replaces pool["host"] has its replacement stopped


def test_two_tenants_and_two_users_on_one_path_never_share_a_kernel_or_a_file(pool: dict) -> None:
    router, host = pool["router"], pool["host"]
    kernels = {who: start_kernel(router, *who, NOTEBOOK) for who in PEOPLE}
    try:
        paths = host_session_paths(host)
        host_ids = {}
        for who, kernel_id in kernels.items():
            with RouterChannels(router, kernel_id, *who) as ch:
                info = ch.kernel_info()
                assert info["implementation"] == "wasm_kernel"
                ch.run_ok(f"secret = {who!r}\nopen('mine.txt', 'w').write({who[1]!r})")
                host_ids[who] = ch.run_ok("import os; sorted(os.listdir('.'))").result()
        # Four host kernels, each at a path of its own, under its own tenant's folder.
        assert len(paths) >= 4
        mapped = [p for p in paths.values() if p.startswith("pool/")]
        assert len(set(mapped)) == len(mapped) >= 4
        assert {p.split("/")[1] for p in mapped} >= {"course-a", "course-b"}
        for who, kernel_id in kernels.items():
            with RouterChannels(router, kernel_id, *who) as ch:
                assert ch.run_ok("secret").result() == repr(who)
                assert ch.run_ok("open('mine.txt').read()").result() == repr(who[1])
                # Only its own file, nothing of the other three.
                assert ch.run_ok("sorted(f for f in os.listdir('.') if f.endswith('.txt'))").result() == \
                    "['mine.txt']"
        # Another caller's kernel id is not there for anyone else: REST and websocket.
        for who, kernel_id in kernels.items():
            for other in PEOPLE:
                if other == who:
                    continue
                status, _ = router.call("GET", f"/api/kernels/{kernel_id}", tenant=other[0], user=other[1])
                assert status == 404, (who, other)
                listed = router.call("GET", "/api/kernels", tenant=other[0], user=other[1])[1]
                assert kernel_id not in [k["id"] for k in listed]  # type: ignore[union-attr]
                with pytest.raises(Exception):
                    RouterChannels(router, kernel_id, *other).kernel_info(timeout=5)
    finally:
        for who, kernel_id in kernels.items():
            router.call("DELETE", f"/api/kernels/{kernel_id}", tenant=who[0], user=who[1])


def test_a_sharing_group_is_the_only_way_two_users_share(pool: dict) -> None:
    shared = pool["shared"]
    alice = start_kernel(shared, "course-a", "alice", "/srv/team/project.ipynb")
    bob = start_kernel(shared, "course-a", "bob", "/srv/team/project.ipynb")
    other_tenant = start_kernel(shared, "course-b", "alice", "/srv/team/project.ipynb")
    try:
        with RouterChannels(shared, alice, "course-a", "alice") as ch:
            ch.run_ok("open('team.txt', 'w').write('together')")
        with RouterChannels(shared, bob, "course-a", "bob") as ch:
            assert ch.run_ok("open('team.txt').read()").result() == "'together'"
        with RouterChannels(shared, other_tenant, "course-b", "alice") as ch:
            assert ch.run_ok("import os; os.path.exists('team.txt')").result() == "False"
    finally:
        for kernel_id, who in ((alice, ("course-a", "alice")), (bob, ("course-a", "bob")),
                               (other_tenant, ("course-b", "alice"))):
            shared.call("DELETE", f"/api/kernels/{kernel_id}", tenant=who[0], user=who[1])


def test_closing_a_kernel_shuts_its_host_kernel_down_and_frees_its_slot(pool: dict) -> None:
    router, host = pool["router"], pool["host"]
    before = host_kernels(host)
    kernel_id = start_kernel(router, "course-a", "alice", "/tmp/closing.ipynb")
    started = wait_until(lambda: host_kernels(host) - before, what="a host kernel")
    assert router.call("DELETE", f"/api/kernels/{kernel_id}")[0] == 204
    wait_until(lambda: not (host_kernels(host) & started), what="the host kernel to stop")
    assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 404


def test_a_full_pool_answers_no_capacity_not_unavailable(pool: dict, tmp_path: Path) -> None:
    manager = pool["manager"]
    router = pool["router"]
    pool["host"].stop()
    wait_for_hosts(manager, 0)
    small = HostProcess(pool["redis"].url, tmp_path / "small", "tenancy-small", heartbeat=0.3, capacity=1)
    try:
        wait_for_hosts(manager, 1)
        first = start_kernel(router, "course-b", "bob", "/tmp/full-1.ipynb")
        status, answer = router.call("POST", "/api/kernels", {"env": {"JPY_SESSION_NAME": "/tmp/full-2.ipynb"}},
                                     tenant="course-b", user="bob")
        assert status == 503 and answer["code"] == "no_capacity", answer  # type: ignore[index]
        # Closing frees: the same host takes the next notebook.
        assert router.call("DELETE", f"/api/kernels/{first}", tenant="course-b", user="bob")[0] == 204
        wait_until(lambda: manager.call("GET", "/healthz", token=None)[1].get("live_hosts") == 1)
        second = wait_until(lambda: _try_start(router, "/tmp/full-2.ipynb"), what="a slot after closing")
        router.call("DELETE", f"/api/kernels/{second}", tenant="course-b", user="bob")
        wait_until(lambda: not host_kernels(small), what="the host to be empty")
        wait_until(lambda: _reported_load(pool["redis"].url) == [0], what="the host's record to say so")
        # Creates racing for the last slot: the host itself counts, so exactly one wins.
        with ThreadPoolExecutor(5) as threads:
            answers = list(threads.map(lambda i: manager.call("POST", "/v1/sandboxes", {
                "kind": "wasm-python", "namespace": "race", "tenant": "course-b", "principal": "user:bob",
                "idempotency_key": f"race-{i}"}), range(5)))
        assert sorted(status for status, _ in answers) == [201, 503, 503, 503, 503], answers
        assert {a["code"] for status, a in answers if status == 503} == {"no_capacity"}  # type: ignore[index]
        assert len(host_kernels(small)) == 1
    finally:
        small.stop()
        wait_for_hosts(manager, 0)
        pool["host"] = HostProcess(pool["redis"].url, pool["base"] / "host", "tenancy-h1", heartbeat=0.3, capacity=6)
        wait_for_hosts(manager, 1)
    # A manager that does not answer is another answer.
    dead = RouterProcess(pool["redis"].url, "http://127.0.0.1:9", tmp_path / "dead-router")
    try:
        status, answer = dead.call("POST", "/api/kernels", {"env": {"JPY_SESSION_NAME": "/tmp/x.ipynb"}})
        assert status == 503 and answer["code"] == "upstream_unavailable", answer  # type: ignore[index]
        assert "127.0.0.1" not in answer["message"]  # type: ignore[index]
    finally:
        dead.stop()


def _reported_load(redis_url: str) -> list[int]:
    async def read() -> list[int]:
        live, _lost = await pool_store(redis_url).hosts()
        return [h.load for h in live]
    return asyncio.run(read())


def _try_start(router: RouterProcess, notebook: str) -> str | None:
    status, model = router.call("POST", "/api/kernels", {"env": {"JPY_SESSION_NAME": notebook}},
                                tenant="course-b", user="bob")
    return str(model["id"]) if status == 201 else None  # type: ignore[index]


def test_a_host_serves_kernels_and_sessions_and_nothing_else(pool: dict) -> None:
    host = pool["host"]
    for path in ("/api/terminals", "/api/contents", "/api/contents/pool", "/files/pool", "/lab", "/tree",
                 "/notebooks/x.ipynb", "/api/nbconvert", "/api/config/x", "/edit/x", "/view/x", "/api/shutdown",
                 "/api/events/subscribe", "/lab/api/settings", "/api/me"):
        with pytest.raises(urllib.error.HTTPError) as err:
            answer = host.request("GET", path)
            pytest.fail(f"{path} answered {str(answer)[:200]}")
        assert err.value.code in (404, 405), path
    assert isinstance(host.request("GET", "/api/kernels"), list)
    # A session's path is the pool's shape, or refused (Jupyter's sessions handler
    # answers our refusal as a 500 with its message): a path of the caller's choosing
    # could make a kernel's notebook folder one that holds other sessions.
    before = host_kernels(host)
    for path in ("../../etc/passwd", "pool/course-a/x.ipynb", "pool/../notebook.ipynb", "elsewhere.ipynb",
                 "pool/course-a/" + "0" * 64 + "/../notebook.ipynb"):
        with pytest.raises(urllib.error.HTTPError) as err:
            host.request("POST", "/api/sessions", {"path": path, "type": "notebook", "name": "x",
                                                   "kernel": {"name": "wasm-python"}})
        assert err.value.code in (400, 500), path
        assert "pool/TENANT/IDENTITY/notebook.ipynb" in err.value.read().decode(), path
    assert host_kernels(host) == before
    # Only the sandboxed kernel.
    with pytest.raises(urllib.error.HTTPError):
        host.request("POST", "/api/kernels", {"name": "python3"})


def test_a_link_planted_in_the_hosts_root_is_never_followed_for_a_session_folder(pool: dict, tmp_path: Path) -> None:
    host = pool["host"]
    served = host.root / "notebooks" / "pool"
    served.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (served / "evil-tenant").symlink_to(outside)
    with pytest.raises(urllib.error.HTTPError) as err:
        host.request("POST", "/api/sessions", {"path": "pool/evil-tenant/" + "a" * 64 + "/notebook.ipynb",
                                               "type": "notebook", "name": "notebook.ipynb",
                                               "kernel": {"name": "wasm-python"}})
    assert err.value.code in (400, 500)
    assert "symbolic link" in err.value.read().decode()
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("service", ["router", "manager"])
def test_a_non_ascii_token_is_401_and_a_deeply_nested_body_is_400(pool: dict, service: str) -> None:
    proc = pool[service]
    path = "/api/kernels" if service == "router" else "/v1/sandboxes"
    for header in ("token café-ünïcode-token-1234", "token \u2603" * 3, "Bearer \udcff"):
        req = urllib.request.Request(f"{proc.url}{path}", data=b"{}", method="POST",
                                     headers={"Authorization": header.encode("utf-8", "surrogateescape")
                                              .decode("latin-1")})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 401, header
    deep = ("[" * 5000 + "]" * 5000).encode()  # 10 KB: past the parser's recursion limit
    token = USER_TOKENS[("course-a", "alice")] if service == "router" else "test-manager-token-0123456789"
    req = urllib.request.Request(f"{proc.url}{path}", data=deep, method="POST",
                                 headers={"Authorization": f"token {token}"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 400
    body = json.loads(err.value.read())
    assert body["code"] == "bad_request" and "nested" in body["message"]
