"""The one error a notebook's request to the host ends in when it is refused: a
magic's (shown as `UsageError: ...`), or the lab panel's (its answer's line). Apart
from the magics' registry, so the host's workspace writes (workspace_writes.py),
which both use, import no magic."""


class MagicError(Exception):
    """A refused or malformed request: shown as one line."""


__all__ = ["MagicError"]
