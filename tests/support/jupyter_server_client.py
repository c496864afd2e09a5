"""A real `jupyter server` process and a client that talks to it as JupyterLab does.

JupyterServer starts `python -m jupyter_server` from this environment on 127.0.0.1
(a free port, no token, no password) with every Jupyter directory in a scratch
folder: JUPYTER_DATA_DIR (so the kernel's sessions go to
<data>/wasm-kernel/sessions), JUPYTER_CONFIG_DIR (no user config leaks in) and
JUPYTER_RUNTIME_DIR (so every connection file, and so every kernel process this
server starts, names that folder: that is how leftover kernels are found without
matching other tests' kernels).

The REST calls go through urllib with tornado's double-submit XSRF check satisfied
as a browser does it (the same token in the `_xsrf` cookie and the X-XSRFToken
header): with token auth off the server checks XSRF on every POST/PUT/PATCH/DELETE.
KernelChannels speaks the default websocket protocol of /api/kernels/<id>/channels
(no subprotocol requested, so the server uses the legacy JSON one: one JSON
message per frame with a "channel" field).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import websocket  # websocket-client, a dependency of jupyter_server

from support.kernel_client import split_notices
from support.process_log import ProcessLog
from support.processes import end_process

KERNEL_NAME = "wasm-python"
START_TIMEOUT = 30.0
REQUEST_TIMEOUT = 30.0
EXECUTE_TIMEOUT = 60.0


class ServerError(AssertionError):
    """The server did not start, answered with an unexpected status, or did not stop."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def empty_notebook() -> dict[str, Any]:
    return {
        "cells": [],
        "metadata": {"kernelspec": {"name": KERNEL_NAME, "display_name": "Python (WebAssembly sandbox)", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


class JupyterServer:
    def __init__(
        self, base: Path, root_dir: Path, extra_argv: list[str] | None = None, token: str = "",
        relative_data_dir: bool = False,
    ) -> None:
        self.base = base
        self.token = token  # "" is no authentication at all
        self.root_dir = root_dir
        self.data_dir = base / "data"
        self.config_dir = base / "config"
        self.runtime_dir = base / "runtime"
        for d in (self.data_dir, self.config_dir, self.runtime_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.log_path = base / "jupyter_server.log"
        self._xsrf = secrets.token_hex(16)
        self.kernel_pids_seen: set[int] = set()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER"))}
        # relative_data_dir: the data folder named relative to the server's own (base), as
        # by a user who exports JUPYTER_DATA_DIR=data before `jupyter lab`.
        env.update(
            JUPYTER_DATA_DIR=self.data_dir.name if relative_data_dir else str(self.data_dir),
            JUPYTER_CONFIG_DIR=str(self.config_dir),
            JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
            JUPYTER_PLATFORM_DIRS="1",
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable, "-m", "jupyter_server",
            "--no-browser", "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            f"--IdentityProvider.token={token}", "--ServerApp.password=",
            f"--ServerApp.root_dir={root_dir}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-root")  # containers; the server refuses root otherwise
        argv.extend(extra_argv or [])
        self._output = ProcessLog(self.log_path)
        self.proc = subprocess.Popen(argv, env=env, stdout=self._output.file, stderr=subprocess.STDOUT, cwd=base)
        try:
            self._wait_for_status()
        except BaseException:
            self.stop()
            raise

    # --- process ------------------------------------------------------------------

    def log(self) -> str:
        return self._output.text()

    def log_tail(self, lines: int = 40) -> str:
        return self._output.tail(lines)

    def _wait_for_status(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"jupyter server exited with {self.proc.returncode} before answering:\n{self.log_tail()}")
            try:
                status = self.get("/api/status")
                if isinstance(status, dict) and "started" in status:
                    return
            except (OSError, ServerError) as err:
                last = err
            time.sleep(0.1)
        raise ServerError(f"no /api/status within {START_TIMEOUT} s (last error: {last}):\n{self.log_tail()}")

    def kernel_processes(self) -> list[psutil.Process]:
        """Every live process whose command line names this server's runtime dir
        (kernels get their connection file there), whoever its parent is now."""
        mark = str(self.runtime_dir)
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmdline = proc.info["cmdline"] or []
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if proc.pid != self.proc.pid and any(mark in part for part in cmdline):
                found.append(proc)
        alive = [p for p in found if _alive(p)]
        self.kernel_pids_seen.update(p.pid for p in alive)
        return alive

    def kernel_pid(self, kernel_id: str) -> int:
        """The pid of the process serving kernel_id (its connection file names the id)."""
        for proc in self.kernel_processes():
            try:
                if any(kernel_id in part for part in proc.cmdline()):
                    return proc.pid
            except psutil.NoSuchProcess:
                continue
        raise ServerError(f"no process for kernel {kernel_id}")

    def wait_kernel_gone(self, pid: int, timeout: float = 15.0) -> None:
        try:
            psutil.Process(pid).wait(timeout)
        except psutil.NoSuchProcess:
            return
        except psutil.TimeoutExpired:
            raise ServerError(f"kernel process {pid} still running {timeout} s after it was shut down") from None

    def shutdown(self, timeout: float = 30.0) -> float:
        """POST /api/shutdown, as the File > Shut Down menu does; seconds until exit."""
        start = time.monotonic()
        self.post("/api/shutdown")
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ServerError(f"jupyter server still running {timeout} s after /api/shutdown:\n{self.log_tail()}") from None
        self._output.close()
        return time.monotonic() - start

    def stop(self) -> list[int]:
        """Make sure nothing of ours runs on: terminate the server, kill leftover
        kernels. Returns the pids of the kernels that had to be killed."""
        end_process(self.proc, grace=20)
        leftovers = self.kernel_processes()
        for proc in leftovers:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(leftovers, timeout=10)
        self._output.close()
        return [p.pid for p in leftovers]

    # --- REST -----------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, expect: tuple[int, ...] = (200, 201, 204),
                timeout: float = REQUEST_TIMEOUT) -> Any:
        data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "PUT", "PATCH") else None)
        headers = {"Content-Type": "application/json", "Cookie": f"_xsrf={self._xsrf}", "X-XSRFToken": self._xsrf}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        if status not in expect:
            raise ServerError(f"{method} {path} -> HTTP {status}: {raw[:500]!r}\n{self.log_tail(20)}")
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None, timeout: float = REQUEST_TIMEOUT) -> Any:
        return self.request("POST", path, body, timeout=timeout)

    def create_notebook(self, path: str) -> dict[str, Any]:
        """PUT /api/contents/<path> (its folders are made as needed, one PUT each)."""
        parts = path.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            self.request("PUT", f"/api/contents/{folder}", {"type": "directory"}, expect=(200, 201))
        return self.request("PUT", f"/api/contents/{path}", {"type": "notebook", "format": "json", "content": empty_notebook()})

    def start_session(self, path: str) -> dict[str, Any]:
        """POST /api/sessions as JupyterLab does when it opens a notebook."""
        name = path.rsplit("/", 1)[-1]
        model = self.post("/api/sessions", {"path": path, "type": "notebook", "name": name, "kernel": {"name": KERNEL_NAME}})
        if model["kernel"]["name"] != KERNEL_NAME:
            raise ServerError(f"session started kernel {model['kernel']['name']!r}, not {KERNEL_NAME!r}")
        self.kernel_processes()  # remember its pid for the leftover check
        return model

    def delete_session(self, session_id: str) -> None:
        self.request("DELETE", f"/api/sessions/{session_id}", expect=(204,))

    def connect(self, kernel_id: str, timeout: float = REQUEST_TIMEOUT) -> KernelChannels:
        return KernelChannels(self, kernel_id, timeout)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Execution:
    code: str
    reply: dict[str, Any]  # the execute_reply's content
    outputs: list[dict[str, Any]] = field(default_factory=list)  # iopub messages (not status/execute_input)
    seconds: float = 0.0

    @property
    def status(self) -> str:
        return str(self.reply["status"])

    def result(self) -> str | None:
        for msg in self.outputs:
            if msg["msg_type"] == "execute_result":
                return str(msg["content"]["data"].get("text/plain"))
        return None

    def stream(self, name: str = "stdout") -> str:
        return "".join(m["content"]["text"] for m in self.outputs
                       if m["msg_type"] == "stream" and m["content"]["name"] == name)

    def notices(self) -> str:
        """The kernel's informational notices (on stdout, before the cell's output)."""
        return split_notices(self.stream())[0]

    def printed(self) -> str:
        """What the cell itself printed on stdout, without the kernel's notices."""
        return split_notices(self.stream())[1]

    def texts(self) -> str:
        """Every text/plain of display_data and execute_result, and the streams."""
        parts = []
        for msg in self.outputs:
            content = msg["content"]
            if msg["msg_type"] in ("display_data", "execute_result"):
                parts.append(str(content["data"].get("text/plain", "")))
            elif msg["msg_type"] == "stream":
                parts.append(content["text"])
        return "\n".join(parts)

    def describe(self) -> str:
        return f"{self.code!r} -> {self.reply} with outputs {[(m['msg_type'], m['content']) for m in self.outputs]}"


class KernelChannels:
    """One websocket to /api/kernels/<id>/channels, one client session id, as a notebook panel has."""

    def __init__(self, server: JupyterServer, kernel_id: str, timeout: float = REQUEST_TIMEOUT) -> None:
        self.server = server
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        url = f"ws://127.0.0.1:{server.port}/api/kernels/{kernel_id}/channels?session_id={self.session}"
        auth = [f"Authorization: token {server.token}"] if server.token else None
        self.ws = websocket.create_connection(url, timeout=timeout, cookie=f"_xsrf={server._xsrf}", header=auth)
        self.subprotocol = self.ws.getsubprotocol()
        self.seen: list[dict[str, Any]] = []  # every message received, for failure reports

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> KernelChannels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": msg_type, "username": "test", "session": self.session,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()), "version": "5.4"}
        self.ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content,
                                 "channel": channel, "buffers": []}))
        return msg_id

    def recv(self, deadline: float, what: str) -> dict[str, Any]:
        left = deadline - time.monotonic()
        while True:
            if left <= 0:
                raise self._timed_out(what)
            # Short socket timeouts: websocket-client answers the server's pings inside
            # recv(), and each ping restarts a longer timeout, so a deadline of more
            # than the ping interval (30 s) would never fire.
            self.ws.settimeout(min(left, 1.0))
            try:
                frame = self.ws.recv()
                break
            except websocket.WebSocketTimeoutException:
                left = deadline - time.monotonic()
        if isinstance(frame, bytes):
            raise ServerError(f"binary websocket frame, but no subprotocol was negotiated ({self.subprotocol!r})")
        msg: dict[str, Any] = json.loads(frame)
        self.seen.append(msg)
        return msg

    def _timed_out(self, what: str) -> TimeoutError:
        # The server's log holds the kernels' own stderr: what a hang was waiting for.
        return TimeoutError(f"timed out waiting for {what}; last messages: {self._recent()}\n"
                            f"server log:\n{self.server.log_tail(80)}")

    def _recent(self, n: int = 8) -> list[tuple[str, str, str]]:
        return [(m.get("channel", "?"), m.get("msg_type", "?"), str(m.get("content"))[:120]) for m in self.seen[-n:]]

    def kernel_info(self, timeout: float = EXECUTE_TIMEOUT) -> dict[str, Any]:
        """kernel_info_request until it is answered on shell *and* its idle status
        comes over iopub, as jupyter_server's nudge() does: after a restart the
        server's iopub subscription reconnects only after the shell does (ZeroMQ's
        reconnect interval), and what the new kernel publishes before that is lost.
        A restarted kernel may also drop the first request."""
        deadline = time.monotonic() + timeout
        while True:
            msg_id = self.send("shell", "kernel_info_request", {})
            retry = min(deadline, time.monotonic() + 2.0)
            reply: dict[str, Any] | None = None
            idle = False  # the websocket may carry the idle status before the reply
            try:
                while reply is None or not idle:
                    msg = self.recv(retry, "kernel_info_reply and its idle status")
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    if msg["msg_type"] == "kernel_info_reply":
                        reply = dict(msg["content"])
                    elif msg["msg_type"] == "status":
                        idle = idle or msg["content"]["execution_state"] == "idle"
                return reply
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise

    def start_execute(self, code: str) -> str:
        return self.send("shell", "execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True,
        })

    def wait_for(self, msg_id: str, code: str, timeout: float = EXECUTE_TIMEOUT,
                 until: Any = None) -> Execution:
        """Collect the request's messages until its reply and idle status (or until
        `until(msg)` is true for one of its iopub messages: then the reply is {})."""
        start = time.monotonic()
        deadline = start + timeout
        reply: dict[str, Any] | None = None
        idle = False
        outputs: list[dict[str, Any]] = []
        while reply is None or not idle:
            msg = self.recv(deadline, f"the reply to {code!r} ({timeout} s)")
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["channel"] == "shell":
                reply = msg["content"]
            elif msg["msg_type"] == "status":
                idle = msg["content"]["execution_state"] == "idle"
            elif msg["msg_type"] != "execute_input":
                outputs.append(msg)
                if until is not None and until(msg):
                    return Execution(code, {}, outputs, time.monotonic() - start)
        return Execution(code, reply, outputs, time.monotonic() - start)

    def wait_busy(self, msg_id: str, timeout: float = EXECUTE_TIMEOUT) -> None:
        """Until the kernel publishes busy for msg_id: it is handling that request."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(deadline, f"busy status for {msg_id}")
            if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "busy"):
                return

    def execute(self, code: str, timeout: float = EXECUTE_TIMEOUT) -> Execution:
        return self.wait_for(self.start_execute(code), code, timeout)

    def run_ok(self, code: str, timeout: float = EXECUTE_TIMEOUT) -> Execution:
        """execute, asserting the cell succeeded."""
        ex = self.execute(code, timeout)
        assert ex.status == "ok", f"cell failed: {ex.describe()}"
        return ex

    def session_id(self) -> str:
        """The session id that %session shows."""
        ex = self.run_ok("%session")
        found = re.search(r"^session id\s+([0-9a-f-]{36})\s*$", ex.texts(), re.MULTILINE)
        assert found, f"%session shows no session id: {ex.describe()}"
        return found.group(1)


@contextmanager
def running_server(base: Path, root: Path | None = None, *, notebooks: Iterable[str] = (), token: str = "",
                   extra_argv: list[str] | None = None, none_left: bool = False) -> Iterator[JupyterServer]:
    """A real Jupyter Server with the extension, serving `root` (base/notebooks unless
    given) with `notebooks` made in it, stopped with whatever it started. none_left:
    the test fails if a kernel process outlived the server and had to be killed."""
    if root is None:
        root = base / "notebooks"
        root.mkdir(exist_ok=True)
    server = JupyterServer(base, root, extra_argv=extra_argv, token=token)
    try:
        for notebook in notebooks:
            server.create_notebook(notebook)
        yield server
    finally:
        killed = server.stop()
    assert not (none_left and killed), f"kernel processes outlived the server and had to be killed: {killed}"
