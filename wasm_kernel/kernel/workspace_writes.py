"""The kernel's own writes to its session's workspace (the magics', the lab panel's),
and the one line a notebook sees when one fails.

They go through the session's SessionWorkspace (session.files), which walks no link
and charges the session's disk ledger before a byte is written, as the guest's own
writes are, with every other writer of the session (its other kernels, the drive).
Errors never show host paths: the notebook is untrusted.
"""

from __future__ import annotations

import errno

from ..sessions.session_workspace import QuotaExceeded
from .limit_values import format_size
from .magic_error import MagicError
from .session_protocol import SessionView


def file_error(err: BaseException, path: str, session: SessionView) -> MagicError:
    """One line about `path`, with no host path in it."""
    if isinstance(err, FileNotFoundError):
        return MagicError(f"{path}: no such file in the session workspace; %files lists what is there")
    if isinstance(err, IsADirectoryError):
        return MagicError(f"{path} is a folder; use %files {path.rstrip('/')}/* to list it")
    if isinstance(err, FileExistsError):
        return MagicError(f"{path} already exists")
    if isinstance(err, OSError) and err.errno == errno.ENOTEMPTY:
        return MagicError(f"{path} is a folder that is not empty; use %rm -r {path} to delete it and its contents")
    text = str(err).replace(str(session.workspace_root), "<workspace root>")
    if isinstance(err, OSError) and err.strerror:
        text = err.strerror
    return MagicError(f"{path}: {text}")


def write_in_workspace(session: SessionView, path: str, data: bytes, *, part: int = 1,
                       what: str = "%%writefile") -> bool:
    """One part of a host write (SessionWorkspace.upload's numbering: 1 starts or
    replaces the file, 2, 3, ... and -1 append), charged first. True if the file existed."""
    policy = session.policy
    try:
        return session.files.upload(path, data, part=part, limits=(policy.disk_max_bytes, policy.disk_max_files),
                                    what=f"{what}: writing {path}")
    except QuotaExceeded as err:
        raise MagicError(
            f"{err} of {format_size(policy.disk_max_bytes)} and {policy.disk_max_files} files; free space with %rm first"
        ) from None
    except (ValueError, OSError) as err:
        raise file_error(err, path, session) from None


def delete_in_workspace(session: SessionView, path: str, recursive: bool) -> None:
    """A host delete (%rm, the panel's): what it frees goes back to the session's ledger."""
    policy = session.policy
    try:
        session.files.delete(path, recursive=recursive, limits=(policy.disk_max_bytes, policy.disk_max_files))
    except (ValueError, OSError) as err:
        raise file_error(err, path, session) from None
