"""prune_sessions: age-based deletion that respects leases (also from other
processes), skips legacy and corrupted sessions, never follows links, reports
exact bytes (dry run included), and keeps going past per-session errors."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from wasm_kernel import PruneResult, create_session_sandbox, get_session_sandbox, prune_sessions
from wasm_kernel.sessions.layout import lease_path, metadata_path
from wasm_kernel.sessions.metadata import SessionMetadata, write_metadata

from support.events import Events



from support.unprivileged import run_unprivileged


def make_session(root: Path, age_hours: float | None, files: dict[str, bytes] | None = None) -> str:
    """A session made on the host: its workspace, files, and metadata last updated
    `age_hours` ago (None: a legacy session without metadata)."""
    sid = str(uuid.uuid4())
    ws = root / sid
    ws.mkdir(parents=True)
    for name, data in (files or {}).items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_bytes(data)
    if age_hours is not None:
        backdate(root, sid, age_hours)
    return sid


def backdate(root: Path, sid: str, age_hours: float) -> None:
    then = datetime.now(timezone.utc) - timedelta(hours=age_hours)
    write_metadata(root, SessionMetadata(sid, then - timedelta(hours=1), then))


def test_prunes_old_sessions_keeps_recent_and_skips_legacy(root: Path, events: Events) -> None:
    old = make_session(root, 48, {"a.txt": b"x" * 1000, "sub/b.txt": b"y" * 500})
    recent = make_session(root, 1, {"r.txt": b"recent"})
    legacy = make_session(root, None, {"l.txt": b"legacy"})
    result = prune_sessions(24, root, logger=events.logger)
    assert result == PruneResult(deleted_sessions=[old], skipped_sessions=[legacy], reclaimed_bytes=1500, errors={}, dry_run=False)
    assert not (root / old).exists() and not metadata_path(root, old).exists() and not lease_path(root, old).exists()
    assert (root / recent / "r.txt").read_bytes() == b"recent" and metadata_path(root, recent).exists()
    assert (root / legacy / "l.txt").read_bytes() == b"legacy"
    assert events.named("session.prune.skipped") == [{"session_id": legacy, "reason": "no_metadata"}]


def test_threshold_zero_prunes_every_session_with_metadata_but_never_legacy_ones(root: Path) -> None:
    with_meta = sorted(make_session(root, age, {"f": b"1234"}) for age in (0.001, 1, 100))
    legacy = sorted(make_session(root, None) for _ in range(2))
    result = prune_sessions(0, root)
    assert sorted(result.deleted_sessions) == with_meta and sorted(result.skipped_sessions) == legacy
    assert result.reclaimed_bytes == 12
    assert sorted(p.name for p in root.iterdir()) == sorted([*legacy, ".wasm-kernel"])


def test_threshold_is_strict_age_greater_than(root: Path) -> None:
    older = make_session(root, 24.01)
    younger = make_session(root, 23.99)
    assert prune_sessions(24, root).deleted_sessions == [older]
    assert (root / younger).is_dir()


def test_dry_run_reports_exactly_what_the_real_run_then_does(root: Path, tmp_path: Path, events: Events) -> None:
    big_outside = tmp_path / "big_outside.bin"
    big_outside.write_bytes(b"o" * 100_000)
    old = make_session(root, 30, {"a.bin": b"a" * 1000, "d/b.bin": b"b" * 234})
    os.symlink("a.bin", root / old / "lnk")  # counts as its own 5 bytes
    os.link(root / old / "a.bin", root / old / "d" / "hard")  # the same inode: counted once
    os.symlink(big_outside, root / old / "outside")  # its target text, not 100 kB
    other = make_session(root, 99, {"c.bin": b"c" * 4321})
    make_session(root, 2, {"keep": b"k"})
    make_session(root, None)
    expected_bytes = 1000 + 234 + len("a.bin") + len(str(big_outside)) + 4321

    dry = prune_sessions(24, root, dry_run=True, logger=events.logger)
    assert dry.dry_run is True
    assert sorted(dry.deleted_sessions) == sorted([old, other]) and dry.reclaimed_bytes == expected_bytes
    assert (root / old).is_dir() and (root / other).is_dir() and metadata_path(root, old).exists()
    assert "session.prune.deleted" not in events.names()
    assert sorted(e["session_id"] for e in events.named("session.prune.candidate")) == sorted([old, other])

    real = prune_sessions(24, root)
    assert real.dry_run is False
    assert (real.deleted_sessions, real.skipped_sessions, real.reclaimed_bytes) == (
        dry.deleted_sessions, dry.skipped_sessions, dry.reclaimed_bytes,
    )
    assert not (root / old).exists() and not (root / other).exists()
    assert big_outside.stat().st_size == 100_000


def test_lifecycle_events_carry_their_fields(root: Path, events: Events) -> None:
    old = make_session(root, 48, {"f": b"12345"})
    legacy = make_session(root, None)
    prune_sessions(24, root, logger=events.logger)
    assert events.names() == [
        "session.prune.started", "session.prune.candidate", "session.prune.deleted",
        "session.prune.skipped", "session.prune.completed",
    ] or events.names() == [
        "session.prune.started", "session.prune.skipped", "session.prune.candidate",
        "session.prune.deleted", "session.prune.completed",
    ]
    assert events.named("session.prune.started") == [{"threshold_hours": 24, "workspace_root": str(root), "dry_run": False}]
    candidate = events.named("session.prune.candidate")[0]
    assert candidate["session_id"] == old and candidate["size_bytes"] == 5 and 47.9 < candidate["age_hours"] < 48.1  # type: ignore[operator]
    assert events.named("session.prune.deleted") == [{"session_id": old, "size_bytes": 5}]
    assert events.named("session.prune.skipped") == [{"session_id": legacy, "reason": "no_metadata"}]
    completed = events.named("session.prune.completed")[0]
    assert (completed["deleted_count"], completed["skipped_count"], completed["reclaimed_bytes"]) == (1, 1, 5)
    assert completed["duration"] >= 0 and completed["dry_run"] is False  # type: ignore[operator]
    levels = {event: level for level, event, _ in events.all}
    assert levels["session.prune.skipped"] == "warning" and levels["session.prune.deleted"] == "info"


def test_corrupted_metadata_is_skipped_and_left_alone(root: Path, events: Events) -> None:
    sid = make_session(root, 48)
    metadata_path(root, sid).write_bytes(b"{broken")
    result = prune_sessions(24, root, logger=events.logger)
    assert result.skipped_sessions == [sid] and result.deleted_sessions == []
    assert metadata_path(root, sid).read_bytes() == b"{broken" and (root / sid).is_dir()
    assert events.named("session.prune.skipped") == [{"session_id": sid, "reason": "corrupted_metadata"}]


def test_only_uuid_named_directories_are_considered(root: Path, events: Events) -> None:
    old = make_session(root, 48)
    for name in ("notes", "workspace", "1234", "not-a-uuid", str(uuid.uuid4()).upper(), str(uuid.uuid4()).replace("-", "")):
        (root / name).mkdir()
        (root / name / "f.txt").write_text("keep")
    (root / "stray.txt").write_text("file")
    result = prune_sessions(0, root, logger=events.logger)
    assert result.deleted_sessions == [old] and result.skipped_sessions == [] and result.errors == {}
    assert len([p for p in root.iterdir() if (p / "f.txt").exists()]) == 6 and (root / "stray.txt").exists()
    assert all(e.get("session_id") in (None, old) for _, _, e in events.all)
    assert events.warnings() == []


def test_symlinked_session_dirs_are_never_followed_out_of_the_root(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    sid = str(uuid.uuid4())
    os.symlink(outside, root / sid)
    backdate(root, sid, 1000)  # metadata that says "prune me"
    inner = make_session(root, 1000)
    os.symlink(outside, root / inner / "escape")
    result = prune_sessions(0, root)
    assert result.skipped_sessions == [sid] and result.deleted_sessions == [inner]
    assert os.path.islink(root / sid) and (outside / "precious.txt").read_text() == "keep"


def test_a_missing_root_raises_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prune_sessions(24, tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        prune_sessions(24, tmp_path / "file")
    assert not (tmp_path / "nope").exists()


def test_a_custom_root_is_pruned_and_the_default_workspace_is_not_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default, custom = tmp_path / "workspace", tmp_path / "custom"
    in_default = make_session(default, 48, {"d.txt": b"default"})
    in_custom = make_session(custom, 48, {"c.txt": b"custom"})
    result = prune_sessions(older_than_hours=24, workspace_root=Path("custom/"))
    assert result.deleted_sessions == [in_custom] and not (custom / in_custom).exists()
    assert (default / in_default / "d.txt").read_bytes() == b"default" and metadata_path(default, in_default).exists()
    # And without workspace_root it is the default root that is pruned.
    assert prune_sessions(24).deleted_sessions == [in_default]


def test_prune_events_from_the_default_logger_carry_utc_timestamps(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_session(root, 48, {"f": b"1"})
    make_session(root, None)
    caplog.set_level(logging.INFO, logger="wasm_kernel")
    before = datetime.now(timezone.utc)
    prune_sessions(24, root)  # no logger passed: the library's own structlog logger
    records = {}
    for record in caplog.records:
        event = re.search(r"event='([^']+)'", record.getMessage())
        if record.name == "wasm_kernel" and event:
            records[event.group(1)] = record
    assert set(records) >= {
        "session.prune.started", "session.prune.candidate", "session.prune.deleted",
        "session.prune.skipped", "session.prune.completed",
    }
    for record in records.values():
        stamp = re.search(r"timestamp='([^']+)'", record.getMessage())
        assert stamp, record.getMessage()
        moment = datetime.fromisoformat(stamp.group(1).replace("Z", "+00:00"))
        assert moment.utcoffset() == timedelta(0) and abs((moment - before).total_seconds()) < 60
    assert records["session.prune.skipped"].levelno == logging.WARNING
    assert records["session.prune.deleted"].levelno == logging.INFO


@pytest.mark.parametrize("bad", [-1, float("nan"), "24", None, True])
def test_a_bad_threshold_is_refused(root: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="older_than_hours"):
        prune_sessions(bad, root)  # type: ignore[arg-type]


def test_prune_result_reads_as_a_summary() -> None:
    ids = [str(uuid.uuid4()) for _ in range(4)]
    assert str(PruneResult(ids[:3], ids[3:], 1_500_000, {}, True)) == "Deleted 3 sessions, skipped 1, reclaimed 1.5 MB (dry run)"
    assert str(PruneResult(ids[:1], [], 0, {}, False)) == "Deleted 1 session, skipped 0, reclaimed 0 B"
    assert str(PruneResult([], [], 999, {ids[0]: "PermissionError: no"}, False)) == "Deleted 0 sessions, skipped 0, reclaimed 999 B, 1 error"
    assert str(PruneResult([], [], 2_345_678_901, {}, False)).endswith("reclaimed 2.3 GB")
    assert str(PruneResult([], [], 1_234, {}, False)).endswith("reclaimed 1.2 kB")


# --- sessions in use -----------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from wasm_kernel import create_session_sandbox
    sid, sb = create_session_sandbox(workspace_root=Path(sys.argv[1]))
    assert sb.execute("open('work.txt', 'w').write('in progress')").success
    print(sid, flush=True)
    print("ready", flush=True)
    sys.stdin.read()
    sb.close()
    print("closed", flush=True)
    """
)


@pytest.fixture
def holder(root: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Another process with a session sandbox open, waiting on its stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        sid = proc.stdout.readline().strip()
        assert proc.stdout.readline().strip() == "ready", "the holder process did not start"
        yield proc, sid
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


@pytest.mark.slow
def test_a_session_open_in_another_process_is_never_pruned(root: Path, holder: tuple[subprocess.Popen[str], str], events: Events) -> None:
    proc, sid = holder
    backdate(root, sid, 24 * 365)  # idle for a year, by its metadata
    for dry_run in (True, False):
        result = prune_sessions(1, root, dry_run=dry_run, logger=events.logger)
        assert result.skipped_sessions == [sid] and result.deleted_sessions == [] and result.reclaimed_bytes == 0
    assert (root / sid / "work.txt").read_text() == "in progress"
    assert {e["reason"] for e in events.named("session.prune.skipped")} == {"in_use"}
    # Once the other process closes its sandbox, the session can go.
    out, _ = proc.communicate("", timeout=60)
    assert "closed" in out
    assert prune_sessions(1, root).deleted_sessions == [sid]
    assert not (root / sid).exists()


@pytest.mark.slow
def test_a_killed_process_leaves_no_stale_lease(root: Path, holder: tuple[subprocess.Popen[str], str]) -> None:
    proc, sid = holder
    backdate(root, sid, 48)
    assert prune_sessions(24, root).skipped_sessions == [sid]
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert prune_sessions(24, root).deleted_sessions == [sid]


def test_a_session_open_in_this_process_is_skipped_and_can_be_reopened_after_pruning(root: Path) -> None:
    sid, sb = create_session_sandbox(workspace_root=root)
    try:
        assert sb.execute("open('f', 'w').write('x')").success
        backdate(root, sid, 48)
        assert prune_sessions(24, root).skipped_sessions == [sid]
    finally:
        sb.close()
    assert prune_sessions(24, root).deleted_sessions == [sid]
    again = get_session_sandbox(sid, workspace_root=root)
    try:
        r = again.execute("import os\nprint(os.listdir())")
        assert r.stdout == "[]\n"
        assert prune_sessions(24, root).deleted_sessions == []  # fresh metadata, and in use
    finally:
        again.close()


# --- what a guest can and cannot do to pruning ----------------------------------------------


@pytest.mark.slow
def test_a_guest_cannot_make_its_session_unprunable(root: Path) -> None:
    sibling = make_session(root, 1, {"sib.txt": b"sibling data"})
    sid, sb = create_session_sandbox(workspace_root=root)
    depth = sys.getrecursionlimit() + 200
    long_name = "n" * 200
    code = f"""
import os
open('/app/.metadata.json', 'w').write('{{"updated_at": "2999-01-01T00:00:00.000000+00:00"}}')
os.symlink('../{sibling}', 'sibling')
os.symlink('../{sibling}/sib.txt', 'sibling_file')
for _ in range({depth}):
    os.mkdir('d'); os.chdir('d')
open('deep.txt', 'w').write('x')
os.chdir('/app')
fd = os.open('.', os.O_RDONLY)
for _ in range(30):
    os.mkdir({long_name!r}, dir_fd=fd)
    sub = os.open({long_name!r}, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = sub
os.close(fd)
"""
    try:
        r = sb.execute(code)
        assert r.success, r.error
    finally:
        sb.close()
    backdate(root, sid, 48)
    dry = prune_sessions(24, root, dry_run=True)
    result = prune_sessions(24, root)
    assert result.deleted_sessions == [sid] == dry.deleted_sessions and result.errors == {}
    assert result.reclaimed_bytes == dry.reclaimed_bytes
    assert not (root / sid).exists()
    assert (root / sibling / "sib.txt").read_bytes() == b"sibling data"


def test_a_guest_cannot_make_its_session_prunable(root: Path) -> None:
    fake = '{"session_id": "%s", "created_at": "2000-01-01T00:00:00.000000+00:00", "updated_at": "2000-01-01T00:00:00.000000+00:00", "version": 1}'
    sid, sb = create_session_sandbox(workspace_root=root)
    legacy = make_session(root, None)
    lb = get_session_sandbox(legacy, workspace_root=root)
    try:
        for box, box_id in ((sb, sid), (lb, legacy)):
            r = box.execute(f"open('/app/.metadata.json', 'w').write({fake % box_id!r})\nopen('.wasm-kernel', 'w').write('x')")
            assert r.success, r.error
    finally:
        sb.close()
        lb.close()
    result = prune_sessions(24, root)
    assert result.deleted_sessions == [] and result.skipped_sessions == [legacy]
    assert (root / sid).is_dir() and (root / legacy).is_dir()


# --- errors ------------------------------------------------------------------------------------



def _prune_without_privileges(root: Path, hours: float) -> dict[str, object]:
    return run_unprivileged(lambda: dataclasses.asdict(prune_sessions(hours, root)))


def test_permission_errors_are_recorded_and_pruning_goes_on(shared_root: Path) -> None:
    root = shared_root
    first = make_session(root, 48, {"a.txt": b"a" * 10})
    locked = make_session(root, 48, {"ro/inside.txt": b"cannot delete me", "free.txt": b"f"})
    last = make_session(root, 48, {"c.txt": b"c" * 30})
    (root / ".wasm-kernel" / "leases").mkdir(exist_ok=True)
    if os.geteuid() == 0:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [*dirnames, *filenames]:
                os.chown(os.path.join(dirpath, name), 65534, 65534, follow_symlinks=False)
        os.chown(root, 65534, 65534)
        os.chown(root / locked / "ro", 0, 0)  # root's folder: nobody cannot empty it
        os.chown(root / locked / "ro" / "inside.txt", 0, 0)
    (root / locked / "ro").chmod(0o555)
    result = _prune_without_privileges(root, 24)
    assert "crash" not in result, result
    assert sorted(result["deleted_sessions"]) == sorted([first, last])  # type: ignore[arg-type]
    assert list(result["errors"]) == [locked]  # type: ignore[arg-type]
    assert "PermissionError" in result["errors"][locked]  # type: ignore[index]
    assert result["reclaimed_bytes"] == 40
    # The failed session keeps its metadata, so a later prune tries again.
    assert (root / locked / "ro" / "inside.txt").exists() and metadata_path(root, locked).exists()
    assert not (root / first).exists() and not (root / last).exists()


def test_prune_only_considers_the_sessions_the_filter_accepts(tmp_path: Path) -> None:
    from wasm_kernel.sessions.lifecycle import create_session_sandbox

    root = tmp_path / "root"
    ids = []
    for _ in range(2):
        sid, sb = create_session_sandbox(workspace_root=root)
        sb.close()
        ids.append(sid)
    keep, drop = ids
    result = prune_sessions(0, root, only=lambda sid: sid == drop)
    assert result.deleted_sessions == [drop]
    assert keep not in result.skipped_sessions
    assert (root / keep).is_dir() and not (root / drop).exists()
