"""Real processes of the scale-out pool for tests: sandbox hosts (`wasm-kernel host`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from redis_server import free_port

TOKEN = "test-pool-token"


class HostProcess:
    """`wasm-kernel host` on a free loopback port, its own root, a short heartbeat."""

    def __init__(self, redis_url: str, root: Path, host_id: str, heartbeat: float = 0.3, capacity: int = 10,
                 shared_root: bool = False) -> None:
        self.port = free_port()
        self.root = root
        self.host_id = host_id
        self.url = f"http://127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        self.log_path = root / f"host-{host_id}.log"
        env = {**os.environ, "WASM_KERNEL_HOST_TOKEN": TOKEN}
        env.pop("JPY_SESSION_NAME", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_kernel.cli", "host", "--redis", redis_url, "--port", str(self.port),
             "--root", str(root), "--id", host_id, "--heartbeat", str(heartbeat), "--capacity", str(capacity),
             *(["--allow-root"] if os.geteuid() == 0 else []), *(["--shared-root"] if shared_root else [])],
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
ROUTER_TOKENS = {"course-a": "course-a-router-token-0001", "course-b": "course-b-router-token-0002"}


class ServiceProcess:
    """A pool service (`wasm-kernel sandbox-manager` or `router`) on a free loopback
    port, started and waited for; call() answers (status, JSON) even for errors."""

    name = ""

    def __init__(self, args: list[str], folder: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"{self.name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_kernel.cli", self.name, *args, "--port", str(self.port)],
            env={**os.environ, **env}, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answers (a 503: Redis is down)
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer: {self.log_path.read_text()[-3000:]}")

    def send(self, method: str, path: str, body: object, authorization: str | None,
             timeout: float = 90) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        if data is None and method == "POST":
            data = b""
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as err:
            raw, status = err.read(), err.code
        try:
            return status, json.loads(raw) if raw else None
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


class ManagerProcess(ServiceProcess):
    name = "sandbox-manager"

    def __init__(self, redis_url: str, folder: Path, session_ttl: float = 3600.0, reap_every: float = 0.2) -> None:
        super().__init__(["--redis", redis_url, "--session-ttl", str(session_ttl), "--reap-every", str(reap_every)],
                         folder, {"WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN})

    def call(self, method: str, path: str, body: object = None, token: str | None = MANAGER_TOKEN,
             timeout: float = 90) -> tuple[int, object]:
        return self.send(method, path, body, None if token is None else f"token {token}", timeout)


class RouterProcess(ServiceProcess):
    """With two tenants' tokens."""

    name = "router"

    def __init__(self, redis_url: str, manager_url: str, folder: Path, session_ttl: float = 3600.0) -> None:
        super().__init__(["--redis", redis_url, "--sandbox-manager", manager_url, "--session-ttl", str(session_ttl)],
                         folder, {"WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN,
                                  "WASM_KERNEL_ROUTER_TOKENS": ",".join(f"{t}:{k}" for t, k in ROUTER_TOKENS.items())})

    def call(self, method: str, path: str, body: object = None, tenant: str | None = "course-a",
             timeout: float = 90) -> tuple[int, object]:
        return self.send(method, path, body, None if tenant is None else f"token {ROUTER_TOKENS[tenant]}", timeout)
