"""Stable session identity (seed 002), adapted to notebooks.

A notebook needs the same session, and so the same files, every time its kernel
starts, without anyone remembering a UUID. The identity of a session is derived
from who runs what, and where:

    key = sha256(f"{realpath(notebook_path)}:{mode}:{scope_key}:{agent_key}").hexdigest()

- `notebook_path` is canonicalised with realpath, so a notebook reached through a
  symlinked folder is the same notebook.
- `mode` says how long one identity lasts:
    notebook  one session per notebook, across kernel restarts (scope_key is "");
    run       one per execution, e.g. per nbclient run (scope_key = the run's id);
    day       one per UTC day (scope_key = "YYYY-MM-DD", today by default).
- `agent_key` separates users of the same notebook: the explicit value, else
  $JUPYTERHUB_USER, else the OS user, else "default". With no agent at all a
  session is still scoped by mode and scope_key, never one eternal per-path session.

The key is the full 64-hex SHA-256, never truncated (seed 002: no collisions by
shortening). scope_key and agent_key may not contain ':' so that the material
splits back into its parts one way only (the path, which comes first, may): without
that rule scope "a:b" + agent "c" and scope "a" + agent "b:c" would share a key.
Values the host hands over rather than a caller ($JUPYTERHUB_USER, the OS user, a
kernel id) are escaped instead of refused (escape_part): a JupyterHub user named
"a:b" still starts a kernel, and still never shares one with "a%3Ab".

This is not authentication: an agent_key is a string anyone can pass.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone

MODES = ("notebook", "run", "day")
DEFAULT_AGENT = "default"
_MAX_PART = 1024  # an execution id or user name longer than this is a mistake, not an id
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class SessionIdentity:
    """The parts of an identity and its key (full SHA-256 hex of `material`)."""

    notebook_path: str  # realpath
    mode: str
    scope_key: str
    agent_key: str
    key: str

    @property
    def material(self) -> str:
        """The string that is hashed into `key`."""
        return f"{self.notebook_path}:{self.mode}:{self.scope_key}:{self.agent_key}"


def derive_session_identity(
    notebook_path: str | os.PathLike[str],
    mode: str = "notebook",
    scope_key: str | date | None = None,
    agent_key: str | None = None,
) -> SessionIdentity:
    """The stable identity of a notebook session; ValueError (one line) on bad input.

    The notebook need not exist yet (a kernel may start before the file is saved);
    its path is still canonicalised as far as it exists.
    """
    path = _canonical_path(notebook_path)
    if mode not in MODES:
        raise ValueError(f"unknown session mode {mode!r}: expected one of {', '.join(MODES)}")
    scope = _scope_for(mode, scope_key)
    agent = resolve_agent_key(agent_key)
    material = f"{path}:{mode}:{scope}:{agent}"
    key = hashlib.sha256(material.encode("utf-8", "surrogateescape")).hexdigest()
    return SessionIdentity(path, mode, scope, agent, key)


def resolve_agent_key(explicit: str | None = None) -> str:
    """explicit value -> $JUPYTERHUB_USER -> OS user -> "default"; empty values are skipped."""
    if explicit is not None and not isinstance(explicit, str):
        raise ValueError(f"agent_key must be a string, got {type(explicit).__name__}")
    if explicit:
        return _check_part("agent_key", explicit)
    for value in (os.environ.get("JUPYTERHUB_USER"), _os_user()):
        if value:
            return escape_part(value)
    return DEFAULT_AGENT


def escape_part(value: str) -> str:
    """A host-given value made a valid scope or agent key, injectively: '%', ':',
    unprintable characters and whitespace at either end become %XX (their UTF-8
    bytes), so no two values meet; a value with none of them is left as it was
    (identities made before keep their sessions). One too long for a key is
    replaced by its SHA-256."""
    out = []
    last = len(value) - 1
    for i, ch in enumerate(value):
        if ch in "%:" or not ch.isprintable() or (ch.isspace() and i in (0, last)):
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape")))
        else:
            out.append(ch)
    escaped = "".join(out)
    if len(escaped) > _MAX_PART:
        return "sha256-" + hashlib.sha256(escaped.encode("utf-8", "surrogateescape")).hexdigest()
    return escaped


def _os_user() -> str | None:
    # getpass.getuser raises when neither $LOGNAME/$USER/... nor the passwd database
    # name the user (KeyError before 3.13, OSError since), e.g. a container running
    # as an arbitrary uid. That is the case the "default" fallback is for.
    try:
        return getpass.getuser()
    except Exception:
        return None


def _canonical_path(notebook_path: str | os.PathLike[str]) -> str:
    try:
        raw = os.fspath(notebook_path)
    except TypeError:
        raise ValueError(f"notebook_path must be a path, got {type(notebook_path).__name__}") from None
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if not raw:
        raise ValueError("notebook_path must not be empty")
    if "\0" in raw:
        raise ValueError("notebook_path must not contain NUL bytes")
    return os.path.realpath(raw)


def _scope_for(mode: str, scope_key: str | date | None) -> str:
    if mode == "notebook":
        # A notebook-mode scope would silently split one notebook into several
        # sessions; refuse it rather than guess which the caller meant.
        if scope_key not in (None, ""):
            raise ValueError(f"mode 'notebook' takes no scope_key, got {scope_key!r}")
        return ""
    if mode == "run":
        if scope_key is None or scope_key == "":
            raise ValueError("mode 'run' needs a scope_key: the execution id of the run")
        if not isinstance(scope_key, str):
            raise ValueError(f"scope_key must be a string, got {type(scope_key).__name__}")
        return _check_part("scope_key", scope_key)
    # day: UTC, so two hosts (or a host across a DST change) agree on what "today" is.
    if scope_key is None or scope_key == "":
        return datetime.now(timezone.utc).date().isoformat()
    if isinstance(scope_key, datetime):
        # A datetime is a date subclass; take its UTC day, not its local one.
        if scope_key.tzinfo is None:
            raise ValueError("mode 'day' needs an aware datetime (or a date, or 'YYYY-MM-DD')")
        return scope_key.astimezone(timezone.utc).date().isoformat()
    if isinstance(scope_key, date):
        return scope_key.isoformat()
    if isinstance(scope_key, str) and _DAY.fullmatch(scope_key):
        try:
            return date.fromisoformat(scope_key).isoformat()
        except ValueError:
            pass
    raise ValueError(f"mode 'day' needs a UTC date 'YYYY-MM-DD' as scope_key, got {scope_key!r}")


def _check_part(what: str, value: str) -> str:
    if "\0" in value:
        raise ValueError(f"{what} must not contain NUL bytes")
    if ":" in value:
        raise ValueError(f"{what} {value!r} must not contain ':' (it separates the identity's parts)")
    if len(value) > _MAX_PART:
        raise ValueError(f"{what} is longer than {_MAX_PART} characters")
    if not value.isprintable() or value != value.strip():
        raise ValueError(f"{what} {value!r} must be printable, without leading or trailing whitespace")
    return value
