"""A notebook cannot make itself uninterruptible. A soft interrupt is raised in the
cell's own code, and the guest tells the host through words in its own memory
whether it took one; so a cell can ignore SIGINT, swallow KeyboardInterrupt or
write those words. Whatever it does, the interrupt the user sends after the first
stops it the hard way (or the grace does), the reply comes, and the notebook goes on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox
from support.security_harness import Target

pytestmark = pytest.mark.slow  # each vector waits out the interrupt's grace

VECTORS = {
    "sigint-ignored": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    "handler-swallows": "import signal\nsignal.signal(signal.SIGINT, lambda s, f: None)\nwhile True:\n    pass",
    "except-and-loop": "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass",
    "window-held-closed": "import _wasm_kernel_guest as g\nwhile True:\n    g._interrupt_words[0] = 0",
    "taken-count-faked": ("import _wasm_kernel_guest as g\nwhile True:\n    try:\n        g._interrupt_words[1] += 1\n"
                          "    except KeyboardInterrupt:\n        pass"),
    # CPython's own interrupt words (runtime/signal_words.py), tripped by the guest
    # itself again and again, each KeyboardInterrupt swallowed: the host's interrupt
    # looks like one more of its own.
    "own-words-tripped": ("import _thread\nwhile True:\n    try:\n        _thread.interrupt_main()\n"
                          "        sum(range(100))\n    except KeyboardInterrupt:\n        pass"),
}


@pytest.mark.parametrize("name", VECTORS)
def test_a_cell_cannot_make_itself_uninterruptible(target: Target, name: str) -> None:
    target.run("survivor = 'still here'")
    kernel = target.kernel
    interrupts: list[float] = []

    def keep_interrupting() -> None:  # as a user would: once, and again while it still runs
        for _ in range(2):
            time.sleep(1.0)
            if done.is_set():
                return
            interrupts.append(time.monotonic())
            kernel.km.interrupt_kernel()

    done = threading.Event()
    threading.Thread(target=keep_interrupting, daemon=True).start()
    try:
        run = target.run(VECTORS[name], timeout=30)
    finally:
        done.set()
    stopped = time.monotonic()
    assert run.reply["content"]["status"] == "error", run.reply["content"]
    # Well inside the run's 30 s timeout: the cell did not outlast the interrupts.
    assert stopped - interrupts[-1] < 20, f"{name}: stopped {stopped - interrupts[-1]:.2f} s after the last interrupt"
    kept = target.run("survivor")
    assert kept.of_type("execute_result")[0]["data"]["text/plain"] == "'still here'"
    target.assert_safe(run)


# The window the soft interrupt waits for is held closed for 0.3 s (the interrupts come
# meanwhile), then the cell swallows every KeyboardInterrupt.
SWALLOWS_AFTER_A_CLOSED_WINDOW = (
    "end = time.time() + 0.3\nwhile True:\n    try:\n        state = 'changed'\n        while time.time() < end:\n"
    "            g._interrupt_words[0] = 0\n        g._interrupt_words[0] = 1\n        while True:\n"
    "            pass\n    except KeyboardInterrupt:\n        pass")


@pytest.mark.parametrize("first", ["raised", "not_raised_yet"])
def test_a_second_interrupt_right_after_the_first_stops_a_cell_that_swallows_it(workspace: Path, first: str) -> None:
    # Found by the stop storm (benchmarks/stop_storm.py): a second interrupt sent while
    # the first was still on its way (raised in the cell and not yet seen taken, or not
    # raised yet: the cell's code was not running) was taken for the first, so once
    # the cell caught and swallowed that one it ran on to its CPU budget (a minute by
    # default). One soft interrupt per turn: the second is hard.
    with make_sandbox(workspace, cpu_seconds=5, interrupt_grace_seconds=2.0) as sb:
        sb.execute("import _wasm_kernel_guest as g, time\nstate = 'before'")

        def twice() -> None:
            time.sleep(0.5 if first == "raised" else 0.1)
            assert sb.interrupt()
            assert sb.interrupt()

        threading.Thread(target=twice, daemon=True).start()
        cell = VECTORS["except-and-loop"] if first == "raised" else SWALLOWS_AFTER_A_CLOSED_WINDOW
        r = sb.execute("state = 'changed'\n" + cell)
        assert r.trap == "interrupted" and r.rolled_back, (r.trap, r.rolled_back)
        assert sb.execute("print(state)").stdout == "before\n"
