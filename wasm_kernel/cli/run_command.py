"""`wasm-kernel run FILE`: a notebook through the kernel (notebook_runner.py), or a
Python script in one sandbox, cell by cell, printing what a notebook would show.

Scripts get the kernel's limits (its configuration, kernel_config.py) and, unless
--workspace names a folder to keep, a temporary /app removed when the run ends.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from .terminal_text import colour_ok, terminal_field, terminal_text

EXAMPLES = """\
examples:
  wasm-kernel run examples/01-getting-started.ipynb             run a notebook, print its outputs
  wasm-kernel run analysis.ipynb --output executed.ipynb         keep the executed notebook
  wasm-kernel run analysis.ipynb --persist                       use the notebook's own session (its files stay)
  wasm-kernel run script.py --workspace out                      a script ('# %%' separates cells); /app is ./out

A notebook run without --persist gets a session of its own, removed when the run
ends: nothing is left behind. With --persist it uses the session JupyterLab opens
for that notebook, listed by `wasm-kernel sessions list`.
"""


def add_parser(sub: Any) -> None:
    # help= is %-formatted by argparse (a %% shows as %), the epilog is not.
    run = sub.add_parser(
        "run", help="run a notebook (.ipynb) with the wasm-python kernel, or a Python script cell by cell "
        "('# %%%%' separates cells), showing each cell's outputs",
        description="Run a notebook with the installed wasm-python kernel through nbclient, as `jupyter "
        "nbconvert --execute` would, or a Python script in one sandbox, printing each cell's outputs as "
        "they arrive. Exits 1 if a cell fails (a notebook cell tagged raises-exception may).", epilog=EXAMPLES,
    )
    run.add_argument("file", help="a notebook (.ipynb) or a Python script")
    run.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                     help="scripts: the host folder mounted at /app, kept after the run "
                     "(default: a temporary folder, removed at the end)")
    run.add_argument("--deadline", type=float, default=None,
                     help="wall-clock seconds per cell (default: the kernel's deadline setting)")
    run.add_argument("--strict", action="store_true", help="scripts: exit 1 if any cell fails "
                     "(a notebook always does, for a cell without the raises-exception tag)")
    run.add_argument("--output", metavar="PATH", help="notebooks: write the executed notebook, outputs included, to PATH")
    run.add_argument("--persist", action="store_true",
                     help="notebooks: use the notebook's own session, as JupyterLab does, so files persist "
                     "across runs (default: a session for this run only, removed at the end)")
    run.add_argument("--timeout", type=float, default=None, help="notebooks: give up on a cell after this many seconds")
    run.set_defaults(func=run_file)


def run_file(args: argparse.Namespace) -> int:
    source = Path(args.file)
    if not source.is_file():
        print(f"wasm-kernel run: error: no such file: {source} (give the path of a notebook or a script)",
              file=sys.stderr)
        return 2
    if source.suffix == ".ipynb":
        if args.workspace is not None:
            print("wasm-kernel run: error: --workspace is for scripts; a notebook's files live in its session "
                  "(add --persist to keep them)", file=sys.stderr)
            return 2
        from .notebook_runner import run_notebook

        return run_notebook(source, output=Path(args.output) if args.output else None, persist=args.persist,
                            deadline=args.deadline, timeout=args.timeout)
    if args.output or args.persist:
        print("wasm-kernel run: error: --output and --persist are for notebooks (.ipynb); "
              "use --workspace DIR to keep a script's files", file=sys.stderr)
        return 2
    if args.workspace is not None:
        return run_script(source, args.workspace, args.deadline, args.strict)
    with tempfile.TemporaryDirectory(prefix="wasm-kernel-run-") as folder:
        return run_script(source, Path(folder), args.deadline, args.strict)


def script_policy(deadline: float | None) -> Any:
    """The kernel's limits as configured (kernel_config.py), the deadline overridden if given."""
    from ..core.policy import ExecutionPolicy
    from ..kernel.kernel_limits import LIMIT_TRAITS, LimitError, apply_limit
    from .kernel_config import kernel_config

    configured = kernel_config().get("WasmKernel", {})
    values = {trait: configured[trait] for trait in LIMIT_TRAITS if trait in configured}
    if deadline is not None:
        values["deadline"] = deadline
    policy = ExecutionPolicy()
    for trait, value in values.items():
        try:
            policy = apply_limit(policy, LIMIT_TRAITS[trait], value, None)
        except LimitError as err:
            print(f"wasm-kernel run: warning: {err}; using the default", file=sys.stderr)
    return policy


def run_script(source: Path, workspace: Path, deadline: float | None, strict: bool) -> int:
    from ..core.sandbox import create_sandbox
    from ..runtime.guest_messages import ErrorOutput
    from ..runtime.warm_image import DEFAULT_PRELOAD
    from .progress import prepare_guest

    cells = [c.strip("\n") for c in split_cells(source.read_text())]
    policy = script_policy(deadline)
    prepare_guest(DEFAULT_PRELOAD)
    workspace.mkdir(parents=True, exist_ok=True)
    # Everything the guest prints, returns or names goes through guest() or
    # terminal_field (terminal_text.py): it may not drive the terminal. Colours,
    # ours and IPython's, only where the stream is a terminal that takes them.
    out_colour, err_colour = colour_ok(sys.stdout), colour_ok(sys.stderr)

    def style(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if out_colour else text

    def guest(text: str, stream: TextIO) -> str:
        return terminal_text(text, keep_sgr=err_colour if stream is sys.stderr else out_colour)

    with create_sandbox(workspace=workspace, policy=policy) as sb:
        failed = 0
        for n, cell in enumerate(c for c in cells if c.strip()):
            print(f"\n{style(f'In [{n + 1}]:', '1')} " + guest(cell, sys.stdout).replace("\n", "\n        "))

            def on_output(name: str, text: str) -> None:
                stream = sys.stdout if name == "stdout" else sys.stderr
                stream.write(guest(text, stream))

            def on_display(out: object) -> None:
                if isinstance(out, ErrorOutput):  # IPython's traceback, as the shell showed it
                    print(guest("\n".join(out.traceback), sys.stderr), file=sys.stderr)
                    return
                data = getattr(out, "data", {})
                kinds = ", ".join(sorted(terminal_field(str(k)) for k in data if k != "text/plain"))
                plain = guest(str(data.get("text/plain", "")), sys.stdout)
                print(f"{plain}" + (f"  [{kinds}]" if kinds else ""))

            r = sb.execute(cell, on_output=on_output, on_display=on_display)
            if r.error is not None:
                failed += 1
            if r.trap_message:
                failed += 1
                print(guest(r.trap_message, sys.stderr), file=sys.stderr)
            changes = [f"{sign}{terminal_field(path)}" for sign, paths in
                       (("+", r.files_created), ("~", r.files_modified), ("-", r.files_deleted)) for path in paths]
            if changes:
                print(style(f"files: {' '.join(changes)}", "2"))
    return 1 if failed and strict else 0


def split_cells(text: str) -> list[str]:
    """A script's cells: `# %%` lines separate them, as in VS Code and Jupytext."""
    cells, current = [], []
    for line in text.splitlines():
        if line.startswith("# %%"):
            cells.append("\n".join(current))
            current = []
        else:
            current.append(line)
    cells.append("\n".join(current))
    return cells
