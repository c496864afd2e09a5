"""The guest's /dev: null, zero, random, urandom, stdout and stderr, as programs
expect them (`open(os.devnull, "w")`, dill's import, `print(file=open("/dev/stderr",
"w"))`).

WASI has no devices, and wasi-libc maps a path to a preopen before any host call,
so /dev must be a preopen. It is a read-only folder in the guest's private scratch
holding six empty files; every descriptor opened on one of them is served here, by
the descriptor's origin in the FdLedger (which a rollback and a woken state keep
right), never by wasmtime's file:

- writes to null, zero, random and urandom vanish (all bytes taken, none stored);
- reads of null are empty, of zero zeros, of random and urandom the guest's own
  random source (WASI random_get);
- writes to stdout and stderr are the cell's streams (fd 1 and 2);
- nothing under /dev can be made, removed or renamed, and nothing opened there can
  write to the host: the folder is mounted read-only and a device is opened without
  write rights, so a call this layer does not know fails closed.

None of it touches the disk quota: this layer runs before the quota's shadows and
answers without them. stat() calls a device a character device, as on Linux.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..host.guest_memory import GuestMemory
from ..host.wasi_shim import FORWARDED, Original
from .fd_ledger import FdLedger
from .wasi_abi import (
    EACCES, EBADF, EEXIST, EINVAL, ENOENT, ESPIPE, FDFLAG_NONBLOCK, OFLAG_CREAT, OFLAG_DIRECTORY, OFLAG_EXCL,
    OFLAG_TRUNC, RIGHT_FD_ALLOCATE, RIGHT_FD_FILESTAT_SET_SIZE, RIGHT_FD_WRITE, SUCCESS,
)

GUEST_DEV = "/dev"
SINKS = (b"null", b"zero", b"random", b"urandom")
STREAMS = {b"stdout": 1, b"stderr": 2}
DEVICE_NAMES = (*SINKS, *STREAMS)
FILETYPE_CHARACTER_DEVICE = 2
MAX_IOVS = 1024
# A read of zero or random bytes is filled in pieces of at most this many bytes.
FILL_CHUNK = 1 << 20

# What a device never gets: the rights to change the host's file.
_WRITE_RIGHTS = RIGHT_FD_WRITE | RIGHT_FD_ALLOCATE | RIGHT_FD_FILESTAT_SET_SIZE

Shadow = Callable[..., int]

# The WASI functions this layer stands in front of, and their parameters (i: i32, I:
# i64), as the shim forwards them.
DEVICE_SIGNATURES: dict[str, str] = {name: FORWARDED[name] for name in (
    "path_open", "fd_write", "fd_pwrite", "fd_read", "fd_pread", "fd_allocate", "fd_filestat_set_size",
    "fd_filestat_get", "path_filestat_get", "path_create_directory", "path_unlink_file", "path_remove_directory",
    "path_symlink", "path_link", "path_rename", "path_filestat_set_times",
)}


def make_device_folder(private: Path) -> Path:
    """The host folder mounted read-only at /dev: six empty files in the guest's own
    scratch (gone with it). The folder stays writable by its owner, so the scratch's
    removal can empty it without root: the read-only mount is what guards it."""
    folder = private / "dev"
    folder.mkdir(mode=0o700)
    for name in DEVICE_NAMES:
        (folder / name.decode()).touch(mode=0o444)
    return folder


class DeviceContext(Protocol):
    mem: GuestMemory
    originals: dict[str, Original]
    ledger: FdLedger
    dev_fd: int


def device_shadows(ctx: DeviceContext, below: Callable[[str], Shadow]) -> dict[str, Shadow]:
    """name -> a WASI function that serves /dev's descriptors and hands every other
    call to `below(name)` (the quota's shadow, or whatever the call would otherwise be)."""
    return _Devices(ctx, {name: below(name) for name in DEVICE_SIGNATURES}).shadows()


class _Devices:
    def __init__(self, ctx: DeviceContext, below: dict[str, Shadow]) -> None:
        self.ctx = ctx
        self.below = below

    def kind(self, fd: int) -> bytes | None:
        """The device an open descriptor is, from how it was opened."""
        origin = self.ctx.ledger.origins.get(fd)
        if origin is None or origin.dirfd != self.ctx.dev_fd:
            return None
        return origin.path if origin.path in DEVICE_NAMES else None

    def _name(self, caller: Any, ptr: int, length: int) -> bytes:
        name = self.ctx.mem.read(caller, ptr, length & 0xFFFFFFFF).rstrip(b"/")
        while name.startswith(b"./"):
            name = name[2:]
        return name or b"."

    def shadows(self) -> dict[str, Shadow]:
        table: dict[str, Shadow] = {
            "path_open": self.path_open,
            "fd_write": self.fd_write,
            "fd_pwrite": self.fd_pwrite,
            "fd_read": self.fd_read,
            "fd_pread": self.fd_pread,
            "fd_allocate": self._refused_on_device("fd_allocate"),
            "fd_filestat_set_size": self._refused_on_device("fd_filestat_set_size"),
            "fd_filestat_get": self.fd_filestat_get,
            "path_filestat_get": self.path_filestat_get,
        }
        # Every call that changes a folder, by the positions of the folders it names
        # (wasi_snapshot_preview1's witx): path_symlink's is its third argument,
        # path_link's second its fifth, path_rename's second its fourth.
        for name, folders in (("path_create_directory", (0,)), ("path_unlink_file", (0,)),
                              ("path_remove_directory", (0,)), ("path_symlink", (2,)), ("path_link", (0, 4)),
                              ("path_rename", (0, 3)), ("path_filestat_set_times", (0,))):
            table[name] = self._refused_in_dev(name, folders)
        return table

    # --- opening ----------------------------------------------------------------------

    def path_open(self, caller: Any, dirfd: int, dirflags: int, path: int, path_len: int, oflags: int,
                  rights: int, inheriting: int, fdflags: int, fd_out: int) -> int:
        below = self.below["path_open"]
        if dirfd != self.ctx.dev_fd:
            return below(caller, dirfd, dirflags, path, path_len, oflags, rights, inheriting, fdflags, fd_out)
        name = self._name(caller, path, path_len)
        if name == b".":  # the folder itself (a listing): read-only, as mounted
            return below(caller, dirfd, dirflags, path, path_len, oflags & ~(OFLAG_CREAT | OFLAG_TRUNC),
                         rights & ~_WRITE_RIGHTS, inheriting & ~_WRITE_RIGHTS, fdflags & FDFLAG_NONBLOCK, fd_out)
        if name not in DEVICE_NAMES:
            return EACCES if oflags & OFLAG_CREAT else ENOENT
        if oflags & OFLAG_CREAT and oflags & OFLAG_EXCL:
            return EEXIST
        if oflags & OFLAG_DIRECTORY:
            return below(caller, dirfd, dirflags, path, path_len, OFLAG_DIRECTORY, 0, 0, 0, fd_out)  # ENOTDIR
        # Opened as it is named, so the ledger's origin says which device it is.
        return below(caller, dirfd, dirflags, path, path_len, 0, rights & ~_WRITE_RIGHTS,
                     inheriting & ~_WRITE_RIGHTS, fdflags & FDFLAG_NONBLOCK, fd_out)

    # --- reading and writing ----------------------------------------------------------

    def _iovecs(self, caller: Any, iovs: int, iovs_len: int) -> list[tuple[int, int]] | None:
        iovs_len &= 0xFFFFFFFF
        if iovs_len > MAX_IOVS:
            return None
        raw = self.ctx.mem.read(caller, iovs, 8 * iovs_len)
        return [struct.unpack_from("<II", raw, 8 * k) for k in range(iovs_len)]

    def fd_write(self, caller: Any, fd: int, iovs: int, iovs_len: int, nwritten: int) -> int:
        kind = self.kind(fd)
        if kind is None:
            return self.below["fd_write"](caller, fd, iovs, iovs_len, nwritten)
        if kind in STREAMS:
            return self.below["fd_write"](caller, STREAMS[kind], iovs, iovs_len, nwritten)
        return self._sink(caller, iovs, iovs_len, nwritten)

    def fd_pwrite(self, caller: Any, fd: int, iovs: int, iovs_len: int, offset: int, nwritten: int) -> int:
        kind = self.kind(fd)
        if kind is None:
            return self.below["fd_pwrite"](caller, fd, iovs, iovs_len, offset, nwritten)
        if kind in STREAMS:
            return ESPIPE  # a stream has no offsets
        return self._sink(caller, iovs, iovs_len, nwritten)

    def _sink(self, caller: Any, iovs: int, iovs_len: int, nwritten: int) -> int:
        vecs = self._iovecs(caller, iovs, iovs_len)
        if vecs is None:
            return EINVAL
        total = 0
        for ptr, length in vecs:
            self.ctx.mem.view(caller, ptr, length)  # a bad buffer is EFAULT, as a real write's
            total += length
        self.ctx.mem.set_u32(caller, nwritten, total & 0xFFFFFFFF)
        return SUCCESS

    def fd_read(self, caller: Any, fd: int, iovs: int, iovs_len: int, nread: int) -> int:
        kind = self.kind(fd)
        if kind is None:
            return self.below["fd_read"](caller, fd, iovs, iovs_len, nread)
        return self._fill(caller, kind, iovs, iovs_len, nread)

    def fd_pread(self, caller: Any, fd: int, iovs: int, iovs_len: int, offset: int, nread: int) -> int:
        kind = self.kind(fd)
        if kind is None:
            return self.below["fd_pread"](caller, fd, iovs, iovs_len, offset, nread)
        if kind in STREAMS:
            return ESPIPE
        return self._fill(caller, kind, iovs, iovs_len, nread)

    def _fill(self, caller: Any, kind: bytes, iovs: int, iovs_len: int, nread: int) -> int:
        if kind in STREAMS:
            return EBADF  # the cell's streams are written, not read
        vecs = self._iovecs(caller, iovs, iovs_len)
        if vecs is None:
            return EINVAL
        total = 0
        if kind != b"null":
            for ptr, length in vecs:
                for start in range(0, length, FILL_CHUNK):
                    piece = min(FILL_CHUNK, length - start)
                    if kind == b"zero":
                        self.ctx.mem.view(caller, ptr + start, piece)[:] = bytes(piece)
                    else:
                        err = self.ctx.originals["random_get"](caller, ptr + start, piece)
                        if err:
                            return err  # type: ignore[no-any-return]
                total += length
        self.ctx.mem.set_u32(caller, nread, total & 0xFFFFFFFF)
        return SUCCESS

    # --- what a device is -------------------------------------------------------------

    def fd_filestat_get(self, caller: Any, fd: int, buf: int) -> int:
        err = self.below["fd_filestat_get"](caller, fd, buf)
        if err == SUCCESS and self.kind(fd) is not None:
            self.ctx.mem.write(caller, buf + 16, bytes([FILETYPE_CHARACTER_DEVICE]))
        return err

    def path_filestat_get(self, caller: Any, fd: int, flags: int, path: int, path_len: int, buf: int) -> int:
        err = self.below["path_filestat_get"](caller, fd, flags, path, path_len, buf)
        if err == SUCCESS and fd == self.ctx.dev_fd and self._name(caller, path, path_len) in DEVICE_NAMES:
            self.ctx.mem.write(caller, buf + 16, bytes([FILETYPE_CHARACTER_DEVICE]))
        return err

    def _refused_on_device(self, name: str) -> Shadow:
        below = self.below[name]

        def call(caller: Any, fd: int, *args: int) -> int:
            return EINVAL if self.kind(fd) is not None else below(caller, fd, *args)

        return call

    def _refused_in_dev(self, name: str, folders: tuple[int, ...]) -> Shadow:
        below = self.below[name]
        dev_fd = self.ctx.dev_fd

        def call(caller: Any, *args: int) -> int:
            if any(args[k] == dev_fd for k in folders):
                return EACCES  # nothing is made, removed or renamed under /dev
            return below(caller, *args)

        return call


__all__ = ["DEVICE_NAMES", "DEVICE_SIGNATURES", "GUEST_DEV", "device_shadows", "make_device_folder"]
