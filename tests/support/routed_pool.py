"""A whole pool on real processes: two sandbox hosts, the manager, the router, and a
Jupyter Server that uses the router as its gateway (tests/cluster/ shares it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.cluster_procs import ROUTER_TOKENS, HostProcess, ManagerProcess, RouterProcess, sandbox_of_kernel
from support.jupyter_server_client import JupyterServer, KernelChannels


def start_pool(redis_url: str, base: Path, *, shared_root: bool = False,
               kernel_configs: tuple[str | None, str | None] = (None, None)) -> dict[str, Any]:
    """Two hosts (on one root if shared_root; each with its kernels' config file if
    kernel_configs gives one), the manager, the router, and a Jupyter Server that uses
    the router as its gateway: all real processes."""
    hosts = [HostProcess(redis_url, base / "shared-root" if shared_root else base / f"h{i}",
                         f"{base.name}-{i}", heartbeat=0.3, shared_root=shared_root,
                         kernel_config=kernel_configs[i - 1]) for i in (1, 2)]
    manager = ManagerProcess(redis_url, base / "manager")
    router = RouterProcess(redis_url, manager.url, base / "router")
    root = base / "notebooks"
    root.mkdir()
    server = JupyterServer(base / "server", root, extra_argv=[
        f"--GatewayClient.url={router.url}", f"--GatewayClient.auth_token={ROUTER_TOKENS['course-a']}",
        "--GatewayClient.allowed_envs=JPY_SESSION_NAME", "--GatewayClient.request_timeout=120",
    ])
    return {"hosts": hosts, "manager": manager, "router": router, "server": server, "redis_url": redis_url}


def stop_pool(pool: dict[str, Any]) -> None:
    pool["server"].stop()
    pool["router"].stop()
    pool["manager"].stop()
    for host in pool["hosts"]:
        host.stop()


def open_notebook(server: JupyterServer, path: str) -> tuple[dict[str, Any], KernelChannels]:
    """A session on `path` through the gateway, its kernel's channels connected."""
    model = server.start_session(path)
    channels = server.connect(model["kernel"]["id"])
    info = channels.kernel_info()
    assert info["implementation"] == "wasm_kernel", info
    return model, channels


def host_of(pool: dict[str, Any], kernel_id: str) -> HostProcess | None:
    """The host that runs the router kernel `kernel_id` now (read from Redis)."""
    try:
        endpoint = sandbox_of_kernel(pool["redis_url"], kernel_id)[1]
    except Exception:
        return None
    return next((h for h in pool["hosts"] if h.url == endpoint), None)
