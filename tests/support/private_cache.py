"""A wasm-kernel cache of the tests' own (WASM_KERNEL_CACHE_DIR), holding the shared
cache's compiled modules as hard links (copies across file systems), so nothing is
compiled again: what a test builds there (course sites, their warm images, a staged
IPython site) never lands in the user's cache, and goes with the folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from wasm_kernel.host.cache_dir import CACHE_ENV, cache_root


def make_private_cache(folder: Path) -> Path:
    modules = folder / "modules"
    modules.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    for entry in (cache_root() / "modules").iterdir():
        if entry.is_file() and not entry.is_symlink():
            try:
                os.link(entry, modules / entry.name)
            except OSError:
                shutil.copy2(entry, modules / entry.name)
    return folder


def cache_env(folder: Path) -> dict[str, str]:
    return {CACHE_ENV: str(folder)}
