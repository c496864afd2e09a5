"""A guest's linear memory saved to a file, and mapped back copy-on-write.

Wizer's way is to write the snapshot into the module's data segments, which
wasmtime then maps copy-on-write from the compiled artifact. For the CPython guest
that means a new module per snapshot and a full Cranelift compile of it (~100 s,
2.5 GB), each time the warm state changes. Mapping the file ourselves gives the same
result with no compile: the image's pages are mapped `MAP_PRIVATE` over the
instance's linear memory, so every sandbox on the machine shares the unchanged pages
through the page cache and a page is copied only when a guest writes to it.

An image is a folder holding `memory.bin` (the memory bytes, sparse where zero),
`image.json` (its key, size, mutable globals and whatever the caller adds) and
anything else the caller stages (`write_image(..., extra=...)`). It is built in a
scratch folder and renamed into place, so a reader sees a whole image or none.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .log import get_logger

log = get_logger("wasm_kernel.host")

MEMORY_FILE = "memory.bin"
MANIFEST_FILE = "image.json"
FORMAT = 1
_CHUNK = 1 << 16  # wasm page: the unit a sparse write skips when all zero
_ZERO = bytes(_CHUNK)
_MAP_FIXED = 0x10

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class ImageError(RuntimeError):
    """An image could not be written or mapped."""


@dataclass(frozen=True)
class MemoryImage:
    folder: Path
    key: str
    size: int  # bytes of linear memory
    globals: list[int]  # the mutable globals, in export order
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def memory_file(self) -> Path:
        return self.folder / MEMORY_FILE


def write_image(
    folder: Path, *, key: str, address: int, size: int, globals_: list[int], meta: dict[str, Any],
    extra: Callable[[Path], None] | None = None,
) -> MemoryImage:
    """Save `size` bytes at `address` (a guest's memory, between turns) as an image in
    `folder`, replacing any image there. extra(scratch) adds files of the caller's."""
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    scratch = Path(tempfile.mkdtemp(prefix=f".image-{folder.name}-", dir=folder.parent))
    try:
        view = memoryview((ctypes.c_char * size).from_address(address)).cast("B")
        try:
            with open(scratch / MEMORY_FILE, "wb") as f:
                for offset in range(0, size, _CHUNK):
                    chunk = view[offset : offset + _CHUNK]
                    if chunk == _ZERO[: len(chunk)]:
                        f.seek(len(chunk), os.SEEK_CUR)  # a hole: no disk, reads as zero
                    else:
                        f.write(chunk)
                f.truncate(size)
        finally:
            view.release()
        manifest = {"format": FORMAT, "key": key, "size": size, "globals": globals_, "meta": meta}
        (scratch / MANIFEST_FILE).write_text(json.dumps(manifest))
        if extra is not None:
            extra(scratch)
        for path in scratch.rglob("*"):
            path.chmod(0o700 if path.is_dir() else 0o600)
        old = None
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".old-{folder.name}-", dir=folder.parent))
            os.replace(folder, old / "image")
        os.replace(scratch, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)  # mapped by running guests: they keep the inode
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return MemoryImage(folder, key, size, list(globals_), dict(meta))


def sweep_partial(folder: Path) -> list[str]:
    """Remove what a killed build of `folder` left behind (write_image()'s scratch
    folders, and the builder's `.work-` folder); the caller holds the lock that keeps
    other writers of it away."""
    removed = []
    for prefix in (f".image-{folder.name}-", f".old-{folder.name}-", f".work-{folder.name}-"):
        for entry in folder.parent.glob(prefix + "*"):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
    return removed


def load_image(folder: Path, key: str) -> MemoryImage | None:
    """The image in `folder` if it is whole, ours and made for `key`; else None."""
    manifest_path, memory_path = folder / MANIFEST_FILE, folder / MEMORY_FILE
    for path in (folder, manifest_path, memory_path):
        if not _private(path):
            if path.exists() or path.is_symlink():
                log.warning("memory_image.refused", path=str(path))
            return None
    try:
        manifest = json.loads(manifest_path.read_text())
        size = int(manifest["size"])
        globals_ = [int(v) for v in manifest["globals"]]
        meta = dict(manifest.get("meta") or {})
        ok = manifest.get("format") == FORMAT and manifest.get("key") == key
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("memory_image.unreadable", path=str(manifest_path), error=str(err))
        return None
    if not ok:
        return None
    if memory_path.stat().st_size != size or size % mmap.PAGESIZE:
        log.warning("memory_image.bad_size", path=str(memory_path))
        return None
    return MemoryImage(folder, key, size, globals_, meta)


def _private(path: Path) -> bool:
    """A plain file or folder of ours, not a link, that no one else may write."""
    try:
        st = path.lstat()
    except OSError:
        return False
    if path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return False
    return path.is_dir() or path.is_file()


def map_image(image: MemoryImage, address: int, length: int | None = None) -> None:
    """Map the image's memory privately (copy-on-write) over [address, address+size):
    what was mapped there before is replaced. The caller owns that range."""
    length = image.size if length is None else min(length, image.size)
    fd = os.open(image.memory_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        got = _libc.mmap(
            address, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | _MAP_FIXED, fd, 0
        )
    finally:
        os.close(fd)
    if got != address:
        err = ctypes.get_errno()
        raise ImageError(f"mapping the warm image failed: {os.strerror(err)}")


def map_readonly(image: MemoryImage) -> tuple[int, int]:
    """The image's memory mapped read-only somewhere new: (address, length), for
    comparing a guest against it. unmap() when done."""
    fd = os.open(image.memory_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        got = _libc.mmap(None, image.size, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
    finally:
        os.close(fd)
    if got in (None, ctypes.c_void_p(-1).value):
        raise ImageError(f"mapping the warm image failed: {os.strerror(ctypes.get_errno())}")
    return int(got), image.size


def unmap(address: int, length: int) -> None:
    _libc.munmap(address, length)


__all__ = ["ImageError", "MemoryImage", "load_image", "map_image", "map_readonly", "sweep_partial", "unmap",
           "write_image"]
