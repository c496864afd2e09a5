"""Checkpoints: incremental (dirty pages only) where the kernel allows, full copies
otherwise; both restore the interpreter exactly."""

from pathlib import Path

import pytest

from support.sandboxes import make_sandbox

STATE = (
    "import hashlib, pickle\n"
    "def fingerprint():\n"
    "    return hashlib.sha256(pickle.dumps((big, arr.tobytes(), text))).hexdigest()\n"
)
BUILD = "import numpy as np\nbig = {i: str(i) * 3 for i in range(100_000)}\narr = np.arange(1_000_000)\ntext = 'x' * 100_000"
WRECK = (
    "for k in list(big)[:50_000]:\n    big[k] = None\n"
    "arr[:] = -1\ntext = ''\nballast = bytearray(150 * 2**20)\n"
    "while True:\n    pass"
)


@pytest.mark.parametrize("mode", ["incremental", "full"])
@pytest.mark.slow
def test_rollback_restores_the_exact_state_after_heavy_writes_and_growth(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    if mode == "full":
        monkeypatch.setenv("WASM_KERNEL_FULL_CHECKPOINTS", "1")
    sb = make_sandbox(workspace)
    try:
        assert sb._guest.checkpoints.checkpoint is not None
        assert sb._guest.checkpoints.checkpoint.incremental is (mode == "incremental")
        assert sb.execute(BUILD + "\n" + STATE).success
        before = sb.execute("fingerprint()").outputs[0].data["text/plain"]
        for _ in range(2):
            sb.policy = sb.policy.with_changes(deadline_seconds=1.5)
            r = sb.execute(WRECK)
            assert r.trap == "deadline" and r.rolled_back
            sb.policy = sb.policy.with_changes(deadline_seconds=None)
            assert sb.execute("fingerprint()").outputs[0].data["text/plain"] == before
            assert sb.execute("'ballast' in dir()").outputs[0].data["text/plain"] == "False"
        # The interpreter keeps working normally afterwards, growth included.
        r = sb.execute("more = bytearray(100 * 2**20)\nlen(more)")
        assert r.outputs[0].data["text/plain"] == str(100 * 2**20)
    finally:
        sb.close()


def test_an_incremental_checkpoint_copies_only_what_the_cell_wrote(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        checkpoint = sb._guest.checkpoints.checkpoint
        assert checkpoint is not None
        if not checkpoint.incremental:
            pytest.skip("this kernel does not offer userfaultfd write-protect tracking")
        sb.execute("import numpy")
        sb.execute("1 + 1")
        sb._guest.wait_idle()
        # IPython's run_cell alone writes ~2 MB (reference counts across the many
        # objects it touches); a full copy would be the whole ~45 MB.
        assert checkpoint.last_copied < checkpoint.size // 8
    finally:
        sb.close()


@pytest.mark.slow
def test_memory_grown_by_rolled_back_cells_is_given_back(workspace: Path) -> None:
    # Each failed cell grows memory by 300 MB before it is stopped. Restored in
    # place, the allocator would never reuse that growth and the 1 GiB guest would
    # run out after three such cells.
    sb = make_sandbox(workspace, memory_bytes=1024 * 2**20)
    try:
        sb.execute("import numpy as np\nkeep = np.ones(1000)")
        for _ in range(5):
            sb.policy = sb.policy.with_changes(deadline_seconds=1.0)
            r = sb.execute("ballast = bytearray(300 * 2**20)\nwhile True:\n    pass")
            assert r.trap == "deadline" and r.rolled_back
            assert r.memory_used_bytes > 300 * 2**20  # what the failed cell reached
            assert sb.execute("1").memory_used_bytes < 200 * 2**20  # and gave back
        sb.policy = sb.policy.with_changes(deadline_seconds=None)
        r = sb.execute("big = bytearray(600 * 2**20)\nprint(len(big) >> 20, int(keep.sum()))")
        assert r.success, r.error
        assert r.stdout == "600 1000\n"
    finally:
        sb.close()


def test_boot_objects_are_immortal_so_a_cell_writes_only_its_own_pages(workspace: Path) -> None:
    # IPython's and the stdlib's objects exist before the first cell; made immortal
    # at boot, a cell's reference counting leaves their pages alone.
    sb = make_sandbox(workspace)
    try:
        r = sb.execute("import sys, json\nsys.getrefcount(json) > 2**28, sys.getrefcount(object()) < 10")
        assert r.outputs[0].data["text/plain"] == "(True, True)"  # type: ignore[union-attr]
        checkpoint = sb._guest.checkpoints.checkpoint
        assert checkpoint is not None
        if not checkpoint.incremental:
            pytest.skip("this kernel does not offer userfaultfd write-protect tracking")
        copied = []
        for _ in range(5):
            sb.execute("1 + 1")
            sb._guest.wait_idle()
            copied.append(checkpoint.last_copied)
        assert sorted(copied)[2] < 480 * 4096  # ~390 pages; ~555 while every object was mortal
    finally:
        sb.close()


def test_a_cell_cannot_make_objects_immortal(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        r = sb.execute(
            "import sys, _wasm_kernel_guest as g\nvictim = object()\nbefore = sys.getrefcount(victim)\n"
            "answer = g.call({'op': 'immortalize', 'address': id(victim), 'count': 1})\n"
            "answer.get('ok'), sys.getrefcount(victim) == before"
        )
        assert r.outputs[0].data["text/plain"] == "(False, True)"  # type: ignore[union-attr]
    finally:
        sb.close()
