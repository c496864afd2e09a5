"""interrupt() stops a running cell within a second wherever it is, and the
interpreter rolls back to the state before the cell."""

import threading
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox

CELLS = {  # every interrupt rolls back here: interrupt_grace_seconds=None (soft ones: test_interrupt_soft.py)
    "pure_python": "while True:\n    pass",
    "numpy_c_code": "import numpy as np\nm = np.random.rand(1500, 1500)\nwhile True:\n    m = np.linalg.inv(m @ m.T + np.eye(1500))",
    "sleep": "import time\ntime.sleep(60)",
    "input_wait": "input('never answered: ')",
}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_interrupt_stops_the_cell_within_a_second_and_rolls_back(workspace: Path, kind: str) -> None:
    sb = make_sandbox(workspace, interrupt_grace_seconds=None)
    try:
        sb.execute("import numpy\nstate = 'before'")
        fired: list[float] = []
        started = threading.Event()

        def interrupter() -> None:
            started.wait()
            time.sleep(0.7)  # let the cell get deep into its loop or call
            fired.append(time.monotonic())
            assert sb.interrupt()

        never = threading.Event()

        def on_input(prompt: str, password: bool) -> str:
            never.wait(30)
            return "late"

        t = threading.Thread(target=interrupter)
        t.start()
        started.set()
        r = sb.execute("state = 'changed'\n" + CELLS[kind], on_input=on_input)
        stopped = time.monotonic()
        t.join()
        never.set()
        assert r.trap == "interrupted", (r.trap, r.error)
        assert r.rolled_back
        assert stopped - fired[0] < 1.0
        assert "KeyboardInterrupt" in (r.trap_message or "")
        assert sb.execute("print(state)").stdout == "before\n"
    finally:
        sb.close()


def test_interrupt_when_idle_does_nothing_and_the_next_cell_runs(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        assert sb.interrupt() is False
        assert sb.execute("1 + 1").success
    finally:
        sb.close()


def test_close_from_another_thread_stops_a_running_cell(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    results: list[object] = []
    t = threading.Thread(target=lambda: results.append(sb.execute("while True:\n    pass")))
    t.start()
    time.sleep(0.5)
    sb.close()
    t.join(10)
    assert not t.is_alive()  # the loop never ends by itself: close() ended it
    [result] = results  # stopped: by a soft interrupt (KeyboardInterrupt) or the hard way
    assert result.trap == "interrupted" or result.error.ename == "KeyboardInterrupt"  # type: ignore[attr-defined]
