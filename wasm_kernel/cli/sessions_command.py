"""`wasm-kernel sessions list|show|prune|rm|move`: argparse wiring and output formatting.

The work is in wasm_kernel/sessions/commands.py; this prints aligned tables by
default and JSON with --json. Errors are one line on stderr and exit status 1
(argparse usage errors exit 2). The root defaults to the kernel's own
(WasmKernel.workspace_root, read as the kernel reads it: kernel_config.py).

Notebook names and paths come from whoever named the notebook, so every value
printed is a terminal_field (terminal_text.py): one line, no control obeyed. The
JSON is ASCII, every control and non-ASCII character escaped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .terminal_text import terminal_field


EXAMPLES = {
    "sessions": """\
examples:
  wasm-kernel sessions list                       every session the kernel keeps
  wasm-kernel sessions show 1b4e28ba-2fa1-41d2-883f-0016d3cca427
  wasm-kernel sessions prune --older-than 7d --dry-run
  wasm-kernel sessions rm 1b4e28ba-2fa1-41d2-883f-0016d3cca427
  wasm-kernel sessions move old.ipynb new.ipynb   after `mv old.ipynb new.ipynb`
""",
    "list": "examples:\n  wasm-kernel sessions list\n  wasm-kernel sessions list --json\n",
    "show": "examples:\n  wasm-kernel sessions show 1b4e28ba-2fa1-41d2-883f-0016d3cca427\n",
    "prune": "examples:\n  wasm-kernel sessions prune --older-than 7d --dry-run\n  wasm-kernel sessions prune --older-than 24h\n",
    "rm": "examples:\n  wasm-kernel sessions rm 1b4e28ba-2fa1-41d2-883f-0016d3cca427\n",
    "move": "examples:\n  wasm-kernel sessions move hw1.ipynb hw1-final.ipynb\n"
            "  wasm-kernel sessions move course/ course-2024/       every notebook under the folder\n"
            "  wasm-kernel sessions move --replace ../old/hw1.ipynb hw1.ipynb   after a kernel ran on the moved one\n",
}


def add_parser(sub: Any) -> None:
    from .kernel_config import kernel_workspace_root

    root = kernel_workspace_root()
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=None,
                        help=f"the sessions root (default: the kernel's WasmKernel.workspace_root, {root})")
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")

    sessions = sub.add_parser("sessions", help="list, inspect, prune, remove and move session workspaces",
                              description="The sessions the kernel keeps, one workspace per notebook.",
                              epilog=EXAMPLES["sessions"])
    ssub = sessions.add_subparsers(dest="sessions_command", required=True)
    ssub.add_parser("list", parents=[common], help="every session: id, notebook, created, updated, size, in use",
                    epilog=EXAMPLES["list"])
    show = ssub.add_parser("show", parents=[common], help="every field of one session, its metadata and file count",
                           epilog=EXAMPLES["show"])
    show.add_argument("session_id", metavar="ID")
    prune = ssub.add_parser("prune", parents=[common], help="delete sessions idle for longer than a duration",
                            epilog=EXAMPLES["prune"])
    prune.add_argument("--older-than", required=True, metavar="DURATION",
                       help="e.g. 30m, 24h, 7d, or a bare number of hours")
    prune.add_argument("--states-older-than", metavar="DURATION", default=None,
                       help="also drop saved interpreter states older than this from the sessions kept "
                            "(default: --older-than)")
    prune.add_argument("--dry-run", action="store_true", help="report what would be deleted, delete nothing")
    rm = ssub.add_parser("rm", parents=[common], help="delete one session's workspace and metadata",
                         epilog=EXAMPLES["rm"])
    rm.add_argument("session_id", metavar="ID")
    rm.add_argument("--force", action="store_true", help="delete even if an open sandbox holds the session")
    move = ssub.add_parser(
        "move", parents=[common], help="after renaming a notebook (or a folder) outside Jupyter, keep its session",
        description="Re-point the sessions of the notebook OLD, or of every notebook under the folder OLD, to "
                    "NEW, so the renamed notebook's next kernel finds its files. Refused, changing nothing, if "
                    "NEW already has a session of its own (see --replace).",
        epilog=EXAMPLES["move"])
    move.add_argument("old", metavar="OLD", help="the notebook's (or folder's) path before the rename")
    move.add_argument("new", metavar="NEW", help="its path now")
    move.add_argument("--replace", action="store_true",
                      help="if NEW already has its own session, remove it first: only if no kernel uses it "
                           "and it holds no file (a kernel started on NEW after a bare `mv` made it)")
    sessions.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sessions.commands import CommandError

    args.default_root = args.root is None
    if args.root is None:
        from .kernel_config import kernel_workspace_root

        args.root = kernel_workspace_root()
    try:
        return _COMMANDS[args.sessions_command](args)
    except CommandError as err:  # the message may hold a path as given, or one met under the root
        print(f"wasm-kernel sessions {args.sessions_command}: error: {terminal_field(str(err))}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as err:  # anything unforeseen still gets one line, not a traceback
        print(f"wasm-kernel sessions {args.sessions_command}: error: {type(err).__name__}: {terminal_field(str(err))}",
              file=sys.stderr)
        return 1


def _dump(data: Any) -> None:
    print(_json(data, indent=2))


def _json(data: Any, indent: int | None = None) -> str:
    # ensure_ascii (json's default, said here on purpose): JSON itself escapes only
    # C0 controls; this escapes C1 and bidi controls too, which a terminal obeys.
    return json.dumps(data, indent=indent, ensure_ascii=True)


def _table(headers: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    rows = [[terminal_field(c) for c in r] for r in rows]  # a newline in a name may not start a row
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(headers))
    for r in rows:
        print(line(r))


def _when(iso: str | None, status: str = "ok") -> str:
    if iso is None:
        return "corrupted" if status == "corrupted" else "-"
    return iso[:19].replace("T", " ")  # UTC, to the second


def _size(n: int | None) -> str:
    from ..sessions.pruning import format_bytes

    return "-" if n is None else format_bytes(n)


# What %session says of a session that no notebook names (a `run`-mode identity).
RUN_SESSION_LABEL = "(none: one kernel's)"


def _notebook_cell(info: Any) -> str:
    if info.notebook:
        return str(info.notebook)
    return RUN_SESSION_LABEL if info.mode == "run" else "-"


def _list(args: argparse.Namespace) -> int:
    from ..sessions.commands import list_sessions

    if args.default_root and not args.root.exists():  # no kernel has run yet: nothing to list, nothing wrong
        if args.json:
            _dump([])
        else:
            print(f"no sessions under {terminal_field(str(args.root))} (it does not exist yet: the first kernel creates it)")
        return 0
    infos = list_sessions(args.root)
    if args.json:
        _dump([i.to_dict() for i in infos])
        return 0
    if not infos:
        print(f"no sessions under {terminal_field(str(args.root))}")
        return 0
    rows = [[i.session_id, _notebook_cell(i), _when(i.created_at, i.metadata_status), _when(i.updated_at, i.metadata_status),
             _size(i.size_bytes), "yes" if i.in_use else "no"] for i in infos]
    _table(["ID", "NOTEBOOK", "CREATED (UTC)", "UPDATED (UTC)", "SIZE", "IN USE"], rows, right={4})
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..sessions.commands import show_session

    info = show_session(args.root, args.session_id)
    d = info.to_dict(detailed=True)
    if args.json:
        _dump(d)
        return 0
    meta = d.pop("metadata")
    entry = d.pop("registry_entry")
    saved = d.pop("saved_state")
    d["saved_state"] = "-" if saved is None else f"{_size(saved['bytes'])}, saved {_when(saved['saved_at'])} UTC"
    d["size_bytes"] = "-" if info.size_bytes is None else f"{info.size_bytes} ({_size(info.size_bytes)})"
    d["in_use"] = "yes" if info.in_use else "no"
    d["notebook"] = _notebook_cell(info)
    for key, value in d.items():
        print(f"{key + ':':<17} {'-' if value is None else terminal_field(str(value))}")
    print(f"{'metadata:':<17} {'-' if meta is None else _json(meta)}")
    print(f"{'registry_entry:':<17} {'-' if entry is None else _json(entry)}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from ..sessions.commands import prune

    result = prune(args.root, args.older_than, args.dry_run, args.states_older_than)
    if args.json:
        from dataclasses import asdict

        _dump({**asdict(result), "summary": str(result)})
        return 1 if result.errors else 0
    print(result)
    # Ids are UUID-named folders, but a reason may quote what it met under the root.
    verb = "would delete" if result.dry_run else "deleted"
    for sid in result.deleted_sessions:
        print(f"  {verb:<12}  {terminal_field(sid)}")
    for sid in result.dropped_states:
        print(f"  {'state gone' if not result.dry_run else 'would drop':<12}  {terminal_field(sid)} (its saved interpreter state)")
    for sid in result.skipped_sessions:
        print(f"  {'skipped':<12}  {terminal_field(sid)}")
    for sid, why in result.errors.items():
        print(f"  {'error':<12}  {terminal_field(sid)}: {terminal_field(why)}")
    return 1 if result.errors else 0


def _rm(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..sessions.commands import remove_session

    result = remove_session(args.root, args.session_id, force=args.force)
    if args.json:
        _dump(asdict(result))
        return 0
    print(f"deleted session {terminal_field(result.session_id)} ({_size(result.size_bytes)})")
    for note in result.notes:  # a registry problem's text may hold a path
        print(f"note: {terminal_field(note)}", file=sys.stderr)
    return 0


def _move(args: argparse.Namespace) -> int:
    from ..sessions.commands import CommandError, session_files
    from ..sessions.moves import SessionMoveError, move_notebook_sessions
    from ..sessions.registry import RegistryError

    if not args.default_root and not args.root.is_dir():  # as the other subcommands say it
        reason = "is not a directory" if args.root.exists() else "does not exist"
        raise CommandError(f"workspace root {str(args.root)!r}: {reason}")
    try:
        result = move_notebook_sessions(args.root, args.old, args.new, replace=args.replace)
    except SessionMoveError as err:
        if err.owner is not None and not args.replace and session_files(args.root, err.owner.session_id) == 0:
            raise CommandError(f"{err}, or give --replace to remove it (it holds no files)") from None
        raise CommandError(str(err)) from None
    except RegistryError as err:
        raise CommandError(str(err)) from None
    if not result:
        raise CommandError(f"no session belongs to {args.old} (nor to a notebook under it); "
                           "`wasm-kernel sessions list` shows which notebooks have one")
    if args.json:
        _dump({"old_path": result.old_path, "new_path": result.new_path, "moved": [m._asdict() for m in result]})
        return 0
    n = len(result)
    print(f"moved {n} session{'s' if n != 1 else ''}: {terminal_field(args.old)} -> {terminal_field(args.new)}")
    for moved in result:
        print(f"  {moved.session_id}  {terminal_field(moved.old_path)} -> {terminal_field(moved.new_path)}")
    if not Path(args.new).exists():  # a typo would leave the session under a name nobody opens
        print(f"note: {terminal_field(args.new)} does not exist (yet); its next kernel will find the session "
              "once it does", file=sys.stderr)
    return 0


_COMMANDS = {"list": _list, "show": _show, "prune": _prune, "rm": _rm, "move": _move}
