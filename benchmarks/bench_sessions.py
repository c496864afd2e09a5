"""Sessions: prune and file listing, on the host (no sandbox is started).

    .venv/bin/python benchmarks/run_all.py --only sessions [--json out.json] [--sessions 10000]

Rows:
- prune dry run over N idle sessions (every one a candidate, so every tree is
  sized): the first run, which also creates each session's lock file, and the
  median of the next three; target 2 s for 10,000;
- a real prune of 1,000 idle sessions (3 files each);
- list_session_files on one session holding 10,000 files in 100 folders, with the
  default pattern "**" and with "**/*.csv" (median of 5).

Sessions are made the way the sessions layer makes them on disk: `<root>/<uuid>/`
plus metadata written by its own writer (metadata.write_metadata), backdated.
The root is a fresh temporary folder (on the same filesystem as $TMPDIR). Runs in
well under 2 minutes.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, log, median, temp_workspace, timed  # noqa: E402

from wasm_kernel.sessions import list_session_files, prune_sessions  # noqa: E402
from wasm_kernel.sessions.commands import quiet_logger  # noqa: E402
from wasm_kernel.sessions.metadata import SessionMetadata, write_metadata  # noqa: E402


def make_sessions(root: Path, count: int, files_per_session: int, age_hours: float) -> list[str]:
    then = datetime.now(timezone.utc) - timedelta(hours=age_hours)
    ids = []
    for _ in range(count):
        sid = str(uuid.uuid4())
        ws = root / sid
        ws.mkdir()
        for i in range(files_per_session):
            (ws / f"f{i}.txt").write_bytes(b"x" * 100)
        write_metadata(root, SessionMetadata(sid, then, then))
        ids.append(sid)
    return ids


def bench_dry_run(n: int) -> list[Row]:
    with temp_workspace("wk-bench-sessions-") as root:
        log(f"creating {n} sessions for the dry-run prune")
        t = time.perf_counter()
        make_sessions(root, n, 1, 48)
        log(f"  made in {time.perf_counter() - t:.1f} s")
        logger = quiet_logger()
        results = []

        def run() -> None:
            r = prune_sessions(24, root, dry_run=True, logger=logger)
            results.append(r)

        first = timed(run)
        warm = [timed(run) for _ in range(3)]
        r = results[-1]
        assert len(r.deleted_sessions) == n and r.reclaimed_bytes == 100 * n, str(r)
        assert all(len(x.deleted_sessions) == n for x in results)
    return [
        Row("sessions", f"prune dry run, {n:,} sessions (first)", "s", first, target_max=2.0 if n >= 10_000 else None,
            note="also creates the lock files"),
        Row("sessions", f"prune dry run, {n:,} sessions (warm, median of 3)", "s", median(warm),
            target_max=2.0 if n >= 10_000 else None, extra={"runs": warm}),
    ]


def bench_real_prune(n: int = 1000) -> list[Row]:
    with temp_workspace("wk-bench-sessions-") as root:
        log(f"creating {n} sessions (3 files each) for a real prune")
        make_sessions(root, n, 3, 48)
        result = []
        seconds = timed(lambda: result.append(prune_sessions(24, root, logger=quiet_logger())))
        assert len(result[0].deleted_sessions) == n and not any(p.name != ".wasm-kernel" for p in root.iterdir())
    return [Row("sessions", f"prune, real, {n:,} sessions x 3 files", "s", seconds,
                note=f"{seconds / n * 1e3:.2f} ms per session")]


def bench_list_files(n_files: int = 10_000) -> list[Row]:
    with temp_workspace("wk-bench-sessions-") as root:
        (sid,) = make_sessions(root, 1, 0, 0)
        ws = root / sid
        per_dir = 100
        for d in range(n_files // per_dir):
            sub = ws / f"d{d:03d}"
            sub.mkdir()
            for i in range(per_dir):
                (sub / (f"f{i}.csv" if i % 10 == 0 else f"f{i}.txt")).write_bytes(b"y")
        logger = quiet_logger()
        rows = []
        for pattern, expected in (("**", n_files), ("**/*.csv", n_files // 10)):
            found: list[list[str]] = []
            runs = [timed(lambda: found.append(list_session_files(sid, root, pattern, logger=logger))) for _ in range(5)]
            assert len(found[-1]) == expected, (pattern, len(found[-1]))
            rows.append(Row("sessions", f"list_session_files, {n_files:,} files, {pattern!r}", "s", median(runs),
                            note=f"{expected:,} matches", extra={"runs": runs}))
    return rows


def run_sessions(sessions: int = 10_000) -> list[Row]:
    """Prune (a dry run over `sessions`, then a real one) and file listing, host only."""
    return bench_dry_run(sessions) + bench_real_prune() + bench_list_files()
