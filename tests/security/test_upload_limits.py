"""Panel uploads: the documented maximum is exact, every part is counted before it is
written, and each message fits the wire (kernel/session_comm.py, the panel's model).

The panel sends a file in parts of `uploads.part_bytes` (4 MiB: 5.6 MB once base64'd,
under Jupyter Server's 10 MiB websocket frames), numbered as the drive's chunks are
(1, 2, ..., -1 for the last); a whole file over `uploads.max_bytes` (16 MiB) is
refused before any part.
"""

from __future__ import annotations

import base64

import pytest

from support.kernel_client import RunningKernel
from support.session_panel import Panel

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # uploads of the documented maximum

MIB = 1 << 20


def _upload(panel: Panel, path: str, data: bytes, part: int) -> list[dict]:
    answers = []
    starts = range(0, max(len(data), 1), part)
    for number, offset in enumerate(starts, 1):
        chunk = data[offset:offset + part]
        last = number == len(starts) and number > 1
        answers.append(panel.ask("write", path=path, data=base64.b64encode(chunk).decode(), part=-1 if last else number,
                                 size=len(data)))
        if not answers[-1]["ok"]:
            break
    return answers


def test_the_documented_maximum_is_exact_and_each_part_fits_a_websocket_frame(kernel: RunningKernel) -> None:
    panel = Panel(kernel)
    info = panel.ask("info")
    most, part = info["uploads"]["max_bytes"], info["uploads"]["part_bytes"]
    assert most == 16 * MIB
    assert len(base64.b64encode(b"\0" * part)) + 1024 < 10 * MIB  # Jupyter Server's websocket_max_message_size
    exactly = bytes(range(256)) * (most // 256)
    answers = _upload(panel, "exactly.bin", exactly, part)
    assert all(a["ok"] for a in answers), answers[-1]
    assert answers[-1]["size"] == most
    run = kernel.execute("import hashlib\nprint(hashlib.sha256(open('exactly.bin','rb').read()).hexdigest())")
    import hashlib
    assert run.stream().strip() == hashlib.sha256(exactly).hexdigest()
    # One byte more: refused before any part, in one line, and nothing written.
    over = panel.ask("write", path="over.bin", data="", size=most + 1)
    assert over["ok"] is False and "up to 16 MiB" in over["error"] and "\n" not in over["error"], over
    # A part that would carry the file past the maximum is refused too.
    tail = panel.ask("write", path="exactly.bin", data=base64.b64encode(b"!").decode(), part=2)
    assert tail["ok"] is False and "16 MiB" in tail["error"], tail
    assert kernel.execute("import os\nprint(os.path.exists('over.bin'), os.path.getsize('exactly.bin'))"
                          ).stream().strip() == f"False {most}"


def test_a_later_part_needs_a_first_part_and_a_part_number_is_checked(kernel: RunningKernel) -> None:
    panel = Panel(kernel)
    alone = panel.ask("write", path="alone.bin", data=base64.b64encode(b"x").decode(), part=2)
    assert alone["ok"] is False and "no part 1" in alone["error"], alone
    for bad in (0, -2, 1.5, "2", True):
        answer = panel.ask("write", path="parts.bin", data=base64.b64encode(b"x").decode(), part=bad)
        assert answer["ok"] is False and "part must be" in answer["error"], (bad, answer)
    assert panel.ask("write", path="parts.bin", data=base64.b64encode(b"abc").decode(), part=1)["ok"]
    assert panel.ask("write", path="parts.bin", data=base64.b64encode(b"d").decode(), part=2)["ok"]
    assert panel.ask("write", path="parts.bin", data=base64.b64encode(b"e").decode(), part=-1)["ok"]
    assert kernel.execute("import os\nprint(open('parts.bin').read(), os.path.exists('alone.bin'))"
                          ).stream().strip() == "abcde False"
    # Part 1 again starts the file again.
    assert panel.ask("write", path="parts.bin", data=base64.b64encode(b"z").decode(), part=1)["ok"]
    assert kernel.execute("print(open('parts.bin').read())").stream().strip() == "z"


def test_parts_are_counted_against_the_quota_before_they_are_written(kernel: RunningKernel) -> None:
    panel = Panel(kernel)
    assert panel.ask("limits", set={"disk": "3MiB"})["ok"]
    try:
        kernel.execute("import os\nfor f in ('exactly.bin', 'parts.bin'):\n    os.path.exists(f) and os.remove(f)")
        part = MIB
        answers = _upload(panel, "quota.bin", b"q" * (5 * MIB), part)
        # Two host writes in a row, no cell between: the second part must see the first.
        oks = [a["ok"] for a in answers]
        assert oks[:2] == [True, True] and oks[-1] is False and len(oks) in (3, 4), answers
        assert "disk quota" in answers[-1]["error"] and answers[-1]["error"].startswith("upload: ")
        used = panel.ask("info")["disk_used"]["bytes"]
        assert used <= 3 * MIB
    finally:
        panel.ask("limits", set={"disk": "2GiB"})
