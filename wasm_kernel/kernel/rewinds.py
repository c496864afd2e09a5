"""A notebook's rewinds: the interpreter's points (the guest's, runtime/points.py) and
the workspace's files at the same points (sessions/file_points.py), put back together.

Every cell is a point. A cell that ran code in the guest has the interpreter's point
and its files; a cell of host magics only that changed files (`%%writefile`, `%rm`)
has its files, and the interpreter of the point before it (it did not change it).

Files go first: they are what can fail (a quota, the disk), and a failure leaves them
as they were. Then the interpreter, which a rewind refuses only before changing
anything; if it does, the files are taken back. Files the guest had open are opened
again, so its file objects read what the point had.
"""

from __future__ import annotations

import ast
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core.file_changes import FileChanges
from ..runtime.points import PointInfo, RewindRefused
from ..sessions.file_points import FilePoints, FilePointsError
from ..sessions.package_folder import packages_path
from ..sessions.session_workspace import Limits, SessionWorkspace

FIRST_LINE_MAX = 80


@dataclass(frozen=True)
class Point:
    """One row of %timeline: a cell to go back to."""

    count: int
    at: float
    first_line: str
    delta_bytes: int
    memory: PointInfo  # the interpreter's point it puts back
    files_only: bool = False  # a cell of host magics: its files, the interpreter of the point before
    rewind_of: int | None = None


@dataclass(frozen=True)
class RewindDone:
    target: Point
    files: FileChanges | None  # None: files are not kept (files_off says why)
    files_off: str | None
    removed: list[str] = field(default_factory=list)  # %pip packages installed after the point, uninstalled
    not_back: list[str] = field(default_factory=list)  # packages the point had and the session no longer has


class Rewinds:
    def __init__(self, workspace: SessionWorkspace, folder: Path, max_bytes: int, limits: Any,
                 saved: dict[str, Any] | None = None, packages: Packages | None = None) -> None:
        """limits: a callable giving the session's disk quota now (bytes, files).
        saved: what export() kept with a saved state that was woken. packages: the
        session's %pip packages (listed, uninstalled), rewound with the points."""
        saved = saved if isinstance(saved, dict) else {}
        # The kernel's host threads: a cell's record, the panel's requests, a rewind.
        self._lock = threading.RLock()
        self._packages = packages
        # Each cell's installed set, where it changed: [(count, sorted names)], the start's first.
        self._installed: list[tuple[int, list[str]]] = [
            (int(c), [str(n) for n in names]) for c, names in saved.get("installed", []) if isinstance(names, list)]
        if not self._installed and packages is not None:
            self._installed = [(0, _names(packages.list()))]
        files = saved.get("files")
        self.files = FilePoints(workspace, folder, max_bytes, limits, files if isinstance(files, dict) else None)
        self._labels: dict[int, tuple[str, float]] = {}  # a host-magic cell's first line and time
        for count, (line, at) in dict(saved.get("labels", {})).items():
            self._labels[int(count)] = (str(line), float(at))

    def export(self) -> dict[str, Any] | None:
        """What a saved state keeps beside the interpreter's points: the files' side."""
        with self._lock:
            files = self.files.export()
            if files is None:
                return None
            return {"files": files, "labels": {str(c): [line, at] for c, (line, at) in self._labels.items()},
                    "installed": [[c, names] for c, names in self._installed]}

    def packages_changed(self, count: int) -> None:
        """A %pip in cell `count` changed the session's packages: its set is that point's."""
        with self._lock:
            if self._packages is not None:
                self._installed.append((count, _names(self._packages.list())))

    def _installed_at(self, count: int) -> list[str] | None:
        found = None
        for at, names in self._installed:
            if at <= count:
                found = names
        return found

    @property
    def notice(self) -> str | None:
        """What a start found (a rewind a kill broke off, put back), once."""
        notice, self.files.notice = self.files.notice, None
        return notice

    def after_cell(self, count: int, code: str, changes: FileChanges, host: set[str] | None) -> None:
        """Before the cell's reply: its file changes are its point's, and the host's
        edits before it (the drive, an upload: `host`, None if not known)."""
        with self._lock:
            self.files.record(count, changes, host)
            if changes:
                self._labels[count] = (_first_line(code), time.time())

    def timeline(self, sandbox: Any, wait: bool = True) -> list[Point]:
        """Every point a user can name, oldest first. wait=False: the panel's, which must
        not wait for a running cell."""
        with self._lock:
            memory = [p for p in sandbox.timeline(wait=wait) if p.stored and p.count is not None]
            if not memory:
                return []
            self.files.keep_from(memory[0].count)
            rows = [Point(p.count, p.at, p.first_line, p.delta_bytes, p, rewind_of=p.rewind_of) for p in memory]
            known = {p.count for p in memory}
            for count in self.files.changed_counts():
                if count in known or count < memory[0].count or count not in self._labels:
                    continue
                before = [p for p in memory if p.count < count]
                if before:  # a host-magic cell: the interpreter as the point before it had it
                    line, at = self._labels[count]
                    rows.append(Point(count, at, line, 0, before[-1], files_only=True))
            rows.sort(key=lambda r: r.count)
            return rows

    def preview(self, sandbox: Any, target: Point, sources: list[str], wait: bool = True) -> dict[str, Any]:
        """What a rewind to `target` would change, changing nothing: the files, the
        cells it goes back past and the names they bind (`sources`, theirs)."""
        with self._lock:
            files: FileChanges | None = None
            off = self.files.off
            if off is None:
                try:
                    files = self.files.preview(target.count)
                except FilePointsError as err:
                    off = str(err)
            later = [p for p in self.timeline(sandbox, wait) if p.count > target.count]
            return {
                "count": target.count, "first_line": target.first_line,
                "cells": [{"count": p.count, "first_line": p.first_line} for p in later],
                "names": assigned_names(sources),
                "files": None if files is None else {"created": files.created, "modified": files.modified,
                                                     "deleted": files.deleted},
                "files_off": off,
            }

    def rewind(self, sandbox: Any, target: Point, code: str, count: int) -> RewindDone:
        """Back to `target`: RewindRefused (nothing changed) if it cannot be."""
        with self._lock:
            changes: FileChanges | None = None
            off = self.files.off
            if off is None:
                try:
                    changes = self.files.rewind(target.count, count)
                except FilePointsError as err:
                    raise RewindRefused(str(err)) from None
            try:  # a host-magic cell's point may share the interpreter's newest: then only files and descriptors move
                sandbox.rewind(target.memory.seq, code, count, reopen=bool(changes))
            except RewindRefused:
                if changes is not None:
                    self.files.take_back()
                raise
            removed, not_back = self._rewind_packages(target.count, count)
            return RewindDone(target, changes, off, removed, not_back)

    def _rewind_packages(self, target: int, count: int) -> tuple[list[str], list[str]]:
        """The %pip packages installed after the point go; those it had and the session
        has no more are said (pip would have to fetch them: %pip install puts them back)."""
        packages = self._packages
        wanted = self._installed_at(target)
        if packages is None or wanted is None:
            return [], []
        now = _names(packages.list())
        extra = [name for name in now if name not in wanted]
        removed = packages.uninstall(extra) if extra else []
        if removed:
            self._installed.append((count, _names(packages.list())))
        return removed, [name for name in wanted if name not in now]


def assigned_names(sources: list[str]) -> list[str]:
    """The top-level names these cells bind (assignments, defs, classes, imports,
    loop and with targets): what a rewind past them changes. Lines of magics and
    shell commands are left out first; a cell that still does not parse names none."""
    found: list[str] = []
    for source in sources:
        tree = _parsed(source)
        if tree is None:
            continue
        for node in tree.body:
            for name in _bound(node):
                if name not in found and not name.startswith("_"):
                    found.append(name)
    return found


def _parsed(source: str) -> ast.Module | None:
    for text in (source, "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))):
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError):
            continue
    return None


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    names: list[str] = []
    for target in targets:
        for inner in ast.walk(target):
            if isinstance(inner, ast.Name):
                names.append(inner.id)
            elif isinstance(inner, (ast.Attribute, ast.Subscript)):  # df['a'] = ...: df changes
                base = inner.value
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if isinstance(base, ast.Name):
                    names.append(base.id)
                break
    return names


class Packages(Protocol):
    """The session's %pip packages, as a rewind sees them (sessions/packages.py)."""

    def list(self) -> list[tuple[str, str]]: ...

    def uninstall(self, names: list[str]) -> list[str]: ...


class SessionPackages:
    """A session's %pip packages (sessions/packages.py) as a rewind sees them."""

    def __init__(self, workspace_root: Path, session_id: str, changed: Callable[[], None]) -> None:
        self._root, self._session_id, self._changed = workspace_root, session_id, changed

    def list(self) -> list[tuple[str, str]]:
        if not packages_path(self._root, self._session_id).is_dir():
            return []  # no %pip yet: the installer's modules are not imported for nothing (a kernel's start)
        from ..sessions.packages import list_packages

        return list_packages(self._root, self._session_id)

    def uninstall(self, pinned: list[str]) -> list[str]:
        """Those named (name==version) removed; the guest's import caches look again."""
        from ..sessions.packages import uninstall_packages

        removed = uninstall_packages(self._root, self._session_id, [p.split("==")[0] for p in pinned])
        if removed:
            self._changed()
        return removed


def _names(installed: list[tuple[str, str]]) -> list[str]:
    return sorted(f"{name}=={version}" for name, version in installed)


def disk_limits(policy: Any) -> Limits:
    return (policy.disk_max_bytes, policy.disk_max_files)


def _first_line(code: str) -> str:
    line = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return line if len(line) <= FIRST_LINE_MAX else line[:FIRST_LINE_MAX - 1] + "…"


__all__ = ["Point", "RewindDone", "Rewinds", "SessionPackages", "assigned_names", "disk_limits"]
