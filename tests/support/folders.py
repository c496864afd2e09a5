"""A folder's state, to show that what must not change did not."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path


def folder_state(root: Path) -> dict[str, tuple[int, str]]:
    """Every entry under root, links not followed: (mode, content hash or link)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            if p.is_symlink():
                detail = os.readlink(p)
            elif p.is_file():
                detail = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                detail = ""
            state[str(p.relative_to(root))] = (st.st_mode, detail)
    return state


def usage_counter(folder: Path) -> Callable[[], tuple[int, int]]:
    """A ledger's `measure` for a plain folder: (bytes, names) as the host counts them,
    through the same descriptor walk (host/safe_fs.py)."""
    from wasm_kernel.host.safe_fs import open_root, tree_usage

    def measure() -> tuple[int, int]:
        fd = open_root(folder)
        try:
            return tree_usage(fd)
        finally:
            os.close(fd)
    return measure
