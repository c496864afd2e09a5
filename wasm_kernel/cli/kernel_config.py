"""The kernel's configuration as the kernel itself would read it, for the CLI's defaults.

A kernel started by Jupyter reads its traits from the `jupyter_config` and
`wasm_kernel_config` files on Jupyter's config path (kernel/config_files.py), then
from `--WasmKernel.x=...` in the installed kernel.json's argv. The CLI reads the
same two places, so `wasm-kernel sessions` looks where the kernel keeps its
sessions without being told.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets.config import Config

if TYPE_CHECKING:
    from ..kernel.kernel_settings import KernelSettings


def _kernelspec_argv() -> list[str]:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    from ..kernelspec import KERNEL_NAME

    try:
        return list(KernelSpecManager().get_kernel_spec(KERNEL_NAME).argv)
    except (NoSuchKernel, OSError, ValueError):
        return []


def kernel_config() -> Config:
    """WasmKernel's configuration from the config files and the kernelspec's argv."""
    from traitlets.config.loader import KVArgParseConfigLoader

    from ..kernel.config_files import read_jupyter_config_files

    config = read_jupyter_config_files()
    ours = [a for a in _kernelspec_argv() if a.startswith("--WasmKernel.")]
    if ours:
        try:
            config.merge(KVArgParseConfigLoader(ours).load_config())
        except Exception:  # an argv the kernel would reject: it says so when it starts
            pass
    return config


def kernel_setting(name: str, default: Any) -> Any:
    """WasmKernel.<name> as a kernel would have it: configured, else `default`."""
    section = kernel_config().get("WasmKernel", {})
    return section[name] if name in section else default


def kernel_settings() -> KernelSettings:
    """The kernel's settings, as a kernel would read them: for what the CLI does on
    its behalf (precompile builds the course's environment)."""
    import logging

    from ..kernel.kernel_settings import KernelSettings

    section = kernel_config().get("WasmKernel", {})
    known = set(KernelSettings.class_trait_names(config=True))
    settings = KernelSettings(**{name: section[name] for name in section if name in known})
    settings.log = logging.getLogger("wasm_kernel.cli")
    return settings


def kernel_metering(given: str | None = None) -> str:
    """The metering the CLI's guests use: `given` (a --metering flag), else the
    kernel's configured c.WasmKernel.metering, else the default; made this process's
    (host/engine.set_process_metering), so what it compiles and runs is that module.
    ValueError (one line) for a name that is not a metering."""
    from ..host.engine import DEFAULT_METERING, set_process_metering

    metering = given if given is not None else str(kernel_setting("metering", DEFAULT_METERING))
    set_process_metering(metering)
    return metering


def kernel_workspace_root() -> Path:
    """Where the kernel keeps its sessions (WasmKernel.workspace_root)."""
    from ..sessions.layout import default_workspace_root

    value = kernel_setting("workspace_root", None)
    return Path(value).expanduser() if value else default_workspace_root()
