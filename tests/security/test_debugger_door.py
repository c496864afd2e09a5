"""The debugger is a way in: requests from a frontend, messages from the guest.

- A cell cannot stop its own clock through the debug door: only a stopped guest
  with a frontend's debugger attached waits with its deadline standing still.
- The guest's debug messages are checked like every other: only DAP events and
  responses, bounded in number.
- A stopped debugger queues a bounded number of requests.
- evaluate runs in the guest: its os is the guest's, and the host's files are not
  there. Frames, sources and modules name guest paths only; a host file's source is
  unavailable.
- A frontend's request is checked: a malformed one and too many breakpoints get a
  failed response in one line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import wasm_kernel
from support.debug_client import DebugClient
from wasm_kernel.kernel.debug_service import MAX_PENDING
from support.kernel_client import RunningKernel
from support.sandboxes import make_sandbox
from wasm_kernel.core.sandbox import PythonSandbox
from wasm_kernel.runtime.debug_door import DebugDoor
from wasm_kernel.runtime.wire import MAX_BREAKPOINTS, MAX_DEBUG_QUEUE

WAIT_FOREVER = """
import _wasm_kernel_guest
while True:
    _wasm_kernel_guest.call({"op": "debug", "events": [], "responses": [], "wait": True})
"""


def test_a_cell_cannot_stop_its_own_clock_through_the_debug_door(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws", deadline_seconds=2)
    try:
        box = {}
        runner = threading.Thread(target=lambda: box.setdefault("result", sb.execute(WAIT_FOREVER)), daemon=True)
        runner.start()
        runner.join(60)  # the deadline is 2 s; a door that waited would hold the cell forever
        assert not runner.is_alive(), "the cell's forged debugger stop held its clock"
        assert box["result"].trap == "deadline", box["result"]
    finally:
        sb.close()


@pytest.mark.parametrize("message", [
    {"op": "debug", "events": [{"type": "event", "event": "shutdown_the_host", "body": {}}]},
    {"op": "debug", "events": [{"type": "event", "event": "output", "body": {}}] * 65},
    {"op": "debug", "responses": [{"type": "response", "success": True}]},
    {"op": "debug", "events": "stopped"},
    {"op": "debug", "wait": "yes"},
])
def test_forged_debug_messages_are_refused(sandbox: PythonSandbox, message: dict) -> None:
    r = sandbox.execute(f"import _wasm_kernel_guest\nprint(_wasm_kernel_guest.call({message!r}))")
    assert r.success, r.error
    assert "bad_message" in r.stdout, r.stdout


def test_a_stopped_debugger_queues_a_bounded_number_of_requests() -> None:
    door = DebugDoor()
    door.stopped = True
    for seq in range(MAX_DEBUG_QUEUE):
        assert door.give({"type": "request", "seq": seq, "command": "threads"})
    with pytest.raises(OverflowError, match="requests waiting"):
        door.give({"type": "request", "seq": MAX_DEBUG_QUEUE, "command": "threads"})
    door.stopped = False
    assert not door.give({"type": "request", "seq": 0, "command": "threads"})  # not stopped: asked between cells


@pytest.fixture(scope="module")
def debugged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningKernel, DebugClient, Path]]:
    base = tmp_path_factory.mktemp("debugged")
    kernel = RunningKernel(base / "data")
    dc = DebugClient(kernel.kc)
    dc.start()
    try:
        yield kernel, dc, base
    finally:
        kernel.shutdown()


def host_markers(base: Path) -> list[str]:
    return [str(Path(wasm_kernel.__file__).parent), sys.prefix, str(base), str(Path.home())]


def test_evaluate_runs_in_the_guest(debugged: tuple[RunningKernel, DebugClient, Path]) -> None:
    _kernel, dc, base = debugged
    assert dc.request("evaluate", expression="__import__('os').getpid()", context="repl")["body"]["result"] == "42"
    found = dc.request("evaluate", expression=f"open({str(Path(wasm_kernel.__file__))!r}).read()", context="repl")
    assert not found["success"] and "FileNotFoundError" in found["message"], found
    assert "\n" not in found["message"]


def test_frames_sources_and_modules_name_guest_paths_only(debugged: tuple[RunningKernel, DebugClient, Path]) -> None:
    kernel, dc, base = debugged
    code = "import json\nv = json.dumps({'a': 1})\nprint(v)\n"
    path = dc.request("dumpCell", code=code)["body"]["sourcePath"]
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": 2}])
    seen = len(dc.events)
    msg_id = dc.execute(code)
    dc.wait_event("stopped", after=seen)
    trace = dc.request("stackTrace", threadId=1)
    modules = dc.request("modules")
    sources = dc.request("source", source={"path": str(Path(wasm_kernel.__file__))})
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"
    assert not sources["success"] and sources["message"] == "source unavailable"
    assert any(m["path"].startswith("/usr/local/lib/python3.15/") for m in modules["body"]["modules"]), modules
    text = repr((trace, modules, dc.events))
    for marker in host_markers(base):
        assert marker not in text, marker


def test_malformed_requests_and_too_many_breakpoints_fail_in_one_line(
    debugged: tuple[RunningKernel, DebugClient, Path],
) -> None:
    kernel, dc, _base = debugged
    lines = [{"line": n} for n in range(1, MAX_BREAKPOINTS + 2)]
    too_many = dc.request("setBreakpoints", source={"path": "/app/x.py"}, breakpoints=lines)
    assert not too_many["success"] and too_many["message"] == f"at most {MAX_BREAKPOINTS} breakpoints"
    for content in ({"type": "request", "seq": "one", "command": "threads"},
                    {"type": "request", "seq": 1, "command": "x" * 100},
                    {"type": "request", "seq": 1, "command": "threads", "arguments": [1, 2]},
                    {"type": "event", "seq": 1, "command": "threads"}):
        msg = kernel.kc.session.msg("debug_request", content)
        kernel.kc.control_channel.send(msg)
        while True:
            reply = kernel.kc.control_channel.get_msg(timeout=30)
            if reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]:
                break
        assert reply["content"]["success"] is False
        assert reply["content"]["message"].startswith("bad debug_request: ") and "\n" not in reply["content"]["message"]
    assert kernel.execute("1 + 1").status == "ok"


def test_a_flood_of_requests_is_bounded_and_a_huge_one_refused(
    debugged: tuple[RunningKernel, DebugClient, Path],
) -> None:
    """Requests queue in order behind a stopped cell; past MAX_PENDING the rest fail at
    once instead of piling up, and one over 16 MiB is refused unread."""
    kernel, dc, _base = debugged
    code = "x = 1\ny = 2\n"
    path = dc.request("dumpCell", code=code)["body"]["sourcePath"]
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": 2}])
    seen = len(dc.events)
    msg_id = dc.execute(code)
    dc.wait_event("stopped", after=seen)
    # An evaluate that waits (a sleep in the guest) holds the queue while the flood arrives.
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    slow = kernel.kc.session.msg("debug_request", {"type": "request", "seq": 9000, "command": "evaluate",
                                                   "arguments": {"expression": "__import__('time').sleep(3)",
                                                                 "frameId": frame, "context": "repl"}})
    kernel.kc.control_channel.send(slow)
    flood = [kernel.kc.session.msg("debug_request", {"type": "request", "seq": 10_000 + n, "command": "threads"})
             for n in range(MAX_PENDING + 50)]
    for msg in flood:
        kernel.kc.control_channel.send(msg)
    wanted = {m["header"]["msg_id"] for m in flood} | {slow["header"]["msg_id"]}
    replies = {}
    while len(replies) < len(wanted):
        reply = kernel.kc.control_channel.get_msg(timeout=60)
        if reply["parent_header"].get("msg_id") in wanted:
            replies[reply["parent_header"]["msg_id"]] = reply["content"]
    refused = [r for r in replies.values() if not r["success"] and "already waiting" in r.get("message", "")]
    assert refused and len(refused) <= 50 + 1, len(refused)
    assert sum(1 for r in replies.values() if r["success"]) >= MAX_PENDING - 1
    huge = dc.request("evaluate", expression="1" + " " * (17 << 20), context="repl")
    assert not huge["success"] and huge["message"].startswith("bad debug_request: it is "), huge["message"][:100]
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"
