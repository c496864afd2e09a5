"""%undo over the wire: the last cell's variables go back, files stay, one level only."""

from __future__ import annotations


import pytest

from support.kernel_client import RunningKernel

pytestmark = pytest.mark.slow  # a kernel of its own for two cases


def result_text(run) -> str:  # type: ignore[no-untyped-def]
    results = run.of_type("execute_result")
    assert results, run.outputs
    return str(results[0]["data"]["text/plain"])


def test_undo_rolls_back_the_last_cell_and_says_files_are_kept(kernel: RunningKernel) -> None:
    assert kernel.execute("x = 1").status == "ok"
    assert kernel.execute("x = 2\nwith open('kept.txt', 'w') as f:\n    f.write('still here')").status == "ok"
    # user_expressions are evaluated by a query after the cell: it sees the undone state.
    run = kernel.execute("%undo", user_expressions={"x": "x"})
    assert run.status == "ok", run.reply
    assert "Files are not rolled back" in run.stream()
    assert run.reply["content"]["user_expressions"]["x"]["data"]["text/plain"] == "1"
    again = kernel.execute("%undo")
    assert again.status == "error"
    assert again.reply["content"]["ename"] == "UsageError"
    assert "already undone" in again.reply["content"]["evalue"]
    assert result_text(kernel.execute("x")) == "1"
    assert result_text(kernel.execute("open('kept.txt').read()")) == "'still here'"


def test_undo_after_reset_has_nothing_to_undo(kernel: RunningKernel) -> None:
    assert kernel.execute("y = 1").status == "ok"
    assert kernel.execute("%reset -f").status == "ok"
    run = kernel.execute("%undo")
    assert run.status == "error" and run.reply["content"]["ename"] == "UsageError"
