"""Which notebook this kernel serves, and so which session it opens.

jupyter_server (>= 2.0.7) puts the notebook's path in $JPY_SESSION_NAME and starts
the kernel in the notebook's folder; some launchers only leave `jupyter_session` in
the connection file. nbclient and nbconvert set neither unless the caller passes
JPY_SESSION_NAME: such a kernel gets a `run` session of its own, keyed on its
kernel id, which a restart (same connection file) keeps.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..sessions.identity import SessionIdentity, derive_session_identity

SESSION_SCOPES = ("notebook", "run", "day")


@dataclass(frozen=True)
class NotebookSource:
    path: str | None  # None: no notebook identity at all
    origin: str  # "JPY_SESSION_NAME", "connection file" or "none"


def find_notebook(environ: dict[str, str] | os._Environ[str], connection_file: str | None) -> NotebookSource:
    name = environ.get("JPY_SESSION_NAME", "").strip()
    if name:
        return NotebookSource(_absolute(name), "JPY_SESSION_NAME")
    if connection_file:
        try:
            with open(connection_file, encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError):
            info = {}
        session = info.get("jupyter_session") if isinstance(info, dict) else None
        if isinstance(session, str) and session.strip():
            return NotebookSource(_absolute(session.strip()), "connection file")
    return NotebookSource(None, "none")


def _absolute(name: str) -> str:
    """JPY_SESSION_NAME is absolute on current servers; older ones gave a path
    relative to the server root while starting the kernel in the notebook's folder."""
    if os.path.isabs(name):
        return name
    if os.path.exists(name):
        return os.path.abspath(name)
    return os.path.abspath(os.path.basename(name))


def kernel_id_from(connection_file: str | None) -> str:
    """`kernel-<id>.json` -> `<id>`: stable across restarts of the same kernel."""
    if not connection_file:
        return f"pid-{os.getpid()}"
    stem = Path(connection_file).stem
    return stem[len("kernel-"):] if stem.startswith("kernel-") else stem


def kernel_identity(
    source: NotebookSource, scope: str, connection_file: str | None, agent_key: str | None
) -> SessionIdentity:
    """The stable identity this kernel binds in the registry."""
    if scope not in SESSION_SCOPES:
        raise ValueError(f"session_scope must be one of {', '.join(SESSION_SCOPES)}, got {scope!r}")
    if source.path is None:
        # No notebook: one session per kernel, named by where it runs and its id.
        return derive_session_identity(os.getcwd(), "run", kernel_id_from(connection_file), agent_key)
    if scope == "run":
        return derive_session_identity(source.path, "run", kernel_id_from(connection_file), agent_key)
    return derive_session_identity(source.path, scope, None, agent_key)
