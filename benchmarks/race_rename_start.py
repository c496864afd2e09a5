"""A notebook's rename racing a kernel's start on it (sessions/moves.py, sessions/registry.py).

The long form runs from here; tests/security/test_identity.py runs a short
one in CI.

    .venv/bin/python benchmarks/race_rename_start.py --rounds 5000

Each round, a notebook with a session (a file in its workspace) is renamed by one
process, as the server extension follows JupyterLab's rename, while another starts a
kernel on its old name and a third on its new one, each binding the identity as a
kernel's start does, at random moments. Whatever the order, afterwards:

- the original session, with its file, is named by exactly one registry row, of the
  old name or the new one, never lost and never shared;
- no two rows name one session, and every row's key is the one its parts derive;
- each kernel got the session its name's row holds now, or one the rename moved
  from under it (it started before the rename: its workspace is the renamed one's).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AGENT = "student"


def _bind(root: str, notebook: str) -> str:
    from wasm_kernel.sessions.identity import derive_session_identity
    from wasm_kernel.sessions.registry import SessionRegistry

    with SessionRegistry(Path(root)) as registry:
        return registry.get_or_create_session(derive_session_identity(notebook, agent_key=AGENT))


def _worker(role: str, root: str, jobs: multiprocessing.Queue, results: multiprocessing.Queue) -> None:
    from wasm_kernel.sessions.moves import SessionMoveError, move_notebook_sessions

    while True:
        job = jobs.get()
        if job is None:
            return
        old, new, delay = job
        time.sleep(delay)
        try:
            if role == "rename":
                moved = move_notebook_sessions(root, old, new)
                results.put((role, [m.session_id for m in moved], None))
            else:
                results.put((role, _bind(root, old if role == "start-old" else new), None))
        except SessionMoveError as err:
            results.put((role, None, f"refused: {err}"))
        except Exception as err:  # a crash of the registry is the finding
            results.put((role, None, f"error: {type(err).__name__}: {err}"))


def _check(root: Path, old: str, new: str, original: str, got: dict[str, object]) -> list[str]:
    from wasm_kernel.sessions.identity import derive_session_identity
    from wasm_kernel.sessions.registry import SessionRegistry

    problems = []
    with SessionRegistry(root) as registry:
        rows = registry.entries_at(old) + registry.entries_at(new)
    ids = [r.session_id for r in rows]
    if len(ids) != len(set(ids)):
        problems.append(f"a session named by two rows: {ids}")
    for row in rows:
        if derive_session_identity(row.notebook_path, agent_key=AGENT).key != row.identity_key:
            problems.append(f"row of {row.notebook_path} has a key its parts do not derive")
    if ids.count(original) != 1:
        problems.append(f"the original session is named by {ids.count(original)} rows")
    if not (root / original / "answer.txt").exists():
        problems.append("the original session's file is gone")
    by_path = {r.notebook_path: r.session_id for r in rows}
    for role, path in (("start-old", old), ("start-new", new)):
        sid = got.get(role)
        if isinstance(sid, str) and sid != by_path.get(path) and not (sid == original and path == old):
            problems.append(f"{role} got {sid}, which its name's row does not hold ({by_path.get(path)})")
    for role, error in got.items():
        if isinstance(error, str) and error.startswith("error:"):
            problems.append(f"{role}: {error}")
    return problems


def rename_race(rounds: int, base: Path, progress: bool = True) -> dict[str, object]:
    from wasm_kernel.sessions.layout import ensure_private_dirs

    root = base / "sessions"
    root.mkdir(parents=True)
    ensure_private_dirs(root)
    notebooks = base / "course"
    notebooks.mkdir()
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue = ctx.Queue()
    roles = ("rename", "start-old", "start-new")
    queues = {role: ctx.Queue() for role in roles}
    procs = [ctx.Process(target=_worker, args=(role, str(root), queues[role], results)) for role in roles]
    for p in procs:
        p.start()
    rng = random.Random(11)
    problems: list[str] = []
    orders: dict[str, int] = {}
    started = time.monotonic()
    try:
        for i in range(rounds):
            old, new = str(notebooks / f"hw{i}.ipynb"), str(notebooks / f"hw{i}-renamed.ipynb")
            original = _bind(str(root), old)
            (root / original).mkdir()
            (root / original / "answer.txt").write_text("42")
            for role in roles:
                queues[role].put((old, new, rng.random() * 0.004))
            got: dict[str, object] = {}
            for _ in roles:
                role, value, error = results.get(timeout=60)
                got[role] = error if error is not None else value
            kind = "before" if got.get("start-old") == original else "after"
            orders[kind] = orders.get(kind, 0) + 1
            found = _check(root, old, new, original, got)
            problems += [f"round {i}: {p}" for p in found]
            if progress and i % 500 == 0:
                print(f"  round {i}/{rounds}: {len(problems)} problems", flush=True)
    finally:
        for role in roles:
            queues[role].put(None)
        for p in procs:
            p.join(30)
    return {"rounds": rounds, "seconds": round(time.monotonic() - started, 1),
            "old_start_before_rename": orders.get("before", 0), "old_start_after_rename": orders.get("after", 0),
            "problems": problems[:20], "ok": not problems}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="race-rename-") as folder:
        result = rename_race(args.rounds, Path(folder))
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
