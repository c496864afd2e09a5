"""A real JupyterHub for tests: the hub, configurable-http-proxy and single-user servers.

Hub starts `python -m jupyterhub` from this environment with every piece of its state
in one scratch folder (the sqlite database, the cookie secret, the proxy's token and
pid file) and every port a free loopback one: the public proxy, the proxy's REST API
and the hub itself. The proxy is configurable-http-proxy from npm (.ci/run installs it
into .ci/node/ of the clone; `proxy_command()` finds it there or on PATH).

Users log in as a person's script would, through the hub's REST API: their password
(SharedPasswordAuthenticator) buys a token (`POST /hub/api/users/NAME/tokens` with an
`auth` body), and that token starts their server and reaches it under /user/NAME/.
The spawner is SimpleLocalProcessSpawner: every user runs as this OS user, each in a
home of their own under the scratch folder, which is how a course on one shared
account works.

UserServer is tests/support/jupyter_server_client.py's JupyterServer pointed at
/user/NAME/ behind the proxy, with the user's token, so create_notebook,
start_session and the rest work unchanged; HubKernelChannels is its KernelChannels on
the prefixed websocket URL. IdleCuller runs jupyterhub-idle-culler against the hub,
with the token of the hub's culler service.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psutil
import websocket

from support.cluster_procs import POOL_KEY, TOKEN, MANAGER_TOKEN, ServiceProcess
from support.jupyter_server_client import REQUEST_TIMEOUT, JupyterServer, KernelChannels, ServerError, free_port
from support.paths import REPO
from support.process_log import ProcessLog
from support.processes import end_process

# Where .ci/run installs configurable-http-proxy (`npm install --prefix .ci/node ...`).
PROXY_IN_CLONE = REPO / ".ci" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
PROXY_INSTALL = "npm install --prefix .ci/node --no-audit --no-fund configurable-http-proxy@5"
START_TIMEOUT = 60.0
SPAWN_TIMEOUT = 90.0
PASSWORD = "course-password-" + secrets.token_hex(8)
# The culler's scopes, as jupyterhub-idle-culler documents them (docs/teaching.md):
# the test's "jupyterhub-idle-culler" service has these and no more.
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]
CULLER_SERVICE = "jupyterhub-idle-culler"  # the page's name for it


def proxy_command() -> str | None:
    if PROXY_IN_CLONE.exists():
        return str(PROXY_IN_CLONE)
    return shutil.which("configurable-http-proxy")


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Hub:
    """`jupyterhub` on loopback with its state in `base`; `config` is extra
    jupyterhub_config.py text (the course's settings) appended to the harness's."""

    def __init__(self, base: Path, users: tuple[str, ...], config: str = "",
                 culler_scopes: list[str] | tuple[str, ...] = CULLER_SCOPES, homes: Path | None = None) -> None:
        proxy = proxy_command()
        if proxy is None:
            raise RuntimeError(f"configurable-http-proxy is not installed: `{PROXY_INSTALL}` (.ci/run does)")
        self.base = base
        self.homes = base / "homes" if homes is None else homes
        self.homes.mkdir(parents=True, exist_ok=True)
        self.port, self.api_port, self.hub_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # The hub's own API, not through the proxy: the JUPYTERHUB_API_URL a service gets.
        self.api_url = f"http://127.0.0.1:{self.hub_port}/hub/api"
        self.culler_token = secrets.token_hex(32)
        self.culler_scopes = list(culler_scopes)
        self.log_path = base / "jupyterhub.log"
        self.seen: dict[int, psutil.Process] = {}  # every descendant ever seen, for the leftover check
        harness = f"""
import sys
c = get_config()  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {self.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.api_port}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.auth_token = {secrets.token_hex(32)!r}
c.ConfigurableHTTPProxy.pid_file = {str(base / "proxy.pid")!r}
c.JupyterHub.db_url = {"sqlite:///" + str(base / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(base / "jupyterhub_cookie_secret")!r}
c.JupyterHub.pid_file = {str(base / "jupyterhub.pid")!r}
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = {PASSWORD!r}
c.Authenticator.allowed_users = {set(users)!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(self.homes) + "/{username}"!r}
# This environment's single-user server, whatever PATH the hub passes on.
c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
c.Spawner.ip = "127.0.0.1"
c.Spawner.start_timeout = {int(SPAWN_TIMEOUT)}
c.Spawner.http_timeout = {int(SPAWN_TIMEOUT)}
# POST .../server answers 202 at once (not after 10 s), so servers start side by side.
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0}}
# The culler runs outside the hub (IdleCuller, started by the test that needs it)
# with this service's token.
c.JupyterHub.services = [{{"name": {CULLER_SERVICE!r}, "api_token": {self.culler_token!r}}}]
c.JupyterHub.load_roles = [{{"name": {CULLER_SERVICE + "-role"!r}, "scopes": {self.culler_scopes!r},
                             "services": [{CULLER_SERVICE!r}]}}]
# The culler judges a server by the hub's record of its last activity, which the hub
# takes from the proxy every last_activity_interval (300 s by default): every 2 s,
# so a test sees a server in use as active, and an idle one as idle, within seconds.
c.JupyterHub.last_activity_interval = 2
"""
        # After the course's part, which may assign args and environment whole:
        tail = f"""
c.Spawner.environment.update({{
    # The compiled guest and warm image this machine already has, owned by this account.
    "WASM_KERNEL_CACHE_DIR": {str(_cache_dir())!r},
    # The tests own this environment, so Jupyter would search it before $HOME;
    # students do not own theirs: $HOME first, as for them.
    "JUPYTER_PREFER_ENV_PATH": "0",
}})
"""
        if os.geteuid() == 0:
            tail += 'c.Spawner.args.append("--allow-root")  # containers: Jupyter Server refuses root otherwise\n'
        self.config_path = base / "jupyterhub_config.py"
        self.config_path.write_text(harness + "\n# --- the course's configuration ---\n" + config + tail)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JPY_", "JUPYTER", "CONFIGPROXY", "WASM_KERNEL_ROUTER", "WASM_KERNEL_HOST"))}
        self._output = ProcessLog(self.log_path)
        self.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(self.config_path)],
                                     env=env, cwd=base, stdout=self._output.file, stderr=subprocess.STDOUT)
        try:
            self._wait_up()
        except BaseException:
            self.stop()
            raise

    # --- process ------------------------------------------------------------------

    def log_tail(self, lines: int = 40) -> str:
        return self._output.tail(lines)

    def _wait_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"jupyterhub exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                status, body = self.api("GET", "/hub/api/", token=None)
                if status == 200 and "version" in body:
                    self.note_processes()
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise ServerError(f"jupyterhub did not answer through its proxy within {START_TIMEOUT} s:\n{self.log_tail()}")

    def note_processes(self) -> list[psutil.Process]:
        """The hub's live descendants now (proxy, single-user servers, their kernels),
        remembered for stop()."""
        try:
            found = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            found = []
        for proc in found:
            self.seen.setdefault(proc.pid, proc)
        return [p for p in found if _alive(p)]

    def command_lines(self) -> list[str]:
        """The command lines of the hub's live descendants."""
        found = []
        for proc in self.note_processes():
            try:
                found.append(" ".join(proc.cmdline()))
            except psutil.NoSuchProcess:
                continue
        return found

    def strays(self) -> list[psutil.Process]:
        """Every live process this hub started, or that runs in one of its users'
        homes or names the scratch folder (kernels name their connection file there)."""
        mark = str(self.base)
        found = {p.pid: p for p in self.seen.values() if _alive(p)}
        for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
            if proc.pid in (os.getpid(), self.proc.pid):
                continue
            try:
                cmdline = proc.info["cmdline"] or []
                cwd = proc.info["cwd"] or ""
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if cwd.startswith(mark) or any(mark in part for part in cmdline):
                if _alive(proc):
                    found[proc.pid] = proc
        return list(found.values())

    def stop(self) -> list[str]:
        """SIGTERM the hub (it stops every single-user server and the proxy, as a
        shutdown does), then kill whatever of ours still runs. Returns what had to be
        killed, described."""
        self.note_processes()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        # Servers stop their kernels as they exit; give the last ones a moment.
        deadline = time.monotonic() + 20
        leftovers = self.strays()
        while leftovers and time.monotonic() < deadline:
            time.sleep(0.2)
            leftovers = self.strays()
        described = []
        for proc in leftovers:
            try:
                described.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(leftovers, timeout=10)
        self._output.close()
        return described

    # --- REST -----------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        """(status, decoded JSON or None) of a request through the proxy."""
        data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "PUT", "PATCH") else None)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"token {token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def login(self, user: str, password: str = PASSWORD) -> str:
        """The user's API token, for their password (the authenticator checks it)."""
        status, body = self.api("POST", f"/hub/api/users/{user}/tokens", {
            "auth": {"username": user, "password": password}, "note": "test login", "expires_in": 3600})
        if status != 201:
            raise ServerError(f"login of {user} -> HTTP {status}: {body}\n{self.log_tail(20)}")
        return str(body["token"])

    def start_server(self, user: str, token: str) -> UserServer:
        """POST /hub/api/users/USER/server with the user's own token; waits until ready."""
        return self.start_servers({user: token})[user]

    def start_servers(self, tokens: dict[str, str]) -> dict[str, UserServer]:
        """Each user's server started with their own token, all at once, as a class
        arriving does; waits until every one is ready."""
        for user, token in tokens.items():
            status, body = self.api("POST", f"/hub/api/users/{user}/server", token=token)
            if status not in (201, 202):
                raise ServerError(f"start of {user}'s server -> HTTP {status}: {body}\n{self.log_tail()}")
        for user, token in tokens.items():
            self._wait_server(user, token, ready=True)
        self.note_processes()
        return {user: UserServer(self, user, token) for user, token in tokens.items()}

    def stop_server(self, user: str, token: str) -> None:
        """DELETE /hub/api/users/USER/server, as the idle culler does; waits until gone."""
        self.note_processes()
        status, body = self.api("DELETE", f"/hub/api/users/{user}/server", token=token)
        if status not in (202, 204):
            raise ServerError(f"stop of {user}'s server -> HTTP {status}: {body}\n{self.log_tail()}")
        self._wait_server(user, token, ready=False)

    def user_model(self, user: str, token: str) -> dict[str, Any]:
        """GET /hub/api/users/USER with `token`."""
        status, model = self.api("GET", f"/hub/api/users/{user}", token=token)
        if status != 200:
            raise ServerError(f"GET /hub/api/users/{user} -> HTTP {status}: {model}")
        return dict(model)

    def server_model(self, user: str, token: str) -> dict[str, Any] | None:
        """The hub's model of USER's server (ready, pending, last_activity, ...), or
        None when it has none: not started, or stopped."""
        return self.user_model(user, token).get("servers", {}).get("")

    def _wait_server(self, user: str, token: str, ready: bool) -> None:
        deadline = time.monotonic() + SPAWN_TIMEOUT
        while time.monotonic() < deadline:
            model = self.user_model(user, token)
            server = model.get("servers", {}).get("")
            if ready and server and server.get("ready"):
                return
            if not ready and not server:
                return
            if ready and server is None and model.get("pending") is None:
                raise ServerError(f"{user}'s server stopped while starting:\n{self.log_tail(60)}")
            time.sleep(0.2)
        raise ServerError(f"{user}'s server is not {'ready' if ready else 'gone'} after {SPAWN_TIMEOUT} s:\n"
                          f"{self.log_tail(60)}")

    def home(self, user: str) -> Path:
        return self.homes / user


class IdleCuller:
    """jupyterhub-idle-culler run as the hub's service runs it, with the service's
    token (the culler's scopes and no more) and the hub's API URL, but started and
    stopped by a test: `command` is the service's command from docs/teaching.md with a
    test's --timeout and --cull-every. It runs in the hub's scratch folder (it reads
    idle_culler_config.py from there: there is none), its log beside the hub's."""

    def __init__(self, hub: Hub, command: list[str]) -> None:
        self.hub = hub
        self.log_path = hub.base / "idle-culler.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
        env["JUPYTERHUB_API_TOKEN"] = hub.culler_token
        # Its DEBUG lines say why each server was not culled, for a failure's report.
        argv = [*command, f"--url={hub.api_url}", "--IdleCuller.log_level=DEBUG"]
        self._output = ProcessLog(self.log_path, append=True)
        self.proc = subprocess.Popen(argv, env=env, cwd=hub.base, stdout=self._output.file, stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self._output.text()

    def log_tail(self, lines: int = 40) -> str:
        return self._output.tail(lines)

    def stop(self) -> str:
        """Terminate it (it has no state to save); returns its whole log."""
        end_process(self.proc)
        self._output.close()
        return self._output.text()


class UserServer(JupyterServer):
    """A user's single-user server as JupyterServer's client sees it: the URLs under
    /user/NAME/ on the proxy, and the user's token on every request. The process is
    the hub's, so nothing is started or stopped here."""

    def __init__(self, hub: Hub, user: str, token: str) -> None:  # noqa: D107 - no super(): no process of its own
        self.hub = hub
        self.user = user
        self.token = token
        self.base = hub.home(user)
        self.root_dir = self.base  # SimpleLocalProcessSpawner starts the server in the home
        self.data_dir = self.base / ".local" / "share" / "jupyter"
        self.runtime_dir = self.data_dir / "runtime"
        self.port = hub.port
        self.url = f"{hub.url}/user/{user}"
        self._xsrf = secrets.token_hex(16)
        self.kernel_pids_seen: set[int] = set()

    def log(self) -> str:
        return self.hub.log_tail(400)

    def log_tail(self, lines: int = 40) -> str:
        return self.hub.log_tail(lines)

    def kernel_processes(self) -> list[psutil.Process]:
        """Live processes naming this user's runtime folder (their kernels)."""
        self.hub.note_processes()
        mark = str(self.runtime_dir)
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if any(mark in part for part in proc.info["cmdline"] or []) and _alive(proc):
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        self.kernel_pids_seen.update(p.pid for p in found)
        return found

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        """(status, body) of a request under /user/NAME with `token` (default: the user's)."""
        return self.hub.api(method, f"/user/{self.user}{path}", body, token=self.token if token is None else token)

    def connect(self, kernel_id: str) -> HubKernelChannels:
        return HubKernelChannels(self, kernel_id)

    def shutdown(self, timeout: float = 30.0) -> float:  # pragma: no cover - the hub stops servers
        raise NotImplementedError("stop a user's server through the hub: Hub.stop_server")

    def stop(self) -> list[int]:  # pragma: no cover - the hub stops servers
        raise NotImplementedError("stop a user's server through the hub: Hub.stop_server")


def ws_connect(server: UserServer, kernel_id: str, token: str) -> websocket.WebSocket:
    url = f"ws://127.0.0.1:{server.port}/user/{server.user}/api/kernels/{kernel_id}/channels?session_id={uuid.uuid4().hex}"
    return websocket.create_connection(url, timeout=REQUEST_TIMEOUT, header=[f"Authorization: token {token}"])


class HubKernelChannels(KernelChannels):
    """KernelChannels on /user/NAME/api/kernels/ID/channels through the proxy."""

    def __init__(self, server: UserServer, kernel_id: str) -> None:  # noqa: D107 - the URL is all that differs
        self.server = server
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        url = f"ws://127.0.0.1:{server.port}/user/{server.user}/api/kernels/{kernel_id}/channels?session_id={self.session}"
        self.ws = websocket.create_connection(url, timeout=REQUEST_TIMEOUT,
                                              header=[f"Authorization: token {server.token}"])
        self.subprotocol = self.ws.getsubprotocol()
        self.seen: list[dict[str, Any]] = []


def _cache_dir() -> Path:
    from wasm_kernel.host.cache_dir import cache_root

    return cache_root()


class TenantKeyRouter(ServiceProcess):
    """`wasm-kernel router` with one tenant key (`TENANT/*:KEY`): it accepts every
    user's `user_token(KEY, TENANT, USER)`, the tokens a hub hands out."""

    name = "router"

    def __init__(self, redis_url: str, manager_url: str, folder: Path, tenant: str, key: str) -> None:
        super().__init__(["--redis", redis_url, "--sandbox-manager", manager_url], folder, {
            "WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN,
            "WASM_KERNEL_POOL_KEY": POOL_KEY, "WASM_KERNEL_ROUTER_TOKENS": f"{tenant}/*:{key}"})
