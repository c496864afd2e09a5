"""Undo (one level): the interpreter goes back to before the last cell that completed;
files are not rolled back, descriptors stay consistent, queries never move the point."""

import os
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox
from wasm_kernel import PythonSandbox
from wasm_kernel.host import memory_checkpoint

TRAP = "\nwhile True:\n    pass"


@pytest.fixture(params=["incremental", "full"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "full":
        monkeypatch.setenv("WASM_KERNEL_FULL_CHECKPOINTS", "1")
    return str(request.param)


def peek(sb: PythonSandbox, expression: str) -> str:
    """The repr of `expression` in the guest, by a query: not a cell, so no new undo point."""
    answer = sb.query("user_expressions", expressions={"v": expression})["v"]
    assert answer["status"] == "ok", answer
    return str(answer["data"]["text/plain"])


def ok(sb: PythonSandbox, code: str) -> None:
    r = sb.execute(code)
    assert r.success, (r.error, r.trap)


def test_undo_puts_back_the_state_before_the_last_cell(workspace: Path, mode: str) -> None:
    sb = make_sandbox(workspace)
    try:
        assert sb._guest.checkpoints.checkpoint is not None
        assert sb._guest.checkpoints.checkpoint.incremental is (mode == "incremental")
        ok(sb, "a = 1")
        ok(sb, "a = 2; b = [0] * 10**6")
        assert peek(sb, "a") == "2"
        assert sb.undo() is True
        assert peek(sb, "a, 'b' in globals()") == "(1, False)"
        assert sb.undo() is False  # one level only
        assert "already undone" in (sb.undo_unavailable_reason() or "")
        assert peek(sb, "a") == "1"
        # The interpreter carries on normally, and the next cell can be undone in turn.
        ok(sb, "c = [a] * 1000; a = 5")
        assert peek(sb, "len(c), a") == "(1000, 5)"
        assert sb.undo() is True
        assert peek(sb, "a, 'c' in globals()") == "(1, False)"
    finally:
        sb.close()


def test_nothing_to_undo_before_the_first_cell(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        assert sb.undo() is False
        assert "no cell" in (sb.undo_unavailable_reason() or "")
        ok(sb, "a = 1")
        assert sb.undo_unavailable_reason() is None
        assert sb.undo() is True
        assert peek(sb, "'a' in globals()") == "False"
    finally:
        sb.close()


@pytest.mark.slow
def test_queries_after_the_cell_do_not_move_the_undo_point(workspace: Path, mode: str) -> None:
    sb = make_sandbox(workspace)
    try:
        ok(sb, "import json\na = 1")
        ok(sb, "a = 2\nnames = {f'name{i}': i for i in range(50_000)}")
        # Queries write memory of their own (and this one even changes a variable):
        # undo still goes back to before the last cell, past them.
        assert sb.query("complete", code="names.", cursor_pos=6)
        assert sb.query("inspect", code="a", cursor_pos=1)["found"]
        assert peek(sb, "globals().__setitem__('from_query', list(range(10_000)))") == "None"
        assert peek(sb, "len(from_query)") == "10000"
        assert sb.undo() is True
        assert peek(sb, "a, 'names' in globals(), 'from_query' in globals(), json.dumps([a])") == "(1, False, False, '[1]')"
        ok(sb, "a += 1")
        assert peek(sb, "a") == "2"
    finally:
        sb.close()


@pytest.mark.slow
def test_undo_of_a_cell_that_grew_memory_a_lot_gives_the_growth_back(workspace: Path, mode: str) -> None:
    sb = make_sandbox(workspace, memory_bytes=1024 * 2**20)
    try:
        ok(sb, "keep = 1")
        small = sb.execute("1").memory_used_bytes
        r = sb.execute("big = bytearray(300 * 2**20)\nkeep = 2")
        assert r.success and r.memory_used_bytes > 300 * 2**20
        assert sb.undo() is True
        r = sb.execute("keep, 'big' in globals()")
        assert r.outputs[0].data["text/plain"] == "(1, False)"
        assert r.memory_used_bytes < small + 64 * 2**20  # restored into a fresh instance
        # Later cells run normally, growth included.
        r = sb.execute("more = bytearray(600 * 2**20)\nprint(len(more) >> 20, keep)")
        assert r.success, r.error
        assert r.stdout == "600 1\n"
    finally:
        sb.close()


def test_undo_of_a_cell_that_grew_memory_a_little_keeps_the_instance(workspace: Path, mode: str) -> None:
    sb = make_sandbox(workspace)
    try:
        ok(sb, "keep = 1")
        ok(sb, "mid = bytearray(20 * 2**20)\nkeep = 2")
        assert sb.undo() is True
        assert peek(sb, "keep, 'mid' in globals()") == "(1, False)"
        r = sb.execute("mid = bytearray(30 * 2**20)\nprint(len(mid) >> 20, keep)")
        assert r.stdout == "30 1\n", r.error
    finally:
        sb.close()


def test_undo_does_not_touch_files_the_cell_wrote(workspace: Path) -> None:
    (workspace / "old.txt").write_text("old")
    sb = make_sandbox(workspace)
    try:
        ok(sb, "n = 0")
        ok(sb, "open('new.txt', 'w').write('new')\nopen('old.txt', 'a').write('+more')\n"
               "import os\nos.remove('gone.txt') if os.path.exists('gone.txt') else None\nn = 1")
        assert sb.undo() is True
        assert peek(sb, "n") == "0"
        assert (workspace / "new.txt").read_text() == "new"
        assert (workspace / "old.txt").read_text() == "old+more"
    finally:
        sb.close()


def test_undo_after_a_cell_that_raised_undoes_that_cell(workspace: Path) -> None:
    # A cell that raises has run: what it did before raising is kept, so it is the
    # cell that undo undoes.
    sb = make_sandbox(workspace)
    try:
        ok(sb, "a = 1")
        r = sb.execute("a = 2\nhalf = 1\n1 / 0")
        assert not r.success and r.error is not None and r.error.ename == "ZeroDivisionError"
        assert peek(sb, "a") == "2"
        assert sb.undo() is True
        assert peek(sb, "a, 'half' in globals()") == "(1, False)"
    finally:
        sb.close()


def test_undo_after_a_stopped_cell_undoes_the_last_cell_that_completed(workspace: Path) -> None:
    # A cell stopped by a limit is rolled back already: it changed nothing, so undo
    # goes back past the last cell that completed before it.
    sb = make_sandbox(workspace, cpu_seconds=0.05)
    try:
        ok(sb, "a = 1")
        ok(sb, "a = 2")
        r = sb.execute("a = 3\nf = open('during.txt', 'w')" + TRAP)
        assert r.trap == "cpu_time" and r.rolled_back
        assert peek(sb, "a") == "2"
        assert sb.undo() is True
        assert peek(sb, "a") == "1"
        assert sb.undo() is False
    finally:
        sb.close()


def test_nothing_to_undo_after_restart_or_exit(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        ok(sb, "a = 1")
        sb.restart()
        assert sb.undo() is False
        assert "no cell" in (sb.undo_unavailable_reason() or "")
        ok(sb, "a = 1")
        r = sb.execute("exit()")
        assert r.restarted
        assert sb.undo() is False
        ok(sb, "b = 2")
        assert sb.undo() is True
        assert peek(sb, "'b' in globals()") == "False"
    finally:
        sb.close()


def test_files_the_undone_cell_left_open_are_closed_on_the_host(workspace: Path, mode: str) -> None:
    sb = make_sandbox(workspace)
    try:
        ok(sb, "import os")
        sb._guest.wait_idle()
        before_host = len(os.listdir("/proc/self/fd"))
        before_guest = sb._guest.files.ledger.open_count
        for _ in range(3):
            ok(sb, "fs = [open(f'f{i}.txt', 'w') for i in range(50)]")
            assert sb._guest.files.ledger.open_count >= before_guest + 50
            assert sb.undo() is True
            assert sb._guest.files.ledger.open_count == before_guest
        sb._guest.wait_idle()
        assert len(os.listdir("/proc/self/fd")) - before_host < 5
        assert peek(sb, "'fs' in globals()") == "False"
        ok(sb, "g = open('g.txt', 'w')\ng.write('ok')\ng.close()")
        assert (workspace / "g.txt").read_text() == "ok"
    finally:
        sb.close()


def test_a_file_the_undone_cell_closed_is_open_again_and_never_aliased(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        ok(sb, "f = open('a.txt', 'w')")
        ok(sb, "f.write('x')\nf.close()")
        assert (workspace / "a.txt").read_text() == "x"  # files are not rolled back
        assert sb.undo() is True
        assert peek(sb, "f.closed") == "False"
        # Its descriptor stayed open on the host: a new file gets another number.
        ok(sb, "g = open('b.txt', 'w')\nassert g.fileno() != f.fileno()\n"
               "g.write('B'); g.close()\nf.write('A'); f.close()")
        assert (workspace / "b.txt").read_text() == "B"
        assert (workspace / "a.txt").read_text() == "A"  # f wrote at its pre-undo offset, 0
    finally:
        sb.close()


def test_undo_puts_file_offsets_back(workspace: Path) -> None:
    (workspace / "data.txt").write_text("0123456789")
    sb = make_sandbox(workspace)
    try:
        ok(sb, "f = open('data.txt', 'rb', buffering=0)\nfirst = f.read(3)")
        ok(sb, "second = f.read(3)")
        assert sb.undo() is True
        assert peek(sb, "'second' in globals(), f.read(3)") == "(False, b'345')"
    finally:
        sb.close()


def test_a_cell_that_overwrites_too_much_memory_keeps_no_undo_record(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not make_sandbox_is_incremental(workspace):
        pytest.skip("the journal exists only with incremental checkpoints")
    monkeypatch.setattr(memory_checkpoint, "UNDO_JOURNAL_MAX", 4 * 2**20)
    sb = make_sandbox(workspace)
    try:
        ok(sb, "buf = bytearray(16 * 2**20)")
        ok(sb, "buf[:] = b'x' * len(buf)")
        assert sb.undo() is False
        assert "MiB" in (sb.undo_unavailable_reason() or "")
        assert peek(sb, "buf[:3]") == "bytearray(b'xxx')"
        ok(sb, "small = 1")  # a later, smaller cell can be undone again
        assert sb.undo() is True
        assert peek(sb, "'small' in globals(), buf[:3]") == "(False, bytearray(b'xxx'))"
    finally:
        sb.close()


def make_sandbox_is_incremental(workspace: Path) -> bool:
    from wasm_kernel.host.dirty_pages import DirtyPages

    tracker = DirtyPages.open()
    if tracker is None:
        return False
    tracker.close()
    return True


def test_a_descriptor_kept_for_undo_is_closed_once_the_next_cell_completes(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    ledger = sb._guest.files.ledger
    try:
        ok(sb, "import errno, os\nf = open('a.txt', 'w')\nfd = f.fileno()")
        sb._guest.wait_idle()
        opened = ledger.open_count
        # The guest closes it; the host keeps it open while undo may still need it,
        # and a second close of that number fails as it should.
        r = sb.execute("f.close()\ntry:\n    os.close(fd)\nexcept OSError as e:\n    print(e.errno == errno.EBADF)")
        assert r.stdout == "True\n", (r.stdout, r.error)
        sb._guest.wait_idle()
        assert ledger.open_count == opened
        ok(sb, "x = 1")  # a new undo point: the kept descriptor is closed for real
        sb._guest.wait_idle()
        assert ledger.open_count == opened - 1
        assert sb.undo() is True  # undoes `x = 1` only
        assert peek(sb, "f.closed, 'x' in globals()") == "(True, False)"
    finally:
        sb.close()
