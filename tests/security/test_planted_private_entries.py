"""What a kernel's start reads of its session, planted as the wrong kind of entry.

A notebook's kernel reads, at its start, entries of the sessions' private folder:
the registry, the session's metadata, history, lease and presence files, packages
folder, saved state (its folder, file and the note a shutdown leaves) and the state
key, and the shared folders they live in. In place of each, these plant what does
not belong there: a folder where a file goes, a file where a folder goes (garbage
bytes where a file goes), a named pipe, a socket, a dangling link. Nothing found is
fatal: the kernel starts, its first cell answers, one line says what was set aside
and as what, the entry is moved beside itself (never deleted, never followed:
nothing appears where a link points), and what it was not part of is kept (the
saved state wakes when only, say, the history was planted). Real kernels over
jupyter_client, named by a notebook as Jupyter Server names them.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.kernel_client import blank_notebook, notebook_kernel

pytestmark = pytest.mark.slow  # a kernel per case

KINDS = ("folder", "file", "fifo", "socket", "link")
SAID = {"folder": "a folder", "file": "a file", "fifo": "a named pipe", "socket": "a socket", "link": "a symbolic link"}


@dataclass(frozen=True)
class Entry:
    where: Callable[[Path, str], Path]  # (private folder, session id) -> its path
    what: str  # how the line names it
    folder: bool  # a folder goes there
    keeps_state: bool  # the saved state still wakes once it is set aside
    garbage: str | None = None  # the line's start for garbage bytes in a file, when they are not "a file"
    garbage_moves: str | None = None  # what garbage in it gets set aside, when not itself (relative to it)


ENTRIES = {
    "registry": Entry(lambda p, s: p / "registry.sqlite3", "the session registry", False, False,
                      "the session registry was not a SQLite database: set aside as registry.sqlite3.set-aside-"),
    "metadata": Entry(lambda p, s: p / "sessions" / f"{s}.json", "the session's metadata", False, False,
                      "the session's metadata was unreadable: set aside as "),
    "history": Entry(lambda p, s: p / "history" / f"{s}.sqlite3", "the session's history", False, True,
                     "the session's history was not a SQLite database: set aside as "),
    "lease": Entry(lambda p, s: p / "leases" / f"{s}.lock", "the session's lease file", False, True),
    "presence": Entry(lambda p, s: p / "leases" / f"{s}.present", "the session's presence file", False, True),
    "packages": Entry(lambda p, s: p / "packages" / s, "the session's packages folder", True, True),
    "state folder": Entry(lambda p, s: p / "state" / s, "the saved state's folder", True, False),
    "state file": Entry(lambda p, s: p / "state" / s / "state.bin", "the saved state's file", False, False,
                        "the saved state was not resumed: the state file failed its authentication check"),
    "shutdown note": Entry(lambda p, s: p / "state" / s / "not-saved.txt", "the note the last shutdown left", False,
                           True),
    # Garbage in the key file cannot be told from a key: the state made with the real
    # one fails its check under it, and is set aside.
    "state key": Entry(lambda p, s: p / "state.key", "the state key file", False, False,
                       "the saved state was not resumed: the state file failed its authentication check",
                       "state/{session}/state.bin"),
    "private folder": Entry(lambda p, s: p, "the sessions' private folder", True, False),
    "metadata folder": Entry(lambda p, s: p / "sessions", "the sessions' metadata folder", True, True),
    "lease folder": Entry(lambda p, s: p / "leases", "the sessions' lease folder", True, True),
    "history folder": Entry(lambda p, s: p / "history", "the sessions' history folder", True, True),
    "states folder": Entry(lambda p, s: p / "state", "the saved states' folder", True, False),
    "packages folder": Entry(lambda p, s: p / "packages", "the sessions' packages folder", True, True),
}
# A folder where a folder goes is no vector; nor are garbage bytes in a lease or
# presence file, or in the note: they are never read as anything (a lock file's
# content; a line, shown as it is).
CASES = [(name, kind) for name, entry in ENTRIES.items() for kind in KINDS
         if not (kind == "folder" and entry.folder)
         and not (kind == "file" and name in ("lease", "presence", "shutdown note"))]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A notebook whose kernel saved its state: (its Jupyter data folder, the notebook, its session id)."""
    base = tmp_path_factory.mktemp("planted")
    notebook = blank_notebook(base / "course" / "lesson.ipynb")
    data = base / "jupyter"
    k = start(data, notebook)
    try:
        assert k.execute("x = 41").status == "ok"
        session_id = k.session_id()
    finally:
        k.shutdown()
    return data, notebook, session_id


start = notebook_kernel


def plant(path: Path, kind: str, outside: Path) -> None:
    """Put an entry of `kind` where `path` is (removing what is there first)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "folder":
        path.mkdir()
        (path / "inside.txt").write_text("planted")
    elif kind == "file":
        path.write_bytes(b"\x00garbage\xff" * 512)
        path.chmod(0o600)  # private: only what is in it is wrong
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(path.parent)  # a socket's path is limited to 108 bytes: bind it by its name
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(path.name)
        finally:
            os.chdir(here)
    else:
        path.symlink_to(outside)


def is_kind(path: Path, kind: str) -> bool:
    mode = path.lstat().st_mode
    return {"folder": stat.S_ISDIR, "file": stat.S_ISREG, "fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK,
            "link": stat.S_ISLNK}[kind](mode)


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_a_planted_entry_is_set_aside_with_one_line_and_the_kernel_starts(
        saved: tuple[Path, Path, str], tmp_path: Path, name: str, kind: str) -> None:
    template, notebook, session_id = saved
    data = tmp_path / "jupyter"
    shutil.copytree(template, data, symlinks=True)
    entry = ENTRIES[name]
    path = entry.where(data / "wasm-kernel" / "sessions" / ".wasm-kernel", session_id)
    outside = tmp_path / "outside"  # where a planted link points: nothing may appear there
    plant(path, kind, outside)  # "file": garbage bytes where a file goes, a file where a folder goes
    k = start(data, notebook)
    try:
        run = k.execute("print(globals().get('x'))")
        assert run.status == "ok", run.reply
        assert run.printed() == ("41\n" if entry.keeps_state else "None\n"), (run.outputs, k.log()[-3000:])
        lines = run.stream("stderr").splitlines()
        if kind == "file" and entry.garbage is not None:
            expected = f"wasm-kernel: {entry.garbage}"
        else:
            expected = f"wasm-kernel: {entry.what} was {SAID[kind]}: set aside as "
        said = [line for line in lines if line.startswith(expected)]
        assert len(said) == 1, lines
        assert "/" not in said[0].split(" set aside as ")[-1], said  # a name beside it, never a host path
        again = k.execute("print(x if 'x' in dir() else 'fresh')")  # and it goes on answering
        assert again.status == "ok" and again.stream() in ("41\n", "fresh\n")
    finally:
        k.shutdown()
    if kind == "file" and entry.garbage_moves is not None:
        path = path.parent / entry.garbage_moves.format(session=session_id)
    # Moved beside itself, not deleted: the very entry planted.
    moved = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".set-aside-")
             or p.name == path.name + ".corrupt"]
    assert len(moved) == 1, sorted(p.name for p in path.parent.iterdir())
    assert is_kind(moved[0], kind)
    if kind == "link":
        assert os.readlink(moved[0]) == str(outside)
    if kind == "folder":
        assert (moved[0] / "inside.txt").read_text() == "planted"
    assert not os.path.lexists(outside), "something was made through the planted link"
