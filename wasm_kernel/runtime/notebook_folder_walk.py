"""wasmtime's opens of the notebook's folder, one name at a time.

The host resolves a union path on its own descriptors (notebook_folder_fs.LowerFolder)
to a link-free path whose names are not hidden. Handed that path whole, wasmtime
would resolve it again its own way: it follows a link in a middle component as long
as the link stays inside the preopen, so a folder swapped for a link to one of the
notebook folder's hidden entries between the host's walk and wasmtime's open reached
that hidden entry (`benchmarks/race_notebook_folder.py hidden --rounds 10000`: the
hidden file's content read 590 times, its size 584 times).

So wasmtime is never handed more than one name. Each folder on the way is opened
by wasmtime from the descriptor of the one before, with OFLAG_DIRECTORY and without
SYMLINK_FOLLOW (O_NOFOLLOW: a link swapped in there fails the open instead of being
followed), and the last name is opened or looked at from the folder reached. Every
name is one of the host's walk, refused again here if hidden, so no interleaving of
the folder's changes with these opens reaches a hidden entry or leaves the folder.
The folders' descriptors on the way are wasmtime's own, closed before the call
returns: the guest never holds them, and the descriptor ledger never sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..host.guest_memory import GuestMemory
from .notebook_folder_fs import is_hidden
from .wasi_abi import ENAMETOOLONG, ENOENT, OFLAG_DIRECTORY, RIGHT_FD_READ, RIGHT_FD_READDIR, SUCCESS

LOOKUP_NOFOLLOW = 0
NAME_ROOM = 256  # scratch bytes for one name (NAME_MAX is 255); a descriptor number follows
# A folder on the way is only looked into: no write right, so wasmtime opens it read-only.
FOLDER_RIGHTS = RIGHT_FD_READ | RIGHT_FD_READDIR

# call(dirfd, name_ptr, name_len): the WASI call to make at the last name's folder.
AtName = Callable[[int, int, int], int]


def call_at_lower(caller: Any, mem: GuestMemory, originals: dict[str, Any], lower_fd: int, resolved: str,
                  scratch: int, call: AtName) -> int:
    """`call` at the last name of the notebook folder's link-free path `resolved`
    ("" is the folder itself: "." of the preopen), from the wasmtime descriptor of
    its folder, reached from `lower_fd` one name at a time without following a link.
    Its errno, or ENOENT if a folder on the way cannot be opened now (a link or
    anything else swapped in since the host's walk; the host's walk, too, finds
    nothing where it cannot open a folder). `scratch`: guest memory for a name and,
    after NAME_ROOM bytes, a descriptor number."""
    names = resolved.split("/") if resolved else ["."]
    if resolved and any(is_hidden(name) or name in ("", ".", "..") for name in names):
        return ENOENT  # never from the host's walk; kept so that no caller can hand one
    here = lower_fd
    try:
        for name in names[:-1]:
            name_len = _put_name(mem, caller, scratch, name)
            if name_len is None:
                return ENAMETOOLONG
            err = int(originals["path_open"](caller, here, LOOKUP_NOFOLLOW, scratch, name_len, OFLAG_DIRECTORY,
                                             FOLDER_RIGHTS, FOLDER_RIGHTS, 0, scratch + NAME_ROOM))
            if here != lower_fd:
                originals["fd_close"](caller, here)
                here = lower_fd
            if err != SUCCESS:
                return ENOENT
            here = mem.u32(caller, scratch + NAME_ROOM)
        name_len = _put_name(mem, caller, scratch, names[-1])
        return ENAMETOOLONG if name_len is None else call(here, scratch, name_len)
    finally:
        if here != lower_fd:
            originals["fd_close"](caller, here)


def _put_name(mem: GuestMemory, caller: Any, at: int, name: str) -> int | None:
    """`name` written at `at` for wasmtime; its length, or None if it does not fit
    (never from the host's walk: the OS refuses longer names)."""
    raw = name.encode()
    if len(raw) >= NAME_ROOM:
        return None
    mem.write(caller, at, raw)
    return len(raw)


__all__ = ["NAME_ROOM", "call_at_lower"]
