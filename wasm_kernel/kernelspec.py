"""The Jupyter kernelspec: where its files are, installing and removing it
(`wasm-kernel install|uninstall` in cli/kernelspec_commands.py).

The repo keeps one copy of the spec, `kernelspec/` at the top (kernel.json and the
logos; make_logos.py draws the logos). The wheel ships it twice (pyproject.toml):
as data files in `share/jupyter/kernels/wasm-python/`, so that `pip install` alone
makes Jupyter list the kernel, and as package data `wasm_kernel/_kernelspec/`,
which is what this module reads in an installed wheel. From a source checkout or
an editable install it reads `kernelspec/` beside the package.

kernel.json's argv starts with "python": jupyter_client's KernelManager replaces
that with its own sys.executable when it launches the kernel, which is right when
Jupyter runs in the environment wasm-kernel is installed in. `wasm-kernel install`
writes a spec whose argv[0] is this interpreter's absolute path instead, so a
Jupyter running elsewhere (another venv, a system JupyterLab) still starts the
kernel in this environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

KERNEL_NAME = "wasm-python"
KERNEL_JSON = "kernel.json"
LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")
SPEC_FILES = (KERNEL_JSON, *LOGOS)
# jupyter_client's rule for kernelspec folder names.
_VALID_NAME = re.compile(r"[a-z0-9._\-]+", re.IGNORECASE)


class KernelSpecError(Exception):
    """The spec cannot be found, written or removed; the message is one line for the user."""


def spec_source_dir() -> Path:
    """The folder holding kernel.json and the logos: the wheel's package data, or a
    checkout's kernelspec/."""
    package = Path(__file__).resolve().parent
    candidates = (package / "_kernelspec", package.parent / "kernelspec")
    for folder in candidates:
        if all((folder / name).is_file() for name in SPEC_FILES):
            return folder
    raise KernelSpecError(
        f"kernelspec files not found (looked in {' and '.join(str(c) for c in candidates)}); reinstall wasm-kernel"
    )


def kernel_spec(display_name: str | None = None, python: str | None = None) -> dict[str, Any]:
    """kernel.json's content, with argv[0] set to `python` (default: this
    interpreter) and the display name replaced when one is given."""
    spec = json.loads((spec_source_dir() / KERNEL_JSON).read_text(encoding="utf-8"))
    # abspath, not resolve(): a venv's python is a symlink to the base interpreter,
    # and running the link's target would leave the venv (and lose wasm_kernel).
    spec["argv"][0] = os.path.abspath(python or sys.executable)
    if display_name is not None:
        spec["display_name"] = display_name
    return spec


def install(
    *,
    user: bool = False,
    prefix: str | os.PathLike[str] | None = None,
    kernel_name: str = KERNEL_NAME,
    display_name: str | None = None,
) -> Path:
    """Install the spec with jupyter_client's KernelSpecManager, replacing an earlier
    install of the same name at that location; returns the folder written.

    Where: `user` for the user's Jupyter data dir, `prefix` for
    PREFIX/share/jupyter/kernels (sys.prefix for a venv), neither for the
    system-wide folder (usually /usr/local/share/jupyter/kernels).
    """
    from jupyter_client.kernelspec import KernelSpecManager

    _check_args(user, prefix, kernel_name)
    spec = kernel_spec(display_name)
    source = spec_source_dir()
    with tempfile.TemporaryDirectory(prefix="wasm-kernel-spec-") as tmp:
        # A subfolder made with the default umask: install_kernel_spec copies the
        # folder's own mode, and the temp dir's 0700 would hide the spec from others.
        folder = Path(tmp) / kernel_name
        folder.mkdir()
        (folder / KERNEL_JSON).write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        for name in LOGOS:
            shutil.copyfile(source / name, folder / name)
        try:
            dest = KernelSpecManager().install_kernel_spec(
                str(folder), kernel_name=kernel_name, user=user, prefix=None if prefix is None else os.fspath(prefix)
            )
        except PermissionError as err:
            where = err.filename or "the system-wide kernels folder"
            raise KernelSpecError(f"permission denied writing {where}; try --user or --sys-prefix") from None
        except OSError as err:
            raise KernelSpecError(f"{err.strerror or err}: {err.filename or ''}".rstrip(": ")) from None
    return Path(dest)


def _check_args(user: bool, prefix: object, kernel_name: str) -> None:
    if user and prefix is not None:
        raise KernelSpecError("choose one of --user, --sys-prefix and --prefix")
    if not _VALID_NAME.fullmatch(kernel_name):
        raise KernelSpecError(f"invalid kernel name {kernel_name!r}: use ASCII letters, digits, '.', '_' and '-'")


def spec_dir(*, user: bool = False, prefix: str | os.PathLike[str] | None = None, kernel_name: str = KERNEL_NAME) -> Path:
    """Where install() with the same arguments puts the spec."""
    from jupyter_core.paths import SYSTEM_JUPYTER_PATH, jupyter_data_dir

    if user:
        base = Path(jupyter_data_dir())
    elif prefix is not None:
        base = Path(prefix) / "share" / "jupyter"
    else:
        base = Path(SYSTEM_JUPYTER_PATH[0])
    return base / "kernels" / kernel_name


def uninstall(*, user: bool = False, prefix: str | os.PathLike[str] | None = None, kernel_name: str = KERNEL_NAME) -> Path | None:
    """Remove the spec that install() with the same arguments wrote; the folder
    removed, or None when there was none. Only a real folder holding a kernel.json is
    removed (never a symlink's target)."""
    _check_args(user, prefix, kernel_name)
    folder = spec_dir(user=user, prefix=prefix, kernel_name=kernel_name)
    if folder.is_symlink():
        raise KernelSpecError(f"{folder} is a symbolic link; remove it by hand")
    if not folder.is_dir():
        return None
    if not (folder / KERNEL_JSON).is_file():
        raise KernelSpecError(f"{folder} holds no kernel.json; not a kernelspec, left alone")
    try:
        shutil.rmtree(folder)
    except PermissionError:
        raise KernelSpecError(f"permission denied removing {folder}") from None
    except OSError as err:
        raise KernelSpecError(f"cannot remove {folder}: {err.strerror or err}") from None
    return folder
