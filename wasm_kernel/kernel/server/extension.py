"""Loads the Sandbox drive's handlers and the rename follower into Jupyter Server,
and hands every kernel the server starts the server's contents root and its Jupyter
folders as absolute paths.

Enabled for every server by the wheel's jupyter-config file
(etc/jupyter/jupyter_server_config.d/wasm_kernel.json); `jupyter server extension
disable wasm_kernel` turns it off, `c.SandboxDrive.enabled = False` keeps it loaded
but silent.

Where kernels do not run on this server (a gateway: the pool's router), their
workspaces live on the sandbox hosts, out of this server's reach. The drive then
answers 501 with a line saying so, and the rename follower stays off (the pool
keeps its own records).
"""

from __future__ import annotations

import os
from typing import Any

from ..notebook_roots import hand_root_to_kernels
from .drive_config import SandboxDrive
from .drive_handlers import drive_handlers
from .drive_service import DriveService
from .notebook_renames import CONTENTS_EVENTS, RenameFollower

GATEWAY_LINE = (
    "the Sandbox drive shows the workspaces of kernels that run on this Jupyter server; here kernels run on a "
    "gateway (a sandbox pool), whose workspaces it cannot reach: use the Sandbox panel, which asks the kernel"
)


# Read by the server against its own folder; a kernel runs in its notebook's folder,
# where a relative one would name another place (its sessions beside each notebook).
JUPYTER_FOLDER_VARIABLES = ("JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR")


def hand_folders_to_kernels() -> None:
    """Every kernel inherits the server's environment: each relative Jupyter folder
    in it is made absolute, as the server itself read it."""
    for name in JUPYTER_FOLDER_VARIABLES:
        value = os.environ.get(name)
        if value and not os.path.isabs(os.path.expanduser(value)):
            os.environ[name] = os.path.abspath(os.path.expanduser(value))


def _load_jupyter_server_extension(serverapp: Any) -> None:
    config = SandboxDrive(parent=serverapp)
    hand_folders_to_kernels()
    contents_root = getattr(serverapp.contents_manager, "root_dir", None)
    # Before any kernel starts: each is told where this server's notebooks are, and
    # shows no notebook folder outside them (notebook_roots.py), whatever a client
    # names. A contents manager without a root on this disk hands none.
    hand_root_to_kernels(contents_root if isinstance(contents_root, str) else None)
    root = contents_root if isinstance(contents_root, str) else serverapp.root_dir
    gateway = getattr(getattr(serverapp, "gateway_config", None), "gateway_enabled", False)
    unavailable = GATEWAY_LINE if gateway else None
    if not config.enabled:
        unavailable = "the Sandbox drive is turned off on this server (c.SandboxDrive.enabled = False)"
    serverapp.web_app.settings["wasm_kernel_drive"] = DriveService(config, root)
    serverapp.web_app.settings["wasm_kernel_drive_unavailable"] = unavailable
    serverapp.web_app.add_handlers(".*$", drive_handlers(serverapp.web_app.settings["base_url"]))
    if unavailable is None:
        follower = RenameFollower(config, root)
        serverapp.event_logger.add_listener(schema_id=CONTENTS_EVENTS, listener=follower.on_event)
    serverapp.log.info("wasm-kernel: Sandbox drive %s", "on" if unavailable is None else f"off: {unavailable}")
