"""inotify-driven per-cell file changes: same answers as a full walk, at the cost
of the changes only, with a full walk as the fallback."""

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from inotify_simple import INotify, flags

from support.sandboxes import make_sandbox

from support.unprivileged import run_unprivileged
from wasm_kernel.core import workspace_tracker
from wasm_kernel.core.workspace_tracker import WorkspaceTracker


def test_folder_trees_created_renamed_and_removed_in_one_cell(workspace: Path) -> None:
    (workspace / "old").mkdir()
    (workspace / "old" / "x.txt").write_text("x")
    sb = make_sandbox(workspace)
    try:
        r = sb.execute(
            "import os, shutil\nos.makedirs('a/b/c')\nopen('a/b/c/deep.txt', 'w').write('d')\n"
            "os.rename('a', 'moved')\nshutil.rmtree('old')"
        )
        assert r.success, r.error
        assert r.files_created == ["moved/b/c/deep.txt"]
        assert r.files_deleted == ["old/x.txt"]
        r = sb.execute("os.rename('moved/b', 'moved/b2')\nopen('moved/b2/c/deep.txt', 'a').write('more')")
        assert (r.files_created, r.files_deleted, r.files_modified) == (
            ["moved/b2/c/deep.txt"], ["moved/b/c/deep.txt"], [])
    finally:
        sb.close()


def test_a_write_is_a_modification_even_when_size_and_stamps_match(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("open('same.txt', 'w').write('aaaa')")
        r = sb.execute("import os\nst = os.stat('same.txt')\nopen('same.txt', 'r+').write('bbbb')\n"
                       "os.utime('same.txt', ns=(st.st_atime_ns, st.st_mtime_ns))")
        assert r.files_modified == ["same.txt"]
    finally:
        sb.close()


@pytest.mark.slow
def test_more_events_than_the_queue_holds_fall_back_to_a_full_walk(workspace: Path) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 50_000:
        pytest.skip(f"inotify queue holds {limit} events; overflowing it would take too long")
    sb = make_sandbox(workspace)
    try:
        r = sb.execute(f"for i in range({limit + 2000}):\n    open(f'f{{i}}', 'w').close()")
        assert r.success
        assert len(r.files_created) == limit + 2000
        assert sb.execute("open('one-more', 'w').close()").files_created == ["one-more"]
    finally:
        sb.close()


def test_without_inotify_watches_the_tracker_walks_each_cell(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: object, path: str, mask: int) -> int:
        raise OSError(28, "No space left on device (inotify watch limit)")

    monkeypatch.setattr(workspace_tracker.INotify, "add_watch", refuse)
    tracker = WorkspaceTracker(workspace)
    assert not tracker.watching
    tracker.start_cell()
    (workspace / "new.txt").write_text("n")
    assert tracker.finish_cell().created == ["new.txt"]
    tracker.start_cell()
    (workspace / "new.txt").unlink()
    assert tracker.finish_cell().deleted == ["new.txt"]
    tracker.close()


def test_host_edits_between_cells_are_absorbed_not_reported(workspace: Path) -> None:
    tracker = WorkspaceTracker(workspace)
    try:
        (workspace / "host.txt").write_text("by the host")
        tracker.start_cell()
        (workspace / "cell.txt").write_text("by the cell")
        changes = tracker.finish_cell()
        assert changes.created == ["cell.txt"]
    finally:
        tracker.close()


def test_symlinked_folders_are_never_watched_or_walked(tmp_path: Path, workspace: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    tracker = WorkspaceTracker(workspace)
    try:
        assert set(tracker.entries) == {"link"}
        tracker.start_cell()
        (outside / "secret.txt").write_text("s")
        assert not tracker.finish_cell()
    finally:
        tracker.close()


def _owned_by_nobody(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, 65534, 65534)
    return path


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder `nobody` can reach (pytest's own sit in a root-only folder)."""
    base = Path(tempfile.mkdtemp(prefix="wk-nobody-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_with_no_inotify_instance_left_the_walk_still_reports_the_cell(open_tmp: Path) -> None:
    tmp_path = open_tmp
    # A real exhaustion: as its own user (limits are per user), take every inotify
    # instance the kernel allows, then track a cell.
    ws = _owned_by_nobody(tmp_path / "ws")

    def scenario() -> dict[str, object]:
        hogs = []
        try:
            while len(hogs) < 100_000:
                hogs.append(INotify())
        except OSError as err:
            exhausted = err.errno
        tracker = WorkspaceTracker(ws)
        tracker.start_cell()
        (ws / "made.txt").write_text("m")
        changes = tracker.finish_cell()
        for hog in hogs:
            hog.close()
        return {"errno": exhausted, "watching": tracker.watching, "created": changes.created}

    got = run_unprivileged(scenario)
    assert got == {"errno": errno.EMFILE, "watching": False, "created": ["made.txt"]}


@pytest.mark.slow
def test_when_watches_run_out_mid_cell_the_walk_still_reports_the_cell(open_tmp: Path) -> None:
    tmp_path = open_tmp
    ws = _owned_by_nobody(tmp_path / "ws")
    hog_dirs = _owned_by_nobody(tmp_path / "hog")
    limit = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    per_hog = limit // 100 + 1  # so that about 100 instances hold every watch
    for i in range(per_hog):
        _owned_by_nobody(hog_dirs / str(i))

    def scenario() -> dict[str, object]:
        tracker = WorkspaceTracker(ws)
        assert tracker.watching
        hogs, exhausted = [], None
        while exhausted is None:
            hog = INotify()
            hogs.append(hog)
            for i in range(per_hog):
                try:
                    hog.add_watch(str(hog_dirs / str(i)), flags.CREATE)
                except OSError as err:
                    exhausted = err.errno
                    break
        tracker.start_cell()
        (ws / "new" / "inner").mkdir(parents=True)  # new folders need new watches: there are none
        (ws / "new" / "inner" / "f.txt").write_text("f")
        changes = tracker.finish_cell()
        tracker.start_cell()
        (ws / "new" / "inner" / "f.txt").write_text("longer now")
        later = tracker.finish_cell()
        for hog in hogs:
            hog.close()
        return {"errno": exhausted, "watching": tracker.watching, "created": changes.created,
                "modified": later.modified}

    got = run_unprivileged(scenario)
    assert got == {"errno": errno.ENOSPC, "watching": False, "created": ["new/inner/f.txt"],
                   "modified": ["new/inner/f.txt"]}
