"""The WASI functions that keep a guest's disk quota (disk_quota.DiskQuota), one
class per family of calls: writes, size changes, descriptors, names.

Each shadow asks how much its call would grow the tree (a stat of the descriptor or
the name first, through wasmtime's own functions), fails with ENOSPC when that is
past the quota, before anything is written, and counts what the call did. How
sequential writes stay one cheap call ("at the end" and "unsettled" descriptors) is
in disk_quota.py's docstring; GuestFiles holds the reads every family shares and
the settling of unsettled descriptors.

The guest's memory and wasmtime's functions are bound after instantiation
(ctx.mem, ctx.originals): every shadow reads them per call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Protocol

from ..host.guest_memory import GuestMemory
from .disk_quota import DiskQuota
from .wasi_abi import (
    ENOSPC, FDFLAG_APPEND, FILESTAT_BYTES, FILETYPE_DIRECTORY, FILETYPE_REGULAR, FILETYPE_SYMLINK, OFLAG_CREAT,
    OFLAG_TRUNC, SUCCESS,
)

Shadow = Callable[..., int]
FileStat = tuple[int, int, int]  # filetype, link count, size


class QuotaContext(Protocol):
    mem: GuestMemory
    originals: dict[str, Any]
    quota: DiskQuota
    quota_scratch: int


def charge_of(found: FileStat | None) -> int:
    """The bytes removing this name frees: a file's (if its last name), a link's own."""
    if found is None:
        return 0
    filetype, nlink, size = found
    if filetype == FILETYPE_SYMLINK or (filetype == FILETYPE_REGULAR and nlink <= 1):
        return size
    return 0


class GuestFiles:
    """What the shadows read of the guest's files, into the quota's scratch buffer in
    guest memory, and the exact count of the descriptors written to lazily."""

    def __init__(self, ctx: QuotaContext) -> None:
        self.ctx = ctx

    def filestat(self, caller: Any, fd: int, path_ptr: int | None = None, path_len: int = 0) -> FileStat | None:
        """(filetype, nlink, size) of a descriptor, or of a name in it (links not
        followed); None if there is nothing there."""
        found = self.filestat_ino(caller, fd, path_ptr, path_len)
        return None if found is None else found[:3]

    def filestat_ino(self, caller: Any, fd: int, path_ptr: int | None = None,
                     path_len: int = 0) -> tuple[int, int, int, tuple[int, int]] | None:
        ctx = self.ctx
        buf = ctx.quota_scratch
        if path_ptr is None:
            err = ctx.originals["fd_filestat_get"](caller, fd, buf)
        else:
            err = ctx.originals["path_filestat_get"](caller, fd, 0, path_ptr, path_len, buf)
        if err != SUCCESS:
            return None
        raw = ctx.mem.read(caller, buf, FILESTAT_BYTES)
        dev, ino = struct.unpack_from("<QQ", raw, 0)
        filetype = raw[16]
        nlink, size = struct.unpack_from("<QQ", raw, 24)
        return filetype, nlink, size, (dev, ino)

    def position(self, caller: Any, fd: int) -> int | None:
        """Where a write through `fd` lands: its offset, -1 for append mode (the end)."""
        ctx = self.ctx
        buf = ctx.quota_scratch + FILESTAT_BYTES
        if ctx.originals["fd_fdstat_get"](caller, fd, buf) != SUCCESS:
            return None
        if struct.unpack_from("<H", ctx.mem.read(caller, buf + 2, 2))[0] & FDFLAG_APPEND:
            return -1  # writes go to the end, wherever the position is
        return self.tell(caller, fd)

    def tell(self, caller: Any, fd: int) -> int | None:
        ctx = self.ctx
        buf = ctx.quota_scratch + FILESTAT_BYTES
        if ctx.originals["fd_tell"](caller, fd, buf) != SUCCESS:
            return None
        return int(struct.unpack("<Q", ctx.mem.read(caller, buf, 8))[0])

    def iov_bytes(self, caller: Any, iovs: int, iovs_len: int) -> int:
        raw = self.ctx.mem.read(caller, iovs, 8 * (iovs_len & 0xFFFFFFFF))
        return sum(struct.unpack_from("<I", raw, 8 * k + 4)[0] for k in range(iovs_len & 0xFFFFFFFF))

    def settle(self, caller: Any, drop: bool = False) -> None:
        """Count what the unsettled descriptors really grew the tree by. Two of them
        on one file count its growth once, from the older base (over, never under)."""
        quota = self.ctx.quota
        if drop:
            quota.at_end.clear()
        if not quota.unsettled:
            return
        files: dict[tuple[int, int], tuple[int, int]] = {}  # inode -> (oldest base, size now)
        rebased: dict[int, int] = {}
        for fd, base in quota.unsettled.items():
            found = self.filestat_ino(caller, fd)
            if found is None or found[0] != FILETYPE_REGULAR:
                continue
            _type, _nlink, size, inode = found
            known = files.get(inode)
            files[inode] = (base if known is None else min(base, known[0]), size)
            rebased[fd] = size
        for base, size in files.values():
            quota.add(size - base, 0)
        quota.unsettled = {} if drop else rebased
        quota.unsettled_bytes = 0

    def settle_fd(self, caller: Any, fd: int) -> None:
        quota = self.ctx.quota
        quota.at_end.pop(fd, None)
        if fd in quota.unsettled:
            self.settle(caller)
            quota.unsettled.pop(fd, None)


class _Family:
    """A family of shadows: the guest's quota and files, and the functions they wrap."""

    def __init__(self, ctx: QuotaContext, files: GuestFiles, fns: dict[str, Shadow]) -> None:
        self.ctx, self.files, self.fns = ctx, files, fns


class WriteShadows(_Family):
    """fd_write and fd_pwrite: the bytes a write adds past a file's end."""

    def fd_write(self, caller: Any, fd: int, iovs: int, iovs_len: int, nwritten: int) -> int:
        return self._write_at(self.fns["fd_write"], caller, fd, iovs, iovs_len, None, nwritten, ())

    def fd_pwrite(self, caller: Any, fd: int, iovs: int, iovs_len: int, offset: int, nwritten: int) -> int:
        return self._write_at(self.fns["fd_pwrite"], caller, fd, iovs, iovs_len, offset & (2**64 - 1), nwritten,
                              (offset,))

    def _write_at(self, fn: Shadow, caller: Any, fd: int, iovs: int, iovs_len: int, offset: int | None,
                  nwritten: int, extra: tuple[int, ...]) -> int:
        quota, files, mem = self.ctx.quota, self.files, self.ctx.mem
        if not quota.limited or fd <= 2:
            return fn(caller, fd, iovs, iovs_len, *extra, nwritten)
        length = files.iov_bytes(caller, iovs, iovs_len)
        if offset is None and fd in quota.at_end:
            expected = quota.at_end[fd]
            if expected is None or files.tell(caller, fd) == expected:
                if not quota.bound_allows(length):
                    files.settle(caller)  # the others' bound says no: count them exactly
                if not quota.allows(length, 0):
                    return ENOSPC
                err = fn(caller, fd, iovs, iovs_len, *extra, nwritten)
                if err == SUCCESS:
                    written = mem.u32(caller, nwritten)
                    quota.add(written, 0)
                    if expected is not None:
                        quota.at_end[fd] = expected + written
                return err
            del quota.at_end[fd]  # a seek moved it: this write is checked exactly
        elif offset is None and fd in quota.unsettled:
            at = files.tell(caller, fd)
            if at is None or at > quota.unsettled[fd]:
                files.settle_fd(caller, fd)  # moved past the size it had: count it, check exactly
            elif quota.bound_allows(length):
                err = fn(caller, fd, iovs, iovs_len, *extra, nwritten)
                if err == SUCCESS:
                    quota.unsettled_bytes += mem.u32(caller, nwritten)
                return err
            else:
                files.settle(caller)  # near the quota: count exactly
        found = files.filestat(caller, fd)
        if found is None or found[0] != FILETYPE_REGULAR:
            return fn(caller, fd, iovs, iovs_len, *extra, nwritten)
        size = found[2]
        at = offset if offset is not None else files.position(caller, fd)
        if at is None:
            return fn(caller, fd, iovs, iovs_len, *extra, nwritten)
        start = size if at < 0 else at
        growth = start + length - size
        if growth > 0 and not quota.bound_allows(growth):
            files.settle(caller)  # the bound says no: count exactly, then ask again
        if not quota.allows(growth, 0):
            return ENOSPC
        err = fn(caller, fd, iovs, iovs_len, *extra, nwritten)
        if err == SUCCESS:
            grown = max(0, start + mem.u32(caller, nwritten) - size)
            quota.add(grown, 0)
            if offset is None and (at < 0 or start >= size):  # the position is the size now
                quota.unsettled.pop(fd, None)
                quota.at_end[fd] = None if at < 0 else start + mem.u32(caller, nwritten)
            elif offset is None:  # the position is at most the size: later writes are bounded
                quota.unsettled[fd] = size + grown
            elif grown and quota.at_end.get(fd) is not None:  # a pwrite past the end left the position behind
                del quota.at_end[fd]
                quota.unsettled[fd] = size + grown
        return err


class ResizeShadows(_Family):
    """fd_allocate and fd_filestat_set_size: a sparse file costs its full size."""

    def fd_allocate(self, caller: Any, fd: int, offset: int, length: int) -> int:
        end = (offset & (2**64 - 1)) + (length & (2**64 - 1))
        return self._resize(self.fns["fd_allocate"], caller, fd, lambda size: max(size, end), (offset, length))

    def fd_filestat_set_size(self, caller: Any, fd: int, size: int) -> int:
        return self._resize(self.fns["fd_filestat_set_size"], caller, fd, lambda _old: size & (2**64 - 1), (size,))

    def _resize(self, fn: Shadow, caller: Any, fd: int, new_size: Callable[[int], int], args: tuple[int, ...]) -> int:
        quota = self.ctx.quota
        if not quota.limited:
            return fn(caller, fd, *args)
        self.files.settle(caller, drop=True)  # a file may shrink below a descriptor's position
        found = self.files.filestat(caller, fd)
        if found is None or found[0] != FILETYPE_REGULAR:
            return fn(caller, fd, *args)
        grow = new_size(found[2]) - found[2]
        if not quota.allows(grow, 0):
            return ENOSPC
        err = fn(caller, fd, *args)
        if err == SUCCESS:
            quota.add(grow, 0)
        return err


class DescriptorShadows(_Family):
    """path_open (a new name, an emptied file), fd_close and fd_renumber: where the
    lazily counted descriptors begin and end."""

    def path_open(self, caller: Any, dirfd: int, dirflags: int, path: int, path_len: int, oflags: int, base: int,
                  inheriting: int, fdflags: int, fd_out: int) -> int:
        fn = self.fns["path_open"]
        args = (dirfd, dirflags, path, path_len, oflags, base, inheriting, fdflags, fd_out)
        quota = self.ctx.quota
        if not quota.limited or not oflags & (OFLAG_CREAT | OFLAG_TRUNC):
            return fn(caller, *args)
        if oflags & OFLAG_TRUNC:
            self.files.settle(caller, drop=True)  # it may shrink a file another descriptor writes
        found = self.files.filestat(caller, dirfd, path, path_len)
        if found is None and oflags & OFLAG_CREAT and not quota.allows(0, 1):
            return ENOSPC
        err = fn(caller, *args)
        if err == SUCCESS:
            if found is None:
                quota.add(0, 1)
            elif oflags & OFLAG_TRUNC and found[0] == FILETYPE_REGULAR:
                quota.add(-charge_of(found), 0)
            if found is None or (oflags & OFLAG_TRUNC and found[0] == FILETYPE_REGULAR):
                # A new or emptied file: its position, 0, is its size.
                quota.at_end[self.ctx.mem.u32(caller, fd_out)] = None if fdflags & FDFLAG_APPEND else 0
        return err

    def fd_close(self, caller: Any, fd: int) -> int:
        if self.ctx.quota.limited:
            self.files.settle_fd(caller, fd)
        return self.fns["fd_close"](caller, fd)

    def fd_renumber(self, caller: Any, fd: int, to: int) -> int:
        if self.ctx.quota.limited:
            self.files.settle(caller, drop=True)
        return self.fns["fd_renumber"](caller, fd, to)


class NameShadows(_Family):
    """Folders, links and hard links made, names removed and renamed: each name costs
    one entry, a link its target's text."""

    def creating(self, name: str, own_bytes: Callable[[tuple[int, ...]], int]) -> Shadow:
        """The shadow of a call that makes one name holding own_bytes(its arguments)."""
        fn = self.fns[name]

        def create(caller: Any, *args: int) -> int:
            quota = self.ctx.quota
            if not quota.limited:
                return fn(caller, *args)
            grow = own_bytes(args)
            if not quota.allows(grow, 1):
                return ENOSPC
            err = fn(caller, *args)
            if err == SUCCESS:
                quota.add(grow, 1)
            return err

        return create

    def removing(self, name: str) -> Shadow:
        """The shadow of a call that removes one name (and what only it held)."""
        fn = self.fns[name]

        def remove(caller: Any, fd: int, path: int, path_len: int) -> int:
            if not self.ctx.quota.limited:
                return fn(caller, fd, path, path_len)
            found = self.files.filestat(caller, fd, path, path_len)
            err = fn(caller, fd, path, path_len)
            if err == SUCCESS and found is not None:
                self.ctx.quota.add(-charge_of(found), -1)
            return err

        return remove

    def path_rename(self, caller: Any, fd: int, old: int, old_len: int, new_fd: int, new: int, new_len: int) -> int:
        # Moving a name costs nothing; one that replaces another frees the other.
        fn = self.fns["path_rename"]
        if not self.ctx.quota.limited:
            return fn(caller, fd, old, old_len, new_fd, new, new_len)
        replaced = self.files.filestat(caller, new_fd, new, new_len)
        err = fn(caller, fd, old, old_len, new_fd, new, new_len)
        if err == SUCCESS and replaced is not None and replaced[0] != FILETYPE_DIRECTORY:
            self.ctx.quota.add(-charge_of(replaced), -1)
        return err


def quota_shadows(ctx: QuotaContext, inner: Callable[[str], Shadow]) -> dict[str, Shadow]:
    """name -> a WASI function that keeps the quota around `inner(name)`, the
    function it would otherwise be (wasmtime's, or another shadow)."""
    fns = {name: inner(name) for name in QUOTA_SIGNATURES}
    files = GuestFiles(ctx)
    writes, sizes = WriteShadows(ctx, files, fns), ResizeShadows(ctx, files, fns)
    descriptors, names = DescriptorShadows(ctx, files, fns), NameShadows(ctx, files, fns)
    ctx.quota.settle_all = lambda caller: files.settle(caller, drop=True)
    return {
        "fd_close": descriptors.fd_close,
        "fd_renumber": descriptors.fd_renumber,
        "fd_write": writes.fd_write,
        "fd_pwrite": writes.fd_pwrite,
        "fd_allocate": sizes.fd_allocate,
        "fd_filestat_set_size": sizes.fd_filestat_set_size,
        "path_open": descriptors.path_open,
        "path_create_directory": names.creating("path_create_directory", lambda a: 0),
        # A link's own size is its target's text.
        "path_symlink": names.creating("path_symlink", lambda a: a[1] & 0xFFFFFFFF),
        "path_link": names.creating("path_link", lambda a: 0),
        "path_unlink_file": names.removing("path_unlink_file"),
        "path_remove_directory": names.removing("path_remove_directory"),
        "path_rename": names.path_rename,
    }


# The WASI signatures of the functions quota_shadows keeps (i: i32, I: i64).
QUOTA_SIGNATURES: dict[str, str] = {
    "fd_close": "i",
    "fd_renumber": "ii",
    "fd_write": "iiii",
    "fd_pwrite": "iiiIi",
    "fd_allocate": "iII",
    "fd_filestat_set_size": "iI",
    "path_open": "iiiiiIIii",
    "path_create_directory": "iii",
    "path_symlink": "iiiii",
    "path_link": "iiiiiii",
    "path_unlink_file": "iii",
    "path_remove_directory": "iii",
    "path_rename": "iiiiii",
}

__all__ = ["QUOTA_SIGNATURES", "GuestFiles", "QuotaContext", "Shadow", "charge_of", "quota_shadows"]
