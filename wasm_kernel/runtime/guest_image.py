"""A guest's use of warm images: which one it boots from (and why none, said in its
boot notice), mapping one into a new instance, and saving itself as one (an
image_build guest). warm_image.py keeps the images on disk.
PythonGuest inherits it; the state it reads is the guest's, declared below."""

from __future__ import annotations

import ctypes
import uuid
from collections.abc import Callable
from pathlib import Path

import wasmtime

from ..host.memory_checkpoint import MemoryCheckpoint
from ..host.memory_image import ImageError, MemoryImage, map_image, write_image
from .fd_ledger import FdLedger
from .guest_config import GuestOptions, GuestUnavailable, ImageSource
from .guest_thread import GuestThread
from .warm_image import TMP_FOLDER, ImageBusy, ImageUnavailable, copy_tmp_tree


class GuestImage:
    """The warm-image side of a guest. The guest sets these as it starts."""

    _images: ImageSource | None
    _image_build: tuple[str, ...] | None  # the modules an image_build guest imports
    _optimized: bool
    _thread: GuestThread
    _private: Path | None
    _memory: wasmtime.Memory
    _globals: list[wasmtime.Global]
    _checkpoint: MemoryCheckpoint | None
    options: GuestOptions
    memory_bytes: int | None
    boot_notice: str | None
    ledger: FdLedger
    quota_scratch: int
    readdir_scratch: int
    overlay_scratch: int
    # Methods of the guest's other parts, declared as attributes only: a stub method
    # here would hide the real one from a base that comes later in the guest's MRO.
    _require_store: Callable[[], wasmtime.Store]
    _grow_to: Callable[[wasmtime.Store, int], None]
    _uniform_layout: Callable[[], bool]  # only a guest on the shared layout uses an image

    def _image_for_boot(self) -> MemoryImage | None:
        if (not self._uniform_layout() or not self.options.warm_image or self._image_build is not None
                or self._images is None):
            return None
        try:
            image = self._images(self._optimized)
            if image is None:
                return None
        except ImageBusy:
            return None  # only slower this once: said in the log, not to the user
        except ImageUnavailable as err:
            self.boot_notice = (
                f"The warm image could not be built ({err}); this sandbox started without it, which takes "
                "longer. The log has the details."
            )
            return None
        if self.memory_bytes is not None and image.size > self.memory_bytes:
            self.boot_notice = (
                f"The warm image ({image.size >> 20} MiB) is larger than this sandbox's memory limit "
                f"({self.memory_bytes >> 20} MiB); started without it."
            )
            return None
        return image

    def _adopt_image(self, store: wasmtime.Store, image: MemoryImage) -> None:
        """Map `image` into the new instance's memory, as its state and its first
        checkpoint's base; its scratch areas are where the build allocated them."""
        if image.meta.get("globals") != len(self._globals) or len(image.globals) != len(self._globals):
            raise ImageError("the warm image does not match the guest module's globals")
        self._grow_to(store, image.size)
        base = ctypes.addressof(self._memory.data_ptr(store).contents)
        map_image(image, base)
        for g, value in zip(self._globals, image.globals):
            g.set_value(store, wasmtime.Val.i32(value))
        assert self._checkpoint is not None
        self._checkpoint.adopt_image(base, image)
        self.quota_scratch = int(image.meta["quota_scratch"])
        self.readdir_scratch = int(image.meta["readdir_scratch"])
        self.overlay_scratch = int(image.meta["overlay_scratch"])

    def save_image(self, folder: Path, key: str) -> MemoryImage:
        """This guest's state, between turns, as a warm image (an image_build guest)."""
        if self._image_build is None:
            raise GuestUnavailable("only a guest booted with image_build can be saved as an image")
        return self._thread.call(self._save_image, folder, key)

    def _save_image(self, folder: Path, key: str) -> MemoryImage:
        store = self._require_store()
        if self.ledger.opened or self.ledger.deferred:
            # A descriptor open in the image would be a number with nothing behind it
            # in every sandbox started from it.
            raise ImageUnavailable(f"descriptors {sorted(self.ledger.opened)} were left open by the build")
        base = ctypes.addressof(self._memory.data_ptr(store).contents)
        assert self._private is not None
        guest_tmp = self._private / "tmp"
        meta = {
            "quota_scratch": self.quota_scratch,
            "readdir_scratch": self.readdir_scratch,
            "overlay_scratch": self.overlay_scratch,
            "globals": len(self._globals),
            "preload": list(self._image_build or ()),
            # Names this build, not just its key: a saved state stored as its
            # difference from an image wakes only over the very same bytes
            # (runtime/hibernation.py), and two builds of one key may differ.
            "build_id": uuid.uuid4().hex,
        }
        return write_image(
            folder, key=key, address=base, size=self._memory.data_len(store),
            globals_=[int(g.value(store)) for g in self._globals], meta=meta,
            extra=lambda scratch: copy_tmp_tree(guest_tmp, scratch / TMP_FOLDER),
        )


__all__ = ["GuestImage"]
