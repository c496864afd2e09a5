"""Jupyter comms between a frontend and guest code, over a real kernel.

What a frontend does with widgets, done by hand with jupyter_client: comms opened
by guest code reach IOPub with the cell as their parent; comm_open / comm_msg /
comm_close from the client reach the guest's comm manager as turns of their own,
with their output tagged by the comm message (an Output widget captures by it);
comm_info_request lists the guest's comms; buffers travel both ways.
"""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest

from support.kernel_client import RunningKernel


def send_comm(kernel: RunningKernel, msg_type: str, content: dict[str, Any],
              buffers: list[bytes] | None = None) -> str:
    msg = kernel.kc.session.msg(msg_type, content)
    kernel.kc.session.send(kernel.kc.shell_channel.socket, msg, buffers=buffers)
    return msg["header"]["msg_id"]


def messages_for(kernel: RunningKernel, msg_id: str, timeout: float = 30) -> list[dict[str, Any]]:
    """IOPub messages whose parent is msg_id, up to its idle status."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kernel.kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return found
        if msg["msg_type"] != "status":
            found.append(msg)
    raise TimeoutError(msg_id)


def test_a_comm_opened_by_guest_code_reaches_the_frontend_with_its_cell_as_parent(kernel: RunningKernel) -> None:
    run = kernel.execute("from comm import create_comm\nc = create_comm(target_name='probe', data={'hello': 1})\n"
                         "c.send({'n': 2}, buffers=[b'\\x00\\x01raw'])")
    assert run.status == "ok", run.reply
    opens = [m for m in run.outputs if m["msg_type"] == "comm_open"]
    assert [o["content"]["target_name"] for o in opens] == ["probe"]
    assert opens[0]["content"]["data"] == {"hello": 1}
    sent = [m for m in run.outputs if m["msg_type"] == "comm_msg"]
    assert sent[0]["content"]["data"] == {"n": 2}
    assert [bytes(b) for b in sent[0]["buffers"]] == [b"\x00\x01raw"]
    assert sent[0]["content"]["comm_id"] == opens[0]["content"]["comm_id"]


def test_a_message_from_the_frontend_runs_the_comms_handler_in_the_guest(kernel: RunningKernel) -> None:
    run = kernel.execute(
        "from comm import create_comm\necho = create_comm(target_name='echo')\n"
        "def on_msg(msg):\n    print('got', msg['content']['data'], len(msg['buffers']))\n"
        "    echo.send({'back': msg['content']['data']['x'] * 2}, buffers=[bytes(msg['buffers'][0])[::-1]])\n"
        "echo.on_msg(on_msg)\necho.comm_id")
    comm_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    msg_id = send_comm(kernel, "comm_msg", {"comm_id": comm_id, "data": {"x": 21}}, buffers=[b"abc"])
    got = messages_for(kernel, msg_id)
    printed = "".join(m["content"]["text"] for m in got if m["msg_type"] == "stream")
    assert printed == "got {'x': 21} 1\n"
    [back] = [m for m in got if m["msg_type"] == "comm_msg"]
    assert back["content"]["data"] == {"back": 42} and [bytes(b) for b in back["buffers"]] == [b"cba"]


def test_a_comm_opened_by_the_frontend_reaches_the_registered_target(kernel: RunningKernel) -> None:
    assert kernel.execute(
        "opened = []\ndef target(comm, msg):\n    opened.append(msg['content']['data'])\n"
        "    comm.send({'welcome': True})\n"
        "get_ipython().kernel.comm_manager.register_target('from-frontend', target)").status == "ok"
    msg_id = send_comm(kernel, "comm_open", {"comm_id": "f1", "target_name": "from-frontend", "data": {"v": 1}})
    got = messages_for(kernel, msg_id)
    assert [m["content"]["data"] for m in got if m["msg_type"] == "comm_msg"] == [{"welcome": True}]
    assert kernel.execute("opened").of_type("execute_result")[0]["data"]["text/plain"] == "[{'v': 1}]"
    info = kernel.request("comm_info", target_name="from-frontend")["content"]
    assert info["status"] == "ok" and info["comms"] == {"f1": {"target_name": "from-frontend"}}
    msg_id = send_comm(kernel, "comm_close", {"comm_id": "f1", "data": {}})
    messages_for(kernel, msg_id)
    assert kernel.request("comm_info", target_name="from-frontend")["content"]["comms"] == {}


def test_an_unknown_target_is_closed_back_and_the_kernel_goes_on(kernel: RunningKernel) -> None:
    msg_id = send_comm(kernel, "comm_open", {"comm_id": "nobody", "target_name": "no-such-target", "data": {}})
    got = messages_for(kernel, msg_id)
    assert [m["content"]["comm_id"] for m in got if m["msg_type"] == "comm_close"] == ["nobody"]
    assert kernel.execute("1 + 1").status == "ok"


def test_a_widget_change_from_the_frontend_runs_its_observer_and_output_widget_captures_it(
        kernel: RunningKernel) -> None:
    run = kernel.execute(
        "import ipywidgets as w\nslider = w.IntSlider(value=3)\nout = w.Output()\n"
        "def moved(change):\n    with out:\n        print('moved to', change['new'])\n"
        "slider.observe(moved, 'value')\ndisplay(slider, out)\nslider.model_id")
    assert run.status == "ok", run.reply
    model_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    views = [d for d in run.displays() if "application/vnd.jupyter.widget-view+json" in d["data"]]
    assert len(views) == 2
    msg_id = send_comm(kernel, "comm_msg", {"comm_id": model_id, "data": {
        "method": "update", "state": {"value": 7}, "buffer_paths": []}})
    got = messages_for(kernel, msg_id)
    # The Output widget is told to capture messages whose parent is this comm_msg,
    # and the print carries that parent.
    captures = [m["content"]["data"]["state"].get("msg_id") for m in got
                if m["msg_type"] == "comm_msg" and "msg_id" in m["content"]["data"].get("state", {})]
    assert captures[0] == msg_id
    assert "".join(m["content"]["text"] for m in got if m["msg_type"] == "stream") == "moved to 7\n"
    assert kernel.execute("slider.value").of_type("execute_result")[0]["data"]["text/plain"] == "7"


def test_a_comm_message_sent_during_a_cell_is_handled_after_it(kernel: RunningKernel) -> None:
    run = kernel.execute("from comm import create_comm\nlog = []\nlater = create_comm(target_name='later')\n"
                         "later.on_msg(lambda msg: log.append('comm'))\nlater.comm_id")
    comm_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    cell_id = kernel.kc.execute("import time\ntime.sleep(1)\nlog.append('cell')")
    time.sleep(0.3)
    comm_msg = send_comm(kernel, "comm_msg", {"comm_id": comm_id, "data": {}})
    messages_for(kernel, cell_id)
    messages_for(kernel, comm_msg)  # its own busy and idle, after the cell's
    assert kernel.execute("log").of_type("execute_result")[0]["data"]["text/plain"] == "['cell', 'comm']"


def test_a_runaway_handler_is_stopped_and_rolled_back_like_a_cell(kernel: RunningKernel) -> None:
    run = kernel.execute("%limits deadline=1")
    assert run.status == "ok", run.reply
    run = kernel.execute("from comm import create_comm\nstate = 'before'\nspin = create_comm(target_name='spin')\n"
                         "def handler(msg):\n    global state\n    state = 'changed'\n    while True:\n        pass\n"
                         "spin.on_msg(handler)\nspin.comm_id")
    comm_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    msg_id = send_comm(kernel, "comm_msg", {"comm_id": comm_id, "data": {}})
    got = messages_for(kernel, msg_id, timeout=60)
    stderr = "".join(m["content"]["text"] for m in got if m["msg_type"] == "stream")
    assert "stopped and rolled back" in stderr and "deadline" in stderr, stderr
    assert kernel.execute("state").of_type("execute_result")[0]["data"]["text/plain"] == "'before'"
    kernel.execute("%limits deadline=none")


def test_comm_info_lists_only_the_asked_target(kernel: RunningKernel) -> None:
    kernel.execute("from comm import create_comm\na1 = create_comm(target_name='ta')\nb1 = create_comm(target_name='tb')")
    comms = kernel.request("comm_info", target_name="ta")["content"]["comms"]
    assert comms and {c["target_name"] for c in comms.values()} == {"ta"}
    everything = kernel.request("comm_info")["content"]["comms"]
    assert {"ta", "tb"} <= {c["target_name"] for c in everything.values()}


def test_tqdm_notebook_shows_a_progress_bar_widget(kernel: RunningKernel) -> None:
    run = kernel.execute("from tqdm.notebook import tqdm\nfor _ in tqdm(range(50)):\n    pass")
    assert run.status == "ok", run.reply
    assert "Warning" not in run.stream("stderr"), run.stream("stderr")  # not its monitor thread's
    models = {m["content"]["data"]["state"].get("_model_name") for m in run.outputs if m["msg_type"] == "comm_open"}
    assert {"FloatProgressModel", "HBoxModel", "HTMLModel"} <= models
    values = [m["content"]["data"]["state"]["value"] for m in run.outputs
              if m["msg_type"] == "comm_msg" and "value" in m["content"]["data"].get("state", {})]
    assert 50 in values and any("50/50" in str(v) for v in values), values


def test_the_reply_says_what_the_cell_cost_and_under_which_limits(kernel: RunningKernel) -> None:
    light = kernel.execute("x = 1")
    heavy = kernel.execute("s = 0\nfor i in range(300_000):\n    s += i\nbig = bytearray(64 << 20)")
    costs = [run.reply["content"]["metadata"]["sandbox"] for run in (light, heavy)]
    for cost in costs:
        assert set(cost) == {"metering", "fuel_used", "cpu_ms", "memory_peak_bytes", "memory_growth_bytes",
                             "duration_ms", "host_ms", "network_requests", "network_bytes", "limits"}
        assert cost["limits"]["memory_bytes"] > 0 and cost["limits"]["cpu_seconds"] == 60.0
        assert cost["metering"] == "time" and cost["fuel_used"] is None  # time metering counts CPU time, not fuel
    assert 0 < costs[0]["cpu_ms"] < costs[1]["cpu_ms"]
    # The 64 MiB come partly from free space the (warm-image) heap already has.
    assert costs[1]["memory_peak_bytes"] >= costs[0]["memory_peak_bytes"] + (32 << 20)
    assert costs[1]["duration_ms"] > costs[0]["duration_ms"] > 0
    lowered = kernel.execute("%limits cpu=10s\n1")
    assert lowered.reply["content"]["metadata"]["sandbox"]["limits"]["cpu_seconds"] == 10.0
    kernel.execute("%limits cpu=1min")


def test_jslink_and_every_core_widget_open_their_models(kernel: RunningKernel) -> None:
    run = kernel.execute(
        "import ipywidgets as w\na, b = w.IntSlider(), w.IntText()\nlink = w.jslink((a, 'value'), (b, 'value'))\n"
        "made = []\nfor name in sorted(n for n in dir(w) if n[0].isupper()):\n    cls = getattr(w, name)\n"
        "    if isinstance(cls, type) and issubclass(cls, w.DOMWidget) and cls is not w.DOMWidget:\n"
        "        try:\n            made.append(type(cls()).__name__)\n        except Exception:  # needs arguments, as on ipykernel\n            pass\n"
        "len(made)")
    assert run.status == "ok", run.reply
    models = [m["content"]["data"]["state"]["_model_name"] for m in run.outputs if m["msg_type"] == "comm_open"]
    assert "LinkModel" in models
    assert int(run.of_type("execute_result")[0]["data"]["text/plain"]) >= 40  # sliders, buttons, boxes, pickers...


@pytest.mark.slow
def test_an_interrupt_stops_a_running_handler_and_rolls_it_back(kernel: RunningKernel) -> None:
    run = kernel.execute("from comm import create_comm\nmood = 'calm'\nbusy = create_comm(target_name='busy')\n"
                         "def spin(msg):\n    global mood\n    mood = 'spinning'\n    while True:\n        pass\n"
                         "busy.on_msg(spin)\nbusy.comm_id")
    comm_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    msg_id = send_comm(kernel, "comm_msg", {"comm_id": comm_id, "data": {}})
    time.sleep(1.0)  # the handler is spinning in the guest
    kernel.km.interrupt_kernel()
    got = messages_for(kernel, msg_id, timeout=30)
    stderr = "".join(m["content"]["text"] for m in got if m["msg_type"] == "stream")
    assert "stopped and rolled back" in stderr and "interrupt" in stderr.lower(), stderr
    assert kernel.execute("mood").of_type("execute_result")[0]["data"]["text/plain"] == "'calm'"
