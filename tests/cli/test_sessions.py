"""`wasm-kernel sessions list|show|prune|rm|move`, run as the real command in subprocesses:
tables and JSON, the in-use column and rm's refusal with a sandbox alive in another
process, prune dry run vs real, and every error path (one line, non-zero exit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from support.cli_runs import COMMAND, make_session, wk
from wasm_kernel.sessions.layout import lease_path, metadata_path
from wasm_kernel.sessions.metadata import SessionMetadata, write_metadata

pytestmark = pytest.mark.slow  # every case is the real command in a subprocess (1-3 s each)


def wk_json(*args: str | Path) -> object:
    return json.loads(wk(*args, "--json").stdout)


def fails(*args: str | Path) -> str:
    """Run a command that must fail: exit 1, nothing on stdout, one line on stderr."""
    proc = wk("sessions", *args, check=False)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"wasm-kernel sessions {args[0]}: error: ")
    return proc.stderr.strip()


HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from wasm_kernel import create_session_sandbox
    sid, sb = create_session_sandbox(workspace_root=Path(sys.argv[1]))
    assert sb.execute("open('work.txt', 'w').write('in progress')").success
    print(sid, flush=True)
    sys.stdin.read()
    sb.close()
    print("closed", flush=True)
    """
)


@pytest.fixture
def holder(root: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Another process with a session sandbox open, waiting on its stdin."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        sid = proc.stdout.readline().strip()
        assert sid, "the holder process did not start"
        yield proc, sid
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


# --- list ------------------------------------------------------------------------------


def test_list_table_and_json(root: Path) -> None:
    old = make_session(root, 48, {"a.txt": b"x" * 1500, "sub/b.txt": b"y" * 500})
    new = make_session(root, 1, {"r.txt": b"r"})
    legacy = make_session(root, None, {"l.txt": b"legacy"})
    (root / "not-a-session").mkdir()

    lines = wk("sessions", "list", "--root", root).stdout.splitlines()
    assert lines[0].split() == ["ID", "NOTEBOOK", "CREATED", "(UTC)", "UPDATED", "(UTC)", "SIZE", "IN", "USE"]
    assert [ln.split()[0] for ln in lines[1:]] == [old, new, legacy]  # oldest update first, legacy last
    old_row = lines[1].split()
    assert old_row[1] == "-" and old_row[-3:] == ["2.0", "kB", "no"]
    assert lines[3].split()[1:4] == ["-", "-", "-"]  # legacy: no notebook, no dates
    # Columns are aligned: every row's "size" ends where the header's SIZE ends.
    end = lines[0].index("SIZE") + len("SIZE")
    assert all(ln[end - 1] != " " and ln[end] == " " for ln in lines[1:])

    data = wk_json("sessions", "list", "--root", root)
    assert isinstance(data, list) and [d["session_id"] for d in data] == [old, new, legacy]
    first = data[0]
    assert first["notebook"] is None and first["in_use"] is False and first["size_bytes"] == 2000
    assert first["metadata_status"] == "ok" and first["kind"] == "directory"
    assert datetime.fromisoformat(first["updated_at"]) < datetime.now(timezone.utc) - timedelta(hours=47)
    assert data[2]["metadata_status"] == "missing" and data[2]["created_at"] is None


def test_list_is_read_only_and_empty_root(root: Path) -> None:
    assert wk("sessions", "list", "--root", root).stdout.startswith("no sessions under")
    assert wk_json("sessions", "list", "--root", root) == []
    make_session(root, None, {"f": b"x"})
    wk("sessions", "list", "--root", root)
    wk("sessions", "show", os.listdir(root)[0], "--root", root)
    assert not (root / ".wasm-kernel").exists()  # no lock files, no private folder created


def test_list_sizes_do_not_follow_symlinks(root: Path) -> None:
    victim = make_session(root, 1, {"big.bin": b"v" * 10_000})
    attacker = make_session(root, 1, {"small": b"a"})
    os.symlink(f"../{victim}", root / attacker / "link")  # as a guest could
    os.symlink(f"../{victim}/big.bin", root / attacker / "file-link")
    sizes = {d["session_id"]: d["size_bytes"] for d in wk_json("sessions", "list", "--root", root)}  # type: ignore[union-attr]
    assert sizes[victim] == 10_000
    assert sizes[attacker] == 1 + len(f"../{victim}") + len(f"../{victim}/big.bin")


def test_list_shows_corrupted_metadata(root: Path) -> None:
    sid = make_session(root, 1)
    metadata_path(root, sid).write_text("{not json")
    lines = wk("sessions", "list", "--root", root).stdout.splitlines()
    assert lines[1].split()[2:4] == ["corrupted", "corrupted"]
    (entry,) = wk_json("sessions", "list", "--root", root)  # type: ignore[misc]
    assert entry["metadata_status"] == "corrupted" and entry["updated_at"] is None
    assert metadata_path(root, sid).read_text() == "{not json"  # left as it was


def test_notebook_column_comes_from_the_identity_registry(root: Path, tmp_path: Path) -> None:
    """A notebook's kernel binds its identity in the registry; list and show name the
    notebook of such a session, and none for a session the registry does not know."""
    from wasm_kernel.sessions.identity import derive_session_identity
    from wasm_kernel.sessions.registry import SessionRegistry

    notebook = tmp_path / "course" / "analysis.ipynb"
    identity = derive_session_identity(notebook)
    with SessionRegistry(root) as registry:
        known = registry.get_or_create_session(identity)
    (root / known).mkdir()
    write_metadata(root, SessionMetadata(known, datetime.now(timezone.utc), datetime.now(timezone.utc)))
    unknown = make_session(root, 2)
    table = wk("sessions", "list", "--root", root).stdout
    rows = {ln.split()[0]: ln.split()[1] for ln in table.splitlines()[1:]}
    assert rows == {known: identity.notebook_path, unknown: "-"}
    shown = wk_json("sessions", "show", known, "--root", root)
    assert shown["notebook"] == identity.notebook_path  # type: ignore[index]
    assert shown["registry_entry"]["notebook_path"] == identity.notebook_path  # type: ignore[index]


def test_a_broken_registry_gives_no_notebook_not_an_error(root: Path) -> None:
    from wasm_kernel.sessions.layout import PRIVATE_DIR
    from wasm_kernel.sessions.registry import REGISTRY_FILE, RegistryError, SessionRegistry

    sid = make_session(root, 1)
    (root / PRIVATE_DIR).mkdir(exist_ok=True, mode=0o700)
    (root / PRIVATE_DIR / REGISTRY_FILE).write_bytes(b"this is not an SQLite database" * 100)
    with pytest.raises(RegistryError), SessionRegistry(root) as registry:
        registry.lookup(sid)  # broken for real
    (entry,) = wk_json("sessions", "list", "--root", root)  # type: ignore[misc]
    assert entry["notebook"] is None


# --- show ------------------------------------------------------------------------------


def test_show_table_and_json(root: Path) -> None:
    sid = make_session(root, 3, {"a": b"12345", "d/b": b"678", "d/e/c": b""})
    out = wk("sessions", "show", sid.upper(), "--root", root).stdout  # upper case is normalised
    fields = dict(ln.split(":", 1) for ln in out.splitlines())
    assert fields["session_id"].strip() == sid
    assert fields["file_count"].strip() == "3" and fields["size_bytes"].strip() == "8 (8 B)"
    assert fields["in_use"].strip() == "no" and fields["notebook"].strip() == "-"
    assert json.loads(fields["metadata"])["version"] == 1

    data = wk_json("sessions", "show", sid, "--root", root)
    assert isinstance(data, dict)
    assert data["session_id"] == sid and data["file_count"] == 3 and data["size_bytes"] == 8
    assert data["metadata"]["session_id"] == sid and data["metadata"]["updated_at"] == data["updated_at"]
    assert data["workspace_path"] == str(root / sid)
    assert data["metadata_path"] == str(metadata_path(root, sid)) and data["lease_path"] == str(lease_path(root, sid))
    assert data["notebook"] is None and data["registry_entry"] is None and data["metadata_error"] is None


# --- in use: a sandbox alive in another process ------------------------------------------


def test_in_use_column_and_rm_refusal_with_a_sandbox_in_another_process(root: Path, holder: tuple[subprocess.Popen[str], str]) -> None:
    proc, sid = holder
    idle = make_session(root, 1)
    rows = {ln.split()[0]: ln.split()[-1] for ln in wk("sessions", "list", "--root", root).stdout.splitlines()[1:]}
    assert rows == {sid: "yes", idle: "no"}
    by_id = {d["session_id"]: d for d in wk_json("sessions", "list", "--root", root)}  # type: ignore[union-attr]
    assert by_id[sid]["in_use"] is True and by_id[idle]["in_use"] is False
    assert wk_json("sessions", "show", sid, "--root", root)["in_use"] is True  # type: ignore[index]

    # Listing and showing did not take the lease from the sandbox: rm still sees it held.
    message = fails("rm", sid, "--root", root)
    assert "in use" in message and "--force" in message
    assert (root / sid / "work.txt").read_text() == "in progress"

    # Once the other process closes its sandbox, rm works.
    out, _ = proc.communicate("", timeout=60)
    assert "closed" in out
    assert wk_json("sessions", "show", sid, "--root", root)["in_use"] is False  # type: ignore[index]
    assert wk("sessions", "rm", sid, "--root", root).stdout.startswith(f"deleted session {sid}")
    assert not (root / sid).exists() and not metadata_path(root, sid).exists() and not lease_path(root, sid).exists()


def test_rm_force_deletes_a_session_in_use(root: Path, holder: tuple[subprocess.Popen[str], str]) -> None:
    _, sid = holder
    data = wk_json("sessions", "rm", sid, "--force", "--root", root)
    assert isinstance(data, dict)
    assert data["session_id"] == sid and data["was_in_use"] is True and data["forced"] is True
    assert not (root / sid).exists()


# --- rm --------------------------------------------------------------------------------


def test_rm_table_and_json(root: Path) -> None:
    a = make_session(root, 1, {"x": b"abc"})
    b = make_session(root, None, {"y": b"legacy"})
    outside = root.parent / "outside.txt"
    outside.write_text("keep me")
    os.symlink(outside, root / a / "link")
    assert wk("sessions", "rm", a, "--root", root).stdout.strip() == f"deleted session {a} ({3 + len(str(outside))} B)"
    assert not (root / a).exists() and outside.read_text() == "keep me"
    data = wk_json("sessions", "rm", b, "--root", root)
    assert data == {"session_id": b, "workspace_path": str(root / b), "size_bytes": 6, "was_in_use": False,
                    "forced": False, "notes": []}
    assert os.listdir(root) == [".wasm-kernel"]


# --- prune -----------------------------------------------------------------------------


def test_prune_dry_run_then_real(root: Path) -> None:
    old = make_session(root, 48, {"a": b"x" * 1500})
    older = make_session(root, 24 * 10, {"b": b"y" * 500})
    recent = make_session(root, 1, {"c": b"z"})
    legacy = make_session(root, None, {"d": b"w"})

    out = wk("sessions", "prune", "--older-than", "24h", "--dry-run", "--root", root).stdout.splitlines()
    assert out[0] == "Deleted 2 sessions, skipped 1, reclaimed 2.0 kB (dry run)"
    assert sorted(ln.split() for ln in out[1:]) == sorted([["would", "delete", old], ["would", "delete", older], ["skipped", legacy]])
    assert all((root / s).exists() for s in (old, older, recent, legacy))
    assert os.listdir(root / ".wasm-kernel" / "leases") == []  # a dry run writes nothing, not even lock files

    dry = wk_json("sessions", "prune", "--older-than", "1d", "--dry-run", "--root", root)
    assert isinstance(dry, dict)
    assert sorted(dry["deleted_sessions"]) == sorted([old, older]) and dry["skipped_sessions"] == [legacy]
    assert dry["reclaimed_bytes"] == 2000 and dry["dry_run"] is True and dry["errors"] == {}
    assert dry["summary"].endswith("(dry run)")

    # 7d: only the ten-day-old one goes; then 24h takes the other, with the same bytes the dry run said.
    real = wk_json("sessions", "prune", "--older-than", "7d", "--root", root)
    assert real["deleted_sessions"] == [older] and real["reclaimed_bytes"] == 500 and real["dry_run"] is False  # type: ignore[index]
    out = wk("sessions", "prune", "--older-than", "24", "--root", root).stdout.splitlines()
    assert out == ["Deleted 1 session, skipped 1, reclaimed 1.5 kB", f"  deleted       {old}", f"  skipped       {legacy}"]
    assert not (root / old).exists() and not (root / older).exists()
    assert (root / recent).exists() and (root / legacy).exists()


def test_prune_minutes_and_in_use(root: Path, holder: tuple[subprocess.Popen[str], str]) -> None:
    _, sid = holder
    then = datetime.now(timezone.utc) - timedelta(days=365)
    write_metadata(root, SessionMetadata(sid, then, then))  # idle for a year by its metadata, but open
    stale = make_session(root, 1)  # 60 minutes old
    result = wk_json("sessions", "prune", "--older-than", "30m", "--root", root)
    assert result["deleted_sessions"] == [stale] and result["skipped_sessions"] == [sid]  # type: ignore[index]
    assert (root / sid / "work.txt").read_text() == "in progress"


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["list"], ["show", "{sid}"], ["prune", "--older-than", "1h"], ["rm", "{sid}"],
                                     ["move", "a.ipynb", "b.ipynb"]])
def test_missing_root_is_one_line(tmp_path: Path, command: list[str]) -> None:
    sid = str(uuid.uuid4())
    args = [a.format(sid=sid) for a in command]
    message = fails(*args, "--root", tmp_path / "nowhere")
    assert message.endswith(f"workspace root {str(tmp_path / 'nowhere')!r}: does not exist")
    (tmp_path / "file").write_text("")
    assert fails(*args, "--root", tmp_path / "file").endswith("is not a directory")


@pytest.mark.parametrize("bad", ["nope", "..", ".", "1b4e28ba-2fa1-41d2-883f-0016d3cca42", "../etc", "a/b", " "])
@pytest.mark.parametrize("command", ["show", "rm"])
def test_bad_id_is_one_line(root: Path, command: str, bad: str) -> None:
    assert "invalid session id" in fails(command, bad, "--root", root)
    assert os.listdir(root) == []


@pytest.mark.parametrize("command", ["show", "rm"])
def test_unknown_session_is_one_line(root: Path, command: str) -> None:
    sid = str(uuid.uuid4())
    assert fails(command, sid, "--root", root).endswith(f"no session {sid} under {str(root)!r}")


@pytest.mark.parametrize("bad", ["3x", "", "h", "-1h", "24 hours", "1e999", "nan"])
def test_bad_duration_is_one_line(root: Path, bad: str) -> None:
    keep = make_session(root, 48)
    assert "bad duration" in fails("prune", f"--older-than={bad}", "--root", root)
    assert (root / keep).exists()


def test_prune_without_older_than_is_a_usage_error(root: Path) -> None:
    proc = wk("sessions", "prune", "--root", root, check=False)
    assert proc.returncode == 2 and "--older-than" in proc.stderr and "Traceback" not in proc.stderr


def test_notebook_column_with_the_real_registry(root: Path, tmp_path: Path) -> None:
    registry = pytest.importorskip("wasm_kernel.sessions.registry")
    identity = pytest.importorskip("wasm_kernel.sessions.identity")
    notebook = tmp_path / "analysis.ipynb"
    notebook.write_text("{}")
    sid = registry.get_or_create_session(identity.derive_session_identity(notebook, agent_key="alice"), root)
    (root / sid).mkdir()
    other = make_session(root, 1)
    rows = {ln.split()[0]: ln.split()[1] for ln in wk("sessions", "list", "--root", root).stdout.splitlines()[1:]}
    assert rows == {sid: os.path.realpath(notebook), other: "-"}
    assert wk_json("sessions", "show", sid, "--root", root)["notebook"] == os.path.realpath(notebook)  # type: ignore[index]


def test_rm_drops_the_sessions_registry_row_so_the_notebook_gets_a_fresh_session(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import SessionRegistry, derive_session_identity, get_or_create_session, get_session_sandbox

    notebook = tmp_path / "analysis.ipynb"
    notebook.write_text("{}")
    identity = derive_session_identity(notebook, agent_key="alice")
    sid = get_or_create_session(identity, root)
    (root / sid).mkdir()
    assert wk("sessions", "rm", sid, "--root", root).stdout.startswith(f"deleted session {sid}")
    with SessionRegistry(root) as reg:
        assert reg.lookup(sid) is None
    fresh = get_or_create_session(identity, root)
    assert fresh != sid

    # --force on a session that an open sandbox (here, in this process) holds unbinds it too.
    per_run = derive_session_identity(notebook, "run", "r1", "alice")
    held = get_or_create_session(per_run, root)
    with get_session_sandbox(held, workspace_root=root) as sb:
        assert sb.execute("open('f.txt', 'w').write('x')").success
        data = wk_json("sessions", "rm", held, "--force", "--root", root)
        assert data["was_in_use"] is True and data["forced"] is True  # type: ignore[index]
    with SessionRegistry(root) as reg:
        assert reg.lookup(held) is None and reg.lookup(fresh) is not None
    assert get_or_create_session(per_run, root) not in (held, sid, fresh)


def test_rm_without_a_registry_creates_none(root: Path) -> None:
    sid = make_session(root, 1, {"f": b"x"})
    wk("sessions", "rm", sid, "--root", root)
    assert not (root / ".wasm-kernel" / "registry.sqlite3").exists()


# --- move ------------------------------------------------------------------------------


def wk_in(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_move_after_a_shell_rename_keeps_the_notebooks_session(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import derive_session_identity, get_or_create_session

    (tmp_path / "hw1.ipynb").write_text("{}")
    sid = get_or_create_session(derive_session_identity(tmp_path / "hw1.ipynb", agent_key="alice"), root)
    (tmp_path / "hw1.ipynb").rename(tmp_path / "hw1-final.ipynb")  # mv in a shell

    proc = wk_in(tmp_path, "sessions", "move", "hw1.ipynb", "hw1-final.ipynb", "--root", root)  # relative to cwd
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == [
        "moved 1 session: hw1.ipynb -> hw1-final.ipynb",
        f"  {sid}  {tmp_path / 'hw1.ipynb'} -> {tmp_path / 'hw1-final.ipynb'}",
    ]
    assert get_or_create_session(derive_session_identity(tmp_path / "hw1-final.ipynb", agent_key="alice"), root) == sid


def test_move_of_a_folder_moves_every_notebook_under_it_and_says_so_in_json(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import derive_session_identity, get_or_create_session

    (tmp_path / "course" / "week1").mkdir(parents=True)
    (tmp_path / "course2").mkdir()
    inside = {name: get_or_create_session(derive_session_identity(tmp_path / "course" / name), root)
              for name in ("a.ipynb", "week1/b.ipynb")}
    sibling = get_or_create_session(derive_session_identity(tmp_path / "course2" / "a.ipynb"), root)
    (tmp_path / "course").rename(tmp_path / "course-2024")

    data = wk_json("sessions", "move", tmp_path / "course", tmp_path / "course-2024", "--root", root)
    assert data == {
        "old_path": str(tmp_path / "course"), "new_path": str(tmp_path / "course-2024"),
        "moved": [{"session_id": sid, "old_path": str(tmp_path / "course" / name),
                   "new_path": str(tmp_path / "course-2024" / name)} for name, sid in inside.items()],
    }
    for name, sid in inside.items():
        assert get_or_create_session(derive_session_identity(tmp_path / "course-2024" / name), root) == sid
    assert get_or_create_session(derive_session_identity(tmp_path / "course2" / "a.ipynb"), root) == sibling


def test_move_onto_a_notebook_with_its_own_session_is_one_line_and_changes_nothing(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import SessionRegistry, derive_session_identity, get_or_create_session

    old = get_or_create_session(derive_session_identity(tmp_path / "draft.ipynb"), root)
    taken = get_or_create_session(derive_session_identity(tmp_path / "hw1.ipynb"), root)
    (root / taken).mkdir()
    (root / taken / "notes.txt").write_text("mine")
    message = fails("move", tmp_path / "draft.ipynb", tmp_path / "hw1.ipynb", "--root", root)
    assert message == (f"wasm-kernel sessions move: error: hw1.ipynb already has its own session {taken}; "
                       "kept both as they were: remove or move that session first")
    with SessionRegistry(root) as reg:
        for sid, name in ((old, "draft.ipynb"), (taken, "hw1.ipynb")):
            entry = reg.lookup(sid)
            assert entry is not None and entry.notebook_path == str(tmp_path / name)


def test_move_onto_an_empty_session_says_replace_would_remove_it(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import derive_session_identity, get_or_create_session

    get_or_create_session(derive_session_identity(tmp_path / "draft.ipynb"), root)
    taken = get_or_create_session(derive_session_identity(tmp_path / "hw1.ipynb"), root)
    (root / taken).mkdir()  # what a kernel started on a notebook moved by a bare `mv` leaves, before any write
    message = fails("move", tmp_path / "draft.ipynb", tmp_path / "hw1.ipynb", "--root", root)
    assert message == (f"wasm-kernel sessions move: error: hw1.ipynb already has its own session {taken}; "
                       "kept both as they were: remove or move that session first, "
                       "or give --replace to remove it (it holds no files)")
    assert (root / taken).is_dir()


def test_move_replace_removes_the_new_names_empty_session_and_moves_the_old_one(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import SessionRegistry, derive_session_identity, get_or_create_session

    old = get_or_create_session(derive_session_identity(tmp_path / "draft.ipynb"), root)
    taken = get_or_create_session(derive_session_identity(tmp_path / "hw1.ipynb"), root)
    (root / taken / "empty-folder").mkdir(parents=True)  # folders are no files
    proc = wk("sessions", "move", "--replace", tmp_path / "draft.ipynb", tmp_path / "hw1.ipynb", "--root", root,
              check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("moved 1 session: "), proc.stderr
    assert not (root / taken).exists()
    with SessionRegistry(root) as reg:
        assert reg.lookup(taken) is None
        entry = reg.lookup(old)
        assert entry is not None and entry.notebook_path == str(tmp_path / "hw1.ipynb")


def test_move_replace_refuses_a_session_that_holds_files_and_changes_nothing(root: Path, tmp_path: Path) -> None:
    from wasm_kernel import SessionRegistry, derive_session_identity, get_or_create_session

    old = get_or_create_session(derive_session_identity(tmp_path / "draft.ipynb"), root)
    taken = get_or_create_session(derive_session_identity(tmp_path / "hw1.ipynb"), root)
    (root / taken / "sub").mkdir(parents=True)
    for name in ("a.txt", "sub/b.csv", "sub/c.png"):
        (root / taken / name).write_text("work")
    message = fails("move", "--replace", tmp_path / "draft.ipynb", tmp_path / "hw1.ipynb", "--root", root)
    assert message == (f"wasm-kernel sessions move: error: hw1.ipynb already has its own session {taken}, which "
                       "holds 3 files (--replace removes only an empty one); nothing was changed")
    assert sorted(p.name for p in (root / taken).rglob("*")) == ["a.txt", "b.csv", "c.png", "sub"]
    with SessionRegistry(root) as reg:
        for sid, name in ((old, "draft.ipynb"), (taken, "hw1.ipynb")):
            entry = reg.lookup(sid)
            assert entry is not None and entry.notebook_path == str(tmp_path / name)


def test_move_of_a_notebook_without_a_session_is_one_line_and_creates_no_registry(root: Path, tmp_path: Path) -> None:
    message = fails("move", tmp_path / "a.ipynb", tmp_path / "b.ipynb", "--root", root)
    assert message.startswith(f"wasm-kernel sessions move: error: no session belongs to {tmp_path / 'a.ipynb'}")
    assert "sessions list" in message
    assert os.listdir(root) == []


def test_move_without_two_paths_is_a_usage_error(root: Path) -> None:
    proc = wk("sessions", "move", "a.ipynb", "--root", root, check=False)
    assert proc.returncode == 2 and "NEW" in proc.stderr and "Traceback" not in proc.stderr
