"""Which folder a kernel shows read-only under /app: the notebook's own.

On ipykernel, relative paths resolve in the kernel's cwd, which Jupyter sets to
the notebook's folder. So the folder is the notebook's parent when the kernel
knows its notebook, else the kernel's cwd (nbclient sets it from the notebook's
path). Both are a client's choice on a Jupyter Server, so the folder must first be
placed in a root the kernel trusts (notebook_roots.py). Then it is refused, with
one notice for the first cell, when showing it would show far more than a
notebook's data or what is private to the machine's Jupyter: a filesystem root, a
home folder (another user's, under a root wider than it), a folder holding the
kernel's own sessions or caches or lying in any sessions folder, a system
temporary folder, Jupyter's data, config and runtime folders, JupyterHub's own
folder, a folder in or holding what is private to kernels (guests' scratch
folders, connection files), or one with more files than the operator allows. The
notice never names a host path.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..runtime.guest_scratch import scratch_parent
from ..runtime.notebook_folder_fs import is_hidden
from ..runtime.notebook_overlay import NotebookFolder
from .notebook_identity import NotebookSource
from .notebook_roots import Placement

# Names that say a folder is JupyterHub's own (its cookie secret and database) or a
# Jupyter runtime folder (servers' and kernels' connection files, with their keys).
HUB_FILES = ("jupyterhub_cookie_secret", "jupyterhub.sqlite")
CONNECTION_FILES = ("kernel-*.json", "jpserver-*.json")
SESSIONS_PRIVATE = ".wasm-kernel"  # every sessions root holds it (sessions/layout.py)


@dataclass(frozen=True)
class FolderChoice:
    folder: NotebookFolder | None
    refused: str | None = None  # why the folder is not shown (no host path in it)
    quiet: bool = False  # another notice says it already (the identity's: one line for one refusal)

    @property
    def notice(self) -> str | None:
        """One line for the first cell, when the folder is refused."""
        if self.refused is None or self.quiet:
            return None
        return (
            f"wasm-kernel: the notebook's folder is not shown in /app because {self.refused}; "
            "only the session workspace is. Keep the notebook and its data in a folder of their own."
        )


def _home_folders() -> dict[Path, int]:
    """Every user's home folder (real path) and its owner's uid."""
    homes = {Path(os.path.realpath(os.path.expanduser("~"))): os.geteuid()}
    try:
        for entry in pwd.getpwall():
            if entry.pw_dir not in ("", "/"):
                homes.setdefault(Path(os.path.realpath(entry.pw_dir)), entry.pw_uid)
    except (KeyError, OSError):
        pass
    return homes


def private_kernel_folders(connection_file: str | None) -> list[Path]:
    """What is private to kernels on this machine: guests' scratch folders (every
    kernel's /tmp) and Jupyter's runtime folder (every kernel's connection key)."""
    from jupyter_core.paths import jupyter_runtime_dir

    folders = [scratch_parent(), Path(jupyter_runtime_dir())]
    if connection_file:
        # A launcher may write connection files straight into /tmp: that folder's rule
        # (never shown, never held) covers them, and a folder inside /tmp stays fine.
        parent = Path(os.path.realpath(Path(connection_file).parent))
        if parent not in temporary_folders():
            folders.append(parent)
    return folders


def jupyter_folders() -> list[Path]:
    """Jupyter's own folders for this process, the ones that hold what is private:
    data (the sessions by default), config (the user's, and the operator's folders on
    $JUPYTER_CONFIG_PATH: a course's limits) and runtime (connection files). The
    shared data and config folders of an environment (kernel specs, extensions'
    settings) are public and may sit beside a notebook (a project's venv/)."""
    from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir, jupyter_runtime_dir

    found = [jupyter_data_dir(), jupyter_config_dir(), jupyter_runtime_dir()]
    found += [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if os.path.isabs(p)]
    return [Path(os.path.realpath(p)) for p in dict.fromkeys(found)]


def temporary_folders() -> list[Path]:
    """The system's shared temporary folders: every user's and process's files, never
    one notebook's. A folder inside one is fine (a notebook in /tmp/course/)."""
    found = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
    return [Path(os.path.realpath(p)) for p in found if os.path.isdir(p)]


def notebook_folder_of(source: NotebookSource, cwd: str) -> Path:
    if source.path is not None:
        parent = Path(source.path).parent
        if parent.is_dir():
            return parent
    return Path(cwd)


def _holds(folder: Path, path: Path) -> bool:
    """`path` is `folder` or shows beneath it (no hidden name on the way)."""
    return path.is_relative_to(folder) and not any(is_hidden(p) for p in path.relative_to(folder).parts)


def _private_marker(names: Iterable[str], is_dir: dict[str, bool]) -> str | None:
    """What a folder's names say it is, if it is private to Jupyter or JupyterHub."""
    for name in names:
        if name in HUB_FILES:
            return "JupyterHub's own folder (its cookie secret or database)"
        if name == SESSIONS_PRIVATE and is_dir.get(name):
            return "a sessions folder (every session's workspace and saved interpreter)"
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in CONNECTION_FILES):
            return "a Jupyter runtime folder (connection files, with their keys)"
    return None


@dataclass(frozen=True)
class Survey:
    files: int  # visible entries, counted up to the limit (one past it at most)
    private: str | None = None  # what a folder shown would be, if private (see _private_marker)


def survey(folder: Path, max_depth: int, limit: int) -> Survey:
    """The folder's visible entries (not hidden, not deeper than max_depth), counted
    without following links and without recursion, stopping once past `limit`; and
    whether the folder or a folder shown beneath it is private to Jupyter."""
    count = 0
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        path, depth = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            continue
        names = [e.name for e in entries]
        private = _private_marker(names, {e.name: _is_dir(e) for e in entries if e.name == SESSIONS_PRIVATE})
        if private is not None:
            return Survey(count, private)
        for entry in entries:
            if is_hidden(entry.name):
                continue
            count += 1
            if count > limit:
                return Survey(count)
            if depth + 1 < max_depth and _is_dir(entry):
                stack.append((Path(entry.path), depth + 1))
    return Survey(count)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def count_files(folder: Path, max_depth: int, limit: int) -> int:
    """Visible entries (see survey)."""
    return survey(folder, max_depth, limit).files


def choose_notebook_folder(
    placement: Placement,
    *,
    mode: str,
    max_files: int,
    max_depth: int,
    protected: Iterable[Path],
    private: Iterable[Path] = (),
    quiet: bool = False,
) -> FolderChoice:
    """The folder to show, or None and why not (mode "off": none, silently).
    `placement`: the folder as the kernel's roots placed it (notebook_roots.py);
    `protected`: the kernel's own sessions and caches; `private`: what is private to
    kernels (other kernels' scratch, connection files); neither may be shown, or be
    the folder, or lie inside it. `quiet`: a refusal of the placement is said by
    another notice."""
    if mode == "off":
        return FolderChoice(None)
    if placement.path is None:
        return FolderChoice(None, placement.refused, quiet)
    folder = placement.path
    refused = _why_refused(folder, placement.root, max_files, max_depth, protected, private)
    if refused is not None:
        return FolderChoice(None, refused)
    return FolderChoice(NotebookFolder(folder, max_depth))


def _why_refused(folder: Path, root: Path | None, max_files: int, max_depth: int, protected: Iterable[Path],
                 private: Iterable[Path] = ()) -> str | None:
    try:
        str(folder).encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8, which the sandbox cannot mount"
    try:
        if not stat.S_ISDIR(os.stat(folder).st_mode):
            return "it is not a folder"
    except OSError:
        return "it cannot be read"
    if folder == Path(folder.anchor):
        return "it is a filesystem root"
    homes = _home_folders()
    if folder in homes:
        return "it is a home folder"
    if root is not None:
        # Under a root wider than a home (a server serving /home), another user's
        # home is theirs; a root inside a home is that home's owner's choice.
        for home, uid in homes.items():
            if uid != os.geteuid() and folder.is_relative_to(home) and not root.is_relative_to(home):
                return "it lies in another user's home folder"
    if any(_holds(folder, tmp) for tmp in temporary_folders()):
        return "it is or holds a system temporary folder, shared by every user and process"
    for path in protected:
        real = Path(os.path.realpath(path))
        if folder.is_relative_to(real):
            return "it lies inside the kernel's own sessions or caches"
        if real.is_relative_to(folder) and not any(is_hidden(p) for p in real.relative_to(folder).parts):
            return "it holds the kernel's own sessions or caches"
    for path in private:
        real = Path(os.path.realpath(path))
        if folder.is_relative_to(real) or _holds(folder, real):
            return "it is, lies in or holds folders private to kernels (scratch folders or connection files)"
    for path in jupyter_folders():
        if folder.is_relative_to(path) or _holds(folder, path):
            return "it is, lies in or holds one of Jupyter's own folders (data, config or runtime)"
    for ancestor in folder.parents:
        if os.path.isdir(ancestor / SESSIONS_PRIVATE) and not os.path.islink(ancestor / SESSIONS_PRIVATE):
            return "it lies in a sessions folder (every session's workspace and saved interpreter)"
    found = survey(folder, max_depth, max_files)
    if found.private is not None:
        return f"it is or holds {found.private}"
    if found.files > max_files:
        return f"it holds more than {max_files:,} files (the operator's notebook_files_max)"
    return None


__all__ = ["FolderChoice", "choose_notebook_folder", "count_files", "jupyter_folders", "notebook_folder_of",
           "private_kernel_folders", "survey", "temporary_folders"]
