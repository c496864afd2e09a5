"""Per-cell file change tracking: SandboxResult.files_created / files_modified /
files_deleted, and the WorkspaceSnapshot underneath.

What counts as a change (pinned here):
- paths are workspace-relative with "/" separators; only files and symlinks are
  entries (an empty folder is not a file);
- a file is modified when its lstat identity (kind, size, mtime, ctime, inode)
  changed, or, when those stamps cannot tell (a same-size rewrite inside one clock
  tick), when its content hash changed;
- rewriting a file with identical bytes is reported as modified: the rewrite moved
  its mtime/ctime, and a snapshot cannot know nobody relies on the stamp. Only a
  rewrite that leaves both stamps and content unchanged is invisible, and then
  nothing observable changed. A cell that only reads reports nothing;
- the before-snapshot is taken when execute() starts, so host edits made between
  cells are never blamed on the next cell;
- symlinks are entries of their own, compared by target text, never followed.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wasm_kernel import PythonSandbox, SandboxResult, WorkspaceSnapshot
from wasm_kernel.core.file_changes import RACY_WINDOW_NS, FileChanges
from wasm_kernel.host.safe_fs import MAX_WALK_DEPTH, MAX_WALK_PATH
from wasm_kernel.kernel.file_changes_display import (
    FILE_CHANGES_MIME,
    MAX_DETAIL_ROWS,
    MAX_FOLDERS,
    file_changes_bundle,
)
from wasm_kernel.kernel.limit_values import format_size
from wasm_kernel.sessions.workspace_fs import WorkspaceEntry

from support.sandboxes import make_sandbox


def changes(result: SandboxResult) -> tuple[list[str], list[str], list[str]]:
    return result.files_created, result.files_modified, result.files_deleted


def run(sb: PythonSandbox, code: str, **kwargs: Any) -> SandboxResult:
    result = sb.execute("import os, shutil\n" + code, **kwargs)
    assert result.success, (result.error, result.stderr)
    return result


# --- through the sandbox ---------------------------------------------------------------


def test_new_files_in_nested_folders_are_reported_as_created_with_workspace_relative_paths(
    sandbox: PythonSandbox, workspace: Path
) -> None:
    r = run(
        sandbox,
        "os.makedirs('sub/dir')\nos.makedirs('empty/folder')\n"
        "open('top.txt', 'w').write('t')\nopen('sub/dir/f.txt', 'w').write('f')\n"
        "open('sub/g.bin', 'wb').write(bytes(range(256)))\nopen('/tmp/not_workspace', 'w').write('x')",
    )
    assert changes(r) == (["sub/dir/f.txt", "sub/g.bin", "top.txt"], [], [])
    assert (workspace / "sub/dir/f.txt").read_text() == "f"


def test_changes_to_preexisting_files_are_reported_as_modified_and_deleted(
    sandbox: PythonSandbox, workspace: Path
) -> None:
    (workspace / "data/deep").mkdir(parents=True)
    for name in ("data/a.txt", "data/deep/b.txt", "data/deep/c.txt", "untouched.txt"):
        (workspace / name).write_text(name)
    r = run(
        sandbox,
        "open('data/a.txt', 'a').write('+more')\n"
        "open('data/deep/b.txt', 'w').write('completely different length')\n"
        "os.remove('data/deep/c.txt')\n"
        "open('untouched.txt').read()",
    )
    assert changes(r) == ([], ["data/a.txt", "data/deep/b.txt"], ["data/deep/c.txt"])


def test_a_cell_that_only_reads_reports_no_changes(sandbox: PythonSandbox, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub/f.txt").write_text("x")
    run(sandbox, "open('g.txt', 'w').write('g')")
    r = run(sandbox, "open('sub/f.txt').read(); open('g.txt', 'rb').read(); os.listdir('sub'); os.stat('g.txt')")
    assert changes(r) == ([], [], [])


def test_same_size_rewrite_in_the_very_next_cell_is_reported_as_modified(sandbox: PythonSandbox) -> None:
    assert changes(run(sandbox, "open('f.txt', 'w').write('aaaa')")) == (["f.txt"], [], [])
    # Back-to-back cells, same size, well within the same second (and possibly
    # within the same filesystem clock tick): every rewrite must still show.
    for content in ("bbbb", "aaaa", "cccc", "dddd"):
        r = run(sandbox, f"open('f.txt', 'w').write({content!r})")
        assert changes(r) == ([], ["f.txt"], []), content


def test_rewrite_with_identical_bytes_is_reported_because_the_file_was_rewritten(sandbox: PythonSandbox) -> None:
    run(sandbox, "open('f.txt', 'w').write('same')")
    time.sleep(0.05)  # past any coarse timestamp tick, so the rewrite moves the stamps
    r = run(sandbox, "open('f.txt', 'w').write('same')")
    assert changes(r) == ([], ["f.txt"], [])


def test_host_edits_between_cells_are_not_attributed_to_the_next_cell(sandbox: PythonSandbox, workspace: Path) -> None:
    run(sandbox, "open('a.txt', 'w').write('aaaa')\nopen('b.txt', 'w').write('b')\nopen('keep.txt', 'w').write('k')")
    # The host edits between cells: same-size rewrite, deletion, creations.
    (workspace / "a.txt").write_text("AAAA")
    (workspace / "b.txt").unlink()
    (workspace / "c.txt").write_text("c")
    (workspace / "hostdir").mkdir()
    (workspace / "hostdir/d.txt").write_text("d")
    os.symlink("c.txt", workspace / "hostlink")
    r = run(sandbox, "open('e.txt', 'w').write('e')")
    assert changes(r) == (["e.txt"], [], [])
    r = run(sandbox, "print(open('a.txt').read())")
    assert r.stdout == "AAAA\n" and changes(r) == ([], [], [])


def test_files_written_by_a_failing_or_stopped_cell_are_still_reported(workspace: Path) -> None:
    sb = make_sandbox(workspace, deadline_seconds=0.5)
    try:
        r = sb.execute("open('before_error.txt', 'w').write('x')\nraise RuntimeError('boom')")
        assert not r.success and r.error is not None
        assert changes(r) == (["before_error.txt"], [], [])
        r = sb.execute("open('before_trap.txt', 'w').write('x')\nopen('before_error.txt', 'a').write('y')\nwhile True: pass")
        assert r.trap == "deadline" and r.rolled_back
        # Rollback restores the interpreter, not the files: they are kept and reported.
        assert changes(r) == (["before_trap.txt"], ["before_error.txt"], [])
        assert (workspace / "before_error.txt").read_text() == "xy"
    finally:
        sb.close()


def test_renames_report_the_old_path_deleted_and_the_new_path_created(sandbox: PythonSandbox, workspace: Path) -> None:
    (workspace / "d/e").mkdir(parents=True)
    (workspace / "d/e/f.txt").write_text("f")
    (workspace / "old.txt").write_text("o")
    (workspace / "target.txt").write_text("target")
    r = run(sandbox, "os.rename('old.txt', 'new.txt')\nos.rename('d', 'moved')\nos.replace('new.txt', 'target.txt')")
    assert changes(r) == (["moved/e/f.txt"], ["target.txt"], ["d/e/f.txt", "old.txt"])


def test_deleting_a_whole_folder_reports_every_file_in_it(sandbox: PythonSandbox, workspace: Path) -> None:
    files = ["data/a.txt", "data/x/b.txt", "data/x/y/c.txt", "data/x/y/z/d.bin"]
    for name in files:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(name)
    os.symlink("a.txt", workspace / "data/lnk")
    (workspace / "data/empty").mkdir()
    (workspace / "keep.txt").write_text("keep")
    r = run(sandbox, "shutil.rmtree('data')")
    assert changes(r) == ([], [], sorted([*files, "data/lnk"]))
    assert sorted(p.name for p in workspace.iterdir()) == ["keep.txt"]


def test_guest_symlinks_are_reported_as_created_and_retargeting_as_modified(
    sandbox: PythonSandbox, workspace: Path
) -> None:
    r = run(
        sandbox,
        "open('a.txt', 'w').write('a')\nopen('b.txt', 'w').write('b')\n"
        "os.symlink('a.txt', 'lnk')\nos.symlink('missing.txt', 'dangling')\n"
        "os.makedirs('sub')\nos.symlink('../a.txt', 'sub/up')",
    )
    assert changes(r) == (["a.txt", "b.txt", "dangling", "lnk", "sub/up"], [], [])
    # Same length target, new text: the link itself changed.
    r = run(sandbox, "os.remove('lnk')\nos.symlink('b.txt', 'lnk')")
    assert changes(r) == ([], ["lnk"], [])
    assert os.readlink(workspace / "lnk") == "b.txt"
    # Writing through a link changes its target, not the link.
    r = run(sandbox, "open('lnk', 'a').write('+')")
    assert changes(r) == ([], ["b.txt"], [])
    # A link replacing a file (and a file replacing a link) is a modification.
    r = run(sandbox, "os.remove('a.txt')\nos.symlink('b.txt', 'a.txt')\nos.remove('dangling')\nopen('dangling', 'w').write('now a file')")
    assert changes(r) == ([], ["a.txt", "dangling"], [])
    r = run(sandbox, "os.remove('lnk')\nos.remove('sub/up')")
    assert changes(r) == ([], [], ["lnk", "sub/up"])


def _remove_deep_tree(top: Path) -> None:
    """Delete a folder chain of any depth without recursion (shutil.rmtree recurses
    per level on Python < 3.14, and pytest would choke cleaning it up later)."""
    queue, n = [top], 0
    while queue:
        cur = queue.pop()
        with os.scandir(cur) as it:
            for entry in list(it):
                if entry.is_dir(follow_symlinks=False):
                    n += 1
                    lifted = top.parent / f".lifted-{n}"  # move up: paths stay short
                    os.rename(entry.path, lifted)
                    queue.append(lifted)
                else:
                    os.unlink(entry.path)
        os.rmdir(cur)


@pytest.mark.slow
def test_a_tree_deeper_than_the_walk_limit_is_said_and_does_not_break_the_sandbox(
    sandbox: PythonSandbox, workspace: Path
) -> None:
    # Regression: the snapshot used to recurse once per folder, so a guest could make
    # every later execute() raise RecursionError on the host; walking every level
    # also made each cell cost the square of the depth. Now the walk stops at
    # MAX_WALK_DEPTH and the result says so.
    depth = sys.getrecursionlimit() + 100
    shallow = "d/" * (MAX_WALK_DEPTH - 1) + "shallow.txt"
    deep = "d/" * depth + "deep.txt"
    try:
        r = run(sandbox, f"for _ in range({depth}):\n    os.mkdir('d'); os.chdir('d')\nopen('deep.txt', 'w').write('x')\n"
                         f"os.chdir('/app')\nopen({shallow!r}, 'w').write('s')")
        assert changes(r) == ([shallow], [], [])
        assert r.metadata["files_not_tracked"] == f"folders nest more than {MAX_WALK_DEPTH} deep"
        assert run(sandbox, "print('still alive')").stdout == "still alive\n"
        r = run(sandbox, f"open({deep!r}, 'a').write('y')\nopen({shallow!r}, 'a').write('t')")
        assert changes(r) == ([], [shallow], [])
        r = run(sandbox, "shutil.rmtree('d')")
        assert changes(r) == ([], [], [shallow])
        assert "files_not_tracked" not in r.metadata
    finally:
        if (workspace / "d").exists():
            _remove_deep_tree(workspace / "d")


def test_a_file_whose_path_exceeds_path_max_is_said_not_to_be_tracked(sandbox: PythonSandbox, workspace: Path) -> None:
    # WASI resolves paths one component at a time, so with dir_fd a guest can build
    # paths far longer than the host's PATH_MAX. Regression: such files used to be
    # silently missing from the report; now the report says it is incomplete.
    name = "n" * 200
    try:
        r = run(
            sandbox,
            f"fd = os.open('.', os.O_RDONLY)\nfor _ in range(30):\n    os.mkdir({name!r}, dir_fd=fd)\n"
            f"    sub = os.open({name!r}, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)\n    os.close(fd)\n    fd = sub\n"
            "w = os.open('deep.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd)\nos.write(w, b'hidden?')\nos.close(w)\nos.close(fd)\n"
            "open('beside.txt', 'w').write('b')",
        )
        deep = "/".join([name] * 30 + ["deep.txt"])
        assert len(str(workspace / deep)) > os.pathconf("/", "PC_PATH_MAX")
        assert changes(r) == (["beside.txt"], [], [])
        assert r.metadata["files_not_tracked"] == f"paths run longer than {MAX_WALK_PATH:,} characters"
    finally:
        shutil.rmtree(workspace / name, ignore_errors=True)  # fd-based on the host: fine with long paths
    assert changes(run(sandbox, "pass")) == ([], [], [])


@pytest.fixture
def outside_tree(tmp_path: Path) -> Path:
    """A big host folder outside the workspace."""
    big = tmp_path / "big"
    for i in range(20):
        d = big / f"d{i}"
        d.mkdir(parents=True)
        for j in range(10):
            (d / f"f{j}.txt").write_text(f"{i}/{j}")
    return big


def test_change_tracking_never_follows_symlinks_out_of_the_workspace(
    workspace: Path, outside_tree: Path, sandbox: PythonSandbox
) -> None:
    os.symlink(outside_tree, workspace / "abs_outside")
    os.symlink("../big", workspace / "rel_outside")
    os.symlink(outside_tree / "d0" / "f0.txt", workspace / "file_outside")
    os.symlink(".", workspace / "loop")

    def host_edits_outside_during_the_cell(prompt: str, password: bool) -> str:
        (outside_tree / "d0" / "f0.txt").write_text("changed by host, outside")
        (outside_tree / "d1" / "f1.txt").unlink()
        (outside_tree / "d2" / "new.txt").write_text("new")
        (outside_tree / "d99").mkdir()
        (outside_tree / "d99" / "x.txt").write_text("x")
        return "ok"

    # The host changes files outside while the cell runs (input() blocks the guest
    # until the callback returns): none of it belongs in the cell's report.
    r = run(sandbox, "input('go')\nopen('mine.txt', 'w').write('m')", on_input=host_edits_outside_during_the_cell)
    assert changes(r) == (["mine.txt"], [], [])

    # A symlink planted during a cell is one created entry, never its contents.
    def plant(prompt: str, password: bool) -> str:
        os.symlink(outside_tree, workspace / "late_link")
        return "ok"

    r = run(sandbox, "input('go')", on_input=plant)
    assert changes(r) == (["late_link"], [], [])
    # Removing such links deletes only the links; the folders they pointed to stay.
    r = run(sandbox, "for name in ('abs_outside', 'rel_outside', 'late_link', 'loop'):\n    os.remove(name)")
    assert changes(r) == ([], [], ["abs_outside", "late_link", "loop", "rel_outside"])
    assert len(list(outside_tree.rglob("*.txt"))) == 201


# --- WorkspaceSnapshot directly on a host folder -------------------------------------


def test_snapshot_diff_reports_created_modified_and_deleted_files(tmp_path: Path) -> None:
    (tmp_path / "a/b").mkdir(parents=True)
    (tmp_path / "a/b/keep.txt").write_text("keep")
    (tmp_path / "a/change.txt").write_text("one")
    (tmp_path / "gone.txt").write_text("gone")
    before = WorkspaceSnapshot.take(tmp_path)
    assert set(before.entries) == {"a/b/keep.txt", "a/change.txt", "gone.txt"}
    (tmp_path / "a/change.txt").write_text("two, longer")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "a/b/c").mkdir()
    (tmp_path / "a/b/c/new.txt").write_text("new")
    (tmp_path / "emptydir").mkdir()
    diff = before.diff(WorkspaceSnapshot.take(tmp_path))
    assert (diff.created, diff.modified, diff.deleted) == (["a/b/c/new.txt"], ["a/change.txt"], ["gone.txt"])
    assert diff
    # Nothing changed since: an empty, falsy diff.
    again = WorkspaceSnapshot.take(tmp_path)
    assert not again.diff(WorkspaceSnapshot.take(tmp_path))


def test_recent_files_carry_a_content_hash_and_links_their_target(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("aaaa")
    os.symlink("f.txt", tmp_path / "lnk")
    snap = WorkspaceSnapshot.take(tmp_path)
    # Written just now: inside the racy window, so the stamps alone are not trusted.
    assert snap.taken_ns - snap.entries["f.txt"].mtime_ns < RACY_WINDOW_NS
    assert snap.entries["f.txt"].digest is not None
    assert snap.entries["lnk"].kind == "link" and snap.entries["lnk"].digest == b"f.txt"


def test_same_size_rewrite_with_forced_identical_mtime_is_still_modified(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("aaaa")
    st = f.stat()
    before = WorkspaceSnapshot.take(tmp_path)
    f.write_text("bbbb")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime_ns
    after = WorkspaceSnapshot.take(tmp_path)
    assert after.entries["f.txt"].mtime_ns == before.entries["f.txt"].mtime_ns
    assert after.entries["f.txt"].size == before.entries["f.txt"].size
    assert before.diff(after).modified == ["f.txt"]


@pytest.mark.slow
def test_old_file_rewritten_with_same_size_and_mtime_is_modified_without_any_hash(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("aaaa")
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.1)  # let the file age out of the racy window
    st = f.stat()
    before = WorkspaceSnapshot.take(tmp_path)
    assert before.entries["f.txt"].digest is None  # stamps only: no hash to fall back on
    f.write_text("bbbb")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = WorkspaceSnapshot.take(tmp_path)
    assert (after.entries["f.txt"].size, after.entries["f.txt"].mtime_ns) == (st.st_size, st.st_mtime_ns)
    # Only the ctime (which no caller can set back) gives the rewrite away.
    assert before.diff(after).modified == ["f.txt"]


def test_content_hash_catches_a_rewrite_that_left_every_stamp_identical(tmp_path: Path) -> None:
    """The racy case on a coarse-clock filesystem: same size, and mtime, ctime and
    inode all unchanged because the rewrite landed in the same clock tick. Modern
    kernels (multigrain timestamps) make that hard to produce on demand, so the
    after-entry's stamps are set to the before-entry's: only the hash can tell."""
    f = tmp_path / "f.txt"
    f.write_text("aaaa")
    before = WorkspaceSnapshot.take(tmp_path)
    f.write_text("bbbb")
    real_after = WorkspaceSnapshot.take(tmp_path)
    old = before.entries["f.txt"]

    def same_stamps(digest: bytes | None) -> WorkspaceSnapshot:
        entry = dataclasses.replace(old, digest=digest)
        return WorkspaceSnapshot(tmp_path, {"f.txt": entry}, real_after.taken_ns)

    assert old.digest is not None
    # The after-snapshot hashed the new content itself...
    assert before.diff(same_stamps(real_after.entries["f.txt"].digest)).modified == ["f.txt"]
    # ...or had no hash (it was not racy any more): the file is hashed now.
    assert before.diff(same_stamps(None)).modified == ["f.txt"]
    # Control: identical stamps and identical content are not a modification.
    f.write_text("aaaa")
    assert before.diff(same_stamps(old.digest)).modified == []
    assert before.diff(same_stamps(None)).modified == []


def test_link_retargeted_with_identical_stamps_is_modified(tmp_path: Path) -> None:
    os.symlink("aaaa", tmp_path / "lnk")
    before = WorkspaceSnapshot.take(tmp_path)
    os.remove(tmp_path / "lnk")
    os.symlink("bbbb", tmp_path / "lnk")
    after = WorkspaceSnapshot.take(tmp_path)
    forged = WorkspaceSnapshot(
        tmp_path, {"lnk": dataclasses.replace(before.entries["lnk"], digest=after.entries["lnk"].digest)}, after.taken_ns
    )
    assert before.diff(after).modified == ["lnk"]
    assert before.diff(forged).modified == ["lnk"]


def test_snapshot_never_follows_symlinks_and_survives_loops(tmp_path: Path, outside_tree: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "own.txt").write_text("own")
    os.symlink(outside_tree, ws / "abs_dir")
    os.symlink("../big", ws / "rel_dir")
    os.symlink(outside_tree / "d0/f0.txt", ws / "abs_file")
    os.symlink(".", ws / "loop")
    os.symlink("loop2", ws / "loop2")
    before = WorkspaceSnapshot.take(ws)
    assert {k: v.kind for k, v in before.entries.items()} == {
        "own.txt": "file", "abs_dir": "link", "rel_dir": "link", "abs_file": "link", "loop": "link", "loop2": "link",
    }
    assert before.entries["abs_dir"].digest == os.fsencode(str(outside_tree))
    # Changes behind the links are not changes of the workspace.
    (outside_tree / "d0/f0.txt").write_text("a much longer replacement text")
    shutil.rmtree(outside_tree / "d3")
    (outside_tree / "d4/new.txt").write_text("new")
    assert not before.diff(WorkspaceSnapshot.take(ws))


def test_deep_tree_with_siblings_at_every_level_is_walked_completely(tmp_path: Path) -> None:
    # As deep as a walk goes, with a side branch at every level, so folders are left
    # and re-entered at depth; diff can still hash deep files.
    depth = MAX_WALK_DEPTH - 1
    chain = tmp_path
    expected = set()
    for level in range(depth):
        chain = chain / "d"
        (chain / f"side{level}").mkdir(parents=True)
        (chain / f"side{level}" / "f.txt").write_text(str(level))
        expected.add("d/" * (level + 1) + f"side{level}/f.txt")
    (chain / "bottom.txt").write_text("bottom")
    expected.add("d/" * depth + "bottom.txt")
    before = WorkspaceSnapshot.take(tmp_path)
    assert set(before.entries) == expected and before.cut is None
    bottom = "d/" * depth + "bottom.txt"
    (tmp_path / bottom).write_text("BOTTOM")
    forged = WorkspaceSnapshot(tmp_path, {**before.entries, bottom: dataclasses.replace(before.entries[bottom], digest=None)}, before.taken_ns)
    assert before.diff(forged).modified == [bottom]
    assert before.diff(WorkspaceSnapshot.take(tmp_path)).modified == [bottom]


def _in_thread(fn, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - reported below
            box["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    return t.is_alive(), box


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "pipe"
    os.mkfifo(path)
    yield path
    # If a regression made the snapshot open the FIFO blocking, release the stuck
    # thread by opening the other end.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def test_snapshot_of_a_fifo_does_not_hang_and_records_it_as_other(fifo: Path) -> None:
    ws = fifo.parent
    (ws / "f.txt").write_text("f")
    stuck, box = _in_thread(lambda: WorkspaceSnapshot.take(ws))
    assert not stuck, "WorkspaceSnapshot.take hung on a FIFO"
    snap = box["value"]
    assert isinstance(snap, WorkspaceSnapshot)
    assert snap.entries["pipe"].kind == "other" and snap.entries["pipe"].digest is None
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    # A FIFO replaced by a regular file is a modification.
    os.remove(fifo)
    fifo.write_text("now a file")
    assert snap.diff(WorkspaceSnapshot.take(ws)).modified == ["pipe"]


def test_diff_does_not_hang_when_a_racy_file_was_swapped_for_a_fifo(fifo: Path) -> None:
    # The before-snapshot saw a regular file with a hash; at diff time the path is a
    # FIFO but (as on a coarse clock) the after-entry carries the old stamps and no
    # hash, so diff hashes the path itself: it must not block opening the FIFO.
    ws = fifo.parent
    os.remove(fifo)
    (ws / "pipe").write_text("was a file")
    before = WorkspaceSnapshot.take(ws)
    os.remove(ws / "pipe")
    os.mkfifo(fifo)
    old = before.entries["pipe"]
    forged = WorkspaceSnapshot(ws, {"pipe": dataclasses.replace(old, digest=None)}, before.taken_ns)
    stuck, box = _in_thread(lambda: before.diff(forged))
    assert not stuck, "diff hung opening a FIFO"
    assert "error" not in box, box
    assert box["value"].modified == ["pipe"]  # type: ignore[attr-defined]


# --- the display after a cell (kernel/file_changes_display.py) -------------------------


def bundle(created: list[str], modified: list[str] = [], deleted: list[str] = [],
           size: int = 1000) -> dict[str, Any]:
    sizes = {p: WorkspaceEntry(p.rpartition("/")[2], p, "file", size, 0.0, 0.0) for p in created + modified}
    return file_changes_bundle(FileChanges(created, modified, deleted), sizes, execution_count=7)


def list_rows(page: str) -> int:
    """The rows of the change list (the folder table's rows are in its own <table>)."""
    return page[page.index("<th>change</th>"):].count("<tr>")  # from past its header row


def test_twenty_changes_still_get_the_plain_table() -> None:
    created = [f"f{i:02}.txt" for i in range(20)]
    shown = bundle(created, size=5)
    assert shown["text/plain"] == "Files created: " + ", ".join(f"+{p} (5 B)" for p in created)
    page = shown["text/html"]
    assert page.startswith("<details open class='wasm-kernel-file-changes'><summary>Files: 20 created</summary>")
    assert list_rows(page) == 20 and "wasm-kernel-file-list" not in page and "folder" not in page
    assert shown[FILE_CHANGES_MIME]["summary"] == {
        "total": 20, "created": 20, "modified": 0, "deleted": 0, "more_folders": 0,
        "folders": [{"folder": "", "created": 20, "modified": 0, "deleted": 0, "bytes": 100}]}


def test_300_files_in_two_folders_summarise_per_folder_with_the_list_collapsed() -> None:
    created = [f"out/part-{i:03}.bin" for i in range(250)] + [f"data/{i}.csv" for i in range(50)]
    shown = bundle(created, modified=["notes.txt", "log.txt"], deleted=["data/old.csv"])
    assert shown["text/plain"] == (
        f"Files: 300 created, 2 modified, 1 deleted; out/ 250 files, {format_size(250_000)}; "
        f"data/ 51 files, {format_size(50_000)}; (top level) 2 files, {format_size(2000)}")
    page = shown["text/html"]
    assert "<summary>Files: 300 created, 2 modified, 1 deleted</summary>" in page
    assert ("<tr><td><code>out/</code></td><td style='text-align:right'>250</td><td style='text-align:right'>0"
            "</td><td style='text-align:right'>0</td>") in page
    # The full list is there, collapsed (no `open`), up to its cap, with how many more.
    assert "<details class='wasm-kernel-file-list'><summary>the first 200 of 303 changes</summary>" in page
    assert list_rows(page) == MAX_DETAIL_ROWS and "and 103 more" in page
    payload = shown[FILE_CHANGES_MIME]
    assert len(payload["created"]) == 300 and len(payload["modified"]) == 2  # the JSON keeps every path
    assert payload["summary"] == {
        "total": 303, "created": 300, "modified": 2, "deleted": 1, "more_folders": 0,
        "folders": [
            {"folder": "out", "created": 250, "modified": 0, "deleted": 0, "bytes": 250_000},
            {"folder": "data", "created": 50, "modified": 0, "deleted": 1, "bytes": 50_000},
            {"folder": "", "created": 0, "modified": 2, "deleted": 0, "bytes": 2000},
        ]}


def test_a_summary_under_the_list_cap_lists_every_change_collapsed() -> None:
    shown = bundle([f"out/{i}" for i in range(21)])
    assert "<summary>all 21 changes</summary>" in shown["text/html"] and "more" not in shown["text/html"]
    assert list_rows(shown["text/html"]) == 21


def test_many_folders_are_capped_with_how_many_more() -> None:
    created = [f"d{i:02}/{j}" for i in range(60) for j in range(1 + (i == 0))]
    shown = bundle(created)
    summary = shown[FILE_CHANGES_MIME]["summary"]
    assert len(summary["folders"]) == MAX_FOLDERS and summary["more_folders"] == 10
    assert summary["folders"][0]["folder"] == "d00"  # two files: the biggest first, then by name
    assert [f["folder"] for f in summary["folders"][1:3]] == ["d01", "d02"]
    assert shown["text/plain"].endswith("; and 50 more folders")  # text/plain names ten
    assert "and 10 more folders" in shown["text/html"]


HOSTILE = ["<img src=x onerror=alert(1)>.txt", "a, +b.txt", "x</code></td></tr><tr><td>forged"]


@pytest.mark.parametrize("padding", [0, 30], ids=["table", "summary"])
def test_hostile_file_names_are_escaped_and_cannot_fake_a_row(padding: int) -> None:
    created = HOSTILE + ["<b>evil</b>/in-a-folder.txt"] + [f"pad/{i}" for i in range(padding)]
    shown = bundle(created, size=3)
    page = shown["text/html"]
    assert "<img" not in page and "<b>" not in page and "</td></tr><tr><td>forged" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in page and "&lt;b&gt;evil&lt;/b&gt;/" in page
    assert list_rows(page) == len(created)
    plain = shown["text/plain"]
    if padding:  # the summary names folders only, quoted when one holds text/plain's separator
        assert plain.startswith("Files: 34 created; pad/ 30 files")
    else:  # the name with text/plain's entry separator is quoted: it stays one entry
        assert "+'a, +b.txt' (3 B)" in plain and ", +b.txt (3 B)" not in plain
    assert [e["path"] for e in shown[FILE_CHANGES_MIME]["created"]] == created  # the JSON as it is


def test_a_folder_name_with_a_separator_is_quoted_in_the_summary_line() -> None:
    shown = bundle([f"a; b/{i}" for i in range(21)])
    assert shown["text/plain"] == f"Files: 21 created; 'a; b/' 21 files, {format_size(21_000)}"


# -- one cell, several steps: FileChanges.then ------------------------------------------


@pytest.mark.parametrize(("first", "later", "whole"), [
    (FileChanges(["a"], [], []), FileChanges([], [], ["a"]), FileChanges([], [], [])),  # made, removed: nothing
    (FileChanges([], [], ["a"]), FileChanges(["a"], [], []), FileChanges([], ["a"], [])),  # removed, made again
    (FileChanges(["a"], [], []), FileChanges([], ["a"], []), FileChanges(["a"], [], [])),  # made, then written
    (FileChanges([], ["a"], []), FileChanges([], [], ["a"]), FileChanges([], [], ["a"])),  # written, then removed
    (FileChanges(["a"], ["b"], []), FileChanges(["c"], [], ["b"]), FileChanges(["a", "c"], [], ["b"])),
], ids=["made-removed", "removed-made", "made-written", "written-removed", "disjoint"])
def test_steps_of_one_cell_make_one_change_list(first: FileChanges, later: FileChanges, whole: FileChanges) -> None:
    assert first.then(later) == whole
    assert FileChanges.none().then(first) == first
