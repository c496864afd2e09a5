"""The `wasm-kernel` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .runtime.warm_image import DEFAULT_PRELOAD


SITE_PROGRESS = "Preparing IPython for the guest (first run only)"
IMAGE_PROGRESS = "Building the warm image (IPython and the preloaded modules, imported once)"


def _precompile(args: argparse.Namespace) -> int:
    from .host.guest_site import is_site_staged
    from .host.module_cache import guest_cache_path, is_guest_cached
    from .runtime.python_guest import is_warm_image_ready
    from .runtime.warm_image import image_folder

    preload = tuple(args.preload)
    if is_guest_cached() and is_site_staged() and is_warm_image_ready(preload) and not args.force:
        print(f"guest already compiled: {guest_cache_path()}; its warm image is built")
        return 0
    if args.force:
        guest_cache_path().unlink(missing_ok=True)
    image = _prepare_guest(preload)
    print(f"compiled guest cached at {guest_cache_path()}")
    if image is None:
        return 1
    print(f"warm image ({', '.join(preload) or 'no modules'} preloaded) at {image_folder(image.key)}")
    return 0


def _prepare_guest(preload: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """Compile the guest, stage IPython and build the warm image, each with a
    progress bar when it has work to do. The image, or None (said on stderr)."""
    from .host.guest_site import is_site_staged
    from .host.module_cache import load_guest_module
    from .runtime.guest_site_build import guest_site
    from .runtime.python_guest import is_warm_image_ready, prepare_warm_image
    from .runtime.warm_image import ImageUnavailable

    load_guest_module(_progress_bar())
    guest_site(_progress_bar(SITE_PROGRESS, done=is_site_staged()))
    try:
        return prepare_warm_image(preload, _progress_bar(IMAGE_PROGRESS, done=is_warm_image_ready(preload)))
    except ImageUnavailable as err:
        print(f"wasm-kernel: the warm image could not be built ({err}); sandboxes start without it, "
              "more slowly", file=sys.stderr)
        return None


def _run(args: argparse.Namespace) -> int:
    """Run a notebook with the wasm-python kernel (cli_notebook.py), or a script in
    a sandbox cell by cell (`# %%` separates cells), printing each cell's streams
    and rich results as a notebook would show them."""
    from pathlib import Path

    source = Path(args.file)
    if not source.is_file():
        print(f"wasm-kernel run: no such file: {source}", file=sys.stderr)
        return 2
    if source.suffix == ".ipynb":
        from .cli_notebook import run_notebook

        return run_notebook(source, output=Path(args.output) if args.output else None, persist=args.persist,
                            deadline=args.deadline, timeout=args.timeout)
    if args.output or args.persist:
        print("wasm-kernel run: --output and --persist are for notebooks (.ipynb)", file=sys.stderr)
        return 2

    from .core.policy import ExecutionPolicy
    from .core.sandbox import create_sandbox
    from .runtime.guest_messages import ErrorOutput

    cells = [c.strip("\n") for c in _split_cells(source.read_text())]
    policy = ExecutionPolicy(deadline_seconds=10.0 if args.deadline is None else args.deadline)
    _prepare_guest(DEFAULT_PRELOAD)
    with create_sandbox(workspace=Path(args.workspace), policy=policy) as sb:
        failed = 0
        for n, cell in enumerate(c for c in cells if c.strip()):
            print(f"\n\033[1mIn [{n + 1}]:\033[0m " + cell.replace("\n", "\n        "))

            def on_output(name: str, text: str) -> None:
                (sys.stdout if name == "stdout" else sys.stderr).write(text)

            def on_display(out: object) -> None:
                if isinstance(out, ErrorOutput):  # IPython's traceback, as the shell showed it
                    print("\n".join(out.traceback), file=sys.stderr)
                    return
                data = getattr(out, "data", {})
                kinds = ", ".join(sorted(k for k in data if k != "text/plain"))
                plain = data.get("text/plain", "")
                print(f"{plain}" + (f"  [{kinds}]" if kinds else ""))

            r = sb.execute(cell, on_output=on_output, on_display=on_display)
            if r.error is not None:
                failed += 1
            if r.trap_message:
                failed += 1
                print(r.trap_message, file=sys.stderr)
            changes = [f"+{p}" for p in r.files_created] + [f"~{p}" for p in r.files_modified] + [f"-{p}" for p in r.files_deleted]
            if changes:
                print(f"\033[2mfiles: {' '.join(changes)}\033[0m")
    return 1 if failed and args.strict else 0


def _split_cells(text: str) -> list[str]:
    cells, current = [], []
    for line in text.splitlines():
        if line.startswith("# %%"):
            cells.append("\n".join(current))
            current = []
        else:
            current.append(line)
    cells.append("\n".join(current))
    return cells


def _progress_bar(desc: str = "Compiling the Python guest (first run only)", *, done: bool | None = None):  # type: ignore[no-untyped-def]
    """A progress callback drawing a bar, or None when the work is done already
    (done: whether it is; by default, whether the guest is compiled)."""
    from tqdm import tqdm

    from .host.module_cache import is_guest_cached

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wasm-kernel", description="A Jupyter kernel that runs cells in a WebAssembly sandbox.")
    sub = parser.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("precompile", help="compile the Python guest once and cache it (about 100 s)")
    pre.add_argument("--force", action="store_true", help="recompile even if a cached module exists")
    pre.add_argument("--preload", nargs="*", default=list(DEFAULT_PRELOAD), metavar="MODULE",
                     help="modules the warm image imports (the kernel's preload_modules; default: %(default)s)")
    pre.set_defaults(func=_precompile)
    run = sub.add_parser(
        "run", help="run a notebook (.ipynb) with the wasm-python kernel, or a Python script cell by cell "
        "('# %%' separates cells), showing each cell's outputs",
    )
    run.add_argument("file", help="a notebook (.ipynb) or a Python script")
    run.add_argument("--workspace", default="workspace", help="scripts: host folder mounted at /app (default: ./workspace)")
    run.add_argument("--deadline", type=float, default=None,
                     help="wall-clock seconds per cell (scripts: default 10; notebooks: the kernel's configuration)")
    run.add_argument("--strict", action="store_true", help="scripts: exit 1 if any cell fails "
                     "(a notebook always does, for a cell without the raises-exception tag)")
    run.add_argument("--output", metavar="PATH", help="notebooks: write the executed notebook, outputs included, to PATH")
    run.add_argument("--persist", action="store_true",
                     help="notebooks: use the notebook's own session, as JupyterLab does, so files persist "
                     "across runs (default: a fresh session per run)")
    run.add_argument("--timeout", type=float, default=None, help="notebooks: give up on a cell after this many seconds")
    run.set_defaults(func=_run)
    from .cli_sessions import add_parser as add_sessions_parser
    from .kernelspec import add_parser as add_kernelspec_parser

    add_sessions_parser(sub)
    add_kernelspec_parser(sub)
    from .cluster.cli_parsers import add_cluster_parsers

    add_cluster_parsers(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("wasm-kernel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
