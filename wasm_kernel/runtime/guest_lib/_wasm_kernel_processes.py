"""Runs inside the WASI guest: `python` as a program, the only one the sandbox runs.

`subprocess.run([sys.executable, ...])`, `check_output`, `Popen`, `os.system` and
`os.popen` reach here. A command whose program is Python runs in a child
interpreter of the same sandbox (the host's runtime/child_python.py, through the
OP_PYTHON door): the same files, the same limits, nothing on the host. A command
line (shell=True, os.system) runs in the confined shell (_wasm_kernel_sh), whose
`python` command comes back here. Any other program keeps its one-line refusal.

The child runs to its end when it starts, while this interpreter waits (the guest
has one thread): a Popen starts it at once, or, when the caller will write its
stdin, at the first communicate(), wait(), poll(), read or close. What a
process's caller can see is kept: returncode, captured stdout and stderr (bytes or
text), TimeoutExpired for subprocess's timeout=, CalledProcessError from the check
functions, os.system's wait status. This module imports no IPython.
"""

import errno
import io
import os
import sys

import _wasm_kernel_refusals as refusals
from _wasm_kernel_python_child import MAX_STDIN, Finished, is_python, refused, run_python

# subprocess's own values (unchanged since 3.3); subprocess itself is imported only by a
# program that uses it, and patched then (install()).
PIPE, STDOUT, DEVNULL = -1, -2, -3
_next_timeout = None  # subprocess.run's or call's timeout=, for the Popen it makes next
_pids = [1000]


# --- subprocess.Popen ---------------------------------------------------------------


class Popen:
    """subprocess.Popen for Python programs (a child interpreter) and command lines
    (the confined shell); any other program is refused."""

    def __init__(self, args, bufsize=-1, executable=None, stdin=None, stdout=None, stderr=None, preexec_fn=None,
                 close_fds=True, shell=False, cwd=None, env=None, universal_newlines=None, startupinfo=None,
                 creationflags=0, restore_signals=True, start_new_session=False, pass_fds=(), *, user=None,
                 group=None, extra_groups=None, encoding=None, errors=None, text=None, umask=-1, pipesize=-1,
                 process_group=None):
        global _next_timeout
        timeout, _next_timeout = _next_timeout, None
        self.args = args
        self.returncode = None
        self.stdin = self.stdout = self.stderr = None
        self.pid = _next_pid()
        self._text = bool(text or universal_newlines or encoding or errors)
        self._encoding, self._errors = encoding or "utf-8", errors or "strict"
        self._shell = bool(shell)
        self._cwd, self._env = cwd, env
        if shell:
            if not isinstance(args, (str, bytes)):
                args = args[0]  # sh -c runs the first; the rest are its $0, $1, ... (unused here)
            self._argv = None
            self._line = os.fsdecode(args)
        else:
            argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
            if not argv:
                raise IndexError("list index out of range")
            if executable is not None:
                argv[0] = executable
            if not is_python(argv[0]):
                raise refused(PermissionError, refusals.PROCESSES)
            self._argv = argv
        self._out_mode = _mode(stdout)
        self._err_mode = "stdout" if stderr == STDOUT else _mode(stderr)
        self._out_target, self._err_target = _target(stdout), _target(stderr)
        self._input = bytearray()
        self._finished = None
        self._timeout_seen = False
        if stdin == PIPE:
            self.stdin = _StdinPipe(self)
            if self._text:
                self.stdin = io.TextIOWrapper(self.stdin, encoding=self._encoding, errors=self._errors,
                                              line_buffering=True, write_through=True)
        elif stdin not in (None, DEVNULL):
            self._input += _read_all(stdin)
        if stdout == PIPE:
            self.stdout = self._reader(1)
        if stderr == PIPE:
            self.stderr = self._reader(2)
        if stdin != PIPE:
            self._start(timeout)

    # -- running --

    def _start(self, timeout=None):
        if self._finished is not None:
            return
        if self.returncode is not None:  # killed before it started
            self._finished = Finished(self.returncode)
            return
        if self._argv is None:
            self._finished = _shell_line(self._line, bytes(self._input), self._out_mode, self._err_mode, self._cwd,
                                         self._env)
        else:
            self._finished = run_python(self._argv, bytes(self._input), self._out_mode, self._err_mode, self._cwd,
                                        self._env, timeout)
        finished = self._finished
        for fd, target in ((1, self._out_target), (2, self._err_target)):
            data = finished.stdout if fd == 1 else finished.stderr
            if target is not None and data:
                _write_to(target, data)
        if not finished.timed_out:
            self.returncode = finished.status

    def _reader(self, fd):
        raw = io.BufferedReader(_OutputPipe(self, fd))
        if self._text:
            return io.TextIOWrapper(raw, encoding=self._encoding, errors=self._errors)
        return raw

    def _check_timeout(self, timeout):
        """A child its timeout ended: TimeoutExpired once, for the call given a timeout
        (communicate or wait, as subprocess.run makes them); after it, killed (-9)."""
        finished = self._finished
        if finished is None or not finished.timed_out:
            return
        if timeout is not None and not self._timeout_seen:
            import subprocess

            self._timeout_seen = True
            raise subprocess.TimeoutExpired(self.args, timeout, output=self._captured(1), stderr=self._captured(2))
        if self.returncode is None:
            self.returncode = -9

    def _captured(self, fd):
        finished = self._finished
        if finished is None or (self._out_mode if fd == 1 else self._err_mode) != "capture":
            return None
        data = finished.stdout if fd == 1 else finished.stderr
        if (self.stdout if fd == 1 else self.stderr) is None:
            return None
        if self._text:
            return _translate(data.decode(self._encoding, self._errors))
        return data

    # -- the Popen API --

    def communicate(self, input=None, timeout=None):
        if input is not None and self._finished is None:
            self._input += input.encode(self._encoding, self._errors) if isinstance(input, str) else bytes(input)
        self._start(timeout)
        self._check_timeout(timeout)
        out, err = self._captured(1), self._captured(2)
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        return out, err

    def wait(self, timeout=None):
        self._start(timeout)
        self._check_timeout(timeout)
        return self.returncode

    def poll(self):
        self._start()
        self._check_timeout(None)
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None:
            if self._finished is None:
                self.returncode = -int(sig)
            elif self._finished.timed_out:
                self.returncode = -9

    def terminate(self):
        self.send_signal(15)

    def kill(self):
        self.send_signal(9)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, value, traceback):
        for stream in (self.stdout, self.stderr, self.stdin):
            if stream is not None:
                try:
                    stream.close()
                except Exception:
                    pass
        if exc_type is not KeyboardInterrupt:
            self.wait()

    def __repr__(self):
        return f"<Popen: returncode: {self.returncode} args: {self.args!r}>"

    __class_getitem__ = classmethod(lambda cls, item: cls)


class _StdinPipe(io.RawIOBase):
    """proc.stdin: what the caller writes is the child's stdin once it starts."""

    def __init__(self, proc):
        self._proc = proc

    def writable(self):
        return True

    def write(self, data):
        if self._proc._finished is not None:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        if len(self._proc._input) + len(data) > MAX_STDIN:
            raise refused(OSError, f"a python child's stdin may hold {MAX_STDIN >> 20} MiB")
        self._proc._input += data
        return len(data)

    def close(self):
        if not self.closed:
            super().close()


class _OutputPipe(io.RawIOBase):
    """proc.stdout / proc.stderr: the child's captured output (it runs on the first read)."""

    def __init__(self, proc, fd):
        self._proc = proc
        self._fd = fd
        self._data = None
        self._at = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        if self._data is None:
            self._proc._start()
            finished = self._proc._finished
            self._data = finished.stdout if self._fd == 1 else finished.stderr
        chunk = self._data[self._at:self._at + len(buffer)]
        buffer[:len(chunk)] = chunk
        self._at += len(chunk)
        return len(chunk)


def _mode(target):
    if target is None:
        return "inherit"
    if target == DEVNULL:
        return "null"
    return "capture"  # PIPE, a file or a descriptor: captured, then written there


def _target(target):
    return None if target in (None, PIPE, DEVNULL, STDOUT) else target


def _write_to(target, data):
    if isinstance(target, int):
        fd = target
    else:
        try:
            target.flush()
        except Exception:
            pass
        fd = target.fileno()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(source):
    if isinstance(source, int):
        chunks = []
        while chunk := os.read(source, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    data = source.read()
    return data.encode() if isinstance(data, str) else data


def _translate(text):
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _next_pid():
    _pids[0] += 1
    return _pids[0]


# --- command lines: shell=True, os.system, os.popen -----------------------------------


def _shell_line(line, stdin, out_mode, err_mode, cwd, env):
    """A command line in the confined shell, as `sh -c` would run it."""
    from _wasm_kernel_sh import enabled, run_line

    if not enabled():
        raise refused(PermissionError, refusals.SHELL)
    out, err = [], []

    def sink(mode, kept, stream):
        if mode == "capture":
            return kept.append
        if mode == "null":
            return lambda text: None
        return stream.write

    stdout = sink(out_mode, out, sys.stdout)
    stderr = None if err_mode == "stdout" else sink(err_mode, err, sys.stderr)  # None: merged into stdout
    direct = out_mode == "inherit"
    status = run_line(line, stdout, stderr, env=None if env is None else dict(env),
                      cwd=None if cwd is None else os.path.abspath(os.fspath(cwd)), stdin=stdin,
                      direct={"crlf": False, "merged": err_mode == "stdout"} if direct else None)
    return Finished(status, "".join(out).encode(), "".join(err).encode())


def system(command):
    """os.system: the command line in the confined shell, its output on the cell's
    streams; the wait status (exit status << 8) as POSIX's system() returns it."""
    sys.stdout.flush()
    status = _shell_line(os.fsdecode(command), b"", "inherit", "inherit", None, None).status
    sys.stdout.flush()
    sys.stderr.flush()
    return -status if status < 0 else (status & 0xFF) << 8


# --- subprocess's functions: timeout= reaches the child -------------------------------


def _with_timeout(function):
    def call(*popenargs, timeout=None, **kwargs):
        global _next_timeout
        _next_timeout = timeout
        try:
            return function(*popenargs, timeout=timeout, **kwargs)
        finally:
            _next_timeout = None

    call.__name__ = call.__qualname__ = function.__name__
    call.__doc__ = function.__doc__
    call.__wrapped__ = function
    return call


def install():
    """Make subprocess and os run Python programs here: os.system at once, subprocess
    as it is first imported (before any module of the notebook's can bind
    `from subprocess import run`)."""
    os.system = system
    refusals.after_import("subprocess", _patch_subprocess)


def _patch_subprocess(subprocess):
    subprocess.Popen = Popen
    subprocess.run = _with_timeout(subprocess.run)
    subprocess.call = _with_timeout(subprocess.call)
