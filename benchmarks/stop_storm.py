"""Issue 40 (8): stops by trap survive a storm. Hard stops at random moments across
the places a stop can land, each checked for an exact rollback.

    .venv/bin/python benchmarks/stop_storm.py [--stops 10000] [--workers 2] [--sandboxes 2] [--kernels 2]
        [--seed N] [--json out.json]

A hard stop here is one that traps the guest and rolls it back: an interrupt without
a grace, a deadline, a CPU budget, or an interrupt the cell swallowed that then
hardens (a second interrupt, or the grace running out). Each lands, after a random
delay of up to 0.3 s, in one of the workloads of stop_storm_cells.py: a numpy C loop,
memory.copy, WASI file calls, each host door (display, comm both ways, input(),
history, the network door against a loopback server on an allow-list, file-change
tracking), output floods, and a guest waiting in a host call (input() nobody answers,
sleep, a request the server never answers).

After each stop the next cell checks the rollback: the canary the last good cell left
(a counter, checksums, a numpy array, a bytearray, an open file's offsets, the
namespace's names) must print the same fingerprint; the files the stopped cell
reported changed must be as reported on disk and none blamed on the next cell; a
sandbox's disk count must equal a fresh count. Sandboxes run through the library API
in worker processes (stop_storm_worker.py, `--sandboxes` each, one thread per
sandbox); real kernels over jupyter_client (stop_storm_kernel.py), half of them with
soft interrupts. A worker or kernel process that dies is a crash: counted, and
another is started.

Prints a progress line every 10 s and a summary: stops per workload and per stop,
latency (the stop's request to execute()'s return or the execute_reply, the rollback
included; deadline stops from the deadline), and the failures. Exits 1 on any crash,
wrong rollback, wrong stop, error or hang, or a workload no stop landed in.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from stop_storm_cells import WORKLOADS, Workload, diagnose  # noqa: E402
from stop_storm_kernel import KernelDied, KernelSlot, kernel_stops  # noqa: E402
from support.http_servers import LocalWeb  # noqa: E402

MAX_DELAY_SECONDS = 0.3
PROGRESS_SECONDS = 10.0
FAILURES = ("crash", "mismatch", "bad_stop", "error", "hang")
# A stop and its check that take longer than this are a hang (a slow stop is seconds).
JOB_TIMEOUT_SECONDS = 120.0


class Plan:
    """Hands out the jobs, one at a time, until the storm's count is reached: each
    driver goes round its workloads in a fresh random order each time, so that every
    workload gets stops however short the storm."""

    def __init__(self, stops: int, seed: int) -> None:
        self.left = stops
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.next_id = 0
        self.rounds: dict[str, list[str]] = {}

    def job(self, driver: str, names: list[str], stop_for: Any) -> dict[str, Any] | None:
        with self.lock:
            if self.left <= 0:
                return None
            self.left -= 1
            rng = self.rng
            if not self.rounds.get(driver):
                self.rounds[driver] = rng.sample(names, len(names))
            workload = WORKLOADS[self.rounds[driver].pop()]
            stop = stop_for(workload, rng)
            job = {"id": self.next_id, "workload": workload.name, "stop": stop,
                   "at": rng.uniform(0.02 if stop == "cpu" else 0.005, MAX_DELAY_SECONDS),
                   "then": rng.uniform(0.0, MAX_DELAY_SECONDS), "collect": self.next_id % 8 == 0}
            self.next_id += 1
            return job


class Tally:
    """The storm's counts, from every driver's thread."""

    def __init__(self, stops: int, progress: bool, failures_log: Path | None = None) -> None:
        self.lock = threading.Lock()
        self.failures_log = failures_log  # each failure as it happens, one JSON line each
        self.stops = stops
        self.progress = progress
        self.started = time.monotonic()
        self.last_line = self.started
        self.done = 0
        self.by: dict[str, Counter[str]] = defaultdict(Counter)  # workload -> driver/stop/status counts
        self.latency: dict[str, list[float]] = defaultdict(list)  # "driver stop" and workload -> ms
        self.failures: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def add(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.done += 1
            counts = self.by[record["workload"]]
            counts["stops"] += 1
            counts[record["driver"]] += 1
            counts[record["stop"]] += 1
            if record.get("soft_taken"):
                counts["soft_taken"] += 1  # ended by its soft interrupt before its try: counted, not failed
            if record["status"] != "ok":
                self.failures[record["status"]].append(record)
                self._log_failure(record)
            if record.get("latency_ms") is not None:
                self.latency[f"{record['driver']} {record['stop']}"].append(record["latency_ms"])
                self.latency[record["workload"]].append(record["latency_ms"])
            now = time.monotonic()
            if self.progress and (now - self.last_line >= PROGRESS_SECONDS or self.done == self.stops):
                self.last_line = now
                elapsed = now - self.started
                failed = ", ".join(f"{name} {len(self.failures[name])}" for name in FAILURES)
                print(f"[{self.done:>6}/{self.stops}] {elapsed:7.0f} s, {self.done / elapsed:5.1f} stops/s; {failed}",
                      flush=True)

    def _log_failure(self, record: dict[str, Any]) -> None:
        if self.failures_log is not None:
            with open(self.failures_log, "a") as log:
                log.write(json.dumps({"at_s": round(time.monotonic() - self.started, 1), **record}) + "\n")

    def crash(self, driver: str, detail: str, in_flight: list[dict[str, Any]]) -> None:
        """A process died: a crash, with the stops it was making."""
        with self.lock:
            record = {"status": "crash", "driver": driver, "detail": detail,
                      "in_flight": [(j["workload"], j["stop"]) for j in in_flight]}
            self.failures["crash"].append(record)
            self._log_failure(record)
        if self.progress:
            print(f"CRASH {driver}: {detail[:2000]}", flush=True)


class Driver:
    """What makes stops, in a thread of its own: `where` is the workloads' kind."""

    where = ""

    def __init__(self, name: str, web: str, root: Path, plan: Plan, tally: Tally) -> None:
        self.name = name
        self.web = web
        self.root = root
        self.plan = plan
        self.tally = tally
        self.names = [w.name for w in WORKLOADS.values() if self.where in w.where]

    def drive(self) -> None:
        raise NotImplementedError


class WorkerDriver(Driver):
    """A worker process of `sandboxes` sandboxes (stop_storm_worker.py), kept fed with
    one job per sandbox; started again if it dies."""

    where = "library"

    def __init__(self, index: int, sandboxes: int, web: str, root: Path, plan: Plan, tally: Tally) -> None:
        super().__init__(f"worker-{index}", web, root, plan, tally)
        self.sandboxes = sandboxes
        self.starts = 0

    def _job(self, slot: int) -> dict[str, Any] | None:
        job = self.plan.job(self.name, self.names, lambda w, rng: rng.choice(w.stops))
        if job is not None:
            job["slot"] = slot
        return job

    def drive(self) -> None:
        while self.plan.left > 0 or self.starts == 0:
            self.starts += 1
            log_path = self.root / f"{self.name}-{self.starts}.log"
            with open(log_path, "w") as log:
                proc = subprocess.Popen(
                    [sys.executable, str(HERE / "stop_storm_worker.py"), "--sandboxes", str(self.sandboxes),
                     "--web", self.web, "--root", str(self.root / f"{self.name}-{self.starts}")],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                    env={**os.environ, "PYTHONFAULTHANDLER": "1"})
                lines: queue.Queue[str] = queue.Queue()
                threading.Thread(target=_read_lines, args=(proc, lines), daemon=True).start()
                in_flight: dict[int, dict[str, Any]] = {}
                hung = False
                ready = lines.get()
                if ready:
                    for slot in range(self.sandboxes):
                        self._send(proc, slot, in_flight)
                    while in_flight:
                        try:
                            line = lines.get(timeout=JOB_TIMEOUT_SECONDS)
                        except queue.Empty:
                            hung = True
                            where = diagnose(proc.pid, self.root / f"{self.name}-{self.starts}-hang.txt")
                            break
                        if not line:
                            break
                        record = json.loads(line)
                        in_flight.pop(record["id"], None)
                        self.tally.add(record)
                        self._send(proc, record["slot"], in_flight)
                assert proc.stdin is not None
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
                code = proc.wait()
            tail = log_path.read_text(errors="replace")[-3000:]
            if hung:
                for job in in_flight.values():
                    self.tally.add({**job, "driver": "library", "status": "hang", "latency_ms": None,
                                    "detail": f"no result within {JOB_TIMEOUT_SECONDS:g} s; threads in {where}; "
                                              f"the log ends: {tail}"})
            elif code != 0 or in_flight or not ready:
                self.tally.crash(self.name, f"the worker process ended with {_exit_text(code)}; its log ends: {tail}",
                                 list(in_flight.values()))
            else:
                return

    def _send(self, proc: subprocess.Popen[str], slot: int, in_flight: dict[int, dict[str, Any]]) -> None:
        job = self._job(slot)
        if job is None:
            return
        in_flight[job["id"]] = job
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:  # it died; the read that follows sees it
            pass


class KernelDriver(Driver):
    """A real kernel, one job at a time; started again if it dies or hangs."""

    where = "kernel"

    def __init__(self, index: int, web: str, root: Path, plan: Plan, tally: Tally) -> None:
        super().__init__(f"kernel-{index}", web, root, plan, tally)
        self.index = index

    def drive(self) -> None:
        slot = KernelSlot(self.index, self.root, self.web, soft=self.index % 2 == 1)
        try:
            while (job := self.plan.job(self.name, self.names, lambda w, rng: kernel_stops(w, slot, rng))) is not None:
                try:
                    record = slot.run(job)
                except (KernelDied, TimeoutError) as err:
                    if slot.alive():
                        where = diagnose(slot.pid, self.root / f"{self.name}-{job['id']}-hang.txt")
                        time.sleep(1.0)  # faulthandler's dump of its Python threads, into its log
                        self._failed(job, "hang", f"{err}; threads in {where}; its log ends: {slot.log_tail()}")
                    else:
                        self.tally.crash(self.name, f"{err}; its log ends: {slot.log_tail()}", [job])
                    slot.close()
                    slot.start()
                    continue
                except Exception as err:
                    self._failed(job, "error", f"{type(err).__name__}: {err}")
                    continue
                self.tally.add(record)
                if not slot.alive():
                    self.tally.crash(self.name, f"the kernel died after a stop; its log ends: {slot.log_tail()}", [])
                    slot.close()
                    slot.start()
        finally:
            slot.close()

    def _failed(self, job: dict[str, Any], status: str, detail: str) -> None:
        self.tally.add({"id": job["id"], "workload": job["workload"], "stop": job["stop"], "driver": "kernel",
                        "status": status, "detail": detail, "latency_ms": None})


def _read_lines(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    """A worker's result lines into `lines`, then "" at its end."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.put(line)
    lines.put("")


def _exit_text(code: int) -> str:
    import signal

    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"status {code}"


def run(stops: int = 10_000, workers: int = 2, sandboxes: int = 2, kernels: int = 2, seed: int | None = None,
        base: Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the storm; its figures (see summary_lines)."""
    seed = random.randrange(1 << 30) if seed is None else seed
    scratch = None if base is not None else tempfile.TemporaryDirectory(prefix="wk-stop-storm-")
    root = Path(base if base is not None else scratch.name)  # type: ignore[union-attr]
    web = LocalWeb()
    plan = Plan(stops, seed)
    tally = Tally(stops, progress, root / "failures.jsonl")
    url = f"http://127.0.0.1:{web.port}"
    drivers: list[Driver] = [WorkerDriver(i, sandboxes, url, root, plan, tally) for i in range(workers)]
    drivers += [KernelDriver(i, url, root, plan, tally) for i in range(kernels)]
    threads = [threading.Thread(target=d.drive, name=d.name) for d in drivers]
    started = time.monotonic()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        web.close()
        if scratch is not None:
            scratch.cleanup()
    elapsed = time.monotonic() - started
    reachable = [w for w in WORKLOADS.values()
                 if ("library" in w.where and workers) or ("kernel" in w.where and kernels)]
    return _result(tally, elapsed, seed, reachable,
                   {"stops": stops, "workers": workers, "sandboxes": sandboxes, "kernels": kernels})


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]


def _result(tally: Tally, elapsed: float, seed: int, reachable: list[Workload], config: dict[str, int]) -> dict[str, Any]:
    workloads = {}
    for w in WORKLOADS.values():
        counts = tally.by.get(w.name, Counter())
        lat = tally.latency.get(w.name, [])
        workloads[w.name] = {"group": w.group, "stops": counts["stops"], "library": counts["library"],
                             "kernel": counts["kernel"], "latency_median_ms": _pct(lat, 50),
                             "latency_p99_ms": _pct(lat, 99)}
    latency = {key: {"n": len(xs), "median_ms": _pct(xs, 50), "p99_ms": _pct(xs, 99), "max_ms": max(xs)}
               for key, xs in sorted(tally.latency.items()) if " " in key}
    every = [x for key, xs in tally.latency.items() if " " in key for x in xs]
    by_stop = Counter({kind: sum(c[kind] for c in tally.by.values())
                       for kind in ("interrupt", "soft_then_hard", "deadline", "cpu", "soft_taken")})
    failures = {name: len(tally.failures[name]) for name in FAILURES}
    unreached = [w.name for w in reachable if workloads[w.name]["stops"] == 0]
    return {
        "config": config, "seed": seed, "elapsed_s": round(elapsed, 1), "stops": tally.done,
        "stops_per_s": round(tally.done / elapsed, 2) if elapsed else None,
        "workloads": workloads, "by_stop": dict(by_stop), "latency": latency,
        "latency_all": {"n": len(every), "median_ms": _pct(every, 50), "p99_ms": _pct(every, 99)},
        "failures": failures, "failure_details": {k: v[:20] for k, v in tally.failures.items()},
        "unreached_workloads": unreached,
        "pass": not any(failures.values()) and not unreached,
    }


def summary_lines(result: dict[str, Any]) -> list[str]:
    c = result["config"]

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    lines = [f"stop storm: {result['stops']} hard stops in {result['elapsed_s']:.0f} s "
             f"({result['stops_per_s']} stops/s), {c['workers']} worker processes x {c['sandboxes']} sandboxes "
             f"+ {c['kernels']} kernels, seed {result['seed']}",
             f"{'workload':<20}{'group':<24}{'stops':>7}{'library':>9}{'kernel':>8}{'median ms':>11}{'p99 ms':>8}"]
    for name, w in result["workloads"].items():
        lines.append(f"{name:<20}{w['group']:<24}{w['stops']:>7}{w['library']:>9}{w['kernel']:>8}"
                     f"{ms(w['latency_median_ms']):>11}{ms(w['latency_p99_ms']):>8}")
    lines.append("stops by kind: " + ", ".join(f"{kind} {n}" for kind, n in result["by_stop"].items()))
    lines.append("latency, the stop's request to the reply (ms):")
    for key, lat in result["latency"].items():
        lines.append(f"  {key:<24} n={lat['n']:<6} median {ms(lat['median_ms']):>5}  p99 {ms(lat['p99_ms']):>5}"
                     f"  max {ms(lat['max_ms']):>5}")
    every = result["latency_all"]
    lines.append(f"  {'all':<24} n={every['n']:<6} median {ms(every['median_ms']):>5}  p99 {ms(every['p99_ms']):>5}")
    lines.append("failures: " + ", ".join(f"{k} {v}" for k, v in result["failures"].items())
                 + (f"; no stop in: {', '.join(result['unreached_workloads'])}" if result["unreached_workloads"] else ""))
    for kind, records in result["failure_details"].items():
        for record in records[:5]:
            lines.append(f"  {kind}: {json.dumps(record)[:1500]}")
    lines.append("PASS" if result["pass"] else "FAIL")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2, help="worker processes of library sandboxes")
    parser.add_argument("--sandboxes", type=int, default=2, help="sandboxes per worker process")
    parser.add_argument("--kernels", type=int, default=2, help="real kernels (every other one with soft interrupts)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--keep", type=Path, help="keep the workspaces and logs in this folder")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    result = run(args.stops, args.workers, args.sandboxes, args.kernels, args.seed, base=args.keep)
    print("\n".join(summary_lines(result)))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    sys.exit(0 if result["pass"] else 1)


if __name__ == "__main__":
    main()
