"""The on-disk cache: compiled guest modules and the staged runtime tree.

Compiled modules are native code that wasmtime maps and runs, so the cache folder
is private to this user (0700) and never reachable from a guest.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_ENV = "WASM_KERNEL_CACHE_DIR"


def cache_root() -> Path:
    """`$WASM_KERNEL_CACHE_DIR`, else the platform's user cache dir for wasm-kernel."""
    given = os.environ.get(CACHE_ENV)
    root = Path(given) if given else Path(platformdirs.user_cache_dir("wasm-kernel"))
    return private_dir(root)


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink():
        raise RuntimeError(f"wasm-kernel cache folder {path} is not a real folder; remove it or set {CACHE_ENV}")
    if st.st_uid != os.getuid():
        raise RuntimeError(f"wasm-kernel cache folder {path} belongs to another user; set {CACHE_ENV} to a folder of yours")
    if st.st_mode & 0o022:
        os.chmod(path, st.st_mode & ~0o022)
    return path


def cache_usage(root: Path | None = None) -> tuple[int, int]:
    """(bytes on disk, files) under the cache folder, links not followed: what `du`
    counts, holes not included (a warm image's zero pages are holes)."""
    top = cache_root() if root is None else root
    used = files = 0
    for folder, dirs, names in os.walk(top, followlinks=False):
        for name in names:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:  # removed while walked (a build replacing its file)
                continue
            used += st.st_blocks * 512
            files += 1
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return used, files
