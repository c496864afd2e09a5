"""Races and kill -9 over the notebook folder's union (runtime/notebook_overlay.py).

Long forms (thousands of rounds) run from here; tests/security/test_notebook_folder_races.py
runs the short forms in CI.

    .venv/bin/python benchmarks/race_notebook_folder.py swap --rounds 5000
    .venv/bin/python benchmarks/race_notebook_folder.py hidden --rounds 5000
    .venv/bin/python benchmarks/race_notebook_folder.py kill9 --rounds 200

- swap: while a guest copies a notebook file up (an append), again and again, a host
  thread swaps the file's folder for a link to a secret folder outside and back. The
  secret must never reach the workspace.
- hidden: while a guest reads and stats sub/f.txt, again and again, a host process
  swaps sub/ for a link to the folder's own hidden .private/ (a relative link, inside
  the folder) and back. The hidden file's content and size must never reach the guest.
- kill9: a process copying a large notebook file up is killed at a random moment. The
  workspace then has the whole file or none of it (never a partial copy that would
  shadow the original), and the next sandbox on the workspace sweeps the temporaries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SECRET = b"SECRET-OUTSIDE-THE-NOTEBOOK-FOLDER"


def swap_race(rounds: int, base: Path, progress: bool = True) -> dict[str, object]:
    """The guest appends to data/rows<i>.csv, a fresh notebook file each round (so each
    append is a copy-up; a removed copy would leave a whiteout, not the original),
    while a host thread swaps data/ for a link to a folder outside."""
    from wasm_kernel import create_sandbox
    from wasm_kernel.core.sandbox import GuestOptions
    from wasm_kernel.runtime.notebook_overlay import NotebookFolder

    nb, ws, outside = base / "nb", base / "ws", base / "outside"
    (nb / "data").mkdir(parents=True)
    outside.mkdir()
    for i in range(rounds):
        (nb / "data" / f"rows{i}.csv").write_bytes(b"public\n")
        (outside / f"rows{i}.csv").write_bytes(SECRET + b"\n")
    sb = create_sandbox(workspace=ws, guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve(), max_depth=3)))
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        real, parked, link = nb / "data", nb / "data.real", nb / "data.link"
        link.symlink_to(outside)
        while not stop.is_set():
            os.rename(real, parked)  # data/ -> a link to outside, atomically renamed in
            os.rename(link, real)
            os.rename(real, link)
            os.rename(parked, real)
            swaps += 1

    thread = threading.Thread(target=swapper, daemon=True)
    leaked = 0
    copied = 0
    per_cell = 50
    try:
        assert sb.execute("import os").success
        thread.start()
        for done in range(0, rounds, per_cell):
            r = sb.execute(
                "seen = []\n"
                f"for i in range({done}, {min(done + per_cell, rounds)}):\n"
                "    try:\n"
                "        with open(f'data/rows{i}.csv', 'a') as f:\n"
                "            f.write('')\n"
                "        seen.append(open(f'data/rows{i}.csv', 'rb').read())\n"
                "    except OSError:\n"
                "        pass\n"
                "print(sum(b'SECRET' in s for s in seen), len(seen))\n"
            )
            assert r.success, (r.error, r.stderr)
            bad, n = (int(x) for x in r.stdout.split())
            leaked += bad
            copied += n
            if progress:
                print(f"swap race: {done + per_cell}/{rounds} rounds, {swaps} swaps, {copied} copies, "
                      f"{leaked} leaks", file=sys.stderr)
    finally:
        stop.set()
        thread.join(10)
        sb.close()
    for path in ws.rglob("*"):
        if path.is_file() and SECRET in path.read_bytes():
            leaked += 1
    return {"rounds": rounds, "swaps": swaps, "copies": copied, "leaks": leaked}


HIDDEN = b"HIDDEN-INSIDE-THE-NOTEBOOK-FOLDER"

# The host process that swaps: sub/ becomes a link to .private and back, in a loop,
# until SIGTERM; then it prints how many swaps it made. A process of its own, so the
# swaps run while the kernel's process is inside wasmtime's open (not between the
# turns of one GIL).
_SWAPPER = """
import ctypes, os, signal, sys
os.chdir(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
swaps = 0
print("ready", flush=True)
while not stop:
    # sub (the folder) and sub.link (a link to .private) trade places atomically:
    # sub is always there, a folder or the link.
    if libc.renameat2(AT_FDCWD, b"sub", AT_FDCWD, b"sub.link", RENAME_EXCHANGE):
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
    swaps += 1
print(swaps // 2, flush=True)
"""


def hidden_race(rounds: int, base: Path, per_cell: int = 250, progress: bool = True) -> dict[str, object]:
    """The guest reads and stats sub/f.txt `rounds` times while a host process swaps
    sub/ for a link to .private/ (the folder's hidden entry) and back: neither the
    hidden f.txt's content nor its size may ever reach the guest. Each read or stat
    either finds the public file or fails (ENOENT)."""
    from wasm_kernel import create_sandbox
    from wasm_kernel.core.sandbox import GuestOptions
    from wasm_kernel.runtime.notebook_overlay import NotebookFolder

    nb, ws = base / "nb", base / "ws"
    (nb / "sub").mkdir(parents=True)
    (nb / ".private").mkdir()
    (nb / "sub" / "f.txt").write_bytes(b"public")
    (nb / ".private" / "f.txt").write_bytes(HIDDEN)  # its size tells it apart too
    (nb / "sub.link").symlink_to(".private")  # relative: it stays inside the folder
    sb = create_sandbox(workspace=ws, guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve(), max_depth=3)))
    totals = dict.fromkeys(("public", "failed", "hidden", "hidden_stats"), 0)
    swapper = None
    swaps = 0
    try:
        assert sb.execute("import os").success
        swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(nb)], stdout=subprocess.PIPE)
        assert swapper.stdout is not None
        assert swapper.stdout.readline().strip() == b"ready", "the swapper did not start"
        for done in range(0, rounds, per_cell):
            r = sb.execute(
                "import json\n"
                "counts = {'public': 0, 'failed': 0, 'hidden': 0, 'hidden_stats': 0}\n"
                f"for _ in range({min(per_cell, rounds - done)}):\n"
                "    try:\n"
                f"        counts['hidden_stats'] += os.stat('sub/f.txt').st_size == {len(HIDDEN)}\n"
                "    except OSError:\n"
                "        pass\n"
                "    try:\n"
                "        with open('sub/f.txt', 'rb') as f:\n"
                "            got = f.read()\n"
                "    except OSError:\n"
                "        counts['failed'] += 1\n"
                "        continue\n"
                f"    counts['hidden' if got == {HIDDEN!r} else 'public'] += 1\n"
                "print(json.dumps(counts))\n"
            )
            assert r.success, (r.error, r.stderr)
            for key, n in json.loads(r.stdout).items():
                totals[key] += n
            if progress:
                print(f"hidden race: {min(done + per_cell, rounds)}/{rounds} reads, {totals['public']} public, "
                      f"{totals['failed']} failed, {totals['hidden']} hidden, {totals['hidden_stats']} hidden sizes",
                      file=sys.stderr)
    finally:
        if swapper is not None:
            swapper.terminate()
            out, _ = swapper.communicate(timeout=30)
            swaps = int(out.split()[-1]) if out.split() else 0
        sb.close()
    return {"rounds": rounds, "swaps": swaps, **totals}


_CHILD = """
import sys
from pathlib import Path
from wasm_kernel import create_sandbox
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.notebook_overlay import NotebookFolder
nb, ws = Path(sys.argv[1]), Path(sys.argv[2])
sb = create_sandbox(workspace=ws, guest_options=GuestOptions(notebook=NotebookFolder(nb)))
assert sb.execute("import os").success
print("ready", flush=True)
sb.execute("open('big.bin', 'ab').write(b'+')")
print("done", flush=True)
"""


def kill9_copy_up(rounds: int, base: Path, seed: int = 20261125, size: int = 48 << 20,
                  progress: bool = True) -> dict[str, object]:
    """Kill a process mid copy-up `rounds` times; after each kill the workspace has the
    whole file or none, and the next sandbox removes the dead process's temporaries."""
    from wasm_kernel.runtime.notebook_folder_fs import COPY_PREFIX, sweep_copy_leftovers

    rng = random.Random(seed)
    nb, ws = base / "nb", base / "ws"
    nb.mkdir(parents=True)
    ws.mkdir()
    original = os.urandom(1 << 20) * (size >> 20)
    (nb / "big.bin").write_bytes(original)
    killed_mid = partial = leftovers_seen = 0
    for done in range(rounds):
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(nb.resolve()), str(ws)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=ROOT)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready", "the child did not start"
        time.sleep(rng.uniform(0.0, 0.25))
        proc.kill()
        proc.wait(30)
        copy = ws / "big.bin"
        if copy.exists():
            got = copy.read_bytes()
            if got not in (original, original + b"+"):
                partial += 1
        else:
            killed_mid += 1
        left = [p.name for p in ws.iterdir() if p.name.startswith(COPY_PREFIX)]
        leftovers_seen += bool(left)
        sweep_copy_leftovers(ws)  # what the next sandbox's overlay does when it starts
        if [p.name for p in ws.iterdir() if p.name.startswith(COPY_PREFIX)]:
            return {"failure": "a dead process's copy-up temporary survived the sweep"}
        if copy.exists():
            copy.unlink()
        if progress:
            print(f"kill9 copy-up: {done + 1}/{rounds}, {killed_mid} before the copy landed, {partial} partial, "
                  f"{leftovers_seen} with leftovers", file=sys.stderr)
    failure = f"{partial} partial copies shadowed the original" if partial else None
    return {"failure": failure, "rounds": rounds, "killed_before_copy_landed": killed_mid,
            "rounds_with_leftovers": leftovers_seen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["swap", "hidden", "kill9"])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wk-race-") as tmp:
        if args.what == "swap":
            result = swap_race(args.rounds, Path(tmp))
            ok = result["leaks"] == 0
        elif args.what == "hidden":
            result = hidden_race(args.rounds, Path(tmp))
            ok = result["hidden"] == 0 and result["hidden_stats"] == 0
        else:
            result = kill9_copy_up(args.rounds, Path(tmp))
            ok = result["failure"] is None
    print(result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
