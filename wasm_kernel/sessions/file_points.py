"""Every cell's point, for the workspace's files: what %rewind puts back in /app.

The interpreter's points are the guest's (runtime/points.py); these are the same
points' files. Kept per point (by the execution count of its cell) as the changes
since the point before: each path a cell created or changed, with its content, or
gone. Contents are copies (a reflink where the file system has them) named by their
SHA-256, in `files/` beside the memory deltas, in the session's private points folder
(never mounted into a guest, never listed by the drive). The first point of an
interpreter line copies the workspace as it stands (its base); the oldest points are
folded into the base as the interpreter's are dropped.

A rewind goes through SessionWorkspace, the one way into a workspace: what it
deletes is given back to the quota's ledger and what it writes is charged before a
byte is written. It is atomic against kill -9: the manifests before and after are
written first (`rewind.json`, fsynced, renamed into place), and a later start that
finds the file puts the workspace back as it was before the rewind, then removes it.
Files are compared by size and modification time, so an edit made between cells (the
drive, a host magic) is taken in before a rewind, never lost by it. Links and the
overlay's whiteouts are left as they are.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from ..core.file_changes import FileChanges
from ..host.log import get_logger
from ..host.safe_fs import DIR_NOFOLLOW
from .session_workspace import Limits, QuotaExceeded, SessionWorkspace
from .workspace_fs import is_internal_name

log = get_logger("wasm_kernel.sessions")

BLOBS = "files"
INTENT = "rewind.json"
_PIECE = 1 << 20
_FICLONE = 0x40049409  # linux/fs.h: share the extents (btrfs, xfs); else copy


class FilePointsError(Exception):
    """Why the files could not be kept or put back (one line)."""


@dataclass(frozen=True)
class Kept:
    """A path as a point has it: a folder (sha None), or a file's content."""

    sha: str | None
    size: int = 0
    mtime_ns: int = 0

    def same_content(self, other: Kept | None) -> bool:
        return other is not None and other.sha == self.sha

    def as_json(self) -> list[object]:
        return [self.sha, self.size, self.mtime_ns]

    @classmethod
    def from_json(cls, raw: object) -> Kept:
        if not isinstance(raw, list) or len(raw) != 3 or not (raw[0] is None or _is_sha(raw[0])):
            raise FilePointsError("a manifest entry is damaged")
        return cls(raw[0], int(raw[1]), int(raw[2]))


Manifest = dict[str, Kept]


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


class FilePoints:
    """One session's file points, for one interpreter line. Its methods run on the
    kernel's host threads, one at a time (the kernel runs one cell at a time)."""

    def __init__(self, workspace: SessionWorkspace, folder: Path, max_bytes: int,
                 limits: Callable[[], Limits], saved: dict[str, object] | None = None) -> None:
        """limits: the session's disk quota now (bytes, files): what a rewind writes
        is charged against it, what it deletes given back, as every door's. saved:
        what export() gave a saved state that was woken (its manifest is
        authenticated with it): the points go on from there."""
        self._ws = workspace
        self._folder = Path(folder)
        self.max_bytes = max_bytes
        self._quota = limits
        self._base: Manifest | None = None  # the workspace at the oldest point kept
        self._base_count: int | None = None  # ...and that point's execution count
        self._steps: list[tuple[int, dict[str, Kept | None]]] = []  # (count, what changed), in order
        self.off: str | None = None  # why files are not kept (said once by %timeline and %rewind)
        self._last_rewind: tuple[int, Manifest, Manifest] | None = None
        self._kept: int | None = None  # bytes_kept, once counted
        self.notice: str | None = self.recover()
        if saved is not None:
            self._restore(saved)
        self._collect()  # a kernel before this one's contents that no point names any more

    def _limits(self) -> Limits:
        top_bytes, top_names = self._quota()
        # (None, None) is "uncounted" to the workspace: a rewind's writes are always counted.
        return (top_bytes if top_bytes is not None else 1 << 62, top_names if top_names is not None else 1 << 62)

    # --- the private folder -------------------------------------------------------

    def _folder_fd(self) -> int:
        """The points folder, made if missing and never followed through a link (its
        parent is the kernel's, made by sessions/layout.ensure_points_parent)."""
        try:
            os.mkdir(self._folder, 0o700)
        except FileExistsError:
            pass
        return os.open(self._folder, DIR_NOFOLLOW)

    def _blob_dir(self) -> int:
        fd = self._folder_fd()
        try:
            try:
                os.mkdir(BLOBS, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            return os.open(BLOBS, DIR_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)

    @property
    def bytes_kept(self) -> int:
        """The contents' bytes on disk: counted once, then kept up to date (a cell's
        record must not list the folder)."""
        if self._kept is None:
            try:
                fd = self._blob_dir()
            except OSError:
                return 0
            try:
                self._kept = sum(os.stat(name, dir_fd=fd, follow_symlinks=False).st_size for name in os.listdir(fd))
            finally:
                os.close(fd)
        return self._kept

    # --- kept as cells run -----------------------------------------------------------

    def record(self, count: int, changes: FileChanges, host: Collection[str] | None = ()) -> None:
        """After cell `count`: what it created, changed and deleted, kept, with what
        the host changed before it (`host`: paths, or None if not known: then the
        workspace is scanned). The first call of a line keeps the whole workspace."""
        if self.off is not None:
            return
        try:
            if self._base is None:
                used = self._ws.usage()[0]
                if used > self.max_bytes:  # not copied only to be dropped
                    self._turn_off(f"the workspace's {used >> 20} MiB are more than history_max_bytes keeps")
                    return
                self._base, self._base_count = self._scan({}), count
                self._steps = []
                self._check_budget()
                return
            again = bool(self._steps) and self._steps[-1][0] == count  # a %rewind's cell: its step is there
            if again:
                step = self._steps[-1][1]
            else:
                step = {}
                self._steps.append((count, step))
            if host is None:  # the host's edits are not known path by path: the workspace as it is
                current = self.newest() or {}
                now = self._scan(current)
                step.update({p: now.get(p) for p in set(current) | set(now) if current.get(p) != now.get(p)})
            else:
                for path in host:
                    if any(is_internal_name(part) for part in path.split("/")):
                        continue  # a writer's temporary (the drive's, a rewind's own): never a file of a point
                    try:
                        step[path] = self._keep_path(path)
                    except (FileNotFoundError, NotADirectoryError):
                        step[path] = None  # gone again since
            for path in [*changes.created, *changes.modified]:
                if not (again and path in step):
                    step[path] = self._keep_path(path)
            for path in changes.deleted:
                step[path] = None
            self._check_budget()
        except (OSError, ValueError, FilePointsError) as err:
            self._turn_off(f"the workspace's files could not be kept ({_line(err)})")

    def keep_from(self, oldest: int) -> None:
        """The oldest count a point is kept for: older steps fold into the base, and
        what no point needs any more is removed."""
        if self._base is None or self._base_count is None:
            return
        folded = False
        while self._steps and self._base_count < oldest and self._steps[0][0] <= oldest:
            self._base_count, step = self._steps.pop(0)
            _apply(self._base, step)
            folded = True
        if folded:
            self._collect()

    def export(self) -> dict[str, object] | None:
        """The points' manifests, for a saved state (the contents stay on disk)."""
        if self._base is None or self.off is not None:
            return None
        return {"base_count": self._base_count, "base": {p: k.as_json() for p, k in self._base.items()},
                "steps": [[count, {p: None if k is None else k.as_json() for p, k in step.items()}]
                          for count, step in self._steps]}

    def _restore(self, saved: dict[str, object]) -> None:
        try:
            base = {str(p): Kept.from_json(k) for p, k in dict(saved["base"]).items()}  # type: ignore[call-overload]
            steps = [(int(count), {str(p): None if k is None else Kept.from_json(k) for p, k in dict(step).items()})
                     for count, step in saved["steps"]]  # type: ignore[attr-defined]
            base_count = int(saved["base_count"])  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError, FilePointsError) as err:
            log.info("file_points.not_resumed", error=str(err))
            return
        self._base, self._base_count, self._steps = base, base_count, steps

    def changed_counts(self) -> list[int]:
        """The cells whose step changed a file (the base's cell first, if any)."""
        found = [self._base_count] if self._base_count is not None else []
        return found + [count for count, step in self._steps if step]

    def kept_counts(self) -> set[int]:
        counts = {count for count, _ in self._steps}
        if self._base_count is not None:
            counts.add(self._base_count)
        return counts

    def new_line(self) -> None:
        """A restart or %reset: the interpreter's points start again, and so do these."""
        self._base, self._base_count, self._steps = None, None, []
        self._collect()

    def manifest_at(self, count: int) -> Manifest | None:
        """The workspace as point `count` had it (the last step of that count); None
        if no point of that count is kept."""
        if self._base is None:
            return None
        current = dict(self._base)
        found = dict(current) if self._base_count == count else None
        for step_count, step in self._steps:
            _apply(current, step)
            if step_count == count:
                found = dict(current)
        return found

    def newest(self) -> Manifest | None:
        if self._base is None:
            return None
        current = dict(self._base)
        for _, step in self._steps:
            _apply(current, step)
        return current

    # --- rewind -----------------------------------------------------------------------

    def rewind(self, target_count: int, rewind_count: int) -> FileChanges:
        """The workspace back to point `target_count`'s files, kept as the rewind's own
        point (`rewind_count`). FilePointsError (the workspace as it was) if it cannot."""
        if self.off is not None:
            raise FilePointsError(self.off)
        now = self.newest()
        target = self.manifest_at(target_count)
        if now is None or target is None:
            raise FilePointsError(f"cell [{target_count}]'s files are not kept")
        now = self._scan(now)  # edits since the last cell (the drive, host magics) are kept first
        self._write_intent(now, target)
        try:
            changes = self._make(now, target)
        except (OSError, ValueError, QuotaExceeded, FilePointsError) as err:
            try:
                self._make(self._scan(now), now)
            finally:
                self._clear_intent()
            raise FilePointsError(f"the files could not be put back ({_line(err)}); they are as they were") from None
        self._clear_intent()
        step: dict[str, Kept | None] = {p: target.get(p) for p in set(now) | set(target) if now.get(p) != target.get(p)}
        self._steps.append((rewind_count, step))
        self._last_rewind = (rewind_count, now, target)
        return changes

    def take_back(self) -> None:
        """The last rewind undone (the interpreter refused to follow): the workspace as
        before it, and its step gone."""
        last, self._last_rewind = self._last_rewind, None
        if last is None:
            return
        count, before, after = last
        self._write_intent(after, before)
        try:
            self._make(self._scan(after), before)
        finally:
            self._clear_intent()
        if self._steps and self._steps[-1][0] == count:
            self._steps.pop()

    def preview(self, target_count: int) -> FileChanges:
        """What a rewind to `target_count` would change in the workspace, changing
        nothing (the panel's dialog says it before the user agrees)."""
        if self.off is not None:
            raise FilePointsError(self.off)
        now, target = self.newest(), self.manifest_at(target_count)
        if now is None or target is None:
            raise FilePointsError(f"cell [{target_count}]'s files are not kept")
        return _difference(self._scan(now), target)

    def _make(self, now: Manifest, target: Manifest) -> FileChanges:
        """Make the workspace (as `now` says it is) what `target` says: what goes
        first (deepest first), then folders, then files."""
        # What goes: what the target lacks, and what is there as the other kind.
        gone = sorted((p for p in now if _kind(target, p) != _kind(now, p)), key=lambda p: p.count("/"), reverse=True)
        changed = [p for p in target if target[p].sha is not None and not target[p].same_content(now.get(p))]
        for path in gone:
            if self._ws.stat(path) is not None:  # a folder that went with its parent is gone already
                self._ws.delete(path, recursive=now[path].sha is None, limits=self._limits())
        for path in sorted((p for p in target if target[p].sha is None and _kind(now, p) != "folder"), key=len):
            if self._ws.stat(path) is None:
                self._ws.mkdir(path, limits=self._limits())
        blobs = self._blob_dir()
        try:
            for path in changed:
                if _kind(now, path) == "file" and path not in gone:
                    self._ws.delete(path, limits=self._limits())
                self._ensure_parents(path, target)
                kept = target[path]
                fd = os.open(str(kept.sha), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=blobs)
                try:
                    self._ws.copy_in(fd, kept.size, path, limits=self._limits(), what=f"putting back {path}")
                finally:
                    os.close(fd)
        finally:
            os.close(blobs)
        return _difference(now, target)

    def _ensure_parents(self, path: str, target: Manifest) -> None:
        parts = path.split("/")[:-1]
        for n in range(1, len(parts) + 1):
            folder = "/".join(parts[:n])
            entry = self._ws.stat(folder)
            if entry is None:
                self._ws.mkdir(folder, limits=self._limits())

    # --- what is on disk ----------------------------------------------------------

    def _scan(self, known: Manifest) -> Manifest:
        """The workspace now, folders included: files whose size and time match
        `known` are taken as known; the others are kept anew."""
        listing = self._ws.find("**", folders=True)
        if listing.cut is not None:
            raise FilePointsError(f"the workspace is too big to keep ({listing.cut})")
        unknown = sum(e.size for e in listing.entries if e.kind == "file" and known.get(e.path) is None)
        if unknown > self.max_bytes:  # before a byte is read: sizes as listed (a sparse file's whole length)
            raise FilePointsError(f"the workspace's {unknown >> 20} MiB of files are more than history_max_bytes keeps")
        out: Manifest = {}
        for entry in listing.entries:
            if entry.kind == "directory":
                out[entry.path] = Kept(None)
                continue
            if entry.kind != "file":
                continue
            old = known.get(entry.path)
            stamp = int(entry.modified * 1e9)
            if old is not None and old.sha is not None and old.size == entry.size and old.mtime_ns == stamp:
                out[entry.path] = old
            else:
                out[entry.path] = self._keep_path(entry.path)
            parts = entry.path.split("/")[:-1]
            for n in range(1, len(parts) + 1):
                out.setdefault("/".join(parts[:n]), Kept(None))
        return out

    def _keep_path(self, path: str) -> Kept | None:
        entry = self._ws.stat(path)
        if entry is None or entry.kind not in ("file", "directory"):
            return None
        if entry.kind == "directory":
            return Kept(None)
        self._fits(entry.size, path)
        fd, size = self._ws.open_file(path)
        try:
            return self._keep(fd, size, int(os.fstat(fd).st_mtime_ns))
        finally:
            os.close(fd)

    def _fits(self, size: int, path: str) -> None:
        """A file is read only if keeping it fits history_max_bytes: a huge (or sparse)
        file is never read just to be dropped (the host's work stays bounded)."""
        if size > self.max_bytes - min(self.bytes_kept, self.max_bytes):
            raise FilePointsError(f"{path} ({size >> 20} MiB) is more than history_max_bytes keeps")

    def _keep(self, fd: int, size: int, mtime_ns: int) -> Kept:
        digest = hashlib.sha256()
        offset = 0
        while offset < size:
            piece = os.pread(fd, min(_PIECE, size - offset), offset)
            if not piece:
                break
            digest.update(piece)
            offset += len(piece)
        sha = digest.hexdigest()
        blobs = self._blob_dir()
        try:
            try:
                os.stat(sha, dir_fd=blobs, follow_symlinks=False)
                return Kept(sha, offset, mtime_ns)  # the same content is kept already
            except FileNotFoundError:
                pass
            tmp = f".{sha}.tmp"
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                          dir_fd=blobs)
            try:
                _clone_or_copy(fd, out, offset)
                os.fsync(out)
            finally:
                os.close(out)
            os.replace(tmp, sha, src_dir_fd=blobs, dst_dir_fd=blobs)
            if self._kept is not None:
                self._kept += offset
        finally:
            os.close(blobs)
        return Kept(sha, offset, mtime_ns)

    def _check_budget(self) -> None:
        if self.bytes_kept > self.max_bytes:
            while self._steps and self.bytes_kept > self.max_bytes:
                self._base_count, step = self._steps.pop(0)
                assert self._base is not None
                _apply(self._base, step)
                self._collect()
            if self.bytes_kept > self.max_bytes:
                self._turn_off("the workspace's files are more than history_max_bytes keeps")

    def _collect(self) -> None:
        """Remove the contents no manifest names."""
        needed: set[str] = set()
        if self._base is not None:
            needed |= {k.sha for k in self._base.values() if k.sha is not None}
        for _, step in self._steps:
            needed |= {k.sha for k in step.values() if k is not None and k.sha is not None}
        try:
            blobs = self._blob_dir()
        except OSError:
            return
        try:
            for name in os.listdir(blobs):
                if name not in needed:
                    try:
                        size = os.stat(name, dir_fd=blobs, follow_symlinks=False).st_size
                        os.unlink(name, dir_fd=blobs)
                    except OSError:
                        continue
                    if self._kept is not None:
                        self._kept -= size
        finally:
            os.close(blobs)

    def _turn_off(self, reason: str) -> None:
        self.off = reason
        self._base, self._base_count, self._steps = None, None, []
        self._collect()
        log.info("file_points.off", reason=reason)

    # --- the rewind's record ------------------------------------------------------------

    def _write_intent(self, before: Manifest, after: Manifest) -> None:
        data = json.dumps({"before": {p: k.as_json() for p, k in before.items()},
                           "after": {p: k.as_json() for p, k in after.items()}}).encode()
        folder = self._folder_fd()
        try:
            tmp = f".{INTENT}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
            try:
                os.write(fd, data) if len(data) < (1 << 30) else None
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, INTENT, src_dir_fd=folder, dst_dir_fd=folder)
            os.fsync(folder)
        finally:
            os.close(folder)

    def _clear_intent(self) -> None:
        try:
            folder = os.open(self._folder, DIR_NOFOLLOW)
        except OSError:
            return
        try:
            os.unlink(INTENT, dir_fd=folder)
            os.fsync(folder)
        except FileNotFoundError:
            pass
        finally:
            os.close(folder)

    def recover(self) -> str | None:
        """A rewind a kill broke off: the workspace back as it was before it. The line
        to show, or None if there was none."""
        try:
            folder = os.open(self._folder, DIR_NOFOLLOW)
        except OSError:
            return None
        try:
            try:
                fd = os.open(INTENT, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            except FileNotFoundError:
                return None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise FilePointsError("the rewind's record is not a file")
                raw = json.loads(os.read(fd, 1 << 30))
                before = {str(p): Kept.from_json(k) for p, k in dict(raw["before"]).items()}
            finally:
                os.close(fd)
        except (OSError, ValueError, KeyError, TypeError, FilePointsError) as err:
            self._clear_intent()
            os.close(folder)
            return f"a rewind was broken off and its record could not be read ({_line(err)}); the files are as it left them"
        os.close(folder)
        try:
            self._make(self._scan(before), before)
        except (OSError, ValueError, QuotaExceeded, FilePointsError) as err:
            return f"a rewind was broken off and its files could not all be put back ({_line(err)})"
        finally:
            self._clear_intent()
        return "a rewind was broken off (the kernel stopped during it): the workspace's files are as before it"


def _kind(manifest: Manifest, path: str) -> str | None:
    return None if path not in manifest else "folder" if manifest[path].sha is None else "file"


def _difference(now: Manifest, target: Manifest) -> FileChanges:
    """What making `now` into `target` creates, changes and removes."""
    changed = [p for p in target if target[p].sha is not None and not target[p].same_content(now.get(p))]
    created = [p for p in changed if _kind(now, p) != "file"]
    created += [p for p in target if target[p].sha is None and _kind(now, p) != "folder"]
    modified = [p for p in changed if _kind(now, p) == "file"]
    removed = [p for p in now if _kind(target, p) != _kind(now, p) and p not in target]
    return FileChanges(sorted(created), sorted(modified), sorted(removed))


def _apply(manifest: Manifest, step: dict[str, Kept | None]) -> None:
    for path, kept in step.items():
        if kept is None:
            manifest.pop(path, None)
            prefix = path + "/"
            for inner in [p for p in manifest if p.startswith(prefix)]:
                del manifest[inner]
        else:
            manifest[path] = kept
            parts = path.split("/")[:-1]  # a file's folders are there with it (the tracker names files only)
            for n in range(1, len(parts) + 1):
                manifest.setdefault("/".join(parts[:n]), Kept(None))


def _clone_or_copy(src: int, dst: int, size: int) -> None:
    import fcntl

    try:
        fcntl.ioctl(dst, _FICLONE, src)
        return
    except OSError as err:
        if err.errno not in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EBADF):
            raise
    offset = 0
    while offset < size:
        sent = os.copy_file_range(src, dst, size - offset, offset, offset)
        if sent == 0:
            break
        offset += sent


def _line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


__all__ = ["FilePoints", "FilePointsError", "Kept"]
