"""The `python` door (wire.OP_PYTHON) as an attacker uses it: a cell forges the message
by hand, nests children to exhaust the host, or has a child reach for what its
parent cannot. Every field is checked before a child exists; a child is the same
sandbox again, never more; nothing the host knows about itself comes back."""

from __future__ import annotations

import base64
import json

import pytest

from wasm_kernel.core.sandbox import PythonSandbox
from wasm_kernel.runtime.child_python import MAX_CHILDREN_PER_CELL
from wasm_kernel.runtime.guest_messages import BadMessage, parse
from wasm_kernel.runtime.wire import MAX_CHILD_DEPTH

GOOD = {"op": "python", "args": ["python", "-c", "print(1)"], "cwd": "/app", "env": {}, "stdin": "",
        "stdout": "capture", "stderr": "capture"}

BAD_FIELDS = {
    "args_not_a_list": {"args": "python -c 1"},
    "args_not_strings": {"args": ["python", 1]},
    "args_too_many": {"args": ["x"] * 5000},
    "args_too_long": {"args": ["python", "-c", "x" * (3 << 20)]},
    "arg_with_nul": {"args": ["python", "-c", "print(1)\0"]},
    "cwd_relative": {"cwd": "app"},
    "cwd_missing": {"cwd": None},
    "env_name_with_equals": {"env": {"A=B": "c"}},
    "env_not_strings": {"env": {"A": 1}},
    "stdin_not_base64": {"stdin": "***"},
    "stdin_too_big": {"stdin": base64.b64encode(b"x" * ((16 << 20) + 1)).decode()},
    "stdout_mode": {"stdout": "file:/etc/passwd"},
    "stderr_mode": {"stderr": "inherit2"},
    "timeout_negative": {"timeout": -1},
    "timeout_bool": {"timeout": True},
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_each_malformed_field_is_refused_before_a_child_exists(case: str) -> None:
    with pytest.raises(BadMessage):
        parse(json.dumps(dict(GOOD, **BAD_FIELDS[case])).encode())


def test_a_forged_message_from_a_cell_gets_a_refusal_and_the_sandbox_goes_on(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        "import _wasm_kernel_guest as g\n"
        f"answers = [g.call(dict({GOOD!r}, **bad)) for bad in {list(BAD_FIELDS.values())[:8]!r}]\n"
        "print(sorted({a.get('error') for a in answers}))")
    assert r.success, r.error
    assert r.stdout == "['bad_message']\n"
    assert sandbox.execute("print('alive')").stdout == "alive\n"


def test_a_well_formed_forged_message_runs_only_a_child_of_the_same_sandbox(sandbox: PythonSandbox) -> None:
    # A cell that speaks the door itself gets nothing the subprocess layer would not
    # give it: the child sees the sandbox's files only, whatever folder and environment it names.
    probe = ("import os\nfor p in ('/etc/passwd', '/proc/self/environ', '/root'):\n"
             "    print(p, os.path.exists(p))\nprint(sorted(os.environ))")
    r = sandbox.execute(
        "import _wasm_kernel_guest as g, base64\n"
        f"a = g.call(dict({GOOD!r}, args=['python', '-c', {probe!r}], cwd='/tmp', env={{'ONLY': '1'}}))\n"
        "print(a['status'], base64.b64decode(a['stdout']).decode(), base64.b64decode(a['stderr']).decode())")
    assert r.success, r.error
    assert r.stdout.startswith("0 /etc/passwd False\n/proc/self/environ False\n/root False\n['ONLY']"), r.stdout


def test_no_host_path_or_traceback_reaches_the_cell_from_a_refused_child(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        "import _wasm_kernel_guest as g\n"
        f"print(g.call(dict({GOOD!r}, cwd='/app/' + 'x' * 5000)))")
    assert r.success, r.error
    assert "bad_message" in r.stdout
    for leak in ("/tmp/", "/root", "/work", "Traceback", "wasm_kernel/"):
        assert leak not in r.stdout, (leak, r.stdout)


def test_a_fork_bomb_of_nested_children_stops_at_the_depth(sandbox: PythonSandbox) -> None:
    bomb = ("import subprocess, sys\nfor _ in range(3):\n"
            "    subprocess.run([sys.executable, 'bomb.py'], capture_output=True)\nprint('level done')")
    sandbox.execute(f"open('bomb.py', 'w').write({bomb!r})")
    r = sandbox.execute("import subprocess, sys\np = subprocess.run([sys.executable, 'bomb.py'])\nprint('cell', p.returncode)")
    assert r.success, (r.error, r.trap)
    assert r.stdout.endswith("level done\ncell 0\n")
    # 3 + 9 + 27 children under the top one: within the cell's count, each level bounded by the depth.
    assert 3 ** MAX_CHILD_DEPTH < MAX_CHILDREN_PER_CELL * 2


def test_a_loop_of_children_stops_at_the_count_with_one_line(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import subprocess, sys\nn = 0\nwhile True:\n    subprocess.run([sys.executable, '-c', 'pass'])\n"
                        "    n += 1")
    assert r.error is not None and r.trap is None and r.error.ename == "OSError"
    assert r.error.evalue.startswith("python: a cell starts at most") and "\n" not in r.error.evalue
    assert sandbox.execute("print(n)").stdout == f"{MAX_CHILDREN_PER_CELL}\n"
    # The count is the cell's: the next cell starts children again.
    assert sandbox.execute("print(subprocess.run([sys.executable, '-c', 'pass']).returncode)").stdout == "0\n"


def test_a_child_cannot_write_its_parents_request_or_serve_a_second_one(sandbox: PythonSandbox) -> None:
    code = ("import _wasm_kernel_guest as g, _wasm_kernel_child as c\n"
            "print(g.call({'op': 'request'}).get('error'))\n"
            "try:\n    c.serve()\nexcept RuntimeError as err:\n    print(err)")
    r = sandbox.execute("import subprocess, sys\n"
                        f"print(subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, text=True).stdout)")
    assert r.success, r.error
    assert r.stdout == "no_request\nthis turn has no program to run\n\n"
