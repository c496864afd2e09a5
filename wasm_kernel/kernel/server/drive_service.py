"""The Sandbox drive's operations, in Jupyter's contents model.

JupyterLab's drives speak the Contents API's model (name, path, type, format,
content, mimetype, size, last_modified, created, writable), so the lab extension's
drive passes our answers straight to the file browser and the document viewers.
Every request goes through one SessionWorkspace (sessions/session_workspace.py),
the one door of a session's files, opened once for it: no link is followed,
internal names stay hidden, and every write is charged to the session's disk ledger
before a byte of it is written, with what the session's kernels and the lab panel
write, so no writer passes the quota another's writes fill.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import mimetypes
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import nbformat

from ...sessions.session_workspace import Limits, QuotaExceeded, SessionWorkspace
from ...sessions.workspace_fs import WorkspaceEntry
from ..limit_values import format_size
from .drive_config import MAX_JSON_VALUES, SandboxDrive
from .drive_places import NOTEBOOK_SUFFIX, DrivePaths, DrivePlace, check_names, check_new_name

FORMATS = ("text", "base64", "json")


def json_values_over(data: bytes, limit: int = MAX_JSON_VALUES) -> bool:
    """Whether JSON text `data` may hold more than `limit` values, counted in C
    before it is parsed.

    A parsed document costs memory per value, not per byte: "[]," is 3 bytes and a
    list of about 80, so a 60 MiB notebook of empty lists took 1.8 GiB and 16 s to
    read. Every item of a list or an object but its first follows a comma, every
    key precedes a colon, every list or object starts with a bracket: with the
    document itself, their count bounds the keys and values (one inside a string
    counts too, so it overestimates, never under)."""
    return sum(data.count(mark) for mark in (b",", b":", b"[", b"{")) + 1 > limit


class DriveRefusal(Exception):
    """A request the drive turns down; `status` is its HTTP status, the text one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")


def _type_of(entry: WorkspaceEntry) -> str:
    if entry.kind == "directory":
        return "directory"
    return "notebook" if entry.name.endswith(NOTEBOOK_SUFFIX) and entry.kind == "file" else "file"


def _model(path: str, name: str, kind: str, size: int | None, modified: float, created: float,
           writable: bool = True) -> dict[str, Any]:
    return {
        "name": name, "path": path, "type": kind, "writable": writable,
        "created": _when(created), "last_modified": _when(modified),
        "size": size, "mimetype": None, "content": None, "format": None, "hash": None, "hash_algorithm": None,
    }


def _join(*parts: str | None) -> str:
    return "/".join(p for p in parts if p)


def _check_notebook(content: object) -> None:
    """Refuse (400) a notebook JupyterLab could not open again: not nbformat 4, or
    not valid against its schema. nbformat.validate assumes integer versions and
    list-shaped cells, so those are checked first; it may also repair cell ids in
    place (what Jupyter's own contents manager saves too)."""
    if not isinstance(content, dict):
        raise DriveRefusal(400, "a notebook's content must be a JSON object")
    major, minor = content.get("nbformat"), content.get("nbformat_minor")
    if major != 4 or isinstance(major, bool) or not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
        raise DriveRefusal(400, "the notebook is not nbformat 4 (nbformat 4, nbformat_minor an integer); "
                                "save it as a file with type 'file'")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbformat warns as it repairs missing or repeated cell ids
            nbformat.validate(content)
    except nbformat.ValidationError as err:
        reason = str(getattr(err, "message", "") or err).splitlines()[0][:200]
        raise DriveRefusal(400, f"the notebook is not valid nbformat 4 ({reason}); fix it, or save it as a file "
                                "with type 'file'") from None
    except (TypeError, ValueError, KeyError, AttributeError):
        raise DriveRefusal(400, "the notebook is not valid nbformat 4 (its parts have the wrong types); fix it, "
                                "or save it as a file with type 'file'") from None


class DriveService:
    def __init__(self, config: SandboxDrive, server_root: str) -> None:
        self.config = config
        self.paths = DrivePaths(config, server_root)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def _lock(self, session_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(session_id, threading.Lock())

    # --- reading ------------------------------------------------------------------

    def get(self, drive_path: str, content: bool, fmt: str | None, kind: str | None) -> dict[str, Any]:
        place = self.paths.resolve(drive_path)
        if not place.in_workspace:
            return self._server_folder(place, content)
        with self._workspace(place) as workspace:
            entry = self._entry(workspace, place)
            model = self._entry_model(place, entry)
            if model["type"] == "directory":
                if content:
                    listing = workspace.list_folder(place.inner)
                    model["content"] = [
                        self._entry_model(DrivePlace(_join(place.notebook, e.path), place.notebook, place.session_id,
                                                     e.path), e)
                        for e in listing.entries
                    ]
                    model["format"] = "json"
                return model
            if kind == "directory":
                raise DriveRefusal(400, f"{place.path!r} is a file, not a folder")
            if content:
                self._fill(workspace, model, place, entry, fmt, kind)
            return model

    def _server_folder(self, place: DrivePlace, content: bool) -> dict[str, Any]:
        now = datetime.now(timezone.utc).timestamp()
        model = _model(place.path, place.path.rsplit("/", 1)[-1], "directory", None, now, now, writable=False)
        if content:
            model["content"] = [
                _model(_join(place.path, name), name, "directory", None,
                       entry.last_active_at.timestamp(), entry.created_at.timestamp(), writable=kind == "notebook")
                for name, kind, entry in self.paths.folder_entries(place)
            ]
            model["format"] = "json"
        return model

    def _entry(self, workspace: SessionWorkspace, place: DrivePlace) -> WorkspaceEntry:
        entry = workspace.stat(place.inner)
        if entry is None:
            raise FileNotFoundError(errno.ENOENT, f"{place.path!r} does not exist")
        return entry

    def _entry_model(self, place: DrivePlace, entry: WorkspaceEntry) -> dict[str, Any]:
        name = entry.name or place.notebook.rsplit("/", 1)[-1]
        model = _model(place.path, name, _type_of(entry), None if entry.kind == "directory" else entry.size,
                       entry.modified, entry.created, writable=entry.kind in ("file", "directory"))
        if entry.kind != "directory":
            model["mimetype"] = mimetypes.guess_type(name)[0]
        return model

    def _fill(self, workspace: SessionWorkspace, model: dict[str, Any], place: DrivePlace, entry: WorkspaceEntry,
              fmt: str | None, kind: str | None) -> None:
        if entry.kind != "file":
            raise DriveRefusal(400, f"{place.path!r} is a {'symbolic link' if entry.kind == 'link' else 'special file'};"
                                    " the drive opens regular files only")
        if entry.size > self.config.max_open_bytes:
            raise DriveRefusal(413, f"{place.path!r} is {format_size(entry.size)}; the drive opens files up to "
                                    f"{format_size(self.config.max_open_bytes)}: download it instead")
        data, _size = workspace.read(place.inner, self.config.max_open_bytes)
        if (kind == "notebook" or (kind is None and model["type"] == "notebook")) and fmt in (None, "json"):
            if json_values_over(data):
                raise DriveRefusal(413, f"{place.path!r} holds more than {MAX_JSON_VALUES:,} JSON values, more than "
                                        "the drive opens as a notebook; open it as a file, or download it")
            try:
                content = json.loads(data)
            except (ValueError, RecursionError):
                content = None
            if not isinstance(content, dict):
                raise DriveRefusal(400, f"{place.path!r} is not a valid notebook (not a JSON object, or nested too "
                                        "deep); open it as a file")
            model["content"] = content
            model.update(type="notebook", format="json", mimetype=None)
            return
        if kind == "notebook":
            model["type"] = "notebook"
        elif model["type"] == "notebook":
            model["type"] = "file"  # asked for as a file: its text
        if fmt in (None, "text"):
            try:
                model.update(content=data.decode("utf-8"), format="text")
                model["mimetype"] = model["mimetype"] or "text/plain"
                return
            except UnicodeDecodeError:
                if fmt == "text":
                    raise DriveRefusal(400, f"{place.path!r} is not UTF-8 text; open it as base64 or download it") from None
        model.update(content=base64.b64encode(data).decode("ascii"), format="base64")
        model["mimetype"] = model["mimetype"] or "application/octet-stream"

    def open_file(self, drive_path: str) -> tuple[int, int, str]:
        """(descriptor, size, name) of a workspace file, for a download."""
        place = self._workspace_place(drive_path, "downloading")
        with self._workspace(place) as workspace:
            fd, size = workspace.open_file(place.inner)
        return fd, size, place.inner.rsplit("/", 1)[-1]

    # --- writing ------------------------------------------------------------------

    def _workspace_place(self, drive_path: str, what: str) -> DrivePlace:
        place = self.paths.resolve(drive_path)
        if not place.in_workspace:
            raise DriveRefusal(403, f"{what} works inside a notebook's workspace; open a notebook's folder in the drive")
        if not place.inner:
            raise DriveRefusal(403, f"{what} cannot change a notebook's workspace itself; rename or move the notebook "
                                    "in the file browser and its session follows")
        return place

    @property
    def _limits(self) -> Limits:
        return self.config.disk_max_bytes, self.config.disk_max_files

    @contextmanager
    def _workspace(self, place: DrivePlace) -> Iterator[SessionWorkspace]:
        """The session's workspace for one request, opened once: every write charged
        to the session's disk ledger first, with its kernels' and the panel's. A
        charge the quota refuses is a 413."""
        workspace = SessionWorkspace(self.config.root, place.session_id)
        try:
            yield workspace
        except QuotaExceeded:
            max_bytes, max_files = self._limits
            used_bytes, _used_files = workspace.usage()
            raise DriveRefusal(413, f"writing {place.inner} would pass the session's disk quota of "
                                    f"{format_size(max_bytes)} and {max_files:,} files "
                                    f"({format_size(used_bytes)} used); delete files first") from None
        finally:
            workspace.close()

    def save(self, drive_path: str, model: dict[str, Any]) -> dict[str, Any]:
        place = self._workspace_place(drive_path, "saving")
        kind = model.get("type")
        if kind == "directory":
            with self._lock(place.session_id), self._workspace(place) as workspace:
                if workspace.stat(place.inner) is None:
                    check_new_name(place.inner.rpartition("/")[2])
                    workspace.mkdir(place.inner, limits=self._limits, what=f"making {place.inner}")
                return self._entry_model(place, self._entry(workspace, place))
        if kind not in ("file", "notebook"):
            raise DriveRefusal(400, "type must be 'file', 'notebook' or 'directory'")
        data = self._decode(model, kind)
        chunk = model.get("chunk", 1)  # JupyterLab's chunked upload: 1, 2, ..., -1; none for a whole file
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk == 0 or chunk < -1:
            raise DriveRefusal(400, "chunk must be 1, 2, ... or -1 for the last part")
        with self._lock(place.session_id), self._workspace(place) as workspace:
            # A new name, and the folders above it that the write makes: each is held
            # to the rules of new names, and each is charged (SessionWorkspace.write).
            (_grow, new_names), _replaced = workspace.cost_of_write(place.inner, len(data), chunk != 1)
            for name in place.inner.split("/")[len(place.inner.split("/")) - new_names:] if new_names else ():
                check_new_name(name)
            workspace.upload(place.inner, data, part=chunk, limits=self._limits, what=f"writing {place.inner}")
            return self._entry_model(place, self._entry(workspace, place))

    def _decode(self, model: dict[str, Any], kind: str) -> bytes:
        content, fmt = model.get("content"), model.get("format")
        try:
            if kind == "notebook" and fmt in (None, "json"):
                _check_notebook(content)
                return (json.dumps(content, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
            if not isinstance(content, str):
                raise DriveRefusal(400, "content must be a string (format 'text' or 'base64')")
            if fmt == "text":
                return content.encode("utf-8")
        except UnicodeEncodeError:
            raise DriveRefusal(400, "content holds a lone surrogate (\\ud800-\\udfff), which is not text; "
                                    "send valid Unicode, or the bytes as base64") from None
        if fmt == "base64":
            try:
                return base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise DriveRefusal(400, "content is not valid base64") from None
        raise DriveRefusal(400, f"format must be one of {', '.join(FORMATS)}")

    def new_untitled(self, folder_path: str, kind: str, ext: str) -> dict[str, Any]:
        place = self.paths.resolve(folder_path)
        if not place.in_workspace:
            raise DriveRefusal(403, "new files go inside a notebook's workspace; open a notebook's folder in the drive")
        if kind not in ("file", "directory", "notebook"):
            raise DriveRefusal(400, "type must be 'file', 'notebook' or 'directory'")
        if kind == "notebook" or ext == NOTEBOOK_SUFFIX:
            # Its kernel's /app would be its own session's workspace, not this folder.
            raise DriveRefusal(403, "a new notebook goes in the file browser, beside your other notebooks "
                                    "(File > New > Notebook there), not inside a sandbox workspace")
        if not isinstance(ext, str) or len(ext) > 32 or "/" in ext or any(ord(c) < 0x20 or ord(c) == 0x7F for c in ext):
            raise DriveRefusal(400, "ext must be a short file extension such as '.txt'")
        base = "Untitled Folder" if kind == "directory" else "untitled"
        data = b""
        with self._lock(place.session_id), self._workspace(place) as workspace:
            self._require_folder(workspace, place)
            for n in range(10_000):
                name = f"{base}{' ' if kind == 'directory' else ''}{n}" if n else base
                target = self._child(place, name if kind == "directory" else name + ext)
                inner = target.inner
                if workspace.stat(inner) is not None:
                    continue
                try:
                    if kind == "directory":
                        workspace.mkdir(inner, limits=self._limits, what=f"making {inner}")
                    else:
                        workspace.write(inner, data, append=False, overwrite=False, limits=self._limits,
                                        what=f"writing {inner}")
                except FileExistsError:
                    continue  # made by the guest meanwhile: take the next name
                return self._entry_model(target, self._entry(workspace, target))
        raise DriveRefusal(409, "no free 'untitled' name in this folder; rename some first")

    def copy(self, from_path: str, to_folder: str) -> dict[str, Any]:
        source = self._workspace_place(from_path, "copying")
        folder = self.paths.resolve(to_folder)
        if folder.session_id != source.session_id:
            raise DriveRefusal(400, "files can be copied within one notebook's workspace only")
        with self._lock(source.session_id), self._workspace(source) as workspace:
            entry = self._entry(workspace, source)
            if entry.kind != "file":
                raise DriveRefusal(400, f"{source.path!r} is not a regular file; the drive copies files only")
            self._require_folder(workspace, folder)
            stem, dot, ext = entry.name.rpartition(".")
            stem, ext = (stem, dot + ext) if stem else (entry.name, "")
            # The size comes from the open descriptor, and the quota is charged for it
            # before a byte is read; the bytes then go across one piece at a time.
            fd, size = workspace.open_file(source.inner)
            try:
                for n in range(1, 10_000):
                    target = self._child(folder, f"{stem}-Copy{n}{ext}")
                    if workspace.stat(target.inner) is not None:
                        continue
                    try:
                        workspace.copy_in(fd, size, target.inner, limits=self._limits, what=f"writing {target.inner}")
                    except FileExistsError:
                        continue
                    return self._entry_model(target, self._entry(workspace, target))
            finally:
                os.close(fd)
        raise DriveRefusal(409, "no free name for the copy in this folder")

    def _require_folder(self, workspace: SessionWorkspace, place: DrivePlace) -> None:
        """A copy or an untitled file goes into a folder that exists: the quota
        charges one entry for it, so the write must not make folders on its way."""
        entry = self._entry(workspace, place)
        if entry.kind != "directory":
            raise DriveRefusal(400, f"{place.path!r} is not a folder; new files and copies go into a folder")

    def _child(self, folder: DrivePlace, name: str) -> DrivePlace:
        """A new name the drive makes in a workspace folder (an untitled file, a
        copy), held to the rules of names a client sends."""
        inner = _join(folder.inner, name)
        check_names(inner.split("/"))
        check_new_name(name)
        return DrivePlace(_join(folder.notebook, inner), folder.notebook, folder.session_id, inner)

    def rename(self, old_path: str, new_path: str) -> dict[str, Any]:
        old = self._workspace_place(old_path, "renaming")
        new = self._workspace_place(new_path, "renaming")
        if new.session_id != old.session_id:
            raise DriveRefusal(400, "files move within one notebook's workspace only; download and upload to move "
                                    "them to another notebook")
        check_new_name(new.inner.rpartition("/")[2])
        with self._lock(old.session_id), self._workspace(old) as workspace:
            workspace.rename(old.inner, new.inner)
            return self._entry_model(new, self._entry(workspace, new))

    def delete(self, drive_path: str) -> None:
        place = self.paths.resolve(drive_path)
        if not place.in_workspace or not place.inner:
            raise DriveRefusal(403, "the drive deletes files of a workspace, not sessions; "
                                    "use %prune or `wasm-kernel sessions rm` to delete a session")
        with self._lock(place.session_id), self._workspace(place) as workspace:
            workspace.delete(place.inner, recursive=True, limits=self._limits)
