"""Removing what the notebook's folder shows under /app: whiteouts.

The notebook's folder is read-only beneath the workspace (runtime/notebook_overlay.py).
A cell that removes or renames one of its files hides it for this workspace with a
marker file in the workspace (runtime/notebook_folder_fs.py): gone from /app, from
this and every later kernel of the session, while the folder on disk never changes.
What shows the workspace to people (the file-change display, %files, the drive)
shows the marker as what it did."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.folders import folder_state
from wasm_kernel import PythonSandbox, create_sandbox
from wasm_kernel.core.file_changes import FileChanges, WorkspaceSnapshot
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.notebook_folder_fs import WHITEOUT_PREFIX
from wasm_kernel.runtime.notebook_overlay import NotebookFolder
from wasm_kernel.sessions.file_ops import list_session_files
from wasm_kernel.sessions.session_workspace import SessionWorkspace


@dataclass
class Box:
    nb: Path
    root: Path  # the workspaces' root: ws is root/<session id>, as the session layer keeps them
    ws: Path
    sb: PythonSandbox

    def open(self) -> None:
        self.sb = create_sandbox(workspace=self.ws, guest_options=GuestOptions(notebook=NotebookFolder(self.nb)))
        assert isinstance(self.sb, PythonSandbox)
        run(self, "import os, shutil")

    def reopen(self) -> None:
        self.sb.close()
        self.open()


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    nb = tmp_path / "course"
    (nb / "data" / "raw").mkdir(parents=True)
    (nb / "data" / "heights.csv").write_text("name,height\nada,1.70\n")
    (nb / "data" / "weights.csv").write_text("name,weight\nada,60\n")
    (nb / "data" / "raw" / "dump.txt").write_text("raw")
    (nb / "empty").mkdir()
    (nb / "notes.txt").write_text("from the notebook folder\n")
    (nb / "helper.py").write_text("X = 1\n")
    (nb / ".env").write_text("SECRET=1")
    root = tmp_path / "sessions"
    ws = root / str(uuid.uuid4())
    ws.mkdir(parents=True)
    b = Box(nb.resolve(), root, ws, None)  # type: ignore[arg-type]
    b.open()
    try:
        yield b
    finally:
        b.sb.close()


def run(b: Box, code: str) -> str:
    r = b.sb.execute(code)
    assert r.success, (code, r.error, r.stderr)
    return r.stdout


def value(b: Box, expr: str) -> str:
    return run(b, f"print(repr(({expr})), end='')")


def error(b: Box, code: str) -> str:
    """The errno name of the OSError `code` raises in the guest."""
    out = run(b, f"import errno\ntry:\n    {code}\n    print('no error', end='')\n"
                 "except OSError as e:\n    print(errno.errorcode[e.errno], end='')")
    return out


def markers(ws: Path) -> list[str]:
    return sorted(str(p.relative_to(ws)) for p in ws.rglob(WHITEOUT_PREFIX + "*"))


# --- the guest's view ---------------------------------------------------------------


def test_a_removed_file_is_gone_for_the_session_and_stays_on_disk(box: Box) -> None:
    before = folder_state(box.nb)
    run(box, "os.remove('notes.txt')\nos.unlink('data/heights.csv')")
    assert value(box, "os.path.exists('notes.txt'), os.path.lexists('data/heights.csv')") == "(False, False)"
    assert value(box, "sorted(os.listdir('.')), sorted(os.listdir('data'))") == \
        "(['data', 'empty', 'helper.py'], ['raw', 'weights.csv'])"
    assert value(box, "sorted(e.name for e in os.scandir('data'))") == "['raw', 'weights.csv']"
    assert error(box, "open('notes.txt')") == "ENOENT"
    assert error(box, "os.remove('notes.txt')") == "ENOENT"  # removing it twice: it is gone
    assert folder_state(box.nb) == before
    # The next kernel of the session (the same workspace) sees the same /app.
    box.reopen()
    assert value(box, "os.path.exists('notes.txt'), sorted(os.listdir('data'))") == "(False, ['raw', 'weights.csv'])"
    assert folder_state(box.nb) == before


def test_a_rename_copies_up_to_the_new_name_and_hides_the_old(box: Box) -> None:
    before = folder_state(box.nb)
    run(box, "os.rename('notes.txt', 'kept.txt')\nos.rename('data/heights.csv', 'h.csv')")
    assert value(box, "open('kept.txt').read(), open('h.csv').read()") == \
        "('from the notebook folder\\n', 'name,height\\nada,1.70\\n')"
    assert value(box, "os.path.exists('notes.txt'), os.path.exists('data/heights.csv')") == "(False, False)"
    # os.replace onto a workspace file replaces it; shutil.move of a file works too.
    run(box, "open('mine.txt', 'w').write('old')\nos.replace('helper.py', 'mine.txt')\n"
             "shutil.move('data/weights.csv', 'data/raw/w.csv')")
    assert value(box, "open('mine.txt').read(), open('data/raw/w.csv').read()[:11]") == "('X = 1\\n', 'name,weight')"
    assert value(box, "sorted(os.listdir('.')), sorted(os.listdir('data'))") == \
        "(['data', 'empty', 'h.csv', 'kept.txt', 'mine.txt'], ['raw'])"
    assert folder_state(box.nb) == before
    assert (box.ws / "kept.txt").read_text() == "from the notebook folder\n"


def test_a_failed_rename_leaves_both_names_as_they_were(box: Box) -> None:
    assert error(box, "os.rename('notes.txt', 'no/such/folder/n.txt')") == "ENOENT"
    assert value(box, "open('notes.txt').read()") == "'from the notebook folder\\n'"
    assert not (box.ws / "notes.txt").exists() and markers(box.ws) == []


def test_a_folder_the_notebook_has_cannot_be_renamed_but_can_be_moved(box: Box) -> None:
    # As on overlayfs: rename(2) says EXDEV, and shutil.move copies and removes instead.
    assert error(box, "os.rename('data', 'data2')") == "EXDEV"
    run(box, "shutil.move('data', 'moved')")
    assert value(box, "os.path.exists('data'), sorted(os.listdir('moved')), open('moved/raw/dump.txt').read()") == \
        "(False, ['heights.csv', 'raw', 'weights.csv'], 'raw')"


def test_rmdir_of_a_folder_emptied_in_the_view(box: Box) -> None:
    assert error(box, "os.rmdir('data')") == "ENOTEMPTY"
    run(box, "os.remove('data/raw/dump.txt')\nos.rmdir('data/raw')\nos.rmdir('empty')")
    assert value(box, "sorted(os.listdir('data')), os.path.isdir('empty')") == "(['heights.csv', 'weights.csv'], False)"
    assert error(box, "os.rmdir('data')") == "ENOTEMPTY"
    assert error(box, "os.rmdir('helper.py')") == "ENOTDIR"
    assert error(box, "os.remove('data')") in ("EISDIR", "EPERM")
    run(box, "shutil.rmtree('data')")
    assert value(box, "sorted(os.listdir('.'))") == "['helper.py', 'notes.txt']"
    # The workspace keeps one marker per removed top name, not the folders' insides.
    assert markers(box.ws) == [f"{WHITEOUT_PREFIX}data", f"{WHITEOUT_PREFIX}empty"]
    assert not (box.ws / "data").exists()


def test_a_name_made_again_is_a_new_entry(box: Box) -> None:
    run(box, "os.remove('notes.txt')\nopen('notes.txt', 'w').write('new')")
    assert value(box, "open('notes.txt').read(), sorted(os.listdir('.')).count('notes.txt')") == "('new', 1)"
    run(box, "os.remove('notes.txt')")  # and removed again: gone, the notebook's copy too
    assert value(box, "os.path.exists('notes.txt')") == "False"
    run(box, "shutil.rmtree('data')\nos.mkdir('data')")  # a folder made again is empty
    assert value(box, "os.listdir('data'), os.path.exists('data/heights.csv')") == "([], False)"
    assert error(box, "open('data/raw/dump.txt')") == "ENOENT"
    run(box, "open('data/heights.csv', 'w').write('mine')")
    assert value(box, "os.listdir('data'), open('data/heights.csv').read()") == "(['heights.csv'], 'mine')"


def test_a_copied_up_file_removed_is_gone_too(box: Box) -> None:
    run(box, "open('notes.txt', 'a').write('more')\nos.remove('notes.txt')")
    assert value(box, "os.path.exists('notes.txt')") == "False"
    run(box, "open('helper.py', 'a').write('Y = 2')\nos.rename('helper.py', 'h.py')")
    assert value(box, "os.path.exists('helper.py'), open('h.py').read()") == "(False, 'X = 1\\nY = 2')"


def test_the_host_deleting_a_marker_brings_the_file_back(box: Box) -> None:
    run(box, "os.remove('notes.txt')\nos.remove('data/heights.csv')")
    (box.ws / f"{WHITEOUT_PREFIX}notes.txt").unlink()
    import shutil
    shutil.rmtree(box.ws / "data")  # %rm -r data: the workspace's part of the folder
    assert value(box, "os.path.exists('notes.txt'), sorted(os.listdir('data'))") == \
        "(True, ['heights.csv', 'raw', 'weights.csv'])"


def test_a_descriptor_of_the_notebooks_folder_sees_the_removal(box: Box) -> None:
    run(box, "d = os.open('data', os.O_RDONLY | os.O_DIRECTORY)\nos.remove('data/heights.csv')")
    assert error(box, "os.open('heights.csv', os.O_RDONLY, dir_fd=d)") == "ENOENT"
    assert value(box, "sorted(os.listdir('data'))") == "['raw', 'weights.csv']"


def test_markers_left_by_a_changed_notebook_folder_stay_hidden(box: Box) -> None:
    run(box, "os.remove('data/raw/dump.txt')")
    (box.nb / "data" / "raw" / "dump.txt").unlink()
    (box.nb / "data" / "raw").rmdir()  # the folder left the notebook's folder: the marker is stale
    run(box, "open('data/raw/mine.txt', 'w').write('x')")
    assert value(box, "os.listdir('data/raw')") == "['mine.txt']"
    run(box, "os.remove('data/raw/mine.txt')\nos.rmdir('data/raw')")
    assert not (box.ws / "data" / "raw").exists()


# --- the quota, undo, and what people are shown -------------------------------------------


def test_a_marker_is_an_entry_of_the_disk_quota(box: Box) -> None:
    _, entries = box.sb.disk_usage()
    run(box, "os.remove('notes.txt')")
    assert box.sb.disk_usage()[1] == entries + 1
    run(box, "os.remove('data/heights.csv')")  # the marker and the workspace's folder of it
    assert box.sb.disk_usage()[1] == entries + 3
    assert box.sb.disk_usage(remeasure=True)[1] == entries + 3
    # At the quota, a removal that needs a marker is refused and changes nothing.
    box.sb.policy = box.sb.policy.with_changes(disk_max_files=entries + 3)
    r = box.sb.execute("import os\nos.remove('helper.py')")
    assert not r.success and "No space left" in (r.error.evalue if r.error else ""), r.error
    assert r.disk_full
    box.sb.policy = box.sb.policy.with_changes(disk_max_files=None)
    assert value(box, "os.path.exists('helper.py')") == "True"


def test_the_file_changes_show_what_the_cell_did(box: Box) -> None:
    r = box.sb.execute("import os\nos.remove('notes.txt')")
    assert (r.files_created, r.files_modified, r.files_deleted) == ([], [], ["notes.txt"])
    r = box.sb.execute("os.rename('helper.py', 'h.py')")
    assert (r.files_created, r.files_modified, r.files_deleted) == (["h.py"], [], ["helper.py"])
    r = box.sb.execute("open('notes.txt', 'w').write('new')")
    assert (r.files_created, r.files_modified, r.files_deleted) == (["notes.txt"], [], [])
    r = box.sb.execute("os.remove('data/weights.csv')\nopen('data/weights.csv', 'w').write('mine')")
    assert (r.files_created, r.files_modified, r.files_deleted) == ([], ["data/weights.csv"], [])
    r = box.sb.execute("open('data/heights.csv', 'a').write('x')\nos.remove('data/heights.csv')")
    assert (r.files_created, r.files_modified, r.files_deleted) == ([], [], ["data/heights.csv"])
    r = box.sb.execute("import shutil\nshutil.rmtree('data')")
    assert r.files_deleted == ["data", "data/weights.csv"] and r.files_created == [] and r.files_modified == []


def test_a_snapshot_diff_shows_markers_as_what_they_did(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    before = WorkspaceSnapshot.take(tmp_path)
    (tmp_path / f"{WHITEOUT_PREFIX}a.csv").write_text("")
    (tmp_path / "d" / f"{WHITEOUT_PREFIX}b.csv").write_text("")
    (tmp_path / f"{WHITEOUT_PREFIX}c.csv").write_text("")
    (tmp_path / "c.csv").write_text("made again")
    assert WorkspaceSnapshot.take(tmp_path).diff(WorkspaceSnapshot.take(tmp_path)) == FileChanges.none()
    changes = before.diff(WorkspaceSnapshot.take(tmp_path))
    assert changes == FileChanges([], ["c.csv"], ["a.csv", "d/b.csv"])
    # A marker that goes (its folder removed) is not shown as anything.
    before = WorkspaceSnapshot.take(tmp_path)
    (tmp_path / "d" / f"{WHITEOUT_PREFIX}b.csv").unlink()
    assert before.diff(WorkspaceSnapshot.take(tmp_path)) == FileChanges.none()


def test_undo_keeps_the_removal_as_it_keeps_every_file(box: Box) -> None:
    # %undo puts variables back, never files (core/sandbox.py): a removed notebook
    # file stays removed, as a removed workspace file stays removed.
    run(box, "open('mine.txt', 'w').write('m')")
    run(box, "gone = 1\nos.remove('notes.txt')\nos.remove('mine.txt')")
    assert box.sb.undo() is True
    assert value(box, "'gone' in globals(), os.path.exists('notes.txt'), os.path.exists('mine.txt')") == \
        "(False, False, False)"


def test_listings_of_the_workspace_leave_markers_out(box: Box) -> None:
    run(box, "os.remove('notes.txt')\nos.remove('data/heights.csv')\nopen('data/mine.csv', 'w').write('m')")
    session = box.ws.name
    assert list_session_files(session, box.root) == ["data/mine.csv"]  # %files
    with SessionWorkspace(box.root, session) as workspace:  # the drive's door
        assert [e.name for e in workspace.list_folder("").entries] == ["data"]
        assert [e.name for e in workspace.list_folder("data").entries] == ["mine.csv"]


def test_the_guest_cannot_remove_above_or_beside_the_workspace(box: Box) -> None:
    # Paths that leave /app never reach a whiteout (join_union refuses them before);
    # make_whiteout refuses them again (tests/security/test_whiteouts.py).
    sibling = box.ws.parent / str(uuid.uuid4())
    sibling.mkdir()
    (sibling / "theirs.txt").write_text("another session's file")
    tree = box.root.parent
    before = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    name = sibling.name
    for code in (f"os.remove('../{name}/theirs.txt')", f"os.remove('/app/../{name}/theirs.txt')",
                 f"os.remove('data/../../{name}/theirs.txt')", "os.rmdir('..')", "os.rmdir('/app')", "os.rmdir('.')",
                 f"os.rename('../{name}/theirs.txt', 'mine.txt')", "os.rename('notes.txt', '../notes.txt')",
                 "os.remove('/notes.txt')", "os.remove('../course/notes.txt')"):
        assert error(box, code) != "no error", code
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == before
