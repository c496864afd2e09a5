"""An upload's work does not grow with the workspace: SessionWorkspace counts the
workspace once, for its ledger's first record, and every later part (each in a
SessionWorkspace of its own, as the drive opens one per request) is charged from the
ledger, never by walking the tree. benchmarks/bench_drive.py times the same through
a real Jupyter Server; this pins the count."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from wasm_kernel.sessions import session_workspace
from wasm_kernel.sessions.session_workspace import SessionWorkspace

PART = b"p" * 4096


def test_a_hundred_parts_into_a_2000_file_workspace_walk_it_once(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = str(uuid.uuid4())
    for i in range(2000):
        folder = root / sid / f"d{i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:04d}").write_bytes(b"x")
    walks: list[int] = []
    real = session_workspace.tree_usage

    def counted(fd: int) -> tuple[int, int]:
        walks.append(fd)
        return real(fd)

    monkeypatch.setattr(session_workspace, "tree_usage", counted)
    limits = (1 << 30, 10_000)
    for part in [1, *range(2, 100), -1]:
        with SessionWorkspace(root, sid) as workspace:
            workspace.upload("big.bin", PART, part=part, limits=limits)
    assert (root / sid / "big.bin").stat().st_size == 100 * len(PART)
    assert len(walks) == 1, f"the workspace was walked {len(walks)} times for 100 parts"
    with SessionWorkspace(root, sid) as workspace:
        assert workspace.usage()[0] >= 2000 + 100 * len(PART)  # and the ledger counted every part
