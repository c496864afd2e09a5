"""A soft interrupt is CPython's own: KeyboardInterrupt raised in the cell at its
next safe point, the cell's work so far kept, as on ipykernel. Only a cell that
does not reach a safe point within the grace (a long call into compiled code) is
stopped the hard way and rolled back, and the result says which happened."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox

# One call into numpy's C code with no safe point inside: about 26 s here (with no fuel
# limit: the default budget ends any cell after ~17 s of such work).
LONG_C_CALL = "import numpy as np\na = np.ones((4500, 4500))\nb = a @ a"


def interrupt_after(sb, delay: float, *, running: bool = True) -> list[float]:  # type: ignore[no-untyped-def]
    """Interrupt `sb` after `delay` s from another thread (a cell must be running then, unless not `running`)."""
    fired: list[float] = []

    def fire() -> None:
        time.sleep(delay)
        fired.append(time.monotonic())
        assert sb.interrupt() or not running

    threading.Thread(target=fire, daemon=True).start()
    return fired


def test_soft_interrupt_keeps_the_cells_work_so_far(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        fired = interrupt_after(sb, 0.7)
        r = sb.execute("x = 1\nwhile True:\n    x += 1")  # never ends by itself: returning is the interrupt's
        assert fired, "the cell ended before it was interrupted"
        assert r.trap is None and not r.rolled_back
        assert r.error is not None and r.error.ename == "KeyboardInterrupt"
        assert sb.execute("print(x > 1)").stdout == "True\n"


@pytest.mark.slow
def test_interrupt_in_a_long_c_call_falls_back_to_rollback_and_says_so(workspace: Path) -> None:
    with make_sandbox(workspace, cpu_seconds=None) as sb:
        sb.execute("state = 'before'")
        fired = interrupt_after(sb, 1.0)
        r = sb.execute("state = 'changed'\n" + LONG_C_CALL)
        assert fired, "the call ended before it was interrupted"
        assert r.trap == "interrupted" and r.rolled_back and r.interrupt_grace_expired
        assert "did not stop within 0.5 s" in (r.trap_message or "") and "rolled back" in (r.trap_message or "")
        assert sb.execute("print(state)").stdout == "before\n"


SLEEP_S = 60  # the cut-short sleep's length


def test_sleep_is_cut_short_and_raises_at_the_call(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        fired = interrupt_after(sb, 0.5)
        r = sb.execute(f"import time\nslept = 'started'\ntime.sleep({SLEEP_S})\nslept = 'finished'")
        assert time.monotonic() - fired[0] < SLEEP_S / 2  # well inside the sleep: it was cut short
        assert r.trap is None and r.error is not None and r.error.ename == "KeyboardInterrupt"
        assert f"----> 3 time.sleep({SLEEP_S})" in re.sub(r"\x1b\[[0-9;]*m", "", "".join(r.error.traceback))
        assert sb.execute("print(slept)").stdout == "started\n"


def test_undo_after_a_soft_interrupt_restores_the_state_before_the_cell(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        sb.execute("x = 'before'")
        interrupt_after(sb, 0.5)
        r = sb.execute("x = 0\nwhile True:\n    x += 1")
        assert r.error is not None and r.error.ename == "KeyboardInterrupt" and not r.rolled_back
        assert sb.undo()  # the interrupted cell is the last one that completed
        assert sb.execute("print(x)").stdout == "before\n"


@pytest.mark.slow
def test_a_cell_that_catches_the_interrupt_goes_on_and_is_not_rolled_back(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        interrupt_after(sb, 0.5)
        code = ("import time\ntry:\n    while True:\n        pass\nexcept KeyboardInterrupt:\n    caught = True\n"
                "time.sleep(1.0)\nafter = 'ran'")  # longer than the grace, after the interrupt was taken
        r = sb.execute(code)
        assert r.success and r.trap is None, (r.trap, r.error)
        assert sb.execute("print(caught, after)").stdout == "True ran\n"


def test_a_sigint_handler_the_notebook_sets_is_called(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        sb.execute("import signal\nseen = []\nsignal.signal(signal.SIGINT, lambda s, f: seen.append(s))")
        interrupt_after(sb, 0.5)
        r = sb.execute("import time\nend = time.monotonic() + 1.5\nwhile not seen and time.monotonic() < end:\n    pass")
        assert r.success and r.trap is None, (r.trap, r.error)
        assert sb.execute("print(seen, signal.getsignal(signal.SIGINT).__name__)").stdout == "[2] <lambda>\n"


def test_interrupt_during_input_raises_keyboard_interrupt_and_keeps_state(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        never = threading.Event()

        def on_input(prompt: str, password: bool) -> str:
            never.wait(30)
            return "late"

        interrupt_after(sb, 0.5)
        r = sb.execute("asked = True\ninput('never answered: ')", on_input=on_input)
        never.set()
        assert r.trap is None and r.error is not None and r.error.ename == "KeyboardInterrupt"
        assert sb.execute("print(asked)").stdout == "True\n"


def test_without_a_grace_every_interrupt_rolls_the_cell_back(workspace: Path) -> None:
    with make_sandbox(workspace, interrupt_grace_seconds=None) as sb:
        sb.execute("x = 1")
        interrupt_after(sb, 0.5)
        r = sb.execute("x = 2\nwhile True:\n    x += 1")
        assert r.trap == "interrupted" and r.rolled_back and not r.interrupt_grace_expired
        assert sb.execute("print(x)").stdout == "1\n"


@pytest.mark.slow
def test_an_interrupt_between_cells_is_not_carried_into_the_next(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        assert sb.interrupt() is False
        for _ in range(3):  # an interrupt landing as a cell ends never leaks into the next one
            interrupt_after(sb, 0.05, running=False)
            sb.execute("sum(range(200_000))")
            assert sb.execute("print('next')").stdout == "next\n"
