"""The notebook's folder as the host reads it: by descriptor, never by path.

The lower layer of the union under /app (notebook_overlay.py). Every lookup starts
from a descriptor of the folder held for the overlay's life and goes down one
component at a time (a stat at the parent's descriptor, openat(O_DIRECTORY |
O_NOFOLLOW) to enter), so a folder swapped for a link while a cell runs is never
followed, and the folder itself replaced or moved changes nothing. Links are
resolved here, inside the folder only. Hidden names, entries deeper than max_depth
and anything that is neither a regular file nor a folder (a FIFO, socket or device,
whose open could block) do not exist for the guest.

A copy-up writes a temporary file in the workspace's root and link(2)s it into place
only when whole (link never replaces): a kill -9 leaves the whole file or none, and
two kernels of one notebook copying the same file up both end with one whole copy.
The temporaries of processes that are gone are swept when an overlay starts.

What the guest removes of the notebook's folder is hidden by a whiteout: an empty
file named WHITEOUT_PREFIX + name in the workspace's folder of that name (AUFS's
scheme), so it lasts as long as the workspace does, counts against the disk quota
like any file, and goes when the workspace's copy of the folder is deleted. A marker
hides the notebook's entry of its name and everything below it; a workspace entry of
the same name still shows (a file made again after its removal, a folder made again:
empty). The workspace is walked here by descriptor without following a link, and a
marker is made with O_CREAT | O_EXCL | O_NOFOLLOW: whatever already has its name, a
link planted there included, is taken as the marker and never followed.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ..host.safe_fs import UnsafePathError, lstat_at, open_dir, open_dir_path, open_root
from .wasi_abi import FILETYPE_DIRECTORY, FILETYPE_REGULAR, FILETYPE_SYMLINK, FILETYPE_UNKNOWN

MAX_SYMLINK_HOPS = 40
# A listing is built whole on the host; past this many entries it is cut short.
MAX_MERGED_ENTRIES = 100_000
COPY_PREFIX = ".wasm-kernel-copy-"  # a copy-up in progress: <prefix><pid>-<random>
DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# A whiteout: the notebook's entry `name` removed in this workspace (see above). It
# starts with the prefix of every name the host makes in a workspace, which the
# session's one door hides (sessions/workspace_fs.py), from the drive and every listing.
WHITEOUT_PREFIX = ".wasm-kernel-wh."
NAME_MAX = 255  # bytes of one name; a name too long for its marker cannot be removed
# WASI file types, as a listing reports them

if TYPE_CHECKING:
    from .disk_quota import DiskQuota


def is_hidden(name: str) -> bool:
    return name.startswith(".") and name not in (".", "..")


def is_whiteout(name: str) -> bool:
    return name.startswith(WHITEOUT_PREFIX)


def whiteout_name(name: str) -> str | None:
    """The marker's name for `name`; None if it would be too long for a name."""
    marker = WHITEOUT_PREFIX + name
    return marker if len(os.fsencode(marker)) <= NAME_MAX else None


def whited_out(marker: str) -> str:
    """The name a marker hides."""
    return marker[len(WHITEOUT_PREFIX):]


def names_whiteout(path: str) -> bool:
    """Whether a path (as the guest gave it) has a marker's name as a component."""
    return WHITEOUT_PREFIX in path and any(is_whiteout(part) for part in path.split("/"))


def filetype(mode: int) -> int:
    if stat.S_ISDIR(mode):
        return FILETYPE_DIRECTORY
    if stat.S_ISREG(mode):
        return FILETYPE_REGULAR
    if stat.S_ISLNK(mode):
        return FILETYPE_SYMLINK
    return FILETYPE_UNKNOWN


class LowerFolder:
    """The notebook's folder, held open; what the guest may see of it."""

    def __init__(self, root: Path, max_depth: int) -> None:
        self.root = root
        self.max_depth = max_depth
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def lookup(self, upath: str) -> tuple[str, os.stat_result] | None:
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

    def listing(self, resolved: str, depth: int) -> list[tuple[str, int, int]]:
        if depth >= self.max_depth:
            return []
        found = []
        try:
            fd = self.open_dir(resolved)
        except OSError:
            return []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if is_hidden(entry.name):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        kind = self.lookup(f"{resolved}/{entry.name}" if resolved else entry.name)
                        if kind is None:  # a link out of the folder, or to something hidden
                            continue
                        st = kind[1]
                    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                        continue  # FIFOs, sockets, devices are not shown
                    found.append((entry.name, st.st_ino, filetype(st.st_mode)))
                    if len(found) >= MAX_MERGED_ENTRIES:
                        break
        except OSError:
            return []
        finally:
            os.close(fd)
        return found

    def open_dir(self, resolved: str) -> int:
        """A descriptor of the notebook's (link-free) folder `resolved`, walked from
        the root's descriptor without following links."""
        try:
            return open_dir_path(self.root_fd, [p for p in resolved.split("/") if p])
        except UnsafePathError as err:  # a link swapped in: to callers, a failed open like any other
            raise OSError(errno.ELOOP, str(err)) from None

    def open_file(self, resolved: str) -> int:
        """A read descriptor of the notebook's regular file `resolved`: walked without
        links, opened non-blocking (a FIFO swapped in cannot hang the guest's thread)."""
        folder, _, name = resolved.rpartition("/")
        fd = self.open_dir(folder)
        try:
            src = os.open(name, FILE_OPEN, dir_fd=fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(os.fstat(src).st_mode):
            os.close(src)
            raise OSError("not a regular file")
        os.set_blocking(src, True)
        return src


def copy_up(folder: LowerFolder, workspace: Path, upath: str, resolved: str, quota: DiskQuota | None) -> str:
    """The notebook's file at `resolved` copied to the workspace at `upath`: "ok",
    "no space" (the quota refused it) or "failed". Written under a temporary name in
    the workspace's root and linked into place whole, so a crash or a second kernel
    never sees a partial copy there."""
    parts = upath.split("/")
    try:
        src = folder.open_file(resolved)
    except OSError:
        return "failed"
    try:
        root = open_root(workspace)
    except OSError:
        os.close(src)
        return "failed"
    parent = -1
    tmp = f"{COPY_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    try:
        parent = open_dir_path(root, parts[:-1], create=True)
        st = os.fstat(src)
        if quota is not None and not quota.allows(st.st_size, 0):
            return "no space"
        mode = st.st_mode & 0o777 | 0o200
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=root)
        try:
            try:
                while chunk := os.read(src, 1 << 20):
                    os.write(dst, chunk)
                    if quota is not None:
                        quota.add(len(chunk), 0)
            finally:
                os.close(dst)
            try:
                os.link(tmp, parts[-1], src_dir_fd=root, dst_dir_fd=parent, follow_symlinks=False)
            except FileExistsError:
                pass  # another writer's whole copy (or the guest's own file) is there: it wins
        finally:
            os.unlink(tmp, dir_fd=root)
        return "ok"
    except (OSError, UnsafePathError):
        return "failed"
    finally:
        os.close(src)
        os.close(root)
        if parent >= 0:
            os.close(parent)


def _union_parts(upath: str) -> list[str] | None:
    """The names of a normalised union path below the root (join_union's form); None
    for the root itself or anything that is not one (defence in depth: a marker is
    never made for "", ".", ".." or through an absolute path)."""
    parts = upath.split("/")
    if not upath or any(p in ("", ".", "..") or "\0" in p for p in parts):
        return None
    return parts


def hidden_by_workspace(workspace: Path, upath: str) -> bool:
    """Whether the workspace hides the notebook's entry at union path `upath`: a
    marker for it or for a folder above it, or something other than a folder where a
    folder above it would be (the workspace's entry wins, whole). Walked from the
    workspace's descriptor without following a link; an entry swapped for a link
    during the walk hides what is below it."""
    parts = _union_parts(upath)
    if parts is None:
        return False
    try:
        fd = open_root(workspace)
    except OSError:
        return False
    try:
        for index, name in enumerate(parts):
            marker = whiteout_name(name)
            if marker is not None and lstat_at(fd, marker) is not None:
                return True
            if index == len(parts) - 1:
                return False
            st = lstat_at(fd, name)
            if st is None:
                return False  # the workspace has nothing here, so no marker further down
            if not stat.S_ISDIR(st.st_mode):
                return True
            below = os.open(name, DIR_OPEN, dir_fd=fd)
            os.close(fd)
            fd = below
        return False
    except OSError as err:
        return err.errno != errno.ENOENT  # removed meanwhile: nothing hides; a link swapped in: hidden
    finally:
        os.close(fd)


def make_whiteout(workspace: Path, upath: str, quota: DiskQuota | None, *, check_quota: bool = True) -> str:
    """Hide the notebook's entry at union path `upath` in this workspace: an empty
    marker in the workspace's folder of it, made (with the folders above it, each an
    entry of the quota) if missing. "ok", "no space" (the quota refused it), "too
    long" (the name leaves no room for the marker's prefix) or "failed".
    check_quota=False when the caller has asked the quota already (or the marker
    replaces an entry the same call removes)."""
    parts = _union_parts(upath)
    if parts is None:
        return "failed"
    marker = whiteout_name(parts[-1])
    if marker is None:
        return "too long"
    try:
        fd = open_root(workspace)
    except OSError:
        return "failed"
    try:
        for name in parts[:-1]:
            if lstat_at(fd, name) is None:
                if quota is not None and not quota.allows(0, 1):
                    return "no space"
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    if quota is not None:
                        quota.add(0, 1)
                except FileExistsError:
                    pass
            below = open_dir(fd, name, name)  # a link there: UnsafePathError, never followed
            os.close(fd)
            fd = below
        if lstat_at(fd, marker) is not None:
            return "ok"  # already hidden (or something planted under the marker's name: it is one)
        if check_quota and quota is not None and not quota.allows(0, 1):
            return "no space"
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=fd))
        except FileExistsError:
            return "ok"  # made meanwhile, by another kernel of this workspace or planted: never followed
        if quota is not None:
            quota.add(0, 1)
        return "ok"
    except (OSError, UnsafePathError, ValueError):
        return "failed"
    finally:
        os.close(fd)


def remove_marker_folder(workspace: Path, upath: str, quota: DiskQuota | None) -> bool:
    """Remove the workspace's folder at `upath` if it holds nothing but markers, with
    them; False (nothing removed) if it holds anything else, a folder under a
    marker's name included. A link under a marker's name is unlinked, never followed."""
    parts = _union_parts(upath)
    if parts is None:
        return False
    try:
        root = open_root(workspace)
    except OSError:
        return False
    parent = folder = -1
    try:
        parent = open_dir_path(root, parts[:-1])
        folder = open_dir(parent, parts[-1], parts[-1])
        with os.scandir(folder) as it:
            entries = [(e.name, e.stat(follow_symlinks=False)) for e in it]
        if any(not is_whiteout(name) or stat.S_ISDIR(st.st_mode) for name, st in entries):
            return False
        for name, st in entries:
            os.unlink(name, dir_fd=folder)
            if quota is not None:
                own = st.st_size if stat.S_ISLNK(st.st_mode) or st.st_nlink <= 1 else 0
                quota.add(-own, -1)
        os.rmdir(parts[-1], dir_fd=parent)
        return True
    except (OSError, UnsafePathError, ValueError):
        return False
    finally:
        for fd in (folder, parent, root):
            if fd >= 0:
                os.close(fd)


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


__all__ = ["COPY_PREFIX", "FILETYPE_DIRECTORY", "FILETYPE_REGULAR", "WHITEOUT_PREFIX", "LowerFolder", "copy_up",
           "filetype", "hidden_by_workspace", "is_hidden", "is_whiteout", "make_whiteout", "names_whiteout",
           "remove_marker_folder", "sweep_copy_leftovers", "whited_out", "whiteout_name"]
