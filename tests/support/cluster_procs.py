"""Real processes of the scale-out pool for tests: sandbox hosts (`wasm-kernel host`),
the sandbox manager and the router (configured by flags and the environment, or by a
config file alone)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wasm_kernel.cluster.session_store import connect

from support.process_log import ProcessLog
from support.processes import end_process
from support.redis_server import free_port

TOKEN = "test-pool-token-0123456789"
POOL_KEY = "test-pool-signing-key-0123456789abcdef"


# The pool's Redis client fails fast: at most this long per call (session_store.connect's
# default), so a test of Redis going away bounds its wait by it, not by a guess.
STORE_TIMEOUT_S: float = inspect.signature(connect).parameters["timeout_s"].default

class HostProcess:
    """`wasm-kernel host` on a free loopback port, its own root, a short heartbeat."""

    def __init__(self, redis_url: str, root: Path, host_id: str, heartbeat: float = 0.3, capacity: int = 10,
                 shared_root: bool = False, kernel_config: str | None = None,
                 launcher: tuple[str, ...] = ("-m", "wasm_kernel.cli"), wait: bool = True,
                 port: int | None = None) -> None:
        """kernel_config: the text of a wasm_kernel_config.py for this host's kernels
        (in a Jupyter config folder of its own, as an operator gives each host one).
        launcher: what runs `host ...` (a script of tests/support by path, say); without
        `wait`, the caller waits for it (or for it to fail); port: a given one, taken or not."""
        self.port = port or free_port()
        self.root = root
        self.host_id = host_id
        self.url = f"http://127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        self.log_path = root / f"host-{host_id}.log"
        self.output = ProcessLog(self.log_path, append=True)
        env = {**os.environ, "WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_POOL_KEY": POOL_KEY}
        env.pop("JPY_SESSION_NAME", None)
        if kernel_config is not None:
            config_dir = root / f"config-{host_id}"
            config_dir.mkdir(exist_ok=True)
            (config_dir / "wasm_kernel_config.py").write_text(kernel_config)
            env["JUPYTER_CONFIG_DIR"] = str(config_dir)
        self.proc = subprocess.Popen(
            [sys.executable, *launcher, "host", "--redis", redis_url, "--port", str(self.port),
             "--root", str(root), "--id", host_id, "--heartbeat", str(heartbeat), "--capacity", str(capacity),
             *(["--allow-root"] if os.geteuid() == 0 else []), *(["--shared-root"] if shared_root else [])],
            env=env, stdout=self.output.file, stderr=subprocess.STDOUT, cwd=root,
        )
        if wait:
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
                raise RuntimeError(f"host {self.host_id} exited: {self.output.text()[-3000:]}")
            try:
                self.request("GET", "/api/status", timeout=2)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"host {self.host_id} did not answer: {self.output.text()[-3000:]}")

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        end_process(self.proc, grace=30)
        self.output.close()


MANAGER_TOKEN = "test-manager-token-0123456789"
# Two tenants, two users each: every token names its tenant and its user.
USER_TOKENS = {(tenant, user): f"{tenant}-{user}-router-token-{i:04d}"
               for i, (tenant, user) in enumerate((t, u) for t in ("course-a", "course-b") for u in ("alice", "bob"))}
ROUTER_TOKENS = {"course-a": USER_TOKENS[("course-a", "alice")], "course-b": USER_TOKENS[("course-b", "alice")]}


class ServiceProcess:
    """A pool service (`wasm-kernel sandbox-manager` or `router`) on a free loopback
    port, started and waited for; call() answers (status, JSON) even for errors."""

    name = ""

    def __init__(self, args: list[str], folder: Path, env: dict[str, str], *, port: int | None = None,
                 inherit_pool_env: bool = True) -> None:
        """`port`: one the caller already put in the service's config file (no --port
        flag then). Without `inherit_pool_env`, no WASM_KERNEL_* variable of the test
        run's reaches the service: only `env`'s."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"{self.name}.log"
        self.output = ProcessLog(self.log_path, append=True)
        base = {k: v for k, v in os.environ.items() if inherit_pool_env or not k.startswith("WASM_KERNEL_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_kernel.cli", self.name, *args, *([] if port else ["--port", str(self.port)])],
            env={**base, **env}, stdout=self.output.file, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.output.text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answers (a 503: Redis is down)
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer: {self.output.text()[-3000:]}")

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
        end_process(self.proc)
        self.output.close()


class ManagerProcess(ServiceProcess):
    name = "sandbox-manager"

    def __init__(self, redis_url: str, folder: Path, session_ttl: float = 3600.0, reap_every: float = 0.2,
                 extra: tuple[str, ...] = ()) -> None:
        super().__init__(["--redis", redis_url, "--session-ttl", str(session_ttl), "--reap-every", str(reap_every),
                          *extra],
                         folder, {"WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN,
                                  "WASM_KERNEL_POOL_KEY": POOL_KEY})

    def call(self, method: str, path: str, body: object = None, token: str | None = MANAGER_TOKEN,
             timeout: float = 90) -> tuple[int, object]:
        return self.send(method, path, body, None if token is None else f"token {token}", timeout)


ROUTER_TOKEN_ENTRIES = [f"{t}/{u}:{k}" for (t, u), k in USER_TOKENS.items()]
# The router's secrets as its environment variables (the traits' defaults).
ROUTER_ENV = {"WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN,
              "WASM_KERNEL_POOL_KEY": POOL_KEY, "WASM_KERNEL_ROUTER_TOKENS": ",".join(ROUTER_TOKEN_ENTRIES)}


class RouterProcess(ServiceProcess):
    """With two tenants' tokens, two users each: flags, and the secrets from the environment."""

    name = "router"

    def __init__(self, redis_url: str, manager_url: str, folder: Path, session_ttl: float = 3600.0,
                 extra: tuple[str, ...] = ()) -> None:
        super().__init__(["--redis", redis_url, "--sandbox-manager", manager_url, "--session-ttl", str(session_ttl),
                          *extra],
                         folder, ROUTER_ENV)

    def call(self, method: str, path: str, body: object = None, tenant: str | None = "course-a",
             timeout: float = 90, user: str = "alice") -> tuple[int, object]:
        token = None if tenant is None else f"token {USER_TOKENS[(tenant, user)]}"
        return self.send(method, path, body, token, timeout)


def router_config(path: Path, port: int, **settings: object) -> Path:
    """A RouterApp config file (Python, `c.RouterApp.NAME = VALUE` lines), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"c.RouterApp.{name} = {value!r}\n" for name, value in {"port": port, **settings}.items()))
    path.chmod(0o600)
    return path


class ConfiguredRouterProcess(RouterProcess):
    """The router configured by a config file alone: `--config FILE` and nothing else on its
    command line, no WASM_KERNEL_* variable in its environment. The file has the same
    two tenants' tokens as RouterProcess, and the secrets."""

    def __init__(self, redis_url: str, manager_url: str, folder: Path, **settings: object) -> None:
        port = free_port()
        config = router_config(folder / "router_config.py", port, redis_url=redis_url,
                               sandbox_manager_url=manager_url, tokens=ROUTER_TOKEN_ENTRIES, pool_key=POOL_KEY,
                               host_token=TOKEN, manager_token=MANAGER_TOKEN, **settings)
        ServiceProcess.__init__(self, ["--config", str(config)], folder, {}, port=port, inherit_pool_env=False)


def wait_until(predicate, timeout: float = 30, what: str = "condition"):  # noqa: ANN001, ANN201
    """predicate()'s first truthy answer, polled every 0.1 s; AssertionError past timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_hosts(manager: ManagerProcess, count: int, timeout: float = 30) -> None:
    """Until the manager counts `count` live hosts (their first heartbeats came)."""
    deadline = time.monotonic() + timeout
    while manager.call("GET", "/healthz", token=None)[1].get("live_hosts") != count:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, manager.call("GET", "/healthz", token=None)
        time.sleep(0.1)


@contextmanager
def running_pool(redis: Any, base: Path, *, hosts: dict[str, dict[str, Any]],
                 manager: dict[str, Any] | None = None, routers: dict[str, dict[str, Any]] | None = None,
                 wait: bool = True) -> Iterator[dict[str, Any]]:
    """A pool's processes under `base`, by name: `hosts` (name: HostProcess's keywords,
    its host id the name unless given), one manager, `routers` (name: RouterProcess's
    keywords; default one plain "router", {} none), with "hosts" listing the hosts
    and "redis" and "base" beside them. With `wait`, until the manager counts every
    host live. Stopped together, routers first: what a test put in place of one (a
    restarted host) is what is stopped."""
    routers = {"router": {}} if routers is None else routers
    started: dict[str, Any] = {"redis": redis, "base": base}
    try:
        for name, options in hosts.items():
            options = {"host_id": name, "heartbeat": 0.3, **options}
            started[name] = HostProcess(redis.url, base / name, **options)
        started["manager"] = ManagerProcess(redis.url, base / "manager", **(manager or {}))
        for name, options in routers.items():
            started[name] = RouterProcess(redis.url, started["manager"].url, base / name, **options)
        started["hosts"] = [started[name] for name in hosts]
        if wait:
            wait_for_hosts(started["manager"], len(hosts))
        yield started
    finally:
        for name in [*routers, "manager", *hosts]:
            if name in started:
                started[name].stop()


def pool_store(redis_url: str):  # noqa: ANN201
    """A SessionStore on the pool's Redis, with the pool's key (to read what the pool wrote)."""
    from wasm_kernel.cluster.session_store import SessionStore, connect

    return SessionStore(connect(redis_url), key=POOL_KEY.encode())


def sandbox_of_kernel(redis_url: str, kernel_id: str) -> tuple[str, str]:
    """(sandbox id, host endpoint) of the router kernel `kernel_id`, read from Redis."""
    import asyncio

    async def read() -> tuple[str, str]:
        store = pool_store(redis_url)
        kernel = await store.router_kernel(kernel_id)
        assert kernel is not None
        record = await store.session_record(kernel.session_id)
        assert record is not None
        host = await store.host(record.sandbox.host_id)
        return record.sandbox.id, host.endpoint if host is not None else ""

    return asyncio.run(read())
