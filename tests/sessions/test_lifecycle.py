"""Session lifecycle against the real guest: create, resume, isolate, delete, log;
and the workspace layout that keeps our metadata out of every guest's sight."""

from __future__ import annotations

import inspect
import json
import os
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import wasm_kernel
from wasm_kernel.sessions.packages import ensure_packages_dir
from wasm_kernel import (
    BaseSandbox,
    ExecutionPolicy,
    PythonSandbox,
    RuntimeType,
    SandboxResult,
    SessionSandbox,
    UnsafePathError,
    create_sandbox,
    create_session_sandbox,
    delete_session_workspace,
    get_session_sandbox,
    read_session_file,
)
from wasm_kernel.sessions import is_session_in_use, read_metadata
from wasm_kernel.sessions.layout import lease_path, metadata_path

from support.events import Events


def ok(sb: BaseSandbox, code: str) -> SandboxResult:
    r = sb.execute(code)
    assert r.success, (r.error, r.stderr)
    return r


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def opened() -> Iterator[list[BaseSandbox]]:
    """Sandboxes to close at the end of the test, whatever happens."""
    boxes: list[BaseSandbox] = []
    yield boxes
    for sb in boxes:
        sb.close()


def test_create_returns_a_uuid_and_a_sandbox_on_root_slash_uuid(root: Path, opened: list[BaseSandbox]) -> None:
    sid, sb = create_session_sandbox(runtime=RuntimeType.PYTHON, workspace_root=root)
    opened.append(sb)
    assert uuid.UUID(sid).version == 4 and str(uuid.UUID(sid)) == sid
    assert isinstance(sb, SessionSandbox) and isinstance(sb, PythonSandbox) and isinstance(sb, BaseSandbox)
    assert sb.workspace == (root / sid).resolve() and (root / sid).is_dir()
    assert sb.session_id == sid
    r = ok(sb, "import os\nprint(os.getcwd(), os.listdir('/app'))")
    assert r.stdout == "/app []\n"
    assert r.metadata["session_id"] == sid
    assert r.workspace_path == str((root / sid).resolve())


def test_each_create_makes_a_new_session(root: Path, opened: list[BaseSandbox]) -> None:
    a, sa = create_session_sandbox(workspace_root=root)
    b, sb = create_session_sandbox(workspace_root=root)
    opened += [sa, sb]
    assert a != b
    assert sorted(p.name for p in root.iterdir() if p.name != ".wasm-kernel") == sorted([a, b])


def test_custom_policy_is_used(root: Path, opened: list[BaseSandbox]) -> None:
    policy = ExecutionPolicy(cpu_seconds=0.25)
    _, sb = create_session_sandbox(policy=policy, workspace_root=root)
    opened.append(sb)
    assert sb.policy is policy and sb.policy.cpu_seconds == 0.25
    r = sb.execute("while True: pass")
    assert r.trap == "cpu_time" and "0.25 s" in (r.trap_message or "")


def test_custom_logger_gets_session_context_in_every_event(root: Path, events: Events) -> None:
    sid, sb = create_session_sandbox(workspace_root=root, logger=events.logger)
    try:
        assert sb.logger is events.logger
        ok(sb, "1 + 1")
    finally:
        sb.close()
    assert events.names() == ["session.created", "execution.start", "execution.complete"]
    created = events.named("session.created")[0]
    assert created["session_id"] == sid and created["workspace_path"] == str((root / sid).resolve())
    assert all(fields["session_id"] == sid for _, _, fields in events.all)


def test_get_resumes_the_same_workspace_and_sees_earlier_files(root: Path, events: Events) -> None:
    sid, first = create_session_sandbox(workspace_root=root)
    try:
        r = ok(first, "with open('/app/state.json', 'w') as f: f.write('{\"count\": 1}')")
        assert r.files_created == ["state.json"]
    finally:
        first.close()
    before = sorted(os.listdir(root))
    second = get_session_sandbox(sid, workspace_root=root, logger=events.logger)
    try:
        assert second.workspace == (root / sid).resolve() and second.session_id == sid
        r = ok(second, "with open('/app/state.json', 'r') as f: print(f.read())")
        assert '{"count": 1}' in r.stdout
        assert r.metadata["session_id"] == sid
    finally:
        second.close()
    assert sorted(os.listdir(root)) == before  # no new session made
    retrieved = events.named("session.retrieved")
    assert len(retrieved) == 1 and retrieved[0]["session_id"] == sid
    assert retrieved[0]["workspace_path"] == str((root / sid).resolve()) and retrieved[0]["created"] is False


def test_upper_case_id_resumes_the_lower_case_session(root: Path) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    sb.close()
    again = get_session_sandbox(sid.upper(), workspace_root=root)
    try:
        assert again.session_id == sid and again.workspace == (root / sid).resolve()
    finally:
        again.close()


def test_two_sandboxes_of_one_session_share_files(root: Path, opened: list[BaseSandbox]) -> None:
    sid, a = create_session_sandbox(workspace_root=root)
    b = get_session_sandbox(sid, workspace_root=root)
    opened += [a, b]
    ok(a, "open('shared.txt', 'w').write('from a')")
    assert ok(b, "print(open('shared.txt').read())").stdout == "from a\n"


def test_persistence_and_change_tracking_within_a_session(root: Path, opened: list[BaseSandbox]) -> None:
    _, sb = create_session_sandbox(workspace_root=root)
    opened.append(sb)
    r = ok(sb, "with open('/app/state.json', 'w') as f: f.write('{\"count\": 1}')")
    assert "state.json" in r.files_created + r.files_modified
    r = ok(sb, "with open('/app/state.json', 'r') as f: print(f.read())")
    assert '{"count": 1}' in r.stdout
    ok(sb, "open('data.csv', 'w').write('a,b\\n')")
    r = ok(sb, "open('data.csv', 'a').write('1,2\\n')\nopen('output.txt', 'w').write('done')")
    assert "data.csv" in r.files_modified and r.files_created == ["output.txt"]
    assert "data.csv" not in r.files_created


def test_sessions_are_isolated_from_each_other(root: Path, opened: list[BaseSandbox]) -> None:
    a_id, a = create_session_sandbox(workspace_root=root)
    b_id, b = create_session_sandbox(workspace_root=root)
    opened += [a, b]
    ok(a, "open('data.txt', 'w').write('Session A data')")
    ok(b, "open('data.txt', 'w').write('Session B data')")
    assert ok(a, "print(open('data.txt').read())").stdout == "Session A data\n"
    assert ok(b, "print(open('data.txt').read())").stdout == "Session B data\n"
    # Every way A might reach B's workspace or the root fails inside the guest.
    probe = f"""
import os
attempts = [
    lambda: open('../{b_id}/data.txt').read(),
    lambda: open('/app/../{b_id}/data.txt').read(),
    lambda: open('/{b_id}/data.txt').read(),
    lambda: os.listdir('..'),
    lambda: os.listdir('/app/..'),
    lambda: open('/app/../.wasm-kernel/sessions/{a_id}.json').read(),
]
os.symlink('../{b_id}/data.txt', 'to_b')
os.symlink('..', 'to_root')
attempts += [lambda: open('to_b').read(), lambda: os.listdir('to_root'), lambda: open('to_root/{b_id}/data.txt').read()]
results = []
for attempt in attempts:
    try:
        results.append(('LEAK', attempt()))
    except OSError as err:
        results.append(type(err).__name__)
print(results)
"""
    r = ok(a, probe)
    assert "LEAK" not in r.stdout and "Session B data" not in r.stdout and "Error" in r.stdout
    assert r.stdout.count("Error") == 9, r.stdout
    # The links A made are inert for the host too.
    with pytest.raises(UnsafePathError):
        read_session_file(a_id, "to_b", root)
    assert (root / b_id / "data.txt").read_text() == "Session B data"


def test_metadata_is_invisible_and_unreachable_from_the_guest(root: Path, opened: list[BaseSandbox]) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    opened.append(sb)
    meta = metadata_path(root.resolve(), sid)
    assert meta.is_file() and not meta.is_relative_to((root / sid).resolve())
    original = meta.read_bytes()
    r = ok(
        sb,
        "import os\nprint(os.listdir('/app'))\n"
        "for p in ('/app/.metadata.json', '.metadata.json', '../.wasm-kernel', '/.wasm-kernel'):\n"
        "    try:\n        open(p).read(); print('READ', p)\n"
        "    except OSError as err:\n        print(type(err).__name__)\n",
    )
    lines = r.stdout.splitlines()
    assert lines[0] == "[]"
    assert lines[1] == "FileNotFoundError"  # open('/app/.metadata.json') as the seed asks
    assert not any(line.startswith("READ") for line in lines)
    # What the guest writes under that name is just a file of its workspace.
    ok(sb, "open('/app/.metadata.json', 'w').write('{\"updated_at\": \"1999-01-01T00:00:00.000000+00:00\"}')")
    assert json.loads(meta.read_bytes())["created_at"] == json.loads(original)["created_at"]
    assert read_metadata(root, sid) is not None and read_metadata(root, sid).updated_at.year > 2000  # type: ignore[union-attr]


def test_delete_removes_files_and_metadata_and_a_later_get_starts_empty(root: Path, events: Events) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    ok(sb, "import os\nos.makedirs('a/b')\nopen('a/b/f.txt', 'w').write('x')\nopen('top.txt', 'w').write('t')")
    sb.close()
    packages = ensure_packages_dir(root, sid)
    (packages / "installed.py").write_text("")  # what %pip keeps for the session goes too
    delete_session_workspace(sid, workspace_root=root, logger=events.logger)
    assert not (root / sid).exists() and not metadata_path(root, sid).exists() and not packages.exists()
    assert not lease_path(root, sid).exists()
    deleted = events.named("session.deleted")
    assert deleted == [{"session_id": sid, "workspace_path": str(root / sid), "existed": True, "in_use": False}]
    fresh = get_session_sandbox(sid, workspace_root=root)
    try:
        assert ok(fresh, "import os\nprint(os.listdir('/app'))").stdout == "[]\n"
        assert read_metadata(root, sid) is not None  # a re-created session can be pruned again
    finally:
        fresh.close()


def test_delete_is_idempotent_and_fine_for_unknown_ids_and_missing_roots(root: Path, events: Events) -> None:
    sid = str(uuid.uuid4())
    delete_session_workspace(sid, workspace_root=root / "missing", logger=events.logger)
    root.mkdir()
    delete_session_workspace(sid, workspace_root=root, logger=events.logger)
    delete_session_workspace(sid, workspace_root=root, logger=events.logger)
    assert [e["existed"] for e in events.named("session.deleted")] == [False, False, False]


def test_delete_never_follows_symlinks(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    sid, sb = create_session_sandbox(workspace_root=root)
    other, ob = create_session_sandbox(workspace_root=root)
    ok(ob, "open('mine.txt', 'w').write('other session')")
    ok(sb, f"import os\nos.symlink('../{other}', 'sibling')\nos.symlink('../{other}/mine.txt', 'sibling_file')")
    os.symlink(outside, root / sid / "abs_outside")
    sb.close()
    ob.close()
    delete_session_workspace(sid, workspace_root=root)
    assert not (root / sid).exists()
    assert (root / other / "mine.txt").read_text() == "other session"
    assert (outside / "precious.txt").read_text() == "keep me"
    # A symlink standing where a workspace should be is removed as a link.
    linked = str(uuid.uuid4())
    os.symlink(outside, root / linked)
    delete_session_workspace(linked, workspace_root=root)
    assert not os.path.lexists(root / linked) and (outside / "precious.txt").exists()


@pytest.mark.slow
def test_delete_copes_with_guest_trees_deeper_than_the_recursion_limit(root: Path) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    depth = sys.getrecursionlimit() + 200
    ok(sb, f"import os\nfor _ in range({depth}):\n    os.mkdir('d'); os.chdir('d')\nopen('deep.txt', 'w').write('x')\nos.chdir('/app')")
    sb.close()
    delete_session_workspace(sid, workspace_root=root)
    assert not (root / sid).exists()


def test_get_refuses_a_workspace_that_is_a_symlink_or_a_file(root: Path, tmp_path: Path) -> None:
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    linked, filed = str(uuid.uuid4()), str(uuid.uuid4())
    os.symlink(outside, root / linked)
    (root / filed).write_text("not a folder")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        get_session_sandbox(linked, workspace_root=root)
    with pytest.raises(NotADirectoryError):
        get_session_sandbox(filed, workspace_root=root)
    # The failed attempts left no lease behind.
    assert not is_session_in_use(root, linked) and not is_session_in_use(root, filed)


def test_get_on_an_unknown_well_formed_id_creates_an_empty_workspace(root: Path, events: Events) -> None:
    sid = str(uuid.uuid4())
    sb = get_session_sandbox(sid, workspace_root=root, logger=events.logger)
    try:
        assert (root / sid).is_dir() and ok(sb, "import os\nprint(os.listdir())").stdout == "[]\n"
    finally:
        sb.close()
    assert events.named("session.retrieved")[0]["created"] is True


def test_an_open_sandbox_holds_a_lease_until_closed(root: Path) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    other = get_session_sandbox(sid, workspace_root=root)
    assert is_session_in_use(root, sid)
    sb.close()
    assert is_session_in_use(root, sid)  # the second sandbox still holds it
    other.close()
    other.close()  # closing twice is harmless
    assert not is_session_in_use(root, sid)


def test_unsupported_runtime_is_refused(root: Path) -> None:
    with pytest.raises(ValueError):
        create_session_sandbox(runtime="ruby", workspace_root=root)  # type: ignore[arg-type]


def test_custom_root_and_default_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    custom = tmp_path / "custom"
    sid, sb = create_session_sandbox(workspace_root=custom)
    sb.close()
    assert (custom / sid).is_dir()
    monkeypatch.chdir(tmp_path)
    sid, sb = create_session_sandbox()
    sb.close()
    assert sb.workspace == (tmp_path / "workspace" / sid).resolve()
    assert inspect.signature(get_session_sandbox).parameters["workspace_root"].default == Path("workspace")


def test_non_session_sandboxes_are_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sb = create_sandbox(runtime=RuntimeType.PYTHON)
    try:
        assert sb.workspace == (tmp_path / "workspace").resolve() and not isinstance(sb, SessionSandbox)
        r = ok(sb, "open('x.txt', 'w').write('x')")
        assert "session_id" not in r.metadata and r.files_created == ["x.txt"]
    finally:
        sb.close()
    custom = create_sandbox(workspace=Path("custom_workspace"))
    try:
        assert custom.workspace == (tmp_path / "custom_workspace").resolve()
        assert "session_id" not in ok(custom, "1").metadata
    finally:
        custom.close()


def test_public_api_is_extended_additively() -> None:
    core = {
        "BaseSandbox", "DisplayOutput", "ErrorInfo", "ExecutionPolicy", "FileChanges", "PythonSandbox",
        "RuntimeType", "SandboxLogger", "SandboxResult", "TrapReason", "WorkspaceSnapshot", "create_sandbox",
    }
    sessions = {
        "create_session_sandbox", "get_session_sandbox", "delete_session_workspace", "list_session_files",
        "read_session_file", "write_session_file", "delete_session_path", "prune_sessions", "PruneResult",
    }
    assert core | sessions <= set(wasm_kernel.__all__)
    assert all(hasattr(wasm_kernel, name) for name in wasm_kernel.__all__)


# Seed 000's "API Surface Summary": the positional order of every session function.
SEED_SURFACE = {
    "create_session_sandbox": ["runtime", "policy", "workspace_root", "logger"],
    "get_session_sandbox": ["session_id", "runtime", "policy", "workspace_root", "logger"],
    "delete_session_workspace": ["session_id", "workspace_root"],
    "list_session_files": ["session_id", "workspace_root", "pattern"],
    "read_session_file": ["session_id", "relative_path", "workspace_root"],
    "write_session_file": ["session_id", "relative_path", "data", "workspace_root", "overwrite"],
    "delete_session_path": ["session_id", "relative_path", "workspace_root", "recursive"],
    "prune_sessions": ["older_than_hours", "workspace_root", "dry_run", "logger"],
}


def test_the_session_api_takes_the_seed_signatures_positionally(root: Path, events: Events) -> None:
    for name, expected in SEED_SURFACE.items():
        params = inspect.signature(getattr(wasm_kernel, name)).parameters.values()
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional == expected, name
    # And they work called that way, in the seed's order.
    sid, sb = wasm_kernel.create_session_sandbox(RuntimeType.PYTHON, None, root, events.logger)
    sb.close()
    wasm_kernel.write_session_file(sid, "a.txt", b"abc", root, False)
    with wasm_kernel.get_session_sandbox(sid, RuntimeType.PYTHON, None, root, events.logger) as again:
        assert ok(again, "print(open('a.txt').read())").stdout == "abc\n"
    assert wasm_kernel.list_session_files(sid, root, "*.txt") == ["a.txt"]
    assert wasm_kernel.read_session_file(sid, "a.txt", root) == b"abc"
    wasm_kernel.delete_session_path(sid, "a.txt", root, False)
    result = wasm_kernel.prune_sessions(0, root, True, events.logger)
    assert isinstance(result, wasm_kernel.PruneResult) and result.dry_run and result.deleted_sessions == [sid]
    wasm_kernel.delete_session_workspace(sid, root)
    assert not (root / sid).exists()
    assert {"session.created", "session.retrieved", "session.prune.completed"} <= set(events.names())


def test_create_makes_missing_parent_folders_and_a_workspace_the_host_can_write(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "sessions"  # none of these exist yet
    sid, sb = create_session_sandbox(workspace_root=root)
    try:
        ws = root / sid
        assert ws.is_dir() and ws.stat().st_uid == os.geteuid()
        assert stat.S_IMODE(ws.stat().st_mode) & 0o700 == 0o700  # the host user may read, write, enter
        (ws / "from_host.txt").write_text("host")  # plain host I/O, no session API
        r = ok(sb, "print(open('from_host.txt').read())\nopen('from_guest.txt', 'w').write('guest')")
        assert r.stdout == "host\n"
        made = ws / "from_guest.txt"
        assert made.read_text() == "guest" and stat.S_IMODE(made.stat().st_mode) & 0o600 == 0o600
        made.write_text("host again")
        assert ok(sb, "print(open('from_guest.txt').read())").stdout == "host again\n"
    finally:
        sb.close()
