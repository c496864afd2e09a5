"""Writers racing against one session's disk quota (host/disk_ledger.py).

The long form runs from here; tests/security/test_disk_ledger.py runs a short one in CI.

    .venv/bin/python benchmarks/race_disk_ledger.py --rounds 5000

Two guests of one session, each in a process of its own as two kernels of one
notebook are, run cells that write files of random sizes to /app and /tmp and remove
some, while the host writes and deletes through the session's workspace as the
magics and the drive do. Every 20 ms a sampler stops every writer where it is
(SIGSTOP for the guests, even between a charge and its write) and walks the
workspace and both guests' /tmp: what is on disk must never pass the quota. At the end,
with every writer gone, the ledger must be exactly what is on disk.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUOTA_BYTES = 8 << 20
QUOTA_NAMES = 400
OPS_PER_CELL = 25

CELL = """
import os, random
rng = random.Random({seed})
done = refused = 0
for i in range({ops}):
    where = rng.choice(['/app', '/tmp'])
    mine = [n for n in os.listdir(where) if n.startswith('g{tag}-')]
    if mine and rng.random() < 0.35:
        os.remove(where + '/' + rng.choice(mine))
        continue
    try:
        with open(f'{{where}}/g{tag}-{{rng.randrange(10**9)}}', 'wb') as f:
            f.write(b'x' * rng.randrange(1, 256 << 10))
        done += 1
    except OSError:
        refused += 1
print(done, refused)
"""


def _usage(paths: list[Path]) -> tuple[int, int]:
    from wasm_kernel.host.safe_fs import open_root, tree_usage

    total = names = 0
    for path in paths:
        try:
            fd = open_root(path)
        except OSError:
            continue
        try:
            size, count = tree_usage(fd)
        finally:
            os.close(fd)
        total, names = total + size, names + count
    return total, names


def _wait_stopped(pid: int) -> None:
    for _ in range(2000):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t", "Z", "X"):
                    return
        except OSError:
            return
        time.sleep(0.0005)


def _guest(root: str, session_id: str, tag: str, cells: int, seed: int, out: multiprocessing.Queue) -> None:
    from wasm_kernel import ExecutionPolicy
    from wasm_kernel.sessions.lifecycle import get_session_sandbox

    policy = ExecutionPolicy(disk_max_bytes=QUOTA_BYTES, disk_max_files=QUOTA_NAMES)
    sandbox = get_session_sandbox(session_id, workspace_root=Path(root), policy=policy)
    done = refused = 0
    failed: list[str] = []
    try:
        for c in range(cells):
            result = sandbox.execute(CELL.format(seed=seed * 100_003 + c, ops=OPS_PER_CELL, tag=tag))
            if result.success:
                a, b = result.stdout.split()
                done, refused = done + int(a), refused + int(b)
            else:
                failed.append("".join(result.error.traceback)[-1500:] if result.error else str(result.trap_message))
    finally:
        sandbox.close()
    out.put((tag, done, refused, failed))


def writers_race(rounds: int, base: Path, progress: bool = True) -> dict[str, object]:
    """`rounds` write-or-remove operations in all (guests' and host's together)."""
    root = base / "sessions"
    root.mkdir(parents=True)
    scratch = base / "scratch"  # every guest's /tmp is in here, so the sampler sees them all
    scratch.mkdir()
    was = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(scratch)  # for the guests' processes, which inherit it
    try:
        return _race(rounds, root, scratch, progress)
    finally:
        if was is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = was


def _race(rounds: int, root: Path, scratch: Path, progress: bool) -> dict[str, object]:
    from wasm_kernel.sessions.lifecycle import create_session_sandbox
    from wasm_kernel.sessions.session_workspace import QuotaExceeded, SessionWorkspace

    session_id, first = create_session_sandbox(workspace_root=root)
    first.close()
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    cells = max(1, rounds // (3 * OPS_PER_CELL))
    procs = [ctx.Process(target=_guest, args=(str(root), session_id, tag, cells, i + 1, out))
             for i, tag in enumerate("ab")]
    stop = threading.Event()
    worst = [0, 0]
    samples = 0
    host_turn = threading.Lock()  # held by the host's writer for each of its operations

    def sample() -> None:
        """Every writer stopped (the guests with SIGSTOP, wherever they are, even
        between a charge and its write; the host between two operations), then the
        disk walked: a walk of a tree that changes under it would count a file
        removed and the one written after it both."""
        nonlocal samples
        while not stop.is_set():
            time.sleep(0.02)
            with host_turn:
                alive = []
                for p in procs:
                    try:  # a writer that ended since is_alive() is not sampled (its count is in)
                        if p.pid is not None and p.is_alive():
                            os.kill(p.pid, signal.SIGSTOP)
                            alive.append(p)
                    except ProcessLookupError:
                        pass
                try:
                    for p in alive:  # stopped for certain before the walk
                        _wait_stopped(p.pid)
                    used = _usage([root / session_id, *scratch.rglob("tmp")])
                finally:
                    for p in alive:
                        try:
                            os.kill(p.pid, signal.SIGCONT)
                        except ProcessLookupError:
                            pass
            worst[0], worst[1] = max(worst[0], used[0]), max(worst[1], used[1])
            samples += 1

    workspace = SessionWorkspace(root, session_id)
    host_done = host_refused = 0
    rng = random.Random(7)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    for p in procs:
        p.start()
    mine: list[str] = []
    i = 0
    # The host writes for as long as the guests do (they take a moment to start), and
    # a third of the rounds at least.
    while i < rounds // 3 or any(p.is_alive() for p in procs):
        i += 1
        with host_turn:
            if mine and rng.random() < 0.35:
                workspace.delete(mine.pop(rng.randrange(len(mine))), recursive=False,
                                 limits=(QUOTA_BYTES, QUOTA_NAMES))
                continue
            name = f"h-{i}/part.bin" if rng.random() < 0.3 else f"h-{i}.bin"  # some with a new folder
            try:
                workspace.write(name, b"y" * rng.randrange(1, 256 << 10), append=False,
                                limits=(QUOTA_BYTES, QUOTA_NAMES), what="the race's write")
                mine.append(name)
                host_done += 1
            except QuotaExceeded:
                host_refused += 1
        if progress and i % 200 == 0:
            print(f"  host {i}: worst on disk {worst[0] / (1 << 20):.2f} MiB, {worst[1]} names",
                  flush=True)
    for p in procs:
        p.join(600)
    stop.set()
    sampler.join()
    guests = {}
    while not out.empty():
        tag, done, refused, failed = out.get()
        guests[tag] = {"written": done, "refused": refused, "failed_cells": failed}
    workspace.close()
    final_disk = _usage([root / session_id])
    check = SessionWorkspace(root, session_id)
    final_ledger = check.usage()
    check.close()
    return {
        "rounds": rounds, "seconds": round(time.monotonic() - started, 1), "samples": samples,
        "quota": [QUOTA_BYTES, QUOTA_NAMES], "worst_on_disk": worst,
        "host": {"written": host_done, "refused": host_refused}, "guests": guests,
        "exit_codes": [p.exitcode for p in procs],
        "final_disk": list(final_disk), "final_ledger": list(final_ledger),
        "ok": worst[0] <= QUOTA_BYTES and worst[1] <= QUOTA_NAMES and final_disk == final_ledger
        and all(p.exitcode == 0 for p in procs) and not any(g["failed_cells"] for g in guests.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="race-ledger-") as folder:
        result = writers_race(args.rounds, Path(folder))
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
