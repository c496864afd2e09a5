"""The `wasm_kernel.session` comm target the lab extension's panel talks to, driven
over jupyter_client as the panel does: requests answered on the host with the
session magics' validation, and an event after every cell."""

from __future__ import annotations

import base64
import os
import queue
import time
from typing import Any

import pytest

from support.kernel_client import RunningKernel
from support.session_panel import Panel

@pytest.fixture
def panel(kernel: RunningKernel) -> Panel:
    return Panel(kernel)


def test_info_names_the_session_and_its_limits_with_their_ceilings(kernel: RunningKernel, panel: Panel) -> None:
    info = panel.ask("info")
    assert info["ok"] and info["session_id"] == kernel.session_id() and info["workspace"] == "/app"
    memory = info["limits"]["memory"]
    assert memory["value"] > 0 and memory["at_most"] >= memory["value"] and memory["shown"]
    assert set(info["disk_used"]) == {"bytes", "files"}
    assert "jupyter" not in str(info)  # no host path: the sessions root lives under the test's data dir


def test_files_lists_and_read_downloads(kernel: RunningKernel, panel: Panel) -> None:
    assert kernel.execute("import os\nos.makedirs('out', exist_ok=True)\n"
                          "open('out/made.bin', 'wb').write(bytes(range(256)))").status == "ok"
    listed = {f["path"]: f for f in panel.ask("files")["files"]}
    assert listed["out/made.bin"]["size"] == 256 and not listed["out/made.bin"]["link"]
    got = panel.ask("read", path="out/made.bin")
    assert got["ok"] and base64.b64decode(got["data"]) == bytes(range(256))


@pytest.mark.parametrize("op,args", [
    ("read", {"path": "../../etc/passwd"}),
    ("read", {"path": "/etc/passwd"}),
    ("files", {"glob": "../**"}),
    ("read", {"path": "link-out"}),
    ("read", {"path": "link-dir/passwd"}),
])
def test_paths_stay_in_the_workspace_and_links_out_are_not_followed(kernel: RunningKernel, panel: Panel, op: str,
                                                                    args: dict[str, Any]) -> None:
    # Links out of the workspace, planted on the host (the guest cannot make them).
    workspace = kernel.sessions_root / kernel.session_id()
    for name, target in (("link-out", "/etc/passwd"), ("link-dir", "/etc")):
        if not os.path.lexists(workspace / name):
            os.symlink(target, workspace / name)
    answer = panel.ask(op, **args)
    assert answer["ok"] is False or answer.get("files") == [], answer
    if not answer["ok"]:
        assert "\n" not in answer["error"] and "/root" not in answer["error"] and "jupyter" not in answer["error"]


@pytest.mark.parametrize("data,fragment", [
    ("not a request", "must be an object"),
    ({"op": "format_disk"}, "unknown op"),
    ({"op": "read"}, "path must be"),
    ({"op": "write", "path": "x", "data": "eA=="}, "unknown op 'write'"),
    ({"op": "limits", "set": {"memory": "1TB"}}, "memory"),
    ({"op": "limits", "set": {"nonsense": "1"}}, "nonsense"),
    ({"op": "limits", "set": {}}, "set must be"),
])
def test_bad_requests_get_one_line_and_change_nothing(kernel: RunningKernel, panel: Panel, data: Any,
                                                     fragment: str) -> None:
    before = panel.ask("info")["limits"]
    kc = kernel.kc
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": panel.comm_id, "data": data}))
    deadline = time.monotonic() + 30
    answer = None
    while answer is None and time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == panel.comm_id and "ok" in msg["content"]["data"]:
            answer = msg["content"]["data"]
    assert answer is not None and answer["ok"] is False and fragment in answer["error"], answer
    assert "\n" not in answer["error"]
    assert panel.ask("info")["limits"] == before


def test_limits_go_down_from_the_panel_and_cells_run_under_them(kernel: RunningKernel, panel: Panel) -> None:
    changed = panel.ask("limits", set={"cpu": "10s"})
    assert changed["ok"] and changed["limits"]["cpu"]["value"] == 10.0 and changed["metering"] == "time"
    assert "fuel" not in changed["limits"]  # time metering counts no fuel: the panel does not offer it
    run = kernel.execute("1")
    assert run.reply["content"]["metadata"]["sandbox"]["limits"]["cpu_seconds"] == 10.0
    assert panel.ask("limits", set={"cpu": "1min"})["ok"]


def test_every_cell_sends_its_cost_and_changes_to_the_open_panel(kernel: RunningKernel, panel: Panel) -> None:
    panel.ask("info")  # the comm is open before the cell
    run = kernel.execute("open('event.txt', 'w').write('e')")
    # The event's parent is the cell's request, so it is among the cell's messages.
    events = [m["content"]["data"] for m in run.outputs
              if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == panel.comm_id]
    assert events and events[-1]["files"]["created"] == ["event.txt"]
    cost = events[-1]["cost"]
    assert cost["metering"] == "time" and cost["cpu_ms"] > 0 and cost["fuel_used"] is None and "limits" in cost


def test_comm_info_lists_the_panels_comm(kernel: RunningKernel, panel: Panel) -> None:
    panel.ask("info")
    comms = kernel.request("comm_info", target_name="wasm_kernel.session")["content"]["comms"]
    assert comms[panel.comm_id] == {"target_name": "wasm_kernel.session"}


def test_a_panel_that_opens_after_cells_ran_gets_their_costs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A notebook switch binds a new panel model to a kernel that ran cells before it:
    # "Last cells" shows the kernel's history, newest first, not an empty table.
    k = RunningKernel(tmp_path / "jupyter")
    try:
        counts = [k.execute(f"x = {n}").reply["content"]["execution_count"] for n in range(3)]
        k.execute("y = 1", silent=True)  # a silent request is no cell of the history
        cells = Panel(k).ask("info")["cells"]
        assert [c["execution_count"] for c in cells] == counts[::-1]
        assert all(c["cost"]["cpu_ms"] >= 0 and "duration_ms" in c["cost"] for c in cells)
    finally:
        k.shutdown()


def test_timeline_and_preview_say_what_a_rewind_changes_and_change_nothing(kernel: RunningKernel, panel: Panel) -> None:
    first = kernel.execute("x = 1\nopen('/app/kept.txt', 'w').write('one')", timeout=120)
    kernel.execute("x = 2\nfrom math import pi as circle\nfor i in range(2):\n    pass\n"
                   "open('/app/kept.txt', 'w').write('two')\nopen('/app/new.txt', 'w').write('n')", timeout=120)
    one = first.reply["content"]["execution_count"]
    timeline = panel.ask("timeline")
    assert timeline["ok"] and [p["count"] for p in timeline["points"]][-2:] == [one, one + 1], timeline
    assert timeline["points"][-2]["first_line"] == "x = 1"
    preview = panel.ask("preview", count=one)
    assert preview["ok"], preview
    assert preview["cells"] == [{"count": one + 1, "first_line": "x = 2"}]
    assert preview["names"] == ["x", "circle", "i"]
    assert preview["files"] == {"created": [], "modified": ["kept.txt"], "deleted": ["new.txt"]}
    still = kernel.execute("print(x, open('/app/kept.txt').read(), 'new.txt' in __import__('os').listdir('/app'))")
    assert still.stream() == "2 two True\n"  # nothing changed
    assert not panel.ask("preview", count=10_000)["ok"]
    assert "count must be" in panel.ask("preview", count="1")["error"]
