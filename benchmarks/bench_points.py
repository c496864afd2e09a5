"""Area points: what every cell's point (%rewind, runtime/points.py) costs and buys.

- A point's cost per cell: `1+1`, and a cell that dirties 2,048 pages (8 MiB) of an
  existing buffer, with and without points, in one run: its execute plus the
  checkpoint after it (wait_idle), median of `cells`; and the bytes a point keeps per
  page the cell dirtied.
- A rewind's time for guest states of 50 MB and 500 MB (a numpy array that size; the
  two cells after it each change a tenth of it), beside recomputing that state
  natively in-process (what restart-and-run-all costs at best), and going forward again.
- A 50-cell data-science notebook (pandas, numpy): the bytes its points keep in all
  and per cell, and the rewind to cell 25 and to cell 1. Kishu (VLDB 2025) reports
  checkpoints up to 4.55x smaller and checkouts up to 9.02x faster than its
  baselines, at sub-second checkout; its absolute figures are per notebook in the
  paper and not re-run here.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import Row, check, log, median, quiet_policy, temp_workspace  # noqa: E402

DIRTY_SETUP = "b = bytearray(8 << 20)"
DIRTY_CELL = "for i in range(0, len(b), 4096):\n    b[i] = (b[i] + 1) & 255"
DIRTIED_PAGES = (8 << 20) // 4096


def _sandbox(ws: Path, points: bool) -> Any:
    from wasm_kernel import create_sandbox
    from wasm_kernel.runtime.guest_config import GuestOptions, PointLimits

    (ws / "app").mkdir()
    options = GuestOptions(points=PointLimits(ws / "points", max_points=1000, max_bytes=64 << 30)) if points else None
    return create_sandbox(workspace=ws / "app", policy=quiet_policy(), guest_options=options)


class _Cells:
    def __init__(self, sb: Any) -> None:
        self.sb, self.count = sb, 0

    def run(self, code: str) -> float:
        from wasm_kernel.runtime.guest_config import CellOptions

        self.count += 1
        start = time.perf_counter()
        check(self.sb.execute(code, cell=CellOptions(execution_count=self.count)), code[:40])
        self.sb._guest.wait_idle()  # the checkpoint and the point: the cell's full cost
        return time.perf_counter() - start

    def rewind(self, count: int) -> float:
        target = next(p for p in reversed(self.sb.timeline()) if p.count == count)
        self.count += 1
        start = time.perf_counter()
        self.sb.rewind(target.seq, f"%rewind {count}", self.count)
        return time.perf_counter() - start


def _cost(cells: int) -> tuple[list[Row], dict[str, Any]]:
    times: dict[str, float] = {}
    kept = 0.0
    for points in (False, True):
        with temp_workspace() as ws:
            sb = _sandbox(ws, points)
            try:
                c = _Cells(sb)
                c.run(DIRTY_SETUP)
                for _ in range(3):
                    c.run(DIRTY_CELL)
                before = sb.history_bytes
                taken = [c.run(DIRTY_CELL) for _ in range(cells)]
                times["points" if points else "checkpoint"] = median(taken) * 1000
                if points:
                    kept = (sb.history_bytes - before) / max(1, min(cells, 1000) - 1) / DIRTIED_PAGES
                small = [c.run("1+1") for _ in range(cells)]
                times["small points" if points else "small checkpoint"] = median(small) * 1000
            finally:
                sb.close()
    rows = [
        Row("points", "`1+1`, with its point vs today's checkpoint", "ms", times["small points"],
            times["small checkpoint"], note="execute + checkpoint, median; native: without points"),
        Row("points", f"a cell dirtying {DIRTIED_PAGES} pages, with its point vs today's checkpoint", "ms",
            times["points"], times["checkpoint"], note="execute + checkpoint, median; native: without points"),
        Row("points", "bytes a point keeps per dirtied page", "B", kept, 4096.0,
            note="native: the page itself (4096 B)"),
    ]
    return rows, {"ms": times, "bytes_per_page": kept}


def _rewinds(megabytes: int, rounds: int) -> tuple[list[Row], dict[str, Any]]:
    setup = f"import numpy as np\na = np.ones(({megabytes} << 20) // 8)"
    back, forward, native = [], [], []
    for _ in range(rounds):
        with temp_workspace() as ws:
            sb = _sandbox(ws, True)
            try:
                c = _Cells(sb)
                c.run(setup)
                c.run("a[: len(a) // 10] += 1")
                c.run("a[len(a) // 10 : len(a) // 5] += 1")
                back.append(c.rewind(1))
                forward.append(c.rewind(3))
            finally:
                sb.close()
        import numpy as np

        start = time.perf_counter()
        a = np.ones((megabytes << 20) // 8)
        native.append(time.perf_counter() - start)
        del a
    rows = [
        Row("points", f"rewind 2 cells of a {megabytes} MB state", "ms", median(back) * 1000, median(native) * 1000,
            target_max=1000.0 if megabytes >= 500 else None,
            note="native: recomputing that state in-process (np.ones), the least a rerun costs"),
        Row("points", f"rewind forward again, {megabytes} MB state", "ms", median(forward) * 1000),
    ]
    return rows, {"back_ms": [t * 1000 for t in back], "forward_ms": [t * 1000 for t in forward]}


DS_STEPS = [
    "df = pd.DataFrame({'k': rng.integers(0, 50, 50_000), 'v': rng.normal(size=50_000)})",
    "df['w'] = df['v'] * 2 + 1",
    "g = df.groupby('k')['v'].agg(['mean', 'std', 'count'])",
    "df = df[df['v'] > -2].reset_index(drop=True)",
    "m = np.cov(rng.normal(size=(200, 200)))",
    "s = df['w'].describe()",
    "df['bucket'] = pd.cut(df['v'], 10, labels=False)",
    "p = df.pivot_table(index='k', columns='bucket', values='w', aggfunc='mean')",
    "top = df.nlargest(100, 'w')",
    "df = df.drop(columns=['bucket'])",
]


def _notebook(cells: int) -> tuple[list[Row], dict[str, Any]]:
    with temp_workspace() as ws:
        sb = _sandbox(ws, True)
        try:
            c = _Cells(sb)
            c.run("import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(0)")
            for n in range(cells - 1):
                c.run(DS_STEPS[n % len(DS_STEPS)])
            kept = sb.history_bytes
            to_middle = c.rewind(cells // 2)
            to_first = c.rewind(1)
        finally:
            sb.close()
    rows = [
        Row("points", f"bytes kept by a {cells}-cell data-science notebook's points", "MiB", kept / (1 << 20),
            note=f"{kept / cells / (1 << 20):.2f} MiB per cell"),
        Row("points", f"rewind to cell {cells // 2} of {cells}", "ms", to_middle * 1000),
        Row("points", f"rewind to cell 1 of {cells + 1}", "ms", to_first * 1000,
            note="Kishu: sub-second checkouts, up to 9.02x faster than its baselines"),
    ]
    return rows, {"bytes": kept, "to_middle_ms": to_middle * 1000, "to_first_ms": to_first * 1000}


def run_points(cells: int = 50, rounds: int = 3, big: int = 500, notebook: int = 50) -> tuple[list[Row], dict[str, Any]]:
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    log("points: a point's cost per cell")
    more, raw["cost"] = _cost(cells)
    rows += more
    for megabytes in (50, big):
        log(f"points: rewinds of a {megabytes} MB state")
        more, raw[f"rewind_{megabytes}"] = _rewinds(megabytes, rounds)
        rows += more
    log(f"points: a {notebook}-cell data-science notebook")
    more, raw["notebook"] = _notebook(notebook)
    rows += more
    return rows, raw


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    found, _ = run_points(cells=10 if quick else 50, rounds=1 if quick else 3, big=100 if quick else 500,
                          notebook=12 if quick else 50)
    for row in found:
        print(f"{row.name}: {row.guest:.2f} {row.unit}" + (f" (native {row.native:.2f})" if row.native else ""))
