"""Stable identity (seed 002) for notebooks: derive_session_identity and the SQLite
registry. Seed 002's tests A-D are ported first, then the key, the modes, expiry
cleanup (with leases), persistence and broken registry files."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from wasm_kernel import (
    RegistryError,
    SessionIdentity,
    SessionRegistry,
    create_session_sandbox,
    delete_session_workspace,
    derive_session_identity,
    get_or_create_session,
    get_session_sandbox,
    prune_sessions,
)
from wasm_kernel.sessions.layout import metadata_path
from wasm_kernel.sessions.metadata import SessionMetadata, write_metadata
from wasm_kernel.sessions.registry import REGISTRY_FILE

from support.events import Events


@pytest.fixture
def registry(root: Path) -> Iterator[SessionRegistry]:
    reg = SessionRegistry(root)
    yield reg
    reg.close()


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    nb = tmp_path / "project" / "analysis.ipynb"
    nb.parent.mkdir()
    nb.write_text("{}")
    return nb


# --- A: parallel bind isolation ----------------------------------------------------------


def test_a_parallel_binds_in_threads_give_one_session_per_identity(registry: SessionRegistry, notebook: Path) -> None:
    agents = [f"Coder{i}" for i in range(8)]
    shared = derive_session_identity(notebook, "run", "X", "Shared")
    seen: dict[str, set[str]] = defaultdict(set)
    shared_seen: set[str] = set()
    lock = threading.Lock()
    start = threading.Barrier(len(agents))
    errors: list[BaseException] = []

    def agent_work(agent: str) -> None:
        try:
            identity = derive_session_identity(notebook, "run", "X", agent)
            start.wait()
            for i in range(50):
                sid = registry.get_or_create_session(identity)
                other = registry.get_or_create_session(shared) if i % 5 == 0 else None
                with lock:
                    seen[agent].add(sid)
                    if other:
                        shared_seen.add(other)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=agent_work, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert all(len(ids) == 1 for ids in seen.values()), seen
    per_agent = {agent: next(iter(ids)) for agent, ids in seen.items()}
    assert len(set(per_agent.values())) == len(agents)  # no cross-talk between agents
    assert len(shared_seen) == 1 and shared_seen.isdisjoint(per_agent.values())
    for agent, sid in per_agent.items():
        entry = registry.lookup(sid)
        assert entry is not None and entry.agent_key == agent and entry.scope_key == "X"


BINDER = textwrap.dedent(
    """
    import json, os, sys, time
    from wasm_kernel import SessionRegistry, derive_session_identity
    root, notebook, me, go = sys.argv[1:5]
    registry = SessionRegistry(root)
    mine = [derive_session_identity(notebook, "run", f"run-{k}", me) for k in range(20)]
    shared = derive_session_identity(notebook, "run", "run-0", "Shared")
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    seen = {}
    for i in range(200):
        identity = mine[i % len(mine)]
        seen.setdefault(identity.key, set()).add(registry.get_or_create_session(identity))
        if i % 4 == 0:
            seen.setdefault(shared.key, set()).add(registry.get_or_create_session(shared))
    registry.close()
    print(json.dumps({key: sorted(ids) for key, ids in seen.items()}), flush=True)
    """
)


@pytest.mark.slow
def test_a_four_processes_binding_at_once_never_cross_talk(root: Path, notebook: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BINDER, str(root), str(notebook), f"Agent{p}", str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for p in range(4)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        go.touch()  # all four start binding at the same moment, on a registry none has created yet
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    shared_key = derive_session_identity(notebook, "run", "run-0", "Shared").key
    shared_ids = set()
    owner: dict[str, str] = {}  # session id -> identity key
    for p, seen in enumerate(outputs):
        assert len(seen) == 21  # 20 own identities + the shared one
        for key, ids in seen.items():
            assert len(ids) == 1, f"identity {key} got {ids} in process {p}"
            if key == shared_key:
                shared_ids.update(ids)
            else:
                sid = ids[0]
                assert owner.setdefault(sid, key) == key  # no session serves two identities
    assert len(shared_ids) == 1  # exactly one UUID for the shared identity across all processes
    assert len(owner) == 4 * 20 and shared_ids.isdisjoint(owner)
    with SessionRegistry(root) as reg:
        for sid, key in owner.items():
            entry = reg.lookup(sid)
            assert entry is not None and entry.identity_key == key


@pytest.mark.slow
def test_a_parallel_agents_running_cells_each_see_only_their_own_entries(root: Path, notebook: Path) -> None:
    """Seed 002's test A as it reads, with the real guest: two agents work in the same
    notebook and run at once; every "tool call" binds again, and each agent's log
    holds only its own entries."""
    start = threading.Barrier(2)
    results: dict[str, tuple[set[str], str]] = {}
    errors: list[BaseException] = []

    def agent_work(agent: str) -> None:
        try:
            identity = derive_session_identity(notebook, "run", "X", agent)
            start.wait()
            bound = set()
            for i in range(3):
                sid = get_or_create_session(identity, root)
                bound.add(sid)
                with get_session_sandbox(sid, workspace_root=root) as sb:
                    r = sb.execute(f"open('entries.log', 'a').write('Hello {i} from {agent}\\n')")
                    assert r.success, r.error
            sid = get_or_create_session(identity, root)
            bound.add(sid)
            with get_session_sandbox(sid, workspace_root=root) as sb:
                results[agent] = (bound, sb.execute("print(open('entries.log').read(), end='')").stdout)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=agent_work, args=(a,)) for a in ("CoderA", "CoderB")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    (ids_a, log_a), (ids_b, log_b) = results["CoderA"], results["CoderB"]
    assert len(ids_a) == len(ids_b) == 1 and ids_a != ids_b
    assert log_a == "".join(f"Hello {i} from CoderA\n" for i in range(3))
    assert log_b == "".join(f"Hello {i} from CoderB\n" for i in range(3))


# --- B: cross-run isolation --------------------------------------------------------------


def test_b_runs_with_different_execution_ids_get_different_sessions(registry: SessionRegistry, notebook: Path) -> None:
    run1 = registry.get_or_create_session(derive_session_identity(notebook, "run", "run-1", "Coder"))
    run2 = registry.get_or_create_session(derive_session_identity(notebook, "run", "run-2", "Coder"))
    again = registry.get_or_create_session(derive_session_identity(notebook, "run", "run-1", "Coder"))
    assert run1 != run2 and again == run1
    # And the other modes of the same notebook are sessions of their own.
    persistent = registry.get_or_create_session(derive_session_identity(notebook, "notebook", agent_key="Coder"))
    daily = registry.get_or_create_session(derive_session_identity(notebook, "day", "2026-01-03", "Coder"))
    assert len({run1, run2, persistent, daily}) == 4


# --- C: symlink canonicalisation ---------------------------------------------------------


def test_c_a_notebook_reached_through_a_symlinked_folder_is_the_same_session(
    registry: SessionRegistry, notebook: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link_to_project"
    link.symlink_to(notebook.parent)
    real = derive_session_identity(notebook, "run", "X", "Coder")
    via_link = derive_session_identity(link / notebook.name, "run", "X", "Coder")
    relative = derive_session_identity(os.path.relpath(link / ".." / "project" / notebook.name), "run", "X", "Coder")
    assert via_link.notebook_path == real.notebook_path == os.path.realpath(notebook)
    assert via_link == real == relative
    assert registry.get_or_create_session(real) == registry.get_or_create_session(via_link)


# --- D: missing-agent fallback -----------------------------------------------------------


def test_d_without_an_agent_the_os_user_is_used_and_runs_stay_separate(
    registry: SessionRegistry, notebook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    one = derive_session_identity(notebook, "run", "run-1")
    two = derive_session_identity(notebook, "run", "run-2")
    assert one.agent_key == two.agent_key == "alice"
    assert registry.get_or_create_session(one) != registry.get_or_create_session(two)


def test_d_with_no_user_at_all_the_agent_is_default_and_still_scoped_by_run(
    registry: SessionRegistry, notebook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)

    def no_user() -> str:
        raise OSError("No username set in the environment")

    monkeypatch.setattr(getpass, "getuser", no_user)
    one = derive_session_identity(notebook, "run", "run-1")
    two = derive_session_identity(notebook, "run", "run-2")
    assert one.agent_key == two.agent_key == "default"
    assert one.material.endswith(":run:run-1:default")
    assert registry.get_or_create_session(one) != registry.get_or_create_session(two)


def test_agent_key_order_explicit_then_jupyterhub_user_then_os_user(notebook: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "osuser")
    monkeypatch.setenv("JUPYTERHUB_USER", "hubuser")
    assert derive_session_identity(notebook, agent_key="CoderA").agent_key == "CoderA"
    assert derive_session_identity(notebook).agent_key == "hubuser"
    assert derive_session_identity(notebook, agent_key="").agent_key == "hubuser"  # empty = not given
    monkeypatch.setenv("JUPYTERHUB_USER", "")
    assert derive_session_identity(notebook).agent_key == "osuser"


# --- seed 002's isolation truth table ------------------------------------------------------


def test_the_isolation_truth_table_holds(
    registry: SessionRegistry, notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)

    def no_user() -> str:
        raise OSError("No username set in the environment")

    monkeypatch.setattr(getpass, "getuser", no_user)
    elsewhere = tmp_path / "repo2" / notebook.name  # same file name, another folder
    elsewhere.parent.mkdir()
    elsewhere.write_text("{}")
    link = tmp_path / "via_link"
    link.symlink_to(notebook.parent)
    rows = {
        "CoderA, run X": (notebook, "run", "X", "CoderA"),
        "CoderB, run X": (notebook, "run", "X", "CoderB"),
        "CoderA, run Y": (notebook, "run", "Y", "CoderA"),
        "CoderA, other notebook, run X": (elsewhere, "run", "X", "CoderA"),
        "no agent, run X": (notebook, "run", "X", None),
        "CoderA, day D": (notebook, "day", "2026-01-03", "CoderA"),
        "CoderA, notebook mode": (notebook, "notebook", None, "CoderA"),
    }
    sessions = {name: registry.get_or_create_session(derive_session_identity(*args)) for name, args in rows.items()}
    assert len(set(sessions.values())) == len(rows), sessions  # every row its own session
    assert registry.lookup(sessions["no agent, run X"]).agent_key == "default"  # type: ignore[union-attr]
    via_link = registry.get_or_create_session(derive_session_identity(link / notebook.name, "run", "X", "CoderA"))
    assert via_link == sessions["CoderA, run X"]


# --- the key and the modes ---------------------------------------------------------------


def test_the_key_is_the_full_sha256_of_path_mode_scope_agent(notebook: Path) -> None:
    identity = derive_session_identity(notebook, "run", "exec-42", "CoderA")
    material = f"{os.path.realpath(notebook)}:run:exec-42:CoderA"
    assert identity.material == material
    assert identity.key == hashlib.sha256(material.encode()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", identity.key)
    assert derive_session_identity(notebook, agent_key="CoderA").material == f"{os.path.realpath(notebook)}:notebook::CoderA"
    # Frozen: an identity cannot be edited into another one.
    with pytest.raises(AttributeError):
        identity.agent_key = "CoderB"  # type: ignore[misc]


def test_day_mode_uses_the_utc_date(notebook: Path) -> None:
    before = datetime.now(timezone.utc).date().isoformat()
    scope = derive_session_identity(notebook, "day", agent_key="a").scope_key
    after = datetime.now(timezone.utc).date().isoformat()
    assert scope in (before, after) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", scope)
    assert derive_session_identity(notebook, "day", date(2026, 1, 3), "a").scope_key == "2026-01-03"
    # 01:30 in UTC+2 is still the previous day in UTC.
    late = datetime(2026, 1, 4, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    assert derive_session_identity(notebook, "day", late, "a").scope_key == "2026-01-03"
    assert derive_session_identity(notebook, "day", "2026-01-03", "a").key == derive_session_identity(
        notebook, "day", date(2026, 1, 3), "a"
    ).key


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nb.ipynb", "project"), "unknown session mode"),
        (("nb\0.ipynb",), "NUL"),
        (("",), "must not be empty"),
        (("nb.ipynb", "notebook", "run-1"), "takes no scope_key"),
        (("nb.ipynb", "run"), "needs a scope_key"),
        (("nb.ipynb", "run", "a:b"), "must not contain ':'"),
        (("nb.ipynb", "run", "x\0"), "NUL"),
        (("nb.ipynb", "day", "2026-13-01"), "UTC date"),
        (("nb.ipynb", "day", "3 Jan 2026"), "UTC date"),
        (("nb.ipynb", "day", datetime(2026, 1, 3)), "aware datetime"),
        (("nb.ipynb", "notebook", None, "Coder:A"), "must not contain ':'"),
        (("nb.ipynb", "notebook", None, " Coder"), "whitespace"),
    ],
)
def test_bad_inputs_raise_one_line_value_errors(args: tuple[object, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        derive_session_identity(*args)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_hand_edited_identity_is_refused(registry: SessionRegistry, notebook: Path) -> None:
    import dataclasses

    forged = dataclasses.replace(derive_session_identity(notebook, agent_key="a"), agent_key="b")
    with pytest.raises(ValueError, match="does not match"):
        registry.get_or_create_session(forged)


# --- the registry ------------------------------------------------------------------------


def test_a_bind_refreshes_last_active_and_expiry_but_keeps_the_session(root: Path, notebook: Path) -> None:
    with SessionRegistry(root, ttl_hours=2) as reg:
        identity = derive_session_identity(notebook, agent_key="a")
        sid = reg.get_or_create_session(identity)
        first = reg.lookup(sid)
        time.sleep(0.01)
        assert reg.get_or_create_session(identity) == sid
        second = reg.lookup(sid)
    assert first is not None and second is not None
    assert second.created_at == first.created_at
    assert second.last_active_at > first.last_active_at and second.expires_at > first.expires_at
    assert abs((second.expires_at - second.last_active_at) - timedelta(hours=2)) < timedelta(seconds=1)
    assert (second.notebook_path, second.mode, second.scope_key, second.agent_key) == (
        os.path.realpath(notebook), "notebook", "", "a",
    )
    assert second.identity == identity
    uuid.UUID(sid)  # a canonical uuid4
    assert uuid.UUID(sid).version == 4 and str(uuid.UUID(sid)) == sid


def test_the_registry_is_seed_002s_agent_sessions_table_in_wal_mode(root: Path, notebook: Path) -> None:
    import sqlite3

    identity = derive_session_identity(notebook, agent_key="a")
    sid = get_or_create_session(identity, root)
    conn = sqlite3.connect(root / ".wasm-kernel" / REGISTRY_FILE)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = {name: (notnull, pk) for _, name, _, notnull, _, pk in conn.execute("PRAGMA table_info(agent_sessions)")}
        # Seed 002's columns, with notebook_path for repo_root and agent_key doubling as agent_name.
        assert set(columns) == {
            "session_id", "identity_key", "agent_key", "notebook_path", "mode", "scope_key",
            "created_at", "last_active_at", "expires_at",
        }
        assert columns["session_id"][1] == 1
        assert all(columns[c][0] for c in ("identity_key", "agent_key", "notebook_path", "mode", "scope_key"))
        indexes = {
            name: (unique, [col for _, _, col in conn.execute(f"PRAGMA index_info('{name}')")])
            for _, name, unique, *_ in conn.execute("PRAGMA index_list(agent_sessions)")
        }
        assert (1, ["identity_key"]) in indexes.values()
        assert any(cols[0] == "last_active_at" for _, cols in indexes.values())
        assert any(cols[0] == "expires_at" for _, cols in indexes.values())
        row = conn.execute("SELECT session_id, identity_key, mode, scope_key, agent_key FROM agent_sessions").fetchall()
        assert row == [(sid, identity.key, "notebook", "", "a")]
        with pytest.raises(sqlite3.IntegrityError):  # one row per identity, enforced by the table
            conn.execute(
                "INSERT INTO agent_sessions SELECT ?, identity_key, agent_key, notebook_path, mode, scope_key,"
                " created_at, last_active_at, expires_at FROM agent_sessions",
                (str(uuid.uuid4()),),
            )
    finally:
        conn.close()


def test_the_registry_survives_a_reopen_and_lives_in_the_private_folder(root: Path, notebook: Path) -> None:
    identity = derive_session_identity(notebook, agent_key="a")
    sid = get_or_create_session(identity, root)
    assert (root / ".wasm-kernel" / REGISTRY_FILE).is_file()
    with SessionRegistry(root) as reg:
        assert reg.get_or_create_session(identity) == sid
        entry = reg.lookup(sid)
        assert entry is not None and entry.identity_key == identity.key
        assert reg.lookup_identity(identity) == entry
        assert reg.lookup(str(uuid.uuid4())) is None
        assert reg.lookup(sid.upper()) == entry  # ids are normalised as everywhere else
        with pytest.raises(ValueError, match="invalid session id"):
            reg.lookup("../etc")


def test_lookup_without_a_registry_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "not_yet"
    with SessionRegistry(root) as reg:
        assert reg.lookup(str(uuid.uuid4())) is None
        assert reg.cleanup_expired_sessions().removed_sessions == []
    assert not root.exists()


def test_a_closed_registry_says_so(root: Path, notebook: Path) -> None:
    reg = SessionRegistry(root)
    reg.get_or_create_session(derive_session_identity(notebook, agent_key="a"))
    reg.close()
    reg.close()  # idempotent
    with pytest.raises(RegistryError, match="closed"):
        reg.get_or_create_session(derive_session_identity(notebook, agent_key="a"))


def test_notebook_mode_gives_a_kernel_restart_the_same_files(root: Path, notebook: Path) -> None:
    identity = derive_session_identity(notebook, agent_key="a")
    sid = get_or_create_session(identity, root)
    with get_session_sandbox(sid, workspace_root=root) as sb:  # the workspace is made here, as for any session
        assert sb.execute("open('state.txt', 'w').write('kept')").success
    # The kernel restarts: the identity is derived again and finds the same session.
    again = get_or_create_session(derive_session_identity(str(notebook), agent_key="a"), root)
    assert again == sid
    with get_session_sandbox(again, workspace_root=root) as sb:
        result = sb.execute("print(open('state.txt').read())")
    assert result.stdout.strip() == "kept"


# --- deleting a session drops its row ------------------------------------------------------


def _bind_and_use(root: Path, identity: SessionIdentity, content: str = "x") -> str:
    """Bind an identity and run a cell in its session, as a kernel start would."""
    sid = get_or_create_session(identity, root)
    with get_session_sandbox(sid, workspace_root=root) as sb:
        assert sb.execute(f"open('f.txt', 'w').write({content!r})").success
    return sid


def _fresh_session_is_empty(root: Path, identity: SessionIdentity, deleted: str) -> None:
    again = get_or_create_session(identity, root)
    assert again != deleted
    with get_session_sandbox(again, workspace_root=root) as sb:
        assert sb.execute("import os\nprint(os.listdir())").stdout == "[]\n"


def test_deleting_a_session_drops_its_registry_row_so_its_identity_gets_a_fresh_session(
    root: Path, notebook: Path, events: Events
) -> None:
    identity = derive_session_identity(notebook, agent_key="a")
    other = derive_session_identity(notebook, agent_key="b")
    sid, kept = _bind_and_use(root, identity), _bind_and_use(root, other)
    delete_session_workspace(sid, root, logger=events.logger)
    with SessionRegistry(root) as reg:
        assert reg.lookup(sid) is None and reg.lookup_identity(identity) is None
        assert reg.lookup(kept) is not None  # only the deleted session's row goes
    assert events.warnings() == []
    _fresh_session_is_empty(root, identity, sid)
    # A bound id that was never opened has no workspace; deleting it still unbinds it.
    never_opened = get_or_create_session(derive_session_identity(notebook, "run", "r1", "a"), root)
    delete_session_workspace(never_opened, root)
    with SessionRegistry(root) as reg:
        assert reg.lookup(never_opened) is None


def test_pruning_a_session_drops_its_registry_row_and_a_dry_run_keeps_it(root: Path, notebook: Path) -> None:
    idle = derive_session_identity(notebook, "run", "old", "a")
    busy = derive_session_identity(notebook, "run", "recent", "a")
    old_sid, recent_sid = _bind_and_use(root, idle), _bind_and_use(root, busy)
    then = datetime.now(timezone.utc) - timedelta(hours=48)
    write_metadata(root, SessionMetadata(old_sid, then, then))
    assert prune_sessions(24, root, dry_run=True).deleted_sessions == [old_sid]
    with SessionRegistry(root) as reg:
        assert reg.lookup(old_sid) is not None  # a dry run writes nothing
    result = prune_sessions(24, root)
    assert result.deleted_sessions == [old_sid] and result.errors == {}
    with SessionRegistry(root) as reg:
        assert reg.lookup(old_sid) is None and reg.lookup(recent_sid) is not None
    assert get_or_create_session(busy, root) == recent_sid
    _fresh_session_is_empty(root, idle, old_sid)


def test_deleting_and_pruning_never_create_a_registry(root: Path) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    sb.close()
    other, sb = create_session_sandbox(workspace_root=root)
    sb.close()
    delete_session_workspace(sid, root)
    assert prune_sessions(0, root).deleted_sessions == [other]
    assert not (root / ".wasm-kernel" / REGISTRY_FILE).exists()
    assert sorted(os.listdir(root / ".wasm-kernel")) == ["leases", "ledger", "packages", "sessions"]
    assert os.listdir(root / ".wasm-kernel" / "packages") == []  # both sessions' %pip folders went with them
    assert os.listdir(root / ".wasm-kernel" / "ledger") == []  # and their disk ledgers


def test_a_bind_made_while_a_delete_holds_the_lease_keeps_its_row(root: Path, notebook: Path) -> None:
    # The deleter takes the session's lease, notes the time, removes the files, then
    # drops the row only if nobody bound it since: a kernel that bound meanwhile is
    # about to open the session (re-making its workspace) and must stay bound to it.
    identity = derive_session_identity(notebook, agent_key="a")
    sid = _bind_and_use(root, identity)
    leased_at = datetime.now(timezone.utc)
    time.sleep(0.002)
    assert get_or_create_session(identity, root) == sid  # the racing bind
    with SessionRegistry(root) as reg:
        assert reg.forget_session(sid, leased_at) is False
        assert reg.lookup(sid) is not None
        assert reg.forget_session(sid, datetime.now(timezone.utc)) is True
        assert reg.lookup(sid) is None
        assert reg.forget_session(sid, datetime.now(timezone.utc)) is False  # idempotent
        with pytest.raises(ValueError, match="invalid session id"):
            reg.forget_session("../x", leased_at)


def test_a_broken_registry_does_not_stop_a_delete_or_a_prune(root: Path, notebook: Path, events: Events) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    sb.close()
    pruned, sb = create_session_sandbox(workspace_root=root)
    sb.close()
    path = root / ".wasm-kernel" / REGISTRY_FILE
    path.write_bytes(b"this is not a database\n" * 200)
    delete_session_workspace(sid, root, logger=events.logger)
    assert not (root / sid).exists()
    result = prune_sessions(0, root, logger=events.logger)
    assert result.deleted_sessions == [pruned] and result.errors == {}
    failed = events.named("session.registry.forget_failed")
    assert [e["session_id"] for e in failed] == [sid, pruned]
    assert all("not a database" in str(e["error"]) for e in failed)
    assert path.read_bytes().startswith(b"this is not a database")  # left for a person to look at


# --- expiry ------------------------------------------------------------------------------


def _expired_registry(root: Path, notebook: Path, count: int, agent: str = "a") -> tuple[SessionRegistry, list[str]]:
    """`count` sessions bound with a TTL of about 4 ms, then left to expire."""
    reg = SessionRegistry(root, ttl_hours=1e-6)
    ids = [reg.get_or_create_session(derive_session_identity(notebook, "run", f"run-{i}", agent)) for i in range(count)]
    time.sleep(0.05)
    return reg, ids


def test_cleanup_removes_expired_rows_in_batches_and_keeps_live_ones(root: Path, notebook: Path, events: Events) -> None:
    reg, expired = _expired_registry(root, notebook, 1200)
    try:
        with SessionRegistry(root, ttl_hours=24) as live_reg:
            live = live_reg.get_or_create_session(derive_session_identity(notebook, "run", "live", "a"))
        result = reg.cleanup_expired_sessions(batch_size=500, logger=events.logger)
        assert sorted(result.removed_sessions) == sorted(expired)
        assert result.batches == 3 and result.deleted_workspaces == [] and not result.errors
        assert str(result) == "Removed 1200 expired sessions from the registry"
        assert reg.lookup(expired[0]) is None and reg.lookup(live) is not None
        assert events.named("session.registry.cleanup.completed")[0]["removed_count"] == 1200
        assert reg.cleanup_expired_sessions().removed_sessions == []
        # An identity whose row was cleaned up gets a new session next time.
        assert reg.get_or_create_session(derive_session_identity(notebook, "run", "run-0", "a")) != expired[0]
    finally:
        reg.close()


def test_an_expired_row_bound_again_before_cleanup_is_kept(root: Path, notebook: Path) -> None:
    reg, (sid,) = _expired_registry(root, notebook, 1)
    try:
        with SessionRegistry(root, ttl_hours=24) as other:
            assert other.get_or_create_session(derive_session_identity(notebook, "run", "run-0", "a")) == sid
        assert reg.cleanup_expired_sessions(prune_workspaces=True).removed_sessions == []
        assert reg.lookup(sid) is not None
    finally:
        reg.close()


def test_cleanup_leaves_workspaces_alone_unless_asked(root: Path, notebook: Path) -> None:
    reg, ids = _expired_registry(root, notebook, 2)
    try:
        for sid in ids:
            (root / sid).mkdir()
            (root / sid / "f.txt").write_text("x")
        assert sorted(reg.cleanup_expired_sessions().removed_sessions) == sorted(ids)
        assert all((root / sid / "f.txt").exists() for sid in ids)
    finally:
        reg.close()


def test_cleanup_with_prune_workspaces_honours_a_sandbox_lease(root: Path, notebook: Path) -> None:
    reg, (idle, busy, never_opened) = _expired_registry(root, notebook, 3)
    try:
        for sid in (idle, busy):
            with get_session_sandbox(sid, workspace_root=root) as sb:
                assert sb.execute("open('f.txt', 'w').write('x')").success
        holding = get_session_sandbox(busy, workspace_root=root)  # an open kernel holds `busy`
        try:
            result = reg.cleanup_expired_sessions(batch_size=2, prune_workspaces=True)
            assert sorted(result.removed_sessions) == sorted([idle, never_opened])
            assert result.deleted_workspaces == [idle]  # never_opened had no workspace
            assert result.in_use_sessions == [busy] and not result.errors and result.batches == 2
            assert not (root / idle).exists() and not metadata_path(root, idle).exists()
            assert (root / busy / "f.txt").read_text() == "x" and reg.lookup(busy) is not None
            assert holding.execute("print(open('f.txt').read())").stdout.strip() == "x"
        finally:
            holding.close()
        # Once the kernel is gone, the expired session goes on the next cleanup.
        result = reg.cleanup_expired_sessions(prune_workspaces=True)
        assert result.removed_sessions == [busy] and result.deleted_workspaces == [busy]
        assert not (root / busy).exists() and reg.lookup(busy) is None
    finally:
        reg.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_batch_sizes_and_ttls_are_refused(registry: SessionRegistry, bad: object) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        registry.cleanup_expired_sessions(batch_size=bad)  # type: ignore[arg-type]
    if bad is not True and bad != 1.5:
        with pytest.raises(ValueError, match="ttl_hours"):
            SessionRegistry(Path("unused"), ttl_hours=bad)  # type: ignore[arg-type]


# --- broken registry files ---------------------------------------------------------------


def test_a_corrupt_registry_gives_a_clear_one_line_error_to_a_reader(root: Path, notebook: Path) -> None:
    path = root / ".wasm-kernel" / REGISTRY_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database\n" * 200)
    with SessionRegistry(root) as reg:
        with pytest.raises(RegistryError, match="not usable: file is not a database") as info:
            reg.lookup(str(uuid.uuid4()))
        assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert path.read_bytes().startswith(b"this is not a database")  # left for a person to look at


def test_a_corrupt_registry_is_set_aside_by_a_bind_and_a_new_one_begun(root: Path, notebook: Path) -> None:
    path = root / ".wasm-kernel" / REGISTRY_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database\n" * 200)
    notes: list[str] = []
    identity = derive_session_identity(notebook, agent_key="a")
    with SessionRegistry(root, notes=notes) as reg:
        sid = reg.get_or_create_session(identity)
        assert reg.lookup(sid) is not None
    (line,) = notes
    assert line.startswith("the session registry was not a SQLite database: set aside as registry.sqlite3.set-aside-")
    (aside,) = path.parent.glob(f"{REGISTRY_FILE}.set-aside-*")
    assert aside.read_bytes().startswith(b"this is not a database")  # kept for a person to look at


@pytest.mark.parametrize("blocker", ["registry_is_a_directory", "private_dir_is_a_file"])
def test_what_blocks_the_registry_is_set_aside_by_a_bind(root: Path, notebook: Path, blocker: str) -> None:
    if blocker == "registry_is_a_directory":
        (root / ".wasm-kernel" / REGISTRY_FILE).mkdir(parents=True)
        aside, what = root / ".wasm-kernel", "the session registry was a folder"
    else:
        (root / ".wasm-kernel").write_text("")
        aside, what = root, "the sessions' private folder was a file"
    notes: list[str] = []
    with SessionRegistry(root, notes=notes) as reg:
        sid = reg.get_or_create_session(derive_session_identity(notebook, agent_key="a"))
        assert reg.lookup(sid) is not None
    assert notes[0].startswith(what + ": set aside as "), notes
    assert len(list(aside.glob("*.set-aside-*"))) == 1


def test_a_registry_from_a_newer_wasm_kernel_is_refused(root: Path, notebook: Path) -> None:
    import sqlite3

    get_or_create_session(derive_session_identity(notebook, agent_key="a"), root)
    conn = sqlite3.connect(root / ".wasm-kernel" / REGISTRY_FILE)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with SessionRegistry(root) as reg, pytest.raises(RegistryError, match="schema version 99"):
        reg.lookup(str(uuid.uuid4()))


def test_a_bind_waits_for_another_writer_and_gives_up_after_the_busy_timeout(root: Path, notebook: Path) -> None:
    import sqlite3

    identity = derive_session_identity(notebook, agent_key="a")
    sid = get_or_create_session(identity, root)
    other = sqlite3.connect(root / ".wasm-kernel" / REGISTRY_FILE, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # an outside writer holds the write lock
        committed = threading.Event()
        threading.Timer(0.2, lambda: (committed.set(), other.execute("COMMIT"))).start()
        with SessionRegistry(root) as reg:
            assert reg.get_or_create_session(identity) == sid
            assert committed.is_set()  # it waited for the outside writer, then went on
        other.execute("BEGIN IMMEDIATE")
        with SessionRegistry(root, busy_timeout_s=0.1) as reg:
            with pytest.raises(RegistryError, match="database is locked") as info:
                reg.get_or_create_session(identity)
            assert "\n" not in str(info.value)
        other.execute("ROLLBACK")
    finally:
        other.close()
