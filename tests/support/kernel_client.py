"""Driving the installed wasm-python kernel over jupyter_client, as a frontend does.

Each RunningKernel is a real `python -m wasm_kernel` process found through the
kernelspec that `pip install` put in the environment; its sessions live under a
per-test JUPYTER_DATA_DIR so tests never touch a user's workspaces.
"""

from __future__ import annotations

import json
import os
import queue
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jupyter_client.manager import KernelManager

from support.process_log import ProcessLog

KERNEL_NAME = "wasm-python"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMEOUT = 60
NOTICE = "wasm-kernel: "  # how each of the kernel's first-cell notices starts


def split_notices(stdout: str) -> tuple[str, str]:
    """A first cell's stdout as (the kernel's notices, what the cell printed). The
    notices that are information (a resumed state, the folder shown) come on stdout
    before the cell's own output, each a line starting with NOTICE."""
    lines = stdout.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith(NOTICE):
        n += 1
    return "".join(lines[:n]), "".join(lines[n:])


@dataclass
class Execution:
    reply: dict[str, Any]
    outputs: list[dict[str, Any]] = field(default_factory=list)  # iopub messages, in order

    @property
    def status(self) -> str:
        return self.reply["content"]["status"]

    def stream(self, name: str = "stdout") -> str:
        return "".join(m["content"]["text"] for m in self.outputs if m["msg_type"] == "stream" and m["content"]["name"] == name)

    def of_type(self, msg_type: str) -> list[dict[str, Any]]:
        return [m["content"] for m in self.outputs if m["msg_type"] == msg_type]

    def notices(self) -> str:
        """The kernel's informational notices (on stdout, before the cell's output)."""
        return split_notices(self.stream())[0]

    def printed(self) -> str:
        """What the cell itself printed on stdout, without the kernel's notices."""
        return split_notices(self.stream())[1]

    @property
    def error(self) -> dict[str, Any] | None:
        errors = self.of_type("error")
        return errors[0] if errors else None

    def displays(self) -> list[dict[str, Any]]:
        return self.of_type("display_data")

    def file_changes(self) -> list[dict[str, Any]]:
        return [d for d in self.displays() if "application/vnd.wasm-kernel.file-changes+json" in d["data"]]


class RunningKernel:
    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, argv: list[str] | None = None,
                 cwd: Path | None = None, kernel_name: str = KERNEL_NAME,
                 connection_file: Path | None = None, after_spawn: Callable[[], None] | None = None) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        inherited = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
        full_env = {**inherited, "JUPYTER_DATA_DIR": str(data_dir), **(env or {})}
        self.log_path = data_dir / f"kernel-{time.monotonic_ns()}.log"
        self.output = ProcessLog(self.log_path)  # the kernel process's own stdout+stderr
        if cwd is None:  # the kernel's cwd is the notebook's folder it shows: an empty one of its own,
            # beside the data folder (a folder inside Jupyter's data folder is never shown)
            cwd = data_dir.with_name(data_dir.name + "-notebook-folder")
            cwd.mkdir(exist_ok=True)
        self.km = KernelManager(kernel_name=kernel_name)
        if connection_file is not None:
            self.km.connection_file = str(connection_file)
        self.km.start_kernel(env=full_env, extra_arguments=argv or [], cwd=str(cwd),
                             stdout=self.output.file, stderr=self.output.file)
        if after_spawn is not None:  # runs while the kernel process is still importing
            after_spawn()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=TIMEOUT)

    @property
    def sessions_root(self) -> Path:
        return self.data_dir / "wasm-kernel" / "sessions"

    def execute(self, code: str, timeout: float = TIMEOUT, stdin: list[str] | None = None, **kwargs: Any) -> Execution:
        allow_stdin = stdin is not None
        msg_id = self.kc.execute(code, allow_stdin=allow_stdin, **kwargs)
        return self._collect(msg_id, code, timeout, stdin=stdin)

    def _collect(self, msg_id: str, code: str, timeout: float, stdin: list[str] | None = None,
                 on_input_shown: Callable[[], None] | None = None) -> Execution:
        """The request's reply and its IOPub messages up to its idle status; stdin
        answers input_requests in turn; on_input_shown runs once, when the kernel
        publishes the request's execute_input (it has started the cell)."""
        answers = list(stdin or [])
        outputs: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        reply = None
        idle = False
        while reply is None or not idle:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply to {code!r} within {timeout} s")
            if stdin is not None:
                try:
                    req = self.kc.get_stdin_msg(timeout=0.01)
                    self.kc.input(answers.pop(0) if answers else "")
                    outputs.append(req)
                except queue.Empty:
                    pass
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                if msg["msg_type"] == "status":
                    idle = msg["content"]["execution_state"] == "idle"
                elif msg["msg_type"] == "execute_input":
                    if on_input_shown is not None:
                        on_input_shown()
                        on_input_shown = None
                else:
                    outputs.append(msg)
            if reply is None:
                try:
                    candidate = self.kc.get_shell_msg(timeout=0.01)
                except queue.Empty:
                    continue
                if candidate["parent_header"].get("msg_id") == msg_id:
                    reply = candidate
        return Execution(reply, outputs)

    def session_id(self) -> str:
        """The session UUID that %session shows."""
        text = self.execute("%session").displays()[0]["data"]["text/plain"]
        found = _UUID.search(text)
        assert found is not None, text
        return found.group(0)

    def request(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        msg_id = getattr(self.kc, method)(*args, **kwargs)
        while True:
            reply = self.kc.get_shell_msg(timeout=TIMEOUT)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def interrupt_after(self, code: str, delay: float, timeout: float = 30) -> tuple[Execution, float]:
        """Run `code`, interrupt it after `delay` s; (execution, seconds from interrupt to reply)."""
        import threading

        box: dict[str, float] = {}

        def fire() -> None:
            time.sleep(delay)
            box["t"] = time.monotonic()
            self.km.interrupt_kernel()

        threading.Thread(target=fire, daemon=True).start()
        result = self.execute(code, timeout=timeout)
        return result, time.monotonic() - box.get("t", time.monotonic())

    def interrupt_once_running(self, code: str, delay: float = 0.05, timeout: float = 60) -> Execution:
        """Run `code` and interrupt it `delay` s after the kernel has started it
        (its execute_input): an interrupt sent while the request still waits in the
        queue finds an idle kernel and is lost, on ipykernel too."""
        def interrupt() -> None:
            time.sleep(delay)
            self.km.interrupt_kernel()

        return self._collect(self.kc.execute(code), code, timeout, on_input_shown=interrupt)

    def restart(self) -> None:
        self.km.restart_kernel(now=False)
        self.kc.wait_for_ready(timeout=TIMEOUT)

    def shutdown(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)
        self.output.close()

    def log(self) -> str:
        return self.output.text()


def blank_notebook(path: Path) -> Path:
    """An empty notebook file at `path` (its folder made), for a kernel to be named by."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def notebook_kernel(data_dir: Path, notebook: Path, **env: str) -> RunningKernel:
    """A kernel on `notebook`, named as Jupyter Server names it (JPY_SESSION_NAME), in its folder."""
    return RunningKernel(data_dir, cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook), **env})


def saved_state_file(data_dir: Path) -> Path:
    """The one saved interpreter state under a test's Jupyter data folder."""
    found = list((data_dir / "wasm-kernel" / "sessions" / ".wasm-kernel" / "state").glob("*/state.bin"))
    assert len(found) == 1, found
    return found[0]


@contextmanager
def native_and_wasm(base: Path) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    """Native ipykernel (the oracle) and wasm-python, started side by side under `base`."""
    native = RunningKernel(base / "native", kernel_name="python3")
    try:
        wasm = RunningKernel(base / "wasm")
        try:
            yield native, wasm
        finally:
            wasm.shutdown()
    finally:
        native.shutdown()
