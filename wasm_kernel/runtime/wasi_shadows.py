"""Python replacements for a few of the guest's WASI imports.

- fd_write on stdout/stderr: stays on the guest thread and feeds the live stream.
- poll_oneoff for clock waits (time.sleep): sleeps in short slices, so an interrupt
  or deadline stops a sleeping guest within a tick instead of after the sleep.
- fd_readdir: the real call, then the three padding bytes of every entry are
  zeroed (wasmtime 49.0.0, GHSA-96f6-r43r-8c24, copies uninitialised host memory
  into them). wasmtime fails a whole call with ENOENT when an entry it listed is
  gone before it looks at it (another kernel of the notebook, the drive or the host
  removing a file meanwhile): os.listdir failed about one time in six beside a
  folder's churn, where ipykernel's never does. Such a call is made again. wasmtime lists the folder again from its start for every call and
  skips to the cookie, and libc asks for 4 KiB (~150 names) at a time: os.listdir
  of 10,000 names took 30 s. So the whole listing is read once, in large calls into
  a scratch area, and the guest's calls are served from it (ReaddirListings).
- path_open / fd_close: recorded in the FdLedger so a rollback leaves descriptors
  consistent.
- with a notebook folder shown under /app (notebook_overlay.py): every path
  function, fd_readdir and fd_prestat_get, for the union of the workspace and the
  folder.
- every function that grows or shrinks the tree (writes, sizes, names): the disk
  quota's count (disk_quota.py), around whichever of the above it is.
- the descriptors of /dev's devices, and every call naming /dev (guest_devices.py),
  in front of all of the above.

Every other WASI function is wasmtime's own. Nothing here raises into wasmtime:
errors become WASI errnos, because wasmtime-py keeps a host function's exception
in one slot shared by every thread.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any, Protocol

import wasmtime

from ..host.guest_memory import GuestFault, GuestMemory
from ..host.log import get_logger
from ..host.wasi_shim import Original
from .disk_quota import DiskQuota
from .quota_shadows import QUOTA_SIGNATURES, quota_shadows
from .fd_ledger import PATH_KEPT_MAX, FdLedger, OpenOrigin
from .guest_devices import DEVICE_SIGNATURES, device_shadows
from .notebook_overlay import WRITE_OPS, NotebookOverlay
from .output import TurnOutput
from .wasi_abi import (
    CLOCK_MONOTONIC, CLOCK_REALTIME, DIRENT_HEADER, EBADF, EFAULT, EINVAL, EIO, ENOENT, EVENT_SIZE, OFLAG_CREAT,
    OFLAG_EXCL,
    OFLAG_TRUNC, SUBCLOCK_ABSTIME, SUBSCRIPTION_SIZE,
)

log = get_logger("wasm_kernel.runtime")

SLEEP_SLICE = 0.02
# A listing failed for an entry that vanished is tried again: at least a hundred times,
# then for as long as half a second (a thousand times at most).
READDIR_RETRIES = 1000
READDIR_RETRY_S = 0.5


# Guest memory for reading a folder in large calls: the entries, then the count of
# bytes used. Allocated at boot, before the first checkpoint, like the quota's.
READDIR_SCRATCH_BYTES = 256 * 1024


class ReaddirListings:
    """Each open folder's listing, read once from wasmtime (fd -> entries, and the
    index of the entry each cookie stands for). A listing starts again at cookie 0;
    a descriptor's listing goes when it is closed, and all go at each turn's start
    (a rollback may have changed what a descriptor number is)."""

    def __init__(self) -> None:
        self.by_fd: dict[int, tuple[list[bytes], dict[int, int]]] = {}

    def clear(self) -> None:
        self.by_fd.clear()

    def forget(self, fd: int) -> None:
        self.by_fd.pop(fd, None)


class ShadowContext(Protocol):
    mem: GuestMemory
    originals: dict[str, Original]
    ledger: FdLedger
    output: TurnOutput | None
    overlay: NotebookOverlay | None
    quota: DiskQuota
    quota_scratch: int
    readdir_scratch: int  # 0: none (an image built before it had one)
    listings: ReaddirListings
    dev_fd: int  # the /dev preopen (guest_devices.py)

    def stop_requested(self) -> bool: ...

    def soft_interrupt_raised(self, store: Any) -> bool: ...

    def drain_streams(self) -> None:
        """Hand over what the guest's stream ring holds (it was written before this call)."""

    def stop_soon(self) -> None:
        """Make the guest meet its epoch check at its next function entry or loop."""


def _i32() -> wasmtime.ValType:
    return wasmtime.ValType.i32()


def _i64() -> wasmtime.ValType:
    return wasmtime.ValType.i64()


def define_shadows(linker: wasmtime.Linker, ctx: ShadowContext) -> None:
    """Define the shadowing host functions on `linker` (after define_wasi)."""
    i, I = _i32(), _i64()
    table: dict[str, tuple[list[wasmtime.ValType], Callable[..., int]]] = {
        "fd_write": ([i, i, i, i], _fd_write(ctx)),
        "poll_oneoff": ([i, i, i, i], _poll_oneoff(ctx)),
        "fd_readdir": ([i, i, i, I, i], _fd_readdir(ctx)),
        "path_open": ([i, i, i, i, i, I, I, i, i], _path_open(ctx)),
        "fd_close": ([i], _fd_close(ctx)),
    }
    overlay = ctx.overlay
    if overlay is not None:
        table["fd_prestat_get"] = ([i, i], _fd_prestat_get(ctx, overlay))
        table["path_filestat_get"] = ([i, i, i, i, i], _through(ctx, overlay.path_filestat_get))
        table["path_readlink"] = ([i, i, i, i, i, i], _through(ctx, overlay.path_readlink))
        table["path_rename"] = ([i, i, i, i, i, i], _through(ctx, overlay.path_rename))
        params = {
            "path_create_directory": [i, i, i], "path_unlink_file": [i, i, i], "path_remove_directory": [i, i, i],
            "path_symlink": [i, i, i, i, i], "path_link": [i, i, i, i, i, i, i],
            "path_filestat_set_times": [i, i, i, i, I, I, i],
        }
        for name in WRITE_OPS:
            table[name] = (params[name], _through(ctx, overlay.write_op(name)))

    def inner(name: str) -> Callable[..., int]:
        if name in table:
            return table[name][1]
        original = name  # looked up per call: the originals are bound after instantiation
        return lambda caller, *args: ctx.originals[original](caller, *args)

    kinds = {"i": i, "I": I}
    for name, fn in quota_shadows(ctx, inner).items():
        table[name] = ([kinds[c] for c in QUOTA_SIGNATURES[name]], fn)

    def below_devices(name: str) -> Callable[..., int]:
        return table[name][1] if name in table else inner(name)

    # Outermost: a device's calls are answered before the quota would count them.
    for name, fn in device_shadows(ctx, below_devices).items():
        table[name] = ([kinds[c] for c in DEVICE_SIGNATURES[name]], fn)
    linker.allow_shadowing = True
    for name, (params, fn) in table.items():
        linker.define_func(
            "wasi_snapshot_preview1", name, wasmtime.FuncType(params, [i]), _guarded(name, fn, ctx), access_caller=True
        )


def _guarded(name: str, fn: Callable[..., int], ctx: ShadowContext) -> Callable[..., int]:
    def host(caller: Any, *args: int) -> int:
        try:
            return fn(caller, *args)
        except GuestFault:
            return EFAULT
        except (wasmtime.Trap, wasmtime.WasmtimeError):
            return EIO
        except Exception as err:
            # The guest sees EIO; the host's log says which shadow failed and why.
            log.warning("wasi.shadow_failed", function=name, error=repr(err))
            return EIO

    return host


def _fd_write(ctx: ShadowContext) -> Callable[..., int]:
    def fd_write(caller: Any, fd: int, iovs: int, iovs_len: int, nwritten: int) -> int:
        if fd not in (1, 2):
            return ctx.originals["fd_write"](caller, fd, iovs, iovs_len, nwritten)  # type: ignore[no-any-return]
        ctx.drain_streams()  # what the ring holds was written first
        iovs_len &= 0xFFFFFFFF
        if iovs_len > 1024:
            return EINVAL
        # The hot path of print(): one memory window for the whole call.
        window = ctx.mem.window(caller)
        vec = window.read(iovs, 8 * iovs_len)
        chunks = []
        for k in range(iovs_len):
            ptr, length = struct.unpack_from("<II", vec, 8 * k)
            if length:
                chunks.append(window.read(ptr, length))
        data = b"".join(chunks)
        if ctx.output is not None:
            ctx.output.write(fd, data)
        window.set_u32(nwritten, len(data))
        return 0

    return fd_write


def _poll_oneoff(ctx: ShadowContext) -> Callable[..., int]:
    def poll_oneoff(caller: Any, subs: int, events: int, nsubs: int, nevents: int) -> int:
        nsubs &= 0xFFFFFFFF
        if nsubs == 0 or nsubs > 4096:
            return EINVAL
        raw = ctx.mem.read(caller, subs, SUBSCRIPTION_SIZE * nsubs)
        clocks = []
        for k in range(nsubs):
            base = k * SUBSCRIPTION_SIZE
            userdata, tag = struct.unpack_from("<QB", raw, base)
            clock_id, timeout, _precision, flags = struct.unpack_from("<I4xQQH", raw, base + 16)
            if tag != 0 or clock_id not in (CLOCK_REALTIME, CLOCK_MONOTONIC):
                # A wait on a descriptor (stdin): the real call, which returns at once.
                return ctx.originals["poll_oneoff"](caller, subs, events, nsubs, nevents)  # type: ignore[no-any-return]
            clocks.append((userdata, clock_id, timeout, flags))
        ctx.mem.view(caller, events, EVENT_SIZE)  # bounds check before sleeping
        best: tuple[float, int] | None = None
        for userdata, clock_id, timeout, flags in clocks:
            wait_ns = timeout
            if flags & SUBCLOCK_ABSTIME:
                err = ctx.originals["clock_time_get"](caller, clock_id, 1, events)
                if err:
                    return err  # type: ignore[no-any-return]
                now = struct.unpack("<Q", ctx.mem.read(caller, events, 8))[0]
                wait_ns = max(0, timeout - now)
            if best is None or wait_ns < best[0]:
                best = (wait_ns, userdata)
        assert best is not None
        end = time.monotonic() + best[0] / 1e9
        # A soft interrupt raised during the wait ends it: the guest then raises
        # KeyboardInterrupt at the sleep's call, as CPython does on Ctrl-C.
        while not ctx.stop_requested() and not ctx.soft_interrupt_raised(caller):
            left = end - time.monotonic()
            if left <= 0:
                break
            if ctx.output is not None:
                ctx.drain_streams()
                ctx.output.maybe_flush()
            time.sleep(min(left, SLEEP_SLICE))
        if ctx.stop_requested():
            ctx.stop_soon()  # the wait ends early; the epoch check stops the guest
        ctx.mem.write(caller, events, struct.pack("<QHB", best[1], 0, 0).ljust(EVENT_SIZE, b"\0"))
        ctx.mem.set_u32(caller, nevents, 1)
        return 0

    return poll_oneoff


def zero_dirent_padding(buf: memoryview, used: int) -> None:
    """Zero bytes 21-23 of every dirent header within buf[:used]."""
    off = 0
    while off < used:
        for pad in (21, 22, 23):
            if off + pad < used:
                buf[off + pad] = 0
        if off + DIRENT_HEADER > used:
            break
        namlen = struct.unpack_from("<I", buf, off + 16)[0]
        off += DIRENT_HEADER + namlen


def _through(ctx: ShadowContext, fn: Callable[..., int]) -> Callable[..., int]:
    def host(caller: Any, *args: int) -> int:
        return fn(caller, ctx.mem, ctx.originals, args)

    return host


def _fd_prestat_get(ctx: ShadowContext, overlay: NotebookOverlay) -> Callable[..., int]:
    def fd_prestat_get(caller: Any, fd: int, buf: int) -> int:
        # The notebook's folder is the last preopen: libc stops looking at the
        # first EBADF, so it never maps a path to it; only the overlay uses it.
        if fd == overlay.lower_fd:
            return EBADF
        return ctx.originals["fd_prestat_get"](caller, fd, buf)  # type: ignore[no-any-return]

    return fd_prestat_get


def _fd_readdir(ctx: ShadowContext) -> Callable[..., int]:
    def fd_readdir(caller: Any, fd: int, buf: int, buf_len: int, cookie: int, bufused: int) -> int:
        if ctx.overlay is not None:
            merged = ctx.overlay.fd_readdir(caller, ctx.mem, ctx.originals, (fd, buf, buf_len, cookie, bufused))
            if merged is not None:
                return merged
        buf_len &= 0xFFFFFFFF
        if ctx.readdir_scratch:
            listing = ctx.listings.by_fd.get(fd)
            if cookie == 0 or listing is None or cookie not in listing[1]:
                read = _read_listing(ctx, caller, fd, cookie)
                if isinstance(read, int):
                    return read
                listing = read
                if listing is not None:
                    ctx.listings.by_fd[fd] = listing
            if listing is not None:
                entries, index = listing
                out = bytearray()
                for i in range(index[cookie], len(entries)):
                    out += entries[i]
                    if len(out) >= buf_len:
                        break
                data = bytes(out[:buf_len])  # as wasmtime: the last entry may be cut; libc asks again
                ctx.mem.write(caller, buf, data)
                ctx.mem.set_u32(caller, bufused, len(data))
                return 0
        err = _readdir_call(ctx, caller, fd, buf, buf_len, cookie, bufused)
        if err == 0:
            used = min(ctx.mem.u32(caller, bufused), buf_len)
            zero_dirent_padding(ctx.mem.view(caller, buf, used), used)
        return err

    return fd_readdir


def _readdir_call(ctx: ShadowContext, caller: Any, fd: int, buf: int, buf_len: int, cookie: int,
                  bufused: int) -> int:
    """wasmtime's fd_readdir, made again while it fails with ENOENT for an entry that
    vanished under it (READDIR_RETRIES; the folder itself gone fails every time).
    Failures come in runs while a writer churns the folder."""
    give_up = time.monotonic() + READDIR_RETRY_S
    for attempt in range(READDIR_RETRIES):
        err: int = ctx.originals["fd_readdir"](caller, fd, buf, buf_len, cookie, bufused)
        if err != ENOENT or (attempt >= READDIR_RETRIES // 10 and time.monotonic() > give_up):
            return err
    return err


def _read_listing(ctx: ShadowContext, caller: Any, fd: int,
                  cookie: int) -> tuple[list[bytes], dict[int, int]] | int | None:
    """The folder's entries from `cookie` on, in calls of READDIR_SCRATCH_BYTES; an
    errno if the first call fails; None if an entry does not fit the scratch (then
    wasmtime answers the guest itself). Entries keep wasmtime's bytes, padding zeroed."""
    scratch, room = ctx.readdir_scratch, READDIR_SCRATCH_BYTES - 8
    used_at = scratch + room
    entries: list[bytes] = []
    index = {cookie: 0}
    while True:
        err = _readdir_call(ctx, caller, fd, scratch, room, cookie, used_at)
        if err:
            return err
        used = min(ctx.mem.u32(caller, used_at), room)
        data = bytearray(ctx.mem.read(caller, scratch, used))
        off = 0
        while off + DIRENT_HEADER <= used:
            d_next, _, namlen = struct.unpack_from("<QQI", data, off)
            end = off + DIRENT_HEADER + namlen
            if end > used:
                break  # cut at the scratch's end: read again from its cookie
            data[off + 21:off + 24] = b"\0\0\0"
            entries.append(bytes(data[off:end]))
            cookie = d_next
            index[cookie] = len(entries)
            off = end
        if used < room:
            return entries, index  # the folder's end
        if off == 0:
            return None  # an entry longer than the scratch (a name is at most 255 bytes)


def _path_open(ctx: ShadowContext) -> Callable[..., int]:
    def path_open(caller: Any, *args: int) -> int:
        if ctx.overlay is not None:
            err = ctx.overlay.path_open(caller, ctx.mem, ctx.originals, args)
        else:
            err = ctx.originals["path_open"](caller, *args)
        if err == 0:
            dirfd, dirflags, path, path_len, oflags, rights, inheriting, fdflags, _ = args
            origin = None
            if dirfd in ctx.ledger.fixed and path_len <= PATH_KEPT_MAX:
                origin = OpenOrigin(dirfd, dirflags, ctx.mem.read(caller, path, path_len),
                                    oflags & ~(OFLAG_CREAT | OFLAG_TRUNC | OFLAG_EXCL), rights, inheriting, fdflags)
            ctx.ledger.on_open(ctx.mem.u32(caller, args[-1]), origin)
        return err

    return path_open


def _fd_close(ctx: ShadowContext) -> Callable[..., int]:
    def close(caller: Any, fd: int) -> int:
        ctx.listings.forget(fd)
        if ctx.overlay is not None:
            ctx.overlay.forget(fd)
        return ctx.originals["fd_close"](caller, fd)  # type: ignore[no-any-return]

    def fd_close(caller: Any, fd: int) -> int:
        return ctx.ledger.on_close(fd, lambda n: close(caller, n))

    return fd_close
