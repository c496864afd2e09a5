"""The source files of the guest's built-in libraries, for tracebacks and inspect.

The guest's numpy, pandas, scipy and the rest ship as bytecode only, inside its
stdlib zip (`python315.zip/numpy/...pyc`): a traceback through them showed no line
of code, and `inspect.getsource(numpy.mean)` raised OSError, where ipykernel shows
both. Their pure-Python files are the same in every build of a version, so
`wasm-kernel precompile` recovers them from the registry's wheel of the very same
version (the CPython 3.13 Linux wheel: any build has the same .py files), keeping
only the files the guest has bytecode for, into one folder of the cache per guest
build. The guest asks for a file when a traceback or inspect needs it (the door's
`source` message): read here from that folder, by a checked relative path, never
through a link. Without the folder (no registry at precompile), frames stay folded
as before.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from .artifacts import guest_artifacts
from .cache_dir import cache_root, private_dir
from .log import get_logger
from .safe_fs import open_dir_path, open_root

log = get_logger("wasm_kernel.host")

# The distributions whose frames a notebook's tracebacks pass through most; each is
# one wheel from the registry at precompile (about 100 MB in all).
DISTRIBUTIONS = ("numpy", "pandas", "scipy", "matplotlib", "seaborn", "scikit_learn", "statsmodels", "sympy",
                 "networkx")
# The wheel whose .py files are taken: a CPython 3.13 Linux build of the same version.
WHEEL_TAGS = ("--python-version", "3.13", "--implementation", "cp", "--abi", "cp313",
              "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
              "--platform", "manylinux2014_x86_64", "--platform", "any")
MAX_SOURCE_BYTES = 8 << 20  # one file, as read for the guest
_SOURCE_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*\.py")
DONE = ".complete"


def sources_folder() -> Path:
    """This guest build's folder of library sources in the cache (it may not exist)."""
    return cache_root() / "library-sources" / guest_artifacts().stdlib_sha256[:16]


def read_source(relative: str) -> bytes | None:
    """The source of `python315.zip/<relative>` (a .py path inside the stdlib zip), or
    None: not fetched, not a checked path, a link, or larger than MAX_SOURCE_BYTES."""
    if len(relative) > 1024 or not _SOURCE_PATH.fullmatch(relative) or ".." in relative.split("/"):
        return None
    parts = relative.split("/")
    try:
        root = open_root(sources_folder())
    except OSError:
        return None
    try:
        folder = open_dir_path(root, parts[:-1])
    except (OSError, ValueError):
        os.close(root)
        return None
    os.close(root)
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_SOURCE_BYTES + 1)[:MAX_SOURCE_BYTES]
    finally:
        os.close(fd)


def is_fetched() -> bool:
    return (sources_folder() / DONE).is_file()


def fetch_sources(say: Callable[[str], None] = lambda line: None) -> tuple[int, list[str]]:
    """Fetch DISTRIBUTIONS' sources for the guest's versions into sources_folder().
    Returns (files kept, one line per distribution that could not be fetched). Safe to
    run again: a finished folder is kept; one cut short is swept and made anew."""
    final = sources_folder()
    if (final / DONE).is_file():
        return 0, []
    final.parent.mkdir(parents=True, exist_ok=True)
    private_dir(final.parent)
    from packaging.utils import canonicalize_name

    from .builtin_packages import builtin_distributions  # the installer's: not every kernel start's import

    versions = builtin_distributions()
    with zipfile.ZipFile(guest_artifacts().stdlib_zip) as z:
        compiled = {name[:-1] for name in z.namelist() if name.endswith(".pyc")}  # "numpy/x.py" for "numpy/x.pyc"
    missing: list[str] = []
    kept = 0
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=final.parent) as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        for dist in DISTRIBUTIONS:
            found = versions.get(canonicalize_name(dist))
            if found is None:
                continue
            name, version = found
            say(f"{name} {version}")
            wheels = Path(scratch) / name
            wheels.mkdir()
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                 "-q", *WHEEL_TAGS, "--dest", str(wheels), f"{name}=={version}"],
                capture_output=True, text=True, timeout=900,
            )
            wheel = next(iter(sorted(wheels.glob("*.whl"))), None)
            if done.returncode != 0 or wheel is None:
                last = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-1:] or ["no wheel"]
                missing.append(f"{name} {version}: {last[0][:200]}")
                continue
            kept += _extract(wheel, tree, compiled)
            shutil.rmtree(wheels, ignore_errors=True)
        (tree / DONE).write_text("".join(f"{d}\n" for d in DISTRIBUTIONS))
        if final.exists():
            shutil.rmtree(final)
        tree.rename(final)
    log.info("library_sources.fetched", files=kept, missing=len(missing))
    return kept, missing


def _extract(wheel: Path, tree: Path, compiled: set[str]) -> int:
    """The wheel's .py files the guest has bytecode for, under `tree` at the same path."""
    kept = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if name not in compiled or not _SOURCE_PATH.fullmatch(name) or info.file_size > MAX_SOURCE_BYTES:
                continue
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
            kept += 1
    return kept


__all__ = ["DISTRIBUTIONS", "fetch_sources", "is_fetched", "read_source", "sources_folder"]
