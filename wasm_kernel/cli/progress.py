"""Progress for the one-time work: the guest's compile (~100 s cold), staging IPython
for the guest, and building the warm image. Drawn on stderr, so it never mixes
into a command's output."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

COMPILE_PROGRESS = "Compiling the Python guest (first run only)"
SITE_PROGRESS = "Preparing IPython for the guest (first run only)"
IMAGE_PROGRESS = "Building the warm image (IPython and the preloaded modules, imported once)"


def progress_bar(desc: str = COMPILE_PROGRESS, *, done: bool | None = None) -> Callable[[float, float], None] | None:
    """A progress callback drawing a bar, or None when the work is done already
    (done: whether it is; by default, whether the guest is compiled)."""
    from tqdm import tqdm

    from ..host.module_cache import is_guest_cached

    if is_guest_cached() if done is None else done:
        return None
    # Compilation has no progress of its own: draw elapsed time against the
    # expected duration, holding at 99% until it really ends.
    bar = tqdm(total=100, desc=desc, unit="%",
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed", file=sys.stderr,
               mininterval=0.5 if sys.stderr.isatty() else 15)

    def progress(elapsed: float, expected: float) -> None:
        target = 100 if elapsed >= expected else min(99, int(100 * elapsed / expected))
        bar.update(max(0, target - bar.n))
        if target == 100:
            bar.close()

    return progress


def prepare_guest(preload: tuple[str, ...]) -> Any:
    """Compile the guest, stage IPython and build the warm image, each with a
    progress bar when it has work to do. The image, or None (said on stderr)."""
    from ..host.guest_site import is_site_staged
    from ..host.module_cache import load_guest_module
    from ..runtime.guest_site_build import guest_site
    from ..runtime.python_guest import is_warm_image_ready, prepare_warm_image
    from ..runtime.warm_image import ImageUnavailable

    load_guest_module(progress_bar())
    guest_site(progress_bar(SITE_PROGRESS, done=is_site_staged()))
    try:
        return prepare_warm_image(preload, progress_bar(IMAGE_PROGRESS, done=is_warm_image_ready(preload)))
    except ImageUnavailable as err:
        print(f"wasm-kernel: the warm image could not be built ({err}); sandboxes start without it, "
              "more slowly", file=sys.stderr)
        return None
