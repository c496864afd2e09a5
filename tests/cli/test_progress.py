"""The one-time work's progress in the terminal: real, moving with the work, never at 100%
before the work ends, and its time left from what the same work cost before. The
drawing is tested on a real compile (a generated module, a few seconds of Cranelift)
onto a real terminal (a pty) and into a pipe; a machine's first `wasm-kernel run` is
tested once, end to end, on an empty cache folder of its own."""

from __future__ import annotations

import io
import os
import pty
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from support.cli_runs import COMMAND
from wasm_kernel.cli.progress import Step
from wasm_kernel.host.module_cache import load_module
from wasm_kernel.runtime.startup import BASELINE, BOOT, SITE_FILES

pytestmark = pytest.mark.slow  # real compiles on a pty and a first run on an empty cache

PERCENT = re.compile(r"(\d+)% \[")


def generated_module(functions: int = 1000) -> str:
    """A real module that takes Cranelift a few seconds (about 1 s per 500 functions
    on a 2-core machine): work with no progress of its own, like the guest's compile."""
    body = " ".join(["(local.set 0 (i32.add (i32.mul (local.get 0) (i32.const 31)) (i32.const 7)))"] * 40)
    funcs = "\n".join(f'(func (export "f{i}") (param i32) (result i32) {body} (local.get 0))' for i in range(functions))
    return f"(module {funcs})"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The measured costs these compiles record go to a cache folder of the test's own."""
    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))


def compile_with(step: Step | None, tmp_path: Path, key: str, functions: int = 1000) -> float:
    """Compile the generated module with `step` as its progress; the seconds it took."""
    started = time.monotonic()
    load_module(key, tmp_path / f"{key}.cwasm", lambda: generated_module(functions), progress=step,
                step=f"test-generated-{functions}")
    if step is not None:
        step.finish()
    return time.monotonic() - started


def test_a_step_on_a_terminal_moves_with_the_work_and_holds_below_100_percent_until_it_ends(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8")
    drawn = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # The same work once before, with a meter: its cost is what the drawing counts against.
    compile_with(Step("Compiling a generated module", io.StringIO()), tmp_path, "progress-first", functions=4000)
    took = compile_with(Step("Compiling a generated module", terminal), tmp_path, "progress-tty", functions=4000)
    terminal.close()
    reader.join(timeout=10)
    os.close(master)

    frames = drawn.decode().split("\r\x1b[K")
    assert frames[0] == "" and len(frames) >= 2, drawn
    *moving, last = frames
    assert all(frame.startswith("Compiling a generated module: ") for frame in frames[1:]), frames
    percents = [int(pct) for frame in moving for pct in PERCENT.findall(frame)]
    assert all(p <= 99 for p in percents), moving
    assert percents == sorted(percents), percents  # the CPU time spent only grows
    assert "100%" not in drawn.decode()
    assert re.fullmatch(r"Compiling a generated module: done in \d+ s\r?\n", last), last
    print(f"compiled in {took:.1f} s, percents {percents}")
    if took >= 2.0:  # long enough for a rate: the time left, from the measured cost, then more of the work
        assert any(re.search(r"about \d+ s left", frame) for frame in moving), moving
        assert len(moving) >= 3 and percents[-1] > percents[0], percents


def test_a_step_into_a_pipe_writes_a_line_when_it_starts_and_when_it_ends(tmp_path: Path) -> None:
    log = io.StringIO()
    compile_with(Step("Compiling a generated module", log), tmp_path, "progress-pipe")
    lines = log.getvalue().splitlines()
    assert lines[0] == "Compiling a generated module ..."
    assert re.fullmatch(r"Compiling a generated module: done in \d+ s", lines[-1]), lines
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue() and "%" not in log.getvalue()


def test_a_step_whose_work_was_done_already_draws_nothing(tmp_path: Path) -> None:
    compile_with(Step("first", io.StringIO()), tmp_path, "progress-cached")
    log = io.StringIO()
    compile_with(Step("again", log), tmp_path, "progress-cached")  # from this process's memo
    assert log.getvalue() == ""


@pytest.mark.slow
def test_a_first_run_shows_each_step_and_leaves_the_optimised_compile_to_the_background(tmp_path: Path) -> None:
    # An empty cache folder of this test's own: the machine's cache stays as it is.
    cache = tmp_path / "empty-cache"
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "JPY_SESSION_NAME", "WASM_KERNEL_BASELINE")}
    env["WASM_KERNEL_CACHE_DIR"] = str(cache)
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "data")
    script = tmp_path / "hello.py"
    script.write_text("print('hello from a first run')\n")
    try:
        proc = subprocess.run([*COMMAND, "run", str(script)], capture_output=True, text=True, env=env, timeout=900)
    finally:
        warmup = _background_warmup_pid(cache)
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "hello from a first run" in proc.stdout.splitlines()
        err = proc.stderr.splitlines()
        # Into a pipe: each step a line when it starts and one when it ends, in order.
        baseline = BASELINE
        assert err[0] == f"{baseline} ..."
        done = [i for i, line in enumerate(err) if re.fullmatch(rf"{re.escape(baseline)}: done in \d+ s", line)]
        assert done, err
        after = err[done[0]:]
        assert after.index(f"{SITE_FILES} ...") < after.index(f"{BOOT} ...")
        assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
        assert all("%" not in line or re.search(r": \d+% after \d+ s, ", line) for line in err), err
        # The optimised compile went on in a process of its own, and the run said so.
        assert warmup is not None
        assert any(line.startswith(f"wasm-kernel: the background warm-up (pid {warmup}) is still ")
                       for line in err), err
    finally:
        if warmup is not None:  # started by this test's run: it would compile for minutes more
            try:
                os.kill(warmup, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _background_warmup_pid(cache: Path) -> int | None:
    """The warm-up process the run started, from its status file (it writes it as it starts)."""
    import json

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            return int(json.loads((cache / "warmup.json").read_text())["pid"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.5)
    return None
