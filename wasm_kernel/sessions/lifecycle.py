"""Create, resume and delete sessions.

Stateless helpers, as the seeds ask: the workspace folder is the source of truth
for a session's files, the private metadata file for its age, and the lease file
for whether a sandbox has it open.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ..core.logger import SandboxLogger
from ..core.policy import ExecutionPolicy
from ..core.sandbox import GuestOptions, RuntimeType
from .package_folder import ensure_packages_dir
from .layout import DEFAULT_WORKSPACE_ROOT, ensure_private_dirs
from .leases import acquire_lease, try_exclusive_lease
from .metadata import create_metadata, utc_now
from .registry import RegistryError, SessionRegistry
from .removal import remove_session_files
from ..host.safe_fs import UnsafePathError, lstat_at, open_root
from ..host.set_aside import Notes
from .sandbox import SessionSandbox
from .session_workspace import SessionWorkspace
from .session_ids import new_session_id, validate_session_id


def create_session_sandbox(
    runtime: RuntimeType = RuntimeType.PYTHON,
    policy: ExecutionPolicy | None = None,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    logger: SandboxLogger | None = None,
) -> tuple[str, SessionSandbox]:
    """A new session: a fresh UUIDv4, its empty workspace `<root>/<uuid>/` mounted at
    /app, its metadata, and a sandbox holding its lease."""
    session_id = new_session_id()
    sandbox = _open_session(session_id, runtime, policy, Path(workspace_root), logger, "session.created")
    return session_id, sandbox


def get_session_sandbox(
    session_id: str,
    runtime: RuntimeType = RuntimeType.PYTHON,
    policy: ExecutionPolicy | None = None,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    logger: SandboxLogger | None = None,
    *,
    guest_options: GuestOptions | None = None,
    notes: Notes | None = None,
) -> SessionSandbox:
    """A sandbox on an existing session's workspace, files from earlier sandboxes kept.

    A well-formed id with no workspace yet gets a fresh empty one (and metadata, so
    it can be pruned later); a legacy workspace without metadata is used as it is.
    notes: a line for each entry found at a private file's or folder's place that
    is not one, and set aside (host/set_aside.py).
    """
    session_id = validate_session_id(session_id)
    return _open_session(session_id, runtime, policy, Path(workspace_root), logger, "session.retrieved", guest_options,
                         notes)


def _open_session(
    session_id: str,
    runtime: RuntimeType,
    policy: ExecutionPolicy | None,
    root: Path,
    logger: SandboxLogger | None,
    event: str,
    guest_options: GuestOptions | None = None,
    notes: Notes | None = None,
) -> SessionSandbox:
    if RuntimeType(runtime) is not RuntimeType.PYTHON:
        raise ValueError(f"unsupported runtime {runtime!r}; the only runtime is {RuntimeType.PYTHON.value!r}")
    logger = logger or SandboxLogger()
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    ensure_private_dirs(root, notes)
    # Lease first: a prune that is deciding about this session finishes before we
    # look at the workspace, and none can start while we hold it.
    lease = acquire_lease(root, session_id, notes)
    try:
        created = _ensure_workspace_dir(root, session_id)
        if created:
            create_metadata(root, session_id, logger)
        # The session's %pip packages are the guest's too, read-only (packages.py); its
        # disk is one ledger with the session's other writers (session_workspace.py).
        files = SessionWorkspace(root, session_id)
        guest_options = replace(guest_options or GuestOptions(), packages=ensure_packages_dir(root, session_id, notes),
                                disk_ledger=files.ledger)
        sandbox = SessionSandbox(
            root / session_id, policy, logger, session_id=session_id, workspace_root=root, lease=lease,
            guest_options=guest_options, files=files,
        )
    except BaseException:
        lease.release()
        raise
    logger.log_event(event, session_id=session_id, workspace_path=str(sandbox.workspace), created=created)
    return sandbox


def _ensure_workspace_dir(root: Path, session_id: str) -> bool:
    """Make `<root>/<uuid>` if missing (True if made). A symlink or a file there is
    refused: the guest would get whatever it points to as /app."""
    root_fd = open_root(root)
    try:
        try:
            os.mkdir(session_id, 0o755, dir_fd=root_fd)
            return True
        except FileExistsError:
            pass
        st = lstat_at(root_fd, session_id)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(f"session workspace {str(root / session_id)!r} is a symbolic link; refusing to mount it")
        if st is None or not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, f"session workspace {str(root / session_id)!r} is not a directory")
        return False
    finally:
        os.close(root_fd)


def delete_session_workspace(
    session_id: str,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    *,
    logger: SandboxLogger | None = None,
) -> None:
    """Remove a session's workspace, its metadata and its identity-registry row (if
    there is a registry). Idempotent: a missing session is fine.

    Nothing is followed: a symlink in place of the workspace is removed as a link,
    and links inside are removed, never their targets. An explicit delete does not
    wait for open sandboxes (prune does skip them); their lock file is then left for
    them, and they keep running on an empty, unlinked folder.
    """
    session_id = validate_session_id(session_id)
    logger = logger or SandboxLogger()
    root = Path(workspace_root)
    if not root.is_dir():
        logger.log_event("session.deleted", session_id=session_id, workspace_path=str(root / session_id), existed=False)
        return
    lease = try_exclusive_lease(root, session_id)
    try:
        leased_at = utc_now()
        existed = remove_session_files(root, session_id)
        # Under the lease when we have it, so no sandbox reopens the session between the two steps.
        forget_deleted_session(root, session_id, leased_at, logger)
    finally:
        if lease is not None:
            lease.release(unlink=True)
    logger.log_event(
        "session.deleted", session_id=session_id, workspace_path=str(root / session_id),
        existed=existed, in_use=lease is None,
    )


def forget_deleted_session(
    workspace_root: Path,
    session_id: str,
    bound_before: datetime,
    logger: SandboxLogger,
    registry: SessionRegistry | None = None,
) -> str | None:
    """Drop the identity-registry row of a session whose files were just deleted
    (SessionRegistry.forget_session), so its notebook gets a fresh session next time.

    For every deleter: delete_session_workspace, prune (which passes one `registry`
    for its whole run) and the CLI's rm. Their files are already gone, so a registry
    that cannot be used is a warning, not a failure; its text is returned (else None).
    No registry file: nothing to do, and none is created.
    """
    own = registry is None
    if registry is None:
        registry = SessionRegistry(workspace_root)
    try:
        registry.forget_session(session_id, bound_before)
    except RegistryError as err:
        logger.log_event("session.registry.forget_failed", level="warning", session_id=session_id, error=str(err))
        return str(err)
    finally:
        if own:
            registry.close()
    return None
