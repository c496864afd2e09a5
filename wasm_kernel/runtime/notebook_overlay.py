"""The notebook's own folder under /app, read-only: a union of two folders, done in
the guest's WASI imports.

On ipykernel a relative path resolves next to the notebook: `open('data/x.csv')`,
`from helper import f`, `%run script.py`. Here /app is the session workspace, so
the notebook's folder is mounted as a second, read-only preopen that libc never
learns about (fd_prestat_get hides it), and /app shows both:

- the workspace is the upper layer: every lookup tries it first, and every write
  goes there;
- the notebook's folder is the lower layer: a lookup the workspace cannot answer
  (ENOENT) is retried there, read-only;
- a write to a file that only the lower layer has copies it up first (the
  workspace copy is the one written), and a write under a folder that only the
  lower layer has makes that folder in the workspace: the notebook's folder is
  never changed;
- listing a folder that both layers have shows both, workspace entries winning;
- deleting or renaming what only the lower layer has is refused (EROFS): there
  are no whiteouts, so it would come back.

The lower layer shows less than the folder holds: hidden entries (a name starting
with "."), anything deeper than `max_depth` folders, symlinks whose target leaves
the folder or passes a hidden name, and anything that is neither a regular file nor
a folder (a FIFO, socket or device, whose open could block) are invisible. Its
paths are resolved here on the host from a descriptor of the folder, one component
at a time with openat(O_NOFOLLOW), so a folder swapped for a link while a cell runs
is never followed; only the resolved, link-free path is handed to wasmtime, whose
preopen still confines it to the folder, opened non-blocking, and what wasmtime
opened must be the kind of entry resolved here (else it is closed again: ENOENT). The workspace side
is never touched by path on the host except through descriptor-relative, no-follow
primitives (the guest owns it and may plant links).

A copy-up writes a temporary file in the workspace's root and links it into place
only when complete (link(2) never replaces), so a kill -9 never leaves a partial
copy that shadows the notebook's file, and two kernels of one notebook that copy up
the same file at once both end up with one whole copy. Temporary files of processes
that are gone are removed when an overlay starts.
"""

from __future__ import annotations

import os
import secrets
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..host.guest_memory import GuestMemory
from ..host.safe_fs import UnsafePathError, lstat_at, open_dir_path, open_root
from .disk_quota import DiskQuota

# WASI errno values
OK = 0
EBADF = 8
EEXIST = 20
EINVAL = 28
EIO = 29
EISDIR = 31
ENOENT = 44
ENOTDIR = 54
ENOTCAPABLE = 76
EROFS = 69
ENAMETOOLONG = 37
ENOSPC = 51
# path_open
O_CREAT, O_DIRECTORY, O_EXCL, O_TRUNC = 1, 2, 4, 8
FDFLAG_APPEND = 1
FDFLAG_NONBLOCK = 4
RIGHT_FD_WRITE = 1 << 6
RIGHT_FD_ALLOCATE = 1 << 8
RIGHT_FD_FILESTAT_SET_SIZE = 1 << 22
WRITE_RIGHTS = RIGHT_FD_WRITE | RIGHT_FD_ALLOCATE | RIGHT_FD_FILESTAT_SET_SIZE
LOOKUP_SYMLINK_FOLLOW = 1
# dirent
FILETYPE_UNKNOWN, FILETYPE_DIRECTORY, FILETYPE_REGULAR, FILETYPE_SYMLINK = 0, 3, 4, 7
DIRENT = struct.Struct("<QQIB3x")

MAX_PATH_BYTES = 4096
MAX_SYMLINK_HOPS = 40
# A listing is built whole on the host; past this many entries in the workspace's
# folder it is left to wasmtime alone (the notebook's entries are then not shown).
MAX_MERGED_ENTRIES = 100_000
SCRATCH_BYTES = 2 * MAX_PATH_BYTES
FILESTAT_BYTES = 64  # a WASI filestat, at the scratch block's end
PATH_ARG_BYTES = SCRATCH_BYTES - FILESTAT_BYTES
COPY_PREFIX = ".wasm-kernel-copy-"  # a copy-up in progress: <prefix><pid>-<random>
DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# The WASI functions that change the filesystem: where their (dirfd, path, length)
# are, and what they mean for the notebook's folder. "create": make the target's
# folder in the workspace if only the notebook has it; "mkdir": the same, but an
# existing name is EEXIST; "remove": refused (EROFS) for what only the notebook
# has; "touch": copy the notebook's file up first.
WRITE_OPS = {
    "path_create_directory": (0, 1, 2, "mkdir"),
    "path_unlink_file": (0, 1, 2, "remove"),
    "path_remove_directory": (0, 1, 2, "remove"),
    "path_symlink": (2, 3, 4, "create"),
    "path_link": (4, 5, 6, "create"),
    "path_filestat_set_times": (0, 2, 3, "touch"),
}


@dataclass(frozen=True)
class NotebookFolder:
    """A folder to show read-only under /app, and how deep into it."""

    path: Path  # the real path (no symlink in it)
    max_depth: int = 6


def is_hidden(name: str) -> bool:
    return name.startswith(".") and name not in (".", "..")


def join_union(base: str, path: str) -> str | None:
    """`path` relative to the union folder `base`, lexically normalised; None if it
    climbs above the union's root or is absolute."""
    if path.startswith("/"):
        return None
    parts = base.split("/") if base else []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


class NotebookOverlay:
    """The union's state and its WASI functions; used only from the guest's thread."""

    def __init__(self, folder: NotebookFolder, workspace: Path, upper_fd: int, lower_fd: int) -> None:
        self.root = folder.path
        self.max_depth = folder.max_depth
        self.workspace = workspace
        self.upper_fd = upper_fd
        self.lower_fd = lower_fd
        # Guest descriptors of union folders: fd -> (on the lower layer?, union path).
        self.dirs: dict[int, tuple[bool, str]] = {upper_fd: (False, ""), lower_fd: (True, "")}
        self._listings: dict[int, list[bytes]] = {}
        self._scratch: int | None = None  # guest memory for paths we hand to wasmtime
        self.quota: DiskQuota | None = None  # a copy-up is a write to the workspace like any other
        self.out_of_space = False  # the last copy-up was refused by the quota
        # The folder itself, held: every lookup walks from here, so the folder
        # replaced by a link (or moved) later changes nothing the overlay resolves.
        self.root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        sweep_copy_leftovers(workspace)

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    # --- bookkeeping -----------------------------------------------------------

    def set_scratch(self, ptr: int) -> None:
        """A block of SCRATCH_BYTES of guest memory, allocated at boot (so it is in
        every checkpoint) and never handed to the guest."""
        self._scratch = ptr

    def forget(self, fd: int) -> None:
        """A descriptor was really closed (its number may come back for another file)."""
        if fd not in (self.upper_fd, self.lower_fd):
            self.dirs.pop(fd, None)
        self._listings.pop(fd, None)

    # --- the lower layer, resolved on the host -----------------------------------

    def lower(self, upath: str) -> tuple[str, os.stat_result] | None:
        """The notebook folder's entry for union path `upath`: its link-free path
        relative to the folder and its stat, or None if it is missing, hidden, too
        deep, not a regular file or folder, or reached through a link that leaves
        the folder. Walked from the folder's descriptor, never by path."""
        fds: list[int] = []  # the folders walked into, below the root
        try:
            return self._resolve(upath, fds)
        except (OSError, ValueError):
            return None
        finally:
            for fd in fds:
                os.close(fd)

    def _resolve(self, upath: str, fds: list[int]) -> tuple[str, os.stat_result] | None:
        pending = [p for p in upath.split("/") if p]
        resolved: list[str] = []
        hops = 0
        st = os.fstat(self.root_fd)
        while pending:
            name = pending.pop(0)
            if name == ".":
                continue
            if name == "..":
                if not resolved:
                    return None
                resolved.pop()
                if fds:
                    os.close(fds.pop())
                continue
            if is_hidden(name) or len(resolved) >= self.max_depth:
                return None
            here = fds[-1] if fds else self.root_fd
            st = os.stat(name, dir_fd=here, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    return None
                target = os.readlink(name, dir_fd=here)
                if target.startswith("/"):
                    inside = os.path.relpath(target, self.root)
                    if inside == ".." or inside.startswith("../"):
                        return None
                    while fds:
                        os.close(fds.pop())
                    resolved = []
                    target = inside
                pending[:0] = [p for p in target.split("/") if p]
                continue
            if pending and not stat.S_ISDIR(st.st_mode):
                return None
            if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                return None  # a FIFO, socket or device: invisible, and never opened
            resolved.append(name)
            if pending:
                # Into the folder without following a link: one swapped in since the
                # stat above makes this fail, not lead elsewhere.
                fds.append(os.open(name, DIR_OPEN, dir_fd=here))
        return "/".join(resolved), st

    def _lower_listing(self, resolved: str, depth: int) -> list[tuple[str, int, int]]:
        if depth >= self.max_depth:
            return []
        found = []
        try:
            fd = self._open_lower_dir(resolved)
        except OSError:
            return []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if is_hidden(entry.name):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        kind = self.lower(f"{resolved}/{entry.name}" if resolved else entry.name)
                        if kind is None:  # a link out of the folder, or to something hidden
                            continue
                        st = kind[1]
                    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                        continue  # FIFOs, sockets, devices are not shown
                    found.append((entry.name, st.st_ino, _filetype(st.st_mode)))
                    if len(found) >= MAX_MERGED_ENTRIES:
                        break
        except OSError:
            return []
        finally:
            os.close(fd)
        return found

    def _open_lower_dir(self, resolved: str) -> int:
        """A descriptor of the notebook's (link-free) folder `resolved`, walked from
        the root's descriptor without following links."""
        fd = os.dup(self.root_fd)
        try:
            for name in (p for p in resolved.split("/") if p):
                nxt = os.open(name, DIR_OPEN, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    # --- the upper layer, on the host without following links -------------------------

    def _make_upper_dirs(self, parts: list[str]) -> bool:
        """mkdir -p in the workspace, never through a link; False if it cannot."""
        try:
            root = open_root(self.workspace)
            try:
                os.close(open_dir_path(root, parts, create=True))
            finally:
                os.close(root)
            return True
        except (OSError, UnsafePathError):
            return False

    def _copy_up(self, upath: str, resolved: str) -> bool:
        """The notebook's file at `resolved` copied to the workspace at `upath`;
        False if it cannot be (out_of_space says whether the quota refused it).
        Written under a temporary name in the workspace's root and linked into place
        whole, so a crash or a second kernel never sees a partial copy there."""
        self.out_of_space = False
        parts = upath.split("/")
        try:
            src = self._open_lower_file(resolved)
        except OSError:
            return False
        try:
            root = open_root(self.workspace)
        except OSError:
            os.close(src)
            return False
        parent = -1
        tmp = f"{COPY_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        try:
            parent = open_dir_path(root, parts[:-1], create=True)
            st = os.fstat(src)
            if self.quota is not None and not self.quota.allows(st.st_size, 0):
                self.out_of_space = True
                return False
            mode = st.st_mode & 0o777 | 0o200
            dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=root)
            try:
                try:
                    while chunk := os.read(src, 1 << 20):
                        os.write(dst, chunk)
                        if self.quota is not None:
                            self.quota.add(len(chunk), 0)
                finally:
                    os.close(dst)
                try:
                    os.link(tmp, parts[-1], src_dir_fd=root, dst_dir_fd=parent, follow_symlinks=False)
                except FileExistsError:
                    pass  # another writer's whole copy (or the guest's own file) is there: it wins
            finally:
                os.unlink(tmp, dir_fd=root)
            return True
        except (OSError, UnsafePathError):
            return False
        finally:
            os.close(src)
            os.close(root)
            if parent >= 0:
                os.close(parent)

    def _open_lower_file(self, resolved: str) -> int:
        """A read descriptor of the notebook's regular file `resolved`: walked without
        links, opened non-blocking (a FIFO swapped in cannot hang the guest's thread)."""
        folder, _, name = resolved.rpartition("/")
        fd = self._open_lower_dir(folder)
        try:
            src = os.open(name, FILE_OPEN, dir_fd=fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(os.fstat(src).st_mode):
            os.close(src)
            raise OSError("not a regular file")
        os.set_blocking(src, True)
        return src

    def _upper_listing(self, upath: str) -> list[tuple[str, int, int]] | None:
        try:
            root = open_root(self.workspace)
            try:
                fd = open_dir_path(root, [p for p in upath.split("/") if p])
            finally:
                os.close(root)
        except (OSError, UnsafePathError):
            return None
        found = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    found.append((entry.name, st.st_ino, _filetype(st.st_mode)))
                    if len(found) > MAX_MERGED_ENTRIES:
                        return None
        except OSError:
            return None
        finally:
            os.close(fd)
        return found

    # --- guest memory ------------------------------------------------------------

    def _path_arg(self, mem: GuestMemory, caller: Any, path: str) -> tuple[int, int] | None:
        raw = path.encode()
        if self._scratch is None or len(raw) > PATH_ARG_BYTES:
            return None
        mem.write(caller, self._scratch, raw)
        return self._scratch, len(raw)

    # --- WASI functions ------------------------------------------------------------

    def path_open(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
        dirfd, dirflags, path_ptr, path_len, oflags, rights, inheriting, fdflags, fd_out = args
        original = originals["path_open"]
        self.out_of_space = False
        entry = self.dirs.get(dirfd)
        if entry is None:
            return int(original(caller, *args))
        lower_side, base = entry
        path = _read_path(mem, caller, path_ptr, path_len)
        upath = None if path is None else join_union(base, path)
        writing = bool(oflags & (O_CREAT | O_TRUNC | O_EXCL) or rights & WRITE_RIGHTS or fdflags & FDFLAG_APPEND)
        if upath is None:
            return ENOTCAPABLE if lower_side else int(original(caller, *args))
        if lower_side:
            if writing:
                return EROFS  # a descriptor of the notebook's folder itself: read-only
            return self._open_lower(caller, mem, originals, upath, dirflags, oflags, rights, inheriting, fdflags,
                                    fd_out)
        if writing and oflags & O_CREAT:
            # Creating a name only the notebook has: O_EXCL must fail, and a file
            # opened to add to it starts from the notebook's copy, not empty.
            shadowed = self._only_lower(upath)
            if shadowed is not None:
                if oflags & O_EXCL:
                    return EEXIST
                if not stat.S_ISREG(shadowed[1].st_mode):
                    return EISDIR
                if not (oflags & O_TRUNC) and not self._copy_up(upath, shadowed[0]):
                    return ENOSPC if self.out_of_space else EIO
        err = int(original(caller, *args))
        if err == OK:
            self._track(mem, caller, fd_out, oflags, False, upath)
            return OK
        if err != ENOENT:
            return err
        found = self.lower(upath)
        if not writing:
            if found is None:
                return err
            return self._open_lower(caller, mem, originals, upath, dirflags, oflags, rights, inheriting, fdflags,
                                    fd_out)
        if found is not None and stat.S_ISREG(found[1].st_mode):
            ready = self._make_upper_dirs(upath.split("/")[:-1]) if oflags & O_TRUNC else self._copy_up(upath, found[0])
        elif found is None:
            ready = self._parent_made(upath)
        else:
            return err
        if not ready:
            return ENOSPC if self.out_of_space else err
        err = int(original(caller, *args))
        if err == OK:
            self._track(mem, caller, fd_out, oflags, False, upath)
        return err

    def _only_lower(self, upath: str) -> tuple[str, os.stat_result] | None:
        """The notebook's entry at upath when the workspace has none there."""
        found = self.lower(upath) if upath else None
        if found is None or self._upper_exists(upath):
            return None
        return found

    def _open_lower(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], upath: str, dirflags: int,
                    oflags: int, rights: int, inheriting: int, fdflags: int, fd_out: int) -> int:
        original = originals["path_open"]
        found = self.lower(upath)
        if found is None:
            return ENOENT
        arg = self._path_arg(mem, caller, found[0] or ".")
        if arg is None:
            return ENAMETOOLONG
        # The path is link-free: nothing is followed in the notebook's folder by
        # wasmtime, and the open is non-blocking, so a FIFO swapped in since the walk
        # cannot hang the guest's thread (regular files and folders ignore the flag).
        err = int(original(caller, self.lower_fd, dirflags & ~LOOKUP_SYMLINK_FOLLOW, *arg,
                           oflags & O_DIRECTORY, rights & ~WRITE_RIGHTS, inheriting & ~WRITE_RIGHTS, FDFLAG_NONBLOCK,
                           fd_out))
        if err == OK and not self._opened_kind_resolved(caller, mem, originals, fd_out, found[1]):
            return ENOENT  # the folder changed between the host's walk and wasmtime's open
        if err == OK:
            self._track(mem, caller, fd_out, oflags, True, upath)
        return err

    def _opened_kind_resolved(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], fd_out: int,
                              expected: os.stat_result) -> bool:
        """Whether what wasmtime just opened is the kind of entry the host's walk
        resolved (a regular file or a folder); if not, it is closed again. (Not the
        inode itself: wasmtime reports its own inode numbers, not the host's.)"""
        fd = mem.u32(caller, fd_out)
        assert self._scratch is not None
        buf = self._scratch + PATH_ARG_BYTES
        if int(originals["fd_filestat_get"](caller, fd, buf)) == OK:
            kind = mem.read(caller, buf + 16, 1)[0]
            if kind == _filetype(expected.st_mode) and kind in (FILETYPE_DIRECTORY, FILETYPE_REGULAR):
                return True
        originals["fd_close"](caller, fd)
        return False

    def _track(self, mem: GuestMemory, caller: Any, fd_out: int, oflags: int, lower_side: bool, upath: str) -> None:
        fd = mem.u32(caller, fd_out)
        self._listings.pop(fd, None)
        if oflags & O_DIRECTORY:
            self.dirs[fd] = (lower_side, upath)
        else:
            self.dirs.pop(fd, None)

    def _is_lower_dir(self, upath: str) -> bool:
        found = self.lower(upath)
        return found is not None and stat.S_ISDIR(found[1].st_mode)

    def path_filestat_get(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
        dirfd, flags, path_ptr, path_len, buf = args
        original = originals["path_filestat_get"]
        entry = self.dirs.get(dirfd)
        if entry is None:
            return int(original(caller, *args))
        lower_side, base = entry
        if not lower_side:
            err = int(original(caller, *args))
            if err not in (ENOENT, ENOTDIR):
                return err
        path = _read_path(mem, caller, path_ptr, path_len)
        upath = None if path is None else join_union(base, path)
        found = None if upath is None else self.lower(upath)
        if found is None:
            return ENOENT
        arg = self._path_arg(mem, caller, found[0] or ".")
        if arg is None:
            return ENAMETOOLONG
        return int(original(caller, self.lower_fd, 0, *arg, buf))

    def path_readlink(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
        dirfd, path_ptr, path_len = args[:3]
        entry = self.dirs.get(dirfd)
        if entry is None or not entry[0]:
            err = int(originals["path_readlink"](caller, *args))
            if entry is None or err not in (ENOENT, ENOTDIR):
                return err
        path = _read_path(mem, caller, path_ptr, path_len)
        upath = None if path is None else join_union(entry[1], path)
        # The notebook's links are shown as what they point to: none is a link here.
        return EINVAL if upath is not None and self.lower(upath) is not None else ENOENT

    def write_op(self, name: str) -> Callable[..., int]:
        """A WASI function that changes the filesystem: what it does where the
        notebook's folder is involved (see WRITE_OPS)."""
        fd_at, ptr_at, len_at, kind = WRITE_OPS[name]

        def op(caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
            original = originals[name]
            entry = self.dirs.get(args[fd_at])
            if name == "path_link":
                source = self.dirs.get(args[0])
                if source is not None and source[0]:
                    return EROFS  # a hard link to the notebook's file would make it writable
            if entry is None:
                return int(original(caller, *args))
            if entry[0]:
                return EROFS
            upath = self._union_path(mem, caller, entry, args[ptr_at], args[len_at])
            if kind in ("mkdir", "create") and upath and self._only_lower(upath) is not None:
                return EEXIST  # the name is taken, by the notebook's entry
            err = int(original(caller, *args))
            if err not in (ENOENT, ENOTDIR) or not upath:
                return err
            found = self.lower(upath)
            if kind == "remove":
                return EROFS if found is not None and not self._upper_exists(upath) else err
            if kind == "touch":
                if found is None or not stat.S_ISREG(found[1].st_mode) or not self._copy_up(upath, found[0]):
                    return ENOSPC if self.out_of_space else err
            elif not self._parent_made(upath):
                return err
            return int(original(caller, *args))

        return op

    def path_rename(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
        old_fd, old_ptr, old_len, new_fd, new_ptr, new_len = args
        old_entry, new_entry = self.dirs.get(old_fd), self.dirs.get(new_fd)
        if (old_entry is not None and old_entry[0]) or (new_entry is not None and new_entry[0]):
            return EROFS
        err = int(originals["path_rename"](caller, *args))
        if err not in (ENOENT, ENOTDIR):
            return err
        if old_entry is not None:
            old = self._union_path(mem, caller, old_entry, old_ptr, old_len)
            if old and self.lower(old) is not None and not self._upper_exists(old):
                return EROFS  # only the notebook has it: it cannot move
        if new_entry is not None:
            new = self._union_path(mem, caller, new_entry, new_ptr, new_len)
            if new and self._parent_made(new):
                return int(originals["path_rename"](caller, *args))
        return err

    def _union_path(self, mem: GuestMemory, caller: Any, entry: tuple[bool, str], ptr: int, length: int) -> str | None:
        path = _read_path(mem, caller, ptr, length)
        return None if path is None else join_union(entry[1], path)

    def _parent_made(self, upath: str) -> bool:
        """The workspace has upath's folder now, made because the notebook's folder
        has it; False if neither layer has it."""
        parent = upath.rsplit("/", 1)[0] if "/" in upath else ""
        return bool(parent) and self._is_lower_dir(parent) and self._make_upper_dirs(parent.split("/"))

    def _upper_exists(self, upath: str) -> bool:
        if not upath:
            return True
        parts = upath.split("/")
        try:
            root = open_root(self.workspace)
            try:
                parent = open_dir_path(root, parts[:-1])
            finally:
                os.close(root)
        except (OSError, UnsafePathError):
            return False
        try:
            return lstat_at(parent, parts[-1]) is not None
        finally:
            os.close(parent)

    def fd_readdir(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int | None:
        """The merged listing, or None when wasmtime's own is the answer."""
        fd, buf, buf_len, cookie, bufused = args
        entry = self.dirs.get(fd)
        if entry is None:
            return None
        lower_side, upath = entry
        listing = self._listings.get(fd) if cookie else None
        if listing is None:
            listing = self._build_listing(lower_side, upath)
            if listing is None:
                return None
            self._listings[fd] = listing
        buf_len &= 0xFFFFFFFF
        out = bytearray()
        for index in range(min(cookie, len(listing)), len(listing)):
            out += listing[index]
            if len(out) >= buf_len:
                break
        data = bytes(out[:buf_len])
        mem.write(caller, buf, data)
        mem.set_u32(caller, bufused, len(data))
        return OK

    def _build_listing(self, lower_side: bool, upath: str) -> list[bytes] | None:
        found = self.lower(upath)
        if found is None or not stat.S_ISDIR(found[1].st_mode):
            if lower_side:
                return _encode([(".", 0, FILETYPE_DIRECTORY), ("..", 0, FILETYPE_DIRECTORY)])
            return None  # nothing of the notebook's here: wasmtime's own listing
        resolved = found[0]
        depth = len([p for p in upath.split("/") if p])
        lower_entries = self._lower_listing(resolved, depth)
        upper_entries: list[tuple[str, int, int]] = []
        if not lower_side:
            listed = self._upper_listing(upath)
            if listed is None:
                return None
            upper_entries = listed
        names = {name for name, _, _ in upper_entries}
        merged = [(".", found[1].st_ino, FILETYPE_DIRECTORY), ("..", 0, FILETYPE_DIRECTORY)]
        merged += upper_entries + [e for e in lower_entries if e[0] not in names]
        return _encode(merged)


def sweep_copy_leftovers(workspace: Path) -> list[str]:
    """Remove copy-up temporaries in the workspace's root whose process is gone (a
    kill -9 mid-copy); a live process's are left to it. Returns the names removed."""
    removed = []
    try:
        root = open_root(workspace)
    except OSError:
        return removed
    try:
        with os.scandir(root) as it:
            names = [e.name for e in it if e.name.startswith(COPY_PREFIX)]
        for name in names:
            pid = name[len(COPY_PREFIX):].split("-", 1)[0]
            if pid.isdigit() and _alive(int(pid)):
                continue
            try:
                os.unlink(name, dir_fd=root)
                removed.append(name)
            except OSError:
                pass
    except OSError:
        pass
    finally:
        os.close(root)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != 0


def _encode(entries: list[tuple[str, int, int]]) -> list[bytes]:
    out = []
    for index, (name, inode, kind) in enumerate(entries):
        raw = name.encode("utf-8", "surrogateescape")
        out.append(DIRENT.pack(index + 1, inode, len(raw), kind) + raw)
    return out


def _filetype(mode: int) -> int:
    if stat.S_ISDIR(mode):
        return FILETYPE_DIRECTORY
    if stat.S_ISREG(mode):
        return FILETYPE_REGULAR
    if stat.S_ISLNK(mode):
        return FILETYPE_SYMLINK
    return FILETYPE_UNKNOWN


def _read_path(mem: GuestMemory, caller: Any, ptr: int, length: int) -> str | None:
    length &= 0xFFFFFFFF
    if length > MAX_PATH_BYTES:
        return None
    try:
        return mem.read(caller, ptr, length).decode("utf-8")
    except UnicodeDecodeError:
        return None


__all__ = ["COPY_PREFIX", "WRITE_OPS", "NotebookFolder", "NotebookOverlay", "is_hidden", "join_union",
           "sweep_copy_leftovers"]
