"""A session's workspace as the host writes to it: its folder and its disk ledger.

Every writer of a session counts against one ledger (host/disk_ledger.py): each of
its kernels' guests, and the host's own doors, the Sandbox drive, the lab panel's
uploads and the magics, which charge it before they write. This is the object they
go through, so no door keeps a count of its own.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..host.disk_ledger import DiskLedger
from ..host.safe_fs import lstat_at, open_dir, open_root, tree_usage
from .file_ops import (
    append_session_file, copy_session_file, delete_session_path, split_relative_path, write_session_file,
)
from .folder_ops import make_session_folder
from .layout import PRIVATE_DIR, workspace_path
from .session_ids import validate_session_id

Limits = tuple[int | None, int | None]  # (bytes, files and folders); None: no limit

LEDGER_DIR = "ledger"  # <root>/.wasm-kernel/ledger/<uuid>/


class QuotaExceeded(Exception):
    """A host write that would pass the session's disk quota (nothing was written)."""


class SessionWorkspace:
    """One session's workspace folder and ledger, for the host's writes."""

    def __init__(self, workspace_root: Path, session_id: str) -> None:
        self.workspace_root = Path(workspace_root)
        self.session_id = validate_session_id(session_id)
        self.path = workspace_path(self.workspace_root, self.session_id)
        self.ledger = DiskLedger(self.workspace_root, [PRIVATE_DIR, LEDGER_DIR, self.session_id], self._measure)

    def _measure(self) -> tuple[int, int]:
        """The workspace's bytes and names, counted from its folder (no link followed)."""
        try:
            fd = open_root(self.path)
        except OSError:
            return 0, 0
        try:
            return tree_usage(fd)
        finally:
            os.close(fd)

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

    # --- the host's writes, counted first --------------------------------------------

    def write(self, relative_path: str, data: bytes, *, append: bool, limits: Limits, what: str,
              overwrite: bool = True) -> bool:
        """Write `data` to a file (or append it), its missing folders made; charged
        before a byte is written (QuotaExceeded). True if the file existed.

        A whole write goes to a temporary file renamed over the old one, so for a
        moment both are on disk: that peak is what is charged, and the old file's
        bytes and the temporary's name are refunded once it is replaced."""
        counted = limits != (None, None)
        grow, replaced = self.cost_of_write(relative_path, len(data), append) if counted else ((0, 0), 0)
        peak = grow if append else (len(data), grow[1] + 1)
        after = (0, 0) if append else (replaced, 1)
        if counted:
            self.charge(*peak, *limits, what)
        try:
            if append:
                existed = append_session_file(self.session_id, relative_path, data, self.workspace_root)
            else:
                existed = write_session_file(self.session_id, relative_path, data, self.workspace_root,
                                             overwrite=overwrite)
        except BaseException:
            if counted:
                self.refund(*peak)
            raise
        if counted:
            self.refund(*after)
        return existed

    def mkdir(self, relative_path: str, *, limits: Limits, what: str) -> None:
        """Make one folder (its parent exists), charged first."""
        counted = limits != (None, None)
        if counted:
            self.charge(0, 1, *limits, what)
        try:
            make_session_folder(self.session_id, relative_path, self.workspace_root)
        except BaseException:
            if counted:
                self.refund(0, 1)
            raise

    def copy_in(self, source_fd: int, size: int, relative_path: str, *, limits: Limits, what: str) -> None:
        """A new file of the first `size` bytes of an open file, streamed (file_ops'
        copy_session_file): charged for all of it before a byte is read, with the
        temporary name it is written under."""
        counted = limits != (None, None)
        if counted:
            self.charge(size, 2, *limits, what)
        try:
            copy_session_file(self.session_id, source_fd, size, relative_path, self.workspace_root)
        except BaseException:
            if counted:
                self.refund(size, 2)
            raise
        if counted:
            self.refund(0, 1)

    def delete(self, relative_path: str, *, recursive: bool, limits: Limits) -> None:
        """Delete a file, a link or (recursive) a folder; what it freed goes back to the ledger."""
        freed = self.cost_of(relative_path) if limits != (None, None) else None
        delete_session_path(self.session_id, relative_path, self.workspace_root, recursive=recursive)
        if freed is not None:
            self.refund(*freed)

    def cost_of_write(self, relative_path: str, length: int, append: bool) -> tuple[tuple[int, int], int]:
        """What a write of `length` bytes at the path would add, as (bytes, names):
        the file's growth, itself if new, and each folder on the way that it would
        make; and the bytes of the file it would replace."""
        parts = split_relative_path(relative_path)
        if not parts:
            raise ValueError(f"path {relative_path!r} names the workspace itself, not a file in it")
        fd = self._open()
        try:
            for i, name in enumerate(parts[:-1]):
                st = lstat_at(fd, name)
                if st is None:
                    return (length, len(parts) - i), 0  # these folders and the file are all new
                nxt = open_dir(fd, name, "/".join(parts[: i + 1]))
                os.close(fd)
                fd = nxt
            st = lstat_at(fd, parts[-1])
        finally:
            os.close(fd)
        if st is None:
            return (length, 1), 0
        if not stat.S_ISREG(st.st_mode):
            return (length, 0), 0  # refused by the write itself
        return ((length if append else length - st.st_size), 0), st.st_size

    def cost_of(self, relative_path: str) -> tuple[int, int]:
        """(bytes, names) an entry holds: what deleting it frees (no link followed)."""
        parts = split_relative_path(relative_path)
        fd = self._open()
        try:
            for i, name in enumerate(parts[:-1]):
                nxt = open_dir(fd, name, "/".join(parts[: i + 1]))
                os.close(fd)
                fd = nxt
            st = lstat_at(fd, parts[-1]) if parts else None
            if st is None:
                return 0, 0
            if stat.S_ISDIR(st.st_mode):
                inner = open_dir(fd, parts[-1], relative_path)
                try:
                    size, names = tree_usage(inner)
                finally:
                    os.close(inner)
                return size, names + 1
            return (st.st_size if st.st_nlink <= 1 or stat.S_ISLNK(st.st_mode) else 0), 1
        finally:
            os.close(fd)

    def _open(self) -> int:
        top = open_root(self.workspace_root)
        try:
            return open_dir(top, self.session_id, self.session_id)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, f"session {self.session_id} has no workspace") from None
        finally:
            os.close(top)

    def close(self) -> None:
        self.ledger.close()


def ledger_folder(workspace_root: Path, session_id: str) -> Path:
    """Where a session's ledger lives (removed with the session)."""
    return Path(workspace_root) / PRIVATE_DIR / LEDGER_DIR / validate_session_id(session_id)


__all__ = ["LEDGER_DIR", "Limits", "QuotaExceeded", "SessionWorkspace", "ledger_folder"]
