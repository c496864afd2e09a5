"""A session follows its notebook (sessions/moves.py): a rename re-points the identity
registry, so the renamed notebook's next kernel finds its files; a folder rename
moves every notebook under it; a clash changes nothing; and a move racing kernels
that bind the new name never splits or loses a session. Real SQLite, real processes,
and one real kernel for %session."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from wasm_kernel.sessions import (
    MoveResult,
    SessionMoveError,
    SessionRegistry,
    derive_session_identity,
    move_notebook_sessions,
)
from wasm_kernel.sessions.registry import REGISTRY_FILE

AGENT = "tester"


@pytest.fixture
def registry(root: Path) -> Iterator[SessionRegistry]:
    reg = SessionRegistry(root)
    yield reg
    reg.close()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def bind(registry: SessionRegistry, path: Path, mode: str = "notebook", scope: str | None = None,
         agent: str = AGENT) -> str:
    return registry.get_or_create_session(derive_session_identity(path, mode, scope, agent))


def rows(root: Path) -> list[tuple[str, str, str]]:
    """(session_id, notebook_path, identity_key) of every registry row, read directly."""
    with sqlite3.connect(root / ".wasm-kernel" / REGISTRY_FILE) as conn:
        return sorted(conn.execute("SELECT session_id, notebook_path, identity_key FROM agent_sessions"))


def test_a_renamed_notebook_keeps_its_session_and_the_old_name_gets_a_new_one(
    registry: SessionRegistry, root: Path, folder: Path
) -> None:
    (folder / "a.ipynb").write_text("{}")
    sid = bind(registry, folder / "a.ipynb")
    (folder / "a.ipynb").rename(folder / "b.ipynb")  # as `mv` leaves it: the old path is gone

    result = move_notebook_sessions(root, str(folder / "a.ipynb"), str(folder / "b.ipynb"))

    assert [tuple(m) for m in result] == [(sid, str(folder / "a.ipynb"), str(folder / "b.ipynb"))]
    assert bind(registry, folder / "b.ipynb") == sid  # a fresh derive + bind of the new name
    entry = registry.lookup(sid)
    assert entry is not None and entry.notebook_path == str(folder / "b.ipynb")
    assert entry.identity_key == derive_session_identity(folder / "b.ipynb", agent_key=AGENT).key
    fresh = bind(registry, folder / "a.ipynb")
    assert fresh != sid and len(rows(root)) == 2


def test_every_mode_and_agent_of_the_old_name_moves(registry: SessionRegistry, root: Path, folder: Path) -> None:
    old, new = folder / "a.ipynb", folder / "b.ipynb"
    sids = {
        bind(registry, old): ("notebook", None, AGENT),
        bind(registry, old, agent="bob"): ("notebook", None, "bob"),
        bind(registry, old, "run", "kernel-1"): ("run", "kernel-1", AGENT),
        bind(registry, old, "day", "2026-11-25", "bob"): ("day", "2026-11-25", "bob"),
    }
    other = bind(registry, folder / "other.ipynb")

    result = move_notebook_sessions(root, old, new)

    assert sorted(m.session_id for m in result) == sorted(sids)
    for sid, (mode, scope, agent) in sids.items():
        assert bind(registry, new, mode, scope, agent) == sid
    assert bind(registry, folder / "other.ipynb") == other  # untouched


def test_a_renamed_folder_moves_every_notebook_under_it_and_not_a_prefix_sibling(
    registry: SessionRegistry, root: Path, folder: Path
) -> None:
    for sub in ("course/week1", "course2"):
        (folder / sub).mkdir(parents=True)
    inside = {p: bind(registry, folder / p) for p in ("course/hw1.ipynb", "course/week1/hw2.ipynb")}
    sibling = bind(registry, folder / "course2" / "hw1.ipynb")
    (folder / "course").rename(folder / "course-2024")

    result = move_notebook_sessions(root, folder / "course/", folder / "course-2024")

    assert {m.session_id: m.new_path for m in result} == {
        sid: str(folder / "course-2024" / p.split("/", 1)[1]) for p, sid in inside.items()
    }
    for p, sid in inside.items():
        assert bind(registry, folder / "course-2024" / p.split("/", 1)[1]) == sid
    entry = registry.lookup(sibling)
    assert entry is not None and entry.notebook_path == str(folder / "course2" / "hw1.ipynb")


def test_a_move_onto_a_name_with_its_own_session_changes_nothing(
    registry: SessionRegistry, root: Path, folder: Path
) -> None:
    old_sid = bind(registry, folder / "draft.ipynb")
    also_old = bind(registry, folder / "draft.ipynb", agent="bob")  # would move, but all or nothing
    taken = bind(registry, folder / "hw1.ipynb", agent="bob")
    before = rows(root)

    with pytest.raises(SessionMoveError) as err:
        move_notebook_sessions(root, folder / "draft.ipynb", folder / "hw1.ipynb")

    message = str(err.value)
    assert message == (f"hw1.ipynb already has its own session {taken}; kept both as they were: "
                       "remove or move that session first")
    assert str(folder) not in message and "\n" not in message
    assert rows(root) == before
    assert {bind(registry, folder / "draft.ipynb"), bind(registry, folder / "draft.ipynb", agent="bob")} == {old_sid, also_old}


def test_a_folder_move_clash_names_the_notebook_under_the_new_folder(
    registry: SessionRegistry, root: Path, folder: Path
) -> None:
    (folder / "new").mkdir()
    bind(registry, folder / "old" / "hw1.ipynb")
    taken = bind(registry, folder / "new" / "hw1.ipynb")
    with pytest.raises(SessionMoveError, match=f"^new/hw1.ipynb already has its own session {taken};"):
        move_notebook_sessions(root, folder / "old", folder / "new")


def test_no_session_for_the_old_name_is_an_empty_result_and_creates_no_registry(root: Path, folder: Path) -> None:
    result = move_notebook_sessions(root, folder / "a.ipynb", folder / "b.ipynb")
    assert isinstance(result, MoveResult) and not result and list(result) == []
    assert result.old_path == str(folder / "a.ipynb")
    assert list(root.iterdir()) == []  # no registry, nothing at all


@pytest.mark.parametrize(("old", "new", "message"), [
    ("a.ipynb", "a.ipynb", "^a.ipynb and a.ipynb are the same notebook; nothing to move$"),
    ("course", "course/sub", "^sub lies inside course: a folder cannot move into itself$"),
    ("a.ipynb", "", "^the new path: notebook_path must not be empty$"),
    ("a\0.ipynb", "b.ipynb", "^the old path: notebook_path must not contain NUL bytes$"),
    ("a.ipynb", "sub", r"^sub is a folder; give the notebook's new path, e.g. sub/a.ipynb$"),
])
def test_bad_moves_are_refused_in_one_line(
    registry: SessionRegistry, root: Path, folder: Path, old: str, new: str, message: str
) -> None:
    (folder / "sub").mkdir()
    sid = bind(registry, folder / "a.ipynb")
    with pytest.raises(SessionMoveError, match=message):
        move_notebook_sessions(root, folder / old if old else old, folder / new if new else new)
    assert bind(registry, folder / "a.ipynb") == sid


def test_a_non_utf8_notebook_name_under_a_moved_folder_keeps_its_exact_key(
    registry: SessionRegistry, root: Path, folder: Path
) -> None:
    import os

    odd = Path(os.fsdecode(bytes(folder) + b"/old/le\xffsson.ipynb"))
    sid = bind(registry, odd)
    result = move_notebook_sessions(root, folder / "old", folder / "new")
    moved = Path(os.fsdecode(bytes(folder) + b"/new/le\xffsson.ipynb"))
    assert [m.new_path for m in result] == [str(moved)]
    assert bind(registry, moved) == sid


# --- a move racing kernels that bind the new name ---------------------------------------

BINDER = textwrap.dedent(
    """
    import json, sys, threading, time
    from wasm_kernel import SessionRegistry, derive_session_identity
    root, folder = sys.argv[1:3]
    registry = SessionRegistry(root)
    print("ready", flush=True)
    for line in sys.stdin:
        round_no, delay = line.split()
        identity = derive_session_identity(f"{folder}/b{round_no}.ipynb", agent_key="tester")
        seen, threads = set(), []
        def work(pause):
            time.sleep(pause)
            for _ in range(3):
                seen.add(registry.get_or_create_session(identity))
        for k in range(2):  # two threads per process
            threads.append(threading.Thread(target=work, args=(float(delay) * k,)))
            threads[-1].start()
        for t in threads:
            t.join()
        print(json.dumps(sorted(seen)), flush=True)
    registry.close()
    """
)


@pytest.mark.slow
def test_a_move_racing_binds_of_the_new_name_never_splits_or_loses_a_session(
    registry: SessionRegistry, root: Path, folder: Path
) -> None:
    rng = random.Random(21)
    bind(registry, folder / "warm.ipynb")  # the registry exists before the workers open it
    workers = [subprocess.Popen([sys.executable, "-c", BINDER, str(root), str(folder)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outcomes = {"moved": 0, "refused": 0}
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        for i in range(30):
            old, new = folder / f"a{i}.ipynb", folder / f"b{i}.ipynb"
            original = bind(registry, old)
            for w in workers:
                assert w.stdin is not None
                w.stdin.write(f"{i} {rng.uniform(0, 0.002):.6f}\n")
                w.stdin.flush()
            time.sleep(rng.uniform(0, 0.003))
            try:
                move_notebook_sessions(root, old, new)
                moved = True
            except SessionMoveError:
                moved = False
            seen = [json.loads(w.stdout.readline()) for w in workers]  # type: ignore[union-attr]
            assert all(len(ids) == 1 for ids in seen), seen  # one process never saw two ids
            ids = {ids[0] for ids in seen}
            assert len(ids) == 1, f"round {i}: binders of one name got {ids}"
            entry = registry.lookup(original)
            assert entry is not None, f"round {i}: the moved session was lost"
            if moved:
                outcomes["moved"] += 1
                assert ids == {original} and entry.notebook_path == str(new)
            else:
                outcomes["refused"] += 1  # a binder made the new name's session first
                assert original not in ids and entry.notebook_path == str(old)
            paths = [p for _sid, p, _key in rows(root)]
            assert paths.count(str(new)) == 1 and paths.count(str(old)) == (0 if moved else 1)
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
            w.wait(30)
    assert all(w.returncode == 0 for w in workers)
    assert sum(outcomes.values()) == 30, outcomes


# --- a running kernel follows the rename -------------------------------------------------


def _session_table(kernel: RunningKernel) -> str:
    return kernel.execute("%session").displays()[0]["data"]["text/plain"]


@pytest.mark.slow
def test_session_shows_the_new_name_at_once_and_the_renamed_notebook_reopens_its_files(
    tmp_path: Path, folder: Path
) -> None:
    (folder / "a.ipynb").write_text("{}")
    data = tmp_path / "jupyter"
    kernel = RunningKernel(data, cwd=folder, env={"JPY_SESSION_NAME": str(folder / "a.ipynb")})
    try:
        assert kernel.execute("open('/app/kept.txt', 'w').write('written as a.ipynb')").status == "ok"
        before = _session_table(kernel)
        assert re.search(r"notebook\s+a\.ipynb", before), before
        sid = kernel.session_id()

        (folder / "a.ipynb").rename(folder / "b.ipynb")
        assert len(move_notebook_sessions(kernel.sessions_root, folder / "a.ipynb", folder / "b.ipynb")) == 1

        after = _session_table(kernel)  # the same kernel, no restart
        assert re.search(r"notebook\s+b\.ipynb", after) and "a.ipynb" not in after, after
        assert not re.search(r"\d\d:\d\d:\d\d\.\d{6}", after), after  # no raw ISO times with microseconds
        assert re.search(r"created\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC \((just now|\d+ min ago)\)", after), after
        assert str(folder) not in after
    finally:
        kernel.shutdown()

    reopened = RunningKernel(data, cwd=folder, env={"JPY_SESSION_NAME": str(folder / "b.ipynb")})
    try:
        assert reopened.session_id() == sid
        run = reopened.execute("open('/app/kept.txt').read()")
        assert run.of_type("execute_result")[0]["data"]["text/plain"] == "'written as a.ipynb'"
    finally:
        reopened.shutdown()
