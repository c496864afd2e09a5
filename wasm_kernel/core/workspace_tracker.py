"""Per-cell file changes at a cost proportional to the changes, not the workspace.

Walking a 10,000-file workspace before and after every cell costs ~100 ms. The
guest's file calls are real host syscalls on the workspace, so inotify sees them:
the tracker keeps the workspace's state (path -> lstat identity) current, and
after a cell it re-examines only the paths that had events. Host edits made
between cells are absorbed before the next cell starts, so they are never
reported as the cell's doing. A write event marks a file modified even when its
size and timestamps look unchanged.

Every folder is opened relative to its parent with O_NOFOLLOW and watched through
its own descriptor (/proc/self/fd/N), so no symlink is ever followed. When inotify
cannot keep up (queue overflow, a moved folder, the watch limit), the tracker
walks the whole workspace once and diffs, as WorkspaceSnapshot does. Whiteout
markers are reported as the names they remove (FileChanges.without_whiteouts).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as F

from ..host.safe_fs import FolderWalk
from .file_changes import Entry, FileChanges, WorkspaceSnapshot, _open_rel, parent_dir

_MASK = (
    F.CREATE | F.DELETE | F.MODIFY | F.ATTRIB | F.MOVED_FROM | F.MOVED_TO
    | F.DELETE_SELF | F.MOVE_SELF | F.ONLYDIR | F.EXCL_UNLINK
)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


class _Rescan(Exception):
    """inotify lost track; fall back to one full walk."""


class WorkspaceTracker:
    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self._inotify: INotify | None = None
        self._wd_path: dict[int, str] = {}
        self.entries: dict[str, Entry] = {}
        self.watching = True
        self._root_wd = -2
        self._before: WorkspaceSnapshot | None = None
        self.cut: str | None = None  # why part of the workspace is not tracked (FolderWalk.cut)
        # The paths the host changed before the last start_cell (None: not known, a rescan).
        self.host_touched: set[str] | None = set()
        self._rescan()

    # --- public -----------------------------------------------------------------

    def start_cell(self) -> bool:
        """Absorb what happened since the last cell (host edits) without reporting
        it; whether anything may have changed meanwhile."""
        self.cut = None
        if self.watching:
            touched, _ = self._settle()
            self.host_touched = None if touched is None else set(touched)
            return touched is None or bool(touched)
        self._before = WorkspaceSnapshot.take(Path(self.root))
        self.host_touched = None
        return True

    def finish_cell(self) -> FileChanges:
        """What changed since start_cell()."""
        if not self.watching:
            assert self._before is not None
            after = WorkspaceSnapshot.take(Path(self.root))
            self.cut = self._before.cut or after.cut
            return self._before.diff(after)
        before = dict(self.entries)
        touched, written = self._settle()
        if touched is None:
            return _diff(before, self.entries, set(), full=True)
        return _diff(before, self.entries, written, full=False, touched=touched)

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    # --- internals ----------------------------------------------------------------

    def _settle(self) -> tuple[set[str] | None, set[str]]:
        """Apply pending events to `entries`; (touched paths or None after a rescan, written files)."""
        try:
            return self._apply_events()
        except _Rescan:
            self._rescan()
            return None, set()

    def _apply_events(self) -> tuple[set[str], set[str]]:
        assert self._inotify is not None
        touched: set[str] = set()
        written: set[str] = set()
        new_dirs: list[str] = []
        gone_dirs: list[str] = []
        for event in self._inotify.read(timeout=0):
            if event.mask & F.Q_OVERFLOW:
                raise _Rescan
            if event.mask & (F.IGNORED | F.DELETE_SELF | F.MOVE_SELF):
                if event.wd == self._root_wd:
                    raise _Rescan  # the workspace folder itself went away or moved
                continue  # for a subfolder, its parent's event says what happened
            parent = self._wd_path.get(event.wd)
            if parent is None or not event.name:
                continue
            path = f"{parent}/{event.name}" if parent else event.name
            touched.add(path)
            if event.mask & F.MODIFY:
                written.add(path)
            if event.mask & F.ISDIR:
                if event.mask & (F.CREATE | F.MOVED_TO):
                    new_dirs.append(path)
                if event.mask & (F.DELETE | F.MOVED_FROM):
                    gone_dirs.append(path)
        for path in gone_dirs:
            prefix = path + "/"
            touched.update(p for p in self.entries if p.startswith(prefix))
            for wd, p in list(self._wd_path.items()):
                if p == path or p.startswith(prefix):
                    del self._wd_path[wd]
        for path in touched:
            self._refresh(path)
        for path in new_dirs:
            touched.update(self._walk(path))  # a folder gone again meanwhile walks as empty
        return touched, written

    def _refresh(self, path: str) -> None:
        entry = self._lstat_entry(path)
        if entry is None:
            self.entries.pop(path, None)
        else:
            self.entries[path] = entry

    def _lstat_entry(self, path: str) -> Entry | None:
        with parent_dir(self.root, path) as found:
            if found is None:
                return None
            try:
                return _entry(os.stat(found[1], dir_fd=found[0], follow_symlinks=False))
            except OSError:
                return None

    def _rescan(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
        self._wd_path = {}
        self.entries = {}
        self.cut = None
        try:
            self._inotify = INotify()
            self._root_wd = -2
            self._walk("")
        except (OSError, _Rescan):  # no inotify (EMFILE), or the watch limit (ENOSPC): walk every cell instead
            if self._inotify is not None:
                self._inotify.close()
            self._inotify = None
            self.watching = False
            snapshot = WorkspaceSnapshot.take(Path(self.root))
            self.entries, self.cut = snapshot.entries, snapshot.cut

    def _walk(self, rel: str) -> set[str]:
        """Watch and record the folder `rel` and everything below it; return the paths seen.

        A watch that cannot be added (the inotify watch limit: ENOSPC) raises
        _Rescan, and the rescan falls back to walking the workspace every cell.
        """
        assert self._inotify is not None
        inotify = self._inotify
        seen: set[str] = set()
        try:
            root_fd = os.open(self.root, _DIR_FLAGS & ~os.O_NOFOLLOW)
        except OSError:
            return seen
        try:
            top = _open_rel(root_fd, rel) if rel else os.dup(root_fd)
        except OSError:
            os.close(root_fd)
            return seen

        def watch(fd: int, below: str) -> None:
            # Watch first, then list: nothing created in between is missed.
            path = f"{rel}/{below}" if rel and below else rel or below
            try:
                wd = inotify.add_watch(f"/proc/self/fd/{fd}", _MASK)
            except OSError as err:
                raise _Rescan from err
            self._wd_path[wd] = path
            if path == "":
                self._root_wd = wd

        depth = rel.count("/") + 1 if rel else 0
        walk = FolderWalk(top, start_depth=depth, on_open=watch)
        try:
            for folder in walk:
                base = f"{rel}/{folder.rel}" if rel and folder.rel else rel or folder.rel
                for name, st in folder.entries:
                    if stat.S_ISDIR(st.st_mode):
                        continue
                    path = f"{base}/{name}" if base else name
                    self.entries[path] = _entry(st)
                    seen.add(path)
        finally:
            os.close(top)
            os.close(root_fd)
        self.cut = self.cut or walk.cut
        return seen


def _entry(st: os.stat_result) -> Entry | None:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return None
    kind = "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) else "other"
    return Entry(kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _diff(
    before: dict[str, Entry],
    after: dict[str, Entry],
    written: set[str],
    *,
    full: bool,
    touched: set[str] | None = None,
) -> FileChanges:
    paths = set(before) | set(after) if full else (touched or set())
    created, modified, deleted = [], [], []
    for path in paths:
        old, new = before.get(path), after.get(path)
        if old is None and new is not None:
            created.append(path)
        elif old is not None and new is None:
            deleted.append(path)
        elif old is not None and new is not None and (old.stamp() != new.stamp() or path in written):
            modified.append(path)
    return FileChanges(sorted(created), sorted(modified), sorted(deleted)).without_whiteouts()
