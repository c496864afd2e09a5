"""The kernel's host magics. Importing this package registers every one in MAGICS."""

from . import limit_magics, network_magics, pip_magics, rewind_magics, session_magics, state_magics  # noqa: F401
from .registry import MAGICS, MagicError, MagicOutput

__all__ = ["MAGICS", "MagicError", "MagicOutput"]
