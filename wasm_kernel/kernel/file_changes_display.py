"""The per-cell file-change display: one compact display_data after a cell that
created, modified or deleted files, and the same lists for execute_reply metadata.

The bundle carries text/plain and a small text/html table for every frontend, and
FILE_CHANGES_MIME (JSON) for the JupyterLab extension. Sizes are read on the host
without following links (sessions.file_ops.stat_session_paths).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from ..sessions.file_ops import SessionFileInfo
from .limit_values import format_size

FILE_CHANGES_MIME = "application/vnd.wasm-kernel.file-changes+json"
MAX_LISTED = 50  # per kind in text and HTML; the JSON keeps every path


@dataclass(frozen=True)
class CellFileChanges:
    created: list[str]
    modified: list[str]
    deleted: list[str]

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted)

    def reply_metadata(self) -> dict[str, list[str]]:
        return {"files_created": self.created, "files_modified": self.modified, "files_deleted": self.deleted}


def display_id_for(session_id: str, execution_count: int, cell_id: str | None) -> str:
    """Stable per cell: re-running a cell updates its own change list in place."""
    key = cell_id or f"exec-{execution_count}"
    return f"wasm-kernel-files-{session_id}-{key}"


def file_changes_bundle(
    changes: CellFileChanges, sizes: dict[str, SessionFileInfo | None], execution_count: int
) -> dict[str, Any]:
    rows: list[tuple[str, str, int | None]] = []
    for kind, paths in (("created", changes.created), ("modified", changes.modified), ("deleted", changes.deleted)):
        for path in paths:
            info = sizes.get(path)
            rows.append((kind, path, None if info is None or kind == "deleted" else info.size))
    payload = {
        "execution_count": execution_count,
        "created": [_entry(p, sizes) for p in changes.created],
        "modified": [_entry(p, sizes) for p in changes.modified],
        "deleted": [{"path": p} for p in changes.deleted],
    }
    return {"text/plain": _plain(changes, sizes), "text/html": _html(rows), FILE_CHANGES_MIME: payload}


def _entry(path: str, sizes: dict[str, SessionFileInfo | None]) -> dict[str, Any]:
    info = sizes.get(path)
    return {"path": path, "size": None if info is None else info.size}


def _plain(changes: CellFileChanges, sizes: dict[str, SessionFileInfo | None]) -> str:
    parts = []
    for sign, kind, paths in (("+", "created", changes.created), ("~", "modified", changes.modified),
                              ("-", "deleted", changes.deleted)):
        if not paths:
            continue
        shown = []
        for path in paths[:MAX_LISTED]:
            info = sizes.get(path)
            size = "" if info is None or sign == "-" else f" ({format_size(info.size)})"
            shown.append(f"{sign}{path}{size}")
        more = f" and {len(paths) - MAX_LISTED} more" if len(paths) > MAX_LISTED else ""
        parts.append(f"{kind}: " + ", ".join(shown) + more)
    return "Files " + "; ".join(parts)


def _html(rows: list[tuple[str, str, int | None]]) -> str:
    counts: dict[str, int] = {}
    body = []
    for kind, path, size in rows:
        counts[kind] = counts.get(kind, 0) + 1
        if counts[kind] > MAX_LISTED:
            continue
        body.append(
            f"<tr><td>{kind}</td><td><code>{html.escape(path)}</code></td>"
            f"<td style='text-align:right'>{'' if size is None else html.escape(format_size(size))}</td></tr>"
        )
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return (
        "<details open class='wasm-kernel-file-changes'><summary>Files: "
        f"{html.escape(summary)}</summary><table><thead><tr><th>change</th><th>path</th><th>size</th>"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></details>"
    )
