"""Host-side file operations on session workspaces: path validation, never
following symlinks (the guest can plant relative ones into a sibling session),
atomic writes, overwrite rules, listing, deleting and their log events."""

from __future__ import annotations

import errno
import os
import stat
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wasm_kernel import (
    SessionSandbox,
    UnsafePathError,
    create_session_sandbox,
    delete_session_path,
    list_session_files,
    read_session_file,
    write_session_file,
)
from wasm_kernel.host.safe_fs import MAX_WALK_PATH
from wasm_kernel.sessions.file_ops import (
    append_session_file,
    copy_session_file,
    list_session_file_info,
    open_session_file,
)
from wasm_kernel.sessions.session_workspace import SessionWorkspace

from support.events import Events
from support.special_files import make_special



from support.unprivileged import run_unprivileged


@pytest.fixture
def session(root: Path) -> Iterator[tuple[str, SessionSandbox]]:
    sid, sb = create_session_sandbox(workspace_root=root)
    yield sid, sb
    sb.close()


@pytest.fixture
def plain(root: Path) -> str:
    """A session workspace made on the host only (no guest needed)."""
    sid = str(uuid.uuid4())
    (root / sid).mkdir(parents=True)
    return sid


# --- with the real guest ----------------------------------------------------------------


def test_host_writes_are_seen_by_the_guest_and_guest_files_read_by_the_host(
    root: Path, session: tuple[str, SessionSandbox]
) -> None:
    sid, sb = session
    write_session_file(sid, "in/data.csv", b"a,b\n1,2\n", root)
    r = sb.execute("import csv\nrows = list(csv.reader(open('/app/in/data.csv')))\nprint(rows)\n"
                   "import os\nos.makedirs('out')\n"
                   "open('out/result.bin', 'wb').write(bytes(range(256)))")
    assert r.success, r.error
    assert "[['a', 'b'], ['1', '2']]" in r.stdout
    assert read_session_file(sid, "out/result.bin", root) == bytes(range(256))
    assert list_session_files(sid, root) == ["in/data.csv", "out/result.bin"]


@pytest.fixture
def attack(root: Path) -> Iterator[tuple[str, str, Path]]:
    """Session A's guest plants relative links into session B; B holds a secret."""
    a_id, a = create_session_sandbox(workspace_root=root)
    b_id, b = create_session_sandbox(workspace_root=root)
    try:
        assert b.execute("import os\nos.makedirs('dir')\nopen('secret.txt', 'w').write('B secret')\n"
                         "open('dir/inner.txt', 'w').write('B inner')").success
        r = a.execute(
            "import os\n"
            f"os.symlink('../{b_id}/secret.txt', 'link_file')\n"
            f"os.symlink('../{b_id}', 'link_dir')\n"
            "os.makedirs('sub')\n"
            f"os.symlink('../../{b_id}/dir', 'sub/deep_link')\n"
            "open('own.txt', 'w').write('A own')"
        )
        assert r.success, r.error
    finally:
        a.close()
        b.close()
    yield a_id, b_id, root / b_id


def _b_untouched(b_dir: Path) -> None:
    assert (b_dir / "secret.txt").read_text() == "B secret"
    assert (b_dir / "dir" / "inner.txt").read_text() == "B inner"
    assert sorted(os.listdir(b_dir)) == ["dir", "secret.txt"]
    assert os.listdir(b_dir / "dir") == ["inner.txt"]


def test_guest_made_links_are_never_followed_by_reads(root: Path, attack: tuple[str, str, Path]) -> None:
    a_id, _, b_dir = attack
    for path in ("link_file", "link_dir/secret.txt", "sub/deep_link/inner.txt", "link_dir/dir/inner.txt"):
        with pytest.raises(UnsafePathError, match="symbolic link"):
            read_session_file(a_id, path, root)
    assert read_session_file(a_id, "own.txt", root) == b"A own"
    _b_untouched(b_dir)


def test_guest_made_links_are_never_followed_by_writes(root: Path, attack: tuple[str, str, Path]) -> None:
    a_id, _, b_dir = attack
    for path, overwrite in [
        ("link_file", True), ("link_file", False), ("link_dir/secret.txt", True),
        ("link_dir/new.txt", False), ("sub/deep_link/inner.txt", True), ("sub/deep_link/made/x.txt", False),
    ]:
        with pytest.raises(UnsafePathError, match="symbolic link"):
            write_session_file(a_id, path, b"pwned", root, overwrite=overwrite)
    _b_untouched(b_dir)
    assert os.readlink(root / a_id / "link_file") == f"../{b_dir.name}/secret.txt"


def test_guest_made_links_are_listed_as_themselves(root: Path, attack: tuple[str, str, Path]) -> None:
    a_id, _, _ = attack
    assert list_session_files(a_id, root) == ["link_dir", "link_file", "own.txt", "sub/deep_link"]


def test_deleting_through_links_is_refused_and_deleting_a_link_removes_only_the_link(
    root: Path, attack: tuple[str, str, Path]
) -> None:
    a_id, _, b_dir = attack
    for path in ("link_dir/secret.txt", "link_dir/dir", "sub/deep_link/inner.txt"):
        for recursive in (False, True):
            with pytest.raises(UnsafePathError):
                delete_session_path(a_id, path, root, recursive=recursive)
    _b_untouched(b_dir)
    delete_session_path(a_id, "link_dir", root, recursive=True)
    delete_session_path(a_id, "link_file", root)
    delete_session_path(a_id, "sub", root, recursive=True)
    _b_untouched(b_dir)
    assert list_session_files(a_id, root) == ["own.txt"]


def test_a_session_id_that_is_a_symlink_is_not_followed(root: Path, attack: tuple[str, str, Path]) -> None:
    _, b_id, b_dir = attack
    alias = str(uuid.uuid4())
    os.symlink(b_id, root / alias)
    calls: list[Callable[[], object]] = [
        lambda: read_session_file(alias, "secret.txt", root),
        lambda: list_session_files(alias, root),
        lambda: write_session_file(alias, "x.txt", b"x", root),
        lambda: delete_session_path(alias, "secret.txt", root),
    ]
    for call in calls:
        with pytest.raises(UnsafePathError):
            call()
    _b_untouched(b_dir)


# --- path validation -----------------------------------------------------------------


BAD_PATHS = {
    "/etc/passwd": "absolute",
    "/": "absolute",
    "../../../etc/passwd": "'..'",
    "..": "'..'",
    "a/../../x": "'..'",
    "a/..": "'..'",
    "x\x00y": "NUL",
    "\x00": "NUL",
}


@pytest.mark.parametrize("path", sorted(BAD_PATHS))
def test_every_operation_rejects_unsafe_paths_with_a_clear_message(root: Path, plain: str, path: str) -> None:
    (root / plain / "x").write_text("x")
    calls: list[Callable[[], object]] = [
        lambda: read_session_file(plain, path, root),
        lambda: write_session_file(plain, path, b"data", root, overwrite=True),
        lambda: delete_session_path(plain, path, root, recursive=True),
        lambda: list_session_files(plain, root, path),
    ]
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        assert BAD_PATHS[path] in str(info.value)
    assert os.listdir(root / plain) == ["x"]


@pytest.mark.parametrize("path", ["", ".", "./", "./."])
def test_paths_naming_the_workspace_itself_are_refused_for_files(root: Path, plain: str, path: str) -> None:
    for call in (
        lambda: read_session_file(plain, path, root),
        lambda: write_session_file(plain, path, b"x", root),
        lambda: delete_session_path(plain, path, root, recursive=True),
    ):
        with pytest.raises(ValueError, match="workspace itself"):
            call()
    assert (root / plain).is_dir()


def test_redundant_separators_and_dots_are_normalised(root: Path, plain: str) -> None:
    write_session_file(plain, "./a//b/./c.txt", b"c", root)
    assert read_session_file(plain, "a/b/c.txt", root) == b"c"
    assert read_session_file(plain, Path("a") / "b" / "c.txt", root) == b"c"


# --- reading ----------------------------------------------------------------------------


def test_read_errors_are_specific(root: Path, plain: str, events: Events) -> None:
    (root / plain / "dir").mkdir()
    with pytest.raises(FileNotFoundError, match="'missing.txt' does not exist"):
        read_session_file(plain, "missing.txt", root)
    with pytest.raises(FileNotFoundError):
        read_session_file(plain, "nodir/x.txt", root)
    with pytest.raises(IsADirectoryError):
        read_session_file(plain, "dir", root)
    (root / plain / "f").write_text("f")
    with pytest.raises(NotADirectoryError):
        read_session_file(plain, "f/x", root)
    with pytest.raises(FileNotFoundError, match="has no workspace"):
        read_session_file(str(uuid.uuid4()), "x", root)


def test_reading_a_fifo_fails_instead_of_hanging(root: Path, plain: str) -> None:
    os.mkfifo(root / plain / "pipe")
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            read_session_file(plain, "pipe", root)
        except BaseException as err:  # noqa: BLE001
            box["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # release the stuck reader before failing
        os.close(os.open(root / plain / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_session_file hung on a FIFO")
    assert isinstance(box["error"], ValueError) and "not a regular file" in str(box["error"])


def test_read_logs_path_and_size(root: Path, plain: str, events: Events) -> None:
    (root / plain / "f.bin").write_bytes(b"12345")
    assert read_session_file(plain, "f.bin", root, logger=events.logger) == b"12345"
    assert events.all == [("info", "session.file.read", {"session_id": plain, "path": "f.bin", "size_bytes": 5})]


# --- writing -----------------------------------------------------------------------------


def test_overwrite_false_refuses_any_existing_file_even_an_empty_one(root: Path, plain: str) -> None:
    (root / plain / "empty.txt").write_bytes(b"")
    (root / plain / "full.txt").write_bytes(b"full")
    for name in ("empty.txt", "full.txt"):
        with pytest.raises(FileExistsError, match="overwrite=True"):
            write_session_file(plain, name, b"new", root, overwrite=False)
    assert (root / plain / "empty.txt").read_bytes() == b"" and (root / plain / "full.txt").read_bytes() == b"full"
    write_session_file(plain, "empty.txt", b"now", root, overwrite=True)
    assert (root / plain / "empty.txt").read_bytes() == b"now"
    assert sorted(os.listdir(root / plain)) == ["empty.txt", "full.txt"]  # no temp files left


def test_overwrite_is_the_default_refusal(root: Path, plain: str) -> None:
    write_session_file(plain, "f.txt", b"one", root)
    with pytest.raises(FileExistsError):
        write_session_file(plain, "f.txt", b"two", root)


def test_writes_replace_atomically_by_rename(root: Path, plain: str) -> None:
    target = root / plain / "f.txt"
    write_session_file(plain, "f.txt", b"old content", root)
    old_inode = target.stat().st_ino
    with open(target, "rb") as reader:
        write_session_file(plain, "f.txt", b"new", root, overwrite=True)
        # A reader that had the file open keeps the complete old version: the new one
        # was renamed over it, never written into it.
        assert reader.read() == b"old content"
    assert target.read_bytes() == b"new" and target.stat().st_ino != old_inode


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(root: Path, plain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    write_session_file(plain, "f.txt", b"old", root)

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_session_file(plain, "f.txt", b"new", root, overwrite=True)
    monkeypatch.undo()
    assert (root / plain / "f.txt").read_bytes() == b"old"
    assert os.listdir(root / plain) == ["f.txt"]


def test_write_creates_folders_but_not_over_files_or_directories(root: Path, plain: str, events: Events) -> None:
    write_session_file(plain, "a/b/c.txt", b"abc", root, logger=events.logger)
    assert (root / plain / "a/b/c.txt").read_bytes() == b"abc"
    assert events.all == [("info", "session.file.write", {"session_id": plain, "path": "a/b/c.txt", "size_bytes": 3})]
    with pytest.raises(IsADirectoryError):
        write_session_file(plain, "a/b", b"x", root, overwrite=True)
    with pytest.raises(NotADirectoryError):
        write_session_file(plain, "a/b/c.txt/d", b"x", root)
    with pytest.raises(TypeError):
        write_session_file(plain, "s.txt", "text, not bytes", root)  # type: ignore[arg-type]
    write_session_file(plain, "m.bin", memoryview(b"mv"), root)
    assert (root / plain / "m.bin").read_bytes() == b"mv"


def test_write_to_a_missing_session_fails(root: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has no workspace"):
        write_session_file(str(uuid.uuid4()), "x", b"x", root)


# --- listing ------------------------------------------------------------------------------


def test_listing_with_glob_patterns(root: Path, plain: str, events: Events) -> None:
    ws = root / plain
    for name in ("a.txt", "b.csv", ".hidden", "sub/c.txt", "sub/deeper/d.txt", "sub/deeper/e.csv"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(name)
    (ws / "emptydir").mkdir()
    assert list_session_files(plain, root) == [
        ".hidden", "a.txt", "b.csv", "sub/c.txt", "sub/deeper/d.txt", "sub/deeper/e.csv",
    ]
    assert list_session_files(plain, root, "*.txt") == ["a.txt"]
    assert list_session_files(plain, root, "**/*.txt") == ["a.txt", "sub/c.txt", "sub/deeper/d.txt"]
    assert list_session_files(plain, root, "sub/*") == ["sub/c.txt"]
    assert list_session_files(plain, root, "sub/**") == ["sub/c.txt", "sub/deeper/d.txt", "sub/deeper/e.csv"]
    assert list_session_files(plain, root, "**/?.csv") == ["b.csv", "sub/deeper/e.csv"]
    assert list_session_files(plain, root, "nothing*") == []
    assert events.all == []
    list_session_files(plain, root, "*.csv", logger=events.logger)
    assert events.all == [("info", "session.file.list", {"session_id": plain, "pattern": "*.csv", "count": 1})]


def test_listing_does_not_descend_into_linked_folders_or_loops(root: Path, plain: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "o.txt").write_text("o")
    ws = root / plain
    os.symlink(outside, ws / "abs")
    os.symlink(".", ws / "loop")
    (ws / "real.txt").write_text("r")
    assert list_session_files(plain, root) == ["abs", "loop", "real.txt"]


def test_a_listing_stops_at_paths_longer_than_path_max_and_deleting_does_not(root: Path, plain: str) -> None:
    name = "n" * 200
    fd = os.open(root / plain, os.O_RDONLY)
    for _ in range(30):
        os.mkdir(name, dir_fd=fd)
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(os.open("deep.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    (root / plain / "top.txt").write_text("t")
    listing = list_session_file_info(plain, root)
    assert [f.path for f in listing.entries] == ["top.txt"]
    assert listing.cut == f"paths run longer than {MAX_WALK_PATH:,} characters"
    delete_session_path(plain, name, root, recursive=True)
    delete_session_path(plain, "top.txt", root)
    assert os.listdir(root / plain) == []


# --- deleting -----------------------------------------------------------------------------


def test_delete_files_folders_and_their_errors(root: Path, plain: str, events: Events) -> None:
    ws = root / plain
    (ws / "f.txt").write_text("f")
    (ws / "empty").mkdir()
    (ws / "full/inner").mkdir(parents=True)
    (ws / "full/inner/x.txt").write_text("x")
    delete_session_path(plain, "f.txt", root, logger=events.logger)
    assert events.all == [("info", "session.file.delete", {"session_id": plain, "path": "f.txt"})]
    delete_session_path(plain, "empty", root)
    with pytest.raises(OSError, match="recursive=True") as info:
        delete_session_path(plain, "full", root)
    assert info.value.errno == errno.ENOTEMPTY and (ws / "full/inner/x.txt").exists()
    delete_session_path(plain, "full", root, recursive=True)
    assert os.listdir(ws) == []
    with pytest.raises(FileNotFoundError):
        delete_session_path(plain, "f.txt", root)


# --- permission errors ----------------------------------------------------------------------



def _as_nobody(calls: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Run each call as an ordinary user and report "ok" or the exception's type name.
    Root ignores permission bits, so as root the calls run in a forked child that
    has dropped to `nobody`."""

    def run() -> dict[str, str]:
        out = {}
        for name, call in calls.items():
            try:
                call()
                out[name] = "ok"
            except Exception as err:  # noqa: BLE001
                out[name] = type(err).__name__
        return out

    return run_unprivileged(run)


def test_permission_errors_from_file_operations_are_raised_and_change_nothing(shared_root: Path) -> None:
    root, sid = shared_root, str(uuid.uuid4())
    ws = root / sid
    (ws / "ro").mkdir(parents=True)
    (ws / "ro" / "kept.txt").write_bytes(b"original")
    (ws / "secret.txt").write_bytes(b"no reading")
    (ws / "secret.txt").chmod(0o000)
    (ws / "ro").chmod(0o555)  # entries in it can be neither made nor removed
    if os.geteuid() == 0:
        os.chown(ws, 65534, 65534)  # the session is the user's; the two entries above are not
    outcome = _as_nobody({
        "read": lambda: read_session_file(sid, "secret.txt", root),
        "write": lambda: write_session_file(sid, "ro/new.txt", b"x", root),
        "overwrite": lambda: write_session_file(sid, "ro/kept.txt", b"x", root, overwrite=True),
        "delete": lambda: delete_session_path(sid, "ro/kept.txt", root),
        "delete_folder": lambda: delete_session_path(sid, "ro", root, recursive=True),
        "readable": lambda: read_session_file(sid, "ro/kept.txt", root),
    })
    assert outcome == {
        "read": "PermissionError", "write": "PermissionError", "overwrite": "PermissionError",
        "delete": "PermissionError", "delete_folder": "PermissionError", "readable": "ok",
    }
    assert os.listdir(ws / "ro") == ["kept.txt"]  # no temp file left behind

    def write_message() -> None:
        try:
            write_session_file(sid, "ro/new.txt", b"x", root)
        except PermissionError as err:
            if "ro/new.txt" in str(err) and "tmp" not in str(err):
                return
            raise

    # The error names the caller's path, never our temp file.
    assert _as_nobody({"message": write_message}) == {"message": "ok"}
    assert (ws / "ro" / "kept.txt").read_bytes() == b"original"


def test_a_copy_streams_the_data_keeps_the_holes_and_never_replaces(root: Path, plain: str) -> None:
    ws = root / plain
    head, tail = os.urandom(3 * (1 << 20) + 11), os.urandom((1 << 20) + 5)  # past one 1 MiB piece, not aligned
    with open(ws / "src.bin", "wb") as f:
        f.write(head)
        f.seek(64 << 20)  # a 61 MiB hole
        f.write(tail)
        f.truncate((80 << 20) + 3)  # and one at the end
    fd, size = open_session_file(plain, "src.bin", root)
    try:
        assert copy_session_file(plain, fd, size, "sub/dst.bin", root) == size
        with pytest.raises(FileExistsError):
            copy_session_file(plain, fd, size, "sub/dst.bin", root)
        # Asked for more than the file holds (it shrank since it was measured): the copy ends where it does.
        assert copy_session_file(plain, fd, size + 4096, "longer.bin", root) == size
    finally:
        os.close(fd)
    copied = (ws / "sub" / "dst.bin").read_bytes()
    assert copied == (ws / "src.bin").read_bytes() and len(copied) == size
    assert (ws / "sub" / "dst.bin").stat().st_blocks * 512 < 16 << 20  # 80 MiB long, 4 MiB of data
    assert sorted(os.listdir(ws / "sub")) == ["dst.bin"]  # no temp file left


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_special_files_are_refused_before_they_are_opened(root: Path, plain: str, kind: str) -> None:
    target = root / plain / "special"
    make_special(target, kind)
    named = {"fifo": "a FIFO", "socket": "a socket", "device": "a device"}[kind]
    for attempt in (lambda: open_session_file(plain, "special", root),
                    lambda: append_session_file(plain, "special", b"x", root)):
        with pytest.raises(ValueError, match=f"is {named}, not a regular file"):
            attempt()
    assert stat.S_IFMT(os.lstat(target).st_mode) != stat.S_IFREG


def test_a_writes_cost_counts_the_folders_it_would_make(root: Path, plain: str, tmp_path: Path) -> None:
    (root / plain / "a" / "b").mkdir(parents=True)
    (root / plain / "file").write_text("x")
    (root / plain / "out").symlink_to(tmp_path, target_is_directory=True)
    workspace = SessionWorkspace(root, plain)
    try:
        assert workspace.cost_of_write("top.txt", 5, append=False) == ((5, 1), 0)
        assert workspace.cost_of_write("a/b/c.txt", 5, append=False) == ((5, 1), 0)
        assert workspace.cost_of_write("a/b/c/d/e.txt", 5, append=False) == ((5, 3), 0)
        assert workspace.cost_of_write("x/y/z.txt", 5, append=False) == ((5, 3), 0)
        assert workspace.cost_of_write("file", 5, append=False) == ((4, 0), 1)
        assert workspace.cost_of_write("file", 5, append=True) == ((5, 0), 1)
        with pytest.raises(UnsafePathError):
            workspace.cost_of_write("out/new/x.txt", 5, append=False)
        with pytest.raises(NotADirectoryError):
            workspace.cost_of_write("file/x.txt", 5, append=False)
    finally:
        workspace.close()
