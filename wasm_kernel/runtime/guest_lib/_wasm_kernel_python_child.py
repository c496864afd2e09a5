"""Runs inside the WASI guest: running one `python` command in a child interpreter.

The host's runtime/child_python.py makes a fresh interpreter of the same sandbox for
it (the OP_PYTHON door) and runs it to its end: this module is the guest's side of
that call, shared by subprocess and os (_wasm_kernel_processes) and the confined
shell's `python` command (_wasm_kernel_sh_builtins). It imports neither of them.
"""

import base64
import errno
import os
import re
import sys

import _wasm_kernel_guest as _guest
import _wasm_kernel_refusals as refusals
import _wasm_kernel_wire as wire

MAX_STDIN = 16 << 20  # as the host takes (guest_messages.MAX_PYTHON_STDIN)
_PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?")
_PROGRAM_FOLDERS = ("", "/usr/bin", "/usr/local/bin", "/bin")
PIP = "pip runs as %pip in this sandbox: write `%pip install ...` in a cell"


def is_python(program):
    """Whether a command's program is this sandbox's Python (python, python3,
    python3.15, by name or at a usual folder, or sys.executable)."""
    program = os.fspath(program)
    if isinstance(program, bytes):
        program = os.fsdecode(program)
    if program == sys.executable:
        return True
    folder, name = os.path.split(program)
    return bool(_PYTHON_NAME.fullmatch(name)) and folder in _PROGRAM_FOLDERS


def runs_pip(argv):
    """`python -m pip ...`: %pip's job, never a child's."""
    words = list(argv[1:])
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 1] == "pip"
        if word.startswith("-m"):
            return word[2:] == "pip"
        if not word.startswith("-") or word.startswith("-c"):
            return False
    return False


class Finished:
    """A child's end: its exit status and what its caller captured."""

    def __init__(self, status, stdout=b"", stderr=b"", timed_out=False):
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out


def run_python(argv, stdin=b"", stdout="inherit", stderr="inherit", cwd=None, env=None, timeout=None, crlf=False):
    """Run `argv` (a Python command line, its program first) in a child interpreter.
    stdout: "inherit" (the cell's stream), "capture" or "null"; stderr the same or
    "stdout". Raises KeyboardInterrupt if the cell is being stopped meanwhile."""
    argv = [os.fsdecode(os.fspath(a)) for a in argv]
    if runs_pip(argv):
        return Finished(1, stderr=(PIP + "\n").encode()) if stderr == "capture" else _say(PIP, 1, stderr)
    if len(stdin) > MAX_STDIN:
        raise refused(OSError, f"a python child's stdin may hold {MAX_STDIN >> 20} MiB; this one is {len(stdin) >> 20} MiB")
    folder = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), folder)
    environment = dict(os.environ if env is None else {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()})
    _guest.flush_streams()  # the cell's own output first, as a process's would be
    answer = _guest.call({
        "op": wire.OP_PYTHON, "args": argv, "cwd": folder, "env": environment,
        "stdin": base64.b64encode(bytes(stdin)).decode(), "stdout": stdout, "stderr": stderr, "crlf": crlf,
        "timeout": timeout,
    })
    if not answer.get("ok"):
        if answer.get("error") == "interrupted":
            raise KeyboardInterrupt
        raise refused(OSError, answer.get("message") or "python: the child interpreter did not run")
    if answer.get("dropped"):
        sys.stderr.write("wasm-kernel: a python child's captured output passed 32 MiB; the rest was dropped\n")
    return Finished(answer["status"], base64.b64decode(answer.get("stdout", "")),
                    base64.b64decode(answer.get("stderr", "")), bool(answer.get("timed_out")))


def _say(line, status, stderr):
    if stderr != "null":
        sys.stderr.write(line + "\n")
    return Finished(status)


def refused(exc_type, message):
    return refusals.refused(exc_type, message)
