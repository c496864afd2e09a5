"""Points to go back to: the guest's memory after each cell, kept as the pages each
cell changed.

A guest's checkpoint (memory_checkpoint.py) holds the state after the last cell, and
its undo record the pre-images of the pages that cell overwrote: how to get back to
the state after the cell before. When the next cell's checkpoint starts a new
record, the old one is not thrown away but written here, as the delta that leads
from one point back to the point before it. So every point but the newest carries
the delta from its successor to itself (the second newest's may still be the
checkpoint's live record), and the state after any kept cell is the checkpoint's
buffer with the deltas from the newest down to it applied in turn.

Deltas are files in a private folder of the host (never mounted into a guest):
"<seq>.delta", a header (the ranges, the state's size and globals), the pages back
to back, and an HMAC-SHA256 of all of it with this line's own random key, so a
file changed, swapped for another point's or copied from another session is
refused, never applied. A cell's delta is copied out of the journal (which the next
cell reuses) on the guest's thread and written and authenticated on a writer thread
of its own, so the next cell does not wait for the disk; a rewind waits for it. The operator's limits (max_points, max_bytes) drop the
oldest points first; a delta that cannot be read back breaks the chain there, and
the points past it are dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import mmap
import os
import stat
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .log import get_logger

log = get_logger("wasm_kernel.host")

DELTA_SUFFIX = ".delta"
_MAGIC = b"wasm-kernel-delta 1\n"
_HEADER_MAX = 64 << 20  # a header lists ranges: 16 bytes of JSON per page at most
_SPACE = 4 << 30  # wasm32: no range reaches past it
_MAC_BYTES = 32


class HistoryError(Exception):
    """A delta that cannot be written or read back (its one-line reason)."""


@dataclass
class Point:
    """The state after one kept turn (a cell, or a rewind)."""

    seq: int  # numbers every point of this interpreter line, in order
    label: dict[str, Any]  # what the caller said about it (its execution count, first line...)
    size: int  # the guest memory's size in this state
    globals: list[int]
    # The delta from the next point back to this one: its file's name (None while it
    # is the checkpoint's live record, or for the newest point) and its bytes on disk.
    delta: str | None = None
    delta_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # the caller's own state for this point (descriptors)


@dataclass(frozen=True)
class Delta:
    """A delta read back: the pages to write into the buffer, in `ranges` order."""

    ranges: list[tuple[int, int]]
    data: bytes
    size: int
    globals: list[int]

    def pieces(self) -> Iterator[tuple[int, int, memoryview]]:
        view, at = memoryview(self.data), 0
        for offset, end in self.ranges:
            yield offset, end, view[at:at + end - offset]
            at += end - offset


class MemoryHistory:
    """One interpreter line's points, oldest first. Runs on the guest's thread."""

    def __init__(self, folder: Path, max_points: int, max_bytes: int) -> None:
        self.folder = Path(folder)
        self.max_points = max(1, int(max_points))
        self.max_bytes = max(0, int(max_bytes))
        self.points: list[Point] = []
        self._next_seq = 1
        self.dropped = 0  # points dropped by the limits since the line began
        self.broken: str | None = None  # why older points were lost, once
        self._fd: int | None = None  # the folder, opened once, never through a link
        self._key = os.urandom(32)  # this line's: no file written by anyone else verifies
        self._writer: ThreadPoolExecutor | None = None
        self._pending: dict[str, Future[None]] = {}  # deltas still being written, by name

    def _dir(self) -> int:
        if self._fd is None:
            try:
                os.mkdir(self.folder, 0o700)
            except FileExistsError:
                pass
            except OSError as err:
                raise HistoryError(f"the points' folder cannot be made ({err.strerror})") from None
            try:
                self._fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as err:
                raise HistoryError(f"the points' folder cannot be opened ({err.strerror})") from None
        return self._fd

    # --- the line ------------------------------------------------------------------

    def clear(self) -> None:
        """A new interpreter line: every point and delta goes."""
        self.points = []
        self.dropped = 0
        self.broken = None
        self._remove_all()

    @property
    def bytes_kept(self) -> int:
        return sum(p.delta_bytes for p in self.points)

    def add(self, label: dict[str, Any], size: int, globals_: list[int], extra: dict[str, Any] | None = None) -> Point:
        """A new newest point, whose state is the checkpoint's buffer now."""
        point = Point(self._next_seq, dict(label), size, list(globals_), extra=dict(extra or {}))
        self._next_seq += 1
        self.points.append(point)
        self._enforce()
        return point

    def pop_newest(self) -> None:
        """%undo went back past the newest point (with the live record)."""
        if self.points:
            self.points.pop()

    def find(self, seq: int) -> Point | None:
        return next((p for p in self.points if p.seq == seq), None)

    def path_to(self, seq: int) -> list[Point]:
        """The points whose deltas lead from the newest back to `seq`, newest first
        (the target last); each must have its delta on disk."""
        index = next((i for i, p in enumerate(self.points) if p.seq == seq), None)
        if index is None or index == len(self.points) - 1:
            return []
        return list(reversed(self.points[index:-1]))

    # --- deltas --------------------------------------------------------------------

    def archive(self, ranges: list[tuple[int, int]], data: memoryview, size: int, globals_: list[int],
                provisional: bool = False) -> None:
        """The checkpoint's live record, about to be replaced: the delta from the
        newest point back to the one before it. provisional: the record lives on (a
        state is being saved): written now, and again when it is replaced (queries
        may add pages to it meanwhile)."""
        if len(self.points) < 2:
            return
        target = self.points[-2]
        if target.delta is not None and not target.extra.get("provisional"):
            return  # already written (a rewind archived it first)
        if provisional:
            target.extra["provisional"] = True
        else:
            target.extra.pop("provisional", None)
        try:
            target.delta, target.delta_bytes = self._write(target.seq, ranges, data, size, globals_)
        except HistoryError as err:
            self.break_before(len(self.points) - 1, f"a point could not be kept ({err})")
            return
        target.size, target.globals = size, list(globals_)
        self._enforce()

    def write_for(self, point: Point, ranges: list[tuple[int, int]], data: memoryview, size: int,
                  globals_: list[int]) -> None:
        """A delta written by a rewind: from the state it makes back to `point`."""
        point.delta, point.delta_bytes = self._write(point.seq, ranges, data, size, globals_)
        point.size, point.globals = size, list(globals_)
        try:
            self._settled(point.delta)  # a rewind's way back is on disk before the rewind goes on
        except HistoryError:
            point.delta, point.delta_bytes = None, 0
            raise

    def break_before(self, index: int, reason: str) -> None:
        """The delta into points[index - 1] is lost: every point before `index` goes."""
        if index <= 0:
            return
        for point in self.points[:index]:
            self._remove(point)
        self.points = self.points[index:]
        self.broken = reason
        log.info("history.broken", reason=reason, kept=len(self.points))

    def read(self, point: Point) -> Delta:
        if point.delta is None:
            raise HistoryError(f"the point after cell {point.label.get('count')} has no delta")
        self._settled(point.delta)
        try:
            fd = os.open(point.delta, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir())
        except OSError as err:
            raise HistoryError(f"its delta cannot be opened ({err.strerror})") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != point.delta_bytes:
                raise HistoryError("its delta is not the file that was written")
            with os.fdopen(os.dup(fd), "rb") as f:
                blob = f.read()
        finally:
            os.close(fd)
        if len(blob) < _MAC_BYTES or not hmac.compare_digest(
                self._mac(point.delta, memoryview(blob)[:-_MAC_BYTES]), blob[-_MAC_BYTES:]):
            raise HistoryError("its delta is not the one this interpreter wrote")
        return _parse(blob[:-_MAC_BYTES])

    def _mac(self, name: str, *parts: bytes | memoryview) -> bytes:
        mac = hmac.new(self._key, name.encode() + b"\0", hashlib.sha256)  # bound to its name, too
        for part in parts:
            mac.update(part)
        return mac.digest()

    def _settled(self, name: str | None) -> None:
        """Wait for the delta `name` to be on disk; HistoryError if its write failed."""
        future = self._pending.pop(name, None) if name is not None else None
        if future is not None:
            future.result()

    def _write(self, seq: int, ranges: list[tuple[int, int]], data: memoryview, size: int,
               globals_: list[int]) -> tuple[str, int]:
        header = json.dumps({"ranges": ranges, "size": size, "globals": list(globals_)}).encode()
        name = f"{seq}{DELTA_SUFFIX}"
        folder = self._dir()
        head = _MAGIC + len(header).to_bytes(8, "little") + header
        # The journal is the next cell's: copied here, written off this thread. Into an
        # anonymous mapping, given back whole once written, so copies never grow the heap.
        payload = mmap.mmap(-1, max(1, len(data)))
        payload[:len(data)] = data
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="wk-points")
        self._pending[name] = self._writer.submit(self._write_file, folder, name, head, payload, len(data))
        return name, len(head) + len(data) + _MAC_BYTES

    def _write_file(self, folder: int, name: str, head: bytes, mapped: mmap.mmap, length: int) -> None:
        tmp = f".{name}.tmp"
        payload = memoryview(mapped)[:length]
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=folder)
            try:
                with os.fdopen(os.dup(fd), "wb") as f:
                    f.write(head)
                    f.write(payload)
                    f.write(self._mac(name, head, payload))
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as err:
            raise HistoryError(err.strerror or str(err)) from None
        finally:
            payload.release()
            mapped.close()

    def _enforce(self) -> None:
        while len(self.points) > 1 and (len(self.points) > self.max_points or self.bytes_kept > self.max_bytes):
            self._remove(self.points.pop(0))
            self.dropped += 1

    def _remove(self, point: Point) -> None:
        if point.delta is not None:
            try:
                self._settled(point.delta)  # never unlinked before it is written (the writer would bring it back)
            except HistoryError:
                pass
            try:
                os.unlink(point.delta, dir_fd=self._dir())
            except (OSError, HistoryError):
                pass
            point.delta, point.delta_bytes = None, 0

    def _remove_all(self) -> None:
        for name in list(self._pending):
            try:
                self._settled(name)
            except HistoryError:
                pass
        try:
            folder = self._dir()
            names = os.listdir(folder)
        except (OSError, HistoryError):
            return
        for name in names:
            if name.endswith(DELTA_SUFFIX) or name.endswith(".tmp"):
                try:
                    os.unlink(name, dir_fd=folder)
                except OSError:
                    pass

    # --- kept across a shutdown (runtime/points.py puts it in a saved state) --------

    def set_key(self, key: bytes) -> None:
        """This line's key (derived from the session's state key, so that a saved
        state's points verify again after a resume)."""
        self._key = bytes(key)

    def export(self) -> dict[str, Any]:
        """Every point, its delta on disk and synced, for a saved state's manifest."""
        for name in list(self._pending):
            self._settled(name)
        folder = self._dir()
        for point in self.points:
            if point.delta is not None:
                fd = os.open(point.delta, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        os.fsync(folder)
        return {"next_seq": self._next_seq, "points": [
            {"seq": p.seq, "label": p.label, "size": p.size, "globals": p.globals, "delta": p.delta,
             "delta_bytes": p.delta_bytes, "extra": p.extra} for p in self.points]}

    def restore(self, saved: dict[str, Any]) -> None:
        """The points a saved state kept (its manifest, authenticated with it): taken
        back as they were; their deltas are checked when a rewind reads them."""
        points = []
        for raw in saved.get("points", []):
            delta = raw.get("delta")
            if delta is not None and delta != f"{int(raw['seq'])}{DELTA_SUFFIX}":
                raise HistoryError("a saved point names another file")
            points.append(Point(int(raw["seq"]), dict(raw["label"]), int(raw["size"]), [int(g) for g in raw["globals"]],
                                delta, int(raw.get("delta_bytes", 0)), dict(raw.get("extra", {}))))
        self.points = points
        self._next_seq = max(int(saved.get("next_seq", 1)), max((p.seq for p in points), default=0) + 1)

    def close(self, keep_files: bool = False) -> None:
        """keep_files: the points were saved with a state (a later resume uses them)."""
        if not keep_files:
            self.clear()
        else:
            for name in list(self._pending):
                try:
                    self._settled(name)
                except HistoryError:
                    pass
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _parse(blob: bytes) -> Delta:
    """A delta file's contents, checked: ranges page-aligned, in the wasm32 space, and
    exactly as many bytes as they cover."""
    if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + 8:
        raise HistoryError("its delta is not one of ours")
    at = len(_MAGIC)
    length = int.from_bytes(blob[at:at + 8], "little")
    at += 8
    if length > _HEADER_MAX or at + length > len(blob):
        raise HistoryError("its delta's header is damaged")
    try:
        header = json.loads(blob[at:at + length])
        ranges = [(int(o), int(e)) for o, e in header["ranges"]]
        size, globals_ = int(header["size"]), [int(g) for g in header["globals"]]
    except (ValueError, KeyError, TypeError):
        raise HistoryError("its delta's header is damaged") from None
    data = blob[at + length:]
    if any(not 0 <= o < e <= _SPACE for o, e in ranges) or not 0 < size <= _SPACE:
        raise HistoryError("its delta names memory outside the guest's")
    if sum(e - o for o, e in ranges) != len(data):
        raise HistoryError("its delta's pages are cut short")
    return Delta(ranges, data, size, globals_)


__all__ = ["DELTA_SUFFIX", "Delta", "HistoryError", "MemoryHistory", "Point"]
