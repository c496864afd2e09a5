"""Native names for the host's threads, so `top -H`, `ps -L` and /proc/<pid>/task
show which of a kernel's threads is which (Python 3.11 names only its own objects).

A test that checks no thread of a kind outlives its work reads these names from
outside the process: other threads of a kernel come and go (a stop, a prune), and a
bare count cannot tell them apart."""

from __future__ import annotations

import ctypes
import sys

_PR_SET_NAME = 15
_NAME_MAX = 15  # bytes, as the kernel keeps them (TASK_COMM_LEN less the NUL)

try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):  # no libc to ask: names stay the process's
    _prctl = None


def native_name(name: str) -> str:
    """The name as /proc/<pid>/task/<tid>/comm shows it once set."""
    return name.encode("ascii", "replace")[:_NAME_MAX].decode("ascii")


def name_this_thread(name: str) -> None:
    """Give the calling thread `name` (cut to 15 bytes) for the OS; a no-op off Linux."""
    if _prctl is not None:
        _prctl(_PR_SET_NAME, ctypes.c_char_p(native_name(name).encode("ascii")), 0, 0, 0)
