"""Which folder a kernel shows read-only under /app: the notebook's own.

On ipykernel, relative paths resolve in the kernel's cwd, which Jupyter sets to
the notebook's folder. So the folder is the notebook's parent when the kernel
knows its notebook, else the kernel's cwd (nbclient sets it from the notebook's
path). A folder is refused, with one notice for the first cell, when showing it
would show far more than a notebook's data: a filesystem root, a home folder, a
folder holding the kernel's own sessions or caches, a system temporary folder, a
folder in or holding what is private to kernels (guests' scratch folders,
Jupyter's runtime folder with every kernel's connection key), or one with more
files than the operator allows. The notice never names a host path.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class FolderChoice:
    folder: NotebookFolder | None
    refused: str | None = None  # why the folder is not shown (no host path in it)

    @property
    def notice(self) -> str | None:
        """One line for the first cell, when the folder is refused."""
        if self.refused is None:
            return None
        return (
            f"wasm-kernel: the notebook's folder is not shown in /app because {self.refused}; "
            "only the session workspace is. Keep the notebook and its data in a folder of their own."
        )


def _home_folders() -> set[Path]:
    homes = {Path(os.path.expanduser("~"))}
    try:
        homes |= {Path(entry.pw_dir) for entry in pwd.getpwall() if entry.pw_dir not in ("", "/")}
    except (KeyError, OSError):
        pass
    return {Path(os.path.realpath(h)) for h in homes}


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


def count_files(folder: Path, max_depth: int, limit: int) -> int:
    """Visible entries (not hidden, not deeper than max_depth), counted without
    following links and without recursion; stops once past `limit`."""
    count = 0
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        path, depth = stack.pop()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    if is_hidden(entry.name):
                        continue
                    count += 1
                    if count > limit:
                        return count
                    if depth + 1 < max_depth and entry.is_dir(follow_symlinks=False):
                        stack.append((Path(entry.path), depth + 1))
        except OSError:
            continue
    return count


def choose_notebook_folder(
    source: NotebookSource,
    *,
    mode: str,
    max_files: int,
    max_depth: int,
    protected: Iterable[Path],
    private: Iterable[Path] = (),
    cwd: str | None = None,
) -> FolderChoice:
    """The folder to show, or None and why not (mode "off": none, silently).
    `protected`: the kernel's own sessions and caches; `private`: what is private to
    kernels (other kernels' scratch, connection files); neither may be shown, or be
    the folder, or lie inside it."""
    if mode == "off":
        return FolderChoice(None)
    folder = Path(os.path.realpath(notebook_folder_of(source, cwd or os.getcwd())))
    refused = _why_refused(folder, max_files, max_depth, protected, private)
    if refused is not None:
        return FolderChoice(None, refused)
    return FolderChoice(NotebookFolder(folder, max_depth))


def _why_refused(folder: Path, max_files: int, max_depth: int, protected: Iterable[Path],
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
    if folder in _home_folders():
        return "it is a home folder"
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
    if count_files(folder, max_depth, max_files) > max_files:
        return f"it holds more than {max_files:,} files (the operator's notebook_files_max)"
    return None


__all__ = ["FolderChoice", "choose_notebook_folder", "count_files", "notebook_folder_of", "private_kernel_folders",
           "temporary_folders"]
