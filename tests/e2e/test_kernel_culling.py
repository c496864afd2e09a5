"""Jupyter Server's own kernel culling (docs/teaching.md, "Culling idle servers"), on a
real server with the real wasm-python kernel.

A course may cull idle kernels inside each single-user server, with the flag the page
gives (`--MappingKernelManager.cull_idle_timeout`, here a few seconds, and a short
`cull_interval`). A kernel left idle with no notebook connected is shut down by the
server's culler, and its notebook, opened again (a new session for the same path, as
JupyterLab does), gets a kernel that finds the culled one's session and files; its
variables went with it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.jupyter_server_client import JupyterServer, running_server
from support.paths import REPO

pytestmark = pytest.mark.timeout(300)

TEACHING = REPO / "docs" / "teaching.md"
NOTEBOOK = "course/hw1.ipynb"
# The page's 1800 s, shortened. Idle time counts from the kernel's start until a
# notebook connects, too: 10 s leaves a busy machine room to connect before the
# culler could take the new kernel, and keeps the test's wait short.
CULL_IDLE_TIMEOUT = 10
CULL_INTERVAL = 1  # the server's default is 300 s
# How long past CULL_IDLE_TIMEOUT the culling may take (a round, the kernel's
# shutdown on a loaded machine) before it counts as never.
CULL_GRACE = 60.0


def cull_flag() -> str:
    """The flag docs/teaching.md gives for culling kernels in the servers, without its value."""
    found = re.findall(r"(--MappingKernelManager\.cull_idle_timeout)=\d+", TEACHING.read_text())
    assert found, "docs/teaching.md no longer shows --MappingKernelManager.cull_idle_timeout"
    return found[0]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[JupyterServer]:
    root = tmp_path / "notebooks"
    root.mkdir()
    argv = [f"{cull_flag()}={CULL_IDLE_TIMEOUT}", f"--MappingKernelManager.cull_interval={CULL_INTERVAL}"]
    with running_server(tmp_path / "server", root, notebooks=[NOTEBOOK], token="culling-test-token",
                        extra_argv=argv, none_left=True) as srv:
        yield srv


def _kernel_ids(server: JupyterServer) -> set[str]:
    return {k["id"] for k in server.get("/api/kernels")}


def test_an_idle_kernel_is_culled_and_the_notebooks_next_kernel_finds_its_files(server: JupyterServer) -> None:
    model = server.start_session(NOTEBOOK)
    kernel_id = model["kernel"]["id"]
    pid = server.kernel_pid(kernel_id)
    with server.connect(kernel_id) as ch:
        ch.run_ok("x = 41\nopen('answer.txt', 'w').write('42')")
        session_id = ch.session_id()
    # The notebook's tab is closed (no connection: the server does not cull kernels
    # with one), the kernel idle: the server's culler shuts it down.
    deadline = time.monotonic() + CULL_IDLE_TIMEOUT + CULL_GRACE
    while kernel_id in _kernel_ids(server):
        assert time.monotonic() < deadline, (
            f"the idle kernel was not culled within {CULL_IDLE_TIMEOUT + CULL_GRACE:.0f} s "
            f"(cull_idle_timeout={CULL_IDLE_TIMEOUT}, cull_interval={CULL_INTERVAL}):\n{server.log_tail()}")
        time.sleep(0.5)
    assert re.search(rf"Culling 'idle' kernel 'wasm-python' \({kernel_id}\) with 0 connections", server.log()), \
        server.log_tail()
    server.wait_kernel_gone(pid, timeout=30)
    # Its session went with it from the server's list, as a culled kernel's does.
    assert not [s for s in server.get("/api/sessions") if s["path"] == NOTEBOOK]
    # The student opens the notebook again: a new kernel, the same sandbox session.
    model = server.start_session(NOTEBOOK)
    assert model["kernel"]["id"] != kernel_id
    try:
        with server.connect(model["kernel"]["id"]) as ch:
            assert ch.session_id() == session_id
            assert ch.run_ok("open('answer.txt').read()").result() == "'42'"
            # The culler's shutdown saved the interpreter (kept state): x is back.
            assert ch.run_ok("x").result() == "41"
    finally:
        pid = server.kernel_pid(model["kernel"]["id"])
        server.delete_session(model["id"])
        server.wait_kernel_gone(pid)
