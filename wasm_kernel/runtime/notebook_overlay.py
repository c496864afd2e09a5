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

How the lower layer is read, and how a copy-up stays whole through a crash or a
second kernel: notebook_folder_fs.py.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..host.guest_memory import GuestMemory
from ..host.safe_fs import UnsafePathError, lstat_at, open_dir_path, open_root
from .disk_quota import DiskQuota
from .notebook_folder_fs import MAX_MERGED_ENTRIES, LowerFolder, copy_up, filetype, sweep_copy_leftovers
from .wasi_abi import (
    EEXIST, EINVAL, EIO, EISDIR, ENAMETOOLONG, ENOENT, ENOSPC, ENOTCAPABLE, ENOTDIR, EROFS, FDFLAG_APPEND,
    FDFLAG_NONBLOCK, FILESTAT_BYTES, FILETYPE_DIRECTORY, FILETYPE_REGULAR, OFLAG_CREAT, OFLAG_DIRECTORY, OFLAG_EXCL,
    OFLAG_TRUNC, RIGHT_FD_ALLOCATE, RIGHT_FD_FILESTAT_SET_SIZE, RIGHT_FD_WRITE, SUCCESS,
)

WRITE_RIGHTS = RIGHT_FD_WRITE | RIGHT_FD_ALLOCATE | RIGHT_FD_FILESTAT_SET_SIZE
LOOKUP_SYMLINK_FOLLOW = 1
# dirent
DIRENT = struct.Struct("<QQIB3x")

MAX_PATH_BYTES = 4096
SCRATCH_BYTES = 2 * MAX_PATH_BYTES
PATH_ARG_BYTES = SCRATCH_BYTES - FILESTAT_BYTES  # a WASI filestat at the scratch block's end
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
        self.folder = LowerFolder(folder.path, folder.max_depth)
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
        sweep_copy_leftovers(workspace)

    def close(self) -> None:
        self.folder.close()

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

    # --- the lower layer, read by descriptor (notebook_folder_fs.py) ---------------

    def lower(self, upath: str) -> tuple[str, os.stat_result] | None:
        """The notebook folder's entry for union path `upath` (LowerFolder.lookup)."""
        return self.folder.lookup(upath)

    def _copy_up(self, upath: str, resolved: str) -> bool:
        outcome = copy_up(self.folder, self.workspace, upath, resolved, self.quota)
        self.out_of_space = outcome == "no space"
        return outcome == "ok"

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
                    found.append((entry.name, st.st_ino, filetype(st.st_mode)))
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
        writing = bool(oflags & (OFLAG_CREAT | OFLAG_TRUNC | OFLAG_EXCL) or rights & WRITE_RIGHTS or fdflags & FDFLAG_APPEND)
        if upath is None:
            return ENOTCAPABLE if lower_side else int(original(caller, *args))
        if lower_side:
            if writing:
                return EROFS  # a descriptor of the notebook's folder itself: read-only
            return self._open_lower(caller, mem, originals, upath, dirflags, oflags, rights, inheriting, fdflags,
                                    fd_out)
        if writing and oflags & OFLAG_CREAT:
            # Creating a name only the notebook has: OFLAG_EXCL must fail, and a file
            # opened to add to it starts from the notebook's copy, not empty.
            shadowed = self._only_lower(upath)
            if shadowed is not None:
                if oflags & OFLAG_EXCL:
                    return EEXIST
                if not stat.S_ISREG(shadowed[1].st_mode):
                    return EISDIR
                if not (oflags & OFLAG_TRUNC) and not self._copy_up(upath, shadowed[0]):
                    return ENOSPC if self.out_of_space else EIO
        err = int(original(caller, *args))
        if err == SUCCESS:
            self._track(mem, caller, fd_out, oflags, False, upath)
            return SUCCESS
        if err != ENOENT:
            return err
        found = self.lower(upath)
        if not writing:
            if found is None:
                return err
            return self._open_lower(caller, mem, originals, upath, dirflags, oflags, rights, inheriting, fdflags,
                                    fd_out)
        if found is not None and stat.S_ISREG(found[1].st_mode):
            ready = self._make_upper_dirs(upath.split("/")[:-1]) if oflags & OFLAG_TRUNC else self._copy_up(upath, found[0])
        elif found is None:
            ready = self._parent_made(upath)
        else:
            return err
        if not ready:
            return ENOSPC if self.out_of_space else err
        err = int(original(caller, *args))
        if err == SUCCESS:
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
                           oflags & OFLAG_DIRECTORY, rights & ~WRITE_RIGHTS, inheriting & ~WRITE_RIGHTS, FDFLAG_NONBLOCK,
                           fd_out))
        if err == SUCCESS and not self._opened_kind_resolved(caller, mem, originals, fd_out, found[1]):
            return ENOENT  # the folder changed between the host's walk and wasmtime's open
        if err == SUCCESS:
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
        if int(originals["fd_filestat_get"](caller, fd, buf)) == SUCCESS:
            kind = mem.read(caller, buf + 16, 1)[0]
            if kind == filetype(expected.st_mode) and kind in (FILETYPE_DIRECTORY, FILETYPE_REGULAR):
                return True
        originals["fd_close"](caller, fd)
        return False

    def _track(self, mem: GuestMemory, caller: Any, fd_out: int, oflags: int, lower_side: bool, upath: str) -> None:
        fd = mem.u32(caller, fd_out)
        self._listings.pop(fd, None)
        if oflags & OFLAG_DIRECTORY:
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
        return SUCCESS

    def _build_listing(self, lower_side: bool, upath: str) -> list[bytes] | None:
        found = self.lower(upath)
        if found is None or not stat.S_ISDIR(found[1].st_mode):
            if lower_side:
                return _encode([(".", 0, FILETYPE_DIRECTORY), ("..", 0, FILETYPE_DIRECTORY)])
            return None  # nothing of the notebook's here: wasmtime's own listing
        resolved = found[0]
        depth = len([p for p in upath.split("/") if p])
        lower_entries = self.folder.listing(resolved, depth)
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


def _encode(entries: list[tuple[str, int, int]]) -> list[bytes]:
    out = []
    for index, (name, inode, kind) in enumerate(entries):
        raw = name.encode("utf-8", "surrogateescape")
        out.append(DIRENT.pack(index + 1, inode, len(raw), kind) + raw)
    return out


def _read_path(mem: GuestMemory, caller: Any, ptr: int, length: int) -> str | None:
    length &= 0xFFFFFFFF
    if length > MAX_PATH_BYTES:
        return None
    try:
        return mem.read(caller, ptr, length).decode("utf-8")
    except UnicodeDecodeError:
        return None


__all__ = ["WRITE_OPS", "NotebookFolder", "NotebookOverlay", "join_union"]
