"""Unattended runs leave nothing behind (issue 22): a kernel that no notebook names
(nbconvert, papermill, nbclient without JPY_SESSION_NAME) has its session removed when
it shuts down, kept across a restart, left to the next prune when it is killed, and
kept for WasmKernel.keep_unnamed_sessions_hours when the operator asks. Real kernels,
real tools; time moves by setting the session's timestamps back, as prune tests do."""

from __future__ import annotations

import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from wasm_kernel import prune_sessions
from wasm_kernel.kernel import session_lifecycle
from wasm_kernel.kernel.session_lifecycle import SessionLifecycle
from wasm_kernel.sessions.layout import history_path, lease_path, metadata_path
from wasm_kernel.sessions.leases import acquire_lease
from wasm_kernel.sessions.metadata import SessionMetadata, read_metadata, write_metadata
from wasm_kernel.sessions.pruning import prune_unattended_sessions
from wasm_kernel.sessions.registry import SessionRegistry
from wasm_kernel.sessions.unattended import MARK_GRACE_S, mark_unattended, marker_path

from support.events import Events
from support.kernel_client import RunningKernel
from support.paths import EXAMPLES

KERNELSPEC = {"name": "wasm-python", "display_name": "Python (WebAssembly sandbox)", "language": "python"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch Jupyter data folder, for kernels started here and in subprocesses."""
    data = tmp_path / "jupyter"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return data


def sessions_root(data_dir: Path) -> Path:
    return data_dir / "wasm-kernel" / "sessions"


def sessions_in(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if UUID.fullmatch(p.name)) if root.is_dir() else []


def traces(root: Path, sid: str) -> list[str]:
    """What is left anywhere of a session: workspace, metadata, history, %pip
    packages, lease, unattended marker, identity-registry row."""
    left = [str(p.relative_to(root)) for p in (
        root / sid, metadata_path(root, sid), history_path(root, sid), root / ".wasm-kernel" / "packages" / sid,
        lease_path(root, sid), marker_path(root, sid),
    ) if os.path.lexists(p)]
    registry = root / ".wasm-kernel" / "registry.sqlite3"
    if registry.exists():
        with sqlite3.connect(registry) as db:
            if db.execute("SELECT 1 FROM agent_sessions WHERE session_id = ?", (sid,)).fetchall():
                left.append("registry row")
    return left


def session_shown(nb: nbformat.NotebookNode) -> str:
    """The session id %session showed in an executed notebook."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            if cell.source.strip() == "%session" and (found := UUID.search(text)):
                return found.group(0)
    raise AssertionError("no %session output in the notebook")


def tiny_notebook(path: Path) -> Path:
    """A notebook, in a folder of its own, that writes a file and shows its session."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.cells = [nbformat.v4.new_code_cell("open('result.txt', 'w').write('42')"), nbformat.v4.new_code_cell("%session")]
    nbformat.write(nb, path)
    return path


def run_nbclient(path: Path, env: dict[str, str] | None = None, **kwargs: object) -> nbformat.NotebookNode:
    """As `jupyter nbconvert --execute` runs a notebook: the kernel starts in its folder."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="wasm-python", timeout=300,
                            resources={"metadata": {"path": str(path.parent)}}, **kwargs)
    client.execute(**({"env": env} if env is not None else {}))
    return nb


def set_back(root: Path, sid: str, hours: float) -> None:
    """The session as if its last cell ran `hours` ago."""
    current = read_metadata(root, sid)
    assert current is not None
    then = datetime.now(timezone.utc) - timedelta(hours=hours)
    write_metadata(root, SessionMetadata(sid, min(current.created_at, then), then))


def past_grace(root: Path, sid: str) -> None:
    """The marker as if its kernel started (or asked for a restart) longer ago than the grace."""
    then = time.time() - MARK_GRACE_S - 60
    os.utime(marker_path(root, sid), (then, then))


def wait_until(what: str, check: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.2)


# --- the tools: nothing left ----------------------------------------------------------------


@pytest.mark.slow
def test_nbconvert_execute_of_an_example_leaves_no_session(data_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute", "--output-dir", str(tmp_path / "out"),
         str(EXAMPLES / "01-getting-started.ipynb")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = nbformat.read(tmp_path / "out" / "01-getting-started.ipynb", as_version=4)
    sid = session_shown(ran)  # the run had a session, and wrote files into it (notes.txt, greeting.py)
    root = sessions_root(data_dir)
    assert sessions_in(root) == [] and traces(root, sid) == []
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.slow
def test_papermill_run_with_parameters_leaves_no_session(data_dir: Path, tmp_path: Path) -> None:
    import papermill

    out = tmp_path / "inches.ipynb"
    papermill.execute_notebook(str(EXAMPLES / "06-data-folder.ipynb"), str(out), parameters={"unit": "in"},
                               kernel_name="wasm-python", cwd=str(EXAMPLES), progress_bar=False)
    ran = nbformat.read(out, as_version=4)
    assert any("summary.csv" in c.source for c in ran.cells)  # it wrote to its workspace
    assert sessions_in(sessions_root(data_dir)) == []


@pytest.mark.slow
def test_nbclient_run_leaves_no_trace_of_its_session(data_dir: Path, tmp_path: Path) -> None:
    ran = run_nbclient(tiny_notebook(tmp_path / "nb" / "plain.ipynb"))
    sid = session_shown(ran)
    root = sessions_root(data_dir)
    assert traces(root, sid) == [] and sessions_in(root) == []


# --- what keeps a session ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_named_by_jpy_session_name_keeps_its_session(data_dir: Path, tmp_path: Path) -> None:
    path = tiny_notebook(tmp_path / "nb" / "named.ipynb")
    sid = session_shown(run_nbclient(path, env={**os.environ, "JPY_SESSION_NAME": str(path)}))
    root = sessions_root(data_dir)
    assert (root / sid / "result.txt").read_text() == "42"
    assert not marker_path(root, sid).exists()
    prune_unattended_sessions(root, Events().logger)
    assert (root / sid / "result.txt").read_text() == "42"


@pytest.mark.slow
def test_a_restart_keeps_the_run_session_while_the_kernel_lives(data_dir: Path) -> None:
    k = RunningKernel(data_dir)
    try:
        k.execute("open('kept.txt', 'w').write('data')")
        sid = k.session_id()
        root = k.sessions_root
        k.restart()  # shutdown_request with restart=True, then a new process on the same connection file
        assert k.session_id() == sid
        assert k.execute("open('kept.txt').read()").of_type("execute_result")[0]["data"]["text/plain"] == "'data'"
        # A restart that kills the process (jupyter_client's now=True) keeps it too.
        k.km.restart_kernel(now=True)
        k.kc.wait_for_ready(timeout=60)
        assert k.session_id() == sid and (root / sid / "kept.txt").read_text() == "data"
    finally:
        k.shutdown()
    assert traces(root, sid) == []


@pytest.mark.slow
def test_kept_unnamed_session_stays_until_older_than_the_keep_time_then_the_next_kernel_prunes_it(
    data_dir: Path, tmp_path: Path
) -> None:
    ran = run_nbclient(tiny_notebook(tmp_path / "nb" / "kept.ipynb"),
                       extra_arguments=["--WasmKernel.keep_unnamed_sessions_hours=2"])
    sid = session_shown(ran)
    root = sessions_root(data_dir)
    assert (root / sid / "result.txt").read_text() == "42"
    past_grace(root, sid)
    set_back(root, sid, 1.5)
    assert prune_unattended_sessions(root, Events().logger).deleted_sessions == []  # 1.5 h < 2 h: kept
    assert (root / sid / "result.txt").exists()
    named = prune_sessions(24, root, dry_run=True)  # an ordinary prune by age agrees
    assert named.deleted_sessions == []

    set_back(root, sid, 2.5)
    k = RunningKernel(data_dir)  # any kernel's start prunes unattended runs past their keep time
    try:
        wait_until("the automatic prune", lambda: traces(root, sid) == [])
        assert sessions_in(root) == [k.session_id()]
    finally:
        k.shutdown()


@pytest.mark.slow
def test_a_killed_kernels_session_goes_at_the_next_prune_once_no_kernel_holds_it(data_dir: Path) -> None:
    k = RunningKernel(data_dir)
    try:
        k.execute("open('left.txt', 'w').write('x')")
        sid = k.session_id()
        root = k.sessions_root
        os.kill(k.km.provisioner.process.pid, signal.SIGKILL)  # type: ignore[union-attr]
        wait_until("the kernel's death", lambda: not k.km.is_alive(), 30)
    finally:
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=True)  # cleans up the connection file; the process is gone already
    assert (root / sid / "left.txt").exists()
    # Just after the kill, as just after a restart's first half: the marker's grace keeps it.
    assert prune_unattended_sessions(root, Events().logger).deleted_sessions == []
    assert (root / sid / "left.txt").exists()

    past_grace(root, sid)
    nxt = RunningKernel(data_dir)
    try:
        wait_until("the automatic prune", lambda: traces(root, sid) == [])
        assert sessions_in(root) == [nxt.session_id()]
    finally:
        nxt.shutdown()
    assert sessions_in(root) == []


# --- the sessions layer: the marker and prune -------------------------------------------------


def made_session(root: Path, age_hours: float, *, keep_hours: float | None = None) -> str:
    """A session on disk, idle for age_hours, with a registry row; marked as an
    unattended run's (past its grace) if keep_hours is given."""
    from wasm_kernel import derive_session_identity

    with SessionRegistry(root) as registry:
        sid = registry.get_or_create_session(derive_session_identity(str(root), "run", uuid.uuid4().hex))
    (root / sid).mkdir()
    (root / sid / "out.txt").write_text("x")
    then = datetime.now(timezone.utc) - timedelta(hours=age_hours)
    write_metadata(root, SessionMetadata(sid, then, then))
    if keep_hours is not None:
        mark_unattended(root, sid, keep_hours)
        past_grace(root, sid)
    return sid


def test_prune_takes_an_unattended_runs_session_past_its_keep_time_whatever_age_it_was_asked_for(root: Path) -> None:
    run = made_session(root, 0.01, keep_hours=0)
    kept_a_while = made_session(root, 0.5, keep_hours=1)
    ordinary = made_session(root, 0.5)
    result = prune_sessions(24, root, logger=Events().logger)
    assert result.deleted_sessions == [run]
    assert traces(root, run) == []
    assert (root / kept_a_while).is_dir() and (root / ordinary).is_dir()


def test_prune_leaves_an_unattended_session_a_kernel_holds_or_has_just_marked(root: Path) -> None:
    held = made_session(root, 5, keep_hours=0)
    just_marked = made_session(root, 5)
    mark_unattended(root, just_marked, 0)  # a kernel starting, or restarting, on it
    lease = acquire_lease(root, held)
    try:
        result = prune_unattended_sessions(root, Events().logger)
    finally:
        lease.release()
    assert result.deleted_sessions == [] and result.skipped_sessions == []  # held: passed over quietly
    assert (root / held).is_dir() and (root / just_marked).is_dir()
    assert prune_unattended_sessions(root, Events().logger).deleted_sessions == [held]


def test_the_automatic_prune_considers_only_unattended_sessions_and_finishes_a_removal_cut_short(root: Path) -> None:
    ordinary = made_session(root, 24 * 365)
    cut_short = made_session(root, 0, keep_hours=0)
    # As a removal killed after the workspace went: metadata, row and marker are left.
    for path in sorted((root / cut_short).rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (root / cut_short).rmdir()
    result = prune_unattended_sessions(root, Events().logger)
    assert result.deleted_sessions == [cut_short] and traces(root, cut_short) == []
    assert (root / ordinary / "out.txt").exists()
    assert prune_unattended_sessions(root, Events().logger).deleted_sessions == []


def test_a_marker_that_cannot_be_read_marks_nothing(root: Path) -> None:
    sid = made_session(root, 5, keep_hours=0)
    marker_path(root, sid).write_text("{not json")
    past_grace(root, sid)
    assert prune_sessions(24, root, logger=Events().logger).deleted_sessions == []
    assert {sid, "registry row"} <= set(traces(root, sid))  # unsure: nothing removed
    with pytest.raises(ValueError, match="keep_hours must be a number >= 0"):
        mark_unattended(root, sid, -1)


def _lifecycle(root: Path, current: str) -> SessionLifecycle:
    return SessionLifecycle(root, lambda: current, unnamed=False, keep_hours=0, logger=Events().logger,
                            log=logging.getLogger("test"), control_thread=None)


def test_the_automatic_prune_waits_for_the_first_cells_reply(root: Path) -> None:
    """Run beside a first cell, the prune's scan and imports held the GIL that the
    guest's thread takes for every call out of wasm: it waits for the reply."""
    left = made_session(root, 5, keep_hours=0)
    ready, settled = threading.Event(), threading.Event()
    ready.set()  # the sandbox is open; no cell has replied yet
    _lifecycle(root, made_session(root, 0)).prune_when_ready(ready, settled)
    time.sleep(0.5)
    assert (root / left / "out.txt").exists()
    settled.set()
    wait_until("the automatic prune", lambda: traces(root, left) == [], 30)


def test_the_automatic_prune_runs_anyway_when_no_cell_comes(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_lifecycle, "PRUNE_SETTLE_S", 0.5)
    left = made_session(root, 5, keep_hours=0)
    ready = threading.Event()
    _lifecycle(root, made_session(root, 0)).prune_when_ready(ready, threading.Event())
    time.sleep(0.3)
    assert (root / left / "out.txt").exists()  # the sandbox is not open yet
    ready.set()
    wait_until("the automatic prune", lambda: traces(root, left) == [], 30)
