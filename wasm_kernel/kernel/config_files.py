"""The kernel's configuration files: Jupyter's, found where every Jupyter app looks.

ipykernel's app is an IPython application, which reads only IPython profile
files (~/.ipython/profile_default/...). An operator configures Jupyter in
`jupyter_config.py` on Jupyter's config path (`jupyter --paths`), so the kernel
reads that, and `wasm_kernel_config.py` beside it, as a JupyterApp would. The
CLI reads the same files (cli/kernel_config.py), so its defaults are the kernel's.
"""

from __future__ import annotations

from traitlets.config import Application, Config
from traitlets.config.loader import ConfigFileNotFound

CONFIG_FILES = ("jupyter_config", "wasm_kernel_config")  # .py or .json, later ones win


def load_jupyter_config_files(app: Application) -> None:
    """Load CONFIG_FILES from Jupyter's config path into `app` (its command line still wins)."""
    from jupyter_core.paths import jupyter_config_path

    paths = jupyter_config_path()
    for name in CONFIG_FILES:
        try:
            Application.load_config_file(app, name, path=paths)
        except ConfigFileNotFound:
            pass


def read_jupyter_config_files() -> Config:
    """What load_jupyter_config_files gives an app with no other configuration."""
    app = Application()
    app.log.disabled = True  # a broken file is the kernel's to report, at start
    try:
        load_jupyter_config_files(app)
    except Exception:
        return Config()
    return app.config
