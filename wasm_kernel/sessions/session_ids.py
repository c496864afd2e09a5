"""Session ids: UUIDv4 generation and strict validation.

A session id becomes a directory name under the workspace root, so it is checked
before it touches the filesystem. Only the canonical 8-4-4-4-12 form is accepted
(upper case is normalised to lower): anything else, `.`, `..`, "", whitespace, NUL,
path separators, braces, `urn:uuid:` prefixes, is rejected with ValueError. One
spelling per session means one directory per session.
"""

from __future__ import annotations

import re
import uuid

_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
EXPECTED = "a canonical UUID such as '1b4e28ba-2fa1-41d2-883f-0016d3cca427' (36 characters: hex digits and hyphens in 8-4-4-4-12 groups)"


def new_session_id() -> str:
    """A fresh random (version 4) UUID, lower case, canonical form."""
    return str(uuid.uuid4())


def is_session_id(name: str) -> bool:
    """True when `name` is already a canonical lower-case UUID (as on disk)."""
    return _CANONICAL.fullmatch(name) is not None


def validate_session_id(value: object) -> str:
    """Return `value` as a canonical lower-case UUID string or raise ValueError.

    A uuid.UUID instance is accepted as well. The check is purely lexical, so it can
    run before any filesystem call.
    """
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        lowered = value.lower()
        # Lower-casing first, then matching ASCII hex only: a non-ASCII letter whose
        # lower case happens to be ASCII cannot sneak through, it fails the length.
        if value.isascii() and _CANONICAL.fullmatch(lowered):
            return lowered
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise ValueError(f"invalid session id {shown}: expected {EXPECTED}")
