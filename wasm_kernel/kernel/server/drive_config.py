"""The drive's configuration: the same sessions root, owner and disk quota as the
kernels this server starts.

A kernel reads `WasmKernel.*` from Jupyter's config files (kernel/config_files.py);
the server reads its own `jupyter_server_config`. So that an operator configures a
root or a quota once, each trait here defaults to the kernel's setting of the same
name, and `SandboxDrive.*` in the server's config overrides it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from traitlets import Bool, Int, Unicode, default
from traitlets.config import Configurable

from ...core.policy import ExecutionPolicy
from ...sessions.identity import resolve_agent_key
from ...sessions.layout import default_workspace_root
from ..config_files import read_jupyter_config_files

MIB = 1 << 20
# A notebook file is parsed only if it can hold at most this many JSON keys and values
# (drive_service.json_values_over): parsed, each costs up to ~80 bytes, so reading one
# costs no more than answering with any file of max_open_bytes (about five times it).
MAX_JSON_VALUES = 4_000_000


@cache
def _kernel_section() -> Any:
    """The kernels' `WasmKernel` settings, read once for every default below."""
    return read_jupyter_config_files().get("WasmKernel", {})


def _kernel_setting(name: str, fallback: Any) -> Any:
    section = _kernel_section()
    return section[name] if name in section else fallback


class SandboxDrive(Configurable):
    """The file browser's view of each notebook's sandbox workspace."""

    enabled = Bool(True, help="Serve the Sandbox drive's API (the workspaces in JupyterLab's file browser).").tag(
        config=True
    )
    workspace_root = Unicode(help="Folder holding every session's workspace (default: the kernel's).").tag(config=True)
    agent_key = Unicode(
        None, allow_none=True, help="Whose sessions the drive shows (default: the kernel's, $JUPYTERHUB_USER, the OS user)."
    ).tag(config=True)
    disk_max_bytes = Int(allow_none=True, help="Disk quota of a session for the drive's writes (default: the kernel's).").tag(
        config=True
    )
    disk_max_files = Int(allow_none=True, help="Files and folders a session may hold (default: the kernel's).").tag(
        config=True
    )
    max_request_bytes = Int(
        32 * MIB, help="Largest body of one save or upload part (4/3 of it as base64); a bigger body is counted and "
                       "dropped as it arrives, then refused. JupyterLab uploads big files in 1 MiB parts."
    ).tag(config=True)
    max_open_bytes = Int(
        64 * MIB, help="Largest file the drive opens in an editor or viewer; bigger ones are downloaded. A notebook "
                       f"is opened only if it holds at most {MAX_JSON_VALUES:,} JSON values."
    ).tag(config=True)

    @default("workspace_root")
    def _default_workspace_root(self) -> str:
        return str(_kernel_setting("workspace_root", "") or default_workspace_root())

    @default("agent_key")
    def _default_agent_key(self) -> str | None:
        return _kernel_setting("agent_key", None)

    @default("disk_max_bytes")
    def _default_disk_max_bytes(self) -> int | None:
        return _kernel_setting("disk_max_bytes", ExecutionPolicy().disk_max_bytes)

    @default("disk_max_files")
    def _default_disk_max_files(self) -> int | None:
        return _kernel_setting("disk_max_files", ExecutionPolicy().disk_max_files)

    @property
    def root(self) -> Path:
        return Path(self.workspace_root)

    @property
    def owner(self) -> str:
        """The agent key the kernels of this server bind their sessions under."""
        return resolve_agent_key(self.agent_key)
