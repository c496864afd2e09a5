"""The Sandbox drive's REST API, called as the lab extension's drive calls it, on a
real Jupyter Server (tests/support/jupyter_server_client.py) with the extension the wheel
enables; and sessions bound as a kernel binds them, for tests that need a
workspace without paying for a kernel."""

from __future__ import annotations

import base64
import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from support.jupyter_server_client import JupyterServer
from wasm_kernel.sessions.identity import derive_session_identity
from wasm_kernel.sessions.registry import SessionRegistry

API = "/wasm-kernel/drive/api/contents/"
FILES = "/wasm-kernel/drive/files/"


def empty_workspace(workspace: Path) -> None:
    """Remove everything in a workspace, a link as itself, so a test starts afresh;
    and the session's disk ledger, which these removals went behind (the next write
    counts the workspace again)."""
    for entry in workspace.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.rmtree(workspace.parent / ".wasm-kernel" / "ledger" / workspace.name, ignore_errors=True)


def sessions_root(server: JupyterServer) -> Path:
    return server.data_dir / "wasm-kernel" / "sessions"


def bind_session(server: JupyterServer, api_path: str, agent_key: str | None = None) -> tuple[str, Path]:
    """The session a kernel of `api_path` would bind (same identity, same root), and its workspace."""
    root = sessions_root(server)
    with SessionRegistry(root) as registry:
        sid = registry.get_or_create_session(derive_session_identity(server.root_dir / api_path, agent_key=agent_key))
    workspace = root / sid
    workspace.mkdir(parents=True, exist_ok=True)
    return sid, workspace


def quoted(path: str) -> str:
    return urllib.parse.quote(path, safe="/")


def call(server: JupyterServer, method: str, path: str, body: Any = None, *, token: str | None = None,
         raw: bytes | None = None, query: str = "") -> tuple[int, Any]:
    """(status, decoded JSON body or None). token=None uses the server's own; "" sends none."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is None and method in ("POST", "PUT", "PATCH"):
        data = b""
    headers = {"Content-Type": "application/json"}
    use = server.token if token is None else token
    if use:
        headers["Authorization"] = f"token {use}"
    # The root as the lab extension asks for it: no trailing slash.
    url = (server.url + API + quoted(path) if path else server.url + API.rstrip("/")) + (f"?{query}" if query else "")
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, payload = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    try:
        return status, json.loads(payload) if payload else None
    except ValueError:
        return status, payload


def ok(server: JupyterServer, method: str, path: str, body: Any = None, query: str = "") -> Any:
    status, answer = call(server, method, path, body, query=query)
    assert status in (200, 201, 204), f"{method} {path} -> {status}: {answer}\n{server.log_tail(20)}"
    return answer


def names(model: dict[str, Any]) -> list[str]:
    return [item["name"] for item in model["content"]]


def upload(server: JupyterServer, path: str, data: bytes, part: int = 0) -> int:
    """PUT a file as JupyterLab's uploader does (in parts of `part` bytes if set); the last status."""
    if not part or len(data) <= part:
        return call(server, "PUT", path, {"type": "file", "format": "base64",
                                          "content": base64.b64encode(data).decode()})[0]
    pieces = [data[i:i + part] for i in range(0, len(data), part)]
    status = 0
    for n, piece in enumerate(pieces, 1):
        chunk = -1 if n == len(pieces) else n
        status, _ = call(server, "PUT", path, {"type": "file", "format": "base64", "chunk": chunk,
                                               "content": base64.b64encode(piece).decode()})
        if status not in (200, 201):
            return status
    return status


def download(server: JupyterServer, path: str, token: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    use = server.token if token is None else token
    headers = {"Authorization": f"token {use}"} if use else {}
    req = urllib.request.Request(server.url + FILES + quoted(path) + "?download=1", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)
