"""%time and %timeit in the guest: execute(timed=True) and _wasm_kernel_introspect.timeit,
printing what IPython prints."""

import re

import pytest

from wasm_kernel import PythonSandbox

UNIT = r"\d+(?:\.\d+)? (?:ns|µs|ms|s)"
TIMEIT_LINE = re.compile(
    rf"^({UNIT}) ± ({UNIT}) per loop \(mean ± std\. dev\. of (\d+) runs?, ([\d,]+) loops? each\)\n$"
)


def timeit_call(stmt: str, setup: str = "pass", *more: object) -> str:
    """The cell a kernel generates for `%timeit` / `%%timeit`."""
    args = ", ".join(repr(a) for a in (stmt, setup, *more))
    return f"__import__('_wasm_kernel_guest').introspect().timeit({args})"


# --- %time ------------------------------------------------------------------


def test_timed_cell_prints_wall_time_after_its_output_and_keeps_its_value(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("print('working')\nsum(range(1000))", timed=True)
    assert r.success, r
    assert re.fullmatch(rf"working\nWall time: {UNIT}\n", r.stdout), r.stdout
    assert r.outputs[0].kind == "execute_result"
    assert r.outputs[0].data["text/plain"] == "499500"


def test_timed_cell_measures_the_cell(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import time\ntime.sleep(0.3)", timed=True)
    assert re.fullmatch(r"Wall time: 3\d\d ms\n", r.stdout), r.stdout


def test_a_timed_cell_that_raises_prints_no_time(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("1 / 0", timed=True)
    assert r.error is not None and r.error.ename == "ZeroDivisionError"
    assert "Wall time" not in r.stdout


def test_untimed_cells_print_no_time(sandbox: PythonSandbox) -> None:
    assert sandbox.execute("x = 1").stdout == ""


def test_times_are_formatted_as_ipython_does(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        "from _wasm_kernel_guest import format_time\n"
        "print([format_time(t) for t in (0, 1.5e-9, 2.5e-6, 0.0123, 1.5, 75, 3725)])"
    )
    assert r.stdout == "['0 ns', '1.5 ns', '2.5 µs', '12.3 ms', '1.5 s', '1min 15s', '1h 2min 5s']\n"


# --- %timeit ----------------------------------------------------------------


def test_timeit_prints_ipythons_line_and_returns_nothing(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(timeit_call("x ** 2", "x = 3", 1000, 3))
    assert r.success, r
    m = TIMEIT_LINE.match(r.stdout)
    assert m, r.stdout
    assert m.group(3, 4) == ("3", "1,000")
    assert r.outputs == []  # no Out value, as %timeit without -o


def test_timeit_sees_the_users_namespace(sandbox: PythonSandbox) -> None:
    sandbox.execute("def double(v):\n    return v * 2\nvalue = 21")
    r = sandbox.execute(timeit_call("assert double(value) == 42", "pass", 10, 2))
    assert r.success, r
    assert TIMEIT_LINE.match(r.stdout), r.stdout


def test_cell_timeit_takes_setup_from_the_line_and_a_multiline_body(sandbox: PythonSandbox) -> None:
    body = "total = 0\nfor i in range(n):\n    total += i\nassert total == 45"
    r = sandbox.execute(timeit_call(body, "n = 10", 100, 2))
    assert r.success, r
    assert TIMEIT_LINE.match(r.stdout), r.stdout
    assert sandbox.execute("print('total' in dir(), 'n' in dir())").stdout == "False False\n"


def test_timeit_singular_wording_for_one_run_of_one_loop(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(timeit_call("pass", "pass", 1, 1))
    assert re.fullmatch(rf"{UNIT} ± {UNIT} per loop \(mean ± std\. dev\. of 1 run, 1 loop each\)\n", r.stdout)


def test_timeit_autorange_picks_a_power_of_ten_reaching_point_two_seconds(sandbox: PythonSandbox) -> None:
    # 1 loop of 25 ms is too short, 10 loops (250 ms) are enough: IPython picks 10.
    r = sandbox.execute(timeit_call("time.sleep(0.025)", "import time", 0, 2))
    m = TIMEIT_LINE.match(r.stdout)
    assert m, r.stdout
    assert m.group(4) == "10"
    assert m.group(1).endswith(" ms") and 24 <= float(m.group(1).split()[0]) < 40


def test_timeit_quiet_prints_nothing(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(timeit_call("pass", "pass", 10, 2, True))
    assert r.success and r.stdout == ""


@pytest.mark.parametrize("stmt,ename", [("undefined_name", "NameError"), ("1 +* 2", "SyntaxError")])
def test_timeit_errors_are_cell_errors(sandbox: PythonSandbox, stmt: str, ename: str) -> None:
    r = sandbox.execute(timeit_call(stmt, "pass", 10, 2))
    assert r.error is not None and r.error.ename == ename
    assert sandbox.execute("print('alive')").stdout == "alive\n"
