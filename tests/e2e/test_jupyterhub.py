"""A course on a real JupyterHub (docs/teaching.md), end to end on real processes.

JupyterHub 6 with configurable-http-proxy from npm, on loopback ports, its state in a
scratch folder; students log in with their password through the hub's REST API and
start their own single-user servers (SimpleLocalProcessSpawner: one OS account, a
folder per student, as the page's "one OS account for everyone" case). The hub's
course configuration and the course's limits are the blocks of docs/teaching.md, read
from the page, so the documented configuration is the tested one.

Checked: wasm-python is the only kernel (listed and startable); each student's cells,
contents API and Sandbox drive see only their own workspace; one student's token
reaches neither the other's server nor kernel; the course's limits hold;
jupyterhub-idle-culler (the page's command, with the culler's scopes and a short
--timeout) culls the server of a student who left and not that of one still working,
and the culled server started again finds the notebook's session and files; and a
single-user server whose gateway is the pool's router runs a cell on a sandbox host.
Nothing is left running afterwards.
"""

from __future__ import annotations

import ast
import re
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psutil
import pytest
import websocket

from support.cluster_procs import HostProcess, ManagerProcess
from support.hub import CULLER_SERVICE, Hub, IdleCuller, TenantKeyRouter, UserServer, ws_connect
from support.course_hub import (NOTEBOOK, course_hub, culler_command, culler_role, doc_block, open_notebook,
                                require_proxy, with_line)
from support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(420)

SESSIONS = Path(".local/share/jupyter/wasm-kernel/sessions")  # under each student's folder (the page's line)


# --- the course hub ------------------------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The hub of docs/teaching.md with two students, alice and bob, each logged in
    (a token for their password) and their server started."""
    with course_hub(tmp_path_factory.mktemp("hub")) as course:
        yield course


def _listing(ch, path: str = "/app") -> list[str]:  # noqa: ANN001
    return ast.literal_eval(ch.run_ok(f"sorted(__import__('os').listdir({path!r}))").result())


def test_a_password_logs_a_student_in_and_a_wrong_one_does_not(course: dict) -> None:
    hub: Hub = course["hub"]
    status, _ = hub.api("POST", "/hub/api/users/alice/tokens",
                        {"auth": {"username": "alice", "password": "not-the-password"}})
    assert status == 403
    status, me = hub.api("GET", "/hub/api/user", token=course["tokens"]["alice"])
    assert status == 200 and me["name"] == "alice" and me["servers"][""]["ready"], me


def test_wasm_python_is_the_only_kernel_and_no_shell_is_served(course: dict) -> None:
    alice: UserServer = course["servers"]["alice"]
    specs = alice.get("/api/kernelspecs")
    assert set(specs["kernelspecs"]) == {"wasm-python"} and specs["default"] == "wasm-python", specs
    # allowed_kernelspecs alone would start ipykernel by name: the page's spec manager
    # refuses it (the kernels API answers 500, the sessions API 501 "not available").
    for path, body in (("/api/kernels", {"name": "python3"}),
                       ("/api/sessions", {"path": "native.ipynb", "type": "notebook", "name": "native.ipynb",
                                          "kernel": {"name": "python3"}})):
        status, answer = alice.call("POST", path, body)
        assert status in (404, 500, 501), f"POST {path} python3 -> {status}: {answer}"
    assert all(k["name"] == "wasm-python" for k in alice.get("/api/kernels"))
    assert not [cmd for cmd in course["hub"].command_lines() if "ipykernel" in cmd]
    assert alice.call("POST", "/api/terminals")[0] == 404
    # disable_user_config: a kernel spec in the student's home is not read (planted
    # here on disk, as a student with a shell could).
    planted = alice.data_dir / "kernels" / "wasm-python"
    planted.mkdir(parents=True)
    (planted / "kernel.json").write_text('{"argv": ["/bin/sh", "-c", "exit 1"], "display_name": "planted", '
                                         '"language": "python"}')
    try:
        spec = alice.get("/api/kernelspecs/wasm-python")
        assert spec["spec"]["display_name"] != "planted" and spec["spec"]["argv"][1:3] == ["-m", "wasm_kernel"], spec
    finally:
        shutil.rmtree(alice.data_dir / "kernels")
    # Jupyter config and kernel specs in a student's home are out of reach of the
    # contents API (hidden folders): the limits below cannot be raised from there.
    for hidden in (".jupyter/wasm_kernel_config.py", ".local/share/jupyter/kernels/wasm-python/kernel.json"):
        status, answer = alice.call("PUT", f"/api/contents/{hidden}", {"type": "file", "format": "text", "content": "x"})
        assert status >= 400, f"PUT {hidden} -> {status}: {answer}"


def test_each_student_sees_only_their_own_workspace(course: dict) -> None:
    alice: UserServer = course["servers"]["alice"]
    bob: UserServer = course["servers"]["bob"]
    a_sid, b_sid = course["sessions"]["alice"]["id"], course["sessions"]["bob"]["id"]
    assert a_sid != b_sid  # one notebook path, two students: two sessions
    _, a_ch = open_notebook(alice)
    _, b_ch = open_notebook(bob)
    try:
        assert "answer.txt" in _listing(a_ch)
        assert "answer.txt" not in _listing(b_ch)
        assert b_ch.session_id() == b_sid
    finally:
        a_ch.close()
        b_ch.close()
    # bob's server's contents and drive: nothing of alice's.
    assert [i["name"] for i in bob.get("/api/contents/course")["content"]] == ["hw1.ipynb"]
    assert bob.call("GET", "/api/contents/answer.txt")[0] == 404
    drive = "/wasm-kernel/drive/api/contents/"
    status, mine = alice.call("GET", drive + NOTEBOOK)
    assert status == 200 and "answer.txt" in [i["name"] for i in mine["content"]], mine
    status, bobs = bob.call("GET", drive + NOTEBOOK)
    assert status == 200 and "answer.txt" not in [i["name"] for i in bobs["content"]], bobs
    assert bob.call("GET", drive + NOTEBOOK + "/answer.txt")[0] == 404
    # On disk: each student's sessions under their own folder, which is their $HOME.
    users = course["course_dir"] / "users"
    assert (users / "alice" / SESSIONS / a_sid / "answer.txt").read_text() == "alice 42"
    assert (users / "bob" / SESSIONS / b_sid).is_dir()
    assert not list((users / "bob").rglob("answer.txt"))
    assert alice.data_dir == users / "alice" / ".local" / "share" / "jupyter"


def test_a_students_token_reaches_neither_the_others_server_nor_kernel(course: dict) -> None:
    hub: Hub = course["hub"]
    alice: UserServer = course["servers"]["alice"]
    bob_token = course["tokens"]["bob"]
    kernel_id = course["sessions"]["alice"]["model"]["kernel"]["id"]
    for method, path in (("GET", "/api/contents"), ("GET", "/api/kernels"), ("GET", f"/api/kernels/{kernel_id}"),
                         ("GET", "/api/sessions"), ("POST", f"/api/kernels/{kernel_id}/interrupt"),
                         ("GET", "/wasm-kernel/drive/api/contents/" + NOTEBOOK)):
        status, answer = alice.call(method, path, token=bob_token)
        assert status in (403, 404), f"bob: {method} /user/alice{path} -> {status}: {answer}"
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        ws_connect(alice, kernel_id, bob_token)
    assert refused.value.status_code in (403, 404)
    for method, path in (("GET", "/hub/api/users/alice"), ("POST", "/hub/api/users/alice/server"),
                         ("DELETE", "/hub/api/users/alice/server"), ("POST", "/hub/api/users/alice/tokens")):
        status, answer = hub.api(method, path, token=bob_token)
        assert status in (403, 404), f"bob: {method} {path} -> {status}: {answer}"
    # alice's own token does reach it (the refusals above are about bob).
    assert alice.call("GET", f"/api/kernels/{kernel_id}")[0] == 200


def test_the_course_limits_hold(course: dict) -> None:
    alice: UserServer = course["servers"]["alice"]
    _, ch = open_notebook(alice)
    try:
        table = ch.run_ok("%limits").texts()
        for row in (r"memory\s+512 MiB", r"deadline\s+30 s", r"disk\s+100 MiB \(", r"files\s+10"):
            assert re.search(rf"^{row}", table, re.MULTILINE), table
        raised = ch.execute("%limits memory=1GB")
        assert raised.status == "error" and "512 MiB" in str(raised.reply) + raised.texts(), raised.describe()
        over = ch.execute("open('big.bin', 'wb').write(b'x' * (101 << 20))")
        assert over.status == "error" and "No space left on device" in str(over.reply), over.describe()
        ch.run_ok("import os\nif os.path.exists('big.bin'): os.remove('big.bin')")
        # A fresh interpreter: the 101 MiB the cell above used and freed would make the
        # kernel's kept state larger than the course's 100 MiB disk quota.
        ch.run_ok("%reset -f")
    finally:
        ch.close()


# The culler's --timeout and --cull-every here (the page's are 3600 and 300), in seconds.
# The hub reads the proxy's activity every 2 s (support/hub.py), and bob's server is
# pinged every second or so: it looks at most a few seconds idle to the culler, even
# when a busy machine slows requests down, so 20 s keeps it well clear of culling,
# while alice's idle server is culled about 20 s after her last cell.
CULL_TIMEOUT = 20
CULL_EVERY = 2
# How long past CULL_TIMEOUT alice's culling may take (a culler round, the hub's
# DELETE, the server's stop and its kernels' on a loaded machine) before it counts as
# never: generous, as passing tests do not wait for it.
CULL_GRACE = 90.0


def _activity(hub: Hub, user: str, token: str) -> datetime:
    """The hub's record of USER's server's last activity: what the culler judges by."""
    server = hub.server_model(user, token)
    assert server and server["last_activity"], f"{user}'s server: {server}"
    return datetime.fromisoformat(server["last_activity"])


def _still_working(bob: UserServer) -> None:
    """A request to bob's server through the proxy, which counts it as activity."""
    status, answer = bob.call("GET", "/api/contents/course")
    assert status == 200, f"bob's server: GET /api/contents/course -> {status}: {answer}"


def test_the_idle_culler_culls_an_idle_server_which_started_again_finds_the_notebooks_session(course: dict) -> None:
    hub: Hub = course["hub"]
    tokens = course["tokens"]
    alice: UserServer = course["servers"]["alice"]
    bob: UserServer = course["servers"]["bob"]
    assert hub.culler_scopes == culler_role()["scopes"]  # the culler's token has the page's scopes, no more
    before = {user: _activity(hub, user, tokens[user]) for user in ("alice", "bob")}
    _, ch = open_notebook(alice)
    try:
        ch.run_ok("x = 41")
    finally:
        ch.close()
    kernels = alice.kernel_processes()
    assert kernels, "alice's kernel is not running"
    # alice leaves, bob keeps working. The culler's first round is at its start: the
    # hub has to know of both students' latest activity by then, or that round would
    # judge them by the age of their servers.
    deadline = time.monotonic() + 60
    while True:
        _still_working(bob)
        seen = {user: _activity(hub, user, tokens[user]) for user in ("alice", "bob")}
        if all(seen[user] > before[user] for user in seen):
            break
        assert time.monotonic() < deadline, (
            f"the hub has not recorded the students' activity within 60 s (before: {before}, now: {seen}):\n"
            f"{hub.log_tail()}")
        time.sleep(0.5)
    culler = IdleCuller(hub, culler_command(CULL_TIMEOUT, CULL_EVERY))
    try:
        deadline = time.monotonic() + CULL_TIMEOUT + CULL_GRACE
        while hub.server_model("alice", tokens["alice"]) is not None:
            assert culler.running(), f"the culler exited with {culler.proc.returncode}:\n{culler.log_tail()}"
            assert time.monotonic() < deadline, (
                f"the culler (--timeout={CULL_TIMEOUT} --cull-every={CULL_EVERY}) did not cull alice's idle "
                f"server within {CULL_TIMEOUT + CULL_GRACE:.0f} s; its log:\n{culler.log_tail()}\n"
                f"the hub's:\n{hub.log_tail()}")
            _still_working(bob)
            time.sleep(1.0)
    finally:
        culler_log = culler.stop()
    # The culler stopped it, as idle, through the hub's API with its service's token ...
    assert re.search(r"Culling server alice \(inactive for \d\d:\d\d:\d\d\)", culler_log), culler_log
    # (the hub logs the DELETE as it answers it, which may be just after the server is gone)
    deleted = re.compile(rf"DELETE /hub/api/users/alice/server \({CULLER_SERVICE}@")
    deadline = time.monotonic() + 10
    while not deleted.search(hub.log_path.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"no DELETE by {CULLER_SERVICE} in the hub's log:\n{hub.log_tail()}"
        time.sleep(0.2)
    # ... and left bob, who kept working, alone.
    assert "Culling server bob" not in culler_log, culler_log
    assert (hub.server_model("bob", tokens["bob"]) or {}).get("ready"), "bob's server, in use, is gone"
    gone, alive = psutil.wait_procs(kernels, timeout=30)
    assert not alive, f"kernels still running after the server was culled: {alive}"
    alice = hub.start_server("alice", tokens["alice"])
    course["servers"]["alice"] = alice
    assert [i["name"] for i in alice.get("/api/contents/course")["content"]] == ["hw1.ipynb"]
    _, ch = open_notebook(alice)
    try:
        assert ch.session_id() == course["sessions"]["alice"]["id"]
        assert ch.run_ok("open('answer.txt').read()").result() == "'alice 42'"
        # The kernel saved its interpreter as the culled server went (kept state): x is back.
        assert ch.run_ok("x").result() == "41"
    finally:
        ch.close()


# --- the pool as the single-user servers' gateway ------------------------------------

TENANT_KEY = "course-a-tenant-key-0123456789abcdef0123"


@pytest.fixture
def pool_hub(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Redis, one sandbox host, the manager, a router with a tenant key, and a hub
    configured with the page's pool block."""
    require_proxy()
    base = tmp_path_factory.mktemp("pool-hub")
    started: list = []
    hub = None
    try:
        host = HostProcess(redis_server.url, base / "host", "hub-pool-1", heartbeat=0.5)
        started.append(host)
        manager = ManagerProcess(redis_server.url, base / "manager")
        started.append(manager)
        router = TenantKeyRouter(redis_server.url, manager.url, base / "router", "course-a", TENANT_KEY)
        started.append(router)
        config = doc_block("jupyterhub_config.py: kernels on the pool")
        config = with_line(config, "ROUTER = ", f"ROUTER = {router.url!r}")
        config = with_line(config, "POOL_KEY = ", f"POOL_KEY = {TENANT_KEY!r}")
        hub = Hub(base / "hub", ("carol",), config)
        yield {"hub": hub, "host": host, "router": router}
    finally:
        killed = hub.stop() if hub is not None else []
        children = []  # the host's kernels, above all
        for service in started:
            try:
                children += psutil.Process(service.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        for service in reversed(started):
            service.stop()
        _, alive = psutil.wait_procs(children, timeout=20)
        for proc in alive:
            proc.kill()
    assert not killed, f"processes left running after the hub stopped: {killed}"
    assert not alive, f"pool processes left running after the pool stopped: {alive}"


@pytest.mark.slow  # a second hub and the pool's four services: 1-2 minutes on 2 busy cores
def test_a_single_user_server_runs_its_kernels_on_the_pool(pool_hub: dict) -> None:
    hub: Hub = pool_hub["hub"]
    token = hub.login("carol")
    carol = hub.start_server("carol", token)
    specs = carol.get("/api/kernelspecs")
    assert set(specs["kernelspecs"]) == {"wasm-python"}, specs
    carol.create_notebook(NOTEBOOK)
    model, ch = open_notebook(carol)
    try:
        assert ch.run_ok("open('on_the_pool.txt', 'w').write('carol')").result() == "5"
        assert ch.run_ok("print(6 * 7)").stream() == "42\n"
    finally:
        ch.close()
    # The cell ran on the sandbox host: the file is in a session under the host's root,
    # and nowhere in carol's home.
    found = list((pool_hub["host"].root).rglob("on_the_pool.txt"))
    assert len(found) == 1 and found[0].read_text() == "carol", found
    assert not list(hub.home("carol").rglob("on_the_pool.txt"))
    assert not carol.kernel_processes(), "a kernel runs beside carol's server, not on the pool"
    carol.delete_session(model["id"])
    hub.stop_server("carol", token)
