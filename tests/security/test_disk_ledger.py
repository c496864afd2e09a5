"""One ledger for a session's disk, whoever writes (issue 40, class 2).

Each kernel's guest used to keep its own count, and measured the workspace again only
between cells; a guest's /tmp was its own alone. So two kernels of one notebook, or
a cell's /tmp and another writer's /app, passed the quota together. Real kernels over
jupyter_client, two of one notebook (one session), a 16 MiB quota.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from wasm_kernel.host.safe_fs import open_root, tree_usage

pytestmark = pytest.mark.slow

QUOTA = 16 << 20
ARGV = [f"--WasmKernel.disk_max_bytes={QUOTA}", "--WasmKernel.disk_max_files=1000"]
FILL = """
import errno, os
written = 0
try:
    for i in range(64):
        with open({where!r} + f'/fill-{tag}-{{i}}', 'wb') as f:
            f.write(b'x' * (1 << 20))
        written += 1 << 20
except OSError as err:
    print('refused', errno.errorcode[err.errno])
print('wrote', written)
"""


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    folder = tmp_path / "course"
    folder.mkdir()
    env = {"JPY_SESSION_NAME": str(folder / "hw1.ipynb")}
    first = RunningKernel(tmp_path / "jupyter", env=env, argv=ARGV, cwd=folder)
    second = RunningKernel(tmp_path / "jupyter", env=env, argv=ARGV, cwd=folder)
    try:
        assert first.session_id() == second.session_id()
        yield first, second
    finally:
        for kernel in (first, second):
            if kernel.km.is_alive():
                kernel.shutdown()


def workspace_usage(kernel: RunningKernel) -> int:
    fd = open_root(kernel.sessions_root / kernel.session_id())
    try:
        return tree_usage(fd)[0]
    finally:
        os.close(fd)


def wrote(run) -> int:  # noqa: ANN001
    return int(run.stream().split("wrote ")[1].split()[0])


def test_two_kernels_of_one_notebook_filling_the_workspace_at_once_stay_within_one_quota(pair) -> None:  # noqa: ANN001
    first, second = pair
    runs = {}

    def fill(kernel: RunningKernel, tag: str) -> None:
        runs[tag] = kernel.execute(FILL.format(where="/app", tag=tag), timeout=120)

    threads = [threading.Thread(target=fill, args=(k, t)) for k, t in ((first, "a"), (second, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = wrote(runs["a"]) + wrote(runs["b"])
    assert together <= QUOTA and workspace_usage(first) <= QUOTA, (together, runs["a"].stream(), runs["b"].stream())
    assert "refused ENOSPC" in runs["a"].stream() + runs["b"].stream()  # the quota, not some other failure


def test_one_kernels_tmp_counts_against_what_the_other_may_write(pair) -> None:  # noqa: ANN001
    first, second = pair
    tmp = first.execute(FILL.format(where="/tmp", tag="t").replace("range(64)", "range(12)"), timeout=120)
    assert wrote(tmp) == 12 << 20, tmp.stream()
    app = second.execute(FILL.format(where="/app", tag="w"), timeout=120)
    assert wrote(app) <= QUOTA - (12 << 20), app.stream()


def test_a_host_write_counts_what_another_kernels_tmp_holds(pair) -> None:  # noqa: ANN001
    first, second = pair
    tmp = first.execute(FILL.format(where="/tmp", tag="t").replace("range(64)", "range(12)"), timeout=120)
    assert wrote(tmp) == 12 << 20, tmp.stream()
    run = second.execute("%%writefile notes.txt\n" + ("y" * 1023 + "\n") * (6 << 10))
    assert run.status == "error" and "would pass the session's disk quota" in run.stream("stderr"), run.stream("stderr")
    assert not (second.sessions_root / second.session_id() / "notes.txt").exists()


def test_a_kernel_that_closes_gives_its_tmp_back(pair) -> None:  # noqa: ANN001
    first, second = pair
    first.execute(FILL.format(where="/tmp", tag="t").replace("range(64)", "range(12)"), timeout=120)
    first.shutdown()
    app = second.execute(FILL.format(where="/app", tag="w").replace("range(64)", "range(14)"), timeout=120)
    assert wrote(app) == 14 << 20, app.stream()


def test_a_drive_upload_counts_what_the_notebooks_kernel_holds_in_tmp(tmp_path: Path) -> None:
    """The Sandbox drive on a real Jupyter Server counted only the workspace: a cell's
    /tmp and a drive upload passed the quota together."""
    import base64

    from support.drive_client import call
    from support.jupyter_server_client import running_server

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "jupyter_config.py").write_text(
        f"c.WasmKernel.disk_max_bytes = {QUOTA}\nc.WasmKernel.disk_max_files = 1000\n")
    with running_server(tmp_path, notebooks=["hw1.ipynb"], token="ledger-token-0123456789") as server:
        model = server.post("/api/sessions", {"path": "hw1.ipynb", "name": "hw1.ipynb", "type": "notebook",
                                              "kernel": {"name": "wasm-python"}})
        ch = server.connect(model["kernel"]["id"])
        try:
            run = ch.run_ok(FILL.format(where="/tmp", tag="t").replace("range(64)", "range(12)"), timeout=120)
            assert "wrote 12582912" in run.stream(), run.describe()
            part = base64.b64encode(b"z" * (8 << 20)).decode()
            status, answer = call(server, "PUT", "hw1.ipynb/upload.bin",
                                  {"type": "file", "format": "base64", "content": part})
            assert status == 413 and "disk quota" in answer["message"], (status, answer)
        finally:
            ch.close()
            server.delete_session(model["id"])


def test_two_guests_and_the_host_racing_never_pass_the_quota_and_leave_it_exact(tmp_path: Path) -> None:
    """The short form of benchmarks/race_disk_ledger.py: every writer stopped for each
    sample, what is on disk never passes the quota; with them gone, the ledger is
    the disk, exactly."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import race_disk_ledger

    result = race_disk_ledger.writers_race(450, tmp_path, progress=False)
    assert result["ok"], result
    assert result["samples"] > 10 and result["host"]["refused"] and any(
        g["refused"] for g in result["guests"].values()), result  # the quota was reached, and sampled
