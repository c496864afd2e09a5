"""In, Out, _ and %history as IPython keeps them, with the host's store as the
history: correct after the interpreter restarts inside a kernel session (exit(),
%reset), after a kernel restart, and rolled back with an interrupted or undone cell."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel

pytestmark = pytest.mark.slow  # a kernel of its own per case, restarted


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[RunningKernel]:
    notebook = tmp_path / "course" / "lesson.ipynb"
    notebook.parent.mkdir()
    k = RunningKernel(tmp_path / "jupyter", cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
    yield k
    k.shutdown()


def printed(kernel: RunningKernel, code: str) -> str:
    run = kernel.execute(code)
    assert run.status == "ok", run.stream("stderr")
    return run.stream()


def test_in_out_and_underscores_number_the_cells(kernel: RunningKernel) -> None:
    kernel.execute("a = 1")
    kernel.execute("a + 1")
    kernel.execute("%files")  # a host magic is a cell too
    assert printed(kernel, "print(In[1], In[2], In[3], Out[2], _, _2, _i2)") == "a = 1 a + 1 %files 2 2 2 a + 1\n"


def test_in_survives_a_fresh_interpreter_within_the_kernel(kernel: RunningKernel) -> None:
    kernel.execute("a = 1")
    kernel.execute("b = 2")
    assert kernel.execute("exit()").status == "ok"
    # IPython keeps exit and quit out of its history (HistoryManager.store_inputs): In[3] is empty.
    assert printed(kernel, "print(In[1:4], 'a' in dir())") == "['a = 1', 'b = 2', ''] False\n"
    kernel.execute("%reset -f")
    out = printed(kernel, "print(len(In), In[1], In[5])")  # In[6] is this cell
    assert out == "7 a = 1 %reset -f\n"
    history = printed(kernel, "%history -n")
    assert "   1: a = 1\n   2: b = 2\n" in history and "   5: %reset -f\n" in history


def test_os_exit_is_an_error_reply_and_the_next_cell_runs_on_a_fresh_interpreter(kernel: RunningKernel) -> None:
    kernel.execute("a = 1")
    run = kernel.execute("import os\nos._exit(0)")
    reply = run.reply["content"]
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "SystemExit", "0")
    assert "os._exit" in reply["traceback"][0] and run.error is not None  # shown in the cell too
    assert printed(kernel, "print('a' in dir(), In[2].splitlines()[-1])") == "False os._exit(0)\n"


def test_a_restarted_kernel_starts_a_new_history_session_and_reads_the_old(kernel: RunningKernel) -> None:
    kernel.execute("first_value = 41")
    kernel.restart()
    # As ipykernel: In holds only this kernel's cells, and IPython counts a cell as it starts.
    assert printed(kernel, "print(len(In), get_ipython().execution_count)") == "2 2\n"
    assert "first_value = 41" in printed(kernel, "%history -g first_value")
    assert "first_value = 41" in printed(kernel, "%history ~1/1")
    tail = kernel.request("history", hist_access_type="tail", n=5, output=False, raw=True)
    assert any(entry[2] == "first_value = 41" for entry in tail["content"]["history"])


def test_an_interrupted_cell_is_in_in_and_leaves_out_and_underscore_as_before(kernel: RunningKernel) -> None:
    """As on ipykernel: the interrupted cell ran, so In has it; it produced no result."""
    kernel.execute("'before'")
    code = "x = 'during'\nwhile True:\n    pass"
    run, _ = kernel.interrupt_after(code, delay=1.0)
    assert run.reply["content"]["ename"] == "KeyboardInterrupt"
    count = run.reply["content"]["execution_count"]
    assert printed(kernel, f"print(In[{count}] == {code!r}, _, {count} in Out, x)") == "True before False during\n"


def test_undo_takes_back_in_out_and_underscore(kernel: RunningKernel) -> None:
    kernel.execute("'kept'")
    done = kernel.execute("'undone'")
    count = done.reply["content"]["execution_count"]
    assert kernel.execute("%undo").status == "ok"
    assert printed(kernel, f"print(_, {count} in Out, repr(In[{count}]))") == "kept False ''\n"


def test_guest_code_cannot_write_the_hosts_history(kernel: RunningKernel) -> None:
    kernel.execute("secret_input = 1")
    kernel.execute("get_ipython().history_manager.input_hist_raw[1] = 'forged'\nIn[1] = 'forged'")
    kernel.restart()
    assert printed(kernel, "%history ~1/1") == "secret_input = 1\n"


def test_history_tail_spans_this_session_and_the_ones_before(kernel: RunningKernel) -> None:
    kernel.execute("a1 = 1")
    kernel.execute("a2 = 2")
    assert printed(kernel, "%history -l 2") == "a1 = 1\na2 = 2\n"  # not the cell asking, as ipykernel
    kernel.restart()
    kernel.execute("b1 = 1")
    assert printed(kernel, "%history -l 3") == "a2 = 2\n%history -l 2\nb1 = 1\n"
