"""CPython's own interrupt words (runtime/signal_words.py): found once per build by a
probe the guest never sees, checked at each boot, and written by the interrupting
thread itself, so a soft interrupt needs no call into the guest and no epoch tick."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from support.sandboxes import make_sandbox

from wasm_kernel.host.artifacts import guest_artifacts
from wasm_kernel.host.cache_dir import cache_root
from wasm_kernel.runtime import signal_words


def _build() -> str:
    return guest_artifacts().snapshot_sha256[:16]


def test_the_probe_finds_the_three_words_and_leaves_no_interrupt_behind(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        words = sb._guest.stops.soft.words
        assert words is not None
        assert words.bit == signal_words.pinned_bit(guest_artifacts().python_version)
        kept = json.loads((cache_root() / "modules" / f"signal-words-{_build()}.json").read_text())
        assert kept == {"tripped": words.tripped, "is_tripped": words.is_tripped,
                        "eval_breaker": words.eval_breaker, "bit": words.bit}
        # The probe raised SIGINT in the guest and put it back: no cell sees it.
        r = sb.execute("total = 0\nfor i in range(200_000):\n    total += i\nprint(total)")
        assert r.success and r.stdout == f"{sum(range(200_000))}\n"


def test_a_found_pattern_needs_two_flags_and_the_pinned_bit() -> None:
    class Window:  # a guest memory of 64 KiB in which a fake "raise" writes some words
        def __init__(self) -> None:
            self.data = bytearray(1 << 16)
            self.size = len(self.data)

        def read(self, at: int, n: int) -> bytes:
            return bytes(self.data[at:at + n])

        def set_u32(self, at: int, value: int) -> None:
            self.data[at:at + 4] = value.to_bytes(4, "little")

    def probe(writes: dict[int, int]) -> tuple[signal_words.SignalWords | None, bytes]:
        w = Window()
        w.set_u32(0x300, 0x100)  # the eval breaker's version bits, kept
        before = bytes(w.data)

        def raise_() -> None:
            for at, value in writes.items():
                w.set_u32(at, value)
        found = signal_words.find(w, raise_, 2)  # type: ignore[arg-type]
        assert bytes(w.data) == before  # every word the probe changed is put back
        return found, before

    found, _ = probe({0x100: 1, 0x200: 1, 0x300: 0x102})
    assert found == signal_words.SignalWords(tripped=0x100, is_tripped=0x200, eval_breaker=0x300, bit=2)
    assert probe({0x100: 1, 0x200: 1})[0] is None  # no eval breaker
    assert probe({0x100: 1, 0x200: 1, 0x300: 0x104})[0] is None  # another bit than the pinned one
    assert probe({0x100: 1, 0x200: 1, 0x300: 0x102, 0x400: 7})[0] is None  # a fourth word


def test_stale_words_from_the_cache_are_dropped_at_boot(workspace: Path, tmp_path: Path) -> None:
    with make_sandbox(workspace) as sb:
        good = sb._guest.stops.soft.words
    assert good is not None
    path = cache_root() / "modules" / f"signal-words-{_build()}.json"
    signal_words._known.clear()
    # Kept words that no longer hold (an address outside memory): not trusted.
    path.write_text(json.dumps({"tripped": good.tripped, "is_tripped": good.is_tripped,
                                "eval_breaker": 1 << 40, "bit": good.bit}))
    try:
        with make_sandbox(tmp_path / "ws2") as sb:
            assert sb._guest.stops.soft.words is None  # the epoch callback raises interrupts instead
            assert sb.execute("print(1)").stdout == "1\n"
        assert not path.exists()  # and the next boot looks for them again
    finally:
        signal_words._known.clear()
    with make_sandbox(tmp_path / "ws3") as sb:
        assert sb._guest.stops.soft.words == good


def test_a_soft_interrupt_is_raised_by_the_interrupting_thread_not_the_epoch_callback(workspace: Path) -> None:
    with make_sandbox(workspace) as sb:
        soft = sb._guest.stops.soft
        assert soft.words is not None
        calls: list[int] = []
        real = soft.raise_fn

        def counted(*args: object) -> object:
            calls.append(1)
            return real(*args)
        soft.raise_fn = counted

        def fire() -> None:
            time.sleep(0.7)
            assert sb.interrupt()
        threading.Thread(target=fire, daemon=True).start()
        r = sb.execute("x = 1\nwhile True:\n    x += 1")
        assert r.trap is None and not r.rolled_back
        assert r.error is not None and r.error.ename == "KeyboardInterrupt"
        assert calls == []  # the guest took CPython's words as written from the other thread
        assert sb.execute("print(x > 1)").stdout == "True\n"
