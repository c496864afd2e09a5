"""`wasm-kernel install` and `wasm-kernel uninstall`: the kernelspec, where Jupyter looks for it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..kernelspec import KERNEL_NAME, KernelSpecError, install, spec_dir, uninstall

EXAMPLES = {
    "install": """\
examples:
  wasm-kernel install                         for this user (Jupyter's user data folder)
  wasm-kernel install --sys-prefix            into this environment only
  wasm-kernel install --display-name "Python (sandbox)"
""",
    "uninstall": """\
examples:
  wasm-kernel uninstall                       the user's copy
  wasm-kernel uninstall --sys-prefix          this environment's copy
""",
}


def add_parser(sub: Any) -> None:
    """`wasm-kernel install` and `wasm-kernel uninstall`."""
    where = argparse.ArgumentParser(add_help=False)
    group = where.add_mutually_exclusive_group()
    group.add_argument("--user", action="store_true",
                       help="the user's Jupyter data folder (the default)")
    group.add_argument("--sys-prefix", action="store_true",
                       help=f"this environment: {sys.prefix}/share/jupyter/kernels")
    group.add_argument("--prefix", metavar="PATH", help="PATH/share/jupyter/kernels")
    group.add_argument("--system", action="store_true",
                       help="the system-wide folder (usually /usr/local/share/jupyter/kernels)")
    where.add_argument("--name", default=KERNEL_NAME, help=f"kernelspec name (default: {KERNEL_NAME})")

    inst = sub.add_parser("install", parents=[where],
                          help="install the Jupyter kernelspec, running this Python",
                          description="Write the wasm-python kernelspec where Jupyter finds it. `pip install` "
                          "already puts one in the environment; this one runs this Python from any Jupyter.",
                          epilog=EXAMPLES["install"])
    inst.add_argument("--display-name", help="name shown in Jupyter's launcher (default: from kernel.json)")
    inst.set_defaults(func=_run_install)
    uninst = sub.add_parser("uninstall", parents=[where], help="remove a kernelspec that install wrote",
                            epilog=EXAMPLES["uninstall"])
    uninst.set_defaults(func=_run_uninstall)


def _location(args: Any) -> dict[str, Any]:
    if args.prefix is not None:
        return {"prefix": args.prefix}
    if args.sys_prefix:
        return {"prefix": sys.prefix}
    # --user is the default: it needs no privileges, and argv[0] is an absolute
    # path, so the spec works from any Jupyter the user runs.
    return {"user": not args.system}


def _run_install(args: Any) -> int:
    try:
        dest = install(kernel_name=args.name, display_name=args.display_name, **_location(args))
    except KernelSpecError as err:
        print(f"wasm-kernel install: error: {err}", file=sys.stderr)
        return 1
    print(f"installed kernelspec {args.name} in {dest}")
    from jupyter_core.paths import jupyter_path

    search = {os.path.realpath(p) for p in jupyter_path("kernels")}
    if os.path.realpath(dest.parent) not in search:
        print(f"note: {dest.parent} is not on Jupyter's search path; "
              f"set JUPYTER_PATH={dest.parent.parent} for Jupyter to find it", file=sys.stderr)
    return 0


def _run_uninstall(args: Any) -> int:
    try:
        removed = uninstall(kernel_name=args.name, **_location(args))
    except KernelSpecError as err:
        print(f"wasm-kernel uninstall: error: {err}", file=sys.stderr)
        return 1
    if removed is None:
        print(f"wasm-kernel uninstall: error: no kernelspec {args.name} in "
              f"{spec_dir(kernel_name=args.name, **_location(args)).parent}", file=sys.stderr)
        return 1
    print(f"removed kernelspec {args.name} from {removed}")
    return 0
