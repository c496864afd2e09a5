"""What a cell pays to read many small files of the notebook's folder (issue 40): 500
files of 64 bytes at each of three depths (the folder itself, sub/, a/b/c/), each
opened, read and closed in one cell, stat'ed in another: per file, the median over
--rounds rounds (after one warm-up round) of the guest's own clock and of the
process's CPU time. It measures the tree it is run from, so the same script in a
worktree of another commit gives that commit's figures (run them alternately, same
machine, same hour).

    .venv/bin/python benchmarks/experiments/notebook_folder_reads.py --rounds 15
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FILES = 500
FOLDERS = {"top": "", "depth 1": "sub", "depth 3": "a/b/c"}

# One cell: each of FILES names in one folder opened, read and closed, or stat'ed.
READ = "with open(name, 'rb') as f:\n        f.read()"
STAT = "os.stat(name)"
CELL = """
import os, time
names = [os.path.join({folder!r}, f"f{{i:03d}}.txt") for i in range({files})]
t = time.perf_counter()
for name in names:
    {op}
print(time.perf_counter() - t)
"""


def measure(rounds: int) -> dict[str, dict[str, float]]:
    """Per file, microseconds: the median over `rounds` cells of the guest's own
    clock (wall) and of the kernel process's CPU time over the cell's execute (cpu,
    less moved by other load on the machine; it includes the cell's fixed cost,
    spread over its FILES operations)."""
    from wasm_kernel import create_sandbox
    from wasm_kernel.core.sandbox import GuestOptions
    from wasm_kernel.runtime.notebook_overlay import NotebookFolder

    with tempfile.TemporaryDirectory(prefix="wk-nb-reads-") as tmp:
        nb = Path(tmp) / "nb"
        for folder in FOLDERS.values():
            (nb / folder).mkdir(parents=True, exist_ok=True)
            for i in range(FILES):
                (nb / folder / f"f{i:03d}.txt").write_bytes(b"x" * 64)
        sb = create_sandbox(workspace=Path(tmp) / "ws",
                            guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve())))
        cells = {(label, op): CELL.format(folder=folder, files=FILES, op=code)
                 for label, folder in FOLDERS.items() for op, code in (("read", READ), ("stat", STAT))}
        wall: dict[tuple[str, str], list[float]] = {key: [] for key in cells}
        cpu: dict[tuple[str, str], list[float]] = {key: [] for key in cells}
        try:
            for n in range(rounds + 1):
                for key, cell in cells.items():
                    before = resource.getrusage(resource.RUSAGE_SELF)
                    r = sb.execute(cell)
                    after = resource.getrusage(resource.RUSAGE_SELF)
                    assert r.success, (r.error, r.stderr)
                    if n:  # the first round warms the guest's caches
                        wall[key].append(float(r.stdout))
                        cpu[key].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        finally:
            sb.close()
    return {f"{label} {op}": {"wall_us": round(statistics.median(wall[(label, op)]) / FILES * 1e6, 1),
                              "cpu_us": round(statistics.median(cpu[(label, op)]) / FILES * 1e6, 1)}
            for label, op in cells}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(json.dumps(measure(args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
