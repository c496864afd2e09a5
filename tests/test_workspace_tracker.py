"""inotify-driven per-cell file changes: same answers as a full walk, at the cost
of the changes only, with a full walk as the fallback."""

from pathlib import Path

import pytest

from conftest import make_sandbox
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
