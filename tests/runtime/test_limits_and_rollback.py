"""Each limit stops the cell it applies to, and the interpreter rolls back to the
state after the last good cell: the CPU-time budget (time metering, the default),
the fuel budget (fuel metering), the deadline, memory and output."""

from pathlib import Path

from support.sandboxes import make_sandbox

LOOP = "while True:\n    pass"


def test_cpu_time_budget_stops_a_runaway_cell_and_rolls_back(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.5)
    try:
        assert sb.metering == "time"
        assert sb.execute("kept = 'before'").success
        r = sb.execute("kept = 'changed by the failed cell'\n" + LOOP)
        assert not r.success
        assert r.trap == "cpu_time" and r.rolled_back and not r.restarted
        assert r.cpu_ms >= 500 and r.fuel_consumed == 0 and r.metering == "time"
        assert "cpu_seconds" in (r.trap_message or "")
        assert sb.execute("print(kept)").stdout == "before\n"
    finally:
        sb.close()


def test_a_sleeping_cell_uses_no_cpu_time_so_only_the_deadline_bounds_it(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.2, deadline_seconds=30)
    try:
        r = sb.execute("import time\ntime.sleep(0.6)\n'slept'")
        assert r.success, (r.trap, r.error)
        assert r.cpu_ms < 600
    finally:
        sb.close()


def test_fuel_budget_stops_a_runaway_cell_and_rolls_back(workspace: Path) -> None:
    sb = make_sandbox(workspace, metering="fuel", fuel_budget=200_000_000)
    try:
        assert sb.execute("kept = 'before'").success
        r = sb.execute("kept = 'changed by the failed cell'\n" + LOOP)
        assert not r.success
        assert r.trap == "out_of_fuel" and r.rolled_back and not r.restarted
        assert r.fuel_consumed == 200_000_000
        assert "fuel_budget" in (r.trap_message or "")
        assert sb.execute("print(kept)").stdout == "before\n"
    finally:
        sb.close()


def test_fuel_is_deterministic_for_the_same_cells_from_the_same_state(tmp_path: Path) -> None:
    # The first cell imports what result formatting needs: an import searches /app,
    # whose host directory state is outside the guest's determinism.
    cells = ["[0]", "def work():\n    return sum(i * i for i in range(20000))", "work()", "sorted(str(i) for i in range(3000))[:2]"]
    spent = []
    for name in ("a", "b"):
        sb = make_sandbox(tmp_path / name, metering="fuel")
        try:
            spent.append([sb.execute(c).fuel_consumed for c in cells][1:])
        finally:
            sb.close()
    assert spent[0] == spent[1]
    assert all(f > 0 for f in spent[0])


def test_deadline_stops_a_cell_on_wall_clock_time(workspace: Path) -> None:
    sb = make_sandbox(workspace, deadline_seconds=0.5)
    try:
        sb.execute("x = [1, 2, 3]")
        r = sb.execute("x.append(4)\n" + LOOP)
        assert r.trap == "deadline" and r.rolled_back
        # Never before the deadline (the loop never ends by itself, so the stop is it).
        assert r.duration_ms >= 0.9 * 500
        assert "deadline" in (r.trap_message or "")
        assert sb.execute("print(x)").stdout == "[1, 2, 3]\n"
    finally:
        sb.close()


def test_memory_cap_raises_memoryerror_in_the_guest_not_a_crash(workspace: Path) -> None:
    sb = make_sandbox(workspace, memory_bytes=256 * 2**20)
    try:
        sb.execute("survivor = 'alive'")
        r = sb.execute("hog = bytearray(400 * 2**20)")
        assert r.error is not None and r.error.ename == "MemoryError"
        assert r.trap is None
        r = sb.execute("chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))")
        assert r.error is not None and r.error.ename == "MemoryError"
        assert r.memory_used_bytes <= 256 * 2**20
        assert sb.execute("del chunks\nprint(survivor)").stdout == "alive\n"
    finally:
        sb.close()


def test_stdout_is_truncated_with_a_visible_marker_and_flag(workspace: Path) -> None:
    sb = make_sandbox(workspace, stdout_max_bytes=1000, stderr_max_bytes=500)
    try:
        r = sb.execute("import sys\nprint('x' * 5000)\nprint('y' * 5000, file=sys.stderr)\nprint('LATER')")
        assert r.success
        assert r.stdout_truncated and r.stderr_truncated and r.truncated
        assert r.stdout.startswith("x" * 1000)
        assert "truncated after 1000 bytes: the cell's stdout limit" in r.stdout
        assert "LATER" not in r.stdout
        assert "truncated after 500 bytes" in r.stderr
        small = sb.execute("print('ok')")
        assert small.stdout == "ok\n" and not small.truncated
    finally:
        sb.close()


def test_limits_apply_per_cell_so_a_later_cell_gets_a_fresh_budget(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=1.0)
    try:
        for _ in range(3):
            r = sb.execute("s = 0\nfor i in range(50000):\n    s += i")
            assert r.success, r.trap
    finally:
        sb.close()


def test_policy_can_be_lowered_between_cells(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        assert sb.execute("y = 1").success
        sb.policy = sb.policy.with_changes(cpu_seconds=0.1)
        assert sb.execute(LOOP).trap == "cpu_time"
        sb.policy = sb.policy.with_changes(cpu_seconds=None, deadline_seconds=0.3)
        assert sb.execute(LOOP).trap == "deadline"
        assert sb.execute("y").outputs[0].data["text/plain"] == "1"
    finally:
        sb.close()


def test_many_traps_in_a_row_leave_a_working_interpreter(workspace: Path) -> None:
    sb = make_sandbox(workspace, cpu_seconds=0.05)
    try:
        sb.execute("import json\ncount = 0")
        for _ in range(10):
            assert sb.execute("count += 1\n" + LOOP).rolled_back
        r = sb.execute("count += 1\nprint(count, json.dumps({'a': 1}))")
        assert r.stdout == '1 {"a": 1}\n'
    finally:
        sb.close()


def test_rollback_after_numpy_and_pandas_state(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("import numpy as np, pandas as pd\na = np.arange(10)\ndf = pd.DataFrame({'v': a})")
        sb.policy = sb.policy.with_changes(deadline_seconds=0.5)
        r = sb.execute("a[:] = -1\ndf['w'] = 1\n" + LOOP)
        assert r.rolled_back
        r = sb.execute("print(int(a.sum()), list(df.columns))")
        assert r.stdout == "45 ['v']\n"
    finally:
        sb.close()


def test_exit_restarts_the_interpreter_and_keeps_files(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("open('kept.txt', 'w').write('still here')\nv = 1")
        r = sb.execute("exit()")
        assert r.success and r.restarted
        assert "exit()" in r.metadata["restarted_reason"]
        assert r.payload == [{"source": "ask_exit", "keepkernel": False}]
        r = sb.execute("print('v' in dir(), open('kept.txt').read())")
        assert r.stdout == "False still here\n"
    finally:
        sb.close()


def test_sys_exit_is_an_error_that_keeps_the_interpreter_as_in_ipython(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("v = 1")
        r = sb.execute("import sys\nsys.exit(3)")
        assert not r.success and not r.restarted
        assert r.error is not None and (r.error.ename, r.error.evalue) == ("SystemExit", "3")
        assert "To exit: use 'exit', 'quit', or Ctrl-D." in r.stderr
        assert sb.execute("print(v)").stdout == "1\n"
    finally:
        sb.close()


def test_exit_keep_kernel_only_tells_the_frontend(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("v = 1")
        r = sb.execute("exit(keep_kernel=True)")
        assert r.success and not r.restarted
        assert r.payload == [{"source": "ask_exit", "keepkernel": True}]
        assert sb.execute("print(v)").stdout == "1\n"
    finally:
        sb.close()


def test_os_exit_restarts_the_interpreter_instead_of_rolling_back(workspace: Path) -> None:
    sb = make_sandbox(workspace)
    try:
        sb.execute("v = 1")
        r = sb.execute("import os\nos._exit(7)")
        assert (r.exit_code, r.restarted, r.rolled_back, r.trap) == (7, True, False, None)
        assert sb.execute("print('v' in dir())").stdout == "False\n"
    finally:
        sb.close()


def test_os_exit_with_status_0_still_fails_the_cell(workspace: Path) -> None:
    # ipykernel's kernel dies on os._exit(0) and nbclient stops with DeadKernelError: a
    # grader must not read the rest of the notebook as run on the state it expected.
    sb = make_sandbox(workspace)
    try:
        r = sb.execute("import os\nos._exit(0)\nprint('never')")
        assert (r.success, r.exit_code, r.restarted, r.stdout) == (False, 0, True, "")
        assert "os._exit" in r.metadata["restarted_reason"] and "files kept" in r.metadata["restarted_reason"]
    finally:
        sb.close()


def test_the_fuel_budget_holds_for_a_turn_that_owes_the_last_checkpoint(workspace: Path) -> None:
    # Straight on the guest, with no checkpoint_soon() between turns: the next turn
    # takes the owed checkpoint first, and that must not leave it unlimited fuel.
    from wasm_kernel.runtime.guest_config import GuestOptions, TurnLimits
    from wasm_kernel.runtime.provisioning import new_guest

    guest = new_guest(workspace, options=GuestOptions(metering="fuel"))
    try:
        assert guest.run_cell("kept = 'before'", limits=TurnLimits()).status == "ok"
        out = guest.run_cell("kept = 'changed'\n" + LOOP, limits=TurnLimits(fuel=200_000_000, deadline_seconds=60))
        assert (out.status, out.trap, out.fuel_consumed) == ("trap", "out_of_fuel", 200_000_000)
    finally:
        guest.close()


def test_repeated_stops_of_a_cell_that_allocates_do_not_use_up_the_guests_memory(workspace: Path) -> None:
    # The restored allocator never reuses what a stopped cell grew: left in place,
    # each stop of this cell lost its 24 MiB for good, a MemoryError after ~80.
    sb = make_sandbox(workspace, deadline_seconds=0.3)
    try:
        assert sb.execute("src = bytes(24 << 20)").success
        sizes = []
        for _ in range(6):
            stopped = sb.execute("while True:\n    d = bytes(src)\n    e = d[7:]\n    del d, e")
            assert stopped.trap == "deadline" and stopped.rolled_back, stopped.trap
            after = sb.execute("x = 1")
            assert after.success
            sizes.append(after.memory_used_bytes)
        assert max(sizes) - min(sizes) <= 8 << 20, [size >> 20 for size in sizes]
    finally:
        sb.close()
