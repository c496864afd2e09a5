"""A session follows its notebook: re-point the identity registry after a rename.

A notebook's identity is keyed on its path (identity.py), so renaming the notebook,
or a folder of notebooks, would leave its session behind: the next kernel derives a
new key and gets an empty workspace. move_notebook_sessions rewrites the registry
rows of the old path (and of every notebook under it, for a folder) to the new path
and recomputes their keys exactly as derive_session_identity would, so the renamed
notebook's next kernel finds its session again. Callers: `wasm-kernel sessions
move` (a rename done in a shell) and the Jupyter Server extension that watches the
contents service's renames.

Rules:
- every mode and every agent of the old path moves, in one transaction
  (SessionRegistry.move_rows), atomic against kernels binding at the same time;
- if the new name already has a session of its own, nothing moves: SessionMoveError,
  one line naming the clash (merging two workspaces, or dropping one, is a person's
  decision, not a rename's). With replace (`sessions move --replace`, a person's
  decision) a clashing session that is empty and unused is removed first;
- no row of the old path: an empty MoveResult; the caller decides whether that is
  an error (the CLI says so, the server extension ignores notebooks without one).
- a copy (Duplicate, Save As) is not a move: the copy gets a new, empty session.

Messages name notebooks relative to the renamed item (hw1.ipynb, course2/hw1.ipynb),
never by host path: the server extension may show them to a user.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..core.logger import SandboxLogger
from .identity import SessionIdentity, _canonical_path, derive_session_identity
from .registry import IdentityTaken, RegistryEntry, SessionRegistry

# What the registry's _text made of a non-UTF-8 byte of a path (a lone surrogate).
_ESCAPED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")


class SessionMoveError(ValueError):
    """A move that was refused; nothing moved. The message is one line. `owner`: the
    session the new notebook already has, when that is why (what --replace removes)."""

    def __init__(self, message: str, owner: RegistryEntry | None = None) -> None:
        super().__init__(message)
        self.owner = owner


class MovedSession(NamedTuple):
    session_id: str
    old_path: str  # the notebook's path before the move (as the registry keeps it)
    new_path: str  # and after


@dataclass(frozen=True)
class MoveResult:
    """What moved: one MovedSession per registry row (a notebook has one per mode,
    scope and user). Empty (and false) when no session belonged to the old path."""

    old_path: str  # canonical, as identities are
    new_path: str
    moved: tuple[MovedSession, ...] = ()

    def __len__(self) -> int:
        return len(self.moved)

    def __iter__(self) -> Iterator[MovedSession]:
        return iter(self.moved)


def move_notebook_sessions(
    workspace_root: Path | str,
    old_path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    *,
    logger: SandboxLogger | None = None,
    replace: bool = False,
) -> MoveResult:
    """Move the sessions of the notebook (or folder of notebooks) `old_path` to
    `new_path`; see the module docstring. SessionMoveError (one line) if refused;
    RegistryError if the registry cannot be used. Never creates a registry.

    replace (a notebook's move only): the sessions the new name already has are
    removed first, if no kernel uses them and they hold no file (a kernel started on
    a notebook moved by a bare `mv` made one); else refused, nothing changed."""
    old = _canonical(old_path, "the old path")
    new = _canonical(new_path, "the new path")
    if old == new:
        raise SessionMoveError(f"{_name(old)} and {_name(new)} are the same notebook; nothing to move")
    if old == "/":
        raise SessionMoveError("the root folder cannot be moved; name the notebook or folder that was renamed")
    if new.startswith(old + "/"):
        raise SessionMoveError(f"{_name(new)} lies inside {_name(old)}: a folder cannot move into itself")

    suffixes: dict[str, str] = {}  # session id -> the part of its path below `old`

    def relocate(entry: RegistryEntry) -> SessionIdentity:
        suffix = suffixes[entry.session_id] = _exact_suffix(entry, old)
        if suffix == "" and entry.mode != "run" and os.path.isdir(new):
            # A notebook moved onto a folder's name would never be found again
            # (a kernel whose name is a folder gets a session of its own).
            raise SessionMoveError(f"{_name(new)} is a folder; give the notebook's new path, "
                                   f"e.g. {_name(new)}/{_name(old)}")
        try:
            return derive_session_identity(new + suffix, entry.mode, entry.scope_key or None, entry.agent_key)
        except ValueError as err:
            raise SessionMoveError(f"session {entry.session_id} cannot move: {err}") from None

    with SessionRegistry(workspace_root) as registry:
        if replace:
            _clear_the_way(registry, Path(workspace_root), old, new, relocate)
        try:
            moves = registry.move_rows(old, relocate)
        except IdentityTaken as err:
            raise SessionMoveError(
                f"{_below(err.identity.notebook_path, new)} already has its own session {err.owner.session_id}; "
                "kept both as they were: remove or move that session first",
                err.owner if err.identity.notebook_path == new else None,  # a notebook's: --replace's case
            ) from None
    result = MoveResult(old, new, tuple(
        MovedSession(entry.session_id, old + suffixes[entry.session_id], identity.notebook_path)
        for entry, identity in moves
    ))
    if result.moved:
        (logger or SandboxLogger()).log_event(
            "session.registry.moved", old_path=_as_stored(old), new_path=_as_stored(new), count=len(result),
            session_ids=[m.session_id for m in result.moved],
        )
    return result


def _clear_the_way(registry: SessionRegistry, root: Path, old: str, new: str,
                   relocate: Callable[[RegistryEntry], SessionIdentity]) -> None:
    """For replace: remove the sessions holding the identities old's rows would get,
    all of them or none (commands.remove_empty_sessions)."""
    from .commands import CommandError, SessionHoldsFiles, SessionInUse, remove_empty_sessions

    rows = registry.entries_at(old)
    if not rows and registry.entries_under(old, limit=1):
        raise SessionMoveError(f"--replace moves one notebook, and {_name(old)} is a folder; nothing was changed")
    owners: dict[str, RegistryEntry] = {}
    for entry in rows:
        owner = registry.lookup_identity(relocate(entry))
        if owner is not None and owner.session_id != entry.session_id:
            owners[owner.session_id] = owner
    if not owners:
        return
    try:
        remove_empty_sessions(root, list(owners))
    except (SessionInUse, SessionHoldsFiles) as err:
        owner = owners[err.session_id]
        what = (f"holds {err.files} file{'s' if err.files != 1 else ''} (--replace removes only an empty one)"
                if isinstance(err, SessionHoldsFiles) else "is in use by a running kernel: shut it down first")
        raise SessionMoveError(f"{_below(owner.notebook_path, new)} already has its own session {owner.session_id}, "
                               f"which {what}; nothing was changed", owner) from None
    except CommandError as err:
        raise SessionMoveError(str(err)) from None


def _canonical(path: str | os.PathLike[str], what: str) -> str:
    # derive_session_identity's own canonicalisation, so a path means here exactly
    # what it means to a kernel binding it (realpath; a gone old path is fine).
    try:
        return _canonical_path(path)
    except ValueError as err:
        raise SessionMoveError(f"{what}: {err}") from None


def _exact_suffix(entry: RegistryEntry, old: str) -> str:
    """The part of a row's real path after `old` ("" for the notebook itself).

    The registry keeps a non-UTF-8 byte of a path as the text \\xNN while the key
    hashes the byte, so the suffix it shows may not be the path's: the candidate
    whose key matches the row's is the real one. A row no candidate matches was not
    made by derive_session_identity; moving it could give it a key nobody derives.
    """
    shown = entry.notebook_path[len(_as_stored(old)):]
    candidates = [shown]
    if "\\x" in shown:
        candidates.append(_ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), shown))
    for suffix in candidates:
        material = f"{old}{suffix}:{entry.mode}:{entry.scope_key}:{entry.agent_key}"
        if hashlib.sha256(material.encode("utf-8", "surrogateescape")).hexdigest() == entry.identity_key:
            return suffix
    raise SessionMoveError(
        f"session {entry.session_id} ({_name(entry.notebook_path)}) does not match its registry key; nothing moved"
    )


def _as_stored(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _below(path: str, new: str) -> str:
    """A path under the renamed item as a message shows it: course2/hw1.ipynb."""
    if path == new or path.startswith(new + "/"):
        return _name(new) + _as_stored(path[len(new):])
    return _name(path)


def _name(path: str) -> str:
    """A path as a message shows it: its last part, no host folders."""
    return _as_stored(os.path.basename(path.rstrip("/")) or path)


__all__ = ["MoveResult", "MovedSession", "SessionMoveError", "move_notebook_sessions"]
