"""Rollback keeps WASI descriptors consistent: no leaked fds, no stale fd aliasing
a new file, and file offsets restored (RESEARCH.md section 2 hazards)."""

import os
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox

TRAP = "\nwhile True:\n    pass"


def test_file_closed_in_a_rolled_back_cell_never_aliases_the_next_file(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.05)
    try:
        assert sb.execute("f = open('a.txt', 'w')").success
        assert sb.execute("f.close()" + TRAP).rolled_back
        r = sb.execute("g = open('b.txt', 'w')\ng.write('B')\ng.flush()\nf.write('A')\nf.flush()\nf.close()\ng.close()")
        assert r.success, r.error
        assert (workspace / "b.txt").read_text() == "B"
        assert (workspace / "a.txt").read_text() == "A"
    finally:
        sb.close()


def test_files_opened_in_rolled_back_cells_are_closed_on_the_host(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.05)
    try:
        sb.execute("import os")
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(5):
            r = sb.execute("fs = [open(f'f{i}.txt', 'w') for i in range(50)]" + TRAP)
            assert r.rolled_back
        sb.execute("1")
        sb._guest.wait_idle()
        assert len(os.listdir("/proc/self/fd")) - before < 10
        assert sb._guest.files.ledger.open_count < 20
    finally:
        sb.close()


def test_file_offsets_are_restored_after_rollback(workspace: Path) -> None:
    (workspace / "data.txt").write_text("0123456789")
    sb = make_sandbox(workspace, cpu_seconds=0.05)
    try:
        r = sb.execute("f = open('data.txt', 'rb', buffering=0)\nfirst = f.read(3)\nprint(first)")
        assert r.stdout == "b'012'\n"
        assert sb.execute("f.read(3)" + TRAP).rolled_back
        assert sb.execute("print(f.read(3))").stdout == "b'345'\n"
    finally:
        sb.close()


def test_a_file_written_before_the_trap_keeps_its_contents(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.05)
    try:
        r = sb.execute("with open('out.txt', 'w') as f:\n    f.write('written')" + TRAP)
        assert r.rolled_back
        assert (workspace / "out.txt").read_text() == "written"
        assert "out.txt" in r.files_created
    finally:
        sb.close()


@pytest.mark.slow
def test_matplotlib_keeps_working_after_rollbacks(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.savefig('one.png')")
        sb.policy = sb.policy.with_changes(deadline_seconds=0.3)
        for _ in range(2):
            assert sb.execute("plt.plot([3, 4])" + TRAP).rolled_back
        sb.policy = sb.policy.with_changes(deadline_seconds=None)
        r = sb.execute("plt.figure(); plt.title('again'); plt.plot([5, 6]); plt.savefig('two.png')")
        assert r.success, r.error
        assert (workspace / "two.png").read_bytes().startswith(b"\x89PNG")
    finally:
        sb.close()
