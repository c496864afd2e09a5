"""%timeline and %rewind: every cell is a point the interpreter can go back to.

The points are the guest's (runtime/points.py): the interpreter's whole state just
after each cell ran, kept as the pages that cell changed. %rewind puts one back
exactly, generators, open files and compiled objects included; the rewind is a
point of its own, so `%rewind` again goes forward to where you were.
"""

from __future__ import annotations

import time
from typing import Any

from ...runtime.guest_config import UndoFailed
from ...runtime.points import RewindRefused
from ..limit_values import format_size
from ..session_protocol import SessionView
from .registry import MAGICS, MagicError, MagicOutput
from .tables import table_bundle


def _sandbox(session: SessionView, magic: str) -> Any:
    sandbox = session.sandbox
    if sandbox is None:
        raise MagicError(f"{magic}: the interpreter has not started; run a cell first")
    if session.rewinds is None:
        raise MagicError(f"{magic}: this session keeps no points (the kernel's log says why)")
    return sandbox


def _files_of(session: SessionView) -> dict[int, int]:
    """Execution count -> how many files that cell changed, for the cells still remembered."""
    counts: dict[int, int] = {}
    for event in session.recent_cells:
        files = event.get("files") or {}
        counts.setdefault(int(event.get("execution_count", -1)), sum(len(files.get(k) or ()) for k in
                                                                     ("created", "modified", "deleted")))
    return counts


@MAGICS.add("timeline", "line", "%timeline", """List the points %rewind can go back to, oldest first: each cell's
execution count, when it ran, its first line, the files it changed and the bytes its
point keeps on disk. The newest is where the interpreter is now.""")
def timeline_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    if line.strip():
        raise MagicError("%timeline takes no arguments")
    sandbox = _sandbox(session, "%timeline")
    rewinds = session.rewinds
    assert rewinds is not None
    points = rewinds.timeline(sandbox)
    if not points:
        return MagicOutput(text="No points yet: each cell that runs in the interpreter makes one.\n")
    files = _files_of(session)
    rows = []
    for n, point in enumerate(points):
        what = point.first_line if point.rewind_of is None else f"{point.first_line} (back to [{point.rewind_of}])"
        rows.append([f"[{point.count}]" + ("  <- now" if n == len(points) - 1 else ""),
                     time.strftime("%H:%M:%S", time.localtime(point.at)), what,
                     files.get(point.count, ""), format_size(point.delta_bytes)])
    settings = session.settings
    off = "" if rewinds.files.off is None else f"; files are not kept: {rewinds.files.off}"
    kept = sum(p.delta_bytes for p in points) + rewinds.files.bytes_kept
    caption = (f"{len(points)} points, {format_size(kept)} kept "
               f"(at most {settings.history_max_points} points, {format_size(settings.history_max_bytes)}){off}")
    return MagicOutput(bundles=[table_bundle(["cell", "ran at", "first line", "files changed", "kept"], rows, caption)])


@MAGICS.add("rewind", "line", "%rewind [N]", """Put the interpreter back as it was just after cell N ran: its variables, imports,
In, Out and _ exactly (generators, open files and compiled objects included), and the
workspace's files as they were then. Without N, one cell back. The rewind is a point
too: %rewind again (or %rewind M) goes forward. The next cell's number goes on from the
highest. The notebook's own folder is never touched. %timeline lists the points.""")
def rewind_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    words = line.split()
    if len(words) > 1 or (words and not words[0].lstrip("[").rstrip("]").isdigit()):
        raise MagicError(f"%rewind {line.strip()}: expected a cell's number, e.g. %rewind 3; %timeline lists them")
    sandbox = _sandbox(session, "%rewind")
    rewinds = session.rewinds
    assert rewinds is not None
    points = rewinds.timeline(sandbox)
    if len(points) < 2:
        raise MagicError("%rewind: there is no earlier point yet; each cell that runs makes one")
    if words:
        wanted = int(words[0].lstrip("[").rstrip("]"))
        target = next((p for p in reversed(points) if p.count == wanted), None)
        if target is None:
            kept = ", ".join(str(p.count) for p in points)
            raise MagicError(f"%rewind {wanted}: no point for cell [{wanted}]; the points kept are cells {kept}")
    else:
        target = points[-2]
    before = _names(sandbox)
    code = f"%rewind {line.strip()}".rstrip()
    try:
        done = rewinds.rewind(sandbox, target, code, session.cell_count())
    except (RewindRefused, UndoFailed) as err:
        raise MagicError(f"%rewind: {err}") from None
    after = _names(sandbox)
    said = []
    if before is not None and after is not None:
        n = _count(before, after)
        said.append(f"{n} variable{'s' * (n != 1)}")
    files = done.files
    if files is not None:
        n = len(files.created) + len(files.modified) + len(files.deleted)
        said.append(f"{n} file{'s' * (n != 1)}")
    what = target.first_line if target.rewind_of is None else f"{target.first_line}, itself back to [{target.rewind_of}]"
    line_out = f"Back to just after cell [{target.count}] ({what})"
    if said:
        line_out += ": " + " and ".join(said) + " changed"
    if done.files_off is not None:
        line_out += f"; the workspace's files are not rewound: {done.files_off}"
    if done.removed:
        line_out += f"; %pip packages installed since were uninstalled: {', '.join(done.removed)}"
    if done.not_back:
        line_out += f"; packages it had that are gone since: {', '.join(done.not_back)} (%pip install puts them back)"
    out = MagicOutput(text=line_out + ".\n")
    if files is not None:
        out.created, out.modified, out.deleted = files.created, files.modified, files.deleted
    return out


def _names(sandbox: Any) -> dict[str, str] | None:
    try:
        names = sandbox.query("names")
    except Exception:  # a count is a courtesy: the rewind itself does not depend on it
        return None
    return names if isinstance(names, dict) else None


def _count(before: dict[str, str], after: dict[str, str]) -> int:
    return sum(before.get(name) != after.get(name) for name in set(before) | set(after))
