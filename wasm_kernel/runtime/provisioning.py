"""Provisioning: everything a guest needs before it runs, and the one place that
makes guests for others. It picks the engine (background_warmup.choose_engine),
stages the IPython site (guest_site_build), finds or builds the warm image a guest
starts from, and runs the background warm-up's work. It imports the guest; the guest
never imports it, so runtime/ has no import circle.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..host.artifacts import guest_artifacts
from ..host.engine import set_process_metering
from ..host.log import get_logger
from ..host.memory_image import MemoryImage
from ..host.module_cache import guest_cache_path, load_guest_module
from ..host.work_meter import Progress
from .background_warmup import choose_engine, clear_status, say, warmup_lock
from .course_mount import course_mount, mount_for_key, set_course_mount
from .guest_devices import GUEST_DEV
from .guest_config import GUEST_APP, GUEST_ENV, GUEST_LIB_DIR, GUEST_TMP, GuestOptions, ImageSource, SiteMount
from .guest_site_build import add_bytecode, guest_site
from .python_guest import PythonGuest, guest_mounts
from .warm_image import ImageUnavailable, code_digest, image_key, is_image_built, warm_image
from .warm_image import forget as forget_image

log = get_logger("wasm_kernel.runtime")


def new_guest(
    workspace: Path,
    *,
    memory_bytes: int | None = None,
    progress: Progress | None = None,
    name: str = "wasm-kernel-guest",
    options: GuestOptions | None = None,
) -> PythonGuest:
    """A shell guest whose /app is `workspace`, on the staged site, started from the
    warm image of options.preload when there is one. `progress` hears about any
    compile, staging or image build this start has to wait for."""
    options = options or GuestOptions()
    engine = choose_engine(options.preload, progress, options.metering)
    # A saved state fits only the guest, site, code and preload list of the warm
    # image it would wake over: that image's key says all of them.
    state_key = warm_image_key(options.preload, progress) if options.keep_state is not None else None
    return PythonGuest(
        workspace, engine=engine, site=_staged_site(progress, bytecode=engine.optimized),
        images=_image_source(options.preload, progress), memory_bytes=memory_bytes, name=name, options=options,
        state_key=state_key,
    )


def _staged_site(progress: Progress | None = None, *, bytecode: bool = True) -> SiteMount:
    staged = guest_site(progress, bytecode=bytecode)
    return SiteMount(staged.path, staged.guest_path, writable=False, key=staged.key)


def _image_source(preload: tuple[str, ...], progress: Progress | None) -> ImageSource:
    def image_for(optimized: bool) -> MemoryImage | None:
        if not optimized and not is_image_built(warm_image_key(preload)):
            return None  # a first start: the background warm-up builds it on the optimized engine
        image = prepare_warm_image(preload, progress, wait=False)
        if not image.memory_file.is_file():  # removed since this process loaded it
            forget_image(image.key)
            image = prepare_warm_image(preload, progress, wait=False)
        return image

    return image_for


def warm_image_key(preload: tuple[str, ...], progress: Progress | None = None) -> str:
    """The key of the warm image a shell guest on the staged site would start from."""
    site = _staged_site(progress)
    course = course_mount()
    layout = repr((GUEST_ENV, guest_mounts(site, True, course), GUEST_DEV, GUEST_APP, GUEST_TMP))
    site_key = (site.key or "") + (f"+course={course.key}" if course is not None else "")
    return image_key(
        preload=preload, site_key=site_key, stdlib_sha256=guest_artifacts().stdlib_sha256,
        layout=layout, guest_code=code_digest(GUEST_LIB_DIR),
    )


def prepare_warm_image(preload: tuple[str, ...], progress: Progress | None = None, *,
                       wait: bool = True) -> MemoryImage:
    """The warm image for `preload`, built now (with progress) if this machine has
    none yet. Raises ImageUnavailable if it cannot be built, and with wait=False
    ImageBusy if another process is building it."""
    return warm_image(warm_image_key(preload, progress), lambda folder, key: _build_image(folder, key, preload),
                      progress, wait=wait)


def is_warm_image_ready(preload: tuple[str, ...]) -> bool:
    return is_image_built(warm_image_key(preload))


def _build_image(folder: Path, key: str, preload: tuple[str, ...]) -> MemoryImage:
    """Boot a guest that builds only the shared state, and save it into `folder`."""
    # Its empty workspace lives beside the image, so a build killed half way leaves
    # it where the next build's sweep_partial() finds it.
    with tempfile.TemporaryDirectory(prefix=f".work-{folder.name}-", dir=folder.parent) as workspace:
        builder = PythonGuest(
            Path(workspace), engine=choose_engine(preload), site=_staged_site(), name="wasm-kernel-image",
            options=GuestOptions(warm_image=False, preload=preload), image_build=preload,
        )
        try:
            return builder.save_image(folder, key)
        finally:
            builder.close()


def warm_up(preload: tuple[str, ...]) -> int:
    """The background warm-up's work: compile the optimized guest, add the site's
    bytecode and build the warm image, unless another process is doing it."""
    with warmup_lock(wait=False) as held:
        if not held:
            return 0  # another process is doing it
        since = time.time()
        try:
            say("compiling the optimised guest", since)
            load_guest_module()
            log.info("warmup.compiled", path=str(guest_cache_path()))
            drop_baseline_module()
            say("compiling IPython's bytecode", since)
            add_bytecode()  # a site staged on the baseline engine has none yet
            say("building the warm image", since)
            try:
                image = prepare_warm_image(preload)
                log.info("warmup.image", folder=str(image.folder))
            except ImageUnavailable as err:
                log.warning("warmup.image_failed", error=str(err))
                return 1
            return 0
        finally:
            clear_status()


def drop_baseline_module() -> None:
    """The first start's baseline module, once the optimized one is in the cache: no
    new guest starts on it again (choose_engine), and a guest still running on it has
    it mapped, which its removal leaves in place. ~400 MB a cache would keep for
    nothing."""
    path = guest_cache_path(baseline=True)
    try:
        path.unlink()
        log.info("warmup.baseline_removed", path=str(path))
    except FileNotFoundError:
        pass
    except OSError as err:  # kept: the next warm-up tries again
        log.warning("warmup.baseline_not_removed", error=str(err)[:200])


def warmup_main(argv: Sequence[str]) -> int:
    """The detached warm-up process's entry (background_warmup starts it):
    `--metering=NAME` (the module to compile), `--course=KEY` (the course's site, if
    any), then the modules to preload."""
    try:
        os.nice(10)  # the user's kernel keeps the CPU it needs
    except OSError:
        pass
    preload = list(argv)
    if preload and preload[0].startswith("--metering="):
        set_process_metering(preload.pop(0).split("=", 1)[1])
    if preload and preload[0].startswith("--course="):
        try:
            set_course_mount(mount_for_key(preload.pop(0).split("=", 1)[1]))
        except ValueError as err:
            log.warning("warmup.course_refused", error=str(err))
            return 1
    return warm_up(tuple(preload))


__all__ = ["drop_baseline_module", "is_warm_image_ready", "new_guest", "prepare_warm_image", "warm_image_key", "warm_up", "warmup_main"]
