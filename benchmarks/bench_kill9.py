"""kill -9 fuzz: a kernel killed at random moments never loses what it finished.

    .venv/bin/python benchmarks/run_all.py --only kill9 [--kill-rounds 500] [--seed N] [--json out.json]

One notebook, reopened every round by a fresh real kernel (JPY_SESSION_NAME, so
the same session). Each round runs a few cells that write files of random sizes
(new files, overwrites, appends, %%writefile), then starts a cell that keeps
writing and SIGKILLs the kernel process at a random moment: while that cell runs,
right after a reply (the checkpoint, metadata and history writes happen then),
while the kernel is still starting, while a cell copies a large file of the
notebook's folder up into the workspace (an append to it), while `%pip`
installs a wheel, or while `%rewind` puts the workspace's files back to an earlier
cell of the round (a 20 MB file among them). After every kill the notebook is reopened and checked on the host:

- it found the same session;
- every file written by a cell that completed is byte-identical;
- the session's metadata and the registry parse;
- history holds every cell that completed, in order;
- the notebook folder's file in the workspace is whole or absent (never a partial
  copy shadowing the original), the notebook's own file is unchanged, and no
  copy-up temporary or %pip scratch folder is left once the notebook is reopened;
- the session's packages are a whole install or none;
- after a kill during a rewind, the files are all as before it or all as at the
  cell it went back to, never a mix.

Exits non-zero and names the first round that broke one of these.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.kernel_client import RunningKernel  # noqa: E402

KILL_MOMENTS = ("mid-cell", "after-reply", "at-start", "mid-copy-up", "mid-pip", "mid-rewind")
SHARED = "data/rows.csv"  # a file of the notebook's folder, copied up when a cell appends to it


@dataclass
class Expected:
    files: dict[str, str] = field(default_factory=dict)  # name -> sha256 of its bytes
    cells: list[str] = field(default_factory=list)  # sources of completed cells, in order


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _payload(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 100, 4096, 65_537, 300_000, 2_000_000])
    return rng.randbytes(size)


def _cell(rng: random.Random, round_no: int, step: int, expected: Expected) -> tuple[str, dict[str, bytes]]:
    """A cell and the files it leaves, as name -> final bytes."""
    kind = rng.choice(["new", "new", "overwrite", "append", "writefile", "print"])
    if kind == "overwrite" and expected.files:
        name = rng.choice(sorted(expected.files))
        data = _payload(rng)
        return f"open({name!r}, 'wb').write(bytes.fromhex({data.hex()!r}))", {name: data}
    if kind == "append":
        name = f"log-{round_no}-{step}.txt"
        lines = "".join(f"line {i}\n" for i in range(rng.randint(1, 500)))
        return (f"with open({name!r}, 'a') as f:\n    f.write({lines!r})\nwith open({name!r}, 'a') as f:\n"
                f"    f.write('end\\n')"), {name: (lines + "end\n").encode()}
    if kind == "writefile":
        name = f"note-{round_no}-{step}.txt"
        body = "".join(f"note {i}\n" for i in range(rng.randint(1, 50)))
        return f"%%writefile {name}\n{body}", {name: body.encode()}
    if kind == "print":
        return f"for i in range({rng.randint(1, 2000)}):\n    print(i)", {}
    name = f"f-{round_no}-{step}.bin"
    data = _payload(rng)
    return f"open({name!r}, 'wb').write(bytes.fromhex({data.hex()!r}))", {name: data}


def _shared_rows() -> bytes:
    return b"".join(b"%09d,a row of the notebook's own data\n" % i for i in range(120_000))  # about 5 MB


def _check_unfinished(root: Path, session_id: str, notebook_folder: Path) -> str | None:
    """What a kill in the middle of a copy-up or of %pip may not leave behind."""
    from wasm_kernel.runtime.notebook_folder_fs import COPY_PREFIX
    from wasm_kernel.sessions.packages import list_packages, packages_path

    original = _shared_rows()
    if (notebook_folder / SHARED).read_bytes() != original:
        return "the notebook's own file changed"
    copy = root / session_id / SHARED
    if copy.exists() and copy.read_bytes() not in (original, original + b"appended\n"):
        return f"a partial copy of {SHARED} ({copy.stat().st_size} bytes) shadows the notebook's file"
    if any(p.name.startswith(COPY_PREFIX) for p in (root / session_id).iterdir()):
        return "a copy-up temporary was left after the reopen"
    shelf = packages_path(root, session_id).parent
    if any(p.name.startswith(".pip-") for p in shelf.iterdir()):
        return "a %pip scratch folder was left after the reopen"
    try:
        installed = list_packages(root, session_id)
    except Exception as err:
        return f"the session's packages do not read: {err}"
    if installed not in ([], [("kill9wheel", "1.0")]):
        return f"the session's packages are half an install: {installed}"
    return None


def _left_something(root: Path, session_id: str) -> bool:
    """Right after a kill: a copy-up temporary or a %pip scratch folder is there."""
    from wasm_kernel.runtime.notebook_folder_fs import COPY_PREFIX
    from wasm_kernel.sessions.packages import packages_path

    shelf = packages_path(root, session_id).parent
    return any(p.name.startswith(COPY_PREFIX) for p in (root / session_id).iterdir()) or \
        any(p.name.startswith(".pip-") for p in shelf.iterdir())


def _files_now(workspace: Path, names: set[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = _sha((workspace / name).read_bytes())
        except OSError:
            found[name] = None
    return found


def _after_rewind(root: Path, session_id: str, expected: Expected, rewound: dict[str, str] | None) -> str | None:
    """After a kill during a rewind: the files as before it (expected) or as at its
    target (rewound), all of them one or the other. The state found becomes expected."""
    if rewound is None:
        return None
    names = set(expected.files) | set(rewound)
    now = _files_now(root / session_id, names)
    before = {n: expected.files.get(n) for n in names}
    after = {n: rewound.get(n) for n in names}
    if now == before:
        return None
    if now == after:
        expected.files = dict(rewound)
        return None
    mixed = sorted(n for n in names if now[n] != before[n])[:3]
    return f"after a kill during a rewind the files are a mix of before and after ({', '.join(mixed)})"


def _rewinding_in(workspace_root: Path, session_id: str) -> bool:
    return (workspace_root / ".wasm-kernel" / "points" / session_id / "rewind.json").exists()


def _kill(kernel: RunningKernel) -> None:
    process = getattr(kernel.km.provisioner, "process", None)
    if process is not None and process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _discard(kernel: RunningKernel) -> None:
    try:
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=True)
    except Exception:
        pass
    kernel.output.close()


def _check(root: Path, session_id: str, found_id: str, expected: Expected) -> str | None:
    """What is wrong after a reopen, or None."""
    from wasm_kernel.sessions.history_store import SessionHistory
    from wasm_kernel.sessions.metadata import read_metadata
    from wasm_kernel.sessions.registry import SessionRegistry

    if found_id != session_id:
        return f"reopened another session ({found_id}, not {session_id})"
    workspace = root / session_id
    for name, digest in expected.files.items():
        try:
            data = (workspace / name).read_bytes()
        except OSError as err:
            return f"{name} of a completed cell is gone: {err}"
        if _sha(data) != digest:
            return f"{name} of a completed cell changed ({len(data)} bytes now)"
    try:
        if read_metadata(root, session_id) is None:
            return "the metadata is missing"
    except Exception as err:  # CorruptMetadataError and anything else
        return f"the metadata does not parse: {err}"
    try:
        with SessionRegistry(root) as registry:
            if registry.lookup(session_id) is None:
                return "the registry lost the session"
    except Exception as err:
        return f"the registry does not open: {err}"
    with SessionHistory(root, session_id) as history:
        stored = [entry[2] for entry in history.search("*")]
    position = 0
    for source in expected.cells:
        try:
            position = stored.index(source, position) + 1
        except ValueError:
            return f"history lost a completed cell: {source[:60]!r}"
    return None


def run(rounds: int, seed: int, base: Path | None = None, progress: bool = True) -> dict[str, Any]:
    rng = random.Random(seed)
    base = base or Path(tempfile.mkdtemp(prefix="wk-kill9-"))
    notebook = base / "course" / "fuzzed.ipynb"
    notebook.parent.mkdir(parents=True, exist_ok=True)
    notebook.write_text("{}")
    (notebook.parent / SHARED).parent.mkdir(exist_ok=True)
    (notebook.parent / SHARED).write_bytes(_shared_rows())
    wheels = base / "wheels"
    from support.wheelhouse import build_wheel

    build_wheel(wheels, "kill9wheel", "1.0", {"kill9wheel/__init__.py": "", "kill9wheel/blob.bin": os.urandom(3 << 20)})
    argv = ["--WasmKernel.pip_no_index=True", f"--WasmKernel.pip_find_links={wheels}"]  # %pip from here only
    data_dir = base / "jupyter"
    env = {"JPY_SESSION_NAME": str(notebook)}
    root = data_dir / "wasm-kernel" / "sessions"
    expected = Expected()
    session_id: str | None = None
    moments = {m: 0 for m in KILL_MOMENTS}
    rewound: dict[str, str] | None = None  # the files a rewind killed mid-way was putting back
    started = time.perf_counter()
    failure = None
    cells_done = 0
    caught_mid = 0
    caught_rewinds = 0
    for round_no in range(rounds):
        moment = rng.choice(KILL_MOMENTS)
        moments[moment] += 1
        if moment == "at-start":
            # Ready to answer, and opening its sandbox (lease, metadata, guest) meanwhile.
            kernel = RunningKernel(data_dir, cwd=notebook.parent, env=env, argv=argv)
            time.sleep(rng.uniform(0.0, 0.8))
            _kill(kernel)
            _discard(kernel)
            kernel = RunningKernel(data_dir, cwd=notebook.parent, env=env, argv=argv)
        else:
            kernel = RunningKernel(data_dir, cwd=notebook.parent, env=env, argv=argv)
        try:
            found = kernel.session_id()
            session_id = session_id or found
            problem = _after_rewind(root, session_id, expected, rewound)
            rewound = None
            problem = problem or _check(root, session_id, found, expected)
            if problem is None and kernel.execute("1").status == "ok":  # the sandbox is open: swept
                problem = _check_unfinished(root, session_id, notebook.parent)
            if problem is not None:
                failure = f"round {round_no} (after a kill {moment}): {problem}"
                break
            snapshots: list[tuple[int, dict[str, str]]] = []  # each cell's count and the files after it
            for step in range(rng.randint(1, 4)):
                code, files = _cell(rng, round_no, step, expected)
                if moment == "mid-rewind" and step == 0:  # something big for the rewind to put back
                    big = f"big-{round_no}.bin"
                    code, files = f"open({big!r}, 'wb').write(b'r' * (20 << 20))", {big: b"r" * (20 << 20)}
                run_ = kernel.execute(code, timeout=120)
                if run_.status != "ok":
                    failure = f"round {round_no}: a cell failed: {run_.reply['content'].get('evalue')}"
                    break
                expected.cells.append(code)
                expected.files.update({name: _sha(data) for name, data in files.items()})
                snapshots.append((int(run_.reply["content"]["execution_count"]), dict(expected.files)))
                cells_done += 1
            if failure:
                break
            if moment == "after-reply":
                kernel.kc.execute(f"open('after-{round_no}.bin', 'wb').write(b'x' * 3_000_000)")
                time.sleep(rng.uniform(0.0, 0.05))
            elif moment == "mid-copy-up":
                # The workspace's copy gone (by %rm on the host: a guest's os.remove would
                # hide the notebook's file too), so the append copies the 5 MB file up.
                kernel.execute(f"%rm {SHARED}", timeout=60)
                kernel.kc.execute(f"open({SHARED!r}, 'a').write('appended\\n')")
                time.sleep(rng.uniform(0.0, 0.15))
            elif moment == "mid-pip":
                kernel.execute("%pip uninstall -y kill9wheel", timeout=60)
                kernel.kc.execute("%pip install kill9wheel")
                time.sleep(rng.uniform(0.2, 2.5))
            elif moment == "mid-rewind":
                big = f"big-{round_no}.bin"
                overwrite = kernel.execute(f"open({big!r}, 'wb').write(b's' * (20 << 20))", timeout=120)
                if overwrite.status == "ok":
                    expected.cells.append(f"open({big!r}, 'wb').write(b's' * (20 << 20))")
                    expected.files[big] = _sha(b"s" * (20 << 20))
                    target, rewound = snapshots[0]
                    kernel.kc.execute(f"%rewind {target}")
                    time.sleep(rng.uniform(0.0, 0.1))  # the rewind itself takes tens of ms
            elif moment == "mid-cell":
                kernel.kc.execute(f"for i in range(10**6):\n    open(f'busy-{round_no}-{{i % 50}}.bin', 'wb')"
                                  f".write(b'y' * (i % 70_000))")
                time.sleep(rng.uniform(0.0, 0.6))
            _kill(kernel)
            if moment in ("mid-copy-up", "mid-pip") and session_id is not None and _left_something(root, session_id):
                caught_mid += 1  # the kill landed while the copy or the install was under way
            if moment == "mid-rewind" and session_id is not None and _rewinding_in(root, session_id):
                caught_rewinds += 1  # the kill landed while the rewind's record was on disk
        finally:
            _discard(kernel)
        if progress and (round_no + 1) % 10 == 0:
            print(f"kill9: {round_no + 1}/{rounds} rounds, {cells_done} cells, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    if failure is None and session_id is not None:
        # The last kill is checked too.
        kernel = RunningKernel(data_dir, cwd=notebook.parent, env=env, argv=argv)
        try:
            found = kernel.session_id()
            failure = _after_rewind(root, session_id, expected, rewound) or _check(root, session_id, found, expected)
        finally:
            kernel.shutdown()
    return {
        "rounds": rounds if failure is None else int(failure.split()[1].rstrip(":")) + 1,
        "seed": seed,
        "kills": moments,
        "completed_cells": cells_done,
        "kills_that_left_a_half_copy_or_install": caught_mid,
        "kills_during_a_rewind": caught_rewinds,
        "files_checked": len(expected.files),
        "failure": failure,
        "seconds": round(time.perf_counter() - started, 1),
    }
