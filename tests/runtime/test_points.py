"""Every cell a point (runtime/points.py): a rewind puts the interpreter back exactly
as it was just after an earlier cell, what no pickle can (a generator mid-iteration,
an open file, a closure, compiled objects), and is a point itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wasm_kernel import ExecutionPolicy, PythonSandbox, create_sandbox
from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions, PointLimits
from wasm_kernel.runtime.points import PointInfo, RewindRefused


@pytest.fixture(params=["incremental", "full"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "full":  # no dirty-page tracking: the deltas are found page by page
        monkeypatch.setenv("WASM_KERNEL_FULL_CHECKPOINTS", "1")
    return str(request.param)


def _sandbox(tmp_path: Path, policy: ExecutionPolicy | None = None, **limits: int) -> PythonSandbox:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    sb = create_sandbox(workspace=workspace, policy=policy or ExecutionPolicy(),
                        guest_options=GuestOptions(points=PointLimits(tmp_path / "points", **limits)))
    assert isinstance(sb, PythonSandbox)
    return sb


@pytest.fixture
def points_sandbox(tmp_path: Path, mode: str) -> Iterator[PythonSandbox]:
    sb = _sandbox(tmp_path)
    yield sb
    sb.close()


class Cells:
    """Cells numbered as a kernel numbers them, and rewinds by execution count."""

    def __init__(self, sb: PythonSandbox) -> None:
        self.sb = sb
        self.count = 0

    def run(self, code: str) -> str:
        self.count += 1
        r = self.sb.execute(code, cell=CellOptions(execution_count=self.count))
        assert r.success, (r.error, r.trap)
        return r.stdout

    def rewind(self, count: int) -> PointInfo:
        self.count += 1
        target = next(p for p in reversed(self.sb.timeline()) if p.count == count)
        return self.sb.rewind(target.seq, f"%rewind {count}", self.count).target

    def counts(self) -> list[int | None]:
        return [p.count for p in self.sb.timeline()]


def test_a_rewind_puts_back_a_generator_an_array_a_closure_and_an_open_file_exactly(
        points_sandbox: PythonSandbox, tmp_path: Path) -> None:
    (tmp_path / "ws" / "data.txt").write_text("one\ntwo\nthree\nfour\n")
    cells = Cells(points_sandbox)
    cells.run("import numpy as np\n"
              "def counter():\n    n = 0\n    def more():\n        nonlocal n\n        n += 1\n        return n\n    return more\n"
              "tick = counter(); tick()\n"
              "g = (i * i for i in range(100)); next(g)\n"
              "a = np.arange(6.0)\n"
              "f = open('/app/data.txt'); f.readline()")
    cells.run("tick(); tick(); next(g); next(g); a *= 10; f.readline(); f.readline(); x = 'later'")
    cells.run("f.close(); del a")
    assert cells.rewind(1).count == 1
    out = cells.run("print(tick(), next(g), a.tolist(), f.readline().strip(), 'x' in dir())")
    assert out == "2 1 [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] two False\n"


def test_a_dataframe_mutated_in_place_and_a_class_redefined_come_back(points_sandbox: PythonSandbox) -> None:
    cells = Cells(points_sandbox)
    cells.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\n"
              "class Shape:\n    def area(self):\n        return 1\ns = Shape()")
    cells.run("df['a'] *= 100\ndf.drop(index=0, inplace=True)\n"
              "class Shape:\n    def area(self):\n        return 2")
    cells.rewind(1)
    assert cells.run("print(df['a'].tolist(), Shape().area(), type(s) is Shape)") == "[1, 2, 3] 1 True\n"


def test_a_rewind_is_a_point_and_goes_forward_again(points_sandbox: PythonSandbox) -> None:
    cells = Cells(points_sandbox)
    for n in range(1, 4):
        cells.run(f"x = {n}\nlog = globals().get('log', []) + [{n}]")
    cells.rewind(1)  # cell 4
    assert cells.run("print(x, log)") == "1 [1]\n"  # cell 5
    cells.rewind(3)  # cell 6: forward, to where it was
    assert cells.run("print(x, log)") == "3 [1, 2, 3]\n"
    cells.rewind(4)  # back to the first rewind's own point
    assert cells.run("print(x, log)") == "1 [1]\n"
    assert cells.counts() == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_cell_rolled_back_by_a_limit_is_no_point_and_a_rewind_after_it_works(tmp_path: Path) -> None:
    sb = _sandbox(tmp_path, ExecutionPolicy(deadline_seconds=2.0))
    try:
        cells = Cells(sb)
        cells.run("x = 1")
        cells.run("x = 2")
        cells.count += 1
        stopped = sb.execute("x = 3\nwhile True:\n    pass", cell=CellOptions(execution_count=cells.count))
        assert stopped.rolled_back
        assert cells.counts() == [1, 2]
        cells.rewind(1)
        assert cells.run("print(x)") == "1\n"
    finally:
        sb.close()


def test_a_cell_an_interrupt_rolled_back_is_no_point_and_a_rewind_after_it_works(tmp_path: Path) -> None:
    sb = _sandbox(tmp_path, ExecutionPolicy(interrupt_grace_seconds=None))  # every interrupt rolls back
    try:
        cells = Cells(sb)
        cells.run("x = 1")
        cells.run("x = 2")
        cells.count += 1
        threading.Timer(1.0, sb.interrupt).start()
        stopped = sb.execute("x = 3\nwhile True:\n    pass", cell=CellOptions(execution_count=cells.count))
        assert stopped.rolled_back and stopped.trap is not None
        assert cells.counts() == [1, 2]
        assert cells.run("print(x)") == "2\n"
        cells.rewind(1)
        assert cells.run("print(x)") == "1\n"
    finally:
        sb.close()


def test_the_oldest_points_are_dropped_at_max_points_and_max_bytes(tmp_path: Path) -> None:
    sb = _sandbox(tmp_path, max_points=3)
    try:
        cells = Cells(sb)
        for n in range(1, 6):
            cells.run(f"x = {n}")
        assert cells.counts() == [3, 4, 5]
        cells.rewind(3)
        assert cells.run("print(x)") == "3\n"
    finally:
        sb.close()
    small = tmp_path / "small"
    small.mkdir()
    sb = _sandbox(small, max_bytes=1)  # no delta fits: only the newest point is kept
    try:
        cells = Cells(sb)
        for n in range(1, 4):
            cells.run(f"x = {n}")
        assert len(sb.timeline()) <= 2 and sb.timeline()[-1].count == 3
        assert sb.history_bytes <= 1
    finally:
        sb.close()


def test_undo_takes_the_newest_point_with_it_and_a_restart_starts_a_new_line(points_sandbox: PythonSandbox) -> None:
    cells = Cells(points_sandbox)
    for n in range(1, 4):
        cells.run(f"x = {n}")
    assert points_sandbox.undo()
    assert cells.counts() == [1, 2]
    cells.rewind(1)
    assert cells.run("print(x)") == "1\n"
    points_sandbox.restart()
    assert points_sandbox.timeline() == []
    with pytest.raises(RewindRefused):
        points_sandbox.rewind(1, "%rewind 1", 99)


def test_a_damaged_delta_refuses_the_rewind_and_changes_nothing(points_sandbox: PythonSandbox, tmp_path: Path) -> None:
    cells = Cells(points_sandbox)
    for n in range(1, 4):
        cells.run(f"x = {n}")
    first = points_sandbox.timeline()[0]
    delta = tmp_path / "points" / f"{first.seq}.delta"
    deadline = time.monotonic() + 30
    while not delta.exists() and time.monotonic() < deadline:  # written by the points' writer thread
        time.sleep(0.02)
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0xFF
    delta.write_bytes(bytes(data))
    with pytest.raises(RewindRefused, match="not the one this interpreter wrote"):
        points_sandbox.rewind(first.seq, "%rewind 1", 4)
    assert cells.run("print(x)") == "3\n"
    cells.rewind(2)  # the way back to cell 2 does not pass through the damaged delta
    assert cells.run("print(x)") == "2\n"
