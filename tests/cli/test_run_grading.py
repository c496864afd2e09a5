"""`wasm-kernel run` as a grader or a CI job meets it: the real command in subprocesses
on real kernels and sandboxes. A summary line ends every run, exit statuses follow
--strict, input() takes its answers from --stdin, colours go only where they show,
a progress bar's carriage returns are one updating line on a terminal and its final
state in a pipe, and a script's limit lines name the flags that raise each limit."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from support.cli_runs import COMMAND, KERNELSPEC
from support.sandboxes import compiled

pytestmark = pytest.mark.slow  # real `wasm-kernel run` commands on real kernels

SUMMARY = re.compile(r"(?P<cells>\d+) code cells? in \d+\.\d s; (?P<failed>\d+) failed"
                     r"(?P<which>: In \[\d+\](?:, In \[\d+\])*)?(?P<rest>; .*)?")


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "NO_COLOR")}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "data")
    return env


def wk_run(tmp_path: Path, *args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, "run", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env_for(tmp_path), cwd=tmp_path, input=stdin)


def script(tmp_path: Path, *cells: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text("\n# %%\n".join(cells) + "\n")
    return path


def notebook(tmp_path: Path, *cells: str | tuple[str, list[str]]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    for cell in cells:
        source, tags = (cell, []) if isinstance(cell, str) else cell
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {}))
    path = tmp_path / "graded.ipynb"
    nbformat.write(nb, path)
    return path


def summary(stdout: str) -> re.Match[str]:
    last = stdout.rstrip("\n").splitlines()[-1]
    match = SUMMARY.fullmatch(last)
    assert match, last
    return match


def test_a_script_ends_with_a_summary_and_fails_the_run_only_with_strict(tmp_path: Path) -> None:
    path = script(tmp_path, "print('one')", "1 / 0", "print('three')")
    plain = wk_run(tmp_path, path)
    assert plain.returncode == 0, plain.stderr  # failures counted, not fatal, without --strict
    match = summary(plain.stdout)
    assert match.group("cells", "failed", "which") == ("3", "1", ": In [2]")
    assert "three" in plain.stdout.splitlines()  # every cell runs
    strict = wk_run(tmp_path, path, "--strict")
    assert strict.returncode == 1, strict.stderr
    assert summary(strict.stdout).group("failed") == "1"
    clean = wk_run(tmp_path, script(tmp_path, "x = 1", "print(x)"), "--strict")
    assert clean.returncode == 0 and summary(clean.stdout).group("cells", "failed") == ("2", "0")


def test_a_notebook_fails_on_an_untagged_error_and_with_strict_on_a_tagged_cell_that_raised_nothing(
    tmp_path: Path,
) -> None:
    tagged_ok = notebook(tmp_path, ("1 / 0", ["raises-exception"]), ("x = 1", ["raises-exception"]))
    plain = wk_run(tmp_path, tagged_ok)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    match = summary(plain.stdout)
    assert match.group("cells", "failed") == ("2", "0")
    assert "1 raised the error it was tagged to expect" in match["rest"]
    assert "1 tagged raises-exception raised nothing: In [2]" in match["rest"]
    strict = wk_run(tmp_path, tagged_ok, "--strict")
    assert strict.returncode == 1
    failing = wk_run(tmp_path, notebook(tmp_path, "print('a')", "undefined_name"))
    assert failing.returncode == 1 and summary(failing.stdout).group("failed", "which") == ("1", ": In [2]")


def test_stdin_answers_input_calls_in_order_then_eof(tmp_path: Path) -> None:
    answers = tmp_path / "answers.txt"
    answers.write_text("Ada\n36\n")
    cells = ("name = input('name? ')\nage = input('age? ')\nprint(f'{name} is {age}')", "input('more? ')")
    run = wk_run(tmp_path, script(tmp_path, *cells), "--stdin", answers)
    lines = run.stdout.splitlines()
    assert lines.index("name? Ada") < lines.index("age? 36") < lines.index("Ada is 36"), lines
    assert "EOFError: input() failed: EOF when reading a line (" in run.stderr and "has no more answers" in run.stderr
    assert summary(run.stdout).group("failed", "which") == ("1", ": In [2]")
    # The same from the command's own stdin, and in a notebook through the kernel.
    piped = wk_run(tmp_path, notebook(tmp_path, *cells), "--stdin", "-", stdin="Grace\n85\n")
    lines = piped.stdout.splitlines()
    assert lines.index("name? Grace") < lines.index("age? 85") < lines.index("Grace is 85"), lines
    assert any(line.startswith("EOFError") for line in lines)
    assert "has no more answers for input()" in piped.stderr
    # Without --stdin, input() fails at once and the run says how to answer it.
    none = wk_run(tmp_path, script(tmp_path, "input('x? ')"))
    assert "EOFError" in none.stderr and "--stdin FILE" in none.stderr


def test_colours_go_to_a_terminal_only_unless_asked(tmp_path: Path) -> None:
    # A failing cell: IPython's coloured traceback, our coloured prompts and summary.
    path = script(tmp_path, "print('\\033[31mred\\033[0m')", "1 / 0")
    for args in ([], ["--color", "never"]):
        proc = wk_run(tmp_path, path, *args)
        assert "\x1b" not in proc.stdout + proc.stderr, args
        assert "red" in proc.stdout and "ZeroDivisionError" in proc.stderr
    always = wk_run(tmp_path, path, "--color", "always")
    assert "\x1b[1;32mIn [1]:\x1b[0m" in always.stdout
    assert "\x1b[31mred\x1b[0m" in always.stdout  # the cell's own colours, kept
    assert "\x1b[" in always.stderr  # the traceback's
    nb = wk_run(tmp_path, notebook(tmp_path, "1 / 0"), "--color", "always")
    assert "\x1b[1;32mIn [1]:" in nb.stdout
    assert "\x1b" not in wk_run(tmp_path, notebook(tmp_path, "1 / 0")).stdout


PROGRESS = "import sys, time\nfor i in range(5):\n    sys.stderr.write(f'\\r{25 * i}% done')\n" \
           "    sys.stderr.flush()\n    time.sleep(0.3)\nsys.stderr.write('\\n')"
DISPLAY = "h = display('step 0', display_id=True)\nfor i in range(1, 4):\n    h.update(f'step {i}')\nprint('end')"


@pytest.mark.parametrize("kind", ["script", "notebook"])
def test_carriage_returns_and_updated_displays_are_their_final_state_in_a_pipe(tmp_path: Path, kind: str) -> None:
    path = script(tmp_path, PROGRESS, DISPLAY) if kind == "script" else notebook(tmp_path, PROGRESS, DISPLAY)
    proc = wk_run(tmp_path, path)
    assert proc.returncode == 0, proc.stderr
    assert "100% done" in proc.stderr.splitlines()
    assert "\r" not in proc.stderr and "75% done" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert "'step 3'" in lines and "'step 0'" not in lines and "'step 2'" not in lines
    assert lines.index("'step 3'") < lines.index("end")


def test_a_line_mixing_a_carriage_return_with_another_control_is_shown_escaped_whole(tmp_path: Path) -> None:
    cell = "import sys\nsys.stdout.write('plain 50%\\rplain 60%\\n')\nsys.stdout.write('50%\\r\\x1b]0;title\\x07\\n')"
    lines = wk_run(tmp_path, script(tmp_path, cell)).stdout.splitlines()
    assert "plain 60%" in lines and not any("plain 50%" in line for line in lines if "write" not in line)
    assert "50%\\r\\x1b]0;title\\x07" in lines, lines  # what it overwrote, shown


def test_carriage_returns_redraw_one_line_on_a_terminal(tmp_path: Path) -> None:
    path = script(tmp_path, PROGRESS, DISPLAY)
    master, slave = pty.openpty()
    proc = subprocess.Popen([*COMMAND, "run", str(path)], stdout=slave, stderr=slave, env=env_for(tmp_path),
                            cwd=tmp_path)
    os.close(slave)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the command exited and closed the terminal
            break
        if not chunk:
            break
        shown.extend(chunk)
    assert proc.wait(timeout=300) == 0
    os.close(master)
    text = shown.decode()
    # Each state redrawn over the last, on one line; the final one kept. (Writes that
    # arrive together are drawn once, in their final state.)
    start = text.index("0% done")
    frames = text[start:text.index("100% done\r\n") + len("100% done")].split("\r\x1b[K")
    states = [f"{25 * i}% done" for i in range(5)]
    assert len(frames) >= 2 and frames[-1] == "100% done", frames
    assert [states.index(frame) for frame in frames] == sorted(states.index(frame) for frame in frames)
    assert "'step 0'\r\x1b[K'step 1'\r\x1b[K'step 2'\r\x1b[K'step 3'\r\nend" in text, text


def test_script_limit_lines_name_the_flags_that_raise_them(tmp_path: Path) -> None:
    memory = wk_run(tmp_path, script(tmp_path, "blocks = [bytearray(64 * 2**20) for _ in range(8)]"),
                    "--memory", "256MiB")
    assert "MemoryError" in memory.stderr
    assert ("[the allocation failed against the sandbox's memory limit of 256 MiB; "
            "raise it with --memory 512MiB (at most 4 GiB)]") in memory.stderr.splitlines(), memory.stderr
    deadline = wk_run(tmp_path, script(tmp_path, "x = 1", "while True:\n    x += 1", "print(x)"), "--deadline", "1")
    assert ("the cell ran past its 1 s deadline; variables are as they were before the cell; "
            "raise it with --deadline 2s") in deadline.stderr.splitlines(), deadline.stderr
    assert "1" in deadline.stdout.splitlines()  # rolled back, and the next cell ran
    assert summary(deadline.stdout).group("failed", "which") == ("1", ": In [2]")
    cpu = wk_run(tmp_path, script(tmp_path, "while True:\n    pass"), "--cpu-time", "0.5")
    assert ("the cell used its 0.5 s of CPU time; variables are as they were before the cell; "
            "raise it with --cpu-time 1s") in cpu.stderr.splitlines(), cpu.stderr
    compiled("fuel")  # else this first fuel run starts on the baseline engine, where fuel is time
    fuel = wk_run(tmp_path, script(tmp_path, "while True:\n    pass"), "--metering", "fuel", "--fuel", "1e8")
    assert "raise it with --fuel 2e8" in fuel.stderr, fuel.stderr
    for proc in (memory, deadline, cpu, fuel):
        assert "ExecutionPolicy" not in proc.stderr and "%limits" not in proc.stderr


def test_a_notebook_cell_stopped_by_a_limit_says_in_one_line_the_flag_that_raises_it(tmp_path: Path) -> None:
    proc = wk_run(tmp_path, notebook(tmp_path, "while True:\n    pass"), "--deadline", "1")
    assert proc.returncode == 1
    assert ("DeadlineExceeded: the cell ran past its 1 s deadline; variables are as they were before the cell; "
            "raise it with --deadline 2s") in proc.stdout.splitlines(), proc.stdout
    assert "%limits" not in proc.stdout + proc.stderr and "for this run" not in proc.stderr, proc.stderr


def test_a_notebooks_memory_error_gets_one_line_naming_the_runs_flag(tmp_path: Path) -> None:
    proc = wk_run(tmp_path, notebook(tmp_path, "blocks = [bytearray(64 * 2**20) for _ in range(8)]"),
                  "--memory", "256MiB")
    assert proc.returncode == 1
    assert any(line.startswith("MemoryError") for line in proc.stdout.splitlines()), proc.stdout
    # One line, one way to raise it: the flag, never %limits (which a run's user cannot type) beside it.
    said = [line for line in proc.stderr.splitlines() if line.strip()]
    assert said == ["[the allocation failed against the sandbox's memory limit of 256 MiB; "
                    "raise it with --memory 512MiB (at most 4 GiB)]"], proc.stderr
    assert "%limits" not in proc.stdout


def test_session_in_a_run_says_a_run_keeps_no_state(tmp_path: Path) -> None:
    proc = wk_run(tmp_path, notebook(tmp_path, "%session"))
    assert proc.returncode == 0, proc.stderr
    assert "not kept: `wasm-kernel run` keeps no state" in proc.stdout, proc.stdout
    assert "operator" not in proc.stdout.split("state", 1)[1].splitlines()[0], proc.stdout


def test_a_limit_no_sandbox_takes_is_a_one_line_usage_error(tmp_path: Path) -> None:
    path = script(tmp_path, "pass")
    for args in (["--memory", "10TB"], ["--deadline", "soon"], ["--limit", "gpu=3"]):
        proc = wk_run(tmp_path, path, *args)
        assert proc.returncode == 2 and proc.stdout == "", args
        assert proc.stderr.startswith("wasm-kernel run: error: ") and proc.stderr.count("\n") == 1, proc.stderr
