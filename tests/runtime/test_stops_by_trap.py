"""Time metering without epochs: the guest's code checks for nothing, and every stop
(the deadline, the CPU budget, an interrupt past its grace) makes it trap at its next
memory access (host/thread_stop.py), then rolls it back as before."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox
from wasm_kernel.host import thread_stop
from wasm_kernel.host.engine import HARD_STOPS_ENV, config_fingerprint, epoch_free

pytestmark = pytest.mark.skipif(
    thread_stop.unavailable_reason() is not None, reason=f"no stops by trap here: {thread_stop.unavailable_reason()}"
)


def test_time_metering_runs_without_epochs_where_stops_by_trap_are_allowed(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        assert sb.metering == "time"
        assert sb._guest.instance.epochs is False  # type: ignore[attr-defined]
        assert "epoch=0" in config_fingerprint("time")
        assert "epoch=1" in config_fingerprint("fuel")  # fuel metering keeps them
    finally:
        sb.close()


def test_an_operator_can_keep_the_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HARD_STOPS_ENV, "epochs")
    assert not epoch_free("time")
    assert "epoch=1" in config_fingerprint("time")  # its own compiled module


def test_a_c_loop_over_its_cpu_budget_is_stopped_and_rolled_back(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.5)
    try:
        sb.execute("state = 'before'")
        r = sb.execute("state = 'changed'\nsum(range(10**15))")
        assert r.trap == "cpu_time" and r.rolled_back, (r.trap, r.error)
        assert 450 <= r.cpu_ms < 5000
        assert sb.execute("print(state)").stdout == "before\n"
    finally:
        sb.close()


def test_output_is_handed_over_while_a_long_cell_computes(workspace: Path) -> None:
    # No epoch callback drains the guest's stream ring: the ticker's thread does.
    sb = make_sandbox(workspace)
    try:
        arrived: list[float] = []
        start = time.monotonic()
        r = sb.execute(
            "print('first', flush=True)\nimport time\nt = time.perf_counter()\n"
            "while time.perf_counter() - t < 1.5:\n    pass\nprint('last')",
            on_output=lambda name, text: arrived.append(time.monotonic() - start),
        )
        assert r.success and r.stdout == "first\nlast\n"
        assert arrived and arrived[0] < 1.0, arrived  # long before the cell ended
    finally:
        sb.close()


def test_checkpoints_stay_exact_after_a_stop_by_trap(workspace: Path) -> None:
    sb = make_sandbox(workspace, deadline_seconds=1.0)
    try:
        check = "print('marker' in dir() and marker, sum(data), blob.count(0))"
        sb.execute("data = list(range(200_000))\nblob = bytearray(8 << 20)")
        before_marker = sb.execute(check).stdout
        sb.execute("data[::7] = [-1] * len(data[::7])\nmarker = 'kept'")
        with_marker = sb.execute(check).stdout
        sb.execute("pass")  # the last completed cell before the stopped one
        r = sb.execute("data[::3] = [0] * len(data[::3])\nblob[:] = bytes([9]) * len(blob)\nmarker = 'lost'\n"
                       "sum(range(10**15))")
        assert r.trap == "deadline" and r.rolled_back
        # The stopped cell does not count: undo goes back past `pass`, the last completed cell.
        assert sb.undo()
        assert sb.execute(check).stdout == with_marker
        assert with_marker != before_marker
    finally:
        sb.close()


_GROUP_INTERRUPTS = """
import os, signal, sys, threading, time
from pathlib import Path
from wasm_kernel import ExecutionPolicy, create_sandbox

signal.signal(signal.SIGINT, lambda *args: None)  # a Python handler, as a kernel has one
sb = create_sandbox(workspace=Path(sys.argv[1]), policy=ExecutionPolicy(deadline_seconds=0.05))
done = threading.Event()

def interrupts():
    while not done.is_set():
        os.killpg(0, signal.SIGINT)  # the whole process group, as jupyter_client interrupts a kernel
        time.sleep(0.002)

threading.Thread(target=interrupts, daemon=True).start()
traps = [sb.execute("while True:\\n    pass").trap for _ in range(40)]
done.set()
print(traps.count("deadline"), len(traps))
"""


def test_stops_by_trap_hold_while_the_process_group_is_sent_interrupts(tmp_path: Path) -> None:
    # The tracer each stop forks is in the kernel's process group: an interrupt sent to
    # the group broke its waitpid, and three stops failed that way in a row ended the
    # process (SIGKILL, fail closed). Its own session: the interrupts reach no one else.
    proc = subprocess.run([sys.executable, "-c", _GROUP_INTERRUPTS, str(tmp_path / "ws")], capture_output=True,
                          text=True, timeout=600, start_new_session=True)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == ["40", "40"], proc.stdout
