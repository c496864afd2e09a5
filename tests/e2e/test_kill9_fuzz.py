"""The short form of the kill -9 fuzz (benchmarks/bench_kill9.py runs 500 rounds):
30 rounds of a real kernel killed at random moments, then the same checks against
a deliberately damaged workspace, so the checks are known to catch a loss."""

from __future__ import annotations

import sys
from pathlib import Path

from support.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import bench_kill9  # noqa: E402


def test_thirty_random_kills_lose_nothing_a_completed_cell_wrote(tmp_path: Path) -> None:
    result = bench_kill9.run(30, seed=20261123, base=tmp_path, progress=False)
    assert result["failure"] is None, result
    assert result["completed_cells"] >= 30 and all(result["kills"].values()), result
    assert result["kills"]["mid-rewind"] >= 2, result


def test_the_checks_catch_a_changed_file_and_lost_history(tmp_path: Path) -> None:
    result = bench_kill9.run(2, seed=7, base=tmp_path, progress=False)
    assert result["failure"] is None, result
    root = tmp_path / "jupyter" / "wasm-kernel" / "sessions"
    [session_id] = [p.name for p in root.iterdir() if not p.name.startswith(".")]
    expected = bench_kill9.Expected(files={"precious.bin": bench_kill9._sha(b"kept")}, cells=["never ran"])
    (root / session_id / "precious.bin").write_bytes(b"kept")
    assert bench_kill9._check(root, session_id, session_id, expected) == \
        "history lost a completed cell: 'never ran'"
    (root / session_id / "precious.bin").write_bytes(b"kepT")
    assert "precious.bin of a completed cell changed" in bench_kill9._check(root, session_id, session_id, expected)
    assert "another session" in bench_kill9._check(root, session_id, "x", expected)
    # A rewind's files: all as before it, or all as at its target; a mix is caught.
    (root / session_id / "one.bin").write_bytes(b"before")
    (root / session_id / "two.bin").write_bytes(b"after")
    before = bench_kill9.Expected(files={"one.bin": bench_kill9._sha(b"before"), "two.bin": bench_kill9._sha(b"before")})
    after = {"one.bin": bench_kill9._sha(b"after"), "two.bin": bench_kill9._sha(b"after")}
    assert "a mix of before and after" in str(bench_kill9._after_rewind(root, session_id, before, after))


def test_image_builds_killed_at_random_moments_leave_no_usable_half_image() -> None:
    import kill9_image

    result = kill9_image.run_image_kills(8, seed=20261124, progress=False)
    assert result["failure"] is None, result
    assert result["kills"] >= 4, result  # most rounds really were interrupted half way
