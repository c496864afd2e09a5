"""End to end through a real jupyter_server, as JupyterLab drives it.

The server starts the kernel for a notebook session (POST /api/sessions), which
sets $JPY_SESSION_NAME to the notebook's path: the kernel must turn that into the
notebook's stable session, so that closing and reopening the notebook, or
restarting its kernel, finds the same workspace, while another notebook gets its
own. Cells go over the kernel's websocket; restart, interrupt and shutdown go
through the server's REST API, as the Kernel menu does.

The server's notebook root is reached through a symlink, so the registry's
notebook_path (a realpath) differs from the path the server hands the kernel.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.jupyter_server_client import JupyterServer, KernelChannels, running_server
from wasm_kernel.sessions.leases import try_exclusive_lease
from wasm_kernel.sessions.registry import SessionRegistry

# Above the sum of the client's own deadlines, so that a hang fails with their report (and the server's log).
pytestmark = pytest.mark.timeout(300)

LESSON = "course/lesson.ipynb"
OTHER = "course/other.ipynb"
INTERRUPT_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("jupyter-server")
    real_root = base / "notebooks-real"
    real_root.mkdir()
    root = base / "notebooks"
    root.symlink_to(real_root, target_is_directory=True)
    # none_left holds even once test_server_shutdown_stops_every_kernel stopped it.
    with running_server(base, root, notebooks=[LESSON, OTHER], none_left=True) as srv:
        yield srv


def sessions_root(server: JupyterServer) -> Path:
    return server.data_dir / "wasm-kernel" / "sessions"


@contextmanager
def notebook(server: JupyterServer, path: str) -> Iterator[tuple[dict, KernelChannels]]:
    """Open `path` as JupyterLab does (session, then websocket), close it at the end
    (DELETE the session) and wait for its kernel process to exit."""
    model = server.start_session(path)
    kernel_id = model["kernel"]["id"]
    try:
        with server.connect(kernel_id) as channels:
            info = channels.kernel_info()
            assert info["implementation"] == "wasm_kernel", f"the session runs another kernel: {info}"
            yield model, channels
    finally:
        pid = server.kernel_pid(kernel_id) if server.proc.poll() is None else None
        server.delete_session(model["id"])
        if pid is not None:
            server.wait_kernel_gone(pid)


def test_a_relative_jupyter_data_dir_means_the_servers_folder_not_the_notebooks(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The kernel runs in the notebook's folder; the server extension hands it the data
    # folder as the server read it, so its sessions are the server's, not a second set
    # beside each notebook (where they would also hide the notebook's folder).
    base = tmp_path_factory.mktemp("relative-data-dir")
    (base / "notebooks").mkdir()
    srv = JupyterServer(base, base / "notebooks", relative_data_dir=True)
    try:
        srv.create_notebook(LESSON)
        with notebook(srv, LESSON) as (_model, channels):
            run = channels.run_ok("open('/app/made.txt', 'w').write('x'); import os; os.listdir('.')")
            assert "lesson.ipynb" in (run.result() or ""), run.describe()
        assert list(sessions_root(srv).glob("*/made.txt")), srv.log_tail()
        assert not (base / "notebooks" / "course" / "data").exists()
    finally:
        assert not srv.stop()


def test_reopened_notebook_finds_its_files_and_session(server: JupyterServer) -> None:
    with notebook(server, LESSON) as (model, ch):
        assert ch.subprotocol in (None, ""), "the legacy JSON websocket protocol was expected"
        assert model["path"] == LESSON and model["type"] == "notebook"
        wrote = ch.run_ok("open('from_lab.txt','w').write('hi')")
        assert wrote.result() == "2", wrote.describe()
        first_id = ch.session_id()
        first_kernel = model["kernel"]["id"]
        pid = server.kernel_pid(first_kernel)
    # The session is gone from the server, and so is its kernel process.
    assert not psutil_alive(pid), f"kernel process {pid} outlived DELETE /api/sessions"
    assert all(s["path"] != LESSON for s in server.get("/api/sessions")), server.get("/api/sessions")
    assert all(k["id"] != first_kernel for k in server.get("/api/kernels")), server.get("/api/kernels")
    workspace = sessions_root(server) / first_id
    assert (workspace / "from_lab.txt").read_text() == "hi", f"the file is not in the session's workspace {workspace}"

    with notebook(server, LESSON) as (model, ch):
        assert model["kernel"]["id"] != first_kernel, "reopening should start a new kernel"
        read = ch.run_ok("open('from_lab.txt').read()")
        assert read.result() == "'hi'", f"the reopened notebook lost its workspace: {read.describe()}"
        assert ch.session_id() == first_id, "the reopened notebook got another session"


def test_restart_keeps_files_and_drops_variables(server: JupyterServer) -> None:
    with notebook(server, LESSON) as (model, ch):
        kernel_id = model["kernel"]["id"]
        ch.run_ok("open('from_lab.txt','w').write('hi')\nbefore_restart = 41")
        assert ch.run_ok("before_restart + 1").result() == "42"
        session_id = ch.session_id()
        old_pid = server.kernel_pid(kernel_id)

        restarted = server.post(f"/api/kernels/{kernel_id}/restart")
        assert restarted["id"] == kernel_id, restarted
        # JupyterLab keeps the same websocket across a restart; so do we.
        ch.kernel_info()
        new_pid = server.kernel_pid(kernel_id)
        assert new_pid != old_pid, "the restart did not start a new kernel process"
        assert not psutil_alive(old_pid), f"the pre-restart kernel process {old_pid} is still running"

        read = ch.run_ok("open('from_lab.txt').read()")
        assert read.result() == "'hi'", f"the restart lost the workspace: {read.describe()}"
        gone = ch.execute("before_restart")
        assert gone.status == "error" and gone.reply["ename"] == "NameError", (
            f"a variable survived the restart: {gone.describe()}")
        assert ch.session_id() == session_id, "the restarted kernel opened another session"


def test_another_notebook_gets_its_own_workspace(server: JupyterServer) -> None:
    with notebook(server, LESSON) as (_, ch):
        ch.run_ok("open('from_lab.txt','w').write('hi')")
        lesson_id = ch.session_id()
    with notebook(server, OTHER) as (_, ch):
        seen = ch.run_ok("import os\nos.path.exists('from_lab.txt'), sorted(os.listdir('.'))")
        assert seen.result() is not None and seen.result().startswith("(False,"), (
            f"course/other.ipynb sees course/lesson.ipynb's file: {seen.describe()}")
        other_id = ch.session_id()
    assert other_id != lesson_id, "two notebooks share one session"
    assert not (sessions_root(server) / other_id / "from_lab.txt").exists()


def test_registry_binds_the_notebooks_realpath(server: JupyterServer) -> None:
    with notebook(server, LESSON) as (_, ch):
        session_id = ch.session_id()
    expected = os.path.realpath(server.root_dir / LESSON)
    assert expected != str(server.root_dir / LESSON), "the root should be a symlink, to test canonicalisation"
    with SessionRegistry(sessions_root(server)) as registry:
        entry = registry.lookup(session_id)
    assert entry is not None, f"session {session_id} has no registry row under {sessions_root(server)}"
    assert entry.notebook_path == expected, f"registry notebook_path {entry.notebook_path!r}, expected {expected!r}"
    assert entry.mode == "notebook" and entry.scope_key == "", entry
    assert (sessions_root(server) / session_id).is_dir(), "the session's workspace is not under JUPYTER_DATA_DIR"


def test_interrupt_through_the_server(server: JupyterServer) -> None:
    with notebook(server, LESSON) as (model, ch):
        kernel_id = model["kernel"]["id"]
        pid = server.kernel_pid(kernel_id)
        ch.run_ok("kept = 7")
        code = "print('looping', flush=True)\nwhile True: pass"
        msg_id = ch.start_execute(code)
        # Interrupt only once the guest is in the loop (its first output streamed).
        ch.wait_for(msg_id, code, until=lambda m: m["msg_type"] == "stream" and "looping" in m["content"]["text"])
        sent = time.monotonic()
        server.post(f"/api/kernels/{kernel_id}/interrupt")
        ex = ch.wait_for(msg_id, code, timeout=INTERRUPT_WITHIN_S)
        took = time.monotonic() - sent
        assert ex.status == "error" and ex.reply["ename"] == "KeyboardInterrupt", ex.describe()
        assert took < INTERRUPT_WITHIN_S, f"the interrupt took {took:.1f} s"
        # The same kernel process answers, with its variables.
        assert server.kernel_pid(kernel_id) == pid, "the interrupt restarted or killed the kernel"
        assert ch.run_ok("kept * 6").result() == "42"
        assert server.get(f"/api/kernels/{kernel_id}")["execution_state"] == "idle"


def test_interrupt_while_the_cell_waits_for_its_sandbox(server: JupyterServer) -> None:
    """The Stop button pressed while a cell waits for the guest (the first start's
    ~100 s compile, or a prune holding the session's lease) must stop that cell, as
    ipykernel's KeyboardInterrupt would; not let it run once the guest is up.
    Holding the session's lease exclusively, as prune does, keeps the sandbox from
    opening for as long as we like, without a cold compile."""
    path = "course/slow_start.ipynb"
    server.create_notebook(path)
    with notebook(server, path) as (_, ch):
        session_id = ch.session_id()
    lease = try_exclusive_lease(sessions_root(server), session_id)
    assert lease is not None, "the closed notebook's session is still leased"
    try:
        with notebook(server, path) as (model, ch):
            kernel_id = model["kernel"]["id"]
            code = "while True: pass"
            msg_id = ch.start_execute(code)
            ch.wait_busy(msg_id)
            time.sleep(0.3)  # well inside the handler, waiting for the sandbox
            server.post(f"/api/kernels/{kernel_id}/interrupt")
            time.sleep(0.5)
            lease.release()  # the sandbox opens now
            try:
                stopped: object = ch.wait_for(msg_id, code, timeout=5)
            except TimeoutError:
                stopped = None
                server.post(f"/api/kernels/{kernel_id}/interrupt")  # stop the loop the first one did not
                ch.wait_for(msg_id, code, timeout=INTERRUPT_WITHIN_S)
            assert stopped is not None and stopped.reply["ename"] == "KeyboardInterrupt", (  # type: ignore[attr-defined]
                "the interrupt sent while the cell waited for its sandbox was dropped: "
                "`while True: pass` ran once the sandbox opened, until a second interrupt")
    finally:
        lease.release()


def test_server_shutdown_stops_every_kernel(server: JupyterServer) -> None:
    """Last: it stops the module's server. POST /api/shutdown (File > Shut Down)
    with two notebooks open: the server exits and takes both kernels with it."""
    pids = []
    for path in (LESSON, OTHER):
        model = server.start_session(path)
        with server.connect(model["kernel"]["id"]) as ch:
            ch.kernel_info()
        pids.append(server.kernel_pid(model["kernel"]["id"]))
    server.shutdown()  # raises if the server has not exited on its own 30 s after the request
    assert server.proc.returncode == 0, f"jupyter server exited with {server.proc.returncode}:\n{server.log_tail()}"
    for pid in pids:
        server.wait_kernel_gone(pid, timeout=5)
    leftover = server.kernel_processes()
    assert not leftover, f"kernel processes left after the server shut down: {[p.cmdline() for p in leftover]}"
    assert not [p for p in server.kernel_pids_seen if psutil_alive(p)], server.kernel_pids_seen


def psutil_alive(pid: int) -> bool:
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
