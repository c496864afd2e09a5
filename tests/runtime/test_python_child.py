"""`python` as a command runs in a child interpreter of the same sandbox: the real
guest, driven through the Sandbox API as a notebook's cells would drive it.

What a process's caller sees is pinned: stdout, stderr, the exit status, stdin, the
same files (/app, /tmp, the notebook's folder read-only), the cell's limits, an
interrupt reaching the child, bounded nesting, and no host process at any time."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox
from wasm_kernel.runtime.wire import MAX_CHILD_DEPTH

RUN = "import subprocess, sys\n"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with make_sandbox(tmp_path_factory.mktemp("child"), interrupt_grace_seconds=5.0) as sb:
        yield sb


def _ok(sandbox, code: str):  # type: ignore[no-untyped-def]
    r = sandbox.execute(code)
    assert r.error is None and r.trap is None, (r.error, r.trap, r.stdout, r.stderr)
    return r


def test_run_captures_stdout_stderr_and_the_exit_status(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, RUN + "r = subprocess.run([sys.executable, '-c', 'import sys; print(6 * 7); "
                           "print(\"warn\", file=sys.stderr); sys.exit(3)'], capture_output=True, text=True)\n"
                           "print(repr(r.stdout), repr(r.stderr), r.returncode)")
    assert r.stdout == "'42\\n' 'warn\\n' 3\n"


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, RUN + "r = subprocess.run([sys.executable, '-c', 'def f():\\n    1/0\\nf()'], "
                           "capture_output=True, text=True)\nprint(r.returncode)\nprint(r.stderr)")
    assert r.stdout.startswith("1\nTraceback (most recent call last):\n")
    # The program's own frames only, as CPython prints them: none of the sandbox's.
    assert '  File "<string>", line 3, in <module>\n' in r.stdout and "ZeroDivisionError: division by zero" in r.stdout
    assert "_wasm_kernel" not in r.stdout and "/opt/" not in r.stdout


def test_inherited_output_reaches_the_cell_in_order(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, RUN + "print('before', flush=False)\nsubprocess.run([sys.executable, '-c', 'print(\"child\")'])\n"
                           "print('after')")
    assert r.stdout == "before\nchild\nafter\n"


def test_a_bang_line_runs_python_as_on_a_terminal(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, "!python -c 'import sys; print(1 + 1); print(\"e\", file=sys.stderr)'")
    assert r.stdout == "2\r\ne\r\n"  # a pty's line ends, stderr merged, as ipykernel's `!`
    r = _ok(sandbox, "lines = !python3 -c 'print(\"a\"); print(\"b\")'\nprint(lines)")
    assert r.stdout == "['a', 'b']\n"
    r = _ok(sandbox, "!python -c 'print(\"x\" * 3)' | wc -c")
    assert r.stdout.strip() == "4"


def test_a_script_gets_its_argv_path_and_stdin(sandbox) -> None:  # type: ignore[no-untyped-def]
    _ok(sandbox, "import os\nos.makedirs('tools', exist_ok=True)\n"
                 "open('tools/helper.py', 'w').write('X = 5\\n')\n"
                 "open('tools/main.py', 'w').write('import sys, helper\\nprint(sys.argv, helper.X)\\n"
                 "print(input(\"name? \"))\\nprint(sys.stdin.read())\\n')")
    r = _ok(sandbox, RUN + "print(subprocess.check_output([sys.executable, 'tools/main.py', 'a', 'b'], "
                           "input=b'ann\\nrest\\n').decode())")
    assert r.stdout == "['tools/main.py', 'a', 'b'] 5\nname? ann\nrest\n\n\n"


def test_module_mode_and_a_missing_script_fail_as_cpython_does(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, RUN + "r = subprocess.run([sys.executable, '-m', 'json.tool'], input='{\"a\": 1}', "
                           "capture_output=True, text=True)\nprint(r.stdout, r.returncode)")
    assert r.stdout == '{\n    "a": 1\n}\n 0\n'
    r = _ok(sandbox, RUN + "r = subprocess.run([sys.executable, 'nope.py'], capture_output=True, text=True)\n"
                           "print(r.returncode, r.stderr)")
    assert r.stdout.startswith("2 ") and "can't open file '/app/nope.py': [Errno 44]" in r.stdout
    r = _ok(sandbox, RUN + "r = subprocess.run([sys.executable, '-m', 'no_such_module'], capture_output=True, text=True)\n"
                           "print(r.returncode, r.stderr)")
    assert r.stdout.startswith("1 ") and "No module named no_such_module" in r.stdout


def test_check_functions_raise_called_process_error(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sandbox.execute(RUN + "subprocess.check_call([sys.executable, '-c', 'raise SystemExit(5)'])")
    assert r.error is not None and r.error.ename == "CalledProcessError", r.error
    assert "returned non-zero exit status 5" in r.error.evalue


def test_os_system_returns_the_wait_status_and_popen_reads_output(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, "import os\nprint(os.system('python -c \"raise SystemExit(4)\"'))\n"
                     "print(os.popen('python -c \"print(7)\"').read(), end='')")
    assert r.stdout == "1024\n7\n"


def test_popen_with_a_stdin_pipe_runs_when_its_input_is_given(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, RUN + "p = subprocess.Popen([sys.executable, '-c', 'import sys; print(sys.stdin.read().upper())'], "
                           "stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\n"
                           "p.stdin.write('abc')\np.stdin.close()\nprint(p.stdout.read(), p.wait())")
    assert r.stdout == "ABC\n 0\n"


def test_the_child_shares_app_and_tmp_and_sees_the_notebook_folder_read_only(tmp_path: Path) -> None:
    notebook = tmp_path / "course"
    notebook.mkdir()
    (notebook / "data.csv").write_text("a,b\n1,2\n")
    from wasm_kernel.runtime.guest_config import GuestOptions, NotebookFolder

    from wasm_kernel import ExecutionPolicy, create_sandbox

    ws = tmp_path / "ws"
    ws.mkdir()
    with create_sandbox(workspace=ws, policy=ExecutionPolicy(),
                        guest_options=GuestOptions(notebook=NotebookFolder(notebook))) as sb:
        r = sb.execute(RUN + "import tempfile\nh, p = tempfile.mkstemp()\n"
                             "code = f'print(open(\"data.csv\").read().split()[1]); open({p!r}, \"w\").write(\"tmp\"); "
                             "open(\"made.txt\", \"w\").write(\"app\")'\n"
                             "subprocess.run([sys.executable, '-c', code], check=True)\n"
                             "print(open(p).read(), open('made.txt').read())")
        assert r.error is None, (r.error, r.stderr)
        assert r.stdout == "1,2\ntmp app\n"
    assert (ws / "made.txt").read_text() == "app"
    assert sorted(p.name for p in notebook.iterdir()) == ["data.csv"]  # the notebook's folder is untouched


def test_a_program_timeout_ends_only_the_child(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = _ok(sandbox, RUN + "try:\n    subprocess.run([sys.executable, '-c', 'while True: pass'], timeout=0.5)\n"
                           "except subprocess.TimeoutExpired as err:\n    print('timed out', err.timeout)\nprint('on')")
    assert r.stdout == "timed out 0.5\non\n"


def test_the_cells_cpu_limit_stops_the_cell_through_its_child(tmp_path: Path) -> None:
    with make_sandbox(tmp_path, cpu_seconds=1.0) as sb:
        r = sb.execute(RUN + "subprocess.run([sys.executable, '-c', 'while True: pass'])\nprint('never')")
        assert r.trap == "cpu_time", (r.trap, r.stdout, r.stderr)
        assert "never" not in r.stdout
        assert sb.execute("print('alive')").stdout == "alive\n"


def test_the_cells_deadline_stops_the_cell_through_its_child(tmp_path: Path) -> None:
    with make_sandbox(tmp_path, deadline_seconds=1.0, cpu_seconds=None) as sb:
        r = sb.execute(RUN + "subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'])")
        assert r.trap == "deadline", (r.trap, r.stderr)  # the cell's, not the child's sleep running out


def test_a_child_past_the_memory_limit_fails_alone(tmp_path: Path) -> None:
    with make_sandbox(tmp_path, memory_bytes=256 << 20) as sb:
        r = sb.execute(RUN + "r = subprocess.run([sys.executable, '-c', 'x = bytearray(400 << 20)'], "
                             "capture_output=True, text=True)\nprint(r.returncode, r.stderr.splitlines()[-1:])")
        assert r.error is None and r.trap is None, (r.error, r.trap)
        assert r.stdout == "1 ['MemoryError']\n"


def test_the_childs_output_counts_against_the_cells_output_cap(tmp_path: Path) -> None:
    with make_sandbox(tmp_path, stdout_max_bytes=1000) as sb:
        r = sb.execute(RUN + "subprocess.run([sys.executable, '-c', 'print(\"y\" * 5000)'])")
        assert r.stdout_truncated and r.stdout.startswith("y" * 1000)


def test_the_childs_writes_count_against_the_disk_quota(tmp_path: Path) -> None:
    with make_sandbox(tmp_path, disk_max_bytes=1 << 20) as sb:
        r = sb.execute(RUN + "r = subprocess.run([sys.executable, '-c', 'open(\"big\", \"wb\").write(b\"x\" * (2 << 20))'], "
                             "capture_output=True, text=True)\nprint(r.returncode, r.stderr.splitlines()[-1])")
        assert r.stdout.startswith("1 OSError: [Errno 51]"), r.stdout  # ENOSPC in the child, as a full disk
        assert not (tmp_path / "big").exists() or (tmp_path / "big").stat().st_size <= 1 << 20


def test_an_interrupt_reaches_the_child_then_the_cell(sandbox) -> None:  # type: ignore[no-untyped-def]
    result: dict[str, object] = {}

    def run() -> None:
        result["r"] = sandbox.execute(
            RUN + "try:\n    r = subprocess.run([sys.executable, '-c', 'import time\\nprint(\"up\", flush=True)\\n"
                  "time.sleep(60)'], capture_output=True, text=True)\nexcept KeyboardInterrupt:\n"
                  "    print('cell interrupted')\n")

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(1.5)
    assert sandbox.interrupt()
    worker.join(30)
    assert not worker.is_alive()
    r = result["r"]
    assert r.trap is None and r.stdout == "cell interrupted\n", (r.trap, r.stdout, r.stderr)  # type: ignore[attr-defined]


def test_nesting_is_bounded_in_depth(sandbox) -> None:  # type: ignore[no-untyped-def]
    nest = ("import subprocess, sys, os\nd = int(os.environ.get('D', '0'))\nprint('depth', d, flush=True)\n"
            "r = subprocess.run([sys.executable, 'nest.py'], env=dict(os.environ, D=str(d + 1)))\n")
    _ok(sandbox, f"open('nest.py', 'w').write({nest!r})")
    r = sandbox.execute("import subprocess, sys\nsubprocess.run([sys.executable, 'nest.py'])")
    assert [line for line in r.stdout.splitlines() if line.startswith("depth")] == \
        [f"depth {d}" for d in range(MAX_CHILD_DEPTH)], r.stdout
    assert f"children of this sandbox nest at most {MAX_CHILD_DEPTH} deep" in r.stderr, r.stderr


def test_other_programs_keep_their_refusal_and_pip_is_percent_pip(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sandbox.execute(RUN + "subprocess.run(['gcc', 'x.c'])")
    assert r.error is not None and r.error.ename == "PermissionError"
    assert "runs no programs but python" in r.error.evalue
    r = _ok(sandbox, RUN + "r = subprocess.run([sys.executable, '-m', 'pip', 'install', 'x'], capture_output=True, "
                           "text=True)\nprint(r.returncode, r.stderr)")
    assert r.stdout == "1 pip runs as %pip in this sandbox: write `%pip install ...` in a cell\n\n"


def test_no_host_process_is_started(sandbox) -> None:  # type: ignore[no-untyped-def]
    def children() -> set[int]:
        found = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                    found.add(int(entry))
        return found

    import subprocess

    before = children()
    control = subprocess.Popen(["sleep", "0.5"])  # the watcher sees a host process when there is one
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(children() - before)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        _ok(sandbox, RUN + "for _ in range(3):\n    subprocess.run([sys.executable, '-c', 'import time; time.sleep(0.2)'])\n"
                           "import os\nos.system('python -c pass')")
    finally:
        done.set()
        watcher.join()
        control.wait()
    assert seen == {control.pid}
