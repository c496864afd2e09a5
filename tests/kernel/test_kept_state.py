"""A notebook's interpreter survives its kernel: saved at shutdown, woken at the next start.

Real kernels over jupyter_client, named by a notebook (JPY_SESSION_NAME) as Jupyter
Server names them: shut one down, start another on the same notebook, and the
variables, imports, functions, classes and the execution count are back, with one
line saying so. Restart and %reset start afresh, as on ipykernel; kernels no
notebook names keep nothing.
"""

from __future__ import annotations

import re
import os
import signal
import time
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel, blank_notebook, notebook_kernel, saved_state_file

pytestmark = pytest.mark.slow  # several kernels per test

SETUP = """\
import numpy as np
import collections
data = np.arange(1_000_000)
def double(v):
    return 2 * v
class Box:
    def __init__(self, v):
        self.v = v
box = Box(41)
counts = collections.Counter('mississippi')
"""


state_file = saved_state_file


def saved_after(data: Path, mtime_ns: int, timeout: float = 30) -> int:
    """Wait for a state file newer than mtime_ns; its mtime."""
    deadline = time.monotonic() + timeout
    while True:
        found = list((data / "wasm-kernel" / "sessions" / ".wasm-kernel" / "state").glob("*/state.bin"))
        if found and found[0].stat().st_mtime_ns > mtime_ns:
            return found[0].stat().st_mtime_ns
        assert time.monotonic() < deadline, "no new save"
        time.sleep(0.05)


start = notebook_kernel


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    return blank_notebook(tmp_path / "course" / "lesson.ipynb")


def test_a_shut_down_notebook_resumes_its_variables_imports_functions_and_count(tmp_path: Path, notebook: Path) -> None:
    data = tmp_path / "jupyter"
    first = start(data, notebook)
    try:
        assert first.execute(SETUP).status == "ok"
        assert first.execute("box.v += 1").status == "ok"
        assert first.execute("f = open('log.txt', 'w'); f.write('kept'); f.flush()\n"
                             "h = open('gone.txt', 'w')\n"
                             "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.title('before'); plt.show()").status == "ok"
        session_id = first.session_id()
    finally:
        first.shutdown()
    assert state_file(data).stat().st_size > 0
    (data / "wasm-kernel" / "sessions" / session_id / "gone.txt").unlink()  # removed while the kernel slept

    second = start(data, notebook)
    try:
        run = second.execute("print(double(box.v), int(data.sum(dtype=np.int64)), counts['s'], np.__name__)")
        assert run.status == "ok", run.reply
        # The notice is information: on stdout, before what the cell printed, never on stderr.
        notice, printed = run.notices(), run.printed()
        assert printed == "84 499999500000 4 numpy\n" and notice.count("\n") == 1
        assert notice.startswith("wasm-kernel: resumed the state saved at") and run.stream("stderr") == ""
        assert "(4 cells," in notice
        # The file still there is open again, where it was; the deleted one cannot be.
        assert "1 file open at shutdown was closed" in notice
        assert run.reply["content"]["execution_count"] == 5
        again = second.execute("In[1].splitlines()[0], _ih[-1]")
        assert again.reply["content"]["execution_count"] == 6
        assert "import numpy as np" in again.of_type("execute_result")[0]["data"]["text/plain"]
        assert second.execute("f.write(' and more'); f.close(); print(open('log.txt').read())").stream() == \
            "kept and more\n"
        # The file object whose file went fails cleanly; its number is never reused.
        stale = second.execute("h.write('x'); h.flush()")
        assert stale.status == "error" and stale.error is not None and stale.error["ename"] == "OSError"
        assert second.execute("g = open('new.txt', 'w'); print(g.fileno() != h.fileno())").stream() == "True\n"
        # matplotlib's open font files came back with it: it draws again.
        plot = second.execute("plt.figure(); plt.plot([3, 1]); plt.title('after'); plt.show()")
        assert plot.status == "ok", plot.reply
        assert any("image/png" in d["data"] for d in plot.displays())
    finally:
        second.shutdown()


def test_restart_and_reset_start_afresh_as_on_ipykernel(tmp_path: Path, notebook: Path) -> None:
    data = tmp_path / "jupyter"
    k = start(data, notebook)
    try:
        assert k.execute("x = 1").status == "ok"
        k.restart()  # the restart's shutdown keeps nothing, and drops nothing it had
        run = k.execute("print('x' in dir())")
        assert run.stream() == "False\n"
        assert "resumed" not in run.stream("stderr") + run.stream()
        assert k.execute("y = 2").status == "ok"
    finally:
        k.shutdown()
    k = start(data, notebook)
    try:
        run = k.execute("print(y)")
        assert run.printed() == "2\n" and "resumed the state" in run.notices()
        assert k.execute("%reset -f").status == "ok"
    finally:
        k.shutdown()
    # %reset then shutdown: the saved state is the fresh interpreter's, not y's.
    k = start(data, notebook)
    try:
        run = k.execute("print('y' in dir())")
        assert run.printed() == "False\n"
    finally:
        k.shutdown()


def run_and_shut_down(data: Path, notebook: Path, code: str) -> None:
    """A kernel on the notebook runs `code` and shuts down (saving its state)."""
    k = start(data, notebook)
    try:
        assert k.execute(code).status == "ok"
    finally:
        k.shutdown()


def test_a_tampered_state_is_refused_with_one_line_and_a_fresh_start(tmp_path: Path, notebook: Path) -> None:
    data = tmp_path / "jupyter"
    run_and_shut_down(data, notebook, "secret = 42")
    path = state_file(data)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    k = start(data, notebook)
    try:
        run = k.execute("print('secret' in dir())")
        assert run.stream() == "False\n"
        notice = run.stream("stderr")
        assert "the saved state was not resumed: the state file failed its authentication check" in notice
        assert "fresh start" in notice
        assert run.reply["content"]["execution_count"] == 1
    finally:
        k.shutdown()


def test_another_wasm_kernel_version_gets_a_fresh_start(tmp_path: Path, notebook: Path) -> None:
    """A state's key names the version, guest and preload list it was saved with."""
    data = tmp_path / "jupyter"
    run_and_shut_down(data, notebook, "z = 3")
    # Another preload list stands for any other runtime: the image key changes.
    k = RunningKernel(data, cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)},
                      argv=["--WasmKernel.preload_modules=json"])
    try:
        run = k.execute("print('z' in dir())")
        assert run.stream() == "False\n"
        assert "saved by another version of wasm-kernel or its guest, or with other preloaded modules" in run.stream("stderr")
    finally:
        k.shutdown()


def test_unnamed_kernels_keep_no_state(tmp_path: Path) -> None:
    data = tmp_path / "jupyter"
    k = RunningKernel(data, env={k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"})
    try:
        assert k.execute("x = 1").status == "ok"
    finally:
        k.shutdown()
    assert not list((data / "wasm-kernel" / "sessions" / ".wasm-kernel").glob("state/*/state.bin"))


def test_sigterm_saves_the_state_even_during_a_running_cell(tmp_path: Path, notebook: Path) -> None:
    """A supervisor's SIGTERM (a drained host, a stopped container) is a shutdown:
    the running cell is stopped, the interpreter saved, and the process ends."""
    data = tmp_path / "jupyter"
    k = start(data, notebook)
    try:
        assert k.execute("kept = 'before'").status == "ok"
        k.kc.execute("import time\nwhile True: time.sleep(0.01)")
        time.sleep(1.0)
        pid = k.km.provisioner.process.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while k.km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not k.km.is_alive(), "the kernel did not end after SIGTERM"
    finally:
        k.shutdown()
    assert state_file(data).stat().st_size > 0, k.log()
    k = start(data, notebook)
    try:
        run = k.execute("print(kept)")
        assert run.printed() == "before\n" and "resumed the state" in run.notices()
    finally:
        k.shutdown()


def test_session_magic_sessions_show_and_prune_tell_of_the_saved_state(tmp_path: Path, notebook: Path) -> None:
    from support.cli_runs import wk

    data = tmp_path / "jupyter"
    k = start(data, notebook)
    try:
        assert k.execute("w = 1").status == "ok"
        text = k.execute("%session").displays()[0]["data"]["text/plain"]
        assert "kept at shutdown; this kernel started afresh" in text
        session_id = k.session_id()
    finally:
        k.shutdown()
    root = data / "wasm-kernel" / "sessions"
    shown = wk("sessions", "show", session_id, "--root", root).stdout
    assert "saved_state:" in shown and " MB, saved 20" in shown, shown
    k = start(data, notebook)
    try:
        text = k.execute("%session").displays()[0]["data"]["text/plain"]
        assert "this kernel resumed the state saved 20" in text and "(3 cells," in text, text  # w = 1 and two %session
    finally:
        k.shutdown()
    # Prune drops old states first: the session stays, its state goes.
    pruned = wk("sessions", "prune", "--root", root, "--older-than", "30d", "--states-older-than", "0s").stdout
    assert "dropped 1 old saved state" in pruned and "Deleted 0 sessions" in pruned, pruned
    assert "saved_state:      -" in wk("sessions", "show", session_id, "--root", root).stdout
    k = start(data, notebook)
    try:
        run = k.execute("print('w' in dir())")
        assert run.stream() == "False\n" and "resumed" not in run.stream("stderr")  # no notice on either
    finally:
        k.shutdown()


def test_with_state_save_every_a_kernel_killed_with_sigkill_resumes_its_last_save(tmp_path: Path,
                                                                                 notebook: Path) -> None:
    data = tmp_path / "jupyter"
    k = RunningKernel(data, cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)},
                      argv=["--WasmKernel.state_save_every=1"])
    try:
        assert k.execute("a = 1").status == "ok"
        first = saved_after(data, 0)  # saved after the first cell's reply...
        assert k.execute("b = a + 1").status == "ok"
        saved_after(data, first)  # ...and again after the second's (the rename is a save's last step)
        k.km.provisioner.process.kill()  # type: ignore[union-attr]  # SIGKILL: no shutdown, no save
        k.km.provisioner.process.wait(10)  # type: ignore[union-attr]
    finally:
        k.shutdown()
    k = start(data, notebook)
    try:
        run = k.execute("print(a, b)")
        assert run.printed() == "1 2\n" and "(2 cells," in run.notices(), run.outputs
    finally:
        k.shutdown()


def test_widgets_come_back_for_a_frontend_that_asks_for_their_state(tmp_path: Path, notebook: Path) -> None:
    """A widget's model lives in the kernel: a frontend that reconnects asks
    comm_info for the widget comms and request_state for each (JupyterLab's widget
    manager does), and gets the saved state; changes reach the woken observers."""
    import queue

    data = tmp_path / "jupyter"
    k = start(data, notebook)
    try:
        run = k.execute("import ipywidgets as w\nslider = w.IntSlider(value=3)\nseen = []\n"
                        "slider.observe(lambda c: seen.append(c['new']), 'value')\ndisplay(slider)\nslider.model_id")
        model_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    finally:
        k.shutdown()
    k = start(data, notebook)
    try:
        info = k.request("comm_info", target_name="jupyter.widget")["content"]
        assert model_id in info["comms"], info
        msg = k.kc.session.msg("comm_msg", {"comm_id": model_id, "data": {"method": "request_state"}})
        k.kc.session.send(k.kc.shell_channel.socket, msg)
        deadline, state = time.monotonic() + 30, None
        while state is None:
            assert time.monotonic() < deadline, "no state for the widget"
            try:
                got = k.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            if got["msg_type"] == "comm_msg" and got["content"]["comm_id"] == model_id:
                state = got["content"]["data"].get("state")
        assert state["value"] == 3, state
        msg = k.kc.session.msg("comm_msg", {"comm_id": model_id, "data": {
            "method": "update", "state": {"value": 9}, "buffer_paths": []}})
        k.kc.session.send(k.kc.shell_channel.socket, msg)
        deadline = time.monotonic() + 30
        while k.execute("print(seen)").stream() != "[9]\n":
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        k.shutdown()


def test_the_notebooks_limits_come_back_with_its_interpreter(tmp_path: Path, notebook: Path) -> None:
    data = tmp_path / "jupyter"
    run_and_shut_down(data, notebook, "%limits memory=512MiB deadline=30s")
    k = start(data, notebook)
    try:
        table = k.execute("%limits").displays()[0]["data"]["text/plain"]
        assert re.search(r"^memory\s+512 MiB", table, re.MULTILINE), table
        assert re.search(r"^deadline\s+30 s", table, re.MULTILINE), table
    finally:
        k.shutdown()
    # The operator lowered the deadline since: the saved 30 s is above it, today's rule wins.
    k = RunningKernel(data, cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)},
                      argv=["--WasmKernel.deadline=10"])
    try:
        run = k.execute("%limits")
        assert "resumed the state" in run.stream()
        table = run.displays()[0]["data"]["text/plain"]
        assert re.search(r"^deadline\s+10 s", table, re.MULTILINE), table
        assert re.search(r"^memory\s+512 MiB", table, re.MULTILINE), table
    finally:
        k.shutdown()
