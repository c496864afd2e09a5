"""The `wasm_kernel.session` comm target: the lab extension's view of the sandbox.

A frontend opens a comm to this target and sends requests as comm messages:
`{"id": any, "op": ..., ...}`; every request gets one answer on the same comm,
`{"id": same, "ok": true, ...}` or `{"id": same, "ok": false, "error": one line}`.
It is answered on the host, like the session magics, with their validation: paths
stay in the workspace and never follow a link out of it (SessionWorkspace),
limits only go down (kernel_limits), sizes are capped. It works wherever the
kernel's websocket works (JupyterHub, gateways), with no server extension. Its file
ops go through the session's one door (SessionWorkspace), as the drive's and the
magics' do. It lists and reads; it never writes: uploads, renames and deletes are
the Sandbox files browser's (the drive, kernel/server/drive_service.py), the one
upload protocol, which the panel opens.

ops:
- info: the session id, the notebook's name, the limits with the most each may be
  set to, the disk quota's usage, the last cells' costs (`cells`, newest first);
- files {glob}: the workspace's files (path, size, modified, link), at most 1,000;
- read {path}: a file's bytes, base64, up to 16 MiB (a download);
- limits {set: {name: value}}: change limits as %limits does, all or nothing;
- timeline: the points %rewind can go back to (as %timeline lists them), newest last;
- preview {count}: what `%rewind count` would change, changing nothing: the files,
  the cells it goes back past and the names they bind. The rewind itself is a cell
  the panel runs (`%rewind N`), so it is numbered and in the history as any.

After each cell the kernel also sends `{"event": "cell", ...}` with what the cell
cost and the files it changed, so the panel refreshes without asking.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from .kernel_limits import LIMITS, LimitError, apply_limit, describe_limits, limits_in_use
from .magic_error import MagicError
from .message_guard import internal_error_line, new_reference
from .session_protocol import SessionView
from .workspace_writes import file_error

SESSION_TARGET = "wasm_kernel.session"
MAX_TRANSFER_BYTES = 16 << 20  # a download through the comm, one message (the server caps what it receives, not this)
MAX_LISTED = 1000
MAX_POINTS = 200  # a timeline's rows (history_max_points bounds them already)


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
    # Counted again: the drive's uploads and deletes between cells are host writes.
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
        "cells": list(session.recent_cells),  # newest first: what "Last cells" shows on opening
        "timeline": _timeline_or_none(session),  # the points, in the same round trip as the rest
    }


def _timeline_or_none(session: SessionView) -> dict[str, Any] | None:
    try:
        return _timeline(session, {})
    except RequestError:
        return None


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


def _rewinds(session: SessionView) -> tuple[Any, Any]:
    sandbox, rewinds = session.sandbox, session.rewinds
    if sandbox is None or rewinds is None:
        raise RequestError("this session keeps no points yet: run a cell first")
    return sandbox, rewinds


def _timeline(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    sandbox, rewinds = _rewinds(session)
    points = rewinds.timeline(sandbox, wait=False)  # a cell may be running: the points as they are
    return {"points": [{"count": p.count, "at": p.at, "first_line": p.first_line, "bytes": p.delta_bytes,
                        "files_only": p.files_only, "rewind_of": p.rewind_of} for p in points[-MAX_POINTS:]],
            "files_off": rewinds.files.off}


def _preview(session: SessionView, data: dict[str, Any]) -> dict[str, Any]:
    count = data.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise RequestError("count must be a cell's execution count")
    sandbox, rewinds = _rewinds(session)
    points = rewinds.timeline(sandbox, wait=False)
    target = next((p for p in reversed(points) if p.count == count), None)
    if target is None:
        raise RequestError(f"no point for cell [{count}]; the points kept are cells {', '.join(str(p.count) for p in points)}")
    newest = points[-1].count
    sources = [entry[2] for entry in session.history.get_range(0, count + 1, newest + 1)] if newest > count else []
    return rewinds.preview(sandbox, target, sources, wait=False)


_OPS: dict[str, Callable[[SessionView, dict[str, Any]], dict[str, Any]]] = {
    "info": _info, "files": _files, "read": _read, "limits": _limits, "timeline": _timeline, "preview": _preview,
}


def cell_event(execution_count: int, cost: dict[str, Any], created: list[str], modified: list[str],
               deleted: list[str]) -> dict[str, Any]:
    """What the kernel tells open panels after a cell."""
    return {"event": "cell", "execution_count": execution_count, "cost": cost,
            "files": {"created": created, "modified": modified, "deleted": deleted}}
