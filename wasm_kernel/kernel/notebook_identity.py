"""Which notebook this kernel serves, and so which session it opens.

jupyter_server (>= 2.0.7) puts the notebook's path in $JPY_SESSION_NAME and starts
the kernel in the notebook's folder; some launchers only leave `jupyter_session` in
the connection file. nbclient and nbconvert set neither unless the caller passes
JPY_SESSION_NAME: such a kernel gets a `run` session of its own, keyed on its
kernel id, which a restart (same connection file) keeps and its shutdown removes
(is_unnamed, session_lifecycle.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..sessions.identity import SessionIdentity, derive_session_identity, escape_part
from .notebook_roots import NotebookRoots, Placement

SESSION_SCOPES = ("notebook", "run", "day")


@dataclass(frozen=True)
class NotebookSource:
    path: str | None  # None: no notebook identity at all
    origin: str  # "JPY_SESSION_NAME", "connection file" or "none"
    problem: str | None = None  # why a name was given but could not be used (no host path in it)
    outside: bool = False  # the problem is its folder's place: outside every root the kernel trusts


def find_notebook(environ: dict[str, str] | os._Environ[str], connection_file: str | None) -> NotebookSource:
    name = environ.get("JPY_SESSION_NAME", "").strip()
    if name:
        return _resolved(name, "JPY_SESSION_NAME")
    if connection_file:
        try:
            with open(connection_file, encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError):
            info = {}
        session = info.get("jupyter_session") if isinstance(info, dict) else None
        if isinstance(session, str) and session.strip():
            return _resolved(session.strip(), "connection file")
    return NotebookSource(None, "none")


def place_notebook(source: NotebookSource, roots: NotebookRoots, cwd: str) -> tuple[NotebookSource, Placement]:
    """The notebook's folder (its parent, or the kernel's cwd when no notebook is
    named) placed in the kernel's roots. A notebook whose folder is refused there
    names no session either: its path was a client's choice, and the kernel gets a
    session of its own (kernel_identity). A placed one is named by its link-free path."""
    folder = Path(source.path).parent if source.path is not None else Path(cwd)
    placement = roots.place(folder)
    if source.path is None:
        return source, placement
    if placement.path is None:
        return NotebookSource(None, source.origin, placement.refused, outside=True), placement
    return replace(source, path=str(placement.path / Path(source.path).name)), placement


def is_unnamed(source: NotebookSource) -> bool:
    """Whether nothing named a notebook at all: an unattended run (nbconvert, nbclient,
    papermill, nbgrader, otter), whose session no later kernel can find, so it goes
    when the kernel shuts down. A name that could not be used is not this: a person
    in JupyterLab may have given it (a gateway's remote path), and keeps the files."""
    return source.path is None and source.origin == "none"


def _resolved(name: str, origin: str) -> NotebookSource:
    """The notebook a name means, or why it means none. A name whose folder does
    not exist here is not a notebook this kernel can know (a session label, a path
    on another machine): keyed on, two such labels in one folder would share a
    session, so it gets none.

    Nor is a name that is a folder: Jupyter Server sends os.path.join(cwd, "") (e.g.
    "/home/u/course/") for a session created with an empty name, and keyed on it
    every such notebook of the folder would share one session. A trailing "/" says
    folder even where nothing exists yet."""
    if "\0" in name:
        return NotebookSource(None, origin, "it contains a NUL character")
    try:
        path = _absolute(name)
    except OSError:
        return NotebookSource(None, origin, "it is relative and the kernel's folder is gone")
    if name.endswith("/") or os.path.isdir(path):
        return NotebookSource(None, origin, "it names a folder, not a notebook")
    if not os.path.isdir(os.path.dirname(path)):
        return NotebookSource(None, origin, "its folder does not exist on this machine")
    return NotebookSource(path, origin)


def _absolute(name: str) -> str:
    """JPY_SESSION_NAME is absolute on current servers. A relative one is taken
    against the kernel's cwd, folders and all: dropping them (as once, to guess at
    older servers) made a/lesson.ipynb and b/lesson.ipynb one notebook."""
    return name if os.path.isabs(name) else os.path.abspath(name)


def kernel_id_from(connection_file: str | None) -> str:
    """`kernel-<id>.json` -> `<id>`: stable across restarts of the same kernel."""
    if not connection_file:
        return f"pid-{os.getpid()}"
    stem = Path(connection_file).stem
    # A connection file's name may hold ':' or spaces (a launcher's choice): escaped,
    # never refused, so the kernel starts and two names stay two sessions.
    return escape_part(stem[len("kernel-"):] if stem.startswith("kernel-") else stem) or "kernel"


def kernel_identity(
    source: NotebookSource, scope: str, connection_file: str | None, agent_key: str | None, where: str | None = None
) -> tuple[SessionIdentity, str | None]:
    """The stable identity this kernel binds in the registry, and a notice for the
    notebook when its name could not be used: then the kernel gets a `run` session
    of its own rather than one that might be another notebook's, labelled `where`
    (default: the cwd) beside its kernel id."""
    if scope not in SESSION_SCOPES:
        raise ValueError(f"session_scope must be one of {', '.join(SESSION_SCOPES)}, got {scope!r}")
    problem = source.problem
    if source.path is not None:
        try:
            if scope == "run":
                return derive_session_identity(source.path, "run", kernel_id_from(connection_file), agent_key), None
            return derive_session_identity(source.path, scope, None, agent_key), None
        except ValueError as err:
            problem = str(err).replace(source.path, "the name")
    # No usable notebook: one session per kernel, named by where it runs and its id.
    identity = derive_session_identity(where or working_folder(), "run", kernel_id_from(connection_file), agent_key)
    if problem is None:
        return identity, None
    if source.outside:  # one line for the folder and the session (FolderChoice.quiet)
        return identity, (
            "wasm-kernel: the notebook's folder is not shown in /app and this kernel has a session of its own "
            f"(a restart keeps it, a new kernel does not), because {problem}"
        )
    return identity, (
        f"wasm-kernel: the notebook's name ({source.origin}) cannot identify its session because {problem}; "
        "this kernel has a session of its own, which a restart keeps and a new kernel does not"
    )


def working_folder() -> str:
    """The kernel's cwd; "/" once it is gone."""
    try:
        return os.getcwd()
    except OSError:
        return "/"
