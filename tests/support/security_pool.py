"""A real pool for the security suite: redis-server with AUTH, a sandbox host, the
sandbox manager and the router, all as processes, and a kernel client that talks
to the router directly with one user's token."""

from __future__ import annotations

import json
import uuid
from typing import Any

import websocket

from support.cluster_procs import USER_TOKENS, HostProcess, ManagerProcess, RouterProcess, wait_for_hosts, wait_until
from support.jupyter_server_client import KernelChannels


class RouterChannels(KernelChannels):
    """A notebook's websocket to a kernel, straight to the router, as one user."""

    def __init__(self, router: RouterProcess, kernel_id: str, tenant: str, user: str) -> None:
        self.server = None  # type: ignore[assignment]
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        url = router.url.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels?session_id={self.session}"
        self.ws = websocket.create_connection(url, timeout=60,
                                              header=[f"Authorization: token {USER_TOKENS[(tenant, user)]}"])
        self.subprotocol = None
        self.seen: list[dict[str, Any]] = []


def start_kernel(router: RouterProcess, tenant: str, user: str, notebook: str) -> str:
    status, model = router.call("POST", "/api/kernels", {"name": "wasm-python",
                                                        "env": {"JPY_SESSION_NAME": notebook}},
                                tenant=tenant, user=user)
    assert status == 201, model
    return str(model["id"])  # type: ignore[index]


def host_kernels(host: HostProcess) -> set[str]:
    return {k["id"] for k in host.request("GET", "/api/kernels")}  # type: ignore[union-attr]


def host_session_paths(host: HostProcess) -> dict[str, str]:
    """kernel id -> the notebook path the host started it for."""
    return {s["kernel"]["id"]: s["path"] for s in host.request("GET", "/api/sessions")}  # type: ignore[union-attr]


def redis_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


__all__ = ["HostProcess", "ManagerProcess", "RouterChannels", "RouterProcess", "USER_TOKENS", "host_kernels",
           "host_session_paths", "redis_json", "start_kernel", "wait_for_hosts", "wait_until"]
