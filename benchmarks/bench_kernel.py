"""Kernel vs ipykernel: the installed wasm-python kernel and native ipykernel ("python3"),
side by side in one run, driven over jupyter_client as a frontend drives them.

    .venv/bin/python benchmarks/run_all.py --only kernel [--rounds 7] [--cells 200] [--prints 2]
                                                [--notebook-runs 2] [--no-reopen] [--json out.json]

Per round, each kernel in turn (the order alternates, A/B then B/A, so both share the
machine's noise):
1. start to first result: from `KernelManager.start_kernel()` to the execute_reply of
   the first `1+1`. The client does what a frontend does: a kernel_info_request as soon
   as the channels are up, then the cell. Time to the kernel_info_reply is recorded too,
   to separate "the kernel process is up" from "the first cell ran" (for wasm-python the
   sandbox opens in the background after kernel_info can answer). Every start is a fresh
   process; the compiled guest comes from the warm compile cache. wasm-python gets a
   scratch JUPYTER_DATA_DIR per round, so each start opens a brand-new session (new
   registry, workspace and history). With reopen on, wasm-python is started once more
   per round with the same notebook identity (JPY_SESSION_NAME) in one data dir kept
   across rounds: a notebook reopened.
2. `1+1` round trip: after 20 warm-up cells, `--cells` cells one after another, each
   timed from execute_request to execute_reply; the client waits for the status idle
   of a cell (untimed) before sending the next, as a frontend does.
3. printing 10,000 lines: `for i in range(10000): print(i)`, from the request to the
   status idle, with every stream message received (the text is checked: 10,000 lines);
   the number of stream messages is recorded.
Then, alternating too, `--notebook-runs` runs per kernel of the data-science example
(examples/02-data-science.ipynb) with nbclient, end to end: kernel start, every cell,
shutdown. For the native kernel, code cells that start with a wasm-kernel magic IPython
lacks (%files, %session, %limits, %cat, %rm, %prune, %undo) are skipped, and the output
says which.

Both kernels get the same environment: a scratch JUPYTER_DATA_DIR and IPYTHONDIR (so
nothing touches the user's sessions or IPython history), no JPY_SESSION_NAME. Round 0 is
a warm-up (file cache, IPython profile creation) and is not counted.

Targets (issue 4): wasm-python at most 2x ipykernel for start and for a `1+1` cell.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, Row, fmt, log, median, p90  # noqa: E402

NATIVE = "python3"
WASM = "wasm-python"
KERNELS = (NATIVE, WASM)
AREA = "kernel"
TARGET_RATIO = 2.0
NOTEBOOK = REPO / "examples" / "02-data-science.ipynb"
PRINT_CELL = "for i in range(10000): print(i)"
# File writes through every layer they cross: the disk quota's shadows, the
# file-change tracker and its display (a kernel shows the changed files).
FILES_CELL = ("import os\nos.makedirs('bench', exist_ok=True)\nchunk = b'x' * 65536\n"
              "with open('bench/big.bin', 'wb') as f:\n    for _ in range(800):\n        f.write(chunk)\n"
              "for i in range(500):\n    with open(f'bench/small-{i}.txt', 'w') as f:\n        f.write('y' * 100)")
PRINT_LINES = 10_000
WARMUP_CELLS = 20
TIMEOUT = 120.0
REOPEN_NOTEBOOK = "/bench/kernel-bench/reopened.ipynb"  # only its path is hashed; need not exist
WASM_ONLY_MAGICS = ("files", "session", "limits", "cat", "rm", "prune", "undo")
_WASM_MAGIC_RE = re.compile(r"%(" + "|".join(WASM_ONLY_MAGICS) + r")(\s|$)")


# --- one kernel, driven over zmq --------------------------------------------------------


class KernelFailed(RuntimeError):
    pass


class DrivenKernel:
    """A kernel started through its kernelspec, with a client that waits on the shell
    and iopub sockets together (zmq poll), so no polling interval adds to a figure."""

    def __init__(self, kernel_name: str, env: dict[str, str], cwd: Path, log_path: Path) -> None:
        from jupyter_client.manager import KernelManager

        self.kernel_name = kernel_name
        self.env = env
        self.cwd = cwd
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.km = KernelManager(kernel_name=kernel_name)
        self.kc: Any = None

    def start(self) -> dict[str, float]:
        """Start the process and run the first `1+1`; seconds from start_kernel() to
        the Popen returning, to the kernel_info_reply, and to the first execute_reply."""
        import zmq

        t0 = time.perf_counter()
        self.km.start_kernel(env=self.env, cwd=str(self.cwd), stdout=self._log, stderr=self._log)
        launched = time.perf_counter() - t0
        self.kc = self.km.client()
        self.kc.start_channels()
        self.poller = zmq.Poller()
        self.shell_sock = self.kc.shell_channel.socket
        self.iopub_sock = self.kc.iopub_channel.socket
        self.poller.register(self.shell_sock, zmq.POLLIN)
        self.poller.register(self.iopub_sock, zmq.POLLIN)
        info_id = self.kc.kernel_info()
        self._wait_shell(info_id, "kernel_info_reply")
        info = time.perf_counter() - t0
        first = self.first_result(t0)
        return {"launched_s": launched, "kernel_info_s": info, "first_result_s": first}

    def first_result(self, t0: float) -> float:
        """Seconds from t0 to the execute_reply of a `1+1` sent now."""
        first_id = self.kc.execute("1+1")
        reply = self._wait_shell(first_id, "execute_reply")
        took = time.perf_counter() - t0
        if reply["content"]["status"] != "ok":
            raise KernelFailed(f"{self.kernel_name}: first 1+1 failed: {reply['content']}\n{self.log_tail()}")
        # Untimed: the iopub subscription is up once a status message arrives; wait for
        # the first cell's idle (a late-joining SUB may have missed it: then probe).
        self._settle_iopub(first_id)
        return took

    def _wait_shell(self, msg_id: str, msg_type: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KernelFailed(f"{self.kernel_name}: no {msg_type} within {timeout} s\n{self.log_tail()}")
            if not self.shell_sock.poll(min(left, 1.0) * 1000):
                if not self.km.is_alive():
                    raise KernelFailed(f"{self.kernel_name}: kernel died\n{self.log_tail()}")
                continue
            msg = self.kc.shell_channel.get_msg(timeout=0)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == msg_type:
                return msg

    def _settle_iopub(self, msg_id: str) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                msg = self.kc.iopub_channel.get_msg(timeout=1.0)
            except Exception:  # queue.Empty: the idle was lost to the slow joiner; probe
                probe = self.kc.kernel_info()
                self._wait_shell(probe, "kernel_info_reply")
                msg_id = probe
                continue
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                return
        raise KernelFailed(f"{self.kernel_name}: iopub never delivered a status idle\n{self.log_tail()}")

    def run_cell(self, code: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Send one execute_request; seconds to its execute_reply and to its status idle
        (every iopub message of the cell received), and its iopub messages."""
        t0 = time.perf_counter()
        msg_id = self.kc.execute(code)
        reply_s = idle_s = None
        reply: dict[str, Any] | None = None
        outputs: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while reply_s is None or idle_s is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KernelFailed(f"{self.kernel_name}: {code!r} not done within {timeout} s\n{self.log_tail()}")
            events = dict(self.poller.poll(min(left, 1.0) * 1000))
            if not events:
                if not self.km.is_alive():
                    raise KernelFailed(f"{self.kernel_name}: kernel died\n{self.log_tail()}")
                continue
            if self.shell_sock in events:
                msg = self.kc.shell_channel.get_msg(timeout=0)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply_s = time.perf_counter() - t0
                    reply = msg
            if self.iopub_sock in events:
                while self.kc.iopub_channel.msg_ready():
                    msg = self.kc.iopub_channel.get_msg(timeout=0)
                    if msg["parent_header"].get("msg_id") != msg_id:
                        continue
                    if msg["msg_type"] == "status":
                        if msg["content"]["execution_state"] == "idle":
                            idle_s = time.perf_counter() - t0
                    elif msg["msg_type"] != "execute_input":
                        outputs.append(msg)
        assert reply is not None
        if reply["content"]["status"] != "ok":
            raise KernelFailed(f"{self.kernel_name}: {code!r} failed: {reply['content']} {outputs[-3:]}")
        return {"reply_s": reply_s, "idle_s": idle_s, "outputs": outputs}

    def shutdown(self) -> float:
        t0 = time.perf_counter()
        try:
            if self.kc is not None:
                self.kc.stop_channels()
            self.km.shutdown_kernel(now=False)
        finally:
            self._log.close()
        return time.perf_counter() - t0

    def log_tail(self) -> str:
        try:
            self._log.flush()
            return "--- kernel log tail ---\n" + self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


# --- the per-round measurements ---------------------------------------------------------


def one_round(kernel: str, env: dict[str, str], scratch: Path, cells: int, prints: int) -> dict[str, Any]:
    """Start, 1+1 latency and printing, for one kernel, in one fresh process."""
    cwd = scratch / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    k = DrivenKernel(kernel, env, cwd, scratch / f"{kernel}.log")
    out: dict[str, Any] = {"loadavg": [round(x, 2) for x in os.getloadavg()]}
    try:
        out.update(k.start())
        first = k.run_cell("1+1")
        results = [m["content"]["data"]["text/plain"] for m in first["outputs"] if m["msg_type"] == "execute_result"]
        if results != ["2"]:
            raise KernelFailed(f"{kernel}: 1+1 gave {results!r}")
        for _ in range(WARMUP_CELLS):
            k.run_cell("1+1")
        lat = [k.run_cell("1+1") for _ in range(cells)]
        out["cell_reply_ms"] = [r["reply_s"] * 1000 for r in lat]
        out["cell_idle_ms"] = [r["idle_s"] * 1000 for r in lat]
        out["print"] = []
        for _ in range(prints):
            r = k.run_cell(PRINT_CELL)
            streams = [m for m in r["outputs"] if m["msg_type"] == "stream"]
            text = "".join(m["content"]["text"] for m in streams if m["content"]["name"] == "stdout")
            lines = text.splitlines()
            if len(lines) != PRINT_LINES or lines[-1] != str(PRINT_LINES - 1):
                raise KernelFailed(f"{kernel}: printing gave {len(lines)} lines, last {lines[-1:]!r}")
            out["print"].append({"idle_s": r["idle_s"], "reply_s": r["reply_s"], "stream_messages": len(streams)})
        out["files"] = []
        for _ in range(prints):
            out["files"].append(k.run_cell(FILES_CELL)["idle_s"])  # run_cell raises if it failed
    finally:
        out["shutdown_s"] = k.shutdown()
    return out


def reopen_round(env: dict[str, str], scratch: Path) -> dict[str, Any]:
    """wasm-python with the same notebook identity as every other reopen round."""
    cwd = scratch / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    k = DrivenKernel(WASM, {**env, "JPY_SESSION_NAME": REOPEN_NOTEBOOK}, cwd, scratch / "wasm-reopen.log")
    try:
        out = k.start()
        out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        out_shutdown = k.shutdown()
    out["shutdown_s"] = out_shutdown
    return out


# --- the data-science notebook with nbclient ----------------------------------------------


def wasm_only_magic(source: str) -> str | None:
    """The wasm-kernel magic a cell starts with, if IPython lacks it (comments and blank
    lines before it are skipped)."""
    for line in source.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _WASM_MAGIC_RE.match(s)
        return "%" + m.group(1) if m else None
    return None


def notebook_for(kernel: str, nb: Any) -> tuple[Any, list[str]]:
    nb = copy.deepcopy(nb)
    skipped: list[str] = []
    if kernel == NATIVE:
        kept = []
        for i, cell in enumerate(nb.cells):
            magic = wasm_only_magic(cell.source) if cell.cell_type == "code" else None
            if magic:
                skipped.append(f"cell {i}: {cell.source.strip().splitlines()[0][:60]}")
            else:
                kept.append(cell)
        nb.cells = kept
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    return nb, skipped


def _cell_seconds(cell: Any) -> float | None:
    ex = cell.get("metadata", {}).get("execution", {})
    try:
        a = datetime.fromisoformat(ex["iopub.status.busy"])
        b = datetime.fromisoformat(ex["iopub.status.idle"])
    except (KeyError, ValueError):
        return None
    return (b - a).total_seconds()


def run_notebook(kernel: str, nb: Any, env: dict[str, str], scratch: Path) -> dict[str, Any]:
    from nbclient import NotebookClient

    nb_k, skipped = notebook_for(kernel, nb)
    cwd = scratch / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb_k, timeout=600, kernel_name=kernel, record_timing=True,
                            resources={"metadata": {"path": str(cwd)}})
    out: dict[str, Any] = {"skipped_cells": skipped, "loadavg": [round(x, 2) for x in os.getloadavg()]}
    t0 = time.perf_counter()
    try:
        client.execute(env=env)
        out["status"] = "ok"
    except Exception as err:  # a failed notebook is a row with the error, not a crash
        out["status"] = f"error: {type(err).__name__}: {str(err).strip().splitlines()[-1][:300] if str(err).strip() else ''}"
    out["wall_s"] = time.perf_counter() - t0
    cell_s = [_cell_seconds(c) for c in nb_k.cells if c.cell_type == "code"]
    out["cells"] = len(cell_s)
    out["cells_s"] = [s for s in cell_s]
    out["cells_total_s"] = sum(s for s in cell_s if s is not None)
    kinds: dict[str, int] = {}
    for c in nb_k.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            key = o["output_type"]
            if key in ("display_data", "execute_result"):
                data = o.get("data", {})
                key = "png" if "image/png" in data else "html" if "text/html" in data else key
            kinds[key] = kinds.get(key, 0) + 1
    out["outputs"] = kinds
    return out


# --- the whole benchmark -----------------------------------------------------------------


def _spread(xs: list[float], unit_scale: float = 1.0) -> str:
    if not xs:
        return "-"
    return f"{fmt(min(xs) * unit_scale)}-{fmt(max(xs) * unit_scale)}"


def kernel_env(base: Path, bytecode: bool = True) -> dict[str, str]:
    """The environment both kernels start with: ours minus JPY_SESSION_NAME, a scratch
    IPYTHONDIR, and (bytecode) compiled .pyc files kept in a scratch
    PYTHONPYCACHEPREFIX even if PYTHONDONTWRITEBYTECODE is set here, as an installed
    wheel has them; the warm-up round writes them for both kernels."""
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    env["IPYTHONDIR"] = str(base / "ipython")
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    return env


def alternating_rounds(
    area: str, rounds: int, base: Path, common: dict[str, str],
    run: Callable[[str, dict[str, str], Path], dict[str, Any]], shown: Callable[[dict[str, Any]], str],
    wasm_config: str = "",
) -> list[dict[str, Any]]:
    """Round 0 a warm-up, then `rounds` counted: each kernel in turn, the order
    alternating, each run(kernel, env, scratch) in a scratch folder of its own with its
    own data dir; wasm-python with `wasm_config` as its jupyter_config.py, if any.
    shown(one run's figures) is what the round's log line says of each kernel."""
    done = []
    for rnd in range(rounds + 1):
        order = (NATIVE, WASM) if rnd % 2 == 0 else (WASM, NATIVE)
        entry: dict[str, Any] = {"round": rnd, "warmup": rnd == 0}
        for kernel in order:
            scratch = base / f"r{rnd}-{kernel}"
            scratch.mkdir()
            env = {**common, "JUPYTER_DATA_DIR": str(scratch / "data")}
            if kernel == WASM and wasm_config:
                config = scratch / "config"
                config.mkdir()
                (config / "jupyter_config.py").write_text(wasm_config)
                env["JUPYTER_CONFIG_DIR"] = str(config)
            entry[kernel] = run(kernel, env, scratch)
        done.append(entry)
        log(f"{area} round {rnd}{' (warm-up)' if not rnd else ''}: " + ", ".join(f"{k} {shown(entry[k])}" for k in order))
    return done


def paired_rows(area: str, raw: dict[str, Any], metrics: list[tuple[str, str]], note: str) -> list[Row]:
    """One row per (key, name) of `metrics`: the median over the counted rounds (not
    the warm-up) of each kernel's seconds, in ms, wasm-python beside ipykernel."""
    counted = [r for r in raw["rounds"] if not r["warmup"]]
    rows = []
    for key, name in metrics:
        guest = median([r[WASM][key] for r in counted]) * 1000
        native = median([r[NATIVE][key] for r in counted]) * 1000
        rows.append(Row(area, name, "ms", guest, native, target_on="ratio", note=f"median of {len(counted)}; {note}"))
    return rows


def run_kernel(rounds: int = 7, cells: int = 200, prints: int = 2, notebook_runs: int = 2,
               reopen: bool = True, wait_notebook_s: float = 0.0, bytecode: bool = True,
               start_rounds: int = 24) -> tuple[list[Row], dict[str, Any]]:
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    missing = [k for k in KERNELS if k not in specs]
    if missing:
        raise SystemExit(f"kernelspec(s) not installed: {missing} (have {sorted(specs)})")
    from wasm_kernel.host.module_cache import is_guest_cached

    if not is_guest_cached():
        raise SystemExit("the compiled guest is not cached: run `.venv/bin/wasm-kernel precompile` first "
                         "(the start figure is for a warm cache)")

    base = Path(tempfile.mkdtemp(prefix="wk-bench-kernel-"))
    common = kernel_env(base, bytecode)
    reopen_data = base / "reopen-data"
    raw: dict[str, Any] = {"rounds": [], "notebook": {}, "scratch": str(base), "bytecode_cache": bytecode,
                           "env_PYTHONDONTWRITEBYTECODE": common.get("PYTHONDONTWRITEBYTECODE")}
    try:
        for rnd in range(rounds + 1):  # round 0: warm-up, not counted
            order = KERNELS if rnd % 2 == 0 else KERNELS[::-1]
            entry: dict[str, Any] = {"round": rnd, "warmup": rnd == 0, "order": list(order)}
            for kernel in order:
                scratch = base / f"r{rnd}-{kernel}"
                env = {**common, "JUPYTER_DATA_DIR": str(scratch / "data")}
                entry[kernel] = one_round(kernel, env, scratch, cells if rnd else 30, prints if rnd else 1)
            if reopen:
                env = {**common, "JUPYTER_DATA_DIR": str(reopen_data)}
                entry["wasm_reopen"] = reopen_round(env, base / f"r{rnd}-reopen")
            raw["rounds"].append(entry)
            e = entry
            log(f"round {rnd}{' (warm-up)' if not rnd else ''}: start->first result "
                f"native {e[NATIVE]['first_result_s']:.3f} s, wasm {e[WASM]['first_result_s']:.3f} s"
                + (f" (reopen {e['wasm_reopen']['first_result_s']:.3f} s)" if reopen else "")
                + f"; 1+1 median native {median(e[NATIVE]['cell_reply_ms']):.2f} ms, "
                f"wasm {median(e[WASM]['cell_reply_ms']):.2f} ms; "
                f"print native {e[NATIVE]['print'][0]['idle_s']:.3f} s, wasm {e[WASM]['print'][0]['idle_s']:.3f} s; "
                f"load {e[NATIVE]['loadavg']}")

        # Starts alone, alternating: one start moves 10-30% between runs of the same code
        # on this 2-core machine, so the start figure is the median of these and the
        # full rounds' starts (the ratio of 7 starts each moved 1.05x-1.39x).
        raw["start_only"] = []
        for rnd in range(start_rounds):
            entry = {}
            for kernel in (KERNELS if rnd % 2 == 0 else KERNELS[::-1]):
                scratch = base / f"s{rnd}-{kernel}"
                (scratch / "cwd").mkdir(parents=True)
                env = {**common, "JUPYTER_DATA_DIR": str(scratch / "data")}
                k = DrivenKernel(kernel, env, scratch / "cwd", scratch / f"{kernel}.log")
                try:
                    entry[kernel] = k.start()
                finally:
                    k.shutdown()
            raw["start_only"].append(entry)
        if start_rounds:
            log(f"{start_rounds} start-only rounds: start->first result median native "
                f"{median([e[NATIVE]['first_result_s'] for e in raw['start_only']]):.3f} s, wasm "
                f"{median([e[WASM]['first_result_s'] for e in raw['start_only']]):.3f} s")

        nb = None
        waited = 0.0
        while notebook_runs:
            if NOTEBOOK.exists():
                import nbformat

                try:
                    nb = nbformat.read(NOTEBOOK, as_version=4)
                    break
                except Exception as err:  # being written: try again
                    log(f"{NOTEBOOK.name} not readable yet: {err}")
            if waited >= wait_notebook_s:
                break
            log(f"{NOTEBOOK.relative_to(REPO)} is not there yet; waiting (up to {wait_notebook_s:.0f} s)")
            time.sleep(min(120.0, wait_notebook_s - waited))
            waited += 120.0
        if not notebook_runs:
            raw["notebook"] = {"not_run": "--notebook-runs 0"}
        elif nb is None:
            raw["notebook"] = {"not_run": f"{NOTEBOOK} does not exist"}
        else:
            runs: dict[str, list[dict[str, Any]]] = {NATIVE: [], WASM: []}
            warmup: dict[str, dict[str, Any]] = {}
            # Run 0 of each kernel is a warm-up, not counted (matplotlib's font cache on
            # the host, the page cache for the guest's numpy/pandas).
            for i in range(notebook_runs + 1 if notebook_runs else 0):
                for kernel in (KERNELS if i % 2 == 0 else KERNELS[::-1]):
                    scratch = base / f"nb{i}-{kernel}"
                    env = {**common, "JUPYTER_DATA_DIR": str(scratch / "data")}
                    r = run_notebook(kernel, nb, env, scratch)
                    if i == 0:
                        warmup[kernel] = r
                    else:
                        runs[kernel].append(r)
                    log(f"notebook run {i}{' (warm-up)' if not i else ''} on {kernel}: {r['status']}, "
                        f"{r['wall_s']:.2f} s wall, cells {r['cells_total_s']:.2f} s"
                        + (f", skipped {len(r['skipped_cells'])}" if r["skipped_cells"] else ""))
            raw["notebook"] = {"path": str(NOTEBOOK.relative_to(REPO)), "runs": runs, "warmup": warmup}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows_from(raw, rounds, cells, reopen), raw


def rows_from(raw: dict[str, Any], rounds: int, cells: int, reopen: bool) -> list[Row]:
    counted = [e for e in raw["rounds"] if not e["warmup"]]

    def per_round(kernel: str, key: str) -> list[float]:
        return [e[kernel][key] for e in counted]

    rows: list[Row] = []
    n = len(counted)

    def pair(name: str, unit: str, nat: list[float], wasm: list[float], scale: float = 1.0, target: bool = False,
             note: str = "", stat: Any = median, over: str = "rounds") -> None:
        rows.append(Row(
            AREA, name, unit, stat(wasm) * scale if wasm else None, stat(nat) * scale if nat else None,
            target_max=TARGET_RATIO if target else None, target_on="ratio",
            note=(f"wasm {_spread(wasm, scale)}, native {_spread(nat, scale)} over {len(wasm)} {over}" + (f"; {note}" if note else "")),
            extra={"wasm": wasm, "native": nat},
        ))

    starts = counted + raw.get("start_only", [])  # every start, in alternating order

    def per_start(kernel: str, key: str) -> list[float]:
        return [e[kernel][key] for e in starts]

    ns = len(starts)
    pair("start -> first 1+1 result (fresh session)", "s", per_start(NATIVE, "first_result_s"),
         per_start(WASM, "first_result_s"), target=True, over="starts",
         note=f"median of {ns} fresh processes each ({n} full rounds and {ns - n} start-only ones)")
    pair("start -> kernel_info reply", "s", per_start(NATIVE, "kernel_info_s"), per_start(WASM, "kernel_info_s"),
         over="starts")
    pair("kernel_info reply -> first 1+1 reply", "s",
         [e[NATIVE]["first_result_s"] - e[NATIVE]["kernel_info_s"] for e in starts],
         [e[WASM]["first_result_s"] - e[WASM]["kernel_info_s"] for e in starts], over="starts")
    if reopen:
        re_ = [e["wasm_reopen"]["first_result_s"] for e in counted]
        nat = per_round(NATIVE, "first_result_s")
        rows.append(Row(AREA, "start -> first 1+1 result (reopened notebook)", "s", median(re_), median(nat),
                        note=f"wasm {_spread(re_)} over {len(re_)} rounds; native: the fresh start above (no sessions)",
                        extra={"wasm": re_, "native": nat}))
    cell_med = {k: [median(e[k]["cell_reply_ms"]) for e in counted] for k in KERNELS}
    cell_p90 = {k: [p90(e[k]["cell_reply_ms"]) for e in counted] for k in KERNELS}
    idle_med = {k: [median(e[k]["cell_idle_ms"]) for e in counted] for k in KERNELS}
    pair(f"1+1 request -> reply, median of {cells}", "ms", cell_med[NATIVE], cell_med[WASM], target=True,
         note="median of the per-round medians")
    pair(f"1+1 request -> reply, p90 of {cells}", "ms", cell_p90[NATIVE], cell_p90[WASM],
         note="median of the per-round p90s")
    pair("1+1 request -> status idle, median", "ms", idle_med[NATIVE], idle_med[WASM])
    pr = {k: [p["idle_s"] for e in counted for p in e[k]["print"]] for k in KERNELS}
    msgs = {k: [p["stream_messages"] for e in counted for p in e[k]["print"]] for k in KERNELS}
    pair("print 10,000 lines: request -> idle", "s", pr[NATIVE], pr[WASM],
         over=f"prints ({len(pr[WASM]) // max(1, n)} per round)")
    rows.append(Row(AREA, "print 10,000 lines: stream messages", "msgs", median(msgs[WASM]), median(msgs[NATIVE]),
                    note=f"wasm {_spread(msgs[WASM])}, native {_spread(msgs[NATIVE])}",
                    extra={"wasm": msgs[WASM], "native": msgs[NATIVE]}))
    files = {k: [t for e in counted for t in e[k].get("files", [])] for k in KERNELS}
    if files[WASM]:
        pair("write 50 MiB + 500 small files: request -> idle", "s", files[NATIVE], files[WASM],
             over=f"runs ({len(files[WASM]) // max(1, n)} per round)")
    pair("shutdown_kernel(now=False)", "s", per_round(NATIVE, "shutdown_s"), per_round(WASM, "shutdown_s"))

    nbraw = raw["notebook"]
    if "not_run" in nbraw:
        rows.append(Row(AREA, "data-science notebook, nbclient end to end", "s", None, None,
                        note=f"not run: {nbraw['not_run']}"))
    else:
        runs = nbraw["runs"]
        ok = {k: [r for r in runs[k] if r["status"] == "ok"] for k in KERNELS}
        errors = {k: sorted({r["status"] for r in runs[k] if r["status"] != "ok"}) for k in KERNELS}
        skipped = runs[NATIVE][0]["skipped_cells"] if runs[NATIVE] else []
        outs = {k: (runs[k][-1].get("outputs") if runs[k] else None) for k in KERNELS}
        note = f"outputs of the last run: wasm {outs[WASM]}, native {outs[NATIVE]}"
        if skipped:
            note += f"; native skips {len(skipped)} wasm-only magic cell(s): " + "; ".join(skipped)
        for k in KERNELS:
            if errors[k]:
                note += f"; {k} FAILED: {' | '.join(errors[k])}"
        pair("data-science notebook, nbclient end to end", "s",
             [r["wall_s"] for r in ok[NATIVE]], [r["wall_s"] for r in ok[WASM]], note=note, over="runs")
        pair("data-science notebook, sum of cell busy->idle", "s",
             [r["cells_total_s"] for r in ok[NATIVE]], [r["cells_total_s"] for r in ok[WASM]],
             note="native runs fewer cells" if skipped else "", over="runs")
    return rows


def print_notes(rows: list[Row], raw: dict[str, Any]) -> None:
    """What the kernel table's rows need said beside them."""
    for r in rows:
        if r.note:
            print(f"- {r.name}: {r.note}")
    for k, runs in raw["notebook"].get("runs", {}).items():
        for r in runs:
            if r["skipped_cells"]:
                print(f"- notebook on {k}: skipped (wasm-kernel magics IPython lacks): {', '.join(r['skipped_cells'])}")
                break
    print(f"- per-round load: {[e[NATIVE]['loadavg'][0] for e in raw['rounds']]}")
