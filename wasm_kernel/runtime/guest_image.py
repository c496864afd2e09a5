"""A guest's use of warm images: which one it boots from (and why none, said in its
boot notice), mapping one into a new instance, and saving itself as one (an
image_build guest). warm_image.py keeps the images on disk.
A guest holds one GuestImage; its methods run on the guest's thread."""

from __future__ import annotations

import uuid
from pathlib import Path

import wasmtime

from ..host.memory_image import ImageError, MemoryImage, map_image, write_image
from .checkpoints import Checkpoints
from .guest_config import GuestUnavailable, ImageSource
from .guest_instance import GuestInstance, ScratchAreas
from .guest_layout import GuestLayout
from .start_files import StartFiles
from .warm_image import TMP_FOLDER, ImageBusy, ImageUnavailable, copy_tmp_tree


class GuestImage:
    """Where one guest's warm image comes from, and its own saving as one."""

    def __init__(self, instance: GuestInstance, checkpoints: Checkpoints, files: StartFiles, layout: GuestLayout,
                 *, images: ImageSource | None, image_build: tuple[str, ...] | None, warm_image: bool) -> None:
        """images: where the warm image comes from, if any. image_build: the modules
        an image_build guest imports (it boots without an image, to be saved as one)."""
        self._instance = instance
        self._checkpoints = checkpoints
        self._files = files
        self._layout = layout
        self._images = images
        self.image_build = image_build
        self._warm_image = warm_image

    def for_boot(self) -> tuple[MemoryImage | None, str | None]:
        """The image to start from, if any, and else why not, if the user should know."""
        if (not self._layout.uniform() or not self._warm_image or self.image_build is not None
                or self._images is None):
            return None, None
        try:
            image = self._images(self._instance.optimized)
            if image is None:
                return None, None
        except ImageBusy:
            return None, None  # only slower this once: said in the log, not to the user
        except ImageUnavailable as err:
            return None, (
                f"The warm image could not be built ({err}); this sandbox started without it, which takes "
                "longer. The log has the details."
            )
        limit = self._instance.memory_bytes
        if limit is not None and image.size > limit:
            return None, (
                f"The warm image ({image.size >> 20} MiB) is larger than this sandbox's memory limit "
                f"({limit >> 20} MiB); started without it."
            )
        return image, None

    def adopt(self, store: wasmtime.Store, image: MemoryImage) -> None:
        """Map `image` into the new instance's memory, as its state and its first
        checkpoint's base; its scratch areas are where the build allocated them."""
        instance = self._instance
        if image.meta.get("globals") != len(instance.globals) or len(image.globals) != len(instance.globals):
            raise ImageError("the warm image does not match the guest module's globals")
        instance.grow_to(store, image.size)
        base = instance.base(store)
        map_image(image, base)
        instance.set_globals(store, list(image.globals))
        checkpoint = self._checkpoints.checkpoint
        assert checkpoint is not None
        checkpoint.adopt_image(base, image)
        instance.scratch = ScratchAreas(int(image.meta["quota_scratch"]), int(image.meta["readdir_scratch"]),
                                        int(image.meta["overlay_scratch"]))

    def save(self, folder: Path, key: str) -> MemoryImage:
        """This guest's state, between turns, as a warm image (an image_build guest)."""
        if self.image_build is None:
            raise GuestUnavailable("only a guest booted with image_build can be saved as an image")
        instance = self._instance
        store = instance.require_store()
        ledger = self._files.ledger
        if ledger.opened or ledger.deferred:
            # A descriptor open in the image would be a number with nothing behind it
            # in every sandbox started from it.
            raise ImageUnavailable(f"descriptors {sorted(ledger.opened)} were left open by the build")
        guest_tmp = self._layout.tmp_folder()
        scratch = instance.scratch
        meta = {
            "quota_scratch": scratch.quota,
            "readdir_scratch": scratch.readdir,
            "overlay_scratch": scratch.overlay,
            "globals": len(instance.globals),
            "preload": list(self.image_build),
            # Names this build, not just its key: a saved state stored as its
            # difference from an image wakes only over the very same bytes
            # (runtime/hibernation.py), and two builds of one key may differ.
            "build_id": uuid.uuid4().hex,
        }
        return write_image(
            folder, key=key, address=instance.base(store), size=instance.size(store),
            globals_=instance.global_values(store), meta=meta,
            extra=lambda scratch: copy_tmp_tree(guest_tmp, scratch / TMP_FOLDER),
        )


__all__ = ["GuestImage"]
