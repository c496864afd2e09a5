"""Real processes of the scale-out pool for tests: sandbox hosts (`wasm-kernel host`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from redis_server import free_port

TOKEN = "test-pool-token"


class HostProcess:
    """`wasm-kernel host` on a free loopback port, its own root, a short heartbeat."""

    def __init__(self, redis_url: str, root: Path, host_id: str, heartbeat: float = 0.3, capacity: int = 10) -> None:
        self.port = free_port()
        self.root = root
        self.host_id = host_id
        self.url = f"http://127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        self.log_path = root / "host.log"
        env = {**os.environ, "WASM_KERNEL_HOST_TOKEN": TOKEN}
        env.pop("JPY_SESSION_NAME", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_kernel.cli", "host", "--redis", redis_url, "--port", str(self.port),
             "--root", str(root), "--id", host_id, "--heartbeat", str(heartbeat), "--capacity", str(capacity),
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            env=env, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, cwd=root,
        )
        self.wait_ready()

    def request(self, method: str, path: str, body: object = None, timeout: float = 60) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"host {self.host_id} exited: {self.log_path.read_text()[-3000:]}")
            try:
                self.request("GET", "/api/status", timeout=2)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"host {self.host_id} did not answer: {self.log_path.read_text()[-3000:]}")

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


MANAGER_TOKEN = "test-manager-token"


class ManagerProcess:
    """`wasm-kernel sandbox-manager` on a free loopback port."""

    def __init__(self, redis_url: str, folder: Path, session_ttl: float = 3600.0, reap_every: float = 0.2) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / "manager.log"
        env = {**os.environ, "WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_kernel.cli", "sandbox-manager", "--redis", redis_url, "--port",
             str(self.port), "--session-ttl", str(session_ttl), "--reap-every", str(reap_every)],
            env=env, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the manager exited: {self.log_path.read_text()[-3000:]}")
            try:
                self.call("GET", "/healthz", token=None, timeout=2)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the manager did not answer: {self.log_path.read_text()[-3000:]}")

    def call(self, method: str, path: str, body: object = None, token: str | None = MANAGER_TOKEN,
             timeout: float = 90) -> tuple[int, object]:
        """(status, JSON body or None); HTTP errors are answers here, not exceptions."""
        import urllib.error

        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"token {token}"
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as err:
            raw, status = err.read(), err.code
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
