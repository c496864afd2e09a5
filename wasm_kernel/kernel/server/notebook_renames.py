"""A notebook keeps its session when JupyterLab renames or moves it.

Jupyter Server's contents service emits an event for every rename (schema
contents_service/v1, action "rename", with `source_path` and `path`, both relative
to the server's root). The session registry is keyed on the notebook's canonical
path, so a renamed notebook would find no session and get a new, empty one. This
listener re-points the registry's rows from the old path to the new one, in one
transaction (sessions/moves.py), for a notebook and for a folder holding notebooks.

A running kernel is not disturbed: it keeps its session id, and Jupyter Server
updates the kernel's $JPY_SESSION_NAME when JupyterLab updates the session's path,
so a restart finds the moved row. A rename onto a name that already has a session
is refused by the move: both sessions stay as they were, and the log says why.
Copies ("Duplicate", "Save As") are not followed: a copy is a new notebook with a
new, empty session.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import structlog

from ...sessions.moves import SessionMoveError, move_notebook_sessions
from .drive_config import SandboxDrive

CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"

log = structlog.get_logger("wasm_kernel.server")


class RenameFollower:
    def __init__(self, config: SandboxDrive, server_root: str) -> None:
        self.config = config
        self.server_root = server_root

    def _os_path(self, api_path: str) -> str:
        return os.path.join(self.server_root, *[p for p in api_path.split("/") if p])

    def follow(self, source_path: str, path: str) -> None:
        old, new = self._os_path(source_path), self._os_path(path)
        try:
            moved = move_notebook_sessions(self.config.root, old, new)
        except SessionMoveError as err:
            log.warning("server.rename_not_followed", source_path=source_path, path=path, reason=str(err))
            return
        except Exception as err:  # a broken registry must not break renaming files
            log.error("server.rename_failed", source_path=source_path, path=path, error=str(err))
            return
        if moved.moved:
            log.info("server.rename_followed", source_path=source_path, path=path, sessions=len(moved.moved))

    async def on_event(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        if data.get("action") != "rename":
            return
        source, path = data.get("source_path"), data.get("path")
        if isinstance(source, str) and isinstance(path, str) and source and path:
            await asyncio.to_thread(self.follow, source, path)
