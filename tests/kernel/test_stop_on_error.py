"""Stop-on-error: the cells queued behind a failed one are aborted, as ipykernel does,
and a cell sent after the failed cell's reply runs (ipykernel's own order, reply first
and abort after, loses it when its main thread is slow between the two)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from support.kernel_client import RunningKernel, native_and_wasm


def _replies_to_queued(kernel: RunningKernel, codes: list[str]) -> list[str]:
    """Send every cell at once, as Run All does; their replies' statuses in order."""
    ids = [kernel.kc.execute(code) for code in codes]
    statuses: dict[str, str] = {}
    while len(statuses) < len(ids):
        reply = kernel.kc.get_shell_msg(timeout=120)
        if reply["parent_header"].get("msg_id") in ids:
            statuses[reply["parent_header"]["msg_id"]] = reply["content"]["status"]
    return [statuses[i] for i in ids]


def _reply_status(kernel: RunningKernel, code: str) -> str:
    return _replies_to_queued(kernel, [code])[0]


def test_cells_queued_behind_a_failed_cell_are_aborted_as_on_ipykernel(tmp_path: Path) -> None:
    codes = ["x = 1", "1/0", "x = 2", "x = 3"]
    with native_and_wasm(tmp_path) as (native, wasm):
        for kernel in (native, wasm):
            kernel.execute("x = 0", timeout=120)
        seen = [_replies_to_queued(kernel, codes) for kernel in (native, wasm)]
        assert seen[1] == seen[0] == ["ok", "error", "aborted", "aborted"]
        assert [k.execute("x").of_type("execute_result")[0]["data"]["text/plain"] for k in (native, wasm)] == ["1", "1"]


# A main thread descheduled between the error reply and the abort, made certain: the
# kernel's process waits 0.5 s at the start of ipykernel's _abort_queues.
_SLOW_ABORT = textwrap.dedent("""
    import time
    from ipykernel import kernelbase
    _abort_queues = kernelbase.Kernel._abort_queues
    def _slow(self, *args, **kwargs):
        time.sleep(0.5)
        return _abort_queues(self, *args, **kwargs)
    kernelbase.Kernel._abort_queues = _slow
""")


def test_a_cell_sent_after_the_error_reply_runs_even_if_the_kernel_is_slow_to_abort(tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SLOW_ABORT)
    kernel = RunningKernel(tmp_path / "wasm", env={"PYTHONPATH": str(hook)})
    try:
        kernel.execute("1", timeout=120)
        for failing in ("1/0", "%cat no-such-file"):
            # The next cell goes as soon as the reply comes, not the idle status after it:
            # as a frontend's next Shift+Enter, or a Run All that waits for each reply.
            assert _reply_status(kernel, failing) == "error"
            assert _reply_status(kernel, "1+1") == "ok", f"the cell sent after {failing!r}'s error reply was aborted"
        assert _replies_to_queued(kernel, ["1/0", "2"]) == ["error", "aborted"]  # still aborts the queued
    finally:
        kernel.shutdown()
