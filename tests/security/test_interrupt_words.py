"""The host raises a soft interrupt by writing CPython's own interrupt words in guest
memory (runtime/signal_words.py). The guest owns that memory and can rewrite those
words at any moment; whatever it writes, an interrupt still ends the cell (the hard
way once the grace has passed), its changes are rolled back, and the host only ever
writes inside the guest's memory."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from support.sandboxes import make_sandbox


def test_a_guest_that_keeps_clearing_its_interrupt_words_is_stopped_after_the_grace(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        soft = sb._guest._soft
        words = soft.words
        assert words is not None
        sb.execute("x = 'before'")
        done = threading.Event()

        def guest_clears_its_words() -> None:
            # What guest code that can write its own memory would do: keep every
            # interrupt word clear, so the interpreter never sees the host's.
            while not done.is_set():
                target = soft._target
                if target is not None:
                    for at in (words.tripped, words.is_tripped, words.eval_breaker):
                        target.set_u32(at, 0)

        def interrupt() -> None:
            time.sleep(0.7)
            assert sb.interrupt()

        clearer = threading.Thread(target=guest_clears_its_words, daemon=True)
        clearer.start()
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            r = sb.execute("x = 'changed'\nwhile True:\n    pass")
        finally:
            done.set()
            clearer.join()
        assert r.trap == "interrupted" and r.rolled_back and r.interrupt_grace_expired
        assert sb.execute("print(x)").stdout == "before\n"


def test_the_interrupting_thread_writes_nothing_between_turns(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        soft = sb._guest._soft
        assert soft.words is not None
        assert soft._target is None  # no turn: no memory to write (a rollback may swap it)
        assert not sb.interrupt()  # nothing running: nothing asked, nothing written
        assert sb.execute("print('fine')").stdout == "fine\n"  # no KeyboardInterrupt waiting for the next cell
