"""A student culled for being idle on a real JupyterHub finds her variables again (kept state).

The course hub of docs/teaching.md as tests/e2e/test_jupyterhub.py sets it up, from
its helpers: JupyterHub with configurable-http-proxy on loopback ports, the course's
part of jupyterhub_config.py and its wasm_kernel_config.py read from the page,
SimpleLocalProcessSpawner with a folder per student, and jupyterhub-idle-culler run
with the page's command and the culler's scopes (a short --timeout). One student logs
in with her password, opens a notebook (a session: the kernel is named by the
notebook, $JPY_SESSION_NAME) and defines a variable, an import and a function, then
leaves. The culler stops her idle single-user server through the hub's API (the
spawner interrupts the server, which shuts its kernels down); she logs in again, her
server starts again, and a new kernel on the same notebook has her variables back,
its first cell saying "wasm-kernel: resumed the state saved at ...". Nothing is left
running afterwards.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from support.course_hub import NOTEBOOK, culler_command, culler_role, doc_block, open_notebook, require_proxy, with_line
from support.hub import Hub, IdleCuller

pytestmark = pytest.mark.timeout(420)

# Three cells, as a student types them: an import, a variable, a function.
CELLS = ("import numpy as np", "a = np.arange(10)", "def f(x):\n    return x + 1")
CHECK = "print(f(int(a.sum())))"  # 45 + 1
# "HH:MM", with the zone (and the date, for an older state) the kernel adds; CELLS and CHECK made 4.
RESUMED = re.compile(r"^wasm-kernel: resumed the state saved at [^(\n]*\d\d:\d\d[^(\n]* \(4 cells, [\d,]+ MB\)",
                     re.MULTILINE)
# The culler's --timeout and --cull-every (the page's are 3600 and 300), in seconds:
# nobody else is on this hub, so alice may be culled soon after her last request.
CULL_TIMEOUT = 5
CULL_EVERY = 1
CULL_GRACE = 90.0  # a culler round, the hub's DELETE, the server's and its kernel's stop, on a loaded machine


@pytest.fixture
def course(tmp_path: Path) -> Iterator[Hub]:
    """The hub of docs/teaching.md (the course's part and limits) with one student,
    alice; as test_jupyterhub.py's `course`, without starting her server."""
    require_proxy()
    course_dir = tmp_path / "course"
    (course_dir / "jupyter").mkdir(parents=True)
    (course_dir / "jupyter" / "wasm_kernel_config.py").write_text(doc_block("/srv/course/jupyter/wasm_kernel_config.py"))
    config = with_line(doc_block("jupyterhub_config.py: the course's part"), "COURSE = ", f"COURSE = Path({str(course_dir)!r})")
    hub = Hub(tmp_path, ("alice",), config, culler_scopes=culler_role()["scopes"], homes=course_dir / "users")
    try:
        yield hub
    finally:
        killed = hub.stop()
    assert not killed, f"processes left running after the hub stopped: {killed}"


def test_a_student_culled_while_idle_finds_her_variables_in_her_next_kernel(course: Hub) -> None:
    hub = course
    token = hub.login("alice")
    alice = hub.start_server("alice", token)
    alice.create_notebook(NOTEBOOK)
    model, ch = open_notebook(alice)
    try:
        for code in CELLS:
            ch.run_ok(code)
        assert ch.run_ok(CHECK).stream() == "46\n"  # what her next kernel must print too
    finally:
        ch.close()  # she leaves: the tab closed, the kernel idle
    kernels = alice.kernel_processes()
    assert kernels, "alice's kernel is not running"

    culler = IdleCuller(hub, culler_command(CULL_TIMEOUT, CULL_EVERY))
    try:
        deadline = time.monotonic() + CULL_TIMEOUT + CULL_GRACE
        while hub.server_model("alice", token) is not None:
            assert culler.running(), f"the culler exited with {culler.proc.returncode}:\n{culler.log_tail()}"
            assert time.monotonic() < deadline, (
                f"the culler (--timeout={CULL_TIMEOUT} --cull-every={CULL_EVERY}) did not cull alice's idle "
                f"server within {CULL_TIMEOUT + CULL_GRACE:.0f} s; its log:\n{culler.log_tail()}\n"
                f"the hub's:\n{hub.log_tail()}")
            time.sleep(0.5)
    finally:
        culler_log = culler.stop()
    assert re.search(r"Culling server alice \(inactive for \d\d:\d\d:\d\d\)", culler_log), culler_log
    # The server's stop shut its kernel down (not killed by the spawner or the test).
    _, alive = psutil.wait_procs(kernels, timeout=30)
    assert not alive, f"kernels still running after the server was culled: {alive}"
    stopped_log = hub.log_tail(120)

    alice = hub.start_server("alice", token)
    model, ch = open_notebook(alice)
    try:
        run = ch.execute(CHECK)
        report = (f"{run.describe()}\nthe hub's log (its servers' and kernels' too) when alice was culled:\n"
                  f"{stopped_log}")
        assert run.status == "ok", f"alice's variables did not come back after the cull: {report}"
        assert run.printed() == "46\n", report
        assert RESUMED.search(run.notices()), f"no 'resumed the state' line on stdout: {report}"
    finally:
        ch.close()
        alice.delete_session(model["id"])
