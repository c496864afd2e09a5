"""CPython's own interrupt words in the guest's memory, so that any host thread can
raise KeyboardInterrupt in the guest by writing them, as a signal handler does in a
native CPython: no call into the guest and no epoch check needed (issue 27, (a)).

PyErr_SetInterruptEx(SIGINT) writes three words: the SIGINT handler's `tripped`
flag, the module-wide `is_tripped` flag (both set to 1) and the main thread state's
eval-breaker word, in which it sets _PY_SIGNALS_PENDING_BIT. The interpreter
checks the eval breaker at every backward jump and call, and then runs the Python
SIGINT handler (the guest's, which counts the interrupt and raises
KeyboardInterrupt); C code that checks signals (the regex engine, long I/O loops)
sees `is_tripped`.

They are found by calling the function once, on the guest thread between turns, and
seeing what it changed: the pattern (exactly two 0 -> 1 flags and one word gaining
the pinned bit) is pinned per CPython minor version (PINNED). Any other result, or a
guest version not pinned, and soft interrupts go on through the epoch callback as
before. The words are static data, at the same addresses in every instance of one
build: kept per module build in this process and in the cache folder, and checked at
each boot (all three clear, inside memory, aligned).

A guest can write these words itself (it owns its memory): setting them raises
KeyboardInterrupt in its own code; clearing them only stops a soft interrupt from
being taken, and the host's grace then stops the cell the hard way (soft_interrupt.py).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import threading
from collections.abc import Callable
from typing import Any
from dataclasses import asdict, dataclass
from pathlib import Path

from ..host.cache_dir import cache_root
from ..host.guest_memory import GuestFault, MemoryWindow
from ..host.log import get_logger

log = get_logger("wasm_kernel.runtime")

SIGINT = 2  # in the guest's libc, as its signal module has it
# _PY_SIGNALS_PENDING_BIT per CPython minor version whose pattern was checked
# (Include/internal/pycore_ceval.h; 3.15: bit 1, after _PY_GIL_DROP_REQUEST_BIT).
PINNED = {"3.15": 1 << 1}
_CHUNK = 1 << 16


@dataclass(frozen=True)
class SignalWords:
    tripped: int  # Handlers[SIGINT].tripped
    is_tripped: int
    eval_breaker: int  # the main thread state's eval_breaker word
    bit: int  # _PY_SIGNALS_PENDING_BIT

    def valid_in(self, size: int) -> bool:
        addresses = (self.tripped, self.is_tripped, self.eval_breaker)
        return (
            len(set(addresses)) == 3
            and all(isinstance(a, int) and 0 < a and a % 4 == 0 and a + 4 <= size for a in addresses)
            and isinstance(self.bit, int) and self.bit > 0 and self.bit & (self.bit - 1) == 0 and self.bit < 1 << 8
        )

    def clear_in(self, window: MemoryWindow) -> bool:
        """At rest: no interrupt pending in the guest (checked at each boot)."""
        try:
            tripped, is_tripped, breaker = (_u32(window, a) for a in (self.tripped, self.is_tripped, self.eval_breaker))
        except GuestFault:
            return False
        return tripped == 0 and is_tripped == 0 and not breaker & self.bit

    def trip(self, window: MemoryWindow) -> None:
        """Raise SIGINT in the guest from any thread, in the order trip_signal writes:
        the flags first, then the eval breaker's bit (x86 keeps stores in order).
        The guest's own updates of its eval breaker are plain read-modify-writes
        (its build has no threads): one racing with this may drop the bit, which
        SoftInterrupt sets again while the interrupt is not taken (`reassert`)."""
        window.set_u32(self.tripped, 1)
        window.set_u32(self.is_tripped, 1)
        self._set_bit(window)

    def untrip(self, window: MemoryWindow) -> None:
        """Take back a trip the guest has not seen: only while it cannot run (its own
        thread is in a host call), so no update of its eval breaker races with this."""
        try:
            window.set_u32(self.tripped, 0)
            window.set_u32(self.is_tripped, 0)
            window.set_u32(self.eval_breaker, _u32(window, self.eval_breaker) & ~self.bit)
        except GuestFault:
            pass

    def reassert(self, window: MemoryWindow) -> None:
        """The interrupt is still pending (the handler's flag is set) but the bit was
        lost to a racing update: set it again."""
        try:
            if _u32(window, self.tripped) and not _u32(window, self.eval_breaker) & self.bit:
                self._set_bit(window)
        except GuestFault:
            pass

    def _set_bit(self, window: MemoryWindow) -> None:
        window.set_u32(self.eval_breaker, _u32(window, self.eval_breaker) | self.bit)


def _u32(window: MemoryWindow, at: int) -> int:
    return struct.unpack("<I", window.read(at, 4))[0]


def pinned_bit(python_version: str) -> int | None:
    return PINNED.get(".".join(python_version.split(".")[:2]))


def find(window: MemoryWindow, call_raise: Callable[[], None], bit: int) -> SignalWords | None:
    """Call PyErr_SetInterruptEx(SIGINT) (`call_raise`, on the guest thread, the guest
    idle) and read which words it changed; every changed byte is put back, so the
    guest never takes this interrupt. None unless the changes are the pinned pattern."""
    size = window.size
    before = window.read(0, size)
    call_raise()
    after = window.read(0, size)
    changed: list[tuple[int, int, int]] = []
    for start in range(0, size, _CHUNK):
        if before[start:start + _CHUNK] == after[start:start + _CHUNK]:
            continue
        for at in range(start, min(start + _CHUNK, size) - 3, 4):
            if before[at:at + 4] != after[at:at + 4]:
                changed.append((at, *struct.unpack("<II", before[at:at + 4] + after[at:at + 4])))
    for at, old, _ in changed:  # as it was: the probe must leave no interrupt behind
        window.set_u32(at, old)
    flags = [at for at, old, new in changed if old == 0 and new == 1]
    breakers = [at for at, old, new in changed if new == old | bit and old != new and not old & bit]
    if len(changed) != 3 or len(flags) != 2 or len(breakers) != 1:
        return None
    # Handlers[] comes before is_tripped in the runtime's signal state.
    words = SignalWords(tripped=min(flags), is_tripped=max(flags), eval_breaker=breakers[0], bit=bit)
    return words if words.valid_in(size) else None


# --- kept per build ------------------------------------------------------------------

_known: dict[str, SignalWords | None] = {}
_lock = threading.Lock()


def _path(build: str) -> Path:
    return cache_root() / "modules" / f"signal-words-{build}.json"


def known(build: str) -> SignalWords | None | bool:
    """The words of `build` (a module's sha), None if it has none (found not to match),
    False if not looked for yet."""
    with _lock:
        if build in _known:
            return _known[build]
    try:
        data = json.loads(_path(build).read_text())
        words = SignalWords(**{k: int(data[k]) for k in ("tripped", "is_tripped", "eval_breaker", "bit")}) \
            if data is not None else None
    except (OSError, ValueError, TypeError, KeyError):
        return False
    with _lock:
        _known[build] = words
    return words


def remember(build: str, words: SignalWords | None) -> None:
    with _lock:
        _known[build] = words
    path = _path(build)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".signal-words-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(words) if words is not None else None, f)
        os.replace(tmp, path)
    except OSError as err:  # the next process looks again
        log.warning("signal_words.unwritable", error=str(err))


def forget(build: str) -> None:
    """Drop what is known of `build` (its words failed the boot check)."""
    with _lock:
        _known.pop(build, None)
    try:
        _path(build).unlink()
    except OSError:
        pass


__all__ = ["PINNED", "SIGINT", "SignalWords", "find", "forget", "known", "pinned_bit", "remember"]


def for_build(store: Any, window: MemoryWindow, raise_fn: Callable[[Any, int], Any]) -> SignalWords | None:
    """The words of this guest build, for a guest that has just booted in `store`:
    found once per build, by a probe the guest never sees, and checked at every boot
    (a stale record is forgotten). None: this build's are not known or not found."""
    from ..host.artifacts import guest_artifacts

    artifacts = guest_artifacts()
    bit = pinned_bit(artifacts.python_version)
    if bit is None:
        return None
    build = artifacts.snapshot_sha256[:16]
    words = known(build)
    if words is False:
        store.set_epoch_deadline(1 << 20)  # the probe is not a turn: no stop applies to it
        try:
            words = find(window, lambda: raise_fn(store, SIGINT), bit)
        finally:
            store.set_epoch_deadline(1)
        remember(build, words)
        log.info("guest.signal_words", found=words is not None)
    if not isinstance(words, SignalWords):
        return None
    if not (words.valid_in(window.size) and words.clear_in(window)):
        log.warning("guest.signal_words_stale", build=build)
        forget(build)
        return None
    return words
