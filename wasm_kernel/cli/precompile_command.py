"""`wasm-kernel precompile`: do the one-time work now rather than in a notebook's first cell."""

from __future__ import annotations

import argparse
from typing import Any

from ..runtime.warm_image import DEFAULT_PRELOAD
from .kernel_config import kernel_setting

EXAMPLES = """\
examples:
  wasm-kernel precompile                      compile the guest and build the kernel's warm image
  wasm-kernel precompile --preload numpy      a warm image that imports only numpy
  wasm-kernel precompile --force              compile again, e.g. after a wasmtime upgrade
"""


def add_parser(sub: Any) -> None:
    preload = list(kernel_setting("preload_modules", DEFAULT_PRELOAD))
    pre = sub.add_parser(
        "precompile", help="compile the Python guest once and cache it, with the kernel's warm image (about 100 s)",
        description="Compile the WebAssembly guest with Cranelift, stage IPython for it and build the warm "
        "image the kernel starts from, so that no notebook waits for it. Safe to run again: work already "
        "done is skipped.", epilog=EXAMPLES,
    )
    pre.add_argument("--force", action="store_true", help="recompile even if a cached module exists")
    pre.add_argument("--preload", nargs="*", default=preload, metavar="MODULE",
                     help="modules the warm image imports (default: the kernel's preload_modules, "
                     f"{' '.join(preload) or 'none'})")
    pre.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..host.guest_site import is_site_staged
    from ..host.module_cache import guest_cache_path, is_guest_cached
    from ..runtime.python_guest import is_warm_image_ready
    from ..runtime.warm_image import image_folder
    from .progress import prepare_guest

    preload = tuple(args.preload)
    if is_guest_cached() and is_site_staged() and is_warm_image_ready(preload) and not args.force:
        print(f"guest already compiled: {guest_cache_path()}; its warm image is built")
        return 0
    if args.force:
        guest_cache_path().unlink(missing_ok=True)
    image = prepare_guest(preload)
    print(f"compiled guest cached at {guest_cache_path()}")
    if image is None:
        return 1
    print(f"warm image ({', '.join(preload) or 'no modules'} preloaded) at {image_folder(image.key)}")
    return 0
