"""The per-cell file-change display: one compact display_data after a cell that
created, modified or deleted files, and the same lists for execute_reply metadata.

The bundle carries text/plain and a small text/html table for every frontend, and
FILE_CHANGES_MIME (JSON) for the JupyterLab extension. Sizes are read on the host
without following links (SessionWorkspace.stat_files).

Up to TABLE_ROWS changes are listed one by one. Past that a list stops being read
(a cell that writes 300 files would push the notebook down by a screen or two), so
text/plain and text/html show counts per kind and per top-level folder instead, and
HTML keeps the list itself in a collapsed <details>. The JSON always has every path,
plus the same per-folder summary for the lab extension.

Every name is guest-chosen: HTML escapes it, and text/plain quotes a name that holds
one of its own separators, so no name can fake a row or an entry.
"""

from __future__ import annotations

import html
from typing import Any

from ..core.file_changes import FileChanges
from ..sessions.workspace_fs import WorkspaceEntry
from .limit_values import format_size

FILE_CHANGES_MIME = "application/vnd.wasm-kernel.file-changes+json"
TABLE_ROWS = 20  # up to this many changes: the plain table; more: a summary
MAX_DETAIL_ROWS = 200  # rows of the collapsed full list in HTML; the JSON keeps every path
MAX_FOLDERS = 50  # folders in the JSON summary and the HTML folder table
MAX_PLAIN_FOLDERS = 10  # folders on text/plain's one line (the CLI prints it as one line)
TOP_LEVEL = ""  # the summary's folder for files directly in the workspace: no folder is named ""
_KINDS = ("created", "modified", "deleted")
_SIGNS = {"created": "+", "modified": "~", "deleted": "-"}
# text/plain joins entries with ", " and kinds with "; ": a name holding either is quoted.
_PLAIN_SEPARATORS = (", ", "; ")


def display_id_for(session_id: str, execution_count: int, cell_id: str | None) -> str:
    """Stable per cell: re-running a cell updates its own change list in place."""
    key = cell_id or f"exec-{execution_count}"
    return f"wasm-kernel-files-{session_id}-{key}"


Row = tuple[str, str, int | None]  # kind, path, size (None: deleted, or gone before it was read)


def file_changes_bundle(
    changes: FileChanges, sizes: dict[str, WorkspaceEntry | None], execution_count: int
) -> dict[str, Any]:
    rows: list[Row] = []
    for kind, paths in zip(_KINDS, (changes.created, changes.modified, changes.deleted)):
        for path in paths:
            info = sizes.get(path)
            rows.append((kind, path, None if info is None or kind == "deleted" else info.size))
    summary = folder_summary(rows)
    payload = {
        "execution_count": execution_count,
        "created": [_entry(p, sizes) for p in changes.created],
        "modified": [_entry(p, sizes) for p in changes.modified],
        "deleted": [{"path": p} for p in changes.deleted],
        "summary": summary,
    }
    if len(rows) <= TABLE_ROWS:
        plain, page = _plain(rows), _html_table(rows, f"Files: {_kind_counts(summary)}")
    else:
        plain, page = _plain_summary(summary), _html_summary(rows, summary)
    return {"text/plain": plain, "text/html": page, FILE_CHANGES_MIME: payload}


def folder_summary(rows: list[Row]) -> dict[str, Any]:
    """Counts per kind and per top-level folder, biggest folders first: the JSON's
    `summary` (folder TOP_LEVEL holds the files directly in the workspace)."""
    folders: dict[str, dict[str, Any]] = {}
    totals = dict.fromkeys(_KINDS, 0)
    for kind, path, size in rows:
        name = path.split("/", 1)[0] if "/" in path else TOP_LEVEL
        folder = folders.setdefault(name, {"folder": name, **dict.fromkeys(_KINDS, 0), "bytes": 0})
        folder[kind] += 1
        folder["bytes"] += size or 0
        totals[kind] += 1
    ranked = sorted(folders.values(), key=lambda f: (-_count(f), f["folder"]))
    return {"total": len(rows), **totals, "folders": ranked[:MAX_FOLDERS],
            "more_folders": max(0, len(ranked) - MAX_FOLDERS)}


def _count(folder: dict[str, Any]) -> int:
    return sum(folder[kind] for kind in _KINDS)


def _entry(path: str, sizes: dict[str, WorkspaceEntry | None]) -> dict[str, Any]:
    info = sizes.get(path)
    return {"path": path, "size": None if info is None else info.size}


def _plain_name(name: str) -> str:
    return repr(name) if any(sep in name for sep in _PLAIN_SEPARATORS) else name


def _plain(rows: list[Row]) -> str:
    """One line (the CLI prints it so): "Files created: +a (1 B), +b; deleted: -c"."""
    parts: dict[str, list[str]] = {}
    for kind, path, size in rows:
        shown = "" if size is None else f" ({format_size(size)})"
        parts.setdefault(kind, []).append(f"{_SIGNS[kind]}{_plain_name(path)}{shown}")
    return "Files " + "; ".join(f"{kind}: " + ", ".join(entries) for kind, entries in parts.items())


def _kind_counts(summary: dict[str, Any]) -> str:
    return ", ".join(f"{summary[kind]} {kind}" for kind in _KINDS if summary[kind])


def _folder_label(name: str) -> str:
    return "(top level)" if name == TOP_LEVEL else f"{name}/"


def _folder_text(folder: dict[str, Any]) -> str:
    """"250 files, 12.3 MiB": the size only where something was created or modified
    (a deleted file's size is gone with it)."""
    n = _count(folder)
    text = f"{n} file{'s' if n != 1 else ''}"
    if folder["created"] or folder["modified"]:
        text += f", {format_size(folder['bytes'])}"
    return text


def _plain_summary(summary: dict[str, Any]) -> str:
    """Still one line: "Files: 300 created, 2 modified; out/ 250 files, 12.3 MiB; ..."."""
    folders = summary["folders"]
    parts = [f"{_plain_name(_folder_label(f['folder']))} {_folder_text(f)}" for f in folders[:MAX_PLAIN_FOLDERS]]
    more = len(folders) - MAX_PLAIN_FOLDERS + summary["more_folders"]
    if more > 0:
        parts.append(f"and {more} more folder{'s' if more != 1 else ''}")
    return f"Files: {_kind_counts(summary)}; " + "; ".join(parts)


def _row(kind: str, path: str, size: int | None) -> str:
    return (
        f"<tr><td>{kind}</td><td><code>{html.escape(path)}</code></td>"
        f"<td style='text-align:right'>{'' if size is None else html.escape(format_size(size))}</td></tr>"
    )


def _table(rows: list[Row]) -> str:
    return ("<table><thead><tr><th>change</th><th>path</th><th>size</th></tr></thead>"
            f"<tbody>{''.join(_row(*row) for row in rows)}</tbody></table>")


def _html_table(rows: list[Row], title: str) -> str:
    return (f"<details open class='wasm-kernel-file-changes'><summary>{html.escape(title)}</summary>"
            f"{_table(rows)}</details>")


def _html_summary(rows: list[Row], summary: dict[str, Any]) -> str:
    """The counts per folder, then every row (up to MAX_DETAIL_ROWS) collapsed."""
    folder_rows = "".join(
        f"<tr><td><code>{html.escape(_folder_label(f['folder']))}</code></td>"
        + "".join(f"<td style='text-align:right'>{f[kind]}</td>" for kind in _KINDS)
        + f"<td style='text-align:right'>{html.escape(format_size(f['bytes']))}</td></tr>"
        for f in summary["folders"]
    )
    if summary["more_folders"]:
        folder_rows += f"<tr><td colspan='5'>and {summary['more_folders']} more folders</td></tr>"
    listed = rows[:MAX_DETAIL_ROWS]
    more = len(rows) - len(listed)
    tail = (f"<p>and {more} more (every path is in the execute_reply metadata)</p>" if more else "")
    title = f"all {len(rows)} changes" if not more else f"the first {len(listed)} of {len(rows)} changes"
    return (
        "<details open class='wasm-kernel-file-changes'><summary>Files: "
        f"{html.escape(_kind_counts(summary))}</summary>"
        "<table class='wasm-kernel-file-folders'><thead><tr><th>folder</th><th>created</th><th>modified</th>"
        f"<th>deleted</th><th>size</th></tr></thead><tbody>{folder_rows}</tbody></table>"
        f"<details class='wasm-kernel-file-list'><summary>{html.escape(title)}</summary>"
        f"{_table(listed)}{tail}</details></details>"
    )
