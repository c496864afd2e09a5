"""A notebook moved outside Jupyter: the session it left behind, and the command that takes it back.

A session's identity is keyed on the notebook's path (identity.py), so a bare `mv`
in a shell (no `wasm-kernel sessions move`) gives the moved notebook a new, empty
session, and to a student the work looks gone although the old session is still
there. When a kernel's bind creates a notebook's session, earlier_session_notice
looks for the session it most likely left: one of the same agent and mode, not
expired, whose notebook had the same file name and is gone from the disk (a copy's
original still exists and keeps its session). The kernel shows the line on the
first cell; it names both notebooks relative to the new one's folder, never by host
path, and gives the `sessions move --replace` that reattaches the old session.
"""

from __future__ import annotations

import os
import shlex

from .identity import SessionIdentity
from .registry import RegistryEntry, SessionRegistry

# Rows looked at, most recently active first: copies whose originals still exist
# are skipped, and a few dozen rows of one file name are already an unusual course.
CANDIDATES = 20


def earlier_session(registry: SessionRegistry, identity: SessionIdentity,
                    limit: int = CANDIDATES) -> RegistryEntry | None:
    """The most recently active session `identity`'s notebook may have left behind
    under another path, or None. RegistryError if the registry cannot be read."""
    name = os.path.basename(identity.notebook_path)
    for entry in registry.entries_named(name, identity.agent_key, identity.mode, limit):
        # The file moved out of a folder that is still there: a folder that is gone
        # too is a whole tree renamed, or a per-session folder its service removed
        # (the pool's hosts give each notebook one), where the hint would mislead.
        if entry.identity_key != identity.key and not os.path.lexists(entry.notebook_path) \
                and os.path.isdir(os.path.dirname(entry.notebook_path)):
            return entry
    return None


def earlier_session_notice(registry: SessionRegistry, identity: SessionIdentity) -> str | None:
    """The first cell's line about the session a moved notebook left behind, or None.
    Only for a notebook-mode identity (a `day` or `run` session is not the notebook's
    for good, and `sessions move` would not make it so)."""
    if identity.mode != "notebook":
        return None
    entry = earlier_session(registry, identity)
    if entry is None:
        return None
    folder = os.path.dirname(identity.notebook_path)
    old = os.path.relpath(entry.notebook_path, folder)
    new = os.path.basename(identity.notebook_path)
    if not (old + new).isprintable():  # one line, and a command that can be typed as shown
        return None
    when = f"{entry.last_active_at:%Y-%m-%d %H:%M} UTC"
    command = f"wasm-kernel sessions move --replace {shlex.quote(old)} {shlex.quote(new)}"
    return (f"wasm-kernel: this notebook has a new, empty session; an earlier session of {new} (last used {when}) "
            f"belonged to {old}, which is gone: to take it back, shut this kernel down and run `{command}` "
            "in this notebook's folder")


__all__ = ["CANDIDATES", "earlier_session", "earlier_session_notice"]
