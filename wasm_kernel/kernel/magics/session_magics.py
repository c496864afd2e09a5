"""Session magics: %session, %files, %cat, %%writefile, %rm, %prune.

They run on the host, on the current session's workspace only, through the
session layer's file operations, which validate every path and never follow a
link. Errors never show host paths: the notebook is untrusted.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ...sessions.commands import CommandError, parse_duration_hours
from ...sessions.metadata import read_metadata
from ..kernel_limits import describe_limits
from ..limit_values import format_size
from ..session_protocol import SessionView
from ..time_text import format_when
from ..workspace_writes import delete_in_workspace, file_error, write_in_workspace
from .registry import MAGICS, MagicArgs, MagicError, MagicOutput
from .tables import table_bundle

CAT_MAX_BYTES = 1 << 20
FILES_SHOWN = 1000  # rows of a %files table


@MAGICS.add("session", "line", "%session", "Show this notebook's session: its id, workspace, times, identity and limits.")
def session_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    if line.strip():
        raise MagicError("%session takes no arguments")
    meta = read_metadata(session.workspace_root, session.session_id)
    ident = session.identity
    rows = [
        ("session id", session.session_id),
        ("workspace", "/app (in the sandbox)"),
        ("created", format_when(meta.created_at) if meta else "unknown (no metadata)"),
        ("updated", format_when(meta.updated_at) if meta else "unknown (no metadata)"),
        # The notebook's name, never its host path or the host user: operators find
        # those with `wasm-kernel sessions` and in the log. notebook_name() reads the
        # registry, so a rename shows here at once, without a restart.
        ("notebook", session.notebook_name() or "(none: a session for this kernel only)"),
        ("found from", session.notebook.origin),
        ("notebook's folder", session.notebook_folder_state()),
        ("interpreter state", session.state_summary()),
        ("scope", ident.mode + (f" ({ident.scope_key})" if ident.scope_key and ident.mode == "day" else "")),
        ("identity key", ident.key[:16] + "..."),
    ]
    rows += [(f"limit: {name}", f"{value} (at most {top})") for name, value, top in describe_limits(session.policy, session.operator_limits, metering=session.settings.metering)]
    return MagicOutput(bundles=[table_bundle(["", "value"], rows)])


@MAGICS.add("files", "line", "%files [GLOB]", """List the workspace's files with size and modification time.
GLOB matches "/"-separated paths: * and ? within a name, ** across folders (default **: everything).""")
def files_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    pattern = line.strip() or "**"
    try:
        listing = session.files.find(pattern)
    except (ValueError, OSError) as err:
        raise file_error(err, pattern, session) from None
    found = listing.entries
    stopped = f"; the listing stopped early: {listing.cut}" if listing.cut else ""
    if not found:
        return MagicOutput(text=f"No files match {pattern!r} in the workspace{stopped}.\n")
    rows = [
        (info.path + (" (link)" if info.is_link else ""), format_size(info.size),
         datetime.fromtimestamp(info.modified, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
        for info in found[:FILES_SHOWN]
    ]
    total = sum(info.size for info in found)
    caption = f"{len(found):,} file{'s' if len(found) != 1 else ''}, {format_size(total)}"
    if len(found) > FILES_SHOWN:
        caption += f"; showing the first {FILES_SHOWN:,} (narrow it with a GLOB: %files 'data/**')"
    return MagicOutput(bundles=[table_bundle(["name", "size", "modified"], rows, caption + stopped)])


@MAGICS.add("cat", "line", "%cat PATH", "Show a text file of the workspace (binary files are refused).")
def cat_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    args = MagicArgs("%cat")
    args.add_argument("path")
    path = args.parse_line(line).path
    try:
        shown, size = session.files.read(path, CAT_MAX_BYTES)
    except (ValueError, OSError) as err:
        raise file_error(err, path, session) from None
    if b"\0" in shown[:8192]:
        raise MagicError(f"{path} is a binary file ({format_size(size)}); %cat shows text files only")
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(shown) - 4 or size <= len(shown):  # not just a character cut at the size limit
            raise MagicError(f"{path} is not UTF-8 text ({format_size(size)}); %cat shows text files only") from None
        text = shown[: err.start].decode("utf-8")
    if size > len(shown):
        text += f"\n[... showing the first {format_size(len(shown))} of {format_size(size)}]"
    return MagicOutput(text=text if text.endswith("\n") else text + "\n")


@MAGICS.add("writefile", "cell", "%%writefile [-a] PATH", "Write the cell's body to PATH in the workspace; -a appends.")
def writefile_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    args = MagicArgs("%%writefile")
    args.add_argument("-a", "--append", action="store_true")
    args.add_argument("path")
    parsed = args.parse_line(line)
    path = parsed.path
    data = (body or "").encode("utf-8")
    if body and not body.endswith("\n"):
        data += b"\n"  # as IPython: the cell's last line ends with a newline
    existed = write_in_workspace(session, path, data, part=2 if parsed.append else 1)
    verb = ("Appending to" if parsed.append else "Overwriting") if existed else "Writing"
    shown = "/".join(p for p in path.split("/") if p not in ("", "."))
    return MagicOutput(text=f"{verb} {path}\n", **({"modified": [shown]} if existed else {"created": [shown]}))


@MAGICS.add("rm", "line", "%rm [-r] PATH", "Delete a file of the workspace; -r deletes a folder and its contents.")
def rm_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    args = MagicArgs("%rm")
    args.add_argument("-r", "--recursive", action="store_true")
    args.add_argument("path")
    parsed = args.parse_line(line)
    delete_in_workspace(session, parsed.path, parsed.recursive)
    shown = "/".join(p for p in parsed.path.split("/") if p not in ("", "."))
    return MagicOutput(text=f"Deleted {parsed.path}\n", deleted=[shown])


@MAGICS.add("prune", "line", "%prune [--older-than 24h] [--dry-run]", """Delete your sessions idle for longer than the given age (default 24h).
Only your own sessions are considered (unless the operator set c.WasmKernel.prune_all_users),
never this notebook's session, and never one that a running kernel holds.""")
def prune_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    args = MagicArgs("%prune")
    args.add_argument("--older-than", default="24h")
    args.add_argument("--dry-run", action="store_true")
    parsed = args.parse_line(line)
    try:
        # The same grammar as `wasm-kernel sessions prune`: a bare number is hours.
        hours = parse_duration_hours(parsed.older_than)
    except CommandError as err:
        raise MagicError(f"%prune --older-than: {err}") from None
    result = session.prune(hours, parsed.dry_run)
    lines = [str(result)]
    for session_id in result.deleted_sessions:
        lines.append(f"  {'would delete' if parsed.dry_run else 'deleted'} {session_id}")
    for session_id, why in result.errors.items():
        lines.append(f"  error: {session_id}: {why.replace(str(session.workspace_root), '<workspace root>')}")
    return MagicOutput(text="\n".join(lines) + "\n")

