"""A session's workspace as the host reads and writes it: the one door.

Every host-side way into a session's files goes through a SessionWorkspace: the
Sandbox drive (one per request), the lab panel's comm, the magics and the seed's
file functions (sessions/file_ops.py). It opens the workspace's folder once, without
following a link, and every operation walks from that descriptor (workspace_fs.py),
so a request that stats, charges, writes and stats again opens it once, not four
times, and a folder swapped for a link under it is never followed.

It holds the session's disk ledger too (host/disk_ledger.py): each of the session's
kernels' guests, and every host writer, counts against that one ledger, charged
before a byte is written. What a write costs is worked out from the path it walks
(the file's growth, each folder it makes), never from a walk of the whole tree.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..host.disk_ledger import DiskLedger
from ..host.safe_fs import open_dir, open_root, tree_usage
from . import workspace_fs as fs
from .layout import PRIVATE_DIR, workspace_path
from .session_ids import validate_session_id
from .workspace_fs import Listing, WorkspaceEntry

Limits = tuple[int | None, int | None]  # (bytes, files and folders); None: no limit
UNLIMITED: Limits = (None, None)

LEDGER_DIR = "ledger"  # <root>/.wasm-kernel/ledger/<uuid>/


class QuotaExceeded(Exception):
    """A host write that would pass the session's disk quota (nothing was written)."""


class SessionWorkspace:
    """One session's workspace folder and ledger. Use it as a context manager (or
    close it): the folder's descriptor is opened on first use and kept until then.
    Each operation works on a duplicate of it, so a close from another thread (a
    kernel restarting while the panel asks) never leaves an operation on a number
    the process has given to another file."""

    def __init__(self, workspace_root: Path, session_id: str) -> None:
        self.workspace_root = Path(workspace_root)
        self.session_id = validate_session_id(session_id)
        self.path = workspace_path(self.workspace_root, self.session_id)
        self.ledger = DiskLedger(self.workspace_root, [PRIVATE_DIR, LEDGER_DIR, self.session_id], self._measure)
        self._fd = -1
        self._opening = threading.Lock()  # a kernel's doors use one from several threads

    def __enter__(self) -> SessionWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._opening:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        self.ledger.close()

    def __del__(self) -> None:  # one a caller dropped without closing
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)

    @contextmanager
    def _folder(self) -> Iterator[int]:
        """The workspace's folder for one operation: a duplicate of the descriptor
        opened (once, without following a link) on first use."""
        with self._opening:
            if self._fd < 0:
                top = open_root(self.workspace_root)
                try:
                    self._fd = open_dir(top, self.session_id, self.session_id)
                except FileNotFoundError:
                    raise FileNotFoundError(errno.ENOENT, f"session {self.session_id} has no workspace under "
                                                          f"{str(self.workspace_root)!r}") from None
                finally:
                    os.close(top)
            fd = os.dup(self._fd)
        try:
            yield fd
        finally:
            os.close(fd)

    def _measure(self) -> tuple[int, int]:
        """The workspace's bytes and names, counted from its folder (no link followed)."""
        try:
            with self._folder() as fd:
                return tree_usage(fd)
        except OSError:
            return 0, 0

    # --- reading ---------------------------------------------------------------------

    def stat(self, relative_path: str) -> WorkspaceEntry | None:
        """What a path is (None if nothing is there); the workspace itself for ''."""
        parts = fs.checked_parts(relative_path)
        with self._folder() as fd:
            return fs.stat_entry(fd, parts)

    def stat_files(self, relative_paths: list[str]) -> dict[str, WorkspaceEntry | None]:
        """Each path's entry, None where it is gone, unsafe, internal or a folder."""
        out: dict[str, WorkspaceEntry | None] = {}
        with self._folder() as fd:
            for rel in relative_paths:
                try:
                    entry = fs.stat_entry(fd, fs.file_parts(rel)[1])
                except (ValueError, OSError):
                    entry = None
                out[rel] = entry if entry is not None and entry.kind != "directory" else None
        return out

    def list_folder(self, relative_path: str, max_entries: int = fs.MAX_FOLDER_ENTRIES) -> Listing:
        """One folder's entries, sorted by name."""
        parts = fs.checked_parts(relative_path)
        with self._folder() as fd:
            return fs.list_folder(fd, parts, max_entries)

    def find(self, pattern: str = "**", *, max_entries: int = fs.LIST_MAX_ENTRIES,
             max_seconds: float = fs.LIST_MAX_SECONDS, folders: bool = False) -> Listing:
        """The files (and folders, if asked) whose paths match a glob (workspace_glob.py), bounded."""
        with self._folder() as fd:
            return fs.find_files(fd, pattern, max_entries, max_seconds, folders)

    def open_file(self, relative_path: str) -> tuple[int, int]:
        """(a read-only descriptor, size) of a regular file; the caller closes it and
        may stream it (a file may be as big as the quota)."""
        shown, parts = fs.file_parts(relative_path)
        with self._folder() as fd:
            return fs.open_file(fd, parts, shown)

    def read(self, relative_path: str, max_bytes: int | None = None) -> tuple[bytes, int]:
        """(the first max_bytes of a regular file, its size): the size comes from the
        open descriptor, so a huge or sparse file costs no more to show than its head."""
        fd, size = self.open_file(relative_path)
        try:
            return fs.read_head(fd, size, max_bytes), size
        finally:
            os.close(fd)

    # --- the ledger -------------------------------------------------------------------

    def charge(self, grow_bytes: int, grow_names: int, max_bytes: int | None, max_names: int | None,
               what: str) -> None:
        """Count a host write before it is made; QuotaExceeded (one line, naming
        `what`) if it would pass the quota, with nothing counted."""
        if not self.ledger.charge(grow_bytes, grow_names, max_bytes, max_names):
            raise QuotaExceeded(f"{what} would pass the session's disk quota")

    def refund(self, bytes_: int, names: int) -> None:
        """Give back what a charge counted and the write did not make."""
        self.ledger.refund(bytes_, names)

    def usage(self) -> tuple[int, int]:
        """(bytes, names) the session's writers have committed."""
        return self.ledger.usage()

    def cost_of_write(self, relative_path: str, length: int, append: bool) -> tuple[tuple[int, int], int]:
        """What a write of `length` bytes at the path would add, as (bytes, names):
        the file's growth, itself if new, and each folder on the way that it would
        make; and the bytes of the file it would replace."""
        parts = fs.file_parts(relative_path)[1]
        with self._folder() as fd:
            return fs.cost_of_write(fd, parts, length, append)

    def cost_of(self, relative_path: str) -> tuple[int, int]:
        """(bytes, names) an entry holds: what deleting it frees."""
        parts = fs.checked_parts(relative_path)
        with self._folder() as fd:
            return fs.cost_of(fd, parts)

    # --- writing, charged first ---------------------------------------------------------

    def write(self, relative_path: str, data: bytes, *, append: bool = False, limits: Limits = UNLIMITED,
              what: str = "", overwrite: bool = True) -> bool:
        """Write `data` to a file (or append it), its missing folders made; charged
        before a byte is written (QuotaExceeded). True if the file existed.

        A whole write goes to a temporary file renamed over the old one, so for a
        moment both are on disk: that peak is what is charged, and the old file's
        bytes and the temporary's name are refunded once it is replaced."""
        shown, parts = fs.file_parts(relative_path)
        data = bytes(data)
        counted = limits != UNLIMITED
        with self._folder() as folder:
            grow, replaced = fs.cost_of_write(folder, parts, len(data), append) if counted else ((0, 0), 0)
            peak = grow if append else (len(data), grow[1] + 1)
            if counted:
                self.charge(*peak, *limits, what or f"writing {shown}")
            try:
                if append:
                    existed = fs.append_file(folder, parts, shown, data)
                else:
                    existed = fs.place_file(folder, parts, shown, overwrite, lambda fd: fs.write_all(fd, data))
            except BaseException:
                if counted:
                    self.refund(*peak)
                raise
        if counted and not append:
            self.refund(replaced, 1)
        return existed

    def upload(self, relative_path: str, data: bytes, *, part: int, limits: Limits = UNLIMITED,
               what: str = "") -> bool:
        """One part of an upload, as JupyterLab's chunked uploads number them: part 1
        starts the file (replacing one that is there), each later part (2, 3, ...,
        and -1 for the last) is appended. True if the file existed before part 1."""
        if isinstance(part, bool) or not isinstance(part, int) or part == 0 or part < -1:
            raise ValueError("an upload's part must be 1, 2, ... or -1 for the last")
        return self.write(relative_path, data, append=part != 1, limits=limits, what=what)

    def mkdir(self, relative_path: str, *, limits: Limits = UNLIMITED, what: str = "") -> None:
        """Make one folder (its parent exists), charged first."""
        parts = fs.checked_parts(relative_path)
        counted = limits != UNLIMITED
        if counted:
            self.charge(0, 1, *limits, what or f"making {'/'.join(parts)}")
        try:
            with self._folder() as fd:
                fs.make_folder(fd, parts)
        except BaseException:
            if counted:
                self.refund(0, 1)
            raise

    def copy_in(self, source_fd: int, size: int, relative_path: str, *, limits: Limits = UNLIMITED,
                what: str = "") -> int:
        """A new file holding the first `size` bytes of an open file, streamed one
        piece at a time, never replacing: charged for all of it before a byte is
        read, with the temporary name it is written under. The bytes copied."""
        shown, parts = fs.file_parts(relative_path)
        counted = limits != UNLIMITED
        if counted:
            self.charge(size, 2, *limits, what or f"writing {shown}")
        fill, copied = fs.copy_into(source_fd, size)
        try:
            with self._folder() as fd:
                fs.place_file(fd, parts, shown, False, fill)
        except BaseException:
            if counted:
                self.refund(size, 2)
            raise
        if counted:
            self.refund(0, 1)
        return copied()

    def rename(self, old_path: str, new_path: str) -> None:
        """Rename an entry inside the workspace; the new name must be free."""
        old, new = fs.checked_parts(old_path), fs.checked_parts(new_path)
        with self._folder() as fd:
            fs.rename_entry(fd, old, new)

    def delete(self, relative_path: str, *, recursive: bool = False, limits: Limits = UNLIMITED) -> None:
        """Delete a file, a link or (recursive) a folder; what it freed goes back to the ledger."""
        shown, parts = fs.file_parts(relative_path)
        with self._folder() as fd:
            freed = fs.cost_of(fd, parts) if limits != UNLIMITED else None
            fs.delete_entry(fd, parts, shown, recursive)
        if freed is not None:
            self.refund(*freed)


def ledger_folder(workspace_root: Path, session_id: str) -> Path:
    """Where a session's ledger lives (removed with the session)."""
    return Path(workspace_root) / PRIVATE_DIR / LEDGER_DIR / validate_session_id(session_id)


__all__ = ["LEDGER_DIR", "UNLIMITED", "Limits", "QuotaExceeded", "SessionWorkspace", "WorkspaceEntry", "ledger_folder"]
