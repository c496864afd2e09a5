"""A guest's private folder (its /tmp) never outlives its process for long: one
parent per user, a lock per folder, and a sweep of dead owners' folders at the next
start (issue 10, class 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from wasm_kernel.runtime.guest_scratch import GuestScratch, scratch_parent, sweep_dead

HOLDER = r"""
import sys, time
from pathlib import Path
from wasm_kernel import create_sandbox
sb = create_sandbox(workspace=Path(sys.argv[1]))
sb.execute("open('/tmp/work.txt', 'w').write('x' * 1000)")
print(sb._guest.layout.private, flush=True)
time.sleep(600)
"""


@pytest.fixture
def own_tmp(tmp_path: Path) -> Iterator[Path]:
    """A TMPDIR of this test's own, for this process and the ones it starts."""
    base = tmp_path / "tmp"
    base.mkdir()
    old = tempfile.tempdir
    tempfile.tempdir = str(base)
    try:
        yield base
    finally:
        tempfile.tempdir = old


def _holder(own_tmp: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "ws")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "TMPDIR": str(own_tmp)})
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, "the holder process did not start its sandbox"
    return proc, Path(line)


def test_a_killed_processs_private_folder_is_swept_at_the_next_start(own_tmp: Path, tmp_path: Path) -> None:
    proc, private = _holder(own_tmp, tmp_path)
    assert private.parent == scratch_parent() == own_tmp / f"wasm-kernel-{os.getuid()}"
    assert (private / "tmp" / "work.txt").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert private.exists()  # kill -9 ran no cleanup
    fresh = GuestScratch()
    try:
        assert not private.exists() and not Path(f"{private}.lock").exists()
        assert sorted(os.listdir(scratch_parent())) == sorted([fresh.path.name, fresh.path.name + ".lock"])
    finally:
        fresh.remove()
    assert os.listdir(scratch_parent()) == []


@pytest.mark.slow
def test_a_live_processs_folder_is_never_swept(own_tmp: Path, tmp_path: Path) -> None:
    proc, private = _holder(own_tmp, tmp_path)
    try:
        assert sweep_dead(scratch_parent()) == []
        assert (private / "tmp" / "work.txt").read_text() == "x" * 1000
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert sweep_dead(scratch_parent()) == [private.name]


def test_removing_a_folder_never_follows_a_link_the_guest_left(own_tmp: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    scratch = GuestScratch()
    (scratch.path / "tmp").mkdir()
    os.symlink(outside, scratch.path / "tmp" / "link")
    os.symlink("../../../outside", scratch.path / "tmp" / "rel")
    deep = scratch.path / "tmp"
    for _ in range(200):  # deeper than any recursion would like, and than a walk lists
        deep = deep / "d"
        deep.mkdir()
    scratch.remove()
    scratch.remove()  # idempotent
    assert (outside / "keep.txt").read_text() == "keep"
    assert os.listdir(scratch_parent()) == []


def test_a_parent_folder_others_can_write_is_refused(own_tmp: Path) -> None:
    parent = own_tmp / f"wasm-kernel-{os.getuid()}"
    parent.mkdir(mode=0o777)
    os.chmod(parent, 0o777)
    with pytest.raises(PermissionError, match="not a private folder"):
        GuestScratch()
    os.chmod(parent, 0o700)
    GuestScratch().remove()


def test_closing_a_sandbox_leaves_nothing_behind(own_tmp: Path, tmp_path: Path) -> None:
    from wasm_kernel import create_sandbox

    sb = create_sandbox(workspace=tmp_path / "ws")
    sb.execute("open('/tmp/a.txt', 'w').write('a')")
    assert len(os.listdir(scratch_parent())) == 2
    sb.close()
    assert os.listdir(scratch_parent()) == []


@pytest.mark.slow
def test_a_kernel_leaves_no_folder_after_restart_and_shutdown(own_tmp: Path, tmp_path: Path) -> None:
    from support.kernel_client import RunningKernel

    kernel = RunningKernel(tmp_path / "jupyter", env={"TMPDIR": str(own_tmp)})
    try:
        kernel.execute("open('/tmp/scratch.txt', 'w').write('x')")
        first = set(os.listdir(scratch_parent()))
        assert len(first) == 2  # the folder and its lock
        kernel.restart()
        kernel.execute("open('/tmp/scratch.txt', 'w').write('y')")
        second = set(os.listdir(scratch_parent()))
        assert len(second) == 2 and not first & second  # the old interpreter's is gone
    finally:
        kernel.shutdown()
    assert os.listdir(scratch_parent()) == []
