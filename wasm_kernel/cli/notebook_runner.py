"""`wasm-kernel run NOTEBOOK.ipynb`: execute a notebook with the installed
wasm-python kernel through nbclient, as `jupyter nbconvert --execute` does, and
print it as a terminal would show it.

Each cell's source is printed, then its outputs as they arrive: streams as they
are, results and displays as their text/plain (Markdown source for Markdown
objects), `[image/png 640x480]` for images, the one line of the file-change
display, and the last line of an error's traceback. Markdown cells are printed as
text between the code cells. What a notebook updates in place (a stream's carriage
returns, a display updated by its id, cleared output: the kernel's own first-start
progress among them) is drawn by terminal_printer.py. input() is answered from
--stdin through the kernel's stdin channel, which nbclient leaves closed.

The kernel gets a fresh `run` session in a temporary sessions root, removed when
the run ends, so every run starts from an empty /app and leaves nothing behind;
`--persist` passes the notebook's path as JPY_SESSION_NAME, so the run uses the
notebook's own session in the kernel's usual root, the one JupyterLab opens for it.
A cell that raises fails the run (exit 1) unless its `raises-exception` tag says the
error is expected (with --strict, a tagged cell that raises nothing fails it too);
every cell runs either way, and a summary line ends the run.
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
from ..kernel.notebook_roots import SERVER_ROOT_ENV
from ..kernelspec import KERNEL_NAME
from .progress import background_note
from .run_options import Answers, RunOptions, kernel_arguments
from .terminal_printer import Printer, summary_line
from .terminal_text import terminal_text

EXPECTED_ERROR_TAG = "raises-exception"  # nbclient's tag for a cell meant to fail
_DEFAULT_REPR = re.compile(r"<[\w.]+ object( at 0x[0-9a-fA-F]+)?>")
_KERNEL_LOG_TAIL = 20


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


# What the kernel says when no frontend can answer input() (nbclient allows no stdin).
_NO_STDIN = "input() is not available here"


def _client_class() -> type:
    from nbclient import NotebookClient

    class TerminalNotebookClient(NotebookClient):  # type: ignore[misc]
        """NotebookClient that also prints each output the moment it arrives, draws
        the outputs a notebook updates in place as one updating line, and answers
        input() from --stdin."""

        printer: Printer
        answers: Answers
        _stdin_task: asyncio.Future[None] | None = None

        def output(self, outs: list[Any], msg: dict[str, Any], display_id: str | None, cell_index: int) -> Any:
            out = super().output(outs, msg, display_id, cell_index)
            if out is not None:
                _print_output(self.printer, out, display_id, self.answers)
            return out

        def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
            # nbclient applies these to the notebook without output(): the terminal follows.
            content = msg.get("content") or {}
            if msg.get("msg_type") == "update_display_data":
                display_id = (content.get("transient") or {}).get("display_id")
                if display_id:
                    self.printer.update_display(bundle_text(content.get("data") or {}), str(display_id))
            elif msg.get("msg_type") == "clear_output":
                self.printer.clear(wait=bool(content.get("wait")))
            return super().process_message(msg, cell, cell_index)

        async def async_start_new_kernel_client(self) -> Any:
            kc = await super().async_start_new_kernel_client()
            if self.answers.given:  # nbclient turns stdin off; --stdin turns it back on
                kc.allow_stdin = True
                self._stdin_task = asyncio.ensure_future(self._answer_input(kc))
            return kc

        async def async_execute(self, reset_kc: bool = False, **kwargs: Any) -> Any:
            try:
                return await super().async_execute(reset_kc=reset_kc, **kwargs)
            finally:
                if self._stdin_task is not None:
                    self._stdin_task.cancel()

        async def _answer_input(self, kc: Any) -> None:
            """Each input_request gets the next line of --stdin; past the last, EOF
            (the kernel raises EOFError in the cell for the reply ^D)."""
            while True:
                try:
                    msg = await kc.stdin_channel.get_msg(timeout=None)
                except Exception:  # the channel closed as the run ended
                    return
                if msg.get("msg_type") != "input_request":
                    continue
                request = msg.get("content") or {}
                try:
                    answer = self.answers.next()
                except EOFError:
                    answer = "\x04"
                shown = "" if request.get("password") or answer == "\x04" else answer
                self.printer.line(self.printer.field(str(request.get("prompt", ""))) + self.printer.field(shown))
                kc.input(answer)

    return TerminalNotebookClient


def _print_output(p: Printer, out: Any, display_id: str | None, answers: Answers) -> None:
    kind = out.get("output_type")
    if kind == "stream":
        p.stream(str(out.get("text", "")), "stderr" if out.get("name") == "stderr" else "stdout")
    elif kind == "execute_result":
        text = p.text(bundle_text(out.get("data", {})))
        prompt = p.style(f"Out[{out.get('execution_count') or ' '}]:", "31")
        p.line(f"{prompt}{chr(10) if chr(10) in text else ' '}{text}")
    elif kind == "display_data":
        data = out.get("data", {})
        if FILE_CHANGES_MIME in data:  # one line by construction: a name with a newline may not split it
            p.line(p.style(p.field(str(data.get("text/plain", ""))), "2"))
        else:
            p.display(bundle_text(data), display_id)
    elif kind == "error":
        # A limit's line already names the flag that raises it (the kernel runs with
        # cli_run): nothing is added, so the error is one line.
        p.line(p.style(p.field(error_line(out)), "31"))
        if out.get("ename") == "EOFError":
            if str(out.get("evalue", "")).startswith(_NO_STDIN):
                p.line("wasm-kernel run: give the answers to input() with --stdin FILE, one a line", "stderr")
            elif answers.exhausted:
                p.line(f"wasm-kernel run: {p.field(answers.name)} has no more answers for input()", "stderr")


def _stopped(p: Printer, exc: Exception, interrupted: bool, log: Any, timeout: float | None) -> int:
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
    path: Path, *, options: RunOptions, output: Path | None = None, persist: bool = False,
    out: TextIO | None = None, err: TextIO | None = None,
) -> int:
    import nbformat
    from jupyter_core.utils import ensure_async

    started = time.monotonic()
    p = Printer(out or sys.stdout, err or sys.stderr, options.color)
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

    # The notebook is the operator's choice, not a server client's: a server root this
    # shell inherited (a JupyterLab terminal's) does not confine its folder.
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", SERVER_ROOT_ENV)}
    if persist:
        env["JPY_SESSION_NAME"] = str(path.resolve())
    extra = kernel_arguments(options.limits)
    if options.metering is not None:
        extra.append(f"--WasmKernel.metering={options.metering}")
    unexpected: list[int] = []  # cells that failed, by their In [n]
    expected = 0  # cells tagged raises-exception that did
    unmet: list[int] = []  # cells tagged raises-exception that did not
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
        p.settle()
        if interrupts:
            raise _Interrupted
        status = (execute_reply or {}).get("content", {}).get("status")
        tagged = EXPECTED_ERROR_TAG in cell.metadata.get("tags", [])
        if status == "error":
            if tagged:
                expected += 1
            else:
                unexpected.append(count)
        elif tagged and cell.cell_type == "code" and cell.source.strip():
            unmet.append(count)

    # A run executes the notebook from its first cell, as nbconvert does: it starts
    # from a fresh interpreter and leaves none behind (the files are what --persist keeps).
    # cli_run: the kernel's limit lines name this command's flags, and %session says
    # a run keeps no state.
    extra = [*extra, "--WasmKernel.keep_state=False", "--WasmKernel.cli_run=True"]
    client = _client_class()(
        nb, kernel_name=KERNEL_NAME, timeout=options.timeout, allow_errors=True, extra_arguments=extra,
        resources={"metadata": {"path": str(path.resolve().parent)}},
        on_cell_start=on_cell_start, on_cell_executed=on_cell_executed,
    )
    client.printer = p
    client.answers = options.answers
    # The kernel process's own chatter (jupyter_client warnings, ipykernel notices)
    # goes to a log, shown only if the kernel dies.
    with tempfile.TemporaryFile(prefix="wasm-kernel-run-", suffix=".log") as log, contextlib.ExitStack() as stack:
        if not persist:  # this run's session lives, and dies, with the run
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="wasm-kernel-run-"))
            client.extra_arguments = [*extra, f"--WasmKernel.workspace_root={root}"]
        try:
            client.execute(env=env, stdout=log, stderr=log)
        except Exception as exc:
            return _stopped(p, exc, bool(interrupts), log, options.timeout)
    show_text_cells(len(nb.cells))

    if output is not None:
        nbformat.write(nb, output)
    extra_parts = []
    if expected:
        extra_parts.append(f"{expected} raised the error{'s' if expected != 1 else ''} "
                           f"{'they were' if expected != 1 else 'it was'} tagged to expect")
    if unmet:
        extra_parts.append(f"{len(unmet)} tagged {EXPECTED_ERROR_TAG} raised nothing: "
                           + ", ".join(f"In [{n}]" for n in unmet))
    if output is not None:
        extra_parts.append(f"executed notebook written to {p.field(str(output))}")
    p.line("\n" + p.style(summary_line(count, unexpected, time.monotonic() - started, *extra_parts), "1"))
    background_note(p)
    return 1 if unexpected or (options.strict and unmet) else 0
