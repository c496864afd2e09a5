"""Kept state: what saving a notebook's interpreter at shutdown costs, and what waking it
at the next start buys, against a fresh start that re-runs the cells and against native
ipykernel (whose only way back is re-running them), side by side in one run.

    .venv/bin/python benchmarks/run_all.py --only state [--rounds 3] [--cells 20] [--quick] [--json out.json]

The workload W, three cells (each sent after the previous one's status idle, as a
person running them in turn does; every kernel runs the same code):
    1. import numpy as np, pandas as pd, matplotlib.pyplot as plt
    2. df = pd.DataFrame(np.random.default_rng(0).random((781_250, 8)))   # 50,000,000 bytes of float64
    3. fig, ax = plt.subplots(); ax.plot(df[0][:1000]); total = float(df.sum().sum())
and then a cell `total`, the first result that needs W's state. The frame's size is
checked in each saving kernel (`df.memory_usage().sum()`, untimed).

Per round (round 0 is a warm-up: the warm image, bytecode caches, IPython's profile,
matplotlib's font cache; not counted), in one fresh kernel process each, the order of
the blocks reversed every other round:
- save: wasm-python on a named notebook (JPY_SESSION_NAME, a scratch JUPYTER_DATA_DIR)
  runs W, is shut down (`shutdown_kernel(now=False)`, the shutdown Jupyter's "Shut Down
  Kernel" sends). The kernel's log gives the save: structlog's `guest.hibernated`
  (`seconds`: comparing the pages against the warm image and writing, HMAC and fsync
  included, not the last cell's checkpoint that runs just before it; `bytes`: the file)
  and the app's "saved the interpreter's state (N cells, B bytes)". The client's
  shutdown wall time (request -> process gone, save included) is recorded beside it,
  ipykernel's shutdown after W as its peer. The same with a 100 MB frame
  (1,562,500 x 8) checks the goal "a save of 100 MB of state <= 1 s".
- resume -> first result: a new wasm-python on the same notebook and data dir, from
  `KernelManager.start_kernel()` to the execute_reply of its first cell `total` (a
  kernel_info_request first, as a frontend sends). The reply's execution count must go
  on from the saved one, and the first cell's stderr carries the "resumed the state"
  line (both checked), and `total` is compared with the saving kernel's.
- fresh start + re-run: wasm-python with --WasmKernel.keep_state=False on another
  notebook and data dir: start -> cells 1-3 -> the execute_reply of `total`.
- ipykernel start + re-run: the native `python3` kernel, the same.
- fresh start -> first `1+1`: both kernels, start -> the execute_reply of `1+1` (as the
  kernel area measures it). This is "a fresh start's time to first result" in the goal
  "resume <= 1.5x a fresh start's time to first result": the ratio resume / wasm fresh
  `1+1` is checked against 1.5x; resume / fresh re-run is shown (and checked) too.
- state_save_every: wasm-python on a named notebook with --WasmKernel.state_save_every=1
  against the default 0: after 3 warm-up cells, `--cells` cells `x = 1`, each sent as soon
  as the previous one's status idle arrives (back to back: the periodic save runs after
  the reply, on the guest's thread, so a cell sent at once waits for it; a pause longer
  than the save would hide it, not measured here). Median request -> reply. Also with W
  loaded first (its state is about twice the frame: see the save rows), as the per-cell
  cost grows with the state.

Every wasm-python kernel logs at INFO (a jupyter_config.py in a scratch
JUPYTER_CONFIG_DIR: the app's log level, and a handler for the `wasm_kernel` loggers) so
the save's lines reach its log; a kernel's shutdown may take up to 120 s before
jupyter_client kills it (its default is 5 s: a save that takes longer would be cut off
in Jupyter Server, and the raw data say so). Scratch folders are removed at the end.
"""

from __future__ import annotations

import math
import os
import queue
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, fmt, log, median  # noqa: E402
from bench_kernel import NATIVE, WASM, DrivenKernel, KernelFailed, kernel_env  # noqa: E402

AREA = "state"
TARGET_SAVE_S = 1.0  # for 100 MB of state
TARGET_RESUME_RATIO = 1.5
CELL_TIMEOUT = 600.0
SHUTDOWN_WAIT_S = 120.0
JUPYTER_SHUTDOWN_WAIT_S = 5.0  # jupyter_client's (and so Jupyter Server's) default shutdown_wait_time
WARMUP_CELLS = 3

ROWS_50MB = 50_000_000 // 64  # 8 float64 columns: 64 bytes a row
ROWS_100MB = 100_000_000 // 64
CELL_IMPORT = "import numpy as np, pandas as pd, matplotlib.pyplot as plt"
CELL_PLOT = "fig, ax = plt.subplots(); ax.plot(df[0][:1000]); total = float(df.sum().sum())"
CELL_RESULT = "total"
CELL_CHECK = "print(int(df.memory_usage().sum()), repr(total))"

KERNEL_LOGGING = """\
c.WasmKernelApp.log_level = "INFO"
c.WasmKernelApp.logging_config = {"loggers": {"wasm_kernel": {"level": "INFO", "handlers": ["console"]}}}
"""

_HIBERNATED = re.compile(r"event='guest\.hibernated'(?P<fields>.*)$", re.M)
_SAVED = re.compile(r"saved the interpreter's state \((?P<cells>\d+) cells?, (?P<bytes>\d+) bytes\)")
_RESUMED = re.compile(r"wasm-kernel: resumed the state saved at [^\n]*")


def workload(rows: int) -> list[str]:
    return [CELL_IMPORT, f"df = pd.DataFrame(np.random.default_rng(0).random(({rows:_}, 8)))", CELL_PLOT]


# --- one kernel ----------------------------------------------------------------------------


class StateKernel(DrivenKernel):
    """DrivenKernel with extra kernel arguments, a start without a first cell (the
    first cell is the measured one), and a shutdown jupyter_client waits longer for."""

    def __init__(self, kernel: str, env: dict[str, str], cwd: Path, log_path: Path,
                 argv: list[str] | None = None) -> None:
        super().__init__(kernel, env, cwd, log_path)
        self.argv = list(argv or [])
        self.km.shutdown_wait_time = SHUTDOWN_WAIT_S

    def launch(self) -> tuple[float, float]:
        """Start the process and wait for its kernel_info_reply; (t0, seconds to it)."""
        import zmq

        t0 = time.perf_counter()
        self.km.start_kernel(env=self.env, cwd=str(self.cwd), stdout=self._log, stderr=self._log,
                             extra_arguments=self.argv)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.poller = zmq.Poller()
        self.shell_sock = self.kc.shell_channel.socket
        self.iopub_sock = self.kc.iopub_channel.socket
        self.poller.register(self.shell_sock, zmq.POLLIN)
        self.poller.register(self.iopub_sock, zmq.POLLIN)
        self._wait_shell(self.kc.kernel_info(), "kernel_info_reply")
        return t0, time.perf_counter() - t0

    def start(self) -> dict[str, float]:
        t0, info = self.launch()
        return {"kernel_info_s": info, "first_result_s": self.first_result(t0)}

    def first_cell(self, code: str, t0: float) -> dict[str, Any]:
        """The first cell after launch(): seconds from t0 to its execute_reply (timed),
        then its iopub messages up to its status idle (untimed; a late-joining SUB may
        have missed some: then iopub_complete is False)."""
        msg_id = self.kc.execute(code)
        reply = self._wait_shell(msg_id, "execute_reply", timeout=CELL_TIMEOUT)
        took = time.perf_counter() - t0
        if reply["content"]["status"] != "ok":
            raise KernelFailed(f"{self.kernel_name}: {code!r} failed: {reply['content']}\n{self.log_tail()}")
        outputs: list[dict[str, Any]] = []
        complete = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                msg = self.kc.iopub_channel.get_msg(timeout=1.0)
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status":
                if msg["content"]["execution_state"] == "idle":
                    complete = True
                    break
            elif msg["msg_type"] != "execute_input":
                outputs.append(msg)
        if not complete:
            self._settle_iopub(msg_id)
        return {"result_s": took, "reply": reply, "outputs": outputs, "iopub_complete": complete}

    def run(self, code: str) -> dict[str, Any]:
        return self.run_cell(code, timeout=CELL_TIMEOUT)

    def shutdown(self) -> float:
        if self.kc is None:  # never launched
            self._log.close()
            return 0.0
        return super().shutdown()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def _stream(outputs: list[dict[str, Any]], name: str) -> str:
    return "".join(m["content"].get("text", "") for m in outputs
                   if m["msg_type"] == "stream" and m["content"].get("name") == name)


def _result_text(outputs: list[dict[str, Any]]) -> str | None:
    for m in outputs:
        if m["msg_type"] == "execute_result":
            return m["content"]["data"].get("text/plain")
    return None


def parse_saves(text: str) -> list[dict[str, Any]]:
    """Every guest.hibernated event in a kernel's log, in order."""
    saves = []
    for m in _HIBERNATED.finditer(text):
        fields = dict(re.findall(r"(\w+)=('[^']*'|\S+)", m.group("fields")))
        saves.append({"seconds": float(fields["seconds"]), "bytes": int(fields["bytes"]),
                      "runs": int(fields.get("runs", -1)), "full": fields.get("full") == "True",
                      "cells": int(fields.get("cells", -1))})
    return saves


def _shutdown_save(k: StateKernel) -> dict[str, Any]:
    """Shut k down (the save runs in it) and read the save from its log."""
    wall = k.shutdown()
    text = k.log_text()
    saves = parse_saves(text)
    said = _SAVED.findall(text)
    if not saves or not said:
        raise KernelFailed(f"{k.kernel_name}: no save in the kernel's log after shutdown ({wall:.2f} s)\n"
                           + text[-3000:])
    last = saves[-1]
    if int(said[-1][1]) != last["bytes"]:
        raise KernelFailed(f"save sizes disagree: {said[-1]} vs {last}")
    return {"shutdown_s": wall, "save_s": last["seconds"], "save_bytes": last["bytes"], "save_runs": last["runs"],
            "save_full": last["full"], "save_cells": last["cells"],
            "shutdown_over_jupyter_wait": wall > JUPYTER_SHUTDOWN_WAIT_S}


# --- the blocks of a round -------------------------------------------------------------------


class Bench:
    def __init__(self, base: Path, cells: int) -> None:
        self.base = base
        self.cells = cells
        self.common = kernel_env(base)
        config = base / "config"
        config.mkdir()
        (config / "jupyter_config.py").write_text(KERNEL_LOGGING)
        self.common["JUPYTER_CONFIG_DIR"] = str(config)

    def _kernel(self, kernel: str, tag: str, *, notebook: bool = True, argv: list[str] | None = None,
                data: Path | None = None, folder: Path | None = None) -> StateKernel:
        """A kernel in a scratch folder of its own (or the given data dir and notebook folder)."""
        scratch = self.base / tag
        scratch.mkdir(parents=True, exist_ok=True)
        folder = folder or scratch / "course"
        folder.mkdir(parents=True, exist_ok=True)
        nb = folder / "lesson.ipynb"
        if not nb.exists():
            nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
        env = {**self.common, "JUPYTER_DATA_DIR": str(data or scratch / "data")}
        if notebook:
            env["JPY_SESSION_NAME"] = str(nb)
        return StateKernel(kernel, env, folder, scratch / f"{kernel}-{time.monotonic_ns()}.log", argv)

    def _run_workload(self, k: StateKernel, rows: int) -> tuple[float, list[float]]:
        """Launch k, run W, then `total`; (start -> reply of `total`, each cell's reply seconds)."""
        t0, _ = k.launch()
        cells = workload(rows)
        first = k.first_cell(cells[0], t0)
        each = [first["result_s"]]
        for code in cells[1:]:
            each.append(k.run(code)["reply_s"])
        sent = time.perf_counter()
        r = k.run(CELL_RESULT)
        took = sent - t0 + r["reply_s"]
        each.append(r["reply_s"])
        return took, each

    def _check(self, k: StateKernel) -> tuple[int, str]:
        text = _stream(k.run(CELL_CHECK)["outputs"], "stdout").split()
        return int(text[0]), text[1]

    def saved_and_resumed(self, tag: str, rows: int, resume: bool) -> dict[str, Any]:
        """W on a named notebook, shut down (the save); then, if resume, a new kernel on it."""
        scratch = self.base / tag
        data, folder = scratch / "data", scratch / "course"
        out: dict[str, Any] = {"rows": rows}
        k = self._kernel(WASM, tag, data=data, folder=folder)
        try:
            out["run_s"], out["cells_s"] = self._run_workload(k, rows)
            out["frame_bytes"], out["total"] = self._check(k)
            out["cells_before_save"] = 5  # W, `total`, the check
        except BaseException:
            k.shutdown()
            raise
        out.update(_shutdown_save(k))
        if not resume:
            return out
        k = self._kernel(WASM, tag, data=data, folder=folder)
        try:
            t0, out["resume_kernel_info_s"] = k.launch()
            first = k.first_cell(CELL_RESULT, t0)
            out["resume_s"] = first["result_s"]
            count = first["reply"]["content"]["execution_count"]
            if count != out["cells_before_save"] + 1:
                raise KernelFailed(f"resumed kernel's first cell has execution count {count}, "
                                   f"not {out['cells_before_save'] + 1}: not resumed?\n{k.log_tail()}")
            out["resume_iopub_complete"] = first["iopub_complete"]
            notice = _RESUMED.search(_stream(first["outputs"], "stderr"))
            if first["iopub_complete"] and notice is None:
                raise KernelFailed(f"no 'resumed the state' line on the first cell: {first['outputs']}")
            out["resume_notice"] = notice.group(0) if notice else None
            shown = _result_text(first["outputs"])
            if first["iopub_complete"] and shown != out["total"]:
                raise KernelFailed(f"the resumed kernel's `total` is {shown!r}, not {out['total']!r}")
            _, total = self._check(k)
            if total != out["total"]:
                raise KernelFailed(f"resumed total {total} != saved {out['total']}")
        except BaseException:
            k.shutdown()
            raise
        second = _shutdown_save(k)  # the resumed kernel saves again at its shutdown
        out["resave"] = second
        return out

    def fresh_rerun(self, kernel: str, tag: str) -> dict[str, Any]:
        argv = ["--WasmKernel.keep_state=False"] if kernel == WASM else []
        k = self._kernel(kernel, tag, argv=argv)
        try:
            took, each = self._run_workload(k, ROWS_50MB)
            frame, total = self._check(k)
        finally:
            wall = k.shutdown()
        return {"rerun_s": took, "cells_s": each, "frame_bytes": frame, "total": total, "shutdown_s": wall}

    def fresh_one_plus_one(self, kernel: str, tag: str) -> dict[str, Any]:
        argv = ["--WasmKernel.keep_state=False"] if kernel == WASM else []
        k = self._kernel(kernel, tag, argv=argv)
        try:
            out = k.start()
        finally:
            k.shutdown()
        return out

    def save_every(self, tag: str, every: int, with_workload: bool) -> dict[str, Any]:
        k = self._kernel(WASM, tag, argv=[f"--WasmKernel.state_save_every={every}"])
        try:
            t0, _ = k.launch()
            k.first_cell("x = 0", t0)
            if with_workload:
                for code in workload(ROWS_50MB):
                    k.run(code)
            for _ in range(WARMUP_CELLS):
                k.run("x = 1")
            lat = [k.run("x = 1") for _ in range(self.cells)]
        finally:
            k.shutdown()
        saves = parse_saves(k.log_text())
        periodic = saves[:-1]  # the last one is the shutdown's
        return {"reply_ms": [r["reply_s"] * 1000 for r in lat], "idle_ms": [r["idle_s"] * 1000 for r in lat],
                "periodic_saves": len(periodic), "periodic_save_s": [s["seconds"] for s in periodic],
                "periodic_save_bytes": [s["bytes"] for s in periodic]}


def one_round(bench: Bench, rnd: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"round": rnd, "warmup": rnd == 0, "loadavg": [round(x, 2) for x in os.getloadavg()]}
    r = f"r{rnd}"
    blocks: list[tuple[str, Any]] = [
        ("wasm_saved", lambda: bench.saved_and_resumed(f"{r}-saved", ROWS_50MB, resume=True)),
        ("wasm_rerun", lambda: bench.fresh_rerun(WASM, f"{r}-wasm-rerun")),
        ("native_rerun", lambda: bench.fresh_rerun(NATIVE, f"{r}-native-rerun")),
        ("wasm_1plus1", lambda: bench.fresh_one_plus_one(WASM, f"{r}-wasm-1p1")),
        ("native_1plus1", lambda: bench.fresh_one_plus_one(NATIVE, f"{r}-native-1p1")),
        ("wasm_saved_100", lambda: bench.saved_and_resumed(f"{r}-saved100", ROWS_100MB, resume=False)),
        ("every_1", lambda: bench.save_every(f"{r}-every1", 1, False)),
        ("every_0", lambda: bench.save_every(f"{r}-every0", 0, False)),
        ("every_1_w", lambda: bench.save_every(f"{r}-every1w", 1, True)),
        ("every_0_w", lambda: bench.save_every(f"{r}-every0w", 0, True)),
    ]
    if rnd % 2:
        blocks.reverse()
    entry["order"] = [name for name, _ in blocks]
    for name, block in blocks:
        entry[name] = block()
    entry["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return entry


def run_state(rounds: int = 3, cells: int = 20) -> tuple[list[Row], dict[str, Any]]:
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    missing = [k for k in (NATIVE, WASM) if k not in specs]
    if missing:
        raise SystemExit(f"kernelspec(s) not installed: {missing} (have {sorted(specs)})")
    base = Path(tempfile.mkdtemp(prefix="wk-bench-state-"))
    raw: dict[str, Any] = {"rounds": [], "cells": cells, "rows_50mb": ROWS_50MB, "rows_100mb": ROWS_100MB}
    try:
        bench = Bench(base, cells)
        for rnd in range(rounds + 1):  # round 0: warm-up, not counted
            e = one_round(bench, rnd)
            raw["rounds"].append(e)
            s = e["wasm_saved"]
            log(f"state round {rnd}{' (warm-up)' if not rnd else ''}: save {s['save_s']:.3f} s "
                f"{s['save_bytes'] / 1e6:.1f} MB (100 MB frame: {e['wasm_saved_100']['save_s']:.3f} s "
                f"{e['wasm_saved_100']['save_bytes'] / 1e6:.1f} MB); resume {s['resume_s']:.3f} s, "
                f"wasm re-run {e['wasm_rerun']['rerun_s']:.3f} s, "
                f"ipykernel re-run {e['native_rerun']['rerun_s']:.3f} s, "
                f"wasm 1+1 {e['wasm_1plus1']['first_result_s']:.3f} s; x = 1 every=1 "
                f"{median(e['every_1']['reply_ms']):.1f} ms vs {median(e['every_0']['reply_ms']):.1f} ms; "
                f"load {e['loadavg']}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows_from(raw), raw


# --- the table ----------------------------------------------------------------------------------


def _spread(xs: list[float]) -> str:
    return f"{fmt(min(xs))}-{fmt(max(xs))}" if xs else "-"


def _ratios(a: list[float], b: list[float]) -> str:
    """Round by round (the two figures of a round share the machine's noise of the moment)."""
    return " ".join(f"{x / y:.2f}" for x, y in zip(a, b) if y) or "-"


def rows_from(raw: dict[str, Any]) -> list[Row]:
    counted = [e for e in raw["rounds"] if not e["warmup"]]
    n = len(counted)

    def col(block: str, key: str) -> list[float]:
        return [e[block][key] for e in counted]

    rows: list[Row] = []
    save50, size50 = col("wasm_saved", "save_s"), [b / 1e6 for b in col("wasm_saved", "save_bytes")]
    save100, size100 = col("wasm_saved_100", "save_s"), [b / 1e6 for b in col("wasm_saved_100", "save_bytes")]
    frame50 = counted[0]["wasm_saved"]["frame_bytes"] / 1e6 if counted else math.nan
    frame100 = counted[0]["wasm_saved_100"]["frame_bytes"] / 1e6 if counted else math.nan
    rows.append(Row(AREA, f"save at shutdown, W ({frame50:.0f} MB frame): guest.hibernated", "s", median(save50),
                    note=f"{_spread(save50)} over {n} rounds; pages compared with the warm image, HMAC, write, fsync",
                    extra={"wasm": save50}))
    rows.append(Row(AREA, f"save at shutdown, W ({frame50:.0f} MB frame): state file", "MB", median(size50),
                    note=f"{_spread(size50)}; runs {counted[0]['wasm_saved']['save_runs'] if counted else '-'}",
                    extra={"wasm": size50}))
    sd_w, sd_n = col("wasm_saved", "shutdown_s"), col("native_rerun", "shutdown_s")
    rows.append(Row(AREA, "shutdown after W: request -> process gone", "s", median(sd_w), median(sd_n),
                    note=f"wasm {_spread(sd_w)} (save included), native {_spread(sd_n)} (ipykernel, nothing kept)",
                    extra={"wasm": sd_w, "native": sd_n}))
    rows.append(Row(AREA, f"save at shutdown, {frame100:.0f} MB frame: guest.hibernated", "s", median(save100),
                    target_max=TARGET_SAVE_S, note=f"{_spread(save100)} over {n} rounds; goal: <= 1 s for 100 MB",
                    extra={"wasm": save100}))
    rows.append(Row(AREA, f"save at shutdown, {frame100:.0f} MB frame: state file", "MB", median(size100),
                    note=f"{_spread(size100)}", extra={"wasm": size100}))
    sd100 = col("wasm_saved_100", "shutdown_s")
    rows.append(Row(AREA, f"shutdown after the {frame100:.0f} MB frame: request -> process gone", "s", median(sd100),
                    note=f"{_spread(sd100)}; jupyter_client's default wait before a kill: "
                         f"{JUPYTER_SHUTDOWN_WAIT_S:g} s",
                    extra={"wasm": sd100}))

    resume = [e["wasm_saved"]["resume_s"] for e in counted]
    rerun_w, rerun_n = col("wasm_rerun", "rerun_s"), col("native_rerun", "rerun_s")
    one_w, one_n = col("wasm_1plus1", "first_result_s"), col("native_1plus1", "first_result_s")
    rows.append(Row(AREA, "resume -> first result `total` | vs wasm fresh start -> first `1+1`", "s",
                    median(resume), median(one_w), target_max=TARGET_RESUME_RATIO, target_on="ratio",
                    note=f"native column: wasm-python, keep_state=False, start -> `1+1` ({_spread(one_w)}); "
                         f"resume {_spread(resume)}; per-round ratios {_ratios(resume, one_w)}",
                    extra={"wasm": resume, "native": one_w}))
    rows.append(Row(AREA, "resume -> first result `total` | vs wasm fresh start + re-run W", "s",
                    median(resume), median(rerun_w), target_max=TARGET_RESUME_RATIO, target_on="ratio",
                    note=f"native column: wasm-python, keep_state=False, start, W, `total` ({_spread(rerun_w)}); "
                         f"per-round ratios {_ratios(resume, rerun_w)}",
                    extra={"wasm": resume, "native": rerun_w}))
    rows.append(Row(AREA, "resume -> first result `total` | vs ipykernel start + re-run W", "s",
                    median(resume), median(rerun_n),
                    note=f"native: ipykernel, start, W, `total` ({_spread(rerun_n)}); "
                         f"per-round ratios {_ratios(resume, rerun_n)}",
                    extra={"wasm": resume, "native": rerun_n}))
    rows.append(Row(AREA, "fresh start + re-run W -> `total`", "s", median(rerun_w), median(rerun_n),
                    note=f"wasm {_spread(rerun_w)}, native {_spread(rerun_n)} over {n} rounds",
                    extra={"wasm": rerun_w, "native": rerun_n}))
    rows.append(Row(AREA, "fresh start -> first `1+1`", "s", median(one_w), median(one_n),
                    note=f"wasm {_spread(one_w)}, native {_spread(one_n)} over {n} rounds",
                    extra={"wasm": one_w, "native": one_n}))
    ki, ki_fresh = [e["wasm_saved"]["resume_kernel_info_s"] for e in counted], col("wasm_1plus1", "kernel_info_s")
    rows.append(Row(AREA, "resume: start -> kernel_info reply (state read and verified)", "s", median(ki),
                    median(ki_fresh), note=f"{_spread(ki)}; native column: wasm-python's fresh start "
                                           f"({_spread(ki_fresh)})", extra={"wasm": ki, "native": ki_fresh}))

    for suffix in ("", "_w"):
        sizes = [b for e in counted for b in e[f"every_1{suffix}"]["periodic_save_bytes"][-raw["cells"]:]]
        state_mb = f"{median(sizes) / 1e6:.0f} MB state" if sizes else "state -"
        label = f"fresh interpreter, {state_mb}" if not suffix else f"after W, {state_mb}"
        on = [median(e[f"every_1{suffix}"]["reply_ms"]) for e in counted]
        off = [median(e[f"every_0{suffix}"]["reply_ms"]) for e in counted]
        per_save = [s for e in counted for s in e[f"every_1{suffix}"]["periodic_save_s"]]
        rows.append(Row(AREA, f"`x = 1` back to back, state_save_every=1 vs 0 ({label})", "ms",
                        median(on), median(off),
                        note=f"median of {raw['cells']} cells per round, median over {n} rounds; native column: "
                             f"state_save_every=0; each periodic save {fmt(median(per_save)) if per_save else '-'} s",
                        extra={"wasm": on, "native": off, "periodic_save_s": per_save}))
    return rows


if __name__ == "__main__":
    from _common import print_table

    rows, _ = run_state(int(os.environ.get("ROUNDS", "1")))  # a quick look; run_all.py is the way
    print_table(rows)
