"""`wasm-kernel run FILE`: a notebook through the kernel (notebook_runner.py), or a
Python script in one sandbox, cell by cell (script_runner.py), printing what a
notebook would show and a summary line at the end.

Exit status (the same words are in the command's help and the user guide):
0   every cell ran and none failed; for a script without --strict, also when cells failed
1   a cell failed: for a notebook, a cell not tagged raises-exception (with --strict,
    also a tagged cell that raised nothing); for a script, only with --strict. Also
    when the kernel or sandbox could not start, died, or a cell passed --timeout
2   the command line or the file was wrong (nothing ran)
130 interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..host.engine import METERINGS
from .terminal_printer import COLOR_CHOICES

EXAMPLES = """\
examples:
  wasm-kernel run examples/01-getting-started.ipynb             run a notebook, print its outputs
  wasm-kernel run analysis.ipynb --output executed.ipynb         keep the executed notebook
  wasm-kernel run analysis.ipynb --persist                       use the notebook's own session (its files stay)
  wasm-kernel run script.py --workspace out                      a script ('# %%' separates cells); /app is ./out
  wasm-kernel run quiz.py --stdin answers.txt --strict           answer input() from a file; exit 1 if a cell fails
  wasm-kernel run quiz.py --deadline 30s --memory 512MiB | tee log   limits per cell; no colours into the pipe

A notebook run without --persist gets a session of its own, removed when the run
ends: nothing is left behind. With --persist it uses the session JupyterLab opens
for that notebook, listed by `wasm-kernel sessions list`.

exit status: 0 no cell failed (a script without --strict: always, once it ran);
1 a cell failed (a notebook: one not tagged raises-exception, and with --strict a
tagged one that raised nothing; a script: only with --strict), or the kernel could
not start, died, or passed --timeout; 2 a wrong command line or file; 130 Ctrl-C.
"""


def add_parser(sub: Any) -> None:
    # help= is %-formatted by argparse (a %% shows as %), the epilog is not.
    run = sub.add_parser(
        "run", help="run a notebook (.ipynb) with the wasm-python kernel, or a Python script cell by cell "
        "('# %%%%' separates cells), showing each cell's outputs",
        description="Run a notebook with the installed wasm-python kernel through nbclient, as `jupyter "
        "nbconvert --execute` would, or a Python script in one sandbox, printing each cell's outputs as "
        "they arrive and a summary line at the end (cells run, failed, time taken).", epilog=EXAMPLES,
    )
    run.add_argument("file", help="a notebook (.ipynb) or a Python script")
    run.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                     help="scripts: the host folder mounted at /app, kept after the run "
                     "(default: a temporary folder, removed at the end)")
    limits = run.add_argument_group("limits (each in the spellings %limits takes: 30s, 512MiB, 5e9, none)")
    limits.add_argument("--deadline", metavar="TIME",
                        help="wall-clock time per cell (default: the kernel's deadline setting, none unless configured)")
    limits.add_argument("--memory", metavar="SIZE", help="the sandbox's memory, 64MiB to 4GiB "
                        "(default: the kernel's memory setting, 2GiB unless configured)")
    limits.add_argument("--cpu-time", metavar="TIME",
                        help="CPU time per cell, in time metering (default: the kernel's cpu_time setting, 1min "
                        "unless configured)")
    limits.add_argument("--fuel", metavar="COUNT",
                        help="wasm instructions per cell, in fuel metering (default: the kernel's fuel setting, 5e11, "
                        "about a minute of pure Python, unless configured)")
    limits.add_argument("--metering", choices=METERINGS, default=None,
                        help="what bounds a cell: time (CPU time and the deadline; the default unless the kernel "
                        "is configured otherwise) or fuel (a deterministic instruction budget)")
    limits.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="any limit %%limits knows: stdout, stderr, display, disk, files (repeatable)")
    run.add_argument("--stdin", metavar="FILE",
                     help="answer input() with the lines of FILE, one per call, in order (- reads this "
                     "command's stdin); past the last line input() raises EOFError")
    run.add_argument("--strict", action="store_true",
                     help="exit 1 if any cell fails: for a script (which otherwise exits 0), any error; for a "
                     "notebook (which always does), also a cell tagged raises-exception that raised nothing")
    run.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                     help="colours: auto (the default) only on a terminal and without NO_COLOR; always; never")
    run.add_argument("--output", metavar="PATH", help="notebooks: write the executed notebook, outputs included, to PATH")
    run.add_argument("--persist", action="store_true",
                     help="notebooks: use the notebook's own session, as JupyterLab does, so files persist "
                     "across runs (default: a session for this run only, removed at the end)")
    run.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="notebooks: give up on a cell after this many seconds (the run then exits 1)")
    run.set_defaults(func=run_file)


def _error(message: str) -> int:
    print(f"wasm-kernel run: error: {message}", file=sys.stderr)
    return 2


def run_file(args: argparse.Namespace) -> int:
    from ..kernel.kernel_limits import UNUSED_BY, LimitError
    from .kernel_config import kernel_metering
    from .run_options import Answers, RunOptions, limit_flags

    started = time.monotonic()
    source = Path(args.file)
    if not source.is_file():
        return _error(f"no such file: {source} (give the path of a notebook or a script)")
    notebook = source.suffix == ".ipynb"
    if notebook and args.workspace is not None:
        return _error("--workspace is for scripts; a notebook's files live in its session (add --persist to keep them)")
    if not notebook and (args.output or args.persist or args.timeout is not None):
        return _error("--output, --persist and --timeout are for notebooks (.ipynb); "
                      "use --workspace DIR to keep a script's files, --deadline to limit a cell")
    try:
        limits = limit_flags(args.deadline, args.memory, args.fuel, args.limit, args.cpu_time)
    except LimitError as err:
        return _error(str(err))
    try:
        metering = kernel_metering(args.metering)
    except ValueError as err:
        return _error(f"c.WasmKernel.{err}")
    unused = UNUSED_BY[metering]
    if unused in limits:
        return _error(f"the {unused} limit is not counted in {metering} metering; "
                      f"{'--metering fuel counts fuel' if unused == 'fuel' else 'time metering counts CPU time'}")
    try:
        answers = Answers.open(args.stdin)
    except OSError as err:
        return _error(f"--stdin: cannot read {args.stdin}: {err.strerror or err}")
    options = RunOptions(limits=limits, metering=args.metering, strict=args.strict, color=args.color,
                         answers=answers, timeout=args.timeout)
    try:
        if notebook:
            from .notebook_runner import run_notebook

            return run_notebook(source, options=options, output=Path(args.output) if args.output else None,
                                persist=args.persist)
        from .script_runner import run_script

        if args.workspace is not None:
            return run_script(source, args.workspace, options, started)
        with tempfile.TemporaryDirectory(prefix="wasm-kernel-run-") as folder:
            return run_script(source, Path(folder), options, started)
    finally:
        answers.close()
