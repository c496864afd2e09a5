"""Kernel subshells (JEP 91) on wasm-python, with native ipykernel as the oracle.

The guest has one thread: a subshell's cell or comm message that arrives while the
main shell's cell runs is run inside it, at its next safe point (runtime/nested_work.py).
The same sequence runs on both kernels in one test and the replies and outputs are
compared: create, list, a subshell's cell that stops a 20-second main cell by
setting a variable it reads, its output under its own parent, delete. Then what the
oracle shows the same way: a comm message (a widget's event) on a subshell reaches a
running cell; with the main shell idle a subshell is an ordinary shell. And what is
ours alone: the main cell is not charged for its subshell's time.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.kernel_client import TIMEOUT, RunningKernel, native_and_wasm

pytestmark = pytest.mark.slow  # native ipykernel and wasm-python side by side

MAIN = ("import time\nstop = False\nprint('running', flush=True)\nfor n in range(200):\n    if stop:\n        break\n"
        "    time.sleep(0.1)\nprint('stopped early', n < 199, stop)")


@pytest.fixture
def kernels(tmp_path: Path) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    with native_and_wasm(tmp_path) as both:
        yield both


def control(k: RunningKernel, msg_type: str, **content: Any) -> dict[str, Any]:
    msg = k.kc.session.msg(msg_type, content)
    k.kc.control_channel.send(msg)
    while True:
        reply = k.kc.control_channel.get_msg(timeout=TIMEOUT)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply


def send_on(k: RunningKernel, subshell: str | None, msg_type: str, content: dict[str, Any]) -> str:
    msg = k.kc.session.msg(msg_type, content)
    if subshell is not None:
        msg["header"]["subshell_id"] = subshell
    k.kc.shell_channel.send(msg)
    return msg["header"]["msg_id"]


def execute_on(k: RunningKernel, subshell: str | None, code: str) -> str:
    return send_on(k, subshell, "execute_request", {"code": code, "silent": False, "store_history": True,
                                                    "user_expressions": {}, "allow_stdin": False,
                                                    "stop_on_error": True})


class Messages:
    """A kernel's shell replies and iopub streams, by the request they answer."""

    def __init__(self, k: RunningKernel) -> None:
        self.k = k
        self.replies: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.streams: dict[str, str] = {}

    def pump(self, timeout: float = 0.2) -> None:
        for channel, keep in ((self.k.kc.shell_channel, self._reply), (self.k.kc.iopub_channel, self._iopub)):
            while True:
                try:
                    keep(channel.get_msg(timeout=timeout))
                except queue.Empty:
                    break

    def _reply(self, msg: dict[str, Any]) -> None:
        parent = msg["parent_header"].get("msg_id")
        self.replies[parent] = msg
        self.order.append(parent)

    def _iopub(self, msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            parent = msg["parent_header"].get("msg_id")
            self.streams[parent] = self.streams.get(parent, "") + msg["content"]["text"]

    def wait(self, cond: Any, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, (self.replies, self.streams)
            self.pump()


def subshell_stops_the_main_cell(k: RunningKernel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    created = control(k, "create_subshell_request")["content"]
    sid = created["subshell_id"]
    out["create"] = created["status"]
    out["list"] = control(k, "list_subshell_request")["content"]["subshell_id"] == [sid]
    seen = Messages(k)
    main = execute_on(k, None, MAIN)
    seen.wait(lambda: "running" in seen.streams.get(main, ""))
    sub = execute_on(k, sid, "stop = True\nprint('from the subshell')\n40 + 2")
    seen.wait(lambda: main in seen.replies and sub in seen.replies)
    out["subshell reply"] = {key: seen.replies[sub]["content"][key] for key in ("status",)}
    out["subshell reply on its subshell"] = seen.replies[sub]["header"].get("subshell_id") in (sid, None)
    out["main reply"] = seen.replies[main]["content"]["status"]
    out["subshell output"] = seen.streams.get(sub)
    out["main output"] = seen.streams.get(main)
    out["delete"] = control(k, "delete_subshell_request", subshell_id=sid)["content"]["status"]
    out["list after delete"] = control(k, "list_subshell_request")["content"]["subshell_id"]
    return out


def test_a_subshell_answers_during_a_running_cell_and_stops_it_as_on_ipykernel(
    kernels: tuple[RunningKernel, RunningKernel],
) -> None:
    native, wasm = kernels
    for k in (native, wasm):
        assert "kernel subshells" in k.request("kernel_info")["content"]["supported_features"]
    oracle, got = subshell_stops_the_main_cell(native), subshell_stops_the_main_cell(wasm)
    assert oracle["main output"] == "running\nstopped early True True\n", oracle
    for step in oracle:
        assert got[step] == oracle[step], f"{step}: wasm-python {got[step]!r} != ipykernel {oracle[step]!r}"


COMM_CELL = ("import time\nfrom comm import get_comm_manager\nseen = {}\n"
             "def target(comm, open_msg):\n"
             "    @comm.on_msg\n"
             "    def _(msg):\n"
             "        seen['value'] = msg['content']['data']['value']\n"
             "get_comm_manager().register_target('probe', target)\n")
WAIT_FOR_COMM = ("print('waiting', flush=True)\nfor n in range(300):\n    if 'value' in seen:\n        break\n"
                 "    time.sleep(0.1)\nprint('got', seen.get('value'))")


def comm_during_a_cell(k: RunningKernel) -> dict[str, Any]:
    assert k.execute(COMM_CELL).status == "ok"
    sid = control(k, "create_subshell_request")["content"]["subshell_id"]
    seen = Messages(k)
    main = execute_on(k, None, WAIT_FOR_COMM)
    seen.wait(lambda: "waiting" in seen.streams.get(main, ""))
    send_on(k, sid, "comm_open", {"comm_id": "c-1", "target_name": "probe", "data": {}})
    send_on(k, sid, "comm_msg", {"comm_id": "c-1", "data": {"value": 42}})
    seen.wait(lambda: main in seen.replies)
    return {"main": seen.replies[main]["content"]["status"], "output": seen.streams.get(main)}


def test_a_comm_message_on_a_subshell_reaches_a_running_cell_as_on_ipykernel(
    kernels: tuple[RunningKernel, RunningKernel],
) -> None:
    native, wasm = kernels
    oracle = comm_during_a_cell(native)
    assert oracle == {"main": "ok", "output": "waiting\ngot 42\n"}, oracle
    assert comm_during_a_cell(wasm) == oracle


def test_with_the_main_shell_idle_a_subshell_is_an_ordinary_shell(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    results = []
    for k in kernels:
        sid = control(k, "create_subshell_request")["content"]["subshell_id"]
        seen = Messages(k)
        first = execute_on(k, sid, "v = 6 * 7\nprint(v)")
        seen.wait(lambda: first in seen.replies)
        second = execute_on(k, None, "print(v + 1)")
        seen.wait(lambda: second in seen.replies)
        results.append((seen.replies[first]["content"]["status"], seen.streams.get(first),
                        seen.streams.get(second)))
    assert results[1] == results[0] == ("ok", "42\n", "43\n")


def test_the_main_cell_is_not_charged_for_its_subshells_time(tmp_path: Path) -> None:
    """Under a 3 s deadline the main cell sleeps 2 s and its subshell's cell runs 2 s
    inside it: 4 s of wall time, the main cell's own 2 of them."""
    kernel = RunningKernel(tmp_path / "wasm", argv=["--WasmKernel.deadline=3"])
    try:
        sid = control(kernel, "create_subshell_request")["content"]["subshell_id"]
        seen = Messages(kernel)
        main = execute_on(kernel, None, "import time\nprint('running', flush=True)\nfor _ in range(20):\n"
                                        "    time.sleep(0.1)\nprint('main done')")
        seen.wait(lambda: "running" in seen.streams.get(main, ""))
        sub = execute_on(kernel, sid, "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 2:\n"
                                      "    pass\nprint('sub done')")
        seen.wait(lambda: main in seen.replies and sub in seen.replies)
        assert seen.replies[sub]["content"]["status"] == "ok", seen.replies[sub]["content"]
        assert seen.replies[main]["content"]["status"] == "ok", seen.replies[main]["content"]
        assert seen.streams[main] == "running\nmain done\n" and seen.streams[sub] == "sub done\n"
    finally:
        kernel.shutdown()


def test_a_subshell_cell_past_its_own_limit_stops_the_running_cell_too(tmp_path: Path) -> None:
    """The guest cannot stop half of a turn: a subshell's cell past its own CPU budget
    stops the turn it runs inside, and both replies say so; the kernel goes on."""
    kernel = RunningKernel(tmp_path / "wasm", argv=["--WasmKernel.cpu_time=2"])
    try:
        sid = control(kernel, "create_subshell_request")["content"]["subshell_id"]
        seen = Messages(kernel)
        main = execute_on(kernel, None, "import time\nprint('running', flush=True)\nfor _ in range(100):\n"
                                        "    time.sleep(0.1)")
        seen.wait(lambda: "running" in seen.streams.get(main, ""))
        sub = execute_on(kernel, sid, "while True:\n    pass")
        seen.wait(lambda: main in seen.replies and sub in seen.replies)
        assert seen.replies[sub]["content"]["status"] == "error", seen.replies[sub]["content"]
        assert seen.replies[main]["content"]["status"] == "error", seen.replies[main]["content"]
        assert kernel.execute("print('on')").stream() == "on\n"
    finally:
        kernel.shutdown()
