"""%time, %timeit and %%timeit are IPython's own, run by the shell in the guest on the
guest's clock, and print what IPython prints."""

import re

import pytest

from wasm_kernel import PythonSandbox

UNIT = r"\d+(?:\.\d+)? (?:ns|µs|μs|ms|s)"  # IPython writes the Greek mu
# IPython (native too) may first warn that the slowest run took N times the fastest.
TIMEIT_LINE = re.compile(
    r"^(?:The slowest run took [\d.]+ times longer than the fastest\..*\n)?"
    rf"({UNIT}) ± ({UNIT}) per loop \(mean ± std\. dev\. of (\d+) runs?, ([\d,]+) loops? each\)\n$"
)


def test_time_prints_cpu_and_wall_time_and_keeps_the_value(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("%time sum(range(1000))")
    assert r.success, r
    assert re.fullmatch(rf"CPU times: user {UNIT}, sys: {UNIT}, total: {UNIT}\nWall time: {UNIT}\n", r.stdout), r.stdout
    assert r.outputs[0].kind == "execute_result"
    assert r.outputs[0].data["text/plain"] == "499500"


SECONDS = {"ns": 1e-9, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}


def test_cell_time_measures_the_cell(sandbox: PythonSandbox) -> None:
    # Its own 0.3 s sleep at least (the guest's clock counts it), and far less than
    # the 30 s a broken clock or a lost wake-up would give; the speed is benchmarks'.
    r = sandbox.execute("%%time\nimport time\ntime.sleep(0.3)")
    m = re.search(r"Wall time: (\d+(?:\.\d+)?) (ns|µs|μs|ms|s)\n$", r.stdout)
    assert m, r.stdout
    assert 0.3 <= float(m.group(1)) * SECONDS[m.group(2)] < 30, r.stdout


def test_time_of_a_raising_statement_shows_the_error(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("%time 1 / 0")
    assert r.error is not None and r.error.ename == "ZeroDivisionError"


def test_timeit_prints_ipythons_line_and_returns_nothing(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("%timeit -n 1000 -r 3 x ** 2")
    assert not r.success  # x is not defined yet: IPython's NameError
    r = sandbox.execute("x = 3\n%timeit -n 1000 -r 3 x ** 2")
    assert r.success, r
    m = TIMEIT_LINE.match(r.stdout)
    assert m, r.stdout
    assert m.group(3) == "3" and m.group(4) == "1,000"
    assert [o for o in r.outputs if o.kind == "execute_result"] == []


def test_timeit_o_returns_the_result_object(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("res = %timeit -o -q -n 10 -r 2 sum(range(10))\nres.loops, res.repeat")
    assert r.success, r
    assert r.outputs[-1].data["text/plain"] == "(10, 2)"


def test_cell_timeit_runs_setup_from_the_first_line(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("%%timeit -n 5 -r 2 items = list(range(100))\nsorted(items)")
    assert r.success, r
    assert TIMEIT_LINE.match(r.stdout), r.stdout
    assert "items" not in sandbox.execute("print(dir())").stdout  # setup ran in timeit's namespace


@pytest.mark.slow
def test_timeit_is_stopped_by_the_cells_limits(sandbox: PythonSandbox) -> None:
    sandbox.policy = sandbox.policy.with_changes(deadline_seconds=1.0)
    r = sandbox.execute("import time\n%timeit -n 1 -r 1 time.sleep(30)")
    assert r.trap == "deadline" and r.rolled_back
