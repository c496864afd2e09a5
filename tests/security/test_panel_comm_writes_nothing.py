"""The panel's comm (kernel/session_comm.py) reads a workspace and never writes it:
uploads, renames and deletes are the drive's (the Sandbox files browser, one upload
protocol, counted by SessionWorkspace before a byte is written). A write through the
comm, in any of the shapes the panel once sent, is an unknown op and changes nothing."""

from __future__ import annotations

import base64

import pytest

from support.kernel_client import RunningKernel
from support.session_panel import Panel

DATA = base64.b64encode(b"written through the comm").decode()


@pytest.mark.parametrize("op,args", [
    ("write", {"path": "planted.txt", "data": DATA}),
    ("write", {"path": "planted.txt", "data": DATA, "part": 2}),
    ("write", {"path": "planted.txt", "data": DATA, "part": -1, "size": 24}),
    ("delete", {"path": "kept.txt"}),
    ("delete", {"path": ".", "recursive": True}),
    ("rename", {"path": "kept.txt", "new_path": "moved.txt"}),
    ("append", {"path": "kept.txt", "data": DATA}),
])
def test_the_panels_comm_writes_nothing_in_any_shape(kernel: RunningKernel, op: str, args: dict) -> None:
    assert kernel.execute("open('kept.txt', 'w').write('mine')").status == "ok"
    panel = Panel(kernel)
    before = {f["path"]: f["size"] for f in panel.ask("files")["files"]}
    used = panel.ask("info")["disk_used"]
    answer = panel.ask(op, **args)
    assert answer["ok"] is False and answer["error"].startswith(f"unknown op '{op}'"), answer
    assert "\n" not in answer["error"]
    assert {f["path"]: f["size"] for f in panel.ask("files")["files"]} == before
    assert panel.ask("info")["disk_used"] == used
    assert kernel.execute("print(open('kept.txt').read())").stream() == "mine\n"
