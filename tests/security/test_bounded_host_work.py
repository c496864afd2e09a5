"""Class 3: host work on guest-controlled data is bounded.

The guest controls what is in its workspace: huge and sparse files, FIFOs, trees
deeper than any recursion and paths longer than PATH_MAX. The host magics, the
file-change tracker and the display path must cost what they show, not what the
guest made. Sizes here are far past what an unbounded read could survive (a 64 GiB
sparse file read whole would exhaust the host), so these fail on unbounded code
by running out of memory or time, without any timing assertion.
"""

from __future__ import annotations

import os
import re

import pytest

from support.security_harness import Target
from wasm_kernel.sessions.session_workspace import SessionWorkspace

pytestmark = pytest.mark.slow  # deep trees and floods built in the guest

MAX_WALK_DEPTH = 64  # safe_fs.MAX_WALK_DEPTH, the documented depth a listing stops at

HUGE = 64 << 30  # apparent size of the sparse files


@pytest.fixture
def sparse(target: Target) -> str:
    """A 64 GiB sparse text file made on the host side (the quota stops a guest
    making one; it may have been made before the quota, or be a mount's), and
    counted in the session's disk ledger as a host tool's write would be."""
    path = target.workspace() / "huge.log"
    with open(path, "wb") as f:
        f.write(b"first line\n" * 10)
    os.truncate(path, HUGE)
    workspace = SessionWorkspace(target.root, target.kernel.session_id())
    workspace.charge(HUGE, 1, None, None, "the test's sparse file")
    yield "huge.log"
    path.unlink(missing_ok=True)
    workspace.refund(HUGE, 1)
    workspace.close()


def test_cat_of_a_huge_sparse_file_reads_only_what_it_shows(target: Target, sparse: str) -> None:
    run = target.run(f"%cat {sparse}")
    assert run.status == "error" and "binary file" in run.reply["content"]["evalue"]
    assert "64 GiB" in run.reply["content"]["evalue"]
    target.assert_safe(run)


def test_cat_of_a_big_text_file_shows_its_head_and_says_how_big(target: Target) -> None:
    path = target.workspace() / "big.txt"
    path.write_bytes(b"0123456789abcdef\n" * (200_000))  # 3.2 MiB of text
    try:
        run = target.run("%cat big.txt")
        assert run.status == "ok"
        text = run.stream()
        assert len(text) < (1 << 20) + 200
        assert re.search(r"showing the first 1 MiB of 3.\d+ MiB", text), text[-200:]
        target.assert_safe(run)
    finally:
        path.unlink()


def test_writefile_append_to_a_huge_sparse_file_never_reads_it(target: Target, sparse: str) -> None:
    # The quota counts apparent bytes, and a host write counts what the host wrote
    # before it (issue 20): 64 GiB is over the 2 GiB quota, so the append is refused
    # at once, in one line, without reading or changing the file.
    run = target.run(f"%%writefile -a {sparse}\nlast line")
    assert run.status == "error" and "disk quota" in run.reply["content"]["evalue"], run.reply["content"]
    assert (target.workspace() / sparse).stat().st_size == HUGE
    target.assert_safe(run)


@pytest.mark.parametrize("magic", ["%cat pipe", "%%writefile -a pipe\nx", "%%writefile pipe\nx"])
def test_a_fifo_in_the_workspace_never_hangs_a_magic(target: Target, magic: str) -> None:
    fifo = target.workspace() / "pipe"
    os.mkfifo(fifo)
    try:
        run = target.run(magic, timeout=60)
        if magic.startswith("%cat") or "-a" in magic:
            assert run.status == "error" and "not a regular file" in run.reply["content"]["evalue"]
        target.assert_safe(run)
    finally:
        fifo.unlink(missing_ok=True)


DEEP = 3000


@pytest.fixture
def deep_tree(target: Target) -> str:
    """A chain of folders far deeper than the recursion limit, made by the guest."""
    run = target.run(f"import os\nfd = os.open('/app', os.O_RDONLY)\nfor _ in range({DEEP}):\n"
                     "    os.mkdir('d', dir_fd=fd)\n    sub = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)\n"
                     "    os.close(fd)\n    fd = sub\n"
                     "os.close(os.open('bottom.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\nos.close(fd)")
    assert run.status == "ok", target.shown_text(run)
    stderr = run.stream("stderr")
    assert f"not every file change is shown: folders nest more than {MAX_WALK_DEPTH} deep" in stderr, stderr
    yield "d"
    if (target.workspace() / "d").exists():
        target.run("%rm -r d")


def test_files_on_a_deep_tree_stops_at_the_depth_limit_and_says_so(target: Target, deep_tree: str) -> None:
    run = target.run("%files")
    assert run.status == "ok"
    text = run.displays()[0]["data"]["text/plain"]
    assert f"the listing stopped early: folders nest more than {MAX_WALK_DEPTH} deep" in text
    target.assert_safe(run)


def test_rm_r_removes_a_tree_of_any_depth(target: Target, deep_tree: str) -> None:
    run = target.run(f"%rm -r {deep_tree}")
    assert run.status == "ok", target.shown_text(run)
    assert not (target.workspace() / deep_tree).exists()
    target.assert_safe(run)


def test_later_cells_on_a_deep_tree_stay_correct(target: Target, deep_tree: str) -> None:
    run = target.run("open('beside.txt', 'w').write('b')")
    assert run.reply["content"]["metadata"]["files_created"] == ["beside.txt"]
    target.run("%rm beside.txt")
    target.assert_safe(run)


@pytest.mark.parametrize("pattern", ["**/" * 2000 + "x", "*/" * 1000 + "*", "a/" * 3000, "[" * 4000, "**"])
def test_a_pathological_glob_is_answered_at_once(target: Target, pattern: str) -> None:
    run = target.run(f"%files {pattern}")
    assert run.status in ("ok", "error")
    target.assert_safe(run)


def test_a_wide_folder_listing_is_capped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from wasm_kernel.host.safe_fs import MAX_WALK_DEPTH as documented, FolderWalk

    assert documented == MAX_WALK_DEPTH
    for i in range(50):
        (tmp_path / f"f{i}").write_text("x")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk = FolderWalk(fd, max_entries=10)
        assert sum(len(f.entries) for f in walk) == 0  # the first folder alone is over the cap
        assert walk.cut == "the tree holds more than 10 entries"
        walk = FolderWalk(fd, max_entries=100)
        assert sum(len(f.entries) for f in walk) == 50 and walk.cut is None
    finally:
        os.close(fd)


def test_a_flood_of_displays_is_cut_at_the_display_limit(target: Target) -> None:
    target.run("%limits display=64KB")
    try:
        run = target.run("from IPython.display import HTML, display\nfor i in range(500):\n"
                         "    display(HTML('<b>' + 'x' * 10000 + '</b>'))\nkept = 1\n'result'")
        assert run.status == "ok"
        shown = run.displays()
        assert 1 <= len(shown) <= 7, len(shown)
        assert not run.of_type("execute_result")  # past the cap too
        assert "[rich output (display) was cut at 62.5 KiB; to see more: %limits display=" in run.stream("stderr")
        assert target.run("kept").of_type("execute_result")[0]["data"]["text/plain"] == "1"
        target.assert_safe(run)
    finally:
        target.run("%limits display=32MiB")


def test_deep_json_data_is_a_clear_error_and_the_cell_state_is_kept(target: Target) -> None:
    run = target.run("from IPython.display import JSON, display\nbefore = 1\nd = []\nfor _ in range(900):\n"
                     "    d = [d]\ndisplay(JSON(d))")
    assert run.status == "error"
    assert run.reply["content"]["evalue"].startswith("this output cannot be shown: ")
    cyclic = target.run("class C:\n    def _repr_json_(self):\n        d = {}\n        d['a'] = d\n        return d\nC()")
    assert cyclic.status == "error" and "Circular reference" in cyclic.reply["content"]["evalue"]
    assert target.run("before").of_type("execute_result")[0]["data"]["text/plain"] == "1"
    target.assert_safe(run)
