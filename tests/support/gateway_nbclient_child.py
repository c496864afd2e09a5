"""Run a notebook with nbclient through a Jupyter gateway (the router), as a Jupyter
Server's GatewayKernelManager does, and print its code cells' outputs as JSON.

    python gateway_nbclient_child.py ROUTER_URL TOKEN NOTEBOOK
"""

from __future__ import annotations

import json
import sys

import nbformat
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient


def _with_auth(token: str) -> None:
    """jupyter_server's GatewayKernelClient opens its channels websocket without the
    gateway's auth header (its REST calls carry it; Jupyter Server's own browser-facing
    websocket path does too). The router wants it on every request, so the client
    here adds it, as a GatewayClient.headers option would if the websocket used it."""
    from jupyter_server.gateway import managers

    connect = managers.websocket.create_connection

    def create_connection(url: str, **kwargs: object) -> object:
        return connect(url, header=[f"Authorization: token {token}"], **kwargs)

    managers.websocket.create_connection = create_connection


def main() -> None:
    url, token, path = sys.argv[1:4]
    GatewayClient.instance(url=url, auth_token=token, allowed_envs="JPY_SESSION_NAME", request_timeout=120.0)
    _with_auth(token)
    nb = nbformat.read(path, as_version=4)
    km = GatewayKernelManager(kernel_name="wasm-python")
    client = NotebookClient(nb, km=km, timeout=120, kernel_name="wasm-python")
    # GatewayKernelManager.start_kernel takes the kernel name from its arguments (default python3).
    try:
        client.execute(env={"JPY_SESSION_NAME": path}, kernel_name="wasm-python", cleanup_kc=False)
    finally:
        # nbclient leaves a kernel manager it was given running: stop it as its owner.
        if client.kc is not None:
            client.kc.stop_channels()
        run_sync(km.shutdown_kernel)(now=True)
    print(json.dumps([cell.get("outputs", []) for cell in nb.cells if cell.cell_type == "code"]))


if __name__ == "__main__":
    main()
