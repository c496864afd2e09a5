"""Where a path of the Sandbox drive leads.

The drive mirrors the server's folders, with each notebook that has a session
shown as a folder of its own: `course/hw1.ipynb/summary.csv` is `summary.csv` in
the workspace of `course/hw1.ipynb`. The first component ending in `.ipynb` ends
the server part of a path; what follows is inside that notebook's workspace.
Server folders are listed only as far as they lead to notebooks with sessions:
the drive shows workspaces, not the server's files (the default drive does that).

A notebook's session is the registry row of its canonical path (as a kernel binds
it: realpath of $JPY_SESSION_NAME) and of this server's owner; a path that leaves
the server's root, or a row whose workspace is gone, leads nowhere. The drive only
ever looks in its own sessions root: another server's sessions do not exist here.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from ...sessions.workspace_fs import is_internal_name, split_relative_path
from ...sessions.layout import workspace_path
from ...sessions.registry import RegistryEntry, SessionRegistry
from .drive_config import SandboxDrive

NOTEBOOK_SUFFIX = ".ipynb"
MAX_LISTED_SESSIONS = 10_000
# What Linux's and macOS's filesystems take: a name of 255 bytes in UTF-8 (NAME_MAX),
# a path of PATH_MAX less its NUL. Checked before any file is touched, so a longer
# name is a 400 that says so, not an ENAMETOOLONG deep in a walk.
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095


def check_names(parts: list[str]) -> None:
    """Refuse (ValueError) a path whose names are not valid Unicode or are longer
    than a filesystem takes. A lone surrogate can come in a JSON body (a URL's path
    must be UTF-8 already); os would write one in the \\udc80-\\udcff range as a raw
    byte, a name no client could send back."""
    total = len(parts) - 1
    for part in parts:
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError(f"the name {part[:40]!r} holds a lone surrogate, which is not text; "
                             "use only valid Unicode characters") from None
        if size > NAME_MAX_BYTES:
            raise ValueError(f"the name {part[:40] + '…'!r} is {size:,} bytes in UTF-8; a name may have at most "
                             f"{NAME_MAX_BYTES}: choose a shorter one")
        total += size
    if total > PATH_MAX_BYTES:
        raise ValueError(f"the path is {total:,} bytes in UTF-8; a path may have at most {PATH_MAX_BYTES:,}: "
                         "use fewer or shorter folder names")


def check_new_name(name: str) -> None:
    """Refuse a name the drive would make that holds a control character (a
    newline, a tab, ESC): legal on disk, but it breaks listings, logs and shell
    lines. A guest may still make one; the drive lists, opens, renames and deletes it."""
    bad = next((ch for ch in name if ord(ch) < 0x20 or ord(ch) == 0x7F), None)
    if bad is not None:
        raise ValueError(f"the name {name[:40]!r} holds the control character {bad!r}; choose a name without one")


@dataclass(frozen=True)
class DrivePlace:
    """A drive path, resolved: a server folder, or a place in a notebook's workspace."""

    path: str  # the drive path, normalised
    notebook: str | None = None  # the notebook's drive (= server) path
    session_id: str | None = None
    inner: str = ""  # the path inside the workspace ("" is the workspace itself)

    @property
    def in_workspace(self) -> bool:
        return self.session_id is not None


class DrivePaths:
    """Resolves drive paths against one server root and one sessions root."""

    def __init__(self, config: SandboxDrive, server_root: str) -> None:
        self.config = config
        self.server_root = os.path.realpath(server_root)
        # One for the server's life: it keeps a connection per thread of the pool the
        # handlers run in, and creates no file until a kernel binds a session.
        self.registry = SessionRegistry(config.root)

    def os_path(self, parts: list[str]) -> str:
        """The canonical host path of server parts, refused if it leaves the root
        (a link in the server's folders pointing out of it)."""
        path = os.path.realpath(os.path.join(self.server_root, *parts))
        if path != self.server_root and not path.startswith(self.server_root + os.sep):
            raise PermissionError(errno.EACCES, f"{'/'.join(parts)!r} is outside this server's folder")
        return path

    def resolve(self, drive_path: str) -> DrivePlace:
        parts = split_relative_path(drive_path.strip("/"), "drive path")
        check_names(parts)
        for i, part in enumerate(parts):
            if part.endswith(NOTEBOOK_SUFFIX):
                notebook = parts[: i + 1]
                entry = self.session_of(self.os_path(notebook))
                shown = "/".join(notebook)
                if entry is None:
                    raise FileNotFoundError(
                        errno.ENOENT, f"{shown!r} has no sandbox session yet; run a cell of it on the sandbox kernel first"
                    )
                inner = parts[i + 1:]
                if any(is_internal_name(p) for p in inner):
                    raise FileNotFoundError(errno.ENOENT, f"{'/'.join(parts)!r} does not exist")
                return DrivePlace("/".join(parts), shown, entry.session_id, "/".join(inner))
        if not os.path.isdir(self.os_path(parts)):
            raise FileNotFoundError(errno.ENOENT, f"{'/'.join(parts)!r} is not a folder of this server")
        return DrivePlace("/".join(parts))

    def _mine(self, entry: RegistryEntry) -> bool:
        return (
            entry.agent_key == self.config.owner
            and entry.notebook_path.endswith(NOTEBOOK_SUFFIX)
            and workspace_path(self.config.root, entry.session_id).is_dir()
        )

    def session_of(self, notebook_os_path: str) -> RegistryEntry | None:
        """The session of a notebook: its most recently used row of this owner."""
        rows = [e for e in self.registry.entries_at(notebook_os_path) if self._mine(e)]
        return max(rows, key=lambda e: e.last_active_at, default=None)

    def folder_entries(self, place: DrivePlace) -> list[tuple[str, str, RegistryEntry]]:
        """What a server folder shows: (name, "notebook" or "folder", newest row below it)."""
        folder = self.os_path(split_relative_path(place.path))
        rows = self.registry.entries_under(folder, MAX_LISTED_SESSIONS)
        shown: dict[str, tuple[str, RegistryEntry]] = {}
        for entry in rows:
            if not self._mine(entry):
                continue
            rel = os.path.relpath(entry.notebook_path, folder)
            name, _, rest = rel.partition(os.sep)
            kind = "folder" if rest else "notebook"
            if kind == "folder" and name.endswith(NOTEBOOK_SUFFIX):
                continue  # a folder named like a notebook would hide its notebooks
            known = shown.get(name)
            if known is None or entry.last_active_at > known[1].last_active_at:
                shown[name] = (kind, entry)
        return [(name, kind, entry) for name, (kind, entry) in sorted(shown.items())]
