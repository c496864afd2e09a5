"""Session metadata: written at creation, refreshed after execute, atomic, never
written for legacy sessions, never rewritten when corrupted."""

from __future__ import annotations

import errno
import json
import os
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from wasm_kernel import ExecutionPolicy, create_session_sandbox, get_session_sandbox
from wasm_kernel.sessions import metadata as metadata_mod
from wasm_kernel.sessions.layout import metadata_path
from wasm_kernel.sessions.metadata import SessionMetadata, read_metadata, touch_metadata, write_metadata

from support.events import Events

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")


def raw(root: Path, sid: str) -> dict[str, object]:
    return json.loads(metadata_path(root, sid).read_bytes())


def test_creation_writes_complete_utc_microsecond_metadata(tmp_path: Path) -> None:
    before = datetime.now(timezone.utc)
    sid, sb = create_session_sandbox(workspace_root=tmp_path)
    sb.close()
    data = raw(tmp_path, sid)
    assert set(data) == {"session_id", "created_at", "updated_at", "version"}
    assert data["session_id"] == sid and data["version"] == 1
    assert data["created_at"] == data["updated_at"]
    assert STAMP.match(str(data["created_at"])), data
    created = datetime.fromisoformat(str(data["created_at"]))
    assert abs((created - before).total_seconds()) < 1
    # Kept beside the workspaces, not in the folder the guest sees.
    assert metadata_path(tmp_path, sid) == tmp_path / ".wasm-kernel" / "sessions" / f"{sid}.json"
    assert os.listdir(tmp_path / sid) == []


def test_updated_at_moves_forward_after_every_execute_and_created_at_stays(tmp_path: Path) -> None:
    sid, sb = create_session_sandbox(workspace_root=tmp_path)
    try:
        first = raw(tmp_path, sid)
        stamps = [first["updated_at"]]
        for code in ("x = 1", "raise ValueError('a failing cell is activity too')", "print(x)", "1/0", "x"):
            sb.execute(code)
            data = raw(tmp_path, sid)
            assert data["created_at"] == first["created_at"] and data["session_id"] == sid and data["version"] == 1
            stamps.append(data["updated_at"])
    finally:
        sb.close()
    parsed = [datetime.fromisoformat(str(s)) for s in stamps]
    assert all(b > a for a, b in zip(parsed, parsed[1:])), stamps
    assert abs((parsed[-1] - datetime.now(timezone.utc)).total_seconds()) < 5


@pytest.mark.parametrize(
    ("policy", "code", "trap"),
    [
        (ExecutionPolicy(deadline_seconds=0.5), "while True: pass", "deadline"),
        (ExecutionPolicy(cpu_seconds=0.05), "while True: pass", "cpu_time"),
    ],
    ids=["deadline", "cpu_time"],
)
def test_updated_at_is_refreshed_after_a_cell_stopped_by_a_limit(
    tmp_path: Path, events: Events, policy: ExecutionPolicy, code: str, trap: str
) -> None:
    # A trapped cell was activity too; the refresh runs on the host after the trap
    # and must neither fail nor be skipped.
    sid, sb = create_session_sandbox(workspace_root=tmp_path, policy=policy, logger=events.logger)
    try:
        before = read_metadata(tmp_path, sid)
        r = sb.execute(code)
        assert r.trap == trap and not r.success
        after_trap = read_metadata(tmp_path, sid)
        assert sb.execute("print('alive')").stdout == "alive\n"
        after_next = read_metadata(tmp_path, sid)
    finally:
        sb.close()
    assert before is not None and after_trap is not None and after_next is not None
    assert before.updated_at < after_trap.updated_at < after_next.updated_at
    assert after_trap.created_at == before.created_at
    assert [name for name, _ in events.warnings() if name.startswith("session.")] == []


def test_a_failing_refresh_warns_and_the_execute_still_succeeds(
    tmp_path: Path, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, sb = create_session_sandbox(workspace_root=tmp_path, logger=events.logger)
    meta = metadata_path(tmp_path.resolve(), sid)
    original = meta.read_bytes()
    real_replace = os.replace

    def disk_full_for_metadata(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if Path(str(dst)) == meta:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", disk_full_for_metadata)
    try:
        r = sb.execute("open('out.txt', 'w').write('x')\nprint('ran')")
    finally:
        sb.close()
    monkeypatch.undo()
    assert r.success and r.stdout == "ran\n" and r.files_created == ["out.txt"]
    assert meta.read_bytes() == original  # the old metadata, whole
    assert os.listdir(meta.parent) == [meta.name]  # and no temp file left behind
    warnings = events.warnings()
    assert [name for name, _ in warnings] == ["session.metadata.update_failed"]
    assert warnings[0][1]["session_id"] == sid and "No space left" in str(warnings[0][1]["error"])


def test_updated_at_stays_monotonic_when_the_wall_clock_steps_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid, sb = create_session_sandbox(workspace_root=tmp_path)
    try:
        sb.execute("1")
        last = read_metadata(tmp_path, sid).updated_at  # type: ignore[union-attr]
        monkeypatch.setattr(metadata_mod, "utc_now", lambda: last - timedelta(hours=3))
        sb.execute("2")
        sb.execute("3")
    finally:
        sb.close()
    assert read_metadata(tmp_path, sid).updated_at == last + timedelta(microseconds=2)  # type: ignore[union-attr]


def test_refresh_is_one_write_that_never_waits_so_it_can_run_after_every_cell(
    tmp_path: Path, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What would make it dear is counted, not timed: a sleep, a retry, more than one
    # file put in place per refresh (its cost is BENCHMARKS.md's, ~0.5 ms).
    sid, sb = create_session_sandbox(workspace_root=tmp_path)
    sb.close()
    slept: list[float] = []
    replaced: list[object] = []
    real_replace = os.replace
    monkeypatch.setattr(time, "sleep", lambda s: slept.append(s))
    monkeypatch.setattr(os, "replace", lambda *a, **k: (replaced.append(a), real_replace(*a, **k))[1])
    for _ in range(30):
        touch_metadata(tmp_path.resolve(), sid, events.logger)
    assert slept == [] and len(replaced) == 30, (slept, len(replaced))
    assert events.all == []


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = str(uuid.uuid4())
    now = datetime.now(timezone.utc)
    write_metadata(tmp_path, SessionMetadata(sid, now, now))
    before = metadata_path(tmp_path, sid).read_bytes()

    def failing_replace(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_metadata(tmp_path, SessionMetadata(sid, now, now + timedelta(hours=1)))
    monkeypatch.undo()
    assert metadata_path(tmp_path, sid).read_bytes() == before
    assert os.listdir(metadata_path(tmp_path, sid).parent) == [f"{sid}.json"]


def test_a_metadata_write_failure_at_creation_warns_but_the_session_works(
        tmp_path: Path, events: Events, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def disk_full_for_metadata(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if Path(str(dst)).parent.name == "sessions":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", disk_full_for_metadata)  # every metadata write now fails
    sid, sb = create_session_sandbox(workspace_root=tmp_path, logger=events.logger)
    try:
        r = sb.execute("open('works.txt', 'w').write('yes')\nprint('ran')")
        assert r.success and r.stdout == "ran\n"
    finally:
        sb.close()
    warnings = events.warnings()
    assert [name for name, _ in warnings] == ["session.metadata.write_failed"]
    assert warnings[0][1]["session_id"] == sid and "No space left" in str(warnings[0][1]["error"])
    assert events.named("session.created")[0]["session_id"] == sid


def test_legacy_sessions_get_no_metadata_and_no_warning(tmp_path: Path, events: Events) -> None:
    sid = str(uuid.uuid4())
    (tmp_path / sid).mkdir()
    (tmp_path / sid / "old.txt").write_text("from before metadata existed")
    sb = get_session_sandbox(sid, workspace_root=tmp_path, logger=events.logger)
    try:
        r = sb.execute("print(open('old.txt').read())")
        assert r.success and "before metadata" in r.stdout
        sb.execute("open('new.txt', 'w').write('n')")
    finally:
        sb.close()
    assert not metadata_path(tmp_path, sid).exists()
    assert read_metadata(tmp_path, sid) is None
    assert events.warnings() == []
    assert os.listdir(tmp_path / ".wasm-kernel" / "sessions") == []


CORRUPTIONS = {
    "invalid_json": b"{not json",
    "empty": b"",
    "not_an_object": b"[1, 2]",
    "missing_field": b'{"session_id": "%s", "created_at": "2026-01-01T00:00:00.000000+00:00", "version": 1}',
    "wrong_session": b'{"session_id": "00000000-0000-0000-0000-000000000000", "created_at": "2026-01-01T00:00:00.000000+00:00", "updated_at": "2026-01-01T00:00:00.000000+00:00", "version": 1}',
    "bad_version": b'{"session_id": "%s", "created_at": "2026-01-01T00:00:00.000000+00:00", "updated_at": "2026-01-01T00:00:00.000000+00:00", "version": 2}',
    "bad_timestamp": b'{"session_id": "%s", "created_at": "yesterday", "updated_at": "2026-01-01T00:00:00.000000+00:00", "version": 1}',
    "not_utc": b'{"session_id": "%s", "created_at": "2026-01-01T00:00:00.000000+02:00", "updated_at": "2026-01-01T00:00:00.000000+02:00", "version": 1}',
    "binary": b"\xff\xfe\x00garbage",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupted_metadata_is_left_untouched_and_warned_about(tmp_path: Path, events: Events, kind: str) -> None:
    sid, sb = create_session_sandbox(workspace_root=tmp_path)
    content = CORRUPTIONS[kind].replace(b"%s", sid.encode())
    metadata_path(tmp_path, sid).write_bytes(content)
    sb.logger = events.logger
    try:
        r = sb.execute("print('still runs')")
        assert r.success and r.stdout == "still runs\n"
    finally:
        sb.close()
    assert metadata_path(tmp_path, sid).read_bytes() == content
    warnings = events.warnings()
    assert [name for name, _ in warnings] == ["session.metadata.corrupted"]
    assert warnings[0][1]["session_id"] == sid and warnings[0][1]["error"]
