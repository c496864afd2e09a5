"""A real kernel in the stop storm (stop_storm.py): `python -m wasm_kernel` over
jupyter_client, stopped as JupyterLab's stop button does (an interrupt_request on the
control channel: the kernelspec's interrupt_mode is "message") or by a deadline the
notebook set with %limits. The next request goes only once every interrupt's reply
has come: an interrupt is served on the kernel's control thread whenever that thread
runs, and one still unserved when the stopped request ends lands in the next one
(ipykernel's interrupt_request, which sends itself SIGINT, does the same).

One kind of kernel rolls every interrupt back (interrupt_keeps_state=False); the other
keeps the default, where an interrupt is first a KeyboardInterrupt in the cell (the
storm's cells swallow it) and becomes a hard stop at the next interrupt or when the
grace runs out. The doors only a kernel has are driven here: input() over the stdin
channel, the history store, a frontend's comm message to a looping handler, and the
file changes a reply reports.
"""

from __future__ import annotations

import queue
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from stop_storm_cells import (
    WORKLOADS, Workload, canary_count, check_canary, file_change_problems, good_cell, setup_cell, stopped_cell,
)
from support.kernel_client import RunningKernel

SOFT_GRACE_SECONDS = 0.2
# Two SIGINTs this close may be one: a standard signal is not queued, and one sent while
# the first is still pending (the kernel's threads not yet scheduled, on a loaded
# machine) merges with it, on ipykernel too. The kernel counts each one delivered
# (kernel/sigint_relay.py); a soft kernel's second interrupt comes at least this long
# after the first really went.
SIGNAL_GAP_SECONDS = 0.1
REPLY_TIMEOUT = 120.0
# What each stop's reply says: the exception's name, and that the variables were kept.
EXPECTED_ENAME = {"interrupt": "KeyboardInterrupt", "soft_then_hard": "KeyboardInterrupt",
                  "deadline": "DeadlineExceeded", "cpu": "CpuTimeExceeded"}
ROLLED_BACK = "variables are as they were before"
COMM_STOPPED = "a widget's handler was stopped and rolled back"


class KernelDied(RuntimeError):
    pass


class KernelSlot:
    """One kernel and its canary. soft: the default interrupt (soft first)."""

    def __init__(self, index: int, root: Path, web: str, soft: bool) -> None:
        self.index = index
        self.web = web
        self.soft = soft
        self.root = root
        self.started = 0
        self.start()

    @property
    def stops(self) -> tuple[str, ...]:
        return ("soft_then_hard", "deadline", "cpu") if self.soft else ("interrupt", "deadline", "cpu")

    def start(self) -> None:
        port = self.web.rsplit(":", 1)[1]
        argv = [f"--WasmKernel.network_allow=127.0.0.1:{port}", "--WasmKernel.network_max_requests=1000000",
                "--WasmKernel.stdout_max_bytes=2097152", "--WasmKernel.stderr_max_bytes=2097152"]
        argv.append(f"--WasmKernel.interrupt_grace_seconds={SOFT_GRACE_SECONDS}" if self.soft
                    else "--WasmKernel.interrupt_keeps_state=False")
        self.started += 1
        self.kernel = RunningKernel(self.root / f"kernel-{self.index}-{self.started}", argv=argv,
                                    env={"PYTHONFAULTHANDLER": "1"})  # a hang's Python threads (diagnose)
        self.workspace = self.kernel.sessions_root / self.kernel.session_id()
        self._setup()

    def _setup(self) -> None:
        setup = self.kernel.execute(setup_cell(kernel=True))
        if setup.status != "ok":
            raise RuntimeError(f"the storm's setup cell failed in a kernel: {setup.reply['content']}")
        stdout = setup.stream()
        self.comm_id = stdout.split("COMM ", 1)[1].split()[0]
        self.expected = stdout.split("CANARY ", 1)[1].splitlines()[0]
        self.good = 0

    @property
    def pid(self) -> int:
        return int(self.kernel.km.provisioner.process.pid)  # type: ignore[union-attr]

    def alive(self) -> bool:
        return bool(self.kernel.km.is_alive())

    def log_tail(self) -> str:
        return self.kernel.log()[-2000:]

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        workload = WORKLOADS[job["workload"]]
        stop = job["stop"]
        out: dict[str, Any] = {"id": job["id"], "slot": self.index, "workload": workload.name, "stop": stop,
                               "driver": "kernel", "latency_ms": None}
        problems: list[tuple[str, str]] = []
        if workload.name == "comm_frontend":
            stderr, changes, latency = self._stopped_comm(job)
            if COMM_STOPPED not in stderr:
                problems.append(("bad_stop", f"the handler's stop was not reported: {stderr[-300:]!r}"))
        else:
            content, changes, latency = self._stopped_cell(workload, job)
            text = " ".join(content.get("traceback") or []) + content.get("evalue", "")
            if stop == "soft_then_hard" and content.get("ename") == "KeyboardInterrupt" and ROLLED_BACK not in text:
                # The soft interrupt came before the cell's try: it ended the cell, as on
                # ipykernel; the canary check below says nothing had moved, or fails.
                out["soft_taken"] = True
            elif content.get("ename") != EXPECTED_ENAME[stop] or ROLLED_BACK not in text:
                problems.append(("bad_stop", f"wanted a rolled-back {EXPECTED_ENAME[stop]}, got "
                                 f"{content.get('status')} {content.get('ename')}: {text[:300]!r}"))
        out["latency_ms"] = latency
        if not self.alive():
            raise KernelDied("the kernel process died during the stop")
        self.good += 1
        after = self.kernel.execute(("%limits deadline=none cpu=1min\n" if stop in ("deadline", "cpu") else "")
                                    + good_cell(job["id"] + 1, collect=job["collect"]), timeout=REPLY_TIMEOUT)
        if after.status != "ok":
            problems.append(("mismatch", f"the next cell failed: {after.reply['content'].get('ename')} "
                             f"{after.reply['content'].get('evalue', '')[:200]}"))
        found, expected = check_canary(after.stream(), self.expected, self.good)
        problems += [("mismatch", p) for p in found]
        if expected is not None:
            self.expected = expected
            self.good = canary_count(expected)  # one failure is counted once, not in every check after it
        else:  # the canary is gone (a restarted interpreter): counted, then set up again
            self._setup()
        after_changes = {k: after.reply["content"].get("metadata", {}).get(k, []) for k in changes}
        problems += [("mismatch", p) for p in file_change_problems(self.workspace, changes, after_changes)]
        out["status"] = problems[0][0] if problems else "ok"
        if problems:
            out["detail"] = "; ".join(p for _, p in problems)
        return out

    def _stopped_cell(self, workload: Workload, job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]],
                                                                            float | None]:
        """Run the stopped cell; (its reply's content, its file changes, ms from the
        interrupt to the reply)."""
        stop = job["stop"]
        code = stopped_cell(workload, -(job["id"] + 1), self.web)
        if stop == "deadline":
            code = f"%limits deadline={job['at'] * 1000:.0f}ms\n" + code
        elif stop == "cpu":
            code = f"%limits cpu={job['at'] * 1000:.0f}ms\n" + code
        kc = self.kernel.kc
        msg_id = kc.execute(code, allow_stdin=workload.input is not None)
        reply, asked = self._follow(msg_id, job, answer=workload.input == "answer")
        content = reply["content"]
        changes = {k: content.get("metadata", {}).get(k, []) for k in ("files_created", "files_modified",
                                                                       "files_deleted")}
        latency = (reply["_received"] - asked[0]) * 1000 if stop == "interrupt" and asked else None
        return content, changes, latency

    def _stopped_comm(self, job: dict[str, Any]) -> tuple[str, dict[str, list[str]], float | None]:
        kc = self.kernel.kc
        msg = kc.session.msg("comm_msg", {"comm_id": self.comm_id, "data": {"k": -(job["id"] + 1)}})
        kc.session.send(kc.shell_channel.socket, msg)
        stderr, asked, idle_at = self._follow_comm(msg["header"]["msg_id"], job)
        latency = (idle_at - asked[0]) * 1000 if job["stop"] == "interrupt" and asked else None
        empty: dict[str, list[str]] = {"files_created": [], "files_modified": [], "files_deleted": []}
        return stderr, empty, latency

    def _interrupts(self, job: dict[str, Any], started_at: float) -> list[float]:
        """When to interrupt: once at the job's moment; a soft kernel a second time later."""
        if job["stop"] not in ("interrupt", "soft_then_hard"):
            return []
        first = started_at + job["at"]
        return [first, first + max(job["then"], SIGNAL_GAP_SECONDS)] if job["stop"] == "soft_then_hard" else [first]

    def _follow(self, msg_id: str, job: dict[str, Any], answer: bool) -> tuple[dict[str, Any], list[float]]:
        """The request's reply (with `_received`, when it came) once its idle status has
        come too; interrupts at their moments; input requests answered or not."""
        kc = self.kernel.kc
        deadline = time.monotonic() + REPLY_TIMEOUT
        plan: list[float] = []
        asked: list[float] = []
        reply = None
        idle = False
        seen: Counter[str] = Counter()  # for a hang's report: what came, and when the interrupts went
        started = time.monotonic()
        while reply is None or not idle:
            now = time.monotonic()
            if now > deadline:
                sent = [round(t - started, 3) for t in asked]
                raise TimeoutError(f"no reply within {REPLY_TIMEOUT:g} s to a stopped {job['workload']} cell "
                                   f"(interrupts at {sent} s; IOPub: {dict(seen)})")
            if plan and now >= plan[0] and reply is None:  # (one for a cell that ended would be the next cell's)
                _send_interrupt(kc, plan, asked, now)
            msg = _get(kc.get_iopub_msg, 0.005)
            if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                seen[msg["msg_type"]] += 1
                if msg["msg_type"] == "execute_input" and not asked and not plan:
                    plan = self._interrupts(job, time.monotonic())
                elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            if answer and (request := _get(kc.get_stdin_msg, 0)) is not None:
                kc.input("ok")
                del request
            if reply is None and (candidate := _get(kc.get_shell_msg, 0)) is not None:
                if candidate["parent_header"].get("msg_id") == msg_id:
                    reply = candidate
                    reply["_received"] = time.monotonic()
        if not answer:  # requests a person never answered: gone with their cell
            while _get(kc.get_stdin_msg, 0) is not None:
                pass
        _interrupts_served(kc, len(asked), deadline)
        return reply, asked

    def _follow_comm(self, msg_id: str, job: dict[str, Any]) -> tuple[str, list[float], float]:
        """A comm message has no reply: its stderr, the interrupts' moments, and when
        its idle status came."""
        kc = self.kernel.kc
        deadline = time.monotonic() + REPLY_TIMEOUT
        plan: list[float] = []
        asked: list[float] = []
        stderr = []
        busy = False
        while True:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"no idle within {REPLY_TIMEOUT:g} s after a stopped comm handler")
            if plan and now >= plan[0]:
                _send_interrupt(kc, plan, asked, now)
            msg = _get(kc.get_iopub_msg, 0.005)
            if msg is None or msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status":
                if msg["content"]["execution_state"] == "busy" and not busy:
                    busy = True
                    plan = self._interrupts(job, time.monotonic())
                elif msg["content"]["execution_state"] == "idle":
                    idle_at = time.monotonic()
                    _interrupts_served(kc, len(asked), deadline)
                    return "".join(stderr), asked, idle_at
            elif msg["msg_type"] == "stream" and msg["content"]["name"] == "stderr":
                stderr.append(msg["content"]["text"])

    def close(self) -> None:
        try:
            self.kernel.shutdown()
        except Exception:  # a dead kernel's shutdown may fail: the storm has counted it
            pass


def _send_interrupt(kc: Any, plan: list[float], asked: list[float], now: float) -> None:
    """The plan's next interrupt, now; the one after it no sooner than SIGNAL_GAP_SECONDS
    from this one's real moment (a driver late for the first, busy reading a flood of
    IOPub messages, sent both within a millisecond)."""
    plan.pop(0)
    asked.append(now)
    kc.control_channel.send(kc.session.msg("interrupt_request", {}))
    if plan:
        plan[0] = max(plan[0], now + SIGNAL_GAP_SECONDS)


def _interrupts_served(kc: Any, sent: int, deadline: float) -> None:
    """Wait for the interrupt_reply of each of the `sent` interrupts (the control
    channel carries nothing else here)."""
    while sent:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{sent} interrupt_request(s) never answered on the control channel")
        msg = _get(kc.get_control_msg, 0.05)
        if msg is not None and msg["msg_type"] == "interrupt_reply":
            sent -= 1


def _get(getter: Any, timeout: float) -> dict[str, Any] | None:
    try:
        return getter(timeout=timeout)  # type: ignore[no-any-return]
    except queue.Empty:
        return None


def kernel_stops(workload: Workload, slot: KernelSlot, rng: random.Random) -> str:
    """A stop for `workload` this kernel can make (a comm handler: interrupts only)."""
    return rng.choice([k for k in workload.stops if k in slot.stops])
