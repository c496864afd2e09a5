"""PythonSandbox.query: what a Jupyter kernel asks about the live namespace
(complete, inspect, is_complete, user_expressions) without running a cell. The
guest's IPython shell answers, as ipykernel's does: these tests pin IPython's
answers and the sandbox's guarantees around them (limits, rollback, no trace)."""

import re
from typing import Any

import pytest

from wasm_kernel import PythonSandbox
from wasm_kernel.core.sandbox import QueryError

ANSI = re.compile(r"\x1b\[[0-9;]*m")

SETUP = """
import os
data = {'alpha': 1, 'beta': 2, "it's": 3, 7: 'int key'}
def add(a, b=2):
    '''Add two things.'''
    return a + b
class Point:
    '''A point.'''
    def __init__(self, x):
        self.x = x
        self.label = 'p'
p = Point(3)
"""


@pytest.fixture
def sb(sandbox: PythonSandbox) -> PythonSandbox:
    r = sandbox.execute(SETUP)
    assert r.success, r
    return sandbox


def complete(sb: PythonSandbox, code: str, cursor_pos: int | None = None) -> dict[str, Any]:
    return sb.query("complete", code=code, cursor_pos=len(code) if cursor_pos is None else cursor_pos)


# --- complete ---------------------------------------------------------------


def test_complete_offers_namespace_builtin_and_keyword_names(sb: PythonSandbox) -> None:
    assert "add" in complete(sb, "ad")["matches"]
    assert "print" in complete(sb, "pri")["matches"]
    reply = complete(sb, "x = 1\nwhi")
    assert "while" in reply["matches"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (6, 9)
    types = reply["metadata"]["_jupyter_types_experimental"]
    assert {"start": 6, "end": 9, "text": "while"}.items() <= types[reply["matches"].index("while")].items()


def test_complete_offers_ipythons_magics(sb: PythonSandbox) -> None:
    assert {"%timeit", "%time"} <= set(complete(sb, "%ti")["matches"])


def test_complete_attributes_of_live_objects(sb: PythonSandbox) -> None:
    reply = complete(sb, "os.pa")
    assert {"path", "pathsep"} <= {m.rsplit(".", 1)[-1] for m in reply["matches"]}
    assert "label" in {m.rsplit(".", 1)[-1] for m in complete(sb, "p.")["matches"]}
    assert any(m.endswith("join") for m in complete(sb, "os.path.jo")["matches"])


def test_complete_never_evaluates_calls(sb: PythonSandbox) -> None:
    sb.execute("calls = []\ndef f():\n    calls.append(1)\n    return 'x'")
    complete(sb, "f().up")
    assert sb.execute("print(calls)").stdout == "[]\n"


def test_complete_dict_keys(sb: PythonSandbox) -> None:
    reply = complete(sb, "data['al")
    assert reply["matches"] == ["alpha"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (6, 8)
    assert reply["metadata"]["_jupyter_types_experimental"][0]["type"] == "dict key"


def test_complete_import_names(sb: PythonSandbox) -> None:
    assert "numpy" in complete(sb, "import nu")["matches"]
    assert "json" in complete(sb, "import js")["matches"]
    assert "path" in complete(sb, "from os import pa")["matches"]


@pytest.mark.parametrize(
    "code,cursor_pos",
    [("", 0), ("x", 0), ("é", 1), ("naïve = 1\nna", 12), ("(((", 3), ("'unclosed", 9), ("a.b.c.", 6), ("import ", 7)],
)
def test_complete_survives_odd_input(sb: PythonSandbox, code: str, cursor_pos: int) -> None:
    reply = complete(sb, code, cursor_pos)
    assert 0 <= reply["cursor_start"] <= reply["cursor_end"] <= len(code)


def test_cursor_positions_count_code_points_not_bytes(sb: PythonSandbox) -> None:
    sb.execute("café_total = 1")
    reply = complete(sb, "s = 'é'\ncafé_t")
    assert reply["matches"] == ["café_total"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (8, 14)


# --- hostile objects and limits ---------------------------------------------

HOSTILE = """
class Loop:
    def __dir__(self):
        while True:
            pass
    def keys(self):
        while True:
            pass
class Raising:
    def __getattr__(self, name):
        raise RuntimeError('no attributes here')
    def __dir__(self):
        raise RuntimeError('no dir either')
class Sleepy:
    def __dir__(self):
        import time
        time.sleep(60)
loop, raising, sleepy = Loop(), Raising(), Sleepy()
kept = 41
"""


@pytest.mark.slow
def test_a_looping_dir_stops_at_the_query_cpu_cap_and_state_survives(sandbox: PythonSandbox) -> None:
    assert sandbox.execute(HOSTILE).success
    # The CPU-time cap is a second of the guest's own work; on a loaded machine it must
    # still come before the query's deadline, which this test moves out of its way.
    sandbox.query_deadline_seconds = 120.0
    with pytest.raises(QueryError) as info:
        complete(sandbox, "loop.")
    assert info.value.trap == "cpu_time" and info.value.op == "complete"  # the cap, not the deadline
    assert str(info.value).startswith("complete query stopped:") and "CPU-time budget" in str(info.value)
    assert "\n" not in str(info.value)
    r = sandbox.execute("kept + 1")
    assert r.success and r.outputs[0].data["text/plain"] == "42"


def test_a_looping_keys_is_never_called(sandbox: PythonSandbox) -> None:
    # IPython completes the keys of dicts and known mappings only: keys() of an
    # arbitrary object never runs.
    assert sandbox.execute(HOSTILE).success
    complete(sandbox, "loop['")
    assert sandbox.execute("kept").outputs[0].data["text/plain"] == "41"


def test_a_sleeping_dir_stops_at_the_query_deadline(sandbox: PythonSandbox) -> None:
    assert sandbox.execute(HOSTILE).success
    sandbox.query_deadline_seconds = 0.5
    with pytest.raises(QueryError, match=r"complete query stopped: it ran past its 0.5 s deadline"):
        complete(sandbox, "sleepy.")
    assert sandbox.execute("kept").outputs[0].data["text/plain"] == "41"


def test_a_raising_getattr_or_dir_costs_only_its_matches(sandbox: PythonSandbox) -> None:
    assert sandbox.execute(HOSTILE).success
    complete(sandbox, "raising.")
    complete(sandbox, "raising.a.b")
    assert "raising" in complete(sandbox, "rais")["matches"]
    assert sandbox.query("inspect", code="raising", cursor_pos=7)["found"] is True


def test_a_guest_exception_in_a_query_is_a_query_error(sandbox: PythonSandbox) -> None:
    sandbox.execute("class Bye:\n    def __repr__(self):\n        raise SystemExit(3)\nbye = Bye()")
    with pytest.raises(QueryError, match=r"^inspect query failed in the guest: SystemExit: 3$"):
        sandbox.query("inspect", code="bye", cursor_pos=3)
    assert sandbox.execute("print('still here')").stdout == "still here\n"


@pytest.mark.slow
def test_a_rolled_back_query_undoes_what_it_changed(sandbox: PythonSandbox) -> None:
    sandbox.execute(
        "log = []\nclass Sneaky:\n    def __dir__(self):\n        log.append('ran')\n        while True:\n"
        "            pass\nsneaky = Sneaky()"
    )
    with pytest.raises(QueryError):
        complete(sandbox, "sneaky.")
    assert sandbox.execute("print(log)").stdout == "[]\n"


def test_only_allow_listed_ops_run(sb: PythonSandbox) -> None:
    with pytest.raises(ValueError, match="unknown query"):
        sb.query("run_cell", source="import os")
    with pytest.raises(ValueError, match="unknown query"):
        sb.query("complete') or __import__('os').system('x'")


def test_arguments_are_data_not_code(sb: PythonSandbox) -> None:
    tricky = "'), print('pwned'), ('"
    assert sb.query("is_complete", code=tricky)["status"] in ("complete", "invalid", "incomplete")
    assert sb.execute("print('pwned' in dir())").stdout == "False\n"


def test_a_query_is_not_a_cell(sandbox: PythonSandbox) -> None:
    sandbox.execute("6 * 7")
    sandbox.query("complete", code="pri", cursor_pos=3)
    sandbox.query("user_expressions", expressions={"a": "'not a result'"})
    sandbox.query("inspect", code="print", cursor_pos=5)
    # IPython 9 counts a cell as it starts: the second cell sees 3.
    r = sandbox.execute("print(_, len(In), len(Out), get_ipython().execution_count)")
    assert r.stdout == "42 3 1 3\n"
    r = sandbox.execute("1 / 0")
    assert "In[3]" in ANSI.sub("", "".join(r.error.traceback))  # type: ignore[union-attr]


def test_a_query_leaves_no_file_changes_on_the_next_cell(sandbox: PythonSandbox) -> None:
    sandbox.query("inspect", code="print", cursor_pos=5)
    r = sandbox.execute("x = 1")
    assert (r.files_created, r.files_modified, r.files_deleted) == ([], [], [])


# --- inspect ----------------------------------------------------------------


def inspect_text(sb: PythonSandbox, code: str, cursor_pos: int | None = None, detail_level: int = 0) -> str:
    reply = sb.query(
        "inspect", code=code, cursor_pos=len(code) if cursor_pos is None else cursor_pos, detail_level=detail_level
    )
    assert reply["found"] is True, reply
    return ANSI.sub("", reply["data"]["text/plain"])


def test_inspect_a_function_shows_signature_docstring_file_and_type(sb: PythonSandbox) -> None:
    text = inspect_text(sb, "add")
    assert re.fullmatch(
        r"Signature: add\(a, b=2\)\nDocstring: Add two things\.\nFile:      ~/ipykernel_\d+/\d+\.py\n"
        r"Type:      function",
        text,
    ), text


def test_inspect_detail_one_shows_the_cell_source(sb: PythonSandbox) -> None:
    text = inspect_text(sb, "add", detail_level=1)
    assert "Source:" in text
    assert "def add(a, b=2):\n    '''Add two things.'''\n    return a + b" in text


def test_inspect_a_class_shows_its_signature_and_docstring(sb: PythonSandbox) -> None:
    # As with ipykernel, a class defined in a cell has no source file to show.
    text = inspect_text(sb, "Point", detail_level=1)
    assert text.startswith("Init signature: Point(x)\nDocstring:      A point.\nType:           type")


def test_inspect_an_instance_shows_type_string_form_and_docstring(sb: PythonSandbox) -> None:
    sb.execute("numbers = [1, 2, 3]")
    text = inspect_text(sb, "numbers")
    assert "Type:        list\nString form: [1, 2, 3]\nLength:      3\nDocstring:" in text


def test_inspect_finds_the_callee_inside_call_parentheses(sb: PythonSandbox) -> None:
    assert inspect_text(sb, "add(1, ").startswith("Signature: add(a, b=2)")
    assert "Type:        Point" in inspect_text(sb, "add(p, 2)", cursor_pos=4)  # on the argument


def test_inspect_a_dotted_name_at_the_cursor(sb: PythonSandbox) -> None:
    assert "Type:        int" in inspect_text(sb, "p.x")


def test_inspect_an_unknown_name_is_not_found(sb: PythonSandbox) -> None:
    assert sb.query("inspect", code="nothing_here", cursor_pos=3) == {"found": False, "data": {}, "metadata": {}}
    assert sb.query("inspect", code="", cursor_pos=0)["found"] is False


def test_inspect_truncates_a_long_string_form_at_detail_zero(sb: PythonSandbox) -> None:
    sb.execute("long = 'x' * 10000")
    text = inspect_text(sb, "long")
    assert "<...>" in text and len(text) < 2000


# --- is_complete ------------------------------------------------------------


@pytest.mark.parametrize(
    "code,expected",
    [
        ("print('hi')", {"status": "complete"}),
        ("a = 1\nb = 2", {"status": "complete"}),
        ("for i in range(3):", {"status": "incomplete", "indent": "    "}),
        ("if x:\n    if y:", {"status": "incomplete", "indent": "        "}),
        ("for i in range(3):\n    print(i)", {"status": "incomplete", "indent": "    "}),
        ("x = (1,", {"status": "incomplete", "indent": ""}),
        ("x = 1 + \\", {"status": "incomplete", "indent": ""}),
        ("1 +* 2", {"status": "invalid"}),
        (")", {"status": "invalid"}),
        ("%time x = 1", {"status": "complete"}),
    ],
)
def test_is_complete_follows_ipythons_rules(sb: PythonSandbox, code: str, expected: dict[str, str]) -> None:
    assert sb.query("is_complete", code=code) == expected


# --- user_expressions -------------------------------------------------------


def test_user_expressions_give_bundles_or_errors(sb: PythonSandbox) -> None:
    reply = sb.query("user_expressions", expressions={"sum": "add(40, 2)", "bad": "1 / 0", "html": "H()"})
    assert reply["sum"] == {"status": "ok", "data": {"text/plain": "42"}, "metadata": {}}
    assert reply["bad"]["status"] == "error"
    assert (reply["bad"]["ename"], reply["bad"]["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert ANSI.sub("", reply["bad"]["traceback"][-1]) == "ZeroDivisionError: division by zero\n"
    assert not any("_wasm_kernel" in line for line in reply["bad"]["traceback"])
    assert reply["html"]["ename"] == "NameError"


def test_user_expressions_use_the_rich_formatter(sb: PythonSandbox) -> None:
    sb.execute("class H:\n    def _repr_html_(self):\n        return '<b>h</b>'")
    reply = sb.query("user_expressions", expressions={"h": "H()"})
    assert reply["h"]["data"]["text/html"] == "<b>h</b>"


def test_workspace_files_cannot_stand_in_for_the_shell(sandbox: PythonSandbox) -> None:
    # The workspace joins sys.path only once the shell is built, as the cwd joins
    # it in Jupyter: a file named like our modules or IPython's is never imported
    # in their place, not even by a fresh interpreter.
    for name in ("_wasm_kernel_shell.py", "_wasm_kernel_guest.py", "_wasm_kernel_serve.py", "_wasm_kernel_image.py",
                 "_wasm_kernel_kernel.py", "IPython.py", "traitlets.py"):
        (sandbox.workspace / name).write_text("raise SystemExit(7)\n")
    sandbox.restart()
    assert sandbox.query("is_complete", code="x = 1")["status"] == "complete"
    r = sandbox.execute("%timeit -n 3 -r 2 sum(range(10))")
    assert r.success and "per loop" in r.stdout
