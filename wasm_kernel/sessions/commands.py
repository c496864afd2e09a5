"""What `wasm-kernel sessions ...` does, as data: the CLI (cli/sessions_command.py) only formats.

Read-only commands (list, show) create nothing under the root and never take a
lease a sandbox could notice (leases.peek_in_use). Sizes are those prune reports
(safe_fs.tree_size: no link followed, each inode once). Failures a user can cause
raise CommandError with a one-line message.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.logger import SandboxLogger
from .layout import lease_path, metadata_path
from .leases import peek_in_use, try_exclusive_lease
from .lifecycle import delete_session_workspace, forget_deleted_session
from .metadata import CorruptMetadataError, format_timestamp, read_metadata, utc_now
from .registry import RegistryEntry, RegistryError, SessionRegistry
from .removal import remove_private_files
from .saved_state import state_on_disk
from ..host.safe_fs import UnsafePathError, iter_tree, lstat_at, open_dir, open_root, remove_entry_at, tree_size
from .session_ids import is_session_id, validate_session_id

if TYPE_CHECKING:
    from .pruning import PruneResult


class CommandError(Exception):
    """A user-facing failure: its message is one line, printed as is."""


class _Quiet:
    """A structlog-style logger that drops everything: the CLI reports results itself."""

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def quiet_logger() -> SandboxLogger:
    return SandboxLogger(_Quiet())


@dataclass
class SessionInfo:
    session_id: str
    notebook: str | None  # from the identity registry: the notebook that names the session, if one does
    created_at: str | None  # None: legacy (no metadata) or corrupted
    updated_at: str | None
    size_bytes: int | None  # None: not a real directory (a symlink in its place)
    in_use: bool
    metadata_status: str = "ok"  # ok | missing | corrupted
    kind: str = "directory"  # directory | symlink | other | missing
    # The registry's mode: "notebook"/"day" (a notebook names the session) or "run"
    # (a kernel without a usable notebook name: its session is its own, and
    # started_in is the folder it ran in), None without a registry entry.
    mode: str | None = None
    started_in: str | None = None
    # show only:
    workspace_path: str | None = None
    metadata_path: str | None = None
    lease_path: str | None = None
    metadata: dict[str, Any] | None = None
    metadata_error: str | None = None
    file_count: int | None = None
    registry_entry: dict[str, Any] | None = None
    # The interpreter state a shut-down kernel saved (saved_state.py): bytes and when.
    saved_state: dict[str, Any] | None = None

    def to_dict(self, detailed: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not detailed:
            for key in ("workspace_path", "metadata_path", "lease_path", "metadata", "metadata_error",
                        "file_count", "registry_entry", "saved_state"):
                d.pop(key)
        return d


# --- helpers -------------------------------------------------------------------------


def _check_root(root: Path) -> int:
    try:
        return open_root(root)
    except OSError as err:
        raise CommandError(f"workspace root {str(root)!r}: {_reason(err)}") from None


def _reason(err: OSError) -> str:
    if err.errno == errno.ENOENT:
        return "does not exist"
    if err.errno == errno.ENOTDIR:
        return "is not a directory"
    return err.strerror or str(err)


def _session_id(value: str) -> str:
    try:
        return validate_session_id(value)
    except ValueError:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise CommandError(f"invalid session id {shown!r}: expected a UUID such as 1b4e28ba-2fa1-41d2-883f-0016d3cca427") from None


class _Registry:
    """The identity registry, for the notebook each session belongs to. A broken one
    (not a database, unreadable: RegistryError) gives no notebook rather than
    stopping list and show; anything else is a bug and is not hidden."""

    def __init__(self, root: Path) -> None:
        self._registry = SessionRegistry(root)  # touches nothing on disk until a lookup

    def entry(self, session_id: str) -> RegistryEntry | None:
        try:
            return self._registry.lookup(session_id)
        except RegistryError:
            return None

    def close(self) -> None:
        self._registry.close()


def _notebook(entry: RegistryEntry | None) -> tuple[str | None, str | None, str | None]:
    """(notebook, mode, started_in) from a registry entry: a `run` identity's path is
    the folder its kernel ran in, not a notebook, as the kernel's %session says."""
    if entry is None:
        return None, None, None
    path, mode = str(entry.notebook_path), entry.mode
    return (None, mode, path) if mode == "run" else (path, mode, None)


def _entry_dict(entry: RegistryEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    raw = asdict(entry)
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in raw.items()}


def _describe(root: Path, root_fd: int, session_id: str, registry: _Registry, detailed: bool) -> SessionInfo | None:
    st = lstat_at(root_fd, session_id)
    kind = "missing" if st is None else "directory" if stat.S_ISDIR(st.st_mode) else "symlink" if stat.S_ISLNK(st.st_mode) else "other"
    created = updated = error = None
    meta_dict = None
    try:
        meta = read_metadata(root, session_id)
        status = "ok" if meta is not None else "missing"
        if meta is not None:
            created, updated = format_timestamp(meta.created_at), format_timestamp(meta.updated_at)
            meta_dict = meta.to_dict()
    except CorruptMetadataError as err:
        status, error = "corrupted", str(err)
    if kind == "missing" and status == "missing":
        return None
    size = count = None
    if kind == "directory":
        try:
            ws_fd = open_dir(root_fd, session_id, session_id)
        except (OSError, ValueError):
            pass
        else:
            try:
                size = tree_size(ws_fd)
                if detailed:
                    count = _count_files(ws_fd)
            finally:
                os.close(ws_fd)
    try:
        in_use = peek_in_use(root, session_id)
    except OSError:
        in_use = False
    entry = registry.entry(session_id)
    notebook, mode, started_in = _notebook(entry)
    info = SessionInfo(session_id, notebook, created, updated, size, in_use, status, kind, mode, started_in)
    if detailed:
        info.workspace_path = str(root / session_id)
        info.metadata_path = str(metadata_path(root, session_id))
        info.lease_path = str(lease_path(root, session_id))
        info.metadata = meta_dict
        info.metadata_error = error
        saved = state_on_disk(root, session_id)
        if saved is not None:
            info.saved_state = {"bytes": saved.bytes,
                                "saved_at": format_timestamp(datetime.fromtimestamp(saved.saved_at, timezone.utc))}
        info.file_count = count
        info.registry_entry = _entry_dict(entry)
    return info


def _count_files(ws_fd: int) -> int:
    return sum(1 for _, s in iter_tree(ws_fd) if not stat.S_ISDIR(s.st_mode))


def _files_at(root_fd: int, session_id: str) -> int:
    """How many files (not folders) a session's workspace holds; 0 if it has none
    yet. UnsafePathError (a ValueError) or OSError if it cannot be read as one."""
    try:
        ws_fd = open_dir(root_fd, session_id, session_id)
    except FileNotFoundError:
        return 0
    try:
        return _count_files(ws_fd)
    finally:
        os.close(ws_fd)


# --- commands ------------------------------------------------------------------------


def list_sessions(workspace_root: Path) -> list[SessionInfo]:
    """Every UUID-named entry under the root, oldest update first (legacy ones last)."""
    root = Path(workspace_root)
    root_fd = _check_root(root)
    registry = _Registry(root)
    try:
        with os.scandir(root_fd) as it:
            names = [de.name for de in it if is_session_id(de.name)]
        infos = [i for i in (_describe(root, root_fd, n, registry, False) for n in names) if i is not None]
    finally:
        registry.close()
        os.close(root_fd)
    infos.sort(key=lambda i: (i.updated_at is None, i.updated_at or "", i.session_id))
    return infos


def show_session(workspace_root: Path, session_id: str) -> SessionInfo:
    session_id = _session_id(session_id)
    root = Path(workspace_root)
    root_fd = _check_root(root)
    registry = _Registry(root)
    try:
        info = _describe(root, root_fd, session_id, registry, True)
    finally:
        registry.close()
        os.close(root_fd)
    if info is None:
        raise CommandError(f"no session {session_id} under {str(root)!r}")
    return info


_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)\s*", re.IGNORECASE)
_UNIT_HOURS = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "": 1.0, "d": 24.0, "w": 168.0}


def parse_duration_hours(text: str) -> float:
    """'30m', '24h', '7d', '2w', '90s', or a bare number of hours -> hours."""
    m = _DURATION.fullmatch(text)
    if m is None:
        raise CommandError(f"bad duration {text!r}: expected e.g. 30m, 24h, 7d or a number of hours")
    hours = float(m.group(1)) * _UNIT_HOURS[m.group(2).lower()]
    if not math.isfinite(hours):
        raise CommandError(f"bad duration {text!r}: too large")
    return hours


def prune(workspace_root: Path, older_than: str, dry_run: bool, states_older_than: str | None = None) -> PruneResult:
    from .pruning import prune_sessions  # the CLI's prune alone: not every %session's import

    hours = parse_duration_hours(older_than)
    state_hours = None if states_older_than is None else parse_duration_hours(states_older_than)
    root = Path(workspace_root)
    os.close(_check_root(root))
    try:
        return prune_sessions(hours, root, dry_run=dry_run, logger=quiet_logger(), states_older_than_hours=state_hours)
    except OSError as err:
        raise CommandError(f"workspace root {str(root)!r}: {_reason(err)}") from None


@dataclass
class RemoveResult:
    session_id: str
    workspace_path: str
    size_bytes: int | None
    was_in_use: bool
    forced: bool = False
    notes: list[str] = field(default_factory=list)


def remove_session(workspace_root: Path, session_id: str, force: bool = False) -> RemoveResult:
    """Delete a session's workspace, metadata and registry row; refuse if a sandbox
    holds it, unless force.

    Without force the removal happens under the session's exclusive lease, so no
    sandbox can open the session between the check and the delete.
    """
    session_id = _session_id(session_id)
    root = Path(workspace_root)
    root_fd = _check_root(root)
    lookup = _Registry(root)
    try:
        info = _describe(root, root_fd, session_id, lookup, False)
        if info is None:
            raise CommandError(f"no session {session_id} under {str(root)!r}")
        lease = try_exclusive_lease(root, session_id)
        if lease is None:
            if not force:
                raise CommandError(f"session {session_id} is in use by an open sandbox; close it first, or use --force")
            delete_session_workspace(session_id, root, logger=quiet_logger())
            return RemoveResult(session_id, str(root / session_id), info.size_bytes, True, True,
                                ["an open sandbox still holds the session: it keeps running on an empty, unlinked folder"])
        leased_at = utc_now()
        deleted = False
        try:
            try:
                remove_entry_at(root_fd, session_id)
            except UnsafePathError as err:
                raise CommandError(str(err)) from None
            except OSError as err:
                raise CommandError(f"cannot delete session {session_id}: {err.strerror or err}") from None
            remove_private_files(root, session_id)
            deleted = True
            # Still under the lease: the identity's next bind gets a fresh session.
            problem = forget_deleted_session(root, session_id, leased_at, quiet_logger())
        finally:
            lease.release(unlink=deleted)
        notes = [] if problem is None else [f"the session's identity-registry row was kept: {problem}"]
        return RemoveResult(session_id, str(root / session_id), info.size_bytes, False, force, notes)
    finally:
        lookup.close()
        os.close(root_fd)


class SessionInUse(CommandError):
    """A session a sandbox holds (its lease is taken): it is never removed."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} is in use by a running kernel; shut that kernel down first")
        self.session_id = session_id


class SessionHoldsFiles(CommandError):
    """A session whose workspace holds files: only an empty one is removed for a move."""

    def __init__(self, session_id: str, files: int) -> None:
        super().__init__(f"session {session_id} holds {files} file{'s' if files != 1 else ''}")
        self.session_id, self.files = session_id, files


def session_files(workspace_root: Path, session_id: str) -> int | None:
    """How many files a session's workspace holds, read only (no lease); None if it
    cannot be read."""
    root = Path(workspace_root)
    try:
        root_fd = open_root(root)
    except OSError:
        return None
    try:
        return _files_at(root_fd, validate_session_id(session_id))
    except (OSError, ValueError):
        return None
    finally:
        os.close(root_fd)


def remove_empty_sessions(workspace_root: Path, session_ids: list[str]) -> None:
    """Delete sessions (workspace, private files, registry row) that are in no use and
    hold no file, for `sessions move --replace`: all, or none. Every session's
    exclusive lease is taken first, as `sessions rm` takes it without --force, and
    held while its files are counted and deleted, so no kernel opens one between the
    count and the delete. SessionInUse or SessionHoldsFiles (nothing changed)."""
    root = Path(workspace_root)
    root_fd = _check_root(root)
    leases: list[tuple[str, Any]] = []
    deleted: set[str] = set()
    try:
        for session_id in map(validate_session_id, session_ids):
            lease = try_exclusive_lease(root, session_id)
            if lease is None:
                raise SessionInUse(session_id)
            leases.append((session_id, lease))
            try:
                files = _files_at(root_fd, session_id)
            except (OSError, ValueError) as err:
                raise CommandError(f"session {session_id}'s workspace cannot be read: {err}") from None
            if files:
                raise SessionHoldsFiles(session_id, files)
        leased_at = utc_now()
        for session_id, _ in leases:
            try:
                remove_entry_at(root_fd, session_id)
            except (OSError, ValueError) as err:
                raise CommandError(f"cannot delete session {session_id}: {err}") from None
            remove_private_files(root, session_id)
            deleted.add(session_id)
            forget_deleted_session(root, session_id, leased_at, quiet_logger())
    finally:
        for session_id, lease in leases:
            lease.release(unlink=session_id in deleted)
        os.close(root_fd)
