"""A kernel records its notebook's activity in the session's updated_at (what prune
measures idleness by): the first cell at once, later cells at most every
TOUCH_EVERY_S (an fsync'd rewrite per cell slowed the next request), and what is
still owed when the kernel shuts down."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from wasm_kernel.kernel.sandbox_kernel import TOUCH_EVERY_S
from wasm_kernel.sessions.metadata import read_metadata

from support.kernel_client import RunningKernel


def updated_at(root: Path, sid: str) -> datetime:
    meta = read_metadata(root, sid)
    assert meta is not None
    return meta.updated_at


def changed_from(root: Path, sid: str, before: datetime, timeout: float = 10.0) -> datetime:
    """updated_at once it moves past `before` (the touch runs after the reply)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = updated_at(root, sid)
        if now > before:
            return now
        time.sleep(0.05)
    raise AssertionError(f"updated_at stayed at {before}")


def test_the_first_cell_is_recorded_at_once_later_ones_at_most_every_interval_and_the_rest_at_shutdown(
    tmp_path: Path,
) -> None:
    notebook = tmp_path / "course" / "lesson.ipynb"
    notebook.parent.mkdir(parents=True)
    k = RunningKernel(tmp_path / "jupyter", cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
    shut = False
    try:
        sid, root = k.session_id(), k.sessions_root
        created = updated_at(root, sid)
        assert k.execute("x = 1").status == "ok"
        first = changed_from(root, sid, created)
        started = time.monotonic()
        for code in ("x += 1", "x", "print(x)"):
            assert k.execute(code).status == "ok"
        time.sleep(0.3)  # a touch per cell would have landed by now
        if time.monotonic() - started < TOUCH_EVERY_S:
            assert updated_at(root, sid) == first
        k.shutdown()
        shut = True
        assert updated_at(root, sid) > first  # the owed activity, recorded on the way out
    finally:
        if not shut:
            k.shutdown()
