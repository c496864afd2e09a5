"""SessionHistory: the per-session SQLite history behind Jupyter's history_request."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from support.events import Events
from wasm_kernel.sessions import new_session_id
from wasm_kernel.sessions.history_store import SessionHistory, remove_session_history
from wasm_kernel.sessions.layout import history_path


@pytest.fixture
def sid() -> str:
    return new_session_id()


def _fill(h: SessionHistory, cells: list[str], outputs: dict[int, str] | None = None) -> int:
    number = h.start_kernel_session()
    for line, source in enumerate(cells, 1):
        h.store(number, line, source, (outputs or {}).get(line))
    return number


# -- where and how it is stored -------------------------------------------------


def test_the_file_is_private_and_in_the_history_folder(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        assert h.persistent
        assert h.path == root / ".wasm-kernel" / "history" / f"{sid}.sqlite3" == history_path(root, sid)
        assert stat.S_IMODE(h.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(h.path.parent.stat().st_mode) == 0o700
        conn = sqlite3.connect(h.path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()


def test_session_ids_are_validated(root: Path) -> None:
    for bad in ("../x", "", "not-a-uuid", "1B4E28BA-2FA1-41D2-883F-0016D3CCA427/.."):
        with pytest.raises(ValueError):
            SessionHistory(root, bad)
    upper = "1B4E28BA-2FA1-41D2-883F-0016D3CCA427"
    with SessionHistory(root, upper) as h:
        assert h.session_id == upper.lower()


def test_bad_arguments_are_programming_errors(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        n = h.start_kernel_session()
        with pytest.raises(TypeError):
            h.store(n, "1", "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            h.store(n, True, "x")
        with pytest.raises(ValueError):
            h.store(0, 1, "x")
        with pytest.raises(TypeError):
            h.store(n, 1, "x", output=42)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            h.tail(-1)
        with pytest.raises(ValueError):
            h.get_range(2**70)


# -- session numbers ----------------------------------------------------------------


def test_each_kernel_start_gets_the_next_session_number_across_restarts(root: Path, sid: str) -> None:
    h1 = SessionHistory(root, sid)
    assert h1.session_number is None
    assert h1.start_kernel_session() == 1
    assert h1.session_number == 1
    h1.close()
    h2 = SessionHistory(root, sid)
    assert h2.start_kernel_session() == 2
    h3 = SessionHistory(root, sid)  # a second kernel on the same session, at the same time
    assert h3.start_kernel_session() == 3
    assert h2.start_kernel_session() == 4  # a restart within the same object
    h2.close()
    h3.close()
    conn = sqlite3.connect(history_path(root, sid))
    rows = conn.execute("SELECT session, end IS NOT NULL FROM sessions ORDER BY session").fetchall()
    conn.close()
    assert rows == [(1, 1), (2, 0), (3, 1), (4, 1)]  # close() records the end of its current session


def test_history_persists_across_a_kernel_restart(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["x = 1", "x + 1"], {2: "2"})
    with SessionHistory(root, sid) as h:
        assert h.get_range(0) == [(1, 1, "x = 1"), (1, 2, "x + 1")]  # no new session yet: the latest
        assert h.start_kernel_session() == 2
        assert h.get_range(0) == []
        h.store(2, 1, "y = 3")
        assert h.get_range(-1, output=True) == [(1, 1, ("x = 1", None)), (1, 2, ("x + 1", "2"))]
        assert h.tail(10, include_latest=True) == [(1, 1, "x = 1"), (1, 2, "x + 1"), (2, 1, "y = 3")]


def test_sessions_have_separate_files(root: Path) -> None:
    a, b = new_session_id(), new_session_id()
    with SessionHistory(root, a) as ha, SessionHistory(root, b) as hb:
        _fill(ha, ["secret_a = 1"])
        assert hb.start_kernel_session() == 1  # numbering is per session uuid
        hb.store(1, 1, "b_only")
        assert ha.search("*") == [(1, 1, "secret_a = 1")]
        assert hb.search("*") == [(1, 1, "b_only")]
        assert ha.path != hb.path and ha.path.is_file() and hb.path.is_file()


# -- store ----------------------------------------------------------------------------


def test_store_again_replaces_input_and_keeps_an_earlier_output(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        n = h.start_kernel_session()
        h.store(n, 1, "1 + 1")  # before running the cell
        h.store(n, 1, "1 + 1", "2")  # after
        h.store(n, 1, "1 + 1")  # output None: kept
        assert h.get_range(0, output=True) == [(1, 1, ("1 + 1", "2"))]
        h.store(n, 1, "2 + 2", "4")
        assert h.get_range(0, output=True) == [(1, 1, ("2 + 2", "4"))]


def test_raw_and_transformed_source(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        n = h.start_kernel_session()
        h.store(n, 1, "get_ipython().run_line_magic('time', 'f()')", source_raw="%time f()")
        h.store(n, 2, "plain")
        assert h.get_range(0) == [(1, 1, "%time f()"), (1, 2, "plain")]
        assert h.get_range(0, raw=False) == [(1, 1, "get_ipython().run_line_magic('time', 'f()')"), (1, 2, "plain")]
        assert h.tail(2, raw=False, include_latest=True)[0][2].startswith("get_ipython")
        assert h.search("%time*") == [(1, 1, "%time f()")]  # the raw source is searched, as IPython


# -- tail -----------------------------------------------------------------------------


def test_tail_is_the_last_n_over_all_sessions_oldest_first(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["a", "b", "c"], {2: "B"})
        _fill(h, ["d", "e"])
        assert h.tail(3, include_latest=True) == [(1, 3, "c"), (2, 1, "d"), (2, 2, "e")]
        # As IPython's get_tail: the latest entry (the cell asking) is left out by default.
        assert h.tail(3) == [(1, 2, "b"), (1, 3, "c"), (2, 1, "d")]
        assert h.tail(2, output=True) == [(1, 3, ("c", None)), (2, 1, ("d", None))]
        assert h.tail(3, output=True, include_latest=True)[0] == (1, 3, ("c", None))
        assert h.tail(100, include_latest=True) == [(1, 1, "a"), (1, 2, "b"), (1, 3, "c"), (2, 1, "d"), (2, 2, "e")]
        assert h.tail(100) == [(1, 1, "a"), (1, 2, "b"), (1, 3, "c"), (2, 1, "d")]
        assert h.tail(0) == [] and h.tail(0, include_latest=True) == []
        assert h.tail(4, output=True)[1] == (1, 2, ("b", "B"))


def test_tail_of_an_empty_history(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        assert h.tail(10) == [] and h.tail(10, include_latest=True) == []
        h.start_kernel_session()
        assert h.tail(10, include_latest=True) == []


# -- get_range ----------------------------------------------------------------------------


def test_get_range_sessions_current_relative_and_absolute(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["s1a", "s1b"])
        _fill(h, ["s2a"])
        _fill(h, ["s3a", "s3b", "s3c", "s3d"], {3: "C"})
        assert h.get_range() == [(3, 1, "s3a"), (3, 2, "s3b"), (3, 3, "s3c"), (3, 4, "s3d")]
        assert h.get_range(0) == h.get_range(3)
        assert h.get_range(-1) == [(2, 1, "s2a")]
        assert h.get_range(-2) == h.get_range(1) == [(1, 1, "s1a"), (1, 2, "s1b")]
        assert h.get_range(-3) == [] and h.get_range(-10) == [] and h.get_range(99) == []


def test_get_range_start_and_stop(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["l1", "l2", "l3", "l4"], {3: "three"})
        lines = lambda rows: [r[1] for r in rows]  # noqa: E731
        assert lines(h.get_range(0, 2)) == [2, 3, 4]
        assert lines(h.get_range(0, 2, 4)) == [2, 3]  # stop is exclusive
        assert lines(h.get_range(0, 1, 0)) == [1, 2, 3, 4]  # stop 0: to the end, as IPython
        assert lines(h.get_range(0, 3, 3)) == []
        assert lines(h.get_range(0, -1)) == [4]  # negative: from the end
        assert lines(h.get_range(0, -2)) == [3, 4]
        assert lines(h.get_range(0, 1, -1)) == [1, 2, 3]
        assert lines(h.get_range(0, -100)) == [1, 2, 3, 4]
        assert lines(h.get_range(0, 3, -3)) == []
        assert h.get_range(0, 3, 4, output=True) == [(1, 3, ("l3", "three"))]


# -- search ---------------------------------------------------------------------------------


def test_search_globs_like_ipython(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["import numpy", "x = 1", "print(x)", "Import this"], {2: "none"})
        _fill(h, ["x = 1", "x2 = 2", "print(x)"])
        assert h.search("*") == h.search() == h.search(None) == h.tail(100, include_latest=True)
        assert h.search("import*") == [(1, 1, "import numpy")]  # GLOB is case sensitive
        assert h.search("*mport*") == [(1, 1, "import numpy"), (1, 4, "Import this")]
        assert h.search("x? = ?") == [(2, 2, "x2 = 2")]
        assert h.search("[Ii]mport *") == [(1, 1, "import numpy"), (1, 4, "Import this")]
        assert h.search("x = 1") == [(1, 2, "x = 1"), (2, 1, "x = 1")]
        assert h.search("x = 1", output=True) == [(1, 2, ("x = 1", "none")), (2, 1, ("x = 1", None))]
        assert h.search("nothing*") == []


def test_search_n_is_the_last_n_matches_oldest_first(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["a1", "b", "a2"])
        _fill(h, ["a3", "a4"])
        assert h.search("a*", n=2) == [(2, 1, "a3"), (2, 2, "a4")]
        assert h.search("a*", n=10) == [(1, 1, "a1"), (1, 3, "a2"), (2, 1, "a3"), (2, 2, "a4")]
        assert h.search("a*", n=0) == []


def test_search_unique_keeps_the_latest_occurrence(root: Path, sid: str) -> None:
    with SessionHistory(root, sid) as h:
        _fill(h, ["x", "y", "x", "z"], {3: "third"})
        _fill(h, ["y", "w"])
        assert h.search("*", unique=True) == [(1, 3, "x"), (1, 4, "z"), (2, 1, "y"), (2, 2, "w")]
        assert h.search("*", unique=True, n=2) == [(2, 1, "y"), (2, 2, "w")]
        assert h.search("x", unique=True, output=True) == [(1, 3, ("x", "third"))]
        assert h.search("[xy]", unique=True, n=1) == [(2, 1, "y")]


# -- robustness --------------------------------------------------------------------------------


def test_a_corrupt_file_is_set_aside_and_a_fresh_one_started(root: Path, sid: str) -> None:
    path = history_path(root, sid)
    path.parent.mkdir(parents=True)
    garbage = b"this is not a database\0" * 100
    path.write_bytes(garbage)
    events = Events()
    with SessionHistory(root, sid, logger=events.logger) as h:
        assert h.persistent
        assert h.start_kernel_session() == 1
        h.store(1, 1, "still works")
        assert h.tail(1, include_latest=True) == [(1, 1, "still works")]
    assert Path(str(path) + ".corrupt").read_bytes() == garbage
    (warned,) = events.named("history.corrupt")
    assert warned["moved_to"] == str(path) + ".corrupt"
    with SessionHistory(root, sid) as h:
        assert h.search("*") == [(1, 1, "still works")]


def test_a_folder_at_the_history_path_is_set_aside_and_a_fresh_file_begun(root: Path, sid: str) -> None:
    path = history_path(root, sid)
    path.mkdir(parents=True)  # a folder where the file should be
    (path / "inside").write_text("kept")
    notes: list[str] = []
    with SessionHistory(root, sid, notes=notes) as h:
        assert h.persistent
        h.store(h.start_kernel_session(), 1, "kept on disk")
    (line,) = notes
    assert line.startswith(f"the session's history was a folder: set aside as {path.name}.set-aside-")
    (aside,) = path.parent.glob(f"{path.name}.set-aside-*")
    assert (aside / "inside").read_text() == "kept"  # moved, never deleted
    with SessionHistory(root, sid) as h:
        assert h.get_range(1) == [(1, 1, "kept on disk")]


def test_a_missing_root_falls_back_to_memory(tmp_path: Path, sid: str) -> None:
    events = Events()
    with SessionHistory(tmp_path / "absent", sid, logger=events.logger) as h:
        assert not h.persistent
        h.store(h.start_kernel_session(), 1, "x")
        assert h.search("x") == [(1, 1, "x")]
    assert events.named("history.unavailable")
    assert not (tmp_path / "absent").exists()


def test_a_newer_schema_is_left_alone(root: Path, sid: str) -> None:
    path = history_path(root, sid)
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with SessionHistory(root, sid) as h:
        assert not h.persistent
        h.store(h.start_kernel_session(), 1, "x")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    conn.close()


@pytest.mark.parametrize("where", ["file", "wal", "folder", "private"])
def test_a_symlink_planted_at_the_history_path_is_never_followed(root: Path, sid: str, tmp_path: Path, where: str) -> None:
    target_dir = tmp_path / "elsewhere"
    target_dir.mkdir()
    target = target_dir / "victim"
    target.write_bytes(b"precious")
    path = history_path(root, sid)
    if where == "private":
        (root / ".wasm-kernel").symlink_to(target_dir)
    elif where == "folder":
        (root / ".wasm-kernel").mkdir()
        path.parent.symlink_to(target_dir)
    else:
        path.parent.mkdir(parents=True)
        link = path if where == "file" else Path(str(path) + "-wal")
        link.symlink_to(target)
    events = Events()
    notes: list[str] = []
    with SessionHistory(root, sid, logger=events.logger, notes=notes) as h:
        # A link at a file's place is set aside (the link itself) and a fresh file
        # begun; one at a folder's place leaves the history in memory.
        assert h.persistent == (where in ("file", "wal"))
        h.store(h.start_kernel_session(), 1, "x")
        assert h.get_range(0) == [(1, 1, "x")]
    if where in ("file", "wal"):
        (line,) = notes
        assert "was a symbolic link: set aside as" in line
        (aside,) = path.parent.glob("*.set-aside-*")
        assert aside.is_symlink()
    else:
        assert events.named("history.unavailable")
    assert target.read_bytes() == b"precious"
    assert sorted(p.name for p in target_dir.iterdir()) == ["victim"]  # nothing made there


def test_a_hard_link_is_refused(root: Path, sid: str, tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).close()
    path = history_path(root, sid)
    path.parent.mkdir(parents=True)
    os.link(other, path)
    notes: list[str] = []
    with SessionHistory(root, sid, notes=notes) as h:
        assert h.persistent  # a fresh file of its own, the link set aside
        h.store(h.start_kernel_session(), 1, "x")
    assert notes and "a file with 2 hard links: set aside as" in notes[0]
    assert other.stat().st_size == 0


def test_errors_after_opening_degrade_to_empty_and_no_op(root: Path, sid: str) -> None:
    events = Events()
    h = SessionHistory(root, sid, logger=events.logger)
    n = _fill(h, ["a", "b"])
    vandal = sqlite3.connect(h.path)
    vandal.execute("DROP TABLE history")
    vandal.close()
    h.store(n, 3, "c")  # no exception
    h.store(n, 4, "d")
    assert h.tail(5) == [] and h.get_range(0) == [] and h.search("*") == []
    h.close()
    levels = [level for level, name, _ in events.all if name == "history.error"]
    assert levels[0] == "warning" and set(levels[1:]) == {"debug"} and len(levels) >= 5
    assert events.named("history.error")[0]["operation"] == "store"


def test_after_close_nothing_is_stored_or_found(root: Path, sid: str) -> None:
    h = SessionHistory(root, sid)
    n = _fill(h, ["a"])
    h.close()
    h.close()  # idempotent
    assert not h.persistent
    h.store(n, 2, "b")
    assert h.tail(5, include_latest=True) == [] and h.get_range(0) == [] and h.search() == []
    with pytest.raises(ValueError):
        h.start_kernel_session()
    with SessionHistory(root, sid) as again:
        assert again.search() == [(1, 1, "a")]


def test_concurrent_kernels_and_threads(root: Path, sid: str) -> None:
    """Four kernels of one session (own connections) and a shared object used by
    four threads: distinct session numbers, nothing lost."""
    shared = SessionHistory(root, sid)
    numbers: list[int] = []
    errors: list[BaseException] = []

    def own_kernel() -> None:
        try:
            with SessionHistory(root, sid) as h:
                n = h.start_kernel_session()
                numbers.append(n)
                for line in range(1, 26):
                    h.store(n, line, f"k{n}-{line}", str(line))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    shared_n = shared.start_kernel_session()

    def shared_thread(t: int) -> None:
        try:
            for line in range(t * 25 + 1, t * 25 + 26):
                shared.store(shared_n, line, f"shared-{line}")
                shared.tail(3)
        except BaseException as err:  # pragma: no cover
            errors.append(err)

    threads = [threading.Thread(target=own_kernel) for _ in range(4)]
    threads += [threading.Thread(target=shared_thread, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(numbers + [shared_n]) == [1, 2, 3, 4, 5]
    for n in numbers:
        assert len(shared.get_range(n)) == 25
    assert len(shared.get_range(shared_n)) == 100
    shared.close()


# -- removal ---------------------------------------------------------------------------------------


def test_remove_session_history_removes_the_file_its_sidecars_and_a_corrupt_copy(root: Path, sid: str) -> None:
    other = new_session_id()
    with SessionHistory(root, other) as keep:
        keep.store(keep.start_kernel_session(), 1, "kept")
    path = history_path(root, sid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(path.name + ".corrupt").write_bytes(b"junk")
    h = SessionHistory(root, sid)
    h.store(h.start_kernel_session(), 1, "x")
    assert Path(str(path) + "-wal").exists()  # open in WAL mode
    assert remove_session_history(root, sid) is True
    h.close()
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{other}.sqlite3"]
    assert remove_session_history(root, sid) is False
    assert remove_session_history(root / "absent", sid) is False
    with SessionHistory(root, other) as keep:
        assert keep.search() == [(1, 1, "kept")]


def test_remove_session_history_does_not_follow_a_linked_folder(root: Path, sid: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / f"{sid}.sqlite3"
    victim.write_bytes(b"not ours")
    (root / ".wasm-kernel").mkdir()
    (root / ".wasm-kernel" / "history").symlink_to(elsewhere)
    assert remove_session_history(root, sid) is False
    assert victim.read_bytes() == b"not ours"
    with pytest.raises(ValueError):
        remove_session_history(root, "../../etc")


def test_deleting_or_pruning_a_session_removes_its_history(tmp_path: Path) -> None:
    from wasm_kernel import create_session_sandbox, delete_session_workspace, prune_sessions
    from wasm_kernel.sessions.layout import history_path

    root = tmp_path / "root"
    gone = []
    for _ in range(2):
        sid, sb = create_session_sandbox(workspace_root=root)
        sb.close()
        with SessionHistory(root, sid) as history:
            history.store(history.start_kernel_session(), 1, "x = 1")
        assert history_path(root, sid).exists()
        gone.append(sid)
    delete_session_workspace(gone[0], root)
    assert not history_path(root, gone[0]).exists()
    prune_sessions(0, root)
    assert not history_path(root, gone[1]).exists()
