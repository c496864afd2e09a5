"""Draining a pool host keeps every notebook's interpreter: real hosts, manager,
router, Redis and a Jupyter Server on the gateway, on a shared root.

A host drained by the manager's admin endpoint, or stopped with SIGTERM (a rolling
upgrade), shuts its kernels down as a notebook's shutdown does, which saves each
interpreter; the notebook's next request reaches a live host through the router,
under the same kernel id, and the kernel there resumes the variables. A drained
host takes no new session.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from support.redis_server import RedisServer
from support.routed_pool import host_of, open_notebook, start_pool, stop_pool

pytestmark = pytest.mark.timeout(300)

SETUP = "import numpy as np\nvalues = np.arange(5)\ndef score(v):\n    return int(v.sum()) * 2"


@pytest.fixture
def shared_pool(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pool = start_pool(redis_server.url, tmp_path_factory.mktemp("drain"), shared_root=True)
    try:
        yield pool
    finally:
        stop_pool(pool)


def _resumes_on(pool: dict[str, Any], kernel_id: str, survivor: Any) -> None:
    server = pool["server"]
    deadline = time.monotonic() + 60
    while True:  # the gateway may still hold the closed upstream for a moment
        try:
            with server.connect(kernel_id) as again:
                again.kernel_info()
                run = again.run_ok("score(values)")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert run.result() == "20", run.describe()
    assert "resumed the state saved at" in run.stream("stdout"), run.describe()
    assert host_of(pool, kernel_id) is survivor


def test_a_host_drained_by_the_manager_moves_its_notebooks_with_their_variables(shared_pool: dict[str, Any]) -> None:
    server, manager = shared_pool["server"], shared_pool["manager"]
    model, ch = open_notebook(server, "course/drained.ipynb")
    kernel_id = model["kernel"]["id"]
    ch.run_ok(SETUP)
    victim = host_of(shared_pool, kernel_id)
    assert victim is not None
    survivor = next(h for h in shared_pool["hosts"] if h is not victim)
    status, answer = manager.call("POST", f"/v1/hosts/{victim.host_id}/drain")
    assert status == 200 and answer == {"host_id": victim.host_id, "drained_sessions": 1}, answer
    ch.close()
    _resumes_on(shared_pool, kernel_id, survivor)
    # The drained host is still up, and takes no new session.
    other = server.start_session("course/after-the-drain.ipynb")
    assert host_of(shared_pool, other["kernel"]["id"]) is survivor
    # Draining needs the manager's token, and a host that exists.
    assert manager.call("POST", f"/v1/hosts/{victim.host_id}/drain", token=None)[0] == 401
    assert manager.call("POST", "/v1/hosts/no-such-host/drain")[0] == 404


def test_a_host_stopped_with_sigterm_drains_itself(shared_pool: dict[str, Any]) -> None:
    server = shared_pool["server"]
    model, ch = open_notebook(server, "course/upgraded.ipynb")
    kernel_id = model["kernel"]["id"]
    ch.run_ok(SETUP)
    victim = host_of(shared_pool, kernel_id)
    assert victim is not None
    survivor = next(h for h in shared_pool["hosts"] if h is not victim)
    victim.stop()  # SIGTERM, as a rolling upgrade stops a pod
    assert victim.proc.returncode is not None
    ch.close()
    _resumes_on(shared_pool, kernel_id, survivor)
