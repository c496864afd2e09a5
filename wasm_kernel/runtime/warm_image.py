"""Warm images: a guest booted once, with IPython's shell built and the usual
libraries imported, saved so that every later sandbox starts from that state.

Building one boots a guest the slow way (the interpreter, IPython, numpy, pandas,
matplotlib: a few seconds) and saves its memory and globals (host/memory_image.py),
plus the files it left in its /tmp (matplotlib's font cache). A sandbox then maps
the image copy-on-write instead of booting, and runs only the per-sandbox start:
reseeding, its history, its import caches (`_wasm_kernel_image.start`).

The image key covers everything the saved state depends on: the compiled guest
(module, wasmtime, engine configuration), the stdlib, the staged site, the
preload list, our guest-side code and the guest's environment and mounts. A key
that changes is a new image; an old one is never used. Builds take a file lock, so
concurrent kernels build once; a build that fails leaves no image, and the caller
boots the plain way with a notice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..host.cache_dir import cache_root, private_dir
from ..host.log import get_logger
from ..host.memory_image import MemoryImage, load_image, sweep_partial
from ..host.work_meter import Progress, metered

log = get_logger("wasm_kernel.runtime")

DIGEST_RACY_NS = 2_000_000_000  # a file changed this recently is hashed again at each call (code_digest)
_digests: dict[Path, tuple[tuple[tuple[str, int, int, int], ...], str]] = {}  # folder -> (signature, digest)

# numpy, pandas and matplotlib with the inline backend: what a data notebook imports
# first. Operators change the list with the kernel's `preload_modules` trait.
DEFAULT_PRELOAD = ("numpy", "pandas", "matplotlib.pyplot")
# Bump when what an image holds, or how it is made, changes.
IMAGE_VERSION = "2"  # 2: the image holds a readdir scratch area (wasi_shadows)
IMAGES_DIR = "images"
BASE_CHARS = 24  # of the 40-character key: the part every image of one version shares
STALE_AFTER_S = 24 * 3600  # an image of another version unused this long is dropped
TMP_FOLDER = "tmp"  # the guest's /tmp as the build left it, copied into each sandbox's

Build = Callable[[Path, str], MemoryImage]  # (image folder, key) -> the image written there

_memo: dict[str, MemoryImage] = {}
_failed: dict[str, str] = {}  # key -> why its build failed, so this process does not retry it
_lock = threading.Lock()


class ImageUnavailable(RuntimeError):
    """No warm image: the sandbox boots the plain way, and says why."""


class ImageBusy(ImageUnavailable):
    """Another process is building the image right now. A sandbox boots the plain
    way rather than wait: that build can take minutes on a loaded machine (the
    background warm-up runs nice'd), a plain boot takes seconds."""


def code_digest(folder: Path) -> str:
    """Our guest-side code, by content: a changed module is a changed image, even
    between two builds of one version. Read and hashed once per process while no
    file's size, time or inode changes (a kernel's start asks two or three times,
    ~2 ms each); files changed in the last DIGEST_RACY_NS are read every time, as
    their timestamps are too coarse to tell two writes apart."""
    files = sorted(_py_files(folder), key=lambda f: f[0].split("/"))
    signature = tuple((rel, st.st_size, st.st_mtime_ns, st.st_ino) for rel, _, st in files)
    cached = _digests.get(folder)
    if cached is not None and cached[0] == signature:
        return cached[1]
    h = hashlib.sha256()
    for rel, path, _ in files:
        with open(path, "rb") as f:
            h.update(rel.encode() + b"\0" + f.read() + b"\0")
    digest = h.hexdigest()
    if time.time_ns() - max((st.st_mtime_ns for _, _, st in files), default=0) > DIGEST_RACY_NS:
        _digests[folder] = (signature, digest)
    return digest


def _py_files(folder: Path) -> list[tuple[str, str, os.stat_result]]:
    """(path relative to folder, '/'-separated; path; stat) of every .py file below it."""
    found = []
    for top, _dirs, names in os.walk(folder):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                found.append((os.path.relpath(path, folder).replace(os.sep, "/"), path, os.stat(path)))
    return found


def image_key(*, preload: Sequence[str], site_key: str, stdlib_sha256: str, layout: str, guest_code: str) -> str:
    from .. import __version__
    from ..host.module_cache import guest_module_key  # imports wasmtime: not for the CLI's --help

    base = [IMAGE_VERSION, __version__, guest_module_key(), stdlib_sha256, site_key, guest_code, layout]
    # Two parts: what this version and machine make every image from, then the
    # preload list. Images of another base are stale (another version, module or
    # site); images of this base with other lists are an operator's other kernels.
    base_part = hashlib.sha256("\n".join(base).encode()).hexdigest()[:BASE_CHARS]
    preload_part = hashlib.sha256(("preload=" + ",".join(preload)).encode()).hexdigest()[: 40 - BASE_CHARS]
    return base_part + preload_part


def image_folder(key: str) -> Path:
    return cache_root() / IMAGES_DIR / key


def is_image_built(key: str) -> bool:
    return key in _memo or load_image(image_folder(key), key) is not None


def warm_image(key: str, build: Build, progress: Progress | None = None, *, wait: bool = True) -> MemoryImage:
    """The image for `key`: from this process, from the cache, or built now (under a
    lock, so concurrent kernels build it once). Raises ImageUnavailable; with
    wait=False, ImageBusy at once if another process holds the build lock."""
    with _lock:
        if key in _memo:
            return _memo[key]
        if key in _failed:
            raise ImageUnavailable(_failed[key])
        folder = image_folder(key)
        image = load_image(folder, key)
        if image is not None:
            _mark_used(folder)
        if image is None:
            try:
                image = _build_locked(folder, key, build, progress, wait)
            except ImageBusy:
                raise  # not a failure: the next start finds the image built
            except Exception as err:
                reason = " ".join(str(err).split())[:300] or type(err).__name__
                _failed[key] = reason
                log.warning("warm_image.build_failed", key=key, error=reason)
                raise ImageUnavailable(reason) from None
        _memo[key] = image
        return image


def _mark_used(folder: Path) -> None:
    """An image in use is not stale (_sweep_other_images goes by the folder's mtime)."""
    try:
        os.utime(folder)
    except OSError:
        pass


def forget(key: str) -> None:
    """Drop this process's memo of `key` (its files were removed): the next
    warm_image() loads or builds it again."""
    with _lock:
        _memo.pop(key, None)


def _build_locked(folder: Path, key: str, build: Build, progress: Progress | None, wait: bool) -> MemoryImage:
    parent = private_dir(folder.parent)
    lock = os.open(parent / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            log.info("warm_image.busy", key=key)
            raise ImageBusy("another process is building the warm image") from None
        image = load_image(folder, key)
        if image is not None:
            return image
        left = sweep_partial(folder)
        if left:
            log.info("warm_image.swept_partial", key=key, folders=left)
        _sweep_other_images(parent, keep=key)
        log.info("warm_image.build", key=key)
        start = time.monotonic()
        image = metered("warm-image", lambda: build(folder, key), progress)
        log.info("warm_image.built", key=key, seconds=round(time.monotonic() - start, 2), bytes=image.size)
        return image
    finally:
        os.close(lock)


def _sweep_other_images(parent: Path, keep: str) -> None:
    """An image is about 100 MB of disk. One made on another base (another version,
    guest module or site) and not used for STALE_AFTER_S is dropped; one of this base
    (another preload list) is kept. A sandbox still mapping a dropped image keeps
    its inode."""
    now = time.time()
    for entry in parent.iterdir():
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir() or entry.name == keep:
            continue
        if entry.name[:BASE_CHARS] == keep[:BASE_CHARS]:
            continue
        try:
            idle = now - entry.stat().st_mtime
        except OSError:
            continue
        if idle > STALE_AFTER_S:
            shutil.rmtree(entry, ignore_errors=True)
            (parent / f"{entry.name}.lock").unlink(missing_ok=True)


def copy_tmp_tree(source: Path, dest: Path) -> None:
    """Copy the build's /tmp (plain files and folders only) into a sandbox's /tmp."""
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        rel = Path(dirpath).relative_to(source)
        (dest / rel).mkdir(parents=True, exist_ok=True, mode=0o700)
        for name in filenames:
            src = Path(dirpath) / name
            if src.is_file() and not src.is_symlink():
                shutil.copyfile(src, dest / rel / name, follow_symlinks=False)


__all__ = [
    "DEFAULT_PRELOAD",
    "ImageUnavailable",
    "code_digest",
    "copy_tmp_tree",
    "image_folder",
    "image_key",
    "is_image_built",
    "forget",
    "warm_image",
]
