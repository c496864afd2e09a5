"""The workspace's files at every point (sessions/file_points.py), through the one door
(SessionWorkspace): a rewind puts files, folders and contents back, near a full quota
too; a rewind broken off half way is put back by the next start, never left a mix."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from wasm_kernel.core.file_changes import FileChanges
from wasm_kernel.sessions.file_points import INTENT, FilePoints, FilePointsError
from wasm_kernel.sessions.session_workspace import SessionWorkspace


def _session(root: Path) -> tuple[str, Path]:
    sid = str(uuid.uuid4())
    (root / sid).mkdir(parents=True)
    return sid, root / sid


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def test_a_rewind_puts_back_contents_deletions_and_folders_and_goes_forward(root: Path) -> None:
    sid, ws = _session(root)
    (ws / "keep.txt").write_text("kept")
    with SessionWorkspace(root, sid) as workspace:
        points = FilePoints(workspace, root / "points", 1 << 30, lambda: (1 << 30, 10_000))
        (ws / "a.txt").write_text("one")
        points.record(1, FileChanges(["a.txt"], [], []))
        first = _tree(ws)
        (ws / "a.txt").write_text("two")
        (ws / "keep.txt").unlink()
        (ws / "sub" / "deep").mkdir(parents=True)
        (ws / "sub" / "deep" / "b.bin").write_bytes(b"\0" * 100_000)
        points.record(2, FileChanges(["sub/deep/b.bin"], ["a.txt"], ["keep.txt"]))
        second = _tree(ws)
        changes = points.rewind(1, 3)
        assert _tree(ws) == first
        assert "sub/deep/b.bin" in changes.deleted and "keep.txt" in changes.created
        points.rewind(2, 4)
        assert _tree(ws) == second


def test_a_workspace_near_its_quota_still_rewinds(root: Path) -> None:
    sid, ws = _session(root)
    quota = (3_000_000, 100)
    with SessionWorkspace(root, sid) as workspace:
        points = FilePoints(workspace, root / "points", 1 << 30, lambda: quota)
        workspace.write("big.bin", b"a" * 2_000_000, limits=quota)
        points.record(1, FileChanges(["big.bin"], [], []))
        workspace.delete("big.bin", limits=quota)
        workspace.write("other.bin", b"b" * 2_500_000, limits=quota)  # the quota has room for one of them
        points.record(2, FileChanges(["other.bin"], [], ["big.bin"]))
        points.rewind(1, 3)  # what goes is given back before what comes is charged
        assert sorted(p.name for p in ws.iterdir()) == ["big.bin"]
        assert workspace.usage()[0] <= quota[0]


def test_a_rewind_that_cannot_fit_changes_nothing(root: Path) -> None:
    sid, ws = _session(root)
    quota = [10_000_000, 100]
    with SessionWorkspace(root, sid) as workspace:
        points = FilePoints(workspace, root / "points", 1 << 30, lambda: tuple(quota))  # type: ignore[arg-type]
        workspace.write("big.bin", b"a" * 2_000_000, limits=tuple(quota))  # type: ignore[arg-type]
        points.record(1, FileChanges(["big.bin"], [], []))
        workspace.write("small.txt", b"s", limits=tuple(quota))  # type: ignore[arg-type]
        workspace.delete("big.bin", limits=tuple(quota))  # type: ignore[arg-type]
        points.record(2, FileChanges(["small.txt"], [], ["big.bin"]))
        before = _tree(ws)
        quota[0] = 1_000_000  # the operator lowered the quota since
        with pytest.raises(FilePointsError, match="as they were"):
            points.rewind(1, 3)
        assert _tree(ws) == before


def test_a_rewind_broken_off_half_way_is_put_back_by_the_next_start(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid, ws = _session(root)
    with SessionWorkspace(root, sid) as workspace:
        points = FilePoints(workspace, root / "points", 1 << 30, lambda: (1 << 30, 10_000))
        for name in "abcdef":
            (ws / f"{name}.txt").write_text(f"{name} one")
        points.record(1, FileChanges([f"{n}.txt" for n in "abcdef"], [], []))
        for name in "abcdef":
            (ws / f"{name}.txt").write_text(f"{name} two")
        points.record(2, FileChanges([], [f"{n}.txt" for n in "abcdef"], []))
        before = _tree(ws)
        copies = 0
        real = workspace.copy_in

        def dies_on_the_third(*args: object, **kwargs: object) -> int:
            nonlocal copies
            copies += 1
            if copies == 3:
                raise SystemExit("killed")  # not an error the rewind handles: as a kill -9 would leave it
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(workspace, "copy_in", dies_on_the_third)
        with pytest.raises(SystemExit):
            points.rewind(1, 3)
        assert (root / "points" / INTENT).exists()
        assert _tree(ws) != before  # half way: a mix
        monkeypatch.setattr(workspace, "copy_in", real)
        again = FilePoints(workspace, root / "points", 1 << 30, lambda: (1 << 30, 10_000))
        assert again.notice is not None and "broken off" in again.notice
        assert _tree(ws) == before
        assert not (root / "points" / INTENT).exists()
