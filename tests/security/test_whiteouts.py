"""Whiteouts of the notebook's folder, attacked (runtime/notebook_folder_fs.py,
runtime/notebook_overlay.py).

A removed notebook-folder file is hidden by a marker file in the workspace. The
guest must never see, make, remove or reach a marker by any path (a direct name, a
link, a descriptor of a folder opened without O_DIRECTORY); the host, which makes
and removes markers in a folder the guest and the host's users can fill with links,
must never follow one; and no marker can be made outside the workspace.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from wasm_kernel import PythonSandbox, create_sandbox
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.notebook_folder_fs import (
    WHITEOUT_PREFIX, hidden_by_workspace, make_whiteout, remove_marker_folder,
)
from wasm_kernel.runtime.notebook_overlay import NotebookFolder

M = WHITEOUT_PREFIX


@dataclass
class Box:
    nb: Path
    ws: Path
    outside: Path  # a folder beside the workspace, with a file the host must never touch
    sb: PythonSandbox | None = None

    def start(self) -> PythonSandbox:
        self.sb = create_sandbox(workspace=self.ws, guest_options=GuestOptions(notebook=NotebookFolder(self.nb)))
        assert isinstance(self.sb, PythonSandbox)
        return self.sb

    def run(self, code: str) -> str:
        assert self.sb is not None
        r = self.sb.execute(code)
        assert r.success, (code, r.error, r.stderr)
        return r.stdout


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    nb = tmp_path / "course"
    (nb / "data").mkdir(parents=True)
    (nb / "data" / "heights.csv").write_text("h")
    (nb / "data" / "weights.csv").write_text("w")
    (nb / "data" / ".cache").write_text("hidden in the notebook's folder")
    (nb / "notes.txt").write_text("notes")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    ws = tmp_path / "sessions" / str(uuid.uuid4())
    ws.mkdir(parents=True)
    b = Box(nb.resolve(), ws, outside)
    try:
        yield b
    finally:
        if b.sb is not None:
            b.sb.close()


def outcomes(box: Box, attempts: list[str]) -> list[str]:
    """Each attempt's exception name, or ESCAPED and what it got."""
    code = "import os\nfor code in %r:\n" \
           "    try:\n        print('ESCAPED', code, repr(eval(code))[:100])\n" \
           "    except BaseException as err:\n        print(type(err).__name__)" % (attempts,)
    return box.run(code).splitlines()


def all_names(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# --- the guest never reaches a marker ----------------------------------------------------


def test_the_guest_cannot_make_see_or_remove_a_marker(box: Box) -> None:
    box.start()
    box.run("import os\nos.remove('notes.txt')\nos.remove('data/heights.csv')")
    assert (box.ws / f"{M}notes.txt").exists() and (box.ws / "data" / f"{M}heights.csv").exists()
    before = all_names(box.ws)
    attempts = [
        f"open('{M}notes.txt').read()", f"open('/app/data/{M}heights.csv').read()", f"os.stat('{M}notes.txt')",
        f"os.lstat('data/{M}heights.csv')", f"os.readlink('{M}notes.txt')",
        f"open('{M}notes.txt', 'w')", f"open('{M}new', 'x')", f"open('data/{M}weights.csv', 'a')",
        f"os.remove('{M}notes.txt')", f"os.unlink('data/{M}heights.csv')", f"os.rmdir('{M}notes.txt')",
        f"os.rename('{M}notes.txt', 'n')", f"os.rename('notes2', '{M}x') if open('notes2', 'w') else 0",
        f"os.mkdir('{M}weights.csv')", f"os.mkdir('data/{M}weights.csv')", f"os.utime('{M}notes.txt')",
        f"os.link('{M}notes.txt', 'hard')", f"os.symlink('x', '{M}x')",
        f"open('data/../{M}notes.txt').read()", f"open('{M}notes.txt/..')",
    ]
    got = outcomes(box, attempts)
    assert not [line for line in got if line.startswith("ESCAPED")], got
    listing = box.run("import os\nprint(os.listdir('.'), os.listdir('data'), [e.name for e in os.scandir('/app/data')],"
                      " [f for _, _, fs in os.walk('.') for f in fs])")
    assert M not in listing, listing
    assert f"{M}x" not in all_names(box.ws)
    assert all_names(box.ws) - {"notes2"} == before  # nothing made or removed under a marker's name
    # ...so what the guest removed stays removed, and nothing else is.
    assert box.run("print(os.path.exists('notes.txt'), os.path.exists('data/weights.csv'))") == "False True\n"


def test_a_link_to_a_marker_cannot_be_made(box: Box) -> None:
    box.start()
    box.run("import os\nos.remove('notes.txt')")
    got = outcomes(box, [f"os.symlink('{M}notes.txt', 'l1')", f"os.symlink('./data/../{M}notes.txt', 'l2')",
                         f"os.symlink('/app/{M}notes.txt', 'data/l3')"])
    assert got == ["PermissionError"] * 3, got
    assert not any(p.is_symlink() for p in box.ws.rglob("*"))


def test_a_folder_opened_without_O_DIRECTORY_is_still_the_union(box: Box) -> None:
    # A folder's descriptor is a folder's whichever flags opened it: paths relative to
    # it pass the overlay too, so neither the notebook's hidden files nor markers show.
    box.start()
    box.run("import os\nos.remove('data/heights.csv')\nos.remove('notes.txt')")
    got = outcomes(box, [
        "os.read(os.open('.cache', os.O_RDONLY, dir_fd=os.open('data', os.O_RDONLY)), 100)",
        f"os.open('{M}heights.csv', os.O_RDONLY, dir_fd=os.open('data', os.O_RDONLY))",
        "os.read(os.open('heights.csv', os.O_RDONLY, dir_fd=os.open('data', os.O_RDONLY)), 100)",
        f"os.open('{M}notes.txt', os.O_RDONLY, dir_fd=os.open('.', os.O_RDONLY))",
        f"os.open('{M}x', os.O_RDONLY | os.O_CREAT, dir_fd=os.open('data', os.O_RDONLY))",
        "os.read(os.open('notes.txt', os.O_RDONLY, dir_fd=os.open('.', os.O_RDONLY)), 100)",
    ])
    assert got == ["FileNotFoundError", "FileNotFoundError", "FileNotFoundError", "FileNotFoundError",
                   "PermissionError", "FileNotFoundError"], got


# --- the host never follows a link planted in the workspace -----------------------------------


def test_a_marker_planted_as_a_link_is_taken_as_a_marker_never_followed(box: Box) -> None:
    target = box.outside / "made-through-the-link"
    (box.ws / f"{M}notes.txt").symlink_to(target)  # dangling: following it would make the file
    (box.ws / "data").mkdir()
    (box.ws / "data" / f"{M}heights.csv").symlink_to(box.outside)
    assert make_whiteout(box.ws, "notes.txt", None) == "ok"
    assert hidden_by_workspace(box.ws, "notes.txt") and hidden_by_workspace(box.ws, "data/heights.csv")
    box.start()
    got = outcomes(box, ["open('notes.txt').read()", "os.remove('notes.txt')", "os.rename('notes.txt', 'n')",
                         "open('data/heights.csv').read()", "os.listdir('data')"])
    assert got[:4] == ["FileNotFoundError"] * 4 and got[4] == "ESCAPED os.listdir('data') ['weights.csv']", got
    assert not target.exists() and not os.path.lexists(target)
    assert sorted(os.listdir(box.outside)) == ["keep.txt"]


def test_a_marker_is_never_made_through_a_folder_planted_as_a_link(box: Box) -> None:
    (box.ws / "data").symlink_to(box.outside, target_is_directory=True)
    assert make_whiteout(box.ws, "data/heights.csv", None) == "failed"
    assert make_whiteout(box.ws, "data/new/heights.csv", None) == "failed"
    box.start()
    got = outcomes(box, ["os.remove('data/heights.csv')", "os.rmdir('data')", "os.rename('data/weights.csv', 'w')"])
    assert not [line for line in got if line.startswith("ESCAPED")], got
    assert sorted(os.listdir(box.outside)) == ["keep.txt"] and (box.outside / "keep.txt").read_text() == "keep"


def test_removing_a_folder_of_markers_never_follows_a_planted_link(box: Box) -> None:
    box.start()
    box.run("import os\nos.remove('data/heights.csv')")  # the workspace gets data/<marker>
    marker = box.ws / "data" / f"{M}heights.csv"
    marker.unlink()
    marker.symlink_to(box.outside, target_is_directory=True)  # the host plants a link under its name
    box.run("os.remove('data/weights.csv')\nos.rmdir('data')")
    assert box.run("print(os.path.exists('data'))") == "False\n"
    assert sorted(os.listdir(box.outside)) == ["keep.txt"] and (box.outside / "keep.txt").read_text() == "keep"
    assert not (box.ws / "data").exists()


def test_a_folder_planted_under_a_markers_name_is_not_emptied(box: Box) -> None:
    (box.ws / "data" / f"{M}heights.csv").mkdir(parents=True)
    (box.ws / "data" / f"{M}heights.csv" / "precious.txt").write_text("precious")
    assert not remove_marker_folder(box.ws, "data", None)
    box.start()
    got = outcomes(box, ["os.remove('data/weights.csv')", "os.rmdir('data')"])
    assert got == ["ESCAPED os.remove('data/weights.csv') None", "OSError"], got
    assert (box.ws / "data" / f"{M}heights.csv" / "precious.txt").read_text() == "precious"


# --- no whiteout outside the union ----------------------------------------------------------


@pytest.mark.parametrize("upath", ["..", "../outside", "../outside/keep.txt", "a/../../outside", "/etc/passwd",
                                   "/tmp", "", ".", "./x", "a//b", "a\0b"])
def test_no_marker_is_made_or_removed_for_a_path_that_is_not_in_the_union(box: Box, upath: str) -> None:
    parent = box.ws.parent
    before = all_names(parent.parent)
    assert make_whiteout(box.ws, upath, None) == "failed"
    assert not remove_marker_folder(box.ws, upath, None)
    assert not hidden_by_workspace(box.ws, upath)
    assert all_names(parent.parent) == before
