"""A session's disk quota: bytes and entries in its workspace and private /tmp.

The guest writes through wasmtime's WASI straight to host files, so the quota is
kept where those calls pass: every WASI function that can grow the tree is
shadowed, asks how much it would grow it (a stat of the descriptor or the name
first), and fails with ENOSPC when that is past the quota, before anything is
written. Growth is what the tree's apparent size grows by, so a sparse file made
with fd_filestat_set_size or fd_allocate costs its full size, and every name
(file, folder, link) costs one entry: a quota on bytes alone would let a cell
fill the host's inode table with empty files.

The shadows themselves, one class per family of calls, are quota_shadows.py; this is
the count they keep.

A session guest's count is its share of the session's disk ledger
(host/disk_ledger.py), which every other writer of the session charges too: its
other kernels, the drive, the magics. Its writes are counted here against the
reservation the ledger granted it, and one that would pass it asks the ledger for
more; a turn's end hands the reservation back. A guest without a ledger (the Python
API's plain workspaces) measures its trees with one walk when it starts and
whenever the host itself changed them (safe_fs.tree_usage). Either way the count
is kept by the shadows between, deletions and truncations included.

Sequential writes cost one cheap call. Each WASI call the shadows make from
Python costs tens of microseconds (and a stat a hop to wasmtime's blocking pool),
and a stat, an fdstat and a tell per write doubled the time of a cell writing a big
file in 64 KiB pieces. So descriptors whose position the shadows know are followed:

- "at the end": a new or emptied file (path_open with O_CREAT or O_TRUNC), an
  append-mode one, or one whose last checked write ended past the old size. The
  position it should be at is known (append: anywhere, writes go to the end); if a
  tell finds it there, the write grows the file by exactly its length, counted as
  it happens.
- "unsettled": one whose last checked write overwrote. While a tell finds its
  position at most the file's size as last counted, a write grows the file by at
  most its length: writes are checked against that bound, and the real growth is
  settled with one stat when the descriptor closes, when the bound would pass the
  quota, and when the turn ends.

A position found elsewhere (a seek) sends that write down the exact path. Anything
that could shrink a file (O_TRUNC, a size change, fd_renumber) settles and forgets
every such descriptor, and a turn's end forgets them all (the host may change
files between turns). Seeks are not shadowed: zipimport and FreeType seek
thousands of times, and a shadowed seek cost a plotting cell 60 %. Another
descriptor on the same file can only make these counts too high, never too low.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..host.disk_ledger import DiskLedger, LedgerSlot, LedgerUnavailable
from ..host.log import get_logger
from ..host.safe_fs import open_root, tree_usage

SCRATCH_BYTES = 128  # a filestat and a file position

log = get_logger("wasm_kernel.disk")


class DiskQuota:
    """The usage and the limits; the limits change per turn (%limits).

    Alone (no ledger), it counts its trees itself. With the session's ledger
    (host/disk_ledger.py) it is one writer of several: writes are counted in
    memory against the reservation the ledger granted (`spent` of `reserved`), and
    one past it commits what was spent and asks the ledger for more, so every
    kernel, the drive and the magics together stay within the quota."""

    def __init__(self, roots: list[Path], ledger: DiskLedger | None = None, own_trees: bool = True) -> None:
        """roots: the workspace, then this writer's own trees (its /tmp). own_trees=False:
        those trees are another writer's (a child's /tmp is its parent's), counted while
        they are written but never given back by this one."""
        self.roots = roots
        self._own_trees = own_trees
        self.max_bytes: int | None = None
        self.max_entries: int | None = None
        self.used_bytes = 0
        self.used_entries = 0
        self.hit = False  # a write was refused since the turn began
        # fd -> the file's size when its growth was last counted; and the bytes
        # written through those fds since (an upper bound on that growth).
        self.unsettled: dict[int, int] = {}
        self.unsettled_bytes = 0
        # fds whose position is their file's size: fd -> where it should be (None: append mode)
        self.at_end: dict[int, int | None] = {}
        # Counts the unsettled growth and forgets those fds (given a store or caller);
        # quota_shadows sets it. The guest calls it when a turn ends.
        self.settle_all: Callable[[Any], None] = lambda _caller: None
        self.slot: LedgerSlot | None = None
        self.spent = [0, 0]  # bytes, entries written since the ledger last saw this writer
        if ledger is not None:
            try:
                self.slot = ledger.join()
            except LedgerUnavailable as err:  # counted alone, as before the ledger
                log.warning("disk.ledger_unavailable", error=str(err)[:300])
        if self.slot is not None:
            # The ledger counts the workspace; this writer's own trees (its /tmp) are
            # its to charge: see charge_own.
            self.used_bytes, self.used_entries = self.slot.committed
        else:
            self.measure()

    def charge_own(self, grow_bytes: int, grow_entries: int) -> None:
        """Count what the host is about to put in this writer's own trees (a warm
        image's /tmp: IPython's profile, matplotlib's font list), in the ledger now,
        before it is written. A sandbox's start is never refused for its own files,
        so this is counted even past the quota."""
        self.add(grow_bytes, grow_entries)
        if self.slot is not None:
            self._sync((0, 0))

    def _own_usage(self) -> tuple[int, int]:
        return _usage(self.roots[1:]) if self._own_trees else (0, 0)

    def measure(self) -> None:
        """Count the trees again, after changes the shadows did not see (the host's).
        With a ledger, the host's writes are in it: this only commits what this writer
        spent and hands its reservation back."""
        if self.slot is not None:
            # Always through the ledger, even with nothing spent: the count to show
            # is what every writer committed since (a panel's upload, the drive's).
            self._sync((0, 0), keep=self.unsettled_bytes if self.max_bytes is not None else 0)
            return
        self.used_bytes, self.used_entries = _usage(self.roots)

    @property
    def limited(self) -> bool:
        return self.max_bytes is not None or self.max_entries is not None

    def set_limits(self, max_bytes: int | None, max_entries: int | None) -> None:
        """The turn's limits. An unlimited quota keeps no count (the shadows step
        aside), so one that becomes limited counts the trees first."""
        was_limited = self.limited
        self.max_bytes, self.max_entries = max_bytes, max_entries
        if self.limited and not was_limited:
            self.measure()

    def bound_allows(self, write_bytes: int) -> bool:
        """Whether a write of this length fits even if every unsettled byte, and
        all of it, grew the tree."""
        if self.max_bytes is None:
            return True
        if self.slot is not None:
            return self.spent[0] + self.unsettled_bytes + write_bytes <= self.slot.reserved[0]
        return self.used_bytes + self.unsettled_bytes + write_bytes <= self.max_bytes

    def allows(self, grow_bytes: int, grow_entries: int) -> bool:
        """Whether growing by this much stays within the quota; a refusal is noted.
        Shrinking, and growing a tree already past a lowered quota by nothing, is
        always allowed."""
        need_bytes = grow_bytes if self.max_bytes is not None and grow_bytes > 0 else 0
        need_entries = grow_entries if self.max_entries is not None and grow_entries > 0 else 0
        if not need_bytes and not need_entries:
            return True
        if self.slot is not None:
            return self._within_reservation(need_bytes, need_entries)
        over_bytes = need_bytes and self.used_bytes + need_bytes > self.max_bytes  # type: ignore[operator]
        over_entries = need_entries and self.used_entries + need_entries > self.max_entries  # type: ignore[operator]
        if over_bytes or over_entries:
            self.hit = True
            return False
        return True

    def _within_reservation(self, need_bytes: int, need_entries: int) -> bool:
        """Within what the ledger reserved for this writer, else commit and ask for more."""
        slot = self.slot
        assert slot is not None
        # Bytes written through unsettled descriptors may have grown files by as much.
        bytes_after = self.spent[0] + self.unsettled_bytes + need_bytes
        if (not need_bytes or bytes_after <= slot.reserved[0]) and \
                (not need_entries or self.spent[1] + need_entries <= slot.reserved[1]):
            return True
        need = (self.unsettled_bytes + need_bytes if self.max_bytes is not None else 0, need_entries)
        ok = self._sync(need, keep=self.unsettled_bytes if self.max_bytes is not None else 0)
        if not ok:
            self.hit = True
        return ok

    def _sync(self, need: tuple[int, int], keep: int = 0) -> bool:
        slot = self.slot
        assert slot is not None
        try:
            ok = slot.sync((self.spent[0], self.spent[1]), need, (self.max_bytes, self.max_entries), keep=keep)
        except OSError as err:  # the ledger went away: refuse rather than write uncounted
            log.warning("disk.ledger_sync_failed", error=str(err)[:300])
            return False
        self.spent = [0, 0]
        self.used_bytes, self.used_entries = slot.committed
        return ok

    def release(self) -> None:
        """Commit what this writer spent and hand its reservation back (a turn's end)."""
        slot = self.slot
        if slot is not None and (self.spent != [0, 0] or slot.reserved != (0, 0)):
            self._sync((0, 0), keep=self.unsettled_bytes if self.max_bytes is not None else 0)

    def room(self) -> int | None:
        """Bytes the quota has left for this writer (None: no limit)."""
        if self.max_bytes is None:
            return None
        if self.slot is not None:
            self.release()
            try:
                room = self.slot.ledger.room(self.max_bytes)
            except OSError:
                return 0
            return room
        return max(0, self.max_bytes - self.used_bytes)

    def add(self, grow_bytes: int, grow_entries: int) -> None:
        self.used_bytes = max(0, self.used_bytes + grow_bytes)
        self.used_entries = max(0, self.used_entries + grow_entries)
        self.spent[0] += grow_bytes
        self.spent[1] += grow_entries

    def close(self, remove_own: Callable[[], None]) -> None:
        """Leave the ledger: what was spent is committed, and this writer's own trees
        (its /tmp), which `remove_own` removes, are given back once they are gone (on
        disk never more than the ledger counts). Never raises but remove_own's errors."""
        slot, self.slot = self.slot, None
        if slot is None:
            remove_own()
            return
        try:
            own = self._own_usage()
        except OSError:
            own = (0, 0)
        try:
            remove_own()
        finally:
            slot.close((self.spent[0] - own[0], self.spent[1] - own[1]))


def tree_usage_of(root: Path) -> tuple[int, int]:
    """(bytes, entries) below a folder, no link followed (0, 0 if it cannot be read)."""
    return _usage([root])


def _usage(roots: list[Path]) -> tuple[int, int]:
    total = entries = 0
    for root in roots:
        try:
            fd = open_root(root)
        except OSError:
            continue
        try:
            size, count = tree_usage(fd)
        finally:
            os.close(fd)
        total += size
        entries += count
    return total, entries
