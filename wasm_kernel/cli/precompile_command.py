"""`wasm-kernel precompile`: do the one-time work now rather than in a notebook's first cell."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from ..host.engine import METERINGS
from ..runtime.warm_image import DEFAULT_PRELOAD
from .kernel_config import kernel_metering, kernel_setting

EXAMPLES = """\
examples:
  wasm-kernel precompile                      compile the guest and build the kernel's warm image
  wasm-kernel precompile --preload numpy      a warm image that imports only numpy
  wasm-kernel precompile --force              compile again, e.g. after a wasmtime upgrade
  wasm-kernel precompile --metering fuel      the module for c.WasmKernel.metering = "fuel"

The course's packages the kernel declares (c.WasmKernel.guest_requirements) are
installed first, so that the warm image holds them (docs/teaching.md). The source
files of numpy, pandas, scipy and the other built-in libraries come last, from the
registry's wheels of the same versions, so tracebacks through them show their lines
(--no-library-sources skips them; tracebacks then fold those frames).
"""


def add_parser(sub: Any) -> None:
    preload = list(kernel_setting("preload_modules", DEFAULT_PRELOAD))
    pre = sub.add_parser(
        "precompile", help="compile the Python guest once and cache it, with the kernel's warm image "
        "(50-130 s on a 2-core machine)",
        description="Compile the WebAssembly guest with Cranelift, compile IPython's bytecode for it and build "
        "the warm image the kernel starts from, so that no notebook waits for it; each step shows its "
        "progress on stderr. Safe to run again: work already done is skipped. If a first kernel's "
        "background warm-up is doing the same work, this waits for it rather than compiling beside it.",
        epilog=EXAMPLES,
    )
    pre.add_argument("--force", action="store_true", help="recompile even if a cached module exists")
    pre.add_argument("--no-library-sources", dest="library_sources", action="store_false",
                     help="do not fetch the built-in libraries' source files (about 100 MB from the registry)")
    pre.add_argument("--metering", choices=METERINGS, default=None,
                     help="the module to compile: time (no fuel) or fuel (default: the kernel's "
                     "c.WasmKernel.metering, time unless configured); each is compiled only when asked")
    pre.add_argument("--preload", nargs="*", default=preload, metavar="MODULE",
                     help="modules the warm image imports (default: the kernel's preload_modules, "
                     f"{' '.join(preload) or 'none'})")
    pre.set_defaults(func=run)


def prepare_course_environment(settings: Any) -> str | None:
    """The course environment `settings` declare (WasmKernel.guest_requirements), if
    any, built now with pip's lines on stderr and mounted for this process's guests so
    the warm image holds it; None, or a one-line error if it cannot be built."""
    from ..runtime.course_mount import set_course_mount
    from ..sessions.course_site import CourseError, course_site, is_course_built

    try:
        request = settings.course_request()
        if request is None:
            return None
        if not is_course_built(request):
            print("Building the course's environment (WasmKernel.guest_requirements) ...", file=sys.stderr)
        site = course_site(request, lambda line: print(f"  {line.rstrip()}", file=sys.stderr, flush=True))
    except CourseError as err:
        return f"the course's environment: {err}"
    set_course_mount(site.mount)
    print(f"course environment ({len(site.distributions)} distributions) at {site.path}")
    return None


def _library_sources() -> None:
    """The built-in libraries' sources (host/library_sources.py), once per guest build:
    never a failure of precompile, since a traceback without them still works."""
    from ..host.library_sources import DISTRIBUTIONS, fetch_sources, is_fetched, sources_folder

    if is_fetched():
        return
    print(f"Fetching the source files of {', '.join(DISTRIBUTIONS)} for tracebacks ...", file=sys.stderr)
    try:
        kept, missing = fetch_sources(lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    except (OSError, subprocess.SubprocessError) as err:
        print(f"wasm-kernel precompile: the libraries' sources were not fetched ({err}); tracebacks through "
              "them fold their frames", file=sys.stderr)
        return
    for line in missing:
        print(f"  not fetched: {line}", file=sys.stderr)
    print(f"library sources ({kept} files) at {sources_folder()}")


def run(args: argparse.Namespace) -> int:
    from ..host.module_cache import guest_cache_path
    from ..runtime.warm_image import image_folder
    from ..runtime.startup import is_start_prepared
    from .progress import prepare_guest, warmup_turn

    preload = tuple(args.preload)
    try:
        kernel_metering(args.metering)
    except ValueError as err:  # a configured metering that is not one
        print(f"wasm-kernel precompile: error: c.WasmKernel.{err}", file=sys.stderr)
        return 2
    from .kernel_config import kernel_settings

    problem = prepare_course_environment(kernel_settings())
    if problem is not None:
        print(f"wasm-kernel precompile: error: {problem}", file=sys.stderr)
        return 2
    if args.library_sources:
        _library_sources()
    if not args.force and is_start_prepared(preload):
        print(f"guest already compiled: {guest_cache_path()}; its warm image is built")
        return 0
    with warmup_turn():
        if args.force:
            guest_cache_path().unlink(missing_ok=True)
        image = prepare_guest(preload, precompile=True)
    print(f"compiled guest cached at {guest_cache_path()}")
    if image is None:
        return 1
    print(f"warm image ({', '.join(preload) or 'no modules'} preloaded) at {image_folder(image.key)}")
    return 0
