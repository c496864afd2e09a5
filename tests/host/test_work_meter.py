"""A first start's progress is measured: a step moves only while its work uses the CPU,
its time left comes from what the same step cost when it last ran on this machine, and
a cache file that says anything else is not believed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wasm_kernel.host.work_meter import DEFAULT_COSTS, CountedWork, WorkMeter, WorkProgress, metered


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def burn(cpu_seconds: float) -> None:
    until = time.process_time() + cpu_seconds
    while time.process_time() < until:
        pass


_MOVES_AND_STANDS = """
import time
from wasm_kernel.host import work_meter
from wasm_kernel.host.work_meter import WorkMeter

def burn(cpu_seconds):
    until = time.process_time() + cpu_seconds
    while time.process_time() < until:
        pass

work_meter._record("test-step", 1.0, 1.0)  # the step cost 1 s of CPU last time
meter = WorkMeter("test-step")
time.sleep(1.2)  # a machine too loaded to give the work any CPU: it stands still
waiting = meter.read()
assert waiting.percent < 10 and waiting.seconds_left is None, waiting
assert waiting.text().endswith("still working")
burn(0.5)
working = meter.read()
assert 30 <= working.percent <= 99, working
assert working.seconds_left is not None and working.seconds_left > 0
assert "left" in working.text()
burn(0.7)  # past the recorded cost: no end is claimed before the work ends
over = meter.read()
assert over.percent == 99 and over.seconds_left is None
done = meter.finish()
assert done.done and done.percent == 100
"""


def test_a_step_moves_while_its_work_uses_the_cpu_and_stands_while_it_waits() -> None:
    # In a process of its own: the meter reads the process's CPU time, which a test
    # runner's other threads (a worker's, a kernel client's left by an earlier test) add to.
    done = subprocess.run([sys.executable, "-c", _MOVES_AND_STANDS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_finished_step_records_its_cost_for_the_next_estimate(own_cache: Path) -> None:
    assert WorkMeter("warm-image").cost == DEFAULT_COSTS["warm-image"][0]  # before it ran here
    metered("warm-image", lambda: burn(0.3), lambda reading: None)
    recorded = WorkMeter("warm-image").cost
    assert 0.25 <= recorded < 1.0, recorded
    assert json.loads((own_cache / "work-costs.json").read_text())["warm-image"][0] == recorded
    assert WorkMeter("warm-image").expected_wall < DEFAULT_COSTS["warm-image"][1]


def test_a_step_that_failed_records_nothing(own_cache: Path) -> None:
    def fails() -> None:
        burn(0.1)
        raise RuntimeError("the work failed")

    seen: list[object] = []
    with pytest.raises(RuntimeError):
        metered("site-bytecode", fails, seen.append)
    assert not (own_cache / "work-costs.json").exists()
    assert seen and not any(getattr(r, "done") for r in seen)


@pytest.mark.parametrize("content", [
    "not json", "[1, 2]", '{"warm-image": "fast"}', '{"warm-image": [1e9, 1]}', '{"warm-image": [-1, 1]}',
    '{"warm-image": [1, 2, 3]}', '{"../escape": [1, 1]}', '{"warm-image": [true, 1]}',
])
def test_a_costs_file_that_is_not_two_sane_numbers_per_step_is_not_believed(own_cache: Path, content: str) -> None:
    own_cache.mkdir(parents=True, exist_ok=True)
    (own_cache / "work-costs.json").write_text(content)
    assert WorkMeter("warm-image").cost == DEFAULT_COSTS["warm-image"][0]
    metered("warm-image", lambda: burn(0.05), lambda reading: None)  # and it is rewritten whole
    assert isinstance(json.loads((own_cache / "work-costs.json").read_text())["warm-image"], list)


def test_counted_work_moves_with_its_items_and_says_the_time_left_at_its_pace() -> None:
    seen: list[WorkProgress] = []
    work = CountedWork(10, seen.append, every=0.0)
    assert seen[-1].percent == 0 and seen[-1].seconds_left is None  # nothing done: no pace yet
    for _ in range(4):
        time.sleep(0.05)
        work.advance()
    assert seen[-1].percent == 40 and seen[-1].seconds_left is not None and seen[-1].seconds_left > 0
    time.sleep(0.3)  # no item done meanwhile: no reading moves
    assert seen[-1].percent == 40
    for _ in range(6):
        work.advance()
    assert seen[-1].percent == 99 and not seen[-1].done  # 100% only when the work says it ended
    work.finish()
    assert seen[-1].done and seen[-1].percent == 100
