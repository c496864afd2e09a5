"""The `wasm_kernel.session` comm target: the lab extension's view of the sandbox.

A frontend opens a comm to this target and sends requests as comm messages:
`{"id": any, "op": ..., ...}`; every request gets one answer on the same comm,
`{"id": same, "ok": true, ...}` or `{"id": same, "ok": false, "error": one line}`.
It is answered on the host, like the session magics, with their validation: paths
stay in the workspace and never follow a link out of it (SessionWorkspace),
limits only go down (kernel_limits), sizes are capped. It works wherever the
kernel's websocket works (JupyterHub, gateways), with no server extension. Its file
ops go through the session's one door (SessionWorkspace), as the drive's and the
magics' do, and its uploads number their parts as the drive's (JupyterLab's) do.

ops:
- info: the session id, the notebook's name, the limits with the most each may be
  set to, the disk quota's usage, the last cells' costs (`cells`, newest first);
- files {glob}: the workspace's files (path, size, modified, link), at most 1,000;
- read {path}: a file's bytes, base64, up to 16 MiB (a download);
- write {path, data, part?, size?}: an upload, in parts of at most 4 MiB so each
  message fits a Jupyter Server websocket frame (10 MiB) once base64'd, numbered as
  JupyterLab's chunked uploads are: part 1 (the default) replaces the file, parts 2,
  3, ... and -1 (the last) are appended; `size` (the whole file's) lets a file over
  16 MiB be refused before any part is sent; every part counted against the disk
  quota before it is written;
- delete {path, recursive}: a file, or a folder with recursive;
- limits {set: {name: value}}: change limits as %limits does, all or nothing.

After each cell the kernel also sends `{"event": "cell", ...}` with what the cell
cost and the files it changed, so the panel refreshes without asking.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from .kernel_limits import LIMITS, LimitError, apply_limit, describe_limits, limits_in_use
from .magic_error import MagicError
from .message_guard import internal_error_line, new_reference
from .session_protocol import SessionView
from .workspace_writes import delete_in_workspace, file_error, write_in_workspace

SESSION_TARGET = "wasm_kernel.session"
MAX_TRANSFER_BYTES = 16 << 20  # a download or an upload through the comm
UPLOAD_PART_BYTES = 4 << 20  # an upload message's bytes: 5.6 MB of base64, under the websocket's 10 MiB
MAX_LISTED = 1000


class RequestError(ValueError):
    """A refused request; the message is one line for the panel."""


def answer(session: SessionView, data: Any) -> dict[str, Any]:
    """The answer to one request (`data` of a comm_msg); never raises."""
    request_id = data.get("id") if isinstance(data, dict) else None
    try:
        if not isinstance(data, dict):
            raise RequestError("a request must be an object with an op")
        op = data.get("op")
        handler = _OPS.get(op) if isinstance(op, str) else None
        if handler is None:
            raise RequestError(f"unknown op {str(op)[:40]!r}; known: {', '.join(sorted(_OPS))}")
        return {"id": request_id, "ok": True, **handler(session, data)}
    except (RequestError, MagicError, LimitError) as err:
        return {"id": request_id, "ok": False, "error": str(err)}
    except Exception:  # the panel still gets its answer; host details go to the log only
        reference = new_reference()
        session.log.exception("wasm-kernel: the session panel's %s request failed (reference %s)",
                             str(data.get("op"))[:40] if isinstance(data, dict) else "?", reference)
        return {"id": request_id, "ok": False, "error": internal_error_line("answer this request", reference)}


def _path(data: dict[str, Any], key: str = "path") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise RequestError(f"{key} must be a path in the workspace")
    return value


def _info(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    # Counted again: uploads and deletes from this panel are host writes.
    used = session.sandbox.disk_usage(remeasure=True) if session.sandbox is not None else None
    metering = session.settings.metering
    rows = describe_limits(session.policy, session.operator_limits, metering=metering)[1:]  # after metering's row
    limits = {
        name: {"value": getattr(session.policy, LIMITS[name].field),
               "at_most": getattr(session.operator_limits, LIMITS[name].field), "shown": shown, "at_most_shown": top}
        for name, (_n, shown, top) in zip(limits_in_use(metering), rows)
    }
    return {
        "session_id": session.session_id,
        "metering": metering,
        "notebook": session.notebook_name(),
        "workspace": "/app",
        "limits": limits,
        "disk_used": None if used is None else {"bytes": used[0], "files": used[1]},
        "uploads": {"max_bytes": MAX_TRANSFER_BYTES, "part_bytes": UPLOAD_PART_BYTES},
        "cells": list(session.recent_cells),  # newest first: what "Last cells" shows on opening
    }


def _files(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    pattern = data.get("glob", "**")
    if not isinstance(pattern, str) or len(pattern) > 4096:
        raise RequestError("glob must be a short string")
    try:
        listing = session.files.find(pattern)
    except (ValueError, OSError) as err:
        raise file_error(err, pattern, session) from None
    files = [
        {"path": info.path, "size": info.size, "link": info.is_link,
         "modified": datetime.fromtimestamp(info.modified, timezone.utc).isoformat()}
        for info in listing.entries[:MAX_LISTED]
    ]
    cut = listing.cut or (f"showing the first {MAX_LISTED} of {len(listing.entries)}"
                          if len(listing.entries) > MAX_LISTED else None)
    return {"files": files, "cut": cut}


def _read(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    path = _path(data)
    try:
        content, size = session.files.read(path, MAX_TRANSFER_BYTES)
    except (ValueError, OSError) as err:
        raise file_error(err, path, session) from None
    if size > len(content):
        raise RequestError(f"{path} is {size} bytes; the panel downloads files up to {MAX_TRANSFER_BYTES >> 20} MiB")
    return {"path": path, "size": size, "data": base64.b64encode(content).decode("ascii")}


def _write(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    path = _path(data)
    part, size = data.get("part", 1), data.get("size")
    if type(part) is not int or part == 0 or part < -1:
        raise RequestError("part must be 1 for an upload's first part, 2, 3, ... for the next ones, -1 for the last")
    if size is not None and (type(size) is not int or size < 0):
        raise RequestError("size must be the whole file's size in bytes")
    if size is not None and size > MAX_TRANSFER_BYTES:
        raise RequestError(f"{path} is {_mib(size)}; the panel uploads files up to {_mib(MAX_TRANSFER_BYTES)} "
                           "(%%writefile, or a cell that writes it, has no such limit)")
    encoded = data.get("data")
    if not isinstance(encoded, str) or len(encoded) > (MAX_TRANSFER_BYTES // 3 + 1) * 4:
        raise RequestError(f"data must be the file's bytes in base64, at most {_mib(MAX_TRANSFER_BYTES)}")
    try:
        content = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError("data is not base64") from None
    so_far = 0
    if part != 1:
        current = session.files.stat_files([path]).get(path)
        if current is None:
            raise RequestError(f"part {part} of {path} came with no part 1 before it; upload the file again")
        so_far = current.size
    if so_far + len(content) > MAX_TRANSFER_BYTES:
        raise RequestError(f"{path} would pass {_mib(MAX_TRANSFER_BYTES)}, the most the panel uploads")
    existed = write_in_workspace(session, path, content, part=part, what="upload") or part != 1
    return {"path": path, "size": so_far + len(content), "replaced": existed}


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB".replace(".0 MiB", " MiB")


def _delete(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    path = _path(data)
    delete_in_workspace(session, path, recursive=bool(data.get("recursive", False)))
    return {"path": path}


def _limits(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    changes = data.get("set")
    if not isinstance(changes, dict) or not changes:
        raise RequestError("set must be an object of limit names and values, e.g. {\"memory\": \"256MB\"}")
    trial = session.policy
    for name, value in changes.items():  # all or nothing, as %limits
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise RequestError(f"{str(name)[:40]}: the value must be a string or a number")
        trial = apply_limit(trial, str(name), str(value), session.operator_limits)
    session.set_policy(trial)
    return _info(session, {})


_OPS: dict[str, Callable[[SessionView, dict[str, Any]], dict[str, Any]]] = {
    "info": _info, "files": _files, "read": _read, "write": _write, "delete": _delete, "limits": _limits,
}


def cell_event(execution_count: int, cost: dict[str, Any], created: list[str], modified: list[str],
               deleted: list[str]) -> dict[str, Any]:
    """What the kernel tells open panels after a cell."""
    return {"event": "cell", "execution_count": execution_count, "cost": cost,
            "files": {"created": created, "modified": modified, "deleted": deleted}}
