"""`wasm-kernel run SCRIPT.py`: a Python script in one sandbox, cell by cell (`# %%`
separates cells), printed as `run` prints a notebook: each cell's source, its outputs
as they arrive, the file changes, and the lines the kernel adds after a cell (which
limit stopped it, a MemoryError's cause, cut output), naming the flags of this
command that raise each limit. A summary line ends the run.

The script gets the kernel's configured limits (kernel_config.py) with the flags
over them, and, unless --workspace names a folder to keep, a temporary /app removed
when the run ends.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from .run_options import CLI_CEILING, CLI_REMEDIES, RunOptions, script_policy
from .terminal_printer import Printer, summary_line


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


def after_cell_lines(result: Any, policy: Any, disk_used: Any) -> list[str]:
    """What the kernel says after a cell, in the CLI's terms: output cut, the disk
    quota hit, a MemoryError's cause, the limit that stopped the cell."""
    from ..kernel.kernel_limits import (
        MEMORY_ERRORS, disk_full_line, interrupted_line, is_memory_error, memory_error_hint, trap_line, truncation_hint,
    )

    lines = [truncation_hint(name, policy, CLI_CEILING, CLI_REMEDIES)
             for name in ("stdout", "stderr", "display") if getattr(result, f"{name}_truncated")]
    if result.disk_full:
        lines.append(disk_full_line(policy, CLI_CEILING, disk_used(), CLI_REMEDIES))
    error = result.error
    if error is not None and is_memory_error(error.ename, error.evalue):
        lines.append(memory_error_hint(policy, CLI_CEILING, error.ename not in MEMORY_ERRORS, CLI_REMEDIES))
    if result.trap == "interrupted":
        lines.append(f"KeyboardInterrupt: {interrupted_line()}")
    elif result.trap is not None:
        lines.append(trap_line(result.trap, policy, CLI_CEILING, CLI_REMEDIES))
    elif error is None and not result.success:  # os._exit()
        lines.append(f"SystemExit: {result.metadata.get('restarted_reason', 'the interpreter exited')}")
    return lines


def run_script(source: Path, workspace: Path, options: RunOptions, started: float) -> int:
    from ..core.sandbox import create_sandbox
    from ..runtime.guest_messages import DisplayOutput, ErrorOutput
    from ..runtime.warm_image import DEFAULT_PRELOAD
    from .notebook_runner import bundle_text
    from ..runtime.startup import BOOT
    from .progress import background_note, prepare_guest, step

    p = Printer(sys.stdout, sys.stderr, options.color)
    cells = [c.strip("\n") for c in split_cells(source.read_text()) if c.strip()]
    policy = script_policy(options.limits)
    image = prepare_guest(DEFAULT_PRELOAD, precompile=False)
    workspace.mkdir(parents=True, exist_ok=True)
    if image is None:  # a plain boot, seconds of IPython's imports: drawn like the steps before it
        with step(BOOT) as starting:
            starting()
            sandbox = create_sandbox(workspace=workspace, policy=policy)
    else:
        sandbox = create_sandbox(workspace=workspace, policy=policy)
    failed: list[int] = []

    def on_output(name: str, text: str) -> None:
        p.stream(text, "stderr" if name == "stderr" else "stdout")

    def on_display(out: object) -> None:
        if isinstance(out, ErrorOutput):  # IPython's traceback, as the shell showed it
            p.line(p.text("\n".join(out.traceback), "stderr"), "stderr")
            return
        if not isinstance(out, DisplayOutput):
            return
        if out.kind == "clear_output":
            p.clear(wait=out.wait)
        elif out.kind == "update_display_data" and out.display_id is not None:
            p.update_display(bundle_text(out.data), out.display_id)
        elif out.kind == "execute_result":
            text = p.text(bundle_text(out.data))
            p.line(f"{p.style(f'Out[{n}]:', '31')}{chr(10) if chr(10) in text else ' '}{text}")
        else:
            p.display(bundle_text(out.data), out.display_id)

    def on_input(prompt: str, password: bool) -> str:
        answer = options.answers.next()  # EOFError past the last answer: the cell gets it
        p.line(p.field(prompt) + ("" if password else p.field(answer)))
        return answer

    with sandbox as sb:
        for n, cell in enumerate(cells, start=1):
            label = f"In [{n}]:"
            p.line(f"\n{p.style(label, '1;32')} " + p.text(cell).replace("\n", "\n" + " " * (len(label) + 1)))
            r = sb.execute(cell, on_output=on_output, on_display=on_display, on_input=on_input)
            p.settle()
            if r.error is not None or r.trap is not None or not r.success:
                failed.append(n)
            for line in after_cell_lines(r, policy, sb.disk_usage):
                p.line(p.style(p.field(line), "31", "stderr"), "stderr")
            changes = [f"{sign}{p.field(path)}" for sign, paths in
                       (("+", r.files_created), ("~", r.files_modified), ("-", r.files_deleted)) for path in paths]
            if changes:
                p.line(p.style(f"files: {' '.join(changes)}", "2"))
    p.line("\n" + p.style(summary_line(len(cells), failed, time.monotonic() - started), "1"))
    background_note(p)
    return 1 if failed and options.strict else 0
