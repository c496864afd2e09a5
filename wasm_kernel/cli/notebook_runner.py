"""`wasm-kernel run NOTEBOOK.ipynb`: execute a notebook with the installed
wasm-python kernel through nbclient, as `jupyter nbconvert --execute` does, and
print it as a terminal would show it.

Each cell's source is printed, then its outputs as they arrive: streams as they
are, results and displays as their text/plain (Markdown source for Markdown
objects), `[image/png 640x480]` for images, the one line of the file-change
display, and the last line of an error's traceback. Markdown cells are printed as
text between the code cells.

The kernel gets a fresh `run` session in a temporary sessions root, removed when
the run ends, so every run starts from an empty /app and leaves nothing behind;
`--persist` passes the notebook's path as JPY_SESSION_NAME, so the run uses the
notebook's own session in the kernel's usual root, the one JupyterLab opens for it. A cell that raises fails the run (exit 1) unless its
`raises-exception` tag says the error is expected; every cell runs either way.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from ..kernel.file_changes_display import FILE_CHANGES_MIME
from ..kernelspec import KERNEL_NAME
from .terminal_text import colour_ok, terminal_field, terminal_text

EXPECTED_ERROR_TAG = "raises-exception"  # nbclient's tag for a cell meant to fail
_DEFAULT_REPR = re.compile(r"<[\w.]+ object( at 0x[0-9a-fA-F]+)?>")
_KERNEL_LOG_TAIL = 20


class _Printer:
    """Writes to the terminal, flushing each write so stdout and stderr interleave in order.

    What the notebook or its kernel controls goes through text() or field() first
    (terminal_text.py): it may not drive the operator's terminal."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self.color = colour_ok(out)
        self.err_color = colour_ok(err)
        self.at_line_start = True

    def text(self, text: str, stream: str = "stdout") -> str:
        """Untrusted multi-line text for `stream`, its colours kept only where that stream shows them."""
        return terminal_text(text, keep_sgr=self.err_color if stream == "stderr" else self.color)

    @staticmethod
    def field(text: str) -> str:
        """An untrusted value that must stay on one line."""
        return terminal_field(text)

    def style(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color and text else text

    def write(self, text: str, stream: str = "stdout") -> None:
        if not text:
            return
        target = self.err if stream == "stderr" else self.out
        if target is self.err:
            self.out.flush()
        target.write(text)
        target.flush()
        self.at_line_start = text.endswith("\n")

    def line(self, text: str, stream: str = "stdout") -> None:
        """A whole line, on a line of its own even after a stream that did not end one."""
        if not self.at_line_start:
            self.write("\n")
        self.write(text + "\n", stream)


def png_size(data: str) -> tuple[int, int] | None:
    """(width, height) from a base64 PNG's IHDR chunk, or None."""
    try:
        head = base64.b64decode(data[:44])
    except (ValueError, TypeError):
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def bundle_text(data: dict[str, Any]) -> str:
    """What a terminal shows for a MIME bundle."""
    images = sorted(k for k in data if k.startswith("image/"))
    if images:
        kind = "image/png" if "image/png" in images else images[0]
        size = png_size(data[kind]) if kind == "image/png" and isinstance(data[kind], str) else None
        return f"[{kind}{f' {size[0]}x{size[1]}' if size else ''}]"
    plain = data.get("text/plain", "")
    plain = "".join(plain) if isinstance(plain, list) else str(plain)
    if not plain or _DEFAULT_REPR.fullmatch(plain.strip()):
        if isinstance(data.get("text/markdown"), str):
            return data["text/markdown"]
        others = sorted(k for k in data if k != "text/plain")
        if others:  # e.g. an HTML object: say what a notebook would render
            return f"[{others[0]}]" + (f" {plain}" if plain else "")
    return plain


def error_line(content: dict[str, Any]) -> str:
    """The last non-empty line of an error's traceback, colours removed; any other
    control is left for the printer to show (split on newlines only, so a carriage
    return in the message stays in the line and is shown, not obeyed)."""
    text = terminal_text("".join(content.get("traceback") or []))
    lines = [line for line in text.split("\n") if line.strip()]
    if lines:
        return lines[-1]
    return f"{content.get('ename', 'Error')}: {content.get('evalue', '')}".rstrip(": ")


def ensure_kernelspec(install_prefix: str = sys.prefix) -> str | None:
    """None when Jupyter finds the wasm-python kernel (installing it into this
    environment first if it is missing), else a one-line error."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    from ..kernelspec import KernelSpecError, install

    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        return None
    except NoSuchKernel:
        pass
    try:
        dest = install(prefix=install_prefix)
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except (KernelSpecError, NoSuchKernel):
        return f"the {KERNEL_NAME} Jupyter kernel is not installed; run `wasm-kernel install` first"
    print(f"wasm-kernel run: installed the {KERNEL_NAME} kernelspec in {dest}", file=sys.stderr)
    return None


class _Interrupted(Exception):
    """Ctrl-C: the run stops after the cell it interrupted."""


def _client_class() -> type:
    from nbclient import NotebookClient

    class TerminalNotebookClient(NotebookClient):  # type: ignore[misc]
        """NotebookClient that also prints each output the moment it arrives."""

        printer: _Printer

        def output(self, outs: list[Any], msg: dict[str, Any], display_id: str | None, cell_index: int) -> Any:
            out = super().output(outs, msg, display_id, cell_index)
            if out is not None:
                _print_output(self.printer, out)
            return out

    return TerminalNotebookClient


def _print_output(p: _Printer, out: Any) -> None:
    kind = out.get("output_type")
    if kind == "stream":
        stream = "stderr" if out.get("name") == "stderr" else "stdout"
        p.write(p.text(str(out.get("text", "")), stream), stream)
    elif kind == "execute_result":
        text = p.text(bundle_text(out.get("data", {})))
        prompt = p.style(f"Out[{out.get('execution_count') or ' '}]:", "31")
        p.line(f"{prompt}{chr(10) if chr(10) in text else ' '}{text}")
    elif kind == "display_data":
        data = out.get("data", {})
        if FILE_CHANGES_MIME in data:  # one line by construction: a name with a newline may not split it
            p.line(p.style(p.field(str(data.get("text/plain", ""))), "2"))
        else:
            p.line(p.text(bundle_text(data)))
    elif kind == "error":
        p.line(p.style(p.field(error_line(out)), "31"))


def _stopped(p: _Printer, exc: Exception, interrupted: bool, log: Any, timeout: float | None) -> int:
    """The exit status, and one line, for a run that nbclient ended early."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    if interrupted:  # whatever nbclient raised while stopping
        p.line("wasm-kernel run: interrupted", "stderr")
        return 130
    if isinstance(exc, CellTimeoutError):
        p.line(f"wasm-kernel run: error: a cell took longer than --timeout {timeout:g} s", "stderr")
        return 1
    # The kernel died, or never started: say so, with the end of its log.
    what = "the kernel died" if isinstance(exc, DeadKernelError) else f"{type(exc).__name__}: {str(exc).strip()}"
    log.seek(0)
    # The kernel's log and nbclient's message may quote what the notebook printed.
    tail = [p.field(line) for line in log.read().decode(errors="replace").splitlines()[-_KERNEL_LOG_TAIL:]]
    p.line(f"wasm-kernel run: error: {p.field(what.splitlines()[0]) if what else type(exc).__name__}", "stderr")
    if tail:
        p.line("the kernel's last log lines:\n  " + "\n  ".join(tail), "stderr")
    return 1


def run_notebook(
    path: Path, *, output: Path | None = None, persist: bool = False, deadline: float | None = None,
    timeout: float | None = None, out: TextIO | None = None, err: TextIO | None = None,
) -> int:
    import nbformat
    from jupyter_core.utils import ensure_async

    p = _Printer(out or sys.stdout, err or sys.stderr)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # JSON errors, unreadable files, bad nbformat
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # may quote the file
        p.line(f"wasm-kernel run: error: {p.field(str(path))} is not a readable notebook: {p.field(first)}", "stderr")
        return 2
    problem = ensure_kernelspec()
    if problem is not None:
        p.line(f"wasm-kernel run: error: {problem}", "stderr")
        return 1

    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    if persist:
        env["JPY_SESSION_NAME"] = str(path.resolve())
    extra = [f"--WasmKernel.deadline={deadline}"] if deadline is not None else []
    unexpected: list[int] = []
    expected = 0
    count = 0
    shown_upto = 0  # cells before this index have been printed

    def show_text_cells(upto: int) -> None:
        """Markdown cells are printed in order between the code cells (whether or not
        this nbclient calls on_cell_start for them)."""
        nonlocal shown_upto
        for cell in nb.cells[shown_upto:upto]:
            if cell.cell_type == "markdown" and cell.source.strip():  # a notebook from anywhere: its text too
                p.line("\n" + p.style(p.text(cell.source.strip("\n")), "2"))
        shown_upto = max(shown_upto, upto)

    interrupts = 0

    def on_sigint() -> None:
        """First Ctrl-C: interrupt the running cell (the kernel stops it within a
        second and keeps its state) and stop the run after it. Second: shut the kernel down."""
        nonlocal interrupts
        interrupts += 1
        km = client.km
        if km is None:
            return
        if interrupts == 1:
            p.line("wasm-kernel run: interrupted; stopping after this cell (Ctrl-C again to kill the kernel)", "stderr")
            asyncio.ensure_future(ensure_async(km.interrupt_kernel()))
        else:
            asyncio.ensure_future(ensure_async(km.shutdown_kernel(now=True)))

    handler_installed = False

    def on_cell_start(cell: Any, cell_index: int) -> None:
        nonlocal count, handler_installed
        if not handler_installed:
            # Replaces nbclient's own handler, which shuts the kernel down at once.
            with contextlib.suppress(RuntimeError, NotImplementedError):
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, on_sigint)
            handler_installed = True
        if interrupts:
            raise _Interrupted
        show_text_cells(cell_index)
        if cell.cell_type == "code" and cell.source.strip():
            count += 1
            label = f"In [{count}]:"
            indent = " " * (len(label) + 1)
            lines = p.text(cell.source.rstrip("\n")).split("\n")
            shown = "\n".join([lines[0]] + [indent + line if line.strip() else "" for line in lines[1:]])
            p.line(f"\n{p.style(label, '1;32')} {shown}")
        show_text_cells(cell_index + 1)

    def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict[str, Any] | None) -> None:
        nonlocal expected
        if interrupts:
            raise _Interrupted
        status = (execute_reply or {}).get("content", {}).get("status")
        if status == "error":
            if EXPECTED_ERROR_TAG in cell.metadata.get("tags", []):
                expected += 1
            else:
                unexpected.append(count)

    client = _client_class()(
        nb, kernel_name=KERNEL_NAME, timeout=timeout, allow_errors=True, extra_arguments=extra,
        resources={"metadata": {"path": str(path.resolve().parent)}},
        on_cell_start=on_cell_start, on_cell_executed=on_cell_executed,
    )
    client.printer = p
    started = time.monotonic()
    # The kernel process's own chatter (jupyter_client warnings, ipykernel notices)
    # goes to a log, shown only if the kernel dies.
    with tempfile.TemporaryFile(prefix="wasm-kernel-run-", suffix=".log") as log, contextlib.ExitStack() as stack:
        if not persist:  # this run's session lives, and dies, with the run
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="wasm-kernel-run-"))
            client.extra_arguments = [*extra, f"--WasmKernel.workspace_root={root}"]
        try:
            client.execute(env=env, stdout=log, stderr=log)
        except Exception as exc:
            return _stopped(p, exc, bool(interrupts), log, timeout)
    elapsed = time.monotonic() - started
    show_text_cells(len(nb.cells))

    if output is not None:
        nbformat.write(nb, output)
    summary = f"{count} code cell{'s' if count != 1 else ''} in {elapsed:.1f} s"
    if expected:
        summary += f"; {expected} raised the error{'s' if expected != 1 else ''} they were tagged to expect"
    if unexpected:
        summary += f"; {len(unexpected)} failed: In [{'], In ['.join(map(str, unexpected))}]"
    if output is not None:
        summary += f"; executed notebook written to {output}"
    p.line("\n" + p.style(summary, "1"))
    return 1 if unexpected else 0
