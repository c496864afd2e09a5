"""The router as a Jupyter gateway, end to end on real processes: a Jupyter Server
with --GatewayClient.url runs a notebook on the pool over its usual REST and
websocket API; the notebook reopened finds its files; ids are checked; another
tenant's kernel is not there; a lost host answers 410 with one clear line, and a
restart lands on the live host."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from support.cluster_procs import (
    POOL_KEY, ROUTER_ENV, ROUTER_TOKEN_ENTRIES, ROUTER_TOKENS, USER_TOKENS, ConfiguredRouterProcess, HostProcess,
    RouterProcess, ServiceProcess, router_config, sandbox_of_kernel,
)
from support.routed_pool import open_notebook, start_pool, stop_pool
from support.paths import SUPPORT
from support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(300)

LESSON = "course/lesson.ipynb"


@pytest.fixture(scope="module")
def pool(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    started = start_pool(redis_server.url, tmp_path_factory.mktemp("routed"))
    started["server"].create_notebook(LESSON)
    try:
        yield started
    finally:
        stop_pool(started)


def test_a_notebook_runs_through_the_gateway_and_finds_its_files_when_reopened(pool: dict) -> None:
    server = pool["server"]
    model, ch = open_notebook(server, LESSON)
    try:
        assert ch.run_ok("open('from_gateway.txt', 'w').write('hi')").result() == "2"
        assert ch.run_ok("print(6 * 7)").stream() == "42\n"
        assert ch.run_ok("1 + 1").result() == "2"
    finally:
        ch.close()
        server.delete_session(model["id"])
    model, ch = open_notebook(server, LESSON)
    try:
        assert ch.run_ok("open('from_gateway.txt').read()").result() == "'hi'"
    finally:
        ch.close()
        server.delete_session(model["id"])


def test_the_gateway_servers_kernel_list_answers_with_each_kernels_state_from_its_host(pool: dict) -> None:
    """JupyterLab's running-kernels list (and a gateway server's culler) read GET
    /api/kernels, which the gateway client rebuilds from the router's list: a null
    last_activity there made it answer 500."""
    server, router = pool["server"], pool["router"]
    model, ch = open_notebook(server, "course/listed.ipynb")
    try:
        ch.run_ok("1 + 1")
        listed = server.get("/api/kernels")
        mine = next(k for k in listed if k["id"] == model["kernel"]["id"])
        assert mine["execution_state"] == "idle", mine
        status, from_router = router.call("GET", "/api/kernels")
        assert status == 200, from_router
        for kernel in from_router:  # type: ignore[union-attr]
            datetime.strptime(kernel["last_activity"], "%Y-%m-%dT%H:%M:%S.%fZ")
    finally:
        ch.close()
        server.delete_session(model["id"])


def test_ids_tokens_and_tenants_are_checked(pool: dict) -> None:
    router = pool["router"]
    status, answer = router.call("POST", "/api/kernels", {"name": "wasm-python", "env": {"JPY_SESSION_NAME": "/x.ipynb"}})
    assert status == 201, answer
    kernel_id = answer["id"]  # type: ignore[index]
    assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 200
    status, answer = router.call("GET", f"/api/kernels/{kernel_id}", tenant="course-b")
    assert status == 404 and answer["code"] == "session_not_found"  # type: ignore[index]
    assert router.call("GET", f"/api/kernels/{uuid.uuid4()}")[0] == 404
    status, answer = router.call("GET", "/api/kernels/not-a-kernel-id")
    assert status == 400 and answer["code"] == "invalid_session_id", answer  # type: ignore[index]
    assert router.call("GET", "/api/kernels", tenant=None)[0] == 401
    assert kernel_id not in [k["id"] for k in router.call("GET", "/api/kernels", tenant="course-b")[1]]  # type: ignore[union-attr]
    assert router.call("POST", "/api/kernels", {"name": "python3"})[0] == 400


def test_a_router_configured_by_a_config_file_alone_serves_the_pool(pool: dict, redis_server: RedisServer,
                                                                     tmp_path: Path) -> None:
    """`wasm-kernel router --config FILE`, no other flag, no WASM_KERNEL_* variable: its
    port, Redis, sandbox manager, users and every secret come from the file (RouterApp's
    traits), and a notebook's kernel starts, answers and closes through it."""
    router = ConfiguredRouterProcess(redis_server.url, pool["manager"].url, tmp_path / "configured")
    try:
        assert router.call("GET", "/healthz", tenant=None)[0] == 200  # its Redis
        assert router.call("GET", "/api/kernelspecs", tenant=None)[0] == 401
        status, answer = router.call("POST", "/api/kernels", {"name": "wasm-python",
                                                              "env": {"JPY_SESSION_NAME": "/configured.ipynb"}})
        assert status == 201, answer  # the manager's URL and token, the pool key
        kernel_id = answer["id"]  # type: ignore[index]
        status, model = router.call("GET", f"/api/kernels/{kernel_id}")
        assert status == 200 and model["id"] == kernel_id, model  # type: ignore[index]  # the hosts' token
        assert router.call("GET", f"/api/kernels/{kernel_id}", tenant="course-b")[0] == 404  # its users
        assert router.call("DELETE", f"/api/kernels/{kernel_id}")[0] == 204
    finally:
        router.stop()


class _EnvRouterProcess(RouterProcess):
    """The router as deployments before its config file ran it: everything it holds, its
    Redis URL included, from WASM_KERNEL_* variables; only where to listen and the
    manager as flags."""

    def __init__(self, redis_url: str, manager_url: str, folder: Path) -> None:
        ServiceProcess.__init__(self, ["--sandbox-manager", manager_url], folder,
                                {**ROUTER_ENV, "WASM_KERNEL_REDIS_URL": redis_url}, inherit_pool_env=False)


def test_the_environment_variables_still_configure_the_router(pool: dict, redis_server: RedisServer,
                                                              tmp_path: Path) -> None:
    router = _EnvRouterProcess(redis_server.url, pool["manager"].url, tmp_path / "from-env")
    try:
        assert router.call("GET", "/healthz", tenant=None)[0] == 200  # $WASM_KERNEL_REDIS_URL
        for (tenant, user) in USER_TOKENS:  # $WASM_KERNEL_ROUTER_TOKENS, every entry
            assert router.call("GET", "/api/kernelspecs", tenant=tenant, user=user)[0] == 200
        assert router.call("GET", "/api/kernelspecs", tenant=None)[0] == 401
    finally:
        router.stop()


def test_a_flag_beats_the_config_file_which_beats_the_environment(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from wasm_kernel.cluster.router_app import RouterApp

    bob = next(e for e in ROUTER_TOKEN_ENTRIES if e.startswith("course-a/bob:"))
    alice = next(e for e in ROUTER_TOKEN_ENTRIES if e.startswith("course-a/alice:"))
    monkeypatch.setenv("WASM_KERNEL_ROUTER_TOKENS", bob)
    monkeypatch.setenv("WASM_KERNEL_REDIS_URL", "redis://:from-env@127.0.0.1:1/0")
    monkeypatch.setenv("WASM_KERNEL_POOL_KEY", POOL_KEY)
    monkeypatch.setenv("WASM_KERNEL_HOST_TOKEN", "host-token-0123456789")
    monkeypatch.setenv("WASM_KERNEL_MANAGER_TOKEN", "manager-token-0123456789")
    config = router_config(tmp_path / "router_config.py", 1111, redis_url="redis://:from-file@127.0.0.1:1/0",
                           tokens=[alice], sandbox_manager_url="http://127.0.0.1:9", session_ttl=60.0)
    app = RouterApp()
    app.load_settings({"port": 2222, "share_groups": ["course-a/team=alice,bob"]}, str(config))
    assert (app.port, app.redis_url, app.tokens, app.session_ttl) == (2222, "redis://:from-file@127.0.0.1:1/0",
                                                                       [alice], 60.0)
    assert app.share_groups == ["course-a/team=alice,bob"] and app.pool_key == POOL_KEY and app.ip == "127.0.0.1"
    # The file's users replace the environment's: bob's token is not one of them.
    app.prepare()
    assert app.identities.caller(USER_TOKENS[("course-a", "alice")]) is not None
    assert app.identities.caller(USER_TOKENS[("course-a", "bob")]) is None
    # The same settings as JSON, and nothing set: the environment's, then the built-in defaults.
    (tmp_path / "router_config.json").write_text('{"RouterApp": {"tokens": ["%s"], "port": 3333}}' % alice)
    from_json = RouterApp()
    from_json.load_settings({}, str(tmp_path / "router_config.json"))
    assert (from_json.port, from_json.tokens, from_json.redis_url) == (3333, [alice], "redis://:from-env@127.0.0.1:1/0")
    plain = RouterApp()
    plain.load_settings({}, None)
    assert (plain.port, plain.tokens, plain.session_ttl) == (8888, [bob], 3600.0)


def test_a_lost_host_answers_410_and_a_restart_lands_on_the_live_one(pool: dict) -> None:
    router, hosts = pool["router"], pool["hosts"]
    status, answer = router.call("POST", "/api/kernels", {"name": "wasm-python",
                                                          "env": {"JPY_SESSION_NAME": "/course/loss.ipynb"}})
    assert status == 201, answer
    kernel_id = answer["id"]  # type: ignore[index]
    victim = next(h for h in hosts if _holds(router, kernel_id, h))
    survivor = next(h for h in hosts if h is not victim)
    victim.kill9()
    deadline = time.monotonic() + 15
    lost = "the sandbox host was lost; restart the kernel to get a new sandbox"
    while True:  # 503 while the host's heartbeat has not lapsed yet, 410 once the manager dropped it
        status, answer = router.call("GET", f"/api/kernels/{kernel_id}")
        assert status in (200, 503, 410), (status, answer)
        if status != 200:
            assert answer["message"] == lost  # type: ignore[index]
        if status == 410:
            break
        assert time.monotonic() < deadline, (status, answer)
        time.sleep(0.2)
    status, answer = router.call("POST", f"/api/kernels/{kernel_id}/restart")
    assert status == 200 and answer["id"] == kernel_id, answer  # type: ignore[index]
    assert router.call("GET", f"/api/kernels/{kernel_id}")[0] == 200
    assert _holds(router, kernel_id, survivor)


def _holds(router: RouterProcess, kernel_id: str, host: HostProcess) -> bool:
    """Whether `host` runs the kernel the router's `kernel_id` is mapped to (read from Redis)."""
    try:
        return sandbox_of_kernel(router_redis[0], kernel_id)[1] == host.url
    except Exception:
        return False


router_redis: list[str] = []


@pytest.fixture(autouse=True)
def _remember_redis(redis_server: RedisServer) -> None:
    router_redis[:] = [redis_server.url]


def test_in_jupyter_a_lost_host_is_one_clear_error_and_a_restart_runs_on_the_live_host(pool: dict) -> None:
    server, router, hosts = pool["server"], pool["router"], pool["hosts"]
    live = [h for h in hosts if h.proc.poll() is None]
    if len(live) < 2:  # the previous test killed one: start its replacement
        dead = next(h for h in hosts if h.proc.poll() is not None)
        replacement = HostProcess(router_redis[0], dead.root.parent / f"{dead.host_id}-again", f"{dead.host_id}b",
                                  heartbeat=0.3)
        hosts.append(replacement)
        live.append(replacement)
    model, ch = open_notebook(server, "course/loss-in-lab.ipynb")
    kernel_id = model["kernel"]["id"]
    try:
        assert ch.run_ok("x = 41").status == "ok"
        # The server's kernel id is the gateway's: the router's own kernel id.
        victim = next(h for h in live if _holds(router, kernel_id, h))
        victim.kill9()
        status = None
        deadline = time.monotonic() + 20
        while status != 410:
            assert time.monotonic() < deadline
            time.sleep(0.3)
            status = router.call("GET", f"/api/kernels/{kernel_id}")[0]
        server.post(f"/api/kernels/{kernel_id}/restart")
    finally:
        ch.close()
    with server.connect(kernel_id) as again:
        again.kernel_info()
        ran = again.run_ok("x = 1\nx + 1")
        assert ran.result() == "2"
    server.delete_session(model["id"])


def test_with_a_shared_root_a_notebook_keeps_its_files_when_its_host_is_lost(
        redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    shared = start_pool(redis_server.url, tmp_path_factory.mktemp("shared"), shared_root=True)
    server, router, hosts = shared["server"], shared["router"], shared["hosts"]
    try:
        model, ch = open_notebook(server, "course/shared.ipynb")
        kernel_id = model["kernel"]["id"]
        assert ch.run_ok("open('kept.txt', 'w').write('still here')").result() == "10"
        victim = next(h for h in hosts if _holds(router, kernel_id, h))
        survivor = next(h for h in hosts if h is not victim)
        victim.kill9()
        deadline = time.monotonic() + 20
        while router.call("GET", f"/api/kernels/{kernel_id}")[0] != 410:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        ch.close()
        server.post(f"/api/kernels/{kernel_id}/restart")
        assert _holds(router, kernel_id, survivor)
        with server.connect(kernel_id) as again:
            again.kernel_info()
            assert again.run_ok("open('kept.txt').read()").result() == "'still here'"
        server.delete_session(model["id"])
    finally:
        stop_pool(shared)


def test_nbclient_through_the_gateway_gives_a_direct_runs_outputs(pool: dict, tmp_path_factory: pytest.TempPathFactory) -> None:
    import json
    import subprocess
    import sys

    import nbformat
    from nbclient import NotebookClient

    folder = tmp_path_factory.mktemp("nbclient")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("print('hello from the pool')"),
        nbformat.v4.new_code_cell("x = sum(range(10))\nx"),
        nbformat.v4.new_code_cell("from IPython.display import HTML\nHTML('<b>bold</b>')"),
        nbformat.v4.new_code_cell("import sys\nprint('err', file=sys.stderr)"),
    ])
    nb.metadata["kernelspec"] = {"name": "wasm-python", "display_name": "Python (wasm sandbox)", "language": "python"}
    path = folder / "compare.ipynb"
    nbformat.write(nb, path)
    routed = subprocess.run(
        [sys.executable, str(SUPPORT / "gateway_nbclient_child.py"), pool["router"].url, ROUTER_TOKENS["course-a"],
         str(path)], capture_output=True, text=True, timeout=240,
    )
    assert routed.returncode == 0, routed.stderr[-3000:]
    direct_nb = nbformat.read(path, as_version=4)
    NotebookClient(direct_nb, timeout=120, kernel_name="wasm-python").execute()

    def essentials(outputs: list[list[dict]]) -> list[list[tuple]]:
        return [[(o["output_type"], o.get("name"), o.get("text"), json.dumps(o.get("data"), sort_keys=True))
                 # the kernel's own notices (a folder not shown), on either stream, are not the cells'
                 for o in cell if not (o.get("output_type") == "stream" and o.get("text", "").startswith("wasm-kernel:"))]
                for cell in outputs]

    assert essentials(json.loads(routed.stdout)) == essentials(
        [cell.get("outputs", []) for cell in direct_nb.cells if cell.cell_type == "code"])


def test_a_host_killed_mid_cell_ends_the_cell_with_one_line_and_a_restart_recovers(pool: dict) -> None:
    server, router, hosts = pool["server"], pool["router"], pool["hosts"]
    live = [h for h in hosts if h.proc.poll() is None]
    model, ch = open_notebook(server, "course/mid-cell.ipynb")
    kernel_id = model["kernel"]["id"]
    try:
        victim = next(h for h in live if _holds(router, kernel_id, h))
        if len(live) < 2:
            live.append(HostProcess(router_redis[0], victim.root.parent / "mid-spare", "mid-spare", heartbeat=0.3))
            hosts.append(live[-1])
        msg_id = ch.start_execute("import time\nfor _ in range(600): time.sleep(0.1)")
        ch.wait_busy(msg_id)
        time.sleep(0.5)
        victim.kill9()
        ended = ch.wait_for(msg_id, "the long cell", timeout=30)
        assert ended.reply["status"] == "error" and ended.reply["ename"] == "SandboxHostLost", ended.describe()
        assert ended.stream("stderr") == "the sandbox host was lost; restart the kernel to get a new sandbox\n"
    finally:
        ch.close()
    deadline = time.monotonic() + 20
    while router.call("GET", f"/api/kernels/{kernel_id}")[0] != 410:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    server.post(f"/api/kernels/{kernel_id}/restart")
    with server.connect(kernel_id) as again:
        again.kernel_info()
        assert again.run_ok("2 + 2").result() == "4"
    server.delete_session(model["id"])
