"""Area drive: an upload through the Sandbox drive, beside the same upload to Jupyter
Server's own contents manager, on one real Jupyter Server in one run.

A 100 MB file goes up in 1 MiB parts, as JupyterLab's uploader sends one (PUT with
`chunk` 1, 2, ..., -1 and the part in base64), once into an empty workspace and once
into a workspace of 10,000 files in 100 folders. The native peer takes the same parts
at /api/contents. What it shows: the drive's cost per part (it charges each part to
the session's disk ledger before writing it) and whether that cost grows with the
workspace's size. Before SessionWorkspace (0243149) the drive measured the whole
workspace for every part; the A/B in BENCHMARKS.md runs this file against that tree
with PYTHONPATH.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the server's process helpers

from _common import Row, log, median  # noqa: E402
from support.drive_client import API, bind_session  # noqa: E402
from support.jupyter_server_client import running_server  # noqa: E402

NOTEBOOK = "upload.ipynb"
PART = 1 << 20
TOKEN = "bench-drive-token-0123456789"


def _fill(workspace: Path, files: int, folders: int = 100) -> None:
    for i in range(files):
        folder = workspace / "data" / f"d{i % folders:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.dat").write_bytes(b"x" * 64)


def _put(url: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/json", "Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.status in (200, 201), resp.status


def _delete(url: str) -> None:
    req = urllib.request.Request(url, method="DELETE", headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=120):
        pass


def _upload(url: str, parts: list[str]) -> float:
    """Seconds for the whole upload, part after part, as the uploader sends them."""
    start = time.perf_counter()
    for n, content in enumerate(parts, 1):
        _put(url, {"type": "file", "format": "base64", "content": content, "chunk": -1 if n == len(parts) else n})
    return time.perf_counter() - start


def run_drive(rounds: int = 3, megabytes: int = 100, files: int = 10_000) -> tuple[list[Row], dict[str, Any]]:
    piece = bytes(range(256)) * (PART // 256)
    parts = [base64.b64encode(piece).decode("ascii")] * megabytes  # encoded once: the client's cost is not ours
    raw: dict[str, Any] = {"megabytes": megabytes, "part_bytes": PART, "workspace_files": files}
    with tempfile.TemporaryDirectory(prefix="wk-bench-drive-") as tmp, \
            running_server(Path(tmp), notebooks=[NOTEBOOK], token=TOKEN,
                           extra_argv=[f"--SandboxDrive.disk_max_bytes={4 << 30}",
                                       f"--SandboxDrive.disk_max_files={files * 2 + 1000}"]) as server:
        _sid, workspace = bind_session(server, NOTEBOOK)
        drive_url = server.url + API + f"{NOTEBOOK}/big.bin"
        native_url = server.url + "/api/contents/big.bin"
        times: dict[str, list[float]] = {"native": [], "empty": [], "full": []}
        for which in ("empty", "full"):
            if which == "full":
                log(f"drive: {files} files in the workspace")
                _fill(workspace, files)
            for r in range(rounds):
                # Alternated, so a slower minute of the machine falls on both.
                times["native"].append(_upload(native_url, parts))
                _delete(native_url)
                times[which].append(_upload(drive_url, parts))
                assert (workspace / "big.bin").stat().st_size == megabytes * PART
                _delete(drive_url)
                log(f"drive: {which} round {r + 1}: drive {times[which][-1]:.2f} s, native {times['native'][-1]:.2f} s")
        raw.update({k: v for k, v in times.items()})
    native = median(times["native"])
    empty, full = median(times["empty"]), median(times["full"])
    label = f"{megabytes} MB upload in 1 MiB parts"
    rows = [
        Row("drive", f"{label}, empty workspace", "s", empty, native, note="native: Jupyter Server's /api/contents"),
        Row("drive", f"{label}, {files:,}-file workspace", "s", full, native, note="native: the same upload to /api/contents"),
        Row("drive", f"per part, {files:,}-file workspace against empty", "ms", 1000 * full / megabytes,
            1000 * empty / megabytes, note="1.0x: the part's cost does not grow with the workspace"),
    ]
    return rows, raw


if __name__ == "__main__":
    from _common import print_table

    rows, raw = run_drive(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 3)
    print_table(rows)
    print(json.dumps(raw))
