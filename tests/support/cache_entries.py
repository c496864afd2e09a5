"""What a test adds to the shared wasm-kernel cache (course sites, their warm
images) is the test's own: removed after it, the rest left as found."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from wasm_kernel.host.cache_dir import cache_root

BUILT_PER_CONFIGURATION = ("course", "images", "standins")


@contextmanager
def new_cache_entries_removed(kinds: tuple[str, ...] = BUILT_PER_CONFIGURATION) -> Iterator[None]:
    folders = [cache_root() / kind for kind in kinds]
    before = {f: set(os.listdir(f)) if f.is_dir() else set() for f in folders}
    try:
        yield
    finally:
        for folder in folders:
            for name in (set(os.listdir(folder)) - before[folder]) if folder.is_dir() else set():
                path = folder / name
                if path.is_dir() and not path.is_symlink():
                    for dirpath, _dirs, _files in os.walk(path):
                        os.chmod(dirpath, 0o755)
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
