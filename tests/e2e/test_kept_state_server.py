"""A notebook's variables outlive its kernel on a real Jupyter Server (kept state).

A real `jupyter server` process (tests/support/jupyter_server_client.py) starts the
real wasm-python kernel for a notebook session (POST /api/sessions), which sets
$JPY_SESSION_NAME to the notebook's path: the kernel keeps that notebook's state.
Cells go over the kernel's websocket, as JupyterLab sends them. The kernel is then
ended each way a server ends one that is not a restart:

- the REST API's shutdown (DELETE /api/sessions/<id>, as closing the notebook and
  shutting its kernel down does; DELETE /api/kernels/<id>, Shut Down Kernel);
- the whole server stopping (SIGTERM), and a new server started on the same data
  and notebook folders;
- the server's own kernel culler (the flags of tests/e2e/test_kernel_culling.py).

Each time, the notebook's next session gets a new kernel process in which the
variables, the import and the function are back, and its first cell's stdout says
"wasm-kernel: resumed the state saved at HH:MM (4 cells, N MB)". Nothing is faked:
no state file is written or read by the test.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.jupyter_server_client import JupyterServer, running_server

# Above the sum of the client's own deadlines, so that a hang fails with their report (and the server's log).
pytestmark = pytest.mark.timeout(300)

NOTEBOOK = "course/lesson.ipynb"
# Three cells, as a student types them: an import, a variable, a function.
CELLS = ("import numpy as np", "a = np.arange(10)", "def f(x):\n    return x + 1")
CHECK = "print(f(int(a.sum())))"  # 45 + 1
# "HH:MM", with the zone (and the date, for an older state) the kernel adds.
RESUMED = re.compile(r"^wasm-kernel: resumed the state saved at [^(\n]*\d\d:\d\d[^(\n]* \(4 cells, [\d,]+ MB\)",
                     re.MULTILINE)
# Jupyter Server's culler (test_kernel_culling.py's values): a kernel idle this many
# seconds with no connection is culled, checked every CULL_INTERVAL seconds.
CULL_IDLE_TIMEOUT = 10
CULL_INTERVAL = 1
CULL_GRACE = 60.0


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """The server's own folder (data, config, runtime) and its notebook root."""
    root = tmp_path / "notebooks"
    root.mkdir()
    return tmp_path / "server", root


@pytest.fixture
def server(folders: tuple[Path, Path]) -> Iterator[JupyterServer]:
    with running_server(*folders, notebooks=[NOTEBOOK], none_left=True) as srv:
        yield srv


def define_variables(server: JupyterServer) -> dict:
    """Open the notebook (a session), run CELLS over the websocket, disconnect; the
    session's model. Its kernel is left running, idle, with no connection."""
    model = server.start_session(NOTEBOOK)
    with server.connect(model["kernel"]["id"]) as ch:
        info = ch.kernel_info()
        assert info["implementation"] == "wasm_kernel", f"the session runs another kernel: {info}"
        for code in CELLS:
            ch.run_ok(code)
        assert ch.run_ok(CHECK).stream() == "46\n"  # what the next kernel must print too
    return model


def assert_resumed(server: JupyterServer, old_kernel: str, log: str = "") -> None:
    """The notebook's next session: a new kernel whose first cell finds f and a, and
    whose stderr says the state was resumed. `log`: an earlier server's log, for the
    failure's report."""
    model = server.start_session(NOTEBOOK)
    kernel_id = model["kernel"]["id"]
    assert kernel_id != old_kernel, "the notebook's next session should start a new kernel"
    try:
        with server.connect(kernel_id) as ch:
            ch.kernel_info()
            run = ch.execute(CHECK)
            report = f"{run.describe()}\nserver log:\n{log}{server.log_tail(60)}"
            assert run.status == "ok", f"the variables did not come back: {report}"
            assert run.printed() == "46\n", report
            assert RESUMED.search(run.notices()), f"no 'resumed the state' line on stdout: {report}"
            # The execution count goes on from the saved state's (CELLS and CHECK were 1-4).
            assert run.reply["execution_count"] == 5, report
    finally:
        pid = server.kernel_pid(kernel_id)
        server.delete_session(model["id"])
        server.wait_kernel_gone(pid)


def _kernel_ids(server: JupyterServer) -> set[str]:
    return {k["id"] for k in server.get("/api/kernels")}


@pytest.mark.parametrize("shutdown", ["session", "kernel"])
def test_a_kernel_shut_down_through_the_rest_api_resumes_in_the_notebooks_next_session(
        server: JupyterServer, shutdown: str) -> None:
    model = define_variables(server)
    kernel_id = model["kernel"]["id"]
    pid = server.kernel_pid(kernel_id)
    if shutdown == "session":
        server.delete_session(model["id"])  # closing the notebook, shutting its kernel down
    else:
        server.request("DELETE", f"/api/kernels/{kernel_id}", expect=(204,))  # Kernel > Shut Down Kernel
    server.wait_kernel_gone(pid)
    assert kernel_id not in _kernel_ids(server)
    assert_resumed(server, kernel_id)


def test_a_stopped_server_s_notebook_resumes_on_the_next_server(folders: tuple[Path, Path]) -> None:
    first = JupyterServer(*folders)
    try:
        first.create_notebook(NOTEBOOK)
        model = define_variables(first)
        pid = first.kernel_pid(model["kernel"]["id"])
    finally:
        killed = first.stop()  # SIGTERM: the server shuts its kernels down and exits
    assert not killed, f"the kernel outlived the stopped server and had to be killed: {killed}"
    first.wait_kernel_gone(pid)
    # The next server logs to the same file: keep this one's, for a failure's report.
    first_log = first.log_path.with_name("jupyter_server.first.log")
    shutil.copy(first.log_path, first_log)
    second = JupyterServer(*folders)  # the same data, config and notebook folders
    try:
        assert_resumed(second, model["kernel"]["id"], log=f"(the stopped server's)\n{first_log.read_text()}\n"
                                                          "(the next server's)\n")
    finally:
        killed = second.stop()
    assert not killed, f"kernel processes outlived the server and had to be killed: {killed}"


def test_a_kernel_culled_by_the_server_resumes_in_the_notebooks_next_session(folders: tuple[Path, Path]) -> None:
    srv = JupyterServer(*folders, extra_argv=[f"--MappingKernelManager.cull_idle_timeout={CULL_IDLE_TIMEOUT}",
                                              f"--MappingKernelManager.cull_interval={CULL_INTERVAL}"])
    try:
        srv.create_notebook(NOTEBOOK)
        model = define_variables(srv)  # then the tab is closed: no connection, the kernel idle
        kernel_id = model["kernel"]["id"]
        pid = srv.kernel_pid(kernel_id)
        deadline = time.monotonic() + CULL_IDLE_TIMEOUT + CULL_GRACE
        while kernel_id in _kernel_ids(srv):
            assert time.monotonic() < deadline, (
                f"the idle kernel was not culled within {CULL_IDLE_TIMEOUT + CULL_GRACE:.0f} s:\n{srv.log_tail()}")
            time.sleep(0.5)
        assert re.search(rf"Culling 'idle' kernel 'wasm-python' \({kernel_id}\)", srv.log()), srv.log_tail()
        srv.wait_kernel_gone(pid, timeout=30)
        assert_resumed(srv, kernel_id)
    finally:
        killed = srv.stop()
    assert not killed, f"kernel processes outlived the server and had to be killed: {killed}"
