"""The host raises a soft interrupt by writing CPython's own interrupt words in guest
memory (runtime/signal_words.py). The guest owns that memory and can rewrite those
words, or make its interpreter read others; whatever it does, an interrupt still ends
the cell (the hard way once the grace has passed), its changes are rolled back, and
the host writes only inside the guest's memory and only while a turn runs. (A guest
tripping its own words is in test_interrupt_abuse.py.)"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict
from pathlib import Path

from support.sandboxes import make_sandbox

from wasm_kernel.host.guest_memory import MemoryWindow
from wasm_kernel.runtime.signal_words import SignalWords


class Unheeded(SignalWords):
    """The words as a guest that has made its interpreter ignore them sees them (it
    wiped them between the host's write and its next check, or moved its thread
    state elsewhere): whatever the host writes never reaches a check."""

    def trip(self, window: MemoryWindow) -> None:
        pass

    def reassert(self, window: MemoryWindow) -> None:
        pass


def test_a_guest_whose_interpreter_ignores_its_interrupt_words_is_stopped_after_the_grace(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        soft = sb._guest.stops.soft
        words = soft.words
        assert words is not None
        soft.words = Unheeded(**asdict(words))
        sb.execute("x = 'before'")

        def interrupt() -> None:
            time.sleep(0.7)
            assert sb.interrupt()

        threading.Thread(target=interrupt, daemon=True).start()
        r = sb.execute("x = 'changed'\nwhile True:\n    pass")
        assert r.trap == "interrupted" and r.rolled_back and r.interrupt_grace_expired
        assert sb.execute("print(x)").stdout == "before\n"


def test_the_interrupting_thread_writes_nothing_between_turns(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        soft = sb._guest.stops.soft
        assert soft.words is not None
        assert soft._target is None  # no turn: no memory to write (a rollback may swap it)
        assert not sb.interrupt()  # nothing running: nothing asked, nothing written
        assert sb.execute("print('fine')").stdout == "fine\n"  # no KeyboardInterrupt waiting for the next cell
