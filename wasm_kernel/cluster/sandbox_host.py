"""A sandbox host: a plain Jupyter Server serving wasm-python kernels, registered in Redis.

`wasm-kernel host --redis URL --port P` runs jupyter_server's ServerApp with this
module as a server extension. The extension keeps the host's record in Redis
(id, endpoint, capacity, load = running kernels) with a TTL of three heartbeats, so
a host that stops (crash, kill -9, network) disappears from the pool by itself
and the sandbox manager drops its sessions (SessionStore.delete_host_tx).

The server binds 127.0.0.1 unless told otherwise, and requires a token (generated
if none is given): the manager and router present it. Kernels keep their sessions
under the host's --root (the kernel's workspace_root); a root shared by all hosts
(--shared-root) lets a session's files follow it to another host.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel
from traitlets import Bool, Float, Int, Unicode
from traitlets.config import Configurable

from ..host.log import get_logger

log = get_logger("wasm_kernel.cluster")

KERNEL_NAME = "wasm-python"
TOKEN_ENV = "WASM_KERNEL_HOST_TOKEN"


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


class WasmOnlyKernelSpecManager(KernelSpecManager):
    """Only the sandboxed kernel: jupyter_client's allowed_kernelspecs hides the others
    from listings but still starts them by name, and a native python3 on a sandbox
    host would run untrusted code outside the sandbox."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if kernel_name != KERNEL_NAME:
            raise NoSuchKernel(kernel_name)
        return super().get_kernel_spec(kernel_name)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "wasm_kernel.cluster.sandbox_host"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    # Imported here: `wasm-kernel --help` must work without the cluster extra (redis).
    from .session_store import HostInfo, SessionStore, connect

    config = SandboxHost(parent=serverapp)
    endpoint = config.advertise_url or f"http://{serverapp.ip}:{serverapp.port}"
    host_id = config.host_id or f"{socket.gethostname()}:{serverapp.port}"
    store = SessionStore(connect(config.redis_url), prefix=config.prefix)
    ttl_ms = int(config.heartbeat_seconds * 3000)

    async def beat() -> None:
        while True:
            load = len(serverapp.kernel_manager.list_kernel_ids())
            try:
                await store.register_host(HostInfo(host_id, endpoint, config.capacity, load, config.shared_root),
                                          ttl_ms)
            except Exception as err:  # Redis down: keep serving, beat again when it is back
                log.warning("host.heartbeat_failed", host=host_id, error=str(err))
            await asyncio.sleep(config.heartbeat_seconds)

    serverapp._wasm_kernel_heartbeat = asyncio.get_event_loop().create_task(beat())
    log.info("host.registered", host=host_id, endpoint=endpoint, capacity=config.capacity)


def server_argv(*, redis_url: str, port: int, ip: str, root: Path, token: str, host_id: str, capacity: int,
                heartbeat: float, shared_root: bool, advertise_url: str) -> list[str]:
    """The ServerApp command line of a sandbox host."""
    return [
        f"--ServerApp.ip={ip}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--no-browser",
        f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}",
        "--ServerApp.jpserver_extensions={'wasm_kernel.cluster.sandbox_host': True}",
        f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}",
        f"--KernelSpecManager.allowed_kernelspecs={KERNEL_NAME}",
        "--ServerApp.kernel_spec_manager_class=wasm_kernel.cluster.sandbox_host.WasmOnlyKernelSpecManager",
        f"--SandboxHost.redis_url={redis_url}", f"--SandboxHost.host_id={host_id}",
        f"--SandboxHost.capacity={capacity}", f"--SandboxHost.heartbeat_seconds={heartbeat}",
        f"--SandboxHost.shared_root={shared_root}", f"--SandboxHost.advertise_url={advertise_url}",
    ]


def run_host(args: Any) -> int:
    from jupyter_server.serverapp import ServerApp

    if args.root is None:
        from jupyter_core.paths import jupyter_data_dir

        args.root = Path(jupyter_data_dir()) / "wasm-kernel" / "hosts" / str(args.port)
    root = args.root.resolve()
    # The server's notebooks (the pool's notebook paths, by digest) and the kernels'
    # sessions apart: a notebook folder that held the sessions would not be shown to
    # its kernel, with a notice on every notebook's first cell.
    served = root / "notebooks"
    served.mkdir(parents=True, exist_ok=True)
    token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)
    if not os.environ.get(TOKEN_ENV):
        print(f"wasm-kernel host: token {token} (set ${TOKEN_ENV} to choose it)", file=sys.stderr)
    # The kernels this server starts keep their sessions under <root>/data/wasm-kernel/sessions.
    os.environ["JUPYTER_DATA_DIR"] = str(root / "data")
    argv = server_argv(redis_url=args.redis, port=args.port, ip=args.ip, root=served, token=token, host_id=args.id,
                       capacity=args.capacity, heartbeat=args.heartbeat, shared_root=args.shared_root,
                       advertise_url=args.advertise_url)
    if args.allow_root:
        argv.append("--allow-root")
    ServerApp.launch_instance(argv=argv)
    return 0


__all__ = ["SandboxHost", "WasmOnlyKernelSpecManager", "run_host", "server_argv"]
