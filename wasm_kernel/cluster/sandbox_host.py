"""A sandbox host: a plain Jupyter Server serving wasm-python kernels, registered in Redis.

`wasm-kernel host --redis URL --port P` runs jupyter_server's ServerApp with this
module as a server extension. The extension keeps the host's record in Redis
(id, endpoint, capacity, load = running kernels) with a TTL of three heartbeats, so
a host that stops (crash, kill -9, network) disappears from the pool by itself
and the sandbox manager drops its sessions (SessionStore.delete_host_tx).

The server binds 127.0.0.1 unless told otherwise and refuses to start without its
credentials ($WASM_KERNEL_HOST_TOKEN, which the manager and router present, and the
pool key that signs its record). It serves only what the pool needs: the kernels,
kernelspecs and sessions APIs and /api/status; no terminals, no contents or files
API, no lab or notebook pages, and no other server extension. Each session's
notebook path is pool/TENANT/IDENTITY/notebook.ipynb, whose folder the host makes,
so a kernel's read-only notebook folder holds nothing of another session.

Kernels keep their sessions under the host's --root (the kernel's workspace_root); a
root shared by all hosts (--shared-root) lets a session's files follow it to another
host.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import socket
from pathlib import Path
from typing import Any

from jupyter_server.serverapp import ServerApp
from jupyter_server.services.sessions.sessionmanager import SessionManager
from tornado import web
from traitlets import Bool, Float, Int, Unicode
from traitlets.config import Configurable

from ..host.log import configure_service_logging, get_logger
from ..host.safe_fs import open_dir_path, open_root
from ..kernel.notebook_roots import hand_root_to_kernels
from ..kernel.server.kernel_specs import WasmOnlyKernelSpecManager
from ..kernelspec import KERNEL_NAME
from .host_client import HOST_FULL
from .records import HOST_NOTEBOOK_PATH

log = get_logger("wasm_kernel.cluster")

EXTENSION = "wasm_kernel.cluster.sandbox_host"
KERNEL_SHUTDOWN_WAIT_S = 30
POOL_NOTEBOOK = "notebook.ipynb"  # every pool session's notebook name (HOST_NOTEBOOK_PATH)


class SandboxHost(Configurable):
    """The host's identity in the pool (configured from `wasm-kernel host`)."""

    redis_url = Unicode("redis://127.0.0.1:6379/0", help="The pool's Redis.").tag(config=True)
    host_id = Unicode("", help="This host's id in the pool (default: hostname:port).").tag(config=True)
    advertise_url = Unicode("", help="The URL the pool reaches this server at (default: http://ip:port).").tag(
        config=True)
    capacity = Int(50, min=1, help="How many kernels this host takes.").tag(config=True)
    heartbeat_seconds = Float(2.0, min=0.1, help="How often the host renews its record; it lapses after three.").tag(
        config=True)
    shared_root = Bool(False, help="Every host's kernels use the same workspace root (a shared filesystem).").tag(
        config=True)
    prefix = Unicode("wk", help="The pool's Redis key prefix.").tag(config=True)


class PoolSessionManager(SessionManager):
    """Sessions only at pool paths, each in a folder of its own that the host makes.

    The sandbox manager names pool/TENANT/IDENTITY/notebook.ipynb; any other path is
    refused (a path of its choosing could make a kernel's notebook folder one that
    holds other sessions). The folder is made one component at a time without
    following links, so a link planted in the root cannot redirect it."""

    capacity: int | None = None  # set by the extension: kernels this host takes at most
    # Creates whose kernel is not in the kernel manager's list yet (counted at once:
    # creates can race for the last slot). A create leaves this count as soon as its
    # kernel has started, when the list counts it: counted in both while the session
    # row is saved and answered, a class's kernels starting at once made a host of 40
    # refuse the 39th and 40th as full.
    _starting = 0

    async def create_session(self, path: str | None = None, name: Any = None, type: str | None = None,
                             kernel_name: str | None = None, kernel_id: str | None = None) -> dict[str, Any]:
        match = HOST_NOTEBOOK_PATH.fullmatch(path or "")
        if match is None:
            raise web.HTTPError(400, "a pool session's path is pool/TENANT/IDENTITY/notebook.ipynb")
        # The kernel's notebook is os.path.join(its folder, name): an absolute or
        # climbing name would be another session's folder, or any folder of the host.
        if name not in (None, "", POOL_NOTEBOOK):
            raise web.HTTPError(400, f"a pool session's name is {POOL_NOTEBOOK}")
        if self.capacity is not None and len(self.kernel_manager.list_kernel_ids()) + self._starting >= self.capacity:
            raise RuntimeError(HOST_FULL)  # the sessions API answers 500 with this text; the manager reads it
        root_fd = open_root(self.contents_manager.root_dir)
        try:
            os.close(open_dir_path(root_fd, ["pool", match.group(1), match.group(2)], create=True, mode=0o700))
        finally:
            os.close(root_fd)
        slot = _StartSlot(self)
        token = _SLOT.set(slot)
        try:
            return await super().create_session(path=path, name=name, type=type, kernel_name=kernel_name,
                                                kernel_id=kernel_id)
        finally:
            _SLOT.reset(token)
            slot.release()  # if the create failed before its kernel started

    async def start_kernel_for_session(self, *args: Any, **kwargs: Any) -> str:
        try:
            return await super().start_kernel_for_session(*args, **kwargs)
        finally:
            slot = _SLOT.get()
            if slot is not None:  # started (now in the list) or failed: no longer starting
                slot.release()


class _StartSlot:
    """One create's place in PoolSessionManager._starting, given back once."""

    def __init__(self, manager: PoolSessionManager) -> None:
        self.manager = manager
        manager._starting += 1
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.manager._starting -= 1


# The create this task is in (start_kernel_for_session is awaited inside create_session).
_SLOT: contextvars.ContextVar[_StartSlot | None] = contextvars.ContextVar("wasm_kernel_start_slot", default=None)


class PoolServerApp(ServerApp):
    """A Jupyter Server that serves the pool and nothing else."""

    # Kernels, kernelspecs, sessions and /api/status: what the manager and the router
    # call. No contents, files, nbconvert, config, view, shutdown or events handlers.
    default_services = ("api", "kernels", "kernelspecs", "sessions")

    def init_webapp(self) -> None:
        super().init_webapp()
        # Beyond its services, Jupyter Server routes /files (the contents manager's),
        # /api/me, /login, /logout and redirects, with no setting to drop them: keep
        # only the pool's routes and the final 404, whatever a version adds.
        router = self.web_app.wildcard_router
        base = self.base_url.rstrip("/")
        router.rules = [rule for rule in router.rules if _pool_route(_pattern(rule), base)]

    def find_server_extensions(self) -> None:
        # Only this host's extension: JupyterLab, Notebook, terminals or any other
        # extension installed beside us would serve pages and APIs the pool never uses.
        self.jpserver_extensions = {EXTENSION: True}

    async def cleanup_kernels(self) -> None:
        """A host that stops (SIGTERM: a rolling upgrade, a drained node) drains
        itself: no new session lands here, every kernel shuts down as a notebook's
        shutdown does (saving its interpreter), and only then are its sessions marked
        drained, so the router starts each on a live host, where it resumes."""
        pool = getattr(self, "_wasm_kernel_pool", None)
        if pool is None:
            await super().cleanup_kernels()
            return
        store, host_id, heartbeat = pool
        try:
            await store.mark_draining(host_id)
        except Exception as err:  # Redis down: the kernels still save; the reaper finds the host lost
            log.warning("host.drain_mark_failed", host=host_id, error=str(err)[:200])
        # The heartbeat goes on while the kernels save: a host whose record lapsed
        # now would be reaped as lost, its sessions told to restart instead of moving.
        await super().cleanup_kernels()
        heartbeat.stop()
        try:
            drained = await store.delete_host_tx(host_id, reason="drained")
            log.info("host.drained", host=host_id, sessions=drained)
        except Exception as err:
            log.warning("host.drain_failed", host=host_id, error=str(err)[:200])


_POOL_ROUTES = ("/api/kernels", "/api/kernelspecs", "/api/sessions", "/api/status", "/kernelspecs/")


def _pattern(rule: Any) -> str:
    regex = getattr(rule.matcher, "regex", None)
    return regex.pattern.rstrip("$") if regex is not None else ""


def _pool_route(pattern: str, base: str) -> bool:
    if base and pattern.startswith(base):
        pattern = pattern[len(base):]
    return pattern.startswith(_POOL_ROUTES) or pattern == "(.*)"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "wasm_kernel.cluster.sandbox_host"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    # Imported here: `wasm-kernel --help` must work without the cluster extra (redis).
    from .credentials import pool_key
    from .host_heartbeat import HostHeartbeat, host_info
    from .session_store import SessionStore, connect

    if not isinstance(serverapp, PoolServerApp):
        log.warning("host.not_pool_server", why="wasm-kernel host starts the pool's server; this one is not it")
        return
    configure_service_logging()
    # The pool's notebook folders are this server's root: no kernel shows one outside it.
    hand_root_to_kernels(serverapp.contents_manager.root_dir)
    config = SandboxHost(parent=serverapp)
    serverapp.session_manager.capacity = config.capacity  # enforced where kernels start
    endpoint = config.advertise_url or f"http://{serverapp.ip}:{serverapp.port}"
    host_id = config.host_id or f"{socket.gethostname()}:{serverapp.port}"
    key = pool_key()
    store = SessionStore(connect(config.redis_url), key=key, prefix=config.prefix)

    def load() -> int:  # read from the heartbeat's thread: list() of a dict's keys is atomic
        return len(serverapp.kernel_manager.list_kernel_ids())

    heartbeat = HostHeartbeat(config.redis_url, key, config.prefix,
                              lambda: host_info(host_id, endpoint, config.capacity, config.shared_root, load),
                              config.heartbeat_seconds)
    # The first beat when the loop runs, i.e. once the server listens: a host whose
    # port could not be bound exits before that, never advertised to the pool.
    asyncio.get_event_loop().call_soon(heartbeat.start)
    serverapp._wasm_kernel_pool = (store, host_id, heartbeat)  # PoolServerApp.cleanup_kernels drains with them
    log.info("host.registered", host=host_id, endpoint=endpoint, capacity=config.capacity)


def server_argv(*, redis_url: str, port: int, ip: str, root: Path, host_id: str, capacity: int,
                heartbeat: float, shared_root: bool, advertise_url: str) -> list[str]:
    """The ServerApp command line of a sandbox host."""
    return [
        f"--ServerApp.ip={ip}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--no-browser",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.terminals_enabled=False",
        f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}",
        # A kernel's shutdown saves its interpreter (keep_state): Jupyter's 5 s before
        # a kill is short for a large state on a loaded host.
        f"--KernelManager.shutdown_wait_time={KERNEL_SHUTDOWN_WAIT_S}",
        f"--KernelSpecManager.allowed_kernelspecs={KERNEL_NAME}",
        "--ServerApp.kernel_spec_manager_class=wasm_kernel.kernel.server.kernel_specs.WasmOnlyKernelSpecManager",
        "--ServerApp.session_manager_class=wasm_kernel.cluster.sandbox_host.PoolSessionManager",
        f"--SandboxHost.redis_url={redis_url}", f"--SandboxHost.host_id={host_id}",
        f"--SandboxHost.capacity={capacity}", f"--SandboxHost.heartbeat_seconds={heartbeat}",
        f"--SandboxHost.shared_root={shared_root}", f"--SandboxHost.advertise_url={advertise_url}",
    ]


def run_host(args: Any) -> int:
    from .credentials import (
        HOST_TOKEN_ENV, HOST_TOKEN_WHAT, MissingCredential, check_redis_url, fail, pool_key, secret_from_env,
        warn_insecure_demo,
    )
    from .records import HOST_ID, InvalidRecord, check_endpoint

    try:
        check_redis_url(args.redis, insecure_demo=args.insecure_demo)
        pool_key()
        token = secret_from_env(HOST_TOKEN_ENV, HOST_TOKEN_WHAT)
        if args.id and not HOST_ID.fullmatch(args.id):
            raise MissingCredential("--id is 1-128 letters, digits or '._:-', starting with a letter or digit")
        if args.advertise_url:
            check_endpoint(args.advertise_url)
    except InvalidRecord:
        return fail("host", MissingCredential("--advertise-url is http(s)://HOST:PORT, with nothing after it"))
    except MissingCredential as err:
        return fail("host", err)
    if args.insecure_demo:
        warn_insecure_demo("host", args.redis)
    if args.root is None:
        from jupyter_core.paths import jupyter_data_dir

        args.root = Path(jupyter_data_dir()) / "wasm-kernel" / "hosts" / str(args.port)
    root = args.root.resolve()
    # The server's notebooks (the pool's notebook folders) and the kernels' sessions
    # apart: a notebook folder that held the sessions would not be shown to its kernel.
    served = root / "notebooks"
    served.mkdir(parents=True, exist_ok=True)
    # The kernels this server starts keep their sessions under <root>/data/wasm-kernel/sessions.
    os.environ["JUPYTER_DATA_DIR"] = str(root / "data")
    if args.shared_root:
        # A session may wake on any host of the pool: its kernels save whole states, not
        # differences from this host's own warm image (WasmKernel.state_portable).
        os.environ["WASM_KERNEL_STATE_PORTABLE"] = "1"
    # Jupyter's IdentityProvider reads the token from $JUPYTER_TOKEN: never on a command line.
    os.environ["JUPYTER_TOKEN"] = token
    argv = server_argv(redis_url=args.redis, port=args.port, ip=args.ip, root=served, host_id=args.id,
                       capacity=args.capacity, heartbeat=args.heartbeat, shared_root=args.shared_root,
                       advertise_url=args.advertise_url)
    if args.allow_root:
        argv.append("--allow-root")
    PoolServerApp.launch_instance(argv=argv)
    return 0


__all__ = ["PoolServerApp", "PoolSessionManager", "SandboxHost", "WasmOnlyKernelSpecManager", "run_host", "server_argv"]
