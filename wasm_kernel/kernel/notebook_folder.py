"""Which folder a kernel shows read-only under /app: the notebook's own.

On ipykernel, relative paths resolve in the kernel's cwd, which Jupyter sets to
the notebook's folder. So the folder is the notebook's parent when the kernel
knows its notebook, else the kernel's cwd (nbclient sets it from the notebook's
path). A folder is refused, with one notice for the first cell, when showing it
would show far more than a notebook's data: a filesystem root, a home folder, a
folder holding the kernel's own sessions or caches, or one with more files than
the operator allows. The notice never names a host path.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..runtime.notebook_overlay import NotebookFolder, is_hidden
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


def notebook_folder_of(source: NotebookSource, cwd: str) -> Path:
    if source.path is not None:
        parent = Path(source.path).parent
        if parent.is_dir():
            return parent
    return Path(cwd)


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
    cwd: str | None = None,
) -> FolderChoice:
    """The folder to show, or None and why not (mode "off": none, silently)."""
    if mode == "off":
        return FolderChoice(None)
    folder = Path(os.path.realpath(notebook_folder_of(source, cwd or os.getcwd())))
    refused = _why_refused(folder, max_files, max_depth, protected)
    if refused is not None:
        return FolderChoice(None, refused)
    return FolderChoice(NotebookFolder(folder, max_depth))


def _why_refused(folder: Path, max_files: int, max_depth: int, protected: Iterable[Path]) -> str | None:
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
    for path in protected:
        real = Path(os.path.realpath(path))
        if folder.is_relative_to(real):
            return "it lies inside the kernel's own sessions or caches"
        if real.is_relative_to(folder) and not any(is_hidden(p) for p in real.relative_to(folder).parts):
            return "it holds the kernel's own sessions or caches"
    if count_files(folder, max_depth, max_files) > max_files:
        return f"it holds more than {max_files:,} files (the operator's notebook_files_max)"
    return None


__all__ = ["FolderChoice", "choose_notebook_folder", "count_files", "notebook_folder_of"]
