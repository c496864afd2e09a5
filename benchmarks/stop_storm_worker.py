"""A worker process of the stop storm (stop_storm.py): a few sandboxes through the
library API, one thread each, hard-stopping the jobs the coordinator sends.

    python benchmarks/stop_storm_worker.py --sandboxes 2 --web http://127.0.0.1:PORT --root DIR

Reads one job a line on stdin (JSON: slot, id, workload, stop, at, then, key, collect)
and writes one result a line on stdout, in the order the jobs finish. A process of its
own, so that a crash of one (the stop faulted in host code) is counted by the
coordinator, which starts another, rather than ending the storm.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stop_storm_cells import (  # noqa: E402
    WORKLOADS, Workload, canary_count, canary_lines, check_canary, file_change_problems, good_cell, setup_cell, stopped_cell,
)

from wasm_kernel import CellOptions, ExecutionPolicy, PythonSandbox, SandboxResult, create_sandbox  # noqa: E402
from wasm_kernel.host.network_policy import NetworkPolicy, parse_allow  # noqa: E402
from wasm_kernel.runtime.guest_config import GuestOptions  # noqa: E402

# Every interrupt is hard unless the job asks for a grace (soft_then_hard); output caps
# a flood reaches within a stop's delay now and then, so both sides of the cap are hit.
BASE_POLICY = ExecutionPolicy(interrupt_grace_seconds=None, stdout_max_bytes=4 << 20, stderr_max_bytes=4 << 20)
SOFT_GRACE_SECONDS = 0.2
EXPECTED_TRAP = {"interrupt": "interrupted", "soft_then_hard": "interrupted", "deadline": "deadline",
                 "cpu": "cpu_time"}


def policy_for(stop: str, at: float) -> ExecutionPolicy:
    if stop == "deadline":
        return BASE_POLICY.with_changes(deadline_seconds=at)
    if stop == "cpu":
        return BASE_POLICY.with_changes(cpu_seconds=at)
    if stop == "soft_then_hard":
        return BASE_POLICY.with_changes(interrupt_grace_seconds=SOFT_GRACE_SECONDS)
    return BASE_POLICY


class Slot:
    """One sandbox and its canary."""

    def __init__(self, index: int, root: Path, web: str) -> None:
        self.index = index
        self.web = web
        self.workspace = root / f"slot-{index}"
        port = int(web.rsplit(":", 1)[1])
        network = NetworkPolicy(allow=parse_allow([f"127.0.0.1:{port}"]), max_requests_per_cell=1_000_000)
        sb = create_sandbox(workspace=self.workspace, policy=BASE_POLICY, guest_options=GuestOptions(network=network))
        assert isinstance(sb, PythonSandbox)
        self.sb = sb
        self.good = 0
        self.expected = ""
        self.setup()

    def setup(self) -> None:
        self.sb.policy = BASE_POLICY
        r = self.sb.execute(setup_cell(kernel=False))
        if not r.success:
            raise RuntimeError(f"the storm's setup cell failed: {r.error}")
        self.good = 0
        self.expected = canary_lines(r.stdout)[0]

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        workload = WORKLOADS[job["workload"]]
        stop = job["stop"]
        out: dict[str, Any] = {"id": job["id"], "slot": self.index, "workload": workload.name, "stop": stop,
                               "driver": "library", "latency_ms": None}
        sb = self.sb
        # The last good cell's checkpoint first: the stop's latency is the stop's and
        # the rollback's, not the checkpoint's (a kernel takes it after its reply).
        sb._guest.wait_idle()  # type: ignore[attr-defined]
        sb.policy = policy_for(stop, job["at"])
        result, latency = self._stopped(workload, job)
        out["latency_ms"] = latency
        out["trap"] = result.trap
        problems: list[tuple[str, str]] = []
        want = EXPECTED_TRAP[stop]
        if stop == "soft_then_hard" and result.trap is None and result.error is not None \
                and result.error.ename == "KeyboardInterrupt":
            # The soft interrupt came before the cell's try (its first bytecode): it ended
            # the cell, as on ipykernel, and nothing was rolled back because nothing ran;
            # the canary check below says so, or fails.
            out["soft_taken"] = True
        elif result.trap != want or not result.rolled_back or result.restarted:
            problems.append(("bad_stop", f"wanted a rolled-back {want!r} stop, got trap={result.trap} "
                             f"rolled_back={result.rolled_back} restarted={result.restarted} "
                             f"error={result.error.ename if result.error else None}"))
        stopped_changes = _changes(result)
        sb.policy = BASE_POLICY
        self.good += 1
        after = sb.execute(good_cell(job["id"] + 1, collect=job["collect"]))
        if not after.success:
            problems.append(("mismatch", f"the next cell failed: {after.error.ename if after.error else after.trap} "
                             f"{after.error.evalue[:200] if after.error else ''}"))
            self.setup()
        else:
            found, expected = check_canary(after.stdout, self.expected, self.good)
            problems += [("mismatch", p) for p in found]
            if expected is None:
                self.setup()
            else:
                self.expected = expected
                self.good = canary_count(expected)  # one failure is counted once, not in every check after it
        problems += [("mismatch", p) for p in file_change_problems(self.workspace, stopped_changes, _changes(after))]
        live, counted = sb.disk_usage(), sb.disk_usage(remeasure=True)
        if live != counted:
            problems.append(("mismatch", f"the disk quota's count {live} != the disk's {counted} after the stop"))
        out["status"] = problems[0][0] if problems else "ok"
        if problems:
            out["detail"] = "; ".join(p for _, p in problems)
        return out

    def _stopped(self, workload: Workload, job: dict[str, Any]) -> tuple[SandboxResult, float | None]:
        """Run the stopped cell; (its result, ms from the stop's request to the return)."""
        sb = self.sb
        done = threading.Event()
        asked: list[float] = []

        def answer(prompt: str, password: bool) -> str:
            if workload.input == "never":
                done.wait(120)  # a person who never answers; let go once the cell ended
            return "ok"

        def interrupt() -> None:
            if done.wait(job["at"]):
                return
            asked.append(time.perf_counter())
            while not sb.interrupt():  # the turn has not started yet
                if done.wait(0.001):
                    return
            if job["stop"] == "soft_then_hard" and not done.wait(job["then"]):
                sb.interrupt()

        if job["stop"] in ("interrupt", "soft_then_hard"):
            threading.Thread(target=interrupt, name="storm-interrupt", daemon=True).start()
        code = stopped_cell(workload, -(job["id"] + 1), self.web)
        started = time.perf_counter()
        try:
            result = sb.execute(code, on_output=_ignore, on_display=_ignore, on_input=answer,
                                cell=CellOptions(keep_output=False))
        finally:
            done.set()
        ended = time.perf_counter()
        if job["stop"] == "interrupt" and asked:
            return result, (ended - asked[0]) * 1000
        if job["stop"] == "deadline":
            return result, (ended - started - job["at"]) * 1000
        return result, None  # a CPU budget's moment, or a soft interrupt's hardening, is not seen from here

    def close(self) -> None:
        self.sb.close()


def _ignore(*args: Any) -> None:
    pass


def _changes(result: SandboxResult) -> dict[str, list[str]]:
    return {"files_created": list(result.files_created), "files_modified": list(result.files_modified),
            "files_deleted": list(result.files_deleted)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=2)
    parser.add_argument("--web", required=True)
    parser.add_argument("--root", type=Path, required=True)
    args = parser.parse_args()
    write_lock = threading.Lock()

    def say(record: dict[str, Any]) -> None:
        with write_lock:
            sys.stdout.write(json.dumps(record) + "\n")
            sys.stdout.flush()

    slots = [Slot(i, args.root, args.web) for i in range(args.sandboxes)]
    inboxes: list[queue.Queue[dict[str, Any] | None]] = [queue.Queue() for _ in slots]

    def serve(slot: Slot, inbox: queue.Queue[dict[str, Any] | None]) -> None:
        while (job := inbox.get()) is not None:
            try:
                say(slot.run(job))
            except Exception as err:  # a failure of the storm's own, or of the API: reported, not fatal
                say({"id": job["id"], "slot": slot.index, "workload": job["workload"], "stop": job["stop"],
                     "driver": "library", "status": "error", "latency_ms": None,
                     "detail": f"{type(err).__name__}: {err} | {traceback.format_exc(limit=3)[-600:]}"})

    threads = [threading.Thread(target=serve, args=(s, q), name=f"storm-slot-{s.index}") for s, q in zip(slots, inboxes)]
    for t in threads:
        t.start()
    say({"ready": len(slots)})
    for line in sys.stdin:
        job = json.loads(line)
        inboxes[job["slot"]].put(job)
    for q in inboxes:
        q.put(None)
    for t in threads:
        t.join()
    for s in slots:
        s.close()


if __name__ == "__main__":
    main()
