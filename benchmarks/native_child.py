"""Native side of the CPU and numpy/pandas sets, in a fresh child process.

    python benchmarks/native_child.py batch cpu|numpy REPEATS
        prints one JSON line: {"python": ..., "cells": {name: [seconds, ...]}, ...}
    python benchmarks/native_child.py serve cpu|numpy
        prints one JSON line of versions, then for each cell name read from stdin runs
        that cell once and prints the seconds it took; the parent interleaves these
        with the guest's runs so both sides see the same machine load.

Each cell is exec'd the same way the guest runs it (compile + exec in a namespace;
the CPU cells in a fresh namespace each time, the numpy cells in the namespace of
the setup cell), after one untimed warm-up run. Stdlib-only for "cpu", so any
CPython can run it (used for an optional second native version).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads  # noqa: E402


class Cells:
    def __init__(self, which: str) -> None:
        self.info: dict[str, object] = {"python": platform.python_version(), "executable": sys.executable}
        if which == "cpu":
            self.cells, setup = workloads.CPU_CELLS, None
        elif which == "numpy":
            self.cells, setup = workloads.NUMPY_CELLS, workloads.NUMPY_SETUP
        else:
            raise SystemExit(f"unknown set {which!r}")
        self.shared = setup is not None
        self.ns: dict[str, object] = {"__name__": "__main__"}
        if setup:
            exec(compile(setup, "<setup>", "exec"), self.ns)
            import numpy
            import pandas

            self.info["numpy"] = numpy.__version__
            self.info["pandas"] = pandas.__version__
        self.code = {name: compile(src, f"<{name}>", "exec") for name, src in self.cells.items()}
        for name in self.cells:  # warm-up
            self.run(name)

    def run(self, name: str) -> float:
        ns = self.ns if self.shared else {"__name__": "__main__"}
        code = self.code[name]
        t = time.perf_counter()
        exec(code, ns)
        return time.perf_counter() - t


def main() -> None:
    mode, which = sys.argv[1], sys.argv[2]
    cells = Cells(which)
    if mode == "batch":
        repeats = int(sys.argv[3])
        cells.info["cells"] = {name: [cells.run(name) for _ in range(repeats)] for name in cells.cells}
        print(json.dumps(cells.info))
        return
    print(json.dumps(cells.info), flush=True)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            break
        print(repr(cells.run(name)), flush=True)


if __name__ == "__main__":
    main()
