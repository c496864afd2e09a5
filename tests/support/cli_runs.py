"""The `wasm-kernel` command run as a user runs it, in subprocesses: the tests of
tests/cli/ and the terminal-safety vectors of tests/security/ share these."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat

from wasm_kernel.sessions.metadata import SessionMetadata, write_metadata

_SCRIPT = Path(sys.executable).parent / "wasm-kernel"
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "wasm_kernel.cli"]
KERNELSPEC = {"name": "wasm-python", "display_name": "Python (WebAssembly sandbox)", "language": "python"}


def env_for(tmp_path: Path, config: str | None = None) -> dict[str, str]:
    """A user with their own Jupyter data and config folders (and temporary folder)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "NO_COLOR", "JUPYTER_CONFIG_PATH")}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "data")
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "config")
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "tmp")
    if config is not None:
        (tmp_path / "config" / "jupyter_config.py").write_text(config)
    return env


def wk_as_user(env: dict[str, str], *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in the user's environment (env_for) and folder."""
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def wk(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The command in this process's environment; with check, it must succeed quietly."""
    proc = subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "", proc.stderr
    return proc


def wk_run(*args: str | Path, data_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`wasm-kernel run ARGS` with its sessions under data_dir."""
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "NO_COLOR")}
    env["JUPYTER_DATA_DIR"] = str(data_dir)
    return subprocess.run([*COMMAND, "run", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


def notebook(path: Path, *cells: str | tuple[str, list[str]]) -> Path:
    """A wasm-python notebook at path; a cell is its source, or (source, tags)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    for cell in cells:
        source, tags = (cell, []) if isinstance(cell, str) else cell
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {}))
    nbformat.write(nb, path)
    return path


def make_session(root: Path, age_hours: float | None, files: dict[str, bytes] | None = None) -> str:
    """A session made on the host, last updated age_hours ago (None: legacy, no metadata)."""
    sid = str(uuid.uuid4())
    (root / sid).mkdir(parents=True)
    for name, data in (files or {}).items():
        (root / sid / name).parent.mkdir(parents=True, exist_ok=True)
        (root / sid / name).write_bytes(data)
    if age_hours is not None:
        then = datetime.now(timezone.utc) - timedelta(hours=age_hours)
        write_metadata(root, SessionMetadata(sid, then - timedelta(hours=1), then))
    return sid
