"""Resource exhaustion: a cell that takes all it can is stopped by its limits with
one line, and the notebook goes on with its variables as they were."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.security_harness import Target

pytestmark = pytest.mark.slow  # each vector runs until a limit stops it

TIGHT = "%limits cpu=0.3s memory=256MB deadline=20s stdout=64KB stderr=64KB display=64KB"
LOOSE = "%limits cpu=1min memory=2GiB deadline=none stdout=10MiB stderr=10MiB display=32MiB"

# name -> (cell, ename of the reply or None for ok, text the reply or stderr must hold)
VECTORS = {
    # Time metering (the default): no fuel; CPU time bounds the work, checked at every
    # epoch tick, in Python code and inside one long call into C alike.
    "busy-loop": ("while True:\n    pass", "CpuTimeExceeded", "of CPU time"),
    "regex-backtracking": ("import re\nre.match('(a+)+$', 'a' * 40 + 'b')", "CpuTimeExceeded", "of CPU time"),
    "tight-c-loop": ("sum(range(10**15))", "CpuTimeExceeded", "of CPU time"),
    "sleep-forever": ("import time\ntime.sleep(10**6)", "DeadlineExceeded", "deadline"),
    "huge-allocation": ("x = bytearray(1 << 30)", "MemoryError", ""),
    "growing-list": ("x = []\nwhile True:\n    x.append(' ' * 10**6)", None, ""),
    "deep-recursion": ("import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\nf(0)", None, ""),
    "stdout-flood": ("while True:\n    print('x' * 1000)", None, "[stdout was cut at"),
    "stderr-flood": ("import sys\nwhile True:\n    sys.stderr.write('y' * 1000)", None, "[stderr was cut at"),
    "huge-result": ("'z' * 2 * 10**6", None, "[rich output (display) was cut at"),
    "huge-repr": ("class R:\n    def __repr__(self):\n        return 'r' * 2 * 10**6\nR()", None, "[rich output (display) was cut at"),
    "failing-repr": ("class F:\n    def __repr__(self):\n        raise MemoryError\nF()", "NoneType", ""),  # as ipykernel
    "input-flood": ("for _ in range(10**6):\n    input()", None, ""),
    "exception-chain": ("e = None\nfor i in range(10**4):\n    try:\n        raise ValueError(i) from e\n    except ValueError as err:\n        e = err\nraise e", None, ""),
}


@pytest.fixture
def tight(target: Target) -> Iterator[Target]:
    # A fresh interpreter for each: a MemoryError's traceback keeps its frames, and
    # their memory, alive (as on ipykernel), which would starve the next vector.
    assert target.run("%reset -f").status == "ok"
    target.run("survivor = 'still here'")
    assert target.run(TIGHT).status == "ok"
    yield target
    assert target.run(LOOSE).status == "ok"


@pytest.mark.parametrize("name", VECTORS)
def test_a_cell_that_takes_everything_is_stopped_and_the_notebook_goes_on(tight: Target, name: str) -> None:
    code, ename, said = VECTORS[name]
    run = tight.run(code, timeout=180)
    content = run.reply["content"]
    if ename is not None:
        assert content["status"] == "error" and content["ename"] == ename, (name, content)
    if said:
        assert said in content.get("evalue", "") + run.stream("stderr"), (name, tight.shown_text(run)[-1000:])
    assert len(tight.shown_text(run)) < 2_000_000, "a limited cell sent more than its limits allow"
    kept = tight.run("survivor")
    assert kept.of_type("execute_result")[0]["data"]["text/plain"] == "'still here'"
    tight.assert_safe(run)
