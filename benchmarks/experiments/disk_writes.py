"""A session guest's writes under a disk quota: what the quota's count costs a cell.

    .venv/bin/python benchmarks/experiments/disk_writes.py [--rounds 5]

For an A/B, run it alternately from two trees (a clean export of the other commit
first on PYTHONPATH). Each cell runs in a session sandbox with a 4 GiB, 200,000-name
quota (the session's disk ledger, where the code has one); the figures are the
median wall and guest CPU time of each cell over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

CELLS = {
    "256 MiB in 64 KiB writes": "f = open('big.bin', 'wb')\nb = b'x' * 65536\nfor i in range(4096):\n    f.write(b)\n"
                                "f.close()\nimport os\nos.remove('big.bin')",
    "5,000 files made and removed": "import os, shutil\nos.makedirs('d', exist_ok=True)\nfor i in range(5000):\n"
                                    "    open(f'd/{i}', 'w').write('x')\nshutil.rmtree('d')",
    "2,000 appends of 100 bytes": "for i in range(2000):\n    with open('log.txt', 'a') as f:\n        f.write('y' * 100)\n"
                                  "import os\nos.remove('log.txt')",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from wasm_kernel import ExecutionPolicy
    from wasm_kernel.sessions.lifecycle import create_session_sandbox

    root = Path(tempfile.mkdtemp(prefix="disk-writes-"))
    policy = ExecutionPolicy(disk_max_bytes=4 << 30, disk_max_files=200_000)
    _sid, sandbox = create_session_sandbox(workspace_root=root, policy=policy)
    results = {}
    try:
        sandbox.execute("1")
        for name, code in CELLS.items():
            walls, cpus = [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                result = sandbox.execute(code)
                walls.append((time.perf_counter() - start) * 1000)
                cpus.append(result.cpu_ms)
                if not result.success:
                    print(f"{name}: the cell failed: {result.error}", file=sys.stderr)
                    return 1
            results[name] = {"wall_ms": round(statistics.median(walls), 1), "cpu_ms": round(statistics.median(cpus), 1)}
            print(f"{name}: wall {results[name]['wall_ms']} ms, guest CPU {results[name]['cpu_ms']} ms", flush=True)
    finally:
        sandbox.close()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
