"""Keeps the host's WASI descriptor table consistent with a rolled-back guest.

Rolling a guest back restores its memory, but WASI descriptors live on the host.
Left alone, a rollback would leak every file the failed cell opened, and a file it
closed would stay "open" in the restored guest while its number is handed to the
next file opened: the stale Python object would then write into the wrong file.

So, during a turn:
- a descriptor opened in this turn and closed again is closed for real at once;
- a descriptor that was open before the turn is *not* closed on the host when the
  guest closes it: the close is deferred until the turn commits, so its number can
  never be reused inside the turn.
At commit the deferred closes happen and every open descriptor's offset is noted;
at rollback the turn's own descriptors are closed and the offsets are put back.
"""

from __future__ import annotations

from collections.abc import Callable

ERRNO_SUCCESS = 0
ERRNO_BADF = 8
STDIO = (0, 1, 2)

Close = Callable[[int], int]
Tell = Callable[[int], "int | None"]
Seek = Callable[[int, int], None]


class FdLedger:
    def __init__(self, fixed: range) -> None:
        # Preopens: open from instantiation on, offsets meaningless.
        self.committed: dict[int, int | None] = {fd: None for fd in fixed}
        self.opened: set[int] = set()
        self.deferred: set[int] = set()

    def on_open(self, fd: int) -> None:
        self.opened.add(fd)

    def on_close(self, fd: int, close: Close) -> int:
        if fd in STDIO:
            return ERRNO_SUCCESS  # stdio stays ours; a guest close must not free fd 1
        if fd in self.opened:
            self.opened.discard(fd)
            return close(fd)
        if fd in self.committed:
            if fd in self.deferred:
                return ERRNO_BADF
            self.deferred.add(fd)
            return ERRNO_SUCCESS
        return close(fd)

    def commit(self, close: Close, tell: Tell) -> None:
        for fd in self.deferred:
            close(fd)
            self.committed.pop(fd, None)
        for fd in self.opened:
            self.committed[fd] = None
        self.deferred.clear()
        self.opened.clear()
        for fd in list(self.committed):
            self.committed[fd] = tell(fd)

    def rollback(self, close: Close, seek: Seek) -> None:
        for fd in self.opened:
            close(fd)
        self.opened.clear()
        self.deferred.clear()
        for fd, offset in self.committed.items():
            if offset is not None:
                seek(fd, offset)

    @property
    def open_count(self) -> int:
        return len(self.committed) + len(self.opened) - len(self.deferred)
