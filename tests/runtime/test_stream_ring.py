"""stdout and stderr through the ring in guest memory: order kept across streams,
displays and wrap-around, output shown while a cell computes, and a ring the guest
breaks on purpose costs it its own output at most."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox


@pytest.mark.slow
def test_interleaved_streams_keep_their_order_through_many_wraps_of_the_ring(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        r = sb.execute("import sys\nfor i in range(60000):\n"
                       "    print('x' * (i % 7), i, file=sys.stderr if i % 3 == 0 else sys.stdout)")
        assert r.success
        assert r.stdout == "".join(f"{'x' * (i % 7)} {i}\n" for i in range(60000) if i % 3)
        assert r.stderr == "".join(f"{'x' * (i % 7)} {i}\n" for i in range(60000) if i % 3 == 0)
    finally:
        sb.close()


def test_prints_displays_and_direct_writes_arrive_in_the_order_they_were_made(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        order: list[str] = []
        r = sb.execute(
            "import os\nfrom IPython.display import display\nprint('one')\ndisplay('two')\n"
            "os.write(1, b'three\\n')\nprint('four')",
            on_output=lambda name, text: order.append(text),
            on_display=lambda out: order.append(out.data["text/plain"] + "\n"),
        )
        assert r.success
        assert "".join(order) == "one\n'two'\nthree\nfour\n"
    finally:
        sb.close()


@pytest.mark.slow
def test_a_line_shows_while_the_cell_is_still_computing(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        seen: list[tuple[float, str]] = []
        start = time.monotonic()
        r = sb.execute("print('started')\nx = 0\nfor i in range(20_000_000):\n    x += i\nprint('done')",
                       on_output=lambda name, text: seen.append((time.monotonic() - start, text)))
        assert r.success
        assert seen[0][1] == "started\n" and seen[-1][1] == "done\n"
        # Before the loop ended, not with the cell's end (order, not a time bound).
        assert len(seen) >= 2
    finally:
        sb.close()


def test_a_ring_broken_by_the_guest_drops_only_its_own_output_and_streams_go_on(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        r = sb.execute("import _wasm_kernel_guest as g\n"
                       "g._ring_words[(g._ring_header[0] % g._RING_SIZE) >> 2] = (7 << 24) | 5\n"  # fd 7: no such stream
                       "g._ring_header[0] = (g._ring_header[0] + 12) & 0xFFFFFFFF")
        assert r.success
        r = sb.execute("import _wasm_kernel_guest as g\ng._ring_header[0] = (g._ring_header[0] + 10**6) & 0xFFFFFFFF")
        assert r.success  # counters that do not add up: dropped
        assert sb.execute("print('still here')").stdout == "still here\n"
        # A registration that points outside its memory is refused.
        r = sb.execute("import _wasm_kernel_guest as g\n"
                       "print(g.call({'op': 'stream_ring', 'address': 2**32 - 64, 'size': 4096}))")
        assert "bad ring" in r.stdout
        assert sb.execute("print('and here')").stdout == "and here\n"
    finally:
        sb.close()
