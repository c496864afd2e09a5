"""A class starts at once (issue 40, item 6): N notebooks opened within a minute on one
host, through a real Jupyter Server and through the pool's host, beside ipykernel.

    .venv/bin/python benchmarks/run_all.py --only class [--notebooks 40] [--class-cells 200]
        [--spread 60] [--no-pool] [--short] [--json out.json]

Three parts, all real processes:

- server: a Jupyter Server from this environment (its wasm-kernel server extension
  enabled, as `pip install` leaves it) whose root holds N notebooks, each in a folder
  of its own with a data file (class/student-NN/lesson.ipynb and data.csv). Each
  notebook is opened as JupyterLab opens one (POST /api/sessions, the kernel's
  websocket, kernel_info), at evenly spread moments within `spread` seconds (0: all at
  once), and its first cell reads its own data file. The figure is the time from the
  POST to that cell's execute_result. The same class runs again on a fresh server
  with ipykernel's `python3` kernel, the oracle.
- cells: the N kernels of each run then run `cells` - 1 more small cells each, all at
  once (a list append, a numpy sum, a sum over the list); the RSS of each kernel's
  process tree (itself and its children, /proc) after its first cell and after its
  last, the growth per kernel, and the server's whole tree (every kernel in it).
- pool: Redis, one `wasm-kernel host` (capacity N, the default 2 s heartbeat), the
  sandbox manager, the router, and a Jupyter Server that uses the router as its
  gateway (as a course hub's single-user servers do); the same N opens and first
  cells. The host serves wasm-python only, so there is no ipykernel run of the pool:
  its ratio is against the server part's ipykernel. The kernels run on the host, not
  beside the gateway server's notebooks, so the pool's first cell writes and reads a
  file of its own instead of a data file beside the notebook.

A notebook counts as failed when its open or first cell raised or timed out, or its
cell answered something else than its own data; a kernel as died when the server
restarted it or reports it dead, or its process is gone. p99 is interpolated
(linear, as numpy.percentile): with 40 samples it lies between the two slowest.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the servers' and the pool's process helpers

from _common import Row, log, rss_kib  # noqa: E402
from support.jupyter_server_client import JupyterServer, KernelChannels, empty_notebook  # noqa: E402

WASM = "wasm-python"
NATIVE = "python3"
ROWS_PER_FILE = 100
OPEN_TIMEOUT_S = 300.0  # one notebook's open and first cell; past it, that notebook failed
CELL_TIMEOUT_S = 120.0
HEARTBEAT_S = 2.0  # the host's default (SandboxHost.heartbeat_seconds)
SHORT = {"notebooks": 6, "cells": 20, "spread": 10.0}


def first_cell(with_data_file: bool) -> str:
    if with_data_file:  # the notebook's own data file, beside it in the server's root
        return ("import csv\nxs = []\nrows = list(csv.DictReader(open('data.csv')))\n"
                "len(rows), sum(int(r['score']) for r in rows)")
    return "xs = []\nopen('first.txt', 'w').write('x' * 10)\nlen(open('first.txt').read())"


def expected_first(student: int, with_data_file: bool) -> str:
    if not with_data_file:
        return "10"
    return repr((ROWS_PER_FILE, sum(_score(student, k) for k in range(ROWS_PER_FILE))))


def _score(student: int, k: int) -> int:
    return student * 1000 + k  # each student's sum differs: a cell that read another's file fails


def later_cell(i: int) -> tuple[str, str | None]:
    """(code, expected text/plain) of cell i (2, 3, ...): small cells a student types."""
    kind = i % 3
    if kind == 0:
        return f"xs.append({i})\nlen(xs)", None
    if kind == 1:
        return "import numpy as np\nint(np.arange(1000).sum())", "499500"
    return "sum(xs)", None


def make_class(root: Path, notebooks: int) -> list[str]:
    """N notebooks under root, each in a folder of its own with its data file; their
    server paths."""
    import json

    paths = []
    for s in range(notebooks):
        folder = root / "class" / f"student-{s:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "lesson.ipynb").write_text(json.dumps(empty_notebook()))
        (folder / "data.csv").write_text("name,score\n" + "".join(
            f"row{k},{_score(s, k)}\n" for k in range(ROWS_PER_FILE)))
        paths.append(f"class/student-{s:02d}/lesson.ipynb")
    return paths


@dataclass
class Notebook:
    """One student's notebook: what its open measured, and its kernel."""

    index: int
    path: str
    kernel_id: str = ""
    session_id: str = ""
    channels: KernelChannels | None = None
    first_result_s: float | None = None
    failure: str = ""
    pid: int | None = None
    rss_first_kib: int | None = None
    rss_last_kib: int | None = None
    cells_ok: int = 0
    cell_seconds: list[float] = field(default_factory=list)


def _tree_memory(pid: int) -> dict[str, int]:
    """VmRSS and Pss summed over pid and its descendants (KiB)."""
    total = {"rss": 0, "pss": 0}
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return total
    for proc in procs:
        try:
            got = rss_kib(proc.pid)
        except OSError:  # ended between the listing and the read
            continue
        total["rss"] += got.get("VmRSS", 0)
        total["pss"] += got.get("Pss", 0)
    return total


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


class _Opening:
    """Tells the opened notebooks when the whole class is open; until then each keeps
    reading its websocket, as JupyterLab does: websocket-client answers the server's
    pings only inside recv(), and a socket left unread for a minute or two is closed
    by the server (its ping timeout)."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.lock = threading.Lock()
        self.all_open = threading.Event()

    def done(self) -> None:
        with self.lock:
            self.left -= 1
            if self.left == 0:
                self.all_open.set()

    def wait(self, nb: Notebook) -> None:
        import websocket

        while not self.all_open.is_set():
            if nb.channels is None or nb.failure:
                self.all_open.wait()
                return
            try:
                nb.channels.ws.settimeout(0.5)
                nb.channels.ws.recv()  # a late status or stream of the first cell: not needed
            except websocket.WebSocketTimeoutException:
                pass
            except Exception as err:
                nb.failure = f"websocket lost while the class opened: {_one_line(err)}"


def _open_and_wait(server: JupyterServer, nb: Notebook, kernel: str, at: float, with_data_file: bool,
                   opening: _Opening) -> None:
    try:
        _open(server, nb, kernel, at, with_data_file)
    finally:
        opening.done()
    opening.wait(nb)


def _open(server: JupyterServer, nb: Notebook, kernel: str, at: float, with_data_file: bool) -> None:
    """Open nb at monotonic time `at` as JupyterLab does and run its first cell."""
    time.sleep(max(0.0, at - time.monotonic()))
    start = time.monotonic()
    try:
        name = nb.path.rsplit("/", 1)[-1]
        # The client waits as long as the whole open may take: a slow answer under load
        # is a figure, not a failure.
        model = server.post("/api/sessions", {"path": nb.path, "type": "notebook", "name": name,
                                              "kernel": {"name": kernel}}, timeout=OPEN_TIMEOUT_S)
        nb.kernel_id, nb.session_id = model["kernel"]["id"], model["id"]
        nb.channels = server.connect(nb.kernel_id, timeout=OPEN_TIMEOUT_S)
        nb.channels.kernel_info(timeout=OPEN_TIMEOUT_S)
        code = first_cell(with_data_file)
        msg_id = nb.channels.start_execute(code)
        left = OPEN_TIMEOUT_S - (time.monotonic() - start)
        ex = nb.channels.wait_for(msg_id, code, timeout=max(1.0, left),
                                  until=lambda m: m["msg_type"] in ("execute_result", "error"))
        got = ex.result()
        nb.first_result_s = time.monotonic() - start
        want = expected_first(nb.index, with_data_file)
        if got != want:
            nb.failure = f"first cell answered {got!r}, not {want!r}: {ex.describe()[:300]}"
    except Exception as err:
        nb.failure = _one_line(err)


def open_class(server: JupyterServer, paths: list[str], kernel: str, spread_s: float,
               with_data_file: bool) -> list[Notebook]:
    """Every notebook opened at evenly spread moments within spread_s; joined."""
    notebooks = [Notebook(i, p) for i, p in enumerate(paths)]
    t0 = time.monotonic() + 0.5
    step = spread_s / len(paths) if spread_s > 0 else 0.0
    opening = _Opening(len(notebooks))
    threads = [threading.Thread(target=_open_and_wait, args=(server, nb, kernel, t0 + i * step, with_data_file,
                                                             opening), name=f"open-{i}")
               for i, nb in enumerate(notebooks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return notebooks


def _run_cells(nb: Notebook, cells: int) -> None:
    assert nb.channels is not None
    try:
        for i in range(2, cells + 1):
            code, want = later_cell(i)
            ex = nb.channels.execute(code, timeout=CELL_TIMEOUT_S)
            nb.cell_seconds.append(ex.seconds)
            if ex.status != "ok" or (want is not None and ex.result() != want):
                nb.failure = f"cell {i} {code!r}: {ex.describe()[:300]}"
                return
            nb.cells_ok += 1
    except Exception as err:
        nb.failure = f"cell {nb.cells_ok + 2}: {_one_line(err)}"


def run_cells(notebooks: list[Notebook], cells: int) -> None:
    live = [nb for nb in notebooks if not nb.failure]
    threads = [threading.Thread(target=_run_cells, args=(nb, cells), name=f"cells-{nb.index}") for nb in live]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _kernel_pids(server: JupyterServer, notebooks: list[Notebook]) -> None:
    """Each kernel's process, by the kernel id its connection file names (one scan)."""
    procs = server.kernel_processes()
    for nb in notebooks:
        for proc in procs:
            try:
                if nb.kernel_id and any(nb.kernel_id in part for part in proc.cmdline()):
                    nb.pid = proc.pid
                    break
            except psutil.NoSuchProcess:
                continue


def deaths(server_log: str, kernels: list[dict[str, Any]], notebooks: list[Notebook],
           check_pids: bool) -> dict[str, Any]:
    """What the server saw of kernels dying: restarts in its log, kernels it reports
    dead or no longer lists, processes gone, tracebacks the kernels printed."""
    states = {k["id"]: k.get("execution_state") for k in kernels}
    opened = [nb for nb in notebooks if nb.kernel_id]
    gone = [nb.index for nb in opened if nb.kernel_id not in states]
    dead = [nb.index for nb in opened if states.get(nb.kernel_id) == "dead"]
    no_process = [nb.index for nb in opened if check_pids and (nb.pid is None or not psutil.pid_exists(nb.pid))]
    return {
        "restarts_in_log": server_log.count("KernelRestarter: restarting kernel"),
        "died_in_log": server_log.count("died unexpectedly") + server_log.count("KernelRestarter: restart failed"),
        "tracebacks_in_log": server_log.count("Traceback (most recent call last)"),
        "not_listed": gone, "dead": dead, "no_process": no_process,
    }


def _died(d: dict[str, Any]) -> int:
    return len(set(d["not_listed"]) | set(d["dead"]) | set(d["no_process"])) + d["restarts_in_log"]


def close_class(server: JupyterServer, notebooks: list[Notebook]) -> float:
    """DELETE every session at once (each waits for its kernel's shutdown); seconds."""
    start = time.monotonic()

    def close(nb: Notebook) -> None:
        try:
            if nb.channels is not None:
                nb.channels.close()
            if nb.session_id:
                server.request("DELETE", f"/api/sessions/{nb.session_id}", expect=(204,), timeout=OPEN_TIMEOUT_S)
        except Exception as err:
            log(f"class: closing {nb.path}: {_one_line(err)}")

    threads = [threading.Thread(target=close, args=(nb,)) for nb in notebooks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - start


def percentile(xs: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy.percentile's default)."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(notebooks: list[Notebook]) -> dict[str, Any]:
    times = [nb.first_result_s for nb in notebooks if nb.first_result_s is not None and not nb.failure.startswith(
        "first cell")]
    return {
        "answered": len(times), "failed": [f"{nb.path}: {nb.failure}" for nb in notebooks if nb.failure],
        "p50_s": percentile(times, 0.5), "p99_s": percentile(times, 0.99),
        "max_s": max(times) if times else None, "samples_s": [round(t, 3) for t in times],
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def server_class(base: Path, kernel: str, notebooks: int, cells: int, spread_s: float) -> dict[str, Any]:
    """One class on a fresh Jupyter Server: opens, first cells, the later cells, RSS."""
    root = base / "root"
    root.mkdir(parents=True)
    paths = make_class(root, notebooks)
    server = JupyterServer(base, root)
    out: dict[str, Any] = {"kernel": kernel, "load_at_start": _load()}
    try:
        log(f"class: {notebooks} {kernel} notebooks on a Jupyter Server within {spread_s:g} s")
        opened = open_class(server, paths, kernel, spread_s, with_data_file=True)
        out["open"] = summary(opened)
        out["load_after_open"] = _load()
        _kernel_pids(server, opened)
        for nb in opened:
            if nb.pid is not None:
                nb.rss_first_kib = _tree_memory(nb.pid)["rss"]
        out["server_tree_after_first_kib"] = _tree_memory(server.proc.pid)
        log(f"class: {kernel}: first results p50 {_s(out['open']['p50_s'])}, p99 {_s(out['open']['p99_s'])}, "
            f"{len(out['open']['failed'])} failed; now {cells - 1} more cells each")
        started = time.monotonic()
        run_cells(opened, cells)
        out["cells_seconds"] = round(time.monotonic() - started, 1)
        out["load_after_cells"] = _load()
        for nb in opened:
            if nb.pid is not None and not nb.failure:
                nb.rss_last_kib = _tree_memory(nb.pid)["rss"]
        out["server_tree_after_last_kib"] = _tree_memory(server.proc.pid)
        growth = [(nb.rss_last_kib - nb.rss_first_kib) / 1024 for nb in opened
                  if nb.rss_first_kib is not None and nb.rss_last_kib is not None]
        per_cell = [s for nb in opened for s in nb.cell_seconds]
        out["cells"] = {
            "ran": sum(nb.cells_ok for nb in opened), "expected": notebooks * (cells - 1),
            "failed": [f"{nb.path}: {nb.failure}" for nb in opened if nb.failure and nb.first_result_s is not None
                       and nb.failure.startswith("cell")],
            "rss_first_mib": [round(nb.rss_first_kib / 1024, 1) for nb in opened if nb.rss_first_kib],
            "rss_growth_mib": [round(g, 1) for g in growth],
            "rss_growth_p50_mib": percentile(growth, 0.5), "rss_growth_max_mib": max(growth) if growth else None,
            "cell_p50_ms": (percentile(per_cell, 0.5) or 0) * 1000, "cell_p99_ms": (percentile(per_cell, 0.99) or 0) * 1000,
        }
        out["deaths"] = deaths(server.log(), server.get("/api/kernels"), opened, check_pids=True)
        out["died"] = _died(out["deaths"])
        out["shutdown_all_s"] = round(close_class(server, opened), 1)
    finally:
        out["leftover_kernels_killed"] = server.stop()
    return out


def pool_class(base: Path, notebooks: int, spread_s: float) -> dict[str, Any]:
    """The same class through the pool: a gateway Jupyter Server, the router, the
    manager and one sandbox host, on a real Redis."""
    from support.cluster_procs import ROUTER_TOKENS, HostProcess, ManagerProcess, RouterProcess
    from support.redis_server import RedisServer

    redis = RedisServer(base / "redis")
    started: list[Any] = []
    out: dict[str, Any] = {"load_at_start": _load()}
    try:
        host = HostProcess(redis.url, base / "host", "class-host", heartbeat=HEARTBEAT_S, capacity=notebooks)
        started.append(host)
        manager = ManagerProcess(redis.url, base / "manager")
        started.append(manager)
        router = RouterProcess(redis.url, manager.url, base / "router")
        started.append(router)
        root = base / "notebooks"
        root.mkdir()
        paths = make_class(root, notebooks)
        server = JupyterServer(base / "server", root, extra_argv=[
            f"--GatewayClient.url={router.url}", f"--GatewayClient.auth_token={ROUTER_TOKENS['course-a']}",
            "--GatewayClient.allowed_envs=JPY_SESSION_NAME", f"--GatewayClient.request_timeout={OPEN_TIMEOUT_S}",
        ])
        started.append(server)
        log(f"class: {notebooks} notebooks through the pool (gateway server -> router -> host) within {spread_s:g} s")
        watch = BeatWatch(redis.url, host.host_id)
        try:
            opened = open_class(server, paths, WASM, spread_s, with_data_file=False)
        finally:
            watch.stop()
        out["heartbeat"] = {"every_s": HEARTBEAT_S, "lapses_after_s": 3 * HEARTBEAT_S,
                            "oldest_seen_s": round(watch.max_age_s, 2), "samples": watch.samples}
        out["open"] = summary(opened)
        out["load_after_open"] = _load()
        host_kernels = host.request("GET", "/api/kernels")
        assert isinstance(host_kernels, list)
        out["host_kernels"] = len(host_kernels)
        out["host_dead"] = sum(k.get("execution_state") == "dead" for k in host_kernels)
        host_log = host.log_path.read_text(errors="replace")
        out["deaths"] = deaths(server.log() + host_log, server.get("/api/kernels"), opened, check_pids=False)
        manager_log = manager.log_path.read_text(errors="replace")
        # The reaper's event when the host's record lapsed (its heartbeat late): every
        # session on it is dropped then, so it counts as every kernel lost.
        out["deaths"]["host_lost_in_log"] = manager_log.count("host.lost")
        out["deaths"]["host_call_failed_in_log"] = manager_log.count("host.call_failed")
        out["died"] = _died(out["deaths"]) + out["host_dead"] + notebooks * out["deaths"]["host_lost_in_log"]
        out["host_tree_kib"] = _tree_memory(host.proc.pid)
        log(f"class: pool: first results p50 {_s(out['open']['p50_s'])}, p99 {_s(out['open']['p99_s'])}, "
            f"{len(out['open']['failed'])} failed; the host's heartbeat was at most {watch.max_age_s:.1f} s old")
        out["shutdown_all_s"] = round(close_class(server, opened), 1)
    finally:
        for proc in reversed(started):
            proc.stop()
        redis.stop()
    return out


class BeatWatch:
    """Samples the host's last heartbeat in Redis (its score in the hosts ZSET) every
    0.25 s: the oldest it was ever seen. Past three heartbeats the record lapses and
    the pool drops every session of the host as lost."""

    def __init__(self, redis_url: str, host_id: str, prefix: str = "wk") -> None:
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.key, self.host_id = f"{prefix}:hosts", host_id
        self.max_age_s = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="beat-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                beat_ms = self.client.zscore(self.key, self.host_id)
            except Exception:  # Redis stopping at the end
                continue
            if beat_ms is not None:
                self.samples += 1
                self.max_age_s = max(self.max_age_s, time.time() - beat_ms / 1000)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def run_class(notebooks: int = 40, cells: int = 200, spread_s: float = 60.0, pool: bool = True,
              base: Path | None = None) -> tuple[list[Row], dict[str, Any]]:
    base = base or Path(tempfile.mkdtemp(prefix="wk-bench-class-"))
    raw: dict[str, Any] = {"notebooks": notebooks, "cells": cells, "spread_s": spread_s}
    raw["wasm"] = server_class(base / "wasm", WASM, notebooks, cells, spread_s)
    raw["ipykernel"] = server_class(base / "ipykernel", NATIVE, notebooks, cells, spread_s)
    if pool:
        raw["pool"] = pool_class(base / "pool", notebooks, spread_s)
    raw["pass"] = passed(raw)
    return rows_of(raw), raw


def passed(raw: dict[str, Any]) -> bool:
    """wasm-python's runs: every first cell answered, no kernel died, every later cell
    ran. ipykernel's failures are reported in its rows, not counted here: it is the
    oracle, and its own start can lose a port race at 40 at once (see BENCHMARKS.md)."""
    n = raw["notebooks"]
    runs = [raw["wasm"], *([raw["pool"]] if "pool" in raw else [])]
    return (all(r["open"]["answered"] == n and not r["open"]["failed"] and r["died"] == 0 for r in runs)
            and raw["wasm"]["cells"]["ran"] == raw["wasm"]["cells"]["expected"])


def rows_of(raw: dict[str, Any]) -> list[Row]:
    n, c, spread = raw["notebooks"], raw["cells"], raw["spread_s"]
    w, i = raw["wasm"], raw["ipykernel"]
    within = f"within {spread:g} s" if spread else "at once"
    rows = []
    for label, key in (("p50", "p50_s"), ("p99", "p99_s"), ("max", "max_s")):
        rows.append(Row("class", f"server: {n} notebooks {within}, open -> first result, {label}", "s",
                        w["open"][key], i["open"][key]))
    rows.append(Row("class", f"server: notebooks failed or kernels died, of {n}", "", 
                    len(w["open"]["failed"]) + w["died"], len(i["open"]["failed"]) + i["died"], target_max=0))
    if "pool" in raw:
        p = raw["pool"]
        for label, key in (("p50", "p50_s"), ("p99", "p99_s"), ("max", "max_s")):
            rows.append(Row("class", f"pool host: {n} notebooks {within}, open -> first result, {label}", "s",
                            p["open"][key], i["open"][key], note="native = the server run's ipykernel"))
        rows.append(Row("class", f"pool host: notebooks failed or kernels died, of {n}", "",
                        len(p["open"]["failed"]) + p["died"], target_max=0))
        beat = p["heartbeat"]
        rows.append(Row("class", "pool host: its heartbeat's age in Redis, the oldest seen", "s", beat["oldest_seen_s"],
                        target_max=beat["lapses_after_s"], note=f"a beat every {beat['every_s']:g} s"))
    rows.append(Row("class", f"{n} kernels x {c} cells: RSS growth per kernel, p50", "MiB",
                    w["cells"]["rss_growth_p50_mib"], i["cells"]["rss_growth_p50_mib"]))
    rows.append(Row("class", f"{n} kernels x {c} cells: RSS growth per kernel, max", "MiB",
                    w["cells"]["rss_growth_max_mib"], i["cells"]["rss_growth_max_mib"]))
    for when, key in (("after cell 1", "server_tree_after_first_kib"), (f"after cell {c}", "server_tree_after_last_kib")):
        rows.append(Row("class", f"{n} kernels: the server's tree RSS {when}", "MiB", w[key]["rss"] / 1024,
                        i[key]["rss"] / 1024, note=f"PSS {w[key]['pss'] / 1024:,.0f} vs {i[key]['pss'] / 1024:,.0f} MiB"))
    rows.append(Row("class", f"{n} kernels at once: a small cell, p50", "ms", w["cells"]["cell_p50_ms"],
                    i["cells"]["cell_p50_ms"]))
    rows.append(Row("class", f"{n} kernels x {c} cells: cells that did not run", "",
                    w["cells"]["expected"] - w["cells"]["ran"], i["cells"]["expected"] - i["cells"]["ran"], target_max=0))
    return rows


def print_failures(raw: dict[str, Any]) -> None:
    for part in ("wasm", "ipykernel", "pool"):
        r = raw.get(part)
        if not r:
            continue
        for line in r["open"]["failed"][:10] + r.get("cells", {}).get("failed", [])[:10]:
            log(f"class: {part}: {line}")
        log(f"class: {part}: deaths {r['deaths']}")
