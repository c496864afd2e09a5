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
- removing a name the lower layer has (unlink, rmdir of a folder empty in the
  merged view, the old name of a rename) hides the lower entry with a whiteout, a
  marker file in the workspace (notebook_folder_fs.py): it is gone from /app for
  this workspace, the notebook's folder unchanged. A rename of a file only the
  lower layer has copies it up under the new name first; a folder the lower layer
  has cannot be renamed (EXDEV, as on overlayfs: shutil.move copies instead). A name
  made again where one was removed is a new workspace entry (a folder: empty).
  The guest never sees a marker: listings leave them out, and a path naming one is
  not found (ENOENT), or refused (EACCES) when it would make one, a symlink to one
  included.

The lower layer shows less than the folder holds: hidden entries (a name starting
with "."), anything deeper than `max_depth` folders, symlinks whose target leaves
the folder or passes a hidden name, and anything that is neither a regular file nor
a folder (a FIFO, socket or device, whose open could block) are invisible. Its
paths are resolved here on the host from a descriptor of the folder, one component
at a time with openat(O_NOFOLLOW), so a folder swapped for a link while a cell runs
is never followed; wasmtime then opens the resolved, link-free path one name at a
time too, each without following a link (notebook_folder_walk.py), so a folder
swapped for a link since the host's walk fails the open rather than leading to a
hidden entry. What wasmtime opened must be the kind of entry resolved here (else it
is closed again: ENOENT). The last open asks for O_NONBLOCK, but wasmtime 49 does not
pass it to the OS: a FIFO swapped in for a file at that instant blocks the open until
a writer comes (docs/security.md). The workspace side
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
from .notebook_folder_fs import (
    MAX_MERGED_ENTRIES, LowerFolder, copy_up, filetype, hidden_by_workspace, is_whiteout, make_whiteout,
    names_whiteout, remove_marker_folder, sweep_copy_leftovers, whited_out, whiteout_name,
)
from .notebook_folder_walk import call_at_lower
from .wasi_abi import (
    EEXIST, EINVAL, EIO, EISDIR, ENAMETOOLONG, ENOENT, ENOSPC, ENOTCAPABLE, ENOTDIR, EROFS, FDFLAG_APPEND,
    FDFLAG_NONBLOCK, FILESTAT_BYTES, FILETYPE_DIRECTORY, FILETYPE_REGULAR, OFLAG_CREAT, OFLAG_DIRECTORY, OFLAG_EXCL,
    OFLAG_TRUNC, RIGHT_FD_ALLOCATE, RIGHT_FD_FILESTAT_SET_SIZE, RIGHT_FD_WRITE, SUCCESS,
)

WRITE_RIGHTS = RIGHT_FD_WRITE | RIGHT_FD_ALLOCATE | RIGHT_FD_FILESTAT_SET_SIZE
# WASI errnos wasi_abi does not spell
EACCES = 2
ENOTEMPTY = 55
EXDEV = 75
LOOKUP_SYMLINK_FOLLOW = 1
# dirent
DIRENT = struct.Struct("<QQIB3x")

MAX_PATH_BYTES = 4096
SCRATCH_BYTES = 2 * MAX_PATH_BYTES
PATH_ARG_BYTES = SCRATCH_BYTES - FILESTAT_BYTES  # a WASI filestat at the scratch block's end
# The WASI functions that change the filesystem: where their (dirfd, path, length)
# are, and what they mean for the notebook's folder. "create": make the target's
# folder in the workspace if only the notebook has it; "mkdir": the same, but an
# existing name is EEXIST; "remove": what the notebook has is hidden by a whiteout;
# "touch": copy the notebook's file up first.
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
        # Guest descriptors opened in the union (folders' and files'): fd -> (on the
        # lower layer?, union path).
        self.dirs: dict[int, tuple[bool, str]] = {upper_fd: (False, ""), lower_fd: (True, "")}
        self._listings: dict[int, list[bytes]] = {}
        self._scratch: int | None = None  # guest memory for the names we hand to wasmtime
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
        """The notebook folder's entry for union path `upath` (LowerFolder.lookup),
        unless the workspace hides it (a whiteout, or a workspace entry above it that
        is not a folder)."""
        found = self.folder.lookup(upath)
        if found is None or not upath or not hidden_by_workspace(self.workspace, upath):
            return found
        return None

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

    def _upper_dir(self, upath: str) -> int | None:
        return self._open_upper([p for p in upath.split("/") if p])

    def _open_upper(self, parts: list[str]) -> int | None:
        """A descriptor of the workspace's folder at `parts`, walked without links, or
        None if there is none (or the walk meets a link)."""
        try:
            root = open_root(self.workspace)
            try:
                return open_dir_path(root, parts)
            finally:
                os.close(root)
        except (OSError, UnsafePathError):
            return None

    def _upper_listing(self, upath: str) -> list[tuple[str, int, int]] | None:
        fd = self._upper_dir(upath)
        if fd is None:
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

    def _upper_names(self, upath: str) -> list[str] | None:
        """The names in the workspace's folder at upath (no stat: cheap); None if it
        has none there, or more than a listing takes."""
        fd = self._upper_dir(upath)
        if fd is None:
            return None
        try:
            names = os.listdir(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        return names if len(names) <= MAX_MERGED_ENTRIES else None

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
        if path is not None and names_whiteout(path):
            return EACCES if oflags & OFLAG_CREAT else ENOENT  # a marker is never the guest's to see or make
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
            self._track(mem, caller, fd_out, False, upath)
            return SUCCESS
        if err != ENOENT:
            return err
        found = self.lower(upath)
        if not writing:
            if found is None:
                return err
            return self._open_lower(caller, mem, originals, upath, dirflags, oflags, rights, inheriting, fdflags,
                                    fd_out, found)
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
            self._track(mem, caller, fd_out, False, upath)
        return err

    def _only_lower(self, upath: str) -> tuple[str, os.stat_result] | None:
        """The notebook's entry at upath when the workspace has none there."""
        found = self.lower(upath) if upath else None
        if found is None or self._upper_exists(upath):
            return None
        return found

    def _open_lower(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], upath: str, dirflags: int,
                    oflags: int, rights: int, inheriting: int, fdflags: int, fd_out: int,
                    found: tuple[str, os.stat_result] | None = None) -> int:
        original = originals["path_open"]
        found = found or self.lower(upath)
        if found is None or self._scratch is None:
            return ENOENT

        def open_name(dirfd: int, name_ptr: int, name_len: int) -> int:
            # Not following a link. NONBLOCK is asked for, though wasmtime 49 keeps it
            # from the OS's open (see the module's docstring).
            return int(original(caller, dirfd, dirflags & ~LOOKUP_SYMLINK_FOLLOW, name_ptr, name_len,
                                oflags & OFLAG_DIRECTORY, rights & ~WRITE_RIGHTS, inheriting & ~WRITE_RIGHTS,
                                FDFLAG_NONBLOCK, fd_out))

        # wasmtime opens the walked path one name at a time (notebook_folder_walk.py).
        err = call_at_lower(caller, mem, originals, self.lower_fd, found[0], self._scratch, open_name)
        if err == SUCCESS and not self._opened_kind_resolved(caller, mem, originals, fd_out, found[1]):
            return ENOENT  # the folder changed between the host's walk and wasmtime's open
        if err == SUCCESS:
            self._track(mem, caller, fd_out, True, upath)
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

    def _track(self, mem: GuestMemory, caller: Any, fd_out: int, lower_side: bool, upath: str) -> None:
        """Record a new descriptor of the union. Every one is kept, a file's too: a
        folder opened without O_DIRECTORY is a folder all the same, and a path
        relative to it must pass here (asking wasmtime which it is would cost every
        open a call); a path relative to a file's fails either way."""
        fd = mem.u32(caller, fd_out)
        self._listings.pop(fd, None)
        self.dirs[fd] = (lower_side, upath)

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
        path = _read_path(mem, caller, path_ptr, path_len)
        if path is not None and names_whiteout(path):
            return ENOENT
        if not lower_side:
            err = int(original(caller, *args))
            if err not in (ENOENT, ENOTDIR):
                return err
        upath = None if path is None else join_union(base, path)
        found = None if upath is None else self.lower(upath)
        if found is None or self._scratch is None:
            return ENOENT

        def stat_name(dirfd: int, name_ptr: int, name_len: int) -> int:
            return int(original(caller, dirfd, 0, name_ptr, name_len, buf))

        err = call_at_lower(caller, mem, originals, self.lower_fd, found[0], self._scratch, stat_name)
        if err == SUCCESS and mem.read(caller, buf + 16, 1)[0] != filetype(found[1].st_mode):
            mem.write(caller, buf, bytes(FILESTAT_BYTES))
            return ENOENT  # a link (or anything else) swapped in for the entry since the walk
        return err

    def path_readlink(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
        dirfd, path_ptr, path_len = args[:3]
        entry = self.dirs.get(dirfd)
        if entry is not None:
            path = _read_path(mem, caller, path_ptr, path_len)
            if path is not None and names_whiteout(path):
                return ENOENT
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
                if source is not None and self._names_marker(mem, caller, args[2], args[3]):
                    return ENOENT
            if entry is None:
                return int(original(caller, *args))
            if entry[0]:
                return EROFS
            path = _read_path(mem, caller, args[ptr_at], args[len_at])
            if path is not None and names_whiteout(path):
                return ENOENT if kind in ("remove", "touch") else EACCES
            if name == "path_symlink" and self._names_marker(mem, caller, args[0], args[1]):
                return EACCES  # a link to a marker would let wasmtime reach it
            upath = None if path is None else join_union(entry[1], path)
            if kind == "remove":
                return self._remove(caller, original, args, upath, name == "path_remove_directory")
            if kind in ("mkdir", "create") and upath and self._only_lower(upath) is not None:
                return EEXIST  # the name is taken, by the notebook's entry
            err = int(original(caller, *args))
            if err not in (ENOENT, ENOTDIR) or not upath:
                return err
            found = self.lower(upath)
            if kind == "touch":
                if found is None or not stat.S_ISREG(found[1].st_mode) or not self._copy_up(upath, found[0]):
                    return ENOSPC if self.out_of_space else err
            elif not self._parent_made(upath):
                return err
            return int(original(caller, *args))

        return op

    def _remove(self, caller: Any, original: Any, args: tuple[int, ...], upath: str | None, rmdir: bool) -> int:
        """unlink or rmdir in the merged view: the workspace's entry goes, and the
        notebook's of that name is hidden by a whiteout (made first, so a failure
        leaves the name as it was)."""
        found = self.lower(upath) if upath else None
        if found is None or upath is None:
            err = int(original(caller, *args))
            if err == ENOTEMPTY and rmdir and upath and self._only_markers(upath) is not None:
                # Markers whose notebook folder has gone: they go with the workspace's folder.
                return SUCCESS if remove_marker_folder(self.workspace, upath, self.quota) else err
            return err
        upper = self._upper_stat(upath)
        if upper is not None and stat.S_ISDIR(upper.st_mode) != rmdir:
            return int(original(caller, *args))  # wasmtime's own ENOTDIR / EISDIR
        if upper is None and stat.S_ISDIR(found[1].st_mode) != rmdir:
            return ENOTDIR if rmdir else EISDIR
        if rmdir and not self._merged_empty(upath, found, upper is not None):
            return ENOTEMPTY
        err = self._whiteout(upath, check_quota=upper is None)  # else it replaces the entry removed
        if err != SUCCESS or upper is None:
            return err
        if rmdir:
            return SUCCESS if remove_marker_folder(self.workspace, upath, self.quota) else ENOTEMPTY
        return int(original(caller, *args))

    def _whiteout(self, upath: str, check_quota: bool = True) -> int:
        outcome = make_whiteout(self.workspace, upath, self.quota, check_quota=check_quota)
        self.out_of_space = outcome == "no space"
        return {"ok": SUCCESS, "no space": ENOSPC, "too long": ENAMETOOLONG}.get(outcome, EIO)

    def _only_markers(self, upath: str) -> set[str] | None:
        """The names the workspace's folder at upath hides, if it holds markers only."""
        names = self._upper_names(upath)
        if names is None or not all(is_whiteout(n) for n in names):
            return None
        return {whited_out(n) for n in names}

    def _merged_empty(self, upath: str, found: tuple[str, os.stat_result], upper_dir: bool) -> bool:
        """Whether the folder at upath shows nothing in /app (rmdir's test)."""
        gone: set[str] = set()
        if upper_dir:
            hidden = self._only_markers(upath)
            if hidden is None:
                return False
            gone = hidden
        if stat.S_ISDIR(found[1].st_mode):
            depth = len(upath.split("/"))
            return all(name in gone for name, _, _ in self.folder.listing(found[0], depth))
        return True

    def path_rename(self, caller: Any, mem: GuestMemory, originals: dict[str, Any], args: tuple[int, ...]) -> int:
        old_fd, old_ptr, old_len, new_fd, new_ptr, new_len = args
        old_entry, new_entry = self.dirs.get(old_fd), self.dirs.get(new_fd)
        if (old_entry is not None and old_entry[0]) or (new_entry is not None and new_entry[0]):
            return EROFS
        if old_entry is not None and self._names_marker(mem, caller, old_ptr, old_len):
            return ENOENT
        if new_entry is not None and self._names_marker(mem, caller, new_ptr, new_len):
            return EACCES
        old = None if old_entry is None else self._union_path(mem, caller, old_entry, old_ptr, old_len)
        new = None if new_entry is None else self._union_path(mem, caller, new_entry, new_ptr, new_len)

        def rename() -> int:
            err = int(originals["path_rename"](caller, *args))
            if err in (ENOENT, ENOTDIR) and new and self._parent_made(new):
                err = int(originals["path_rename"](caller, *args))
            return err

        found = self.lower(old) if old else None
        if found is None or old is None:
            return rename()
        upper = self._upper_stat(old)
        if stat.S_ISDIR(found[1].st_mode) and (upper is None or stat.S_ISDIR(upper.st_mode)):
            return EXDEV  # the notebook's part of a folder cannot move with it (as on overlayfs)
        if whiteout_name(old.rsplit("/", 1)[-1]) is None:
            return ENAMETOOLONG  # no room for the marker the old name needs
        quota = self.quota
        if quota is not None and not quota.allows(0, 1 if upper is not None else 2):
            self.out_of_space = True
            return ENOSPC  # the marker, and the copy
        if upper is None:
            # Only the notebook has it: copied up under its own name, then renamed.
            if not self._copy_up(old, found[0]):
                return ENOSPC if self.out_of_space else EIO
            if quota is not None:
                quota.add(0, 1)
            err = rename()
            if err != SUCCESS:
                self._drop_copy(old)
                return err
        else:
            err = rename()
            if err != SUCCESS:
                return err
        self._whiteout(old, check_quota=False)
        return SUCCESS

    def _drop_copy(self, upath: str) -> None:
        """Unlink the workspace's copy made for a rename that then failed."""
        parts = upath.split("/")
        parent = self._open_upper(parts[:-1])
        if parent is None:
            return
        try:
            st = lstat_at(parent, parts[-1])
            if st is not None and stat.S_ISREG(st.st_mode):
                os.unlink(parts[-1], dir_fd=parent)
                if self.quota is not None:
                    self.quota.add(-st.st_size if st.st_nlink <= 1 else 0, -1)
        except OSError:
            pass
        finally:
            os.close(parent)

    def _names_marker(self, mem: GuestMemory, caller: Any, ptr: int, length: int) -> bool:
        path = _read_path(mem, caller, ptr, length)
        return path is not None and names_whiteout(path)

    def _union_path(self, mem: GuestMemory, caller: Any, entry: tuple[bool, str], ptr: int, length: int) -> str | None:
        path = _read_path(mem, caller, ptr, length)
        return None if path is None else join_union(entry[1], path)

    def _parent_made(self, upath: str) -> bool:
        """The workspace has upath's folder now, made because the notebook's folder
        has it; False if neither layer has it."""
        parent = upath.rsplit("/", 1)[0] if "/" in upath else ""
        return bool(parent) and self._is_lower_dir(parent) and self._make_upper_dirs(parent.split("/"))

    def _upper_exists(self, upath: str) -> bool:
        return not upath or self._upper_stat(upath) is not None

    def _upper_stat(self, upath: str) -> os.stat_result | None:
        """The workspace's entry at upath (a link as itself), walked without links."""
        parts = upath.split("/")
        parent = self._open_upper(parts[:-1])
        if parent is None:
            return None
        try:
            return lstat_at(parent, parts[-1])
        except OSError:
            return None
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
        dots = [(".", 0 if found is None else found[1].st_ino, FILETYPE_DIRECTORY), ("..", 0, FILETYPE_DIRECTORY)]
        if found is None or not stat.S_ISDIR(found[1].st_mode):
            if lower_side:
                return _encode(dots) if found is None else None  # a file's descriptor: wasmtime's ENOTDIR
            # Nothing of the notebook's here: wasmtime's own listing, unless the
            # folder holds markers (left by a notebook folder since changed).
            names = self._upper_names(upath)
            if names is None or not any(is_whiteout(n) for n in names):
                return None
            listed = self._upper_listing(upath)
            if listed is None:
                return None
            return _encode(dots + [e for e in listed if not is_whiteout(e[0])])
        depth = len([p for p in upath.split("/") if p])
        lower_entries = self.folder.listing(found[0], depth)
        upper_entries: list[tuple[str, int, int]] = []
        if lower_side:
            upper_names = self._upper_names(upath) or []
            covered: set[str] = set()  # a descriptor of the notebook's folder lists its entries only...
        else:
            listed = self._upper_listing(upath)
            if listed is None:
                return None
            upper_names = [name for name, _, _ in listed]
            upper_entries = [e for e in listed if not is_whiteout(e[0])]
            covered = set(upper_names)  # ...else the workspace's names win
        covered |= {whited_out(n) for n in upper_names if is_whiteout(n)}  # and the removed are gone
        return _encode(dots + upper_entries + [e for e in lower_entries if e[0] not in covered])


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
