"""A stop that lands while the guest runs code for a host call (its malloc, run from
inside the call to hold the answer) stops the whole turn and rolls it back. It used to
be caught inside the call and answered as a fault: input() raised OSError, the cell went
on with the allocator half-way through, and a later cell crashed on that heap (the stop
storm's library sandbox, which then crashed on every rollback to a checkpoint taken
after it)."""

from __future__ import annotations

import threading
from pathlib import Path

from support.sandboxes import make_sandbox


def test_hard_interrupts_racing_input_answers_never_end_a_cell_as_a_fault(workspace: Path) -> None:
    # Stops by trap (time metering): an interrupt sent as the answer comes may land in
    # the answer's malloc. Each cell is stopped and rolled back; none raises OSError,
    # and the heap stays whole (the last cell runs). On an engine with epochs the
    # swallowed trap was followed by the epoch check's own, so only stops by trap
    # showed it.
    with make_sandbox(workspace, interrupt_grace_seconds=None) as sb:
        sb.execute("import gc\nn = 0")
        outcomes: dict[str, int] = {}
        for i in range(1500):  # without the fix, one in a few hundred fails
            def on_input(prompt: str, password: bool) -> str:
                threading.Thread(target=sb.interrupt, daemon=True).start()
                return "x" * (i * 997 % 50_000)

            r = sb.execute("while True:\n    n += len(input('? ')) > -1", on_input=on_input)
            kind = r.trap or (r.error.ename if r.error else "ok")
            outcomes[kind] = outcomes.get(kind, 0) + 1
            assert r.error is None or r.error.ename == "KeyboardInterrupt", (i, r.error.ename, r.error.evalue)
        assert outcomes.get("interrupted", 0) > 0, outcomes
        assert sb.execute("gc.collect()\nprint(n)").stdout == "0\n"
