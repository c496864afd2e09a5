"""The confined shell: `!cmd` lines run as Python on the guest's own files.

Runs inside the guest, never on the host. A command line is read by
`_wasm_kernel_sh_syntax`, its words are expanded here (variables, `$(...)`, `~`,
globs) and each command is one of the Python functions of
`_wasm_kernel_sh_commands`. Output streams through generators, so `cat big | head`
reads only what head needs. Files are reached with the guest's own `os` calls, so
the sandbox's rules hold as for Python code: writes land in /app, a write to a
notebook-folder file copies it up, the disk quota counts every byte.
"""

import codecs
import glob
import os

import _wasm_kernel_sh_commands as commands
from _wasm_kernel_sh_syntax import ShellSyntaxError, parse

# A glob that matches more names than this is an error, not a list that fills the
# guest's memory (a shell would pass them all to the command).
MAX_GLOB_NAMES = 100_000
# How deep $(...) may nest, and how many commands a pipeline may chain (each stage
# is a generator inside the one after it), so no line can exhaust the stack.
MAX_SUBSTITUTION_DEPTH = 8
MAX_PIPELINE = 64
_enabled = [True]  # the operator's c.WasmKernel.shell_commands, per sandbox


def enabled():
    return _enabled[0]


def set_enabled(on):
    _enabled[0] = bool(on)


class ShellExit(Exception):
    def __init__(self, status):
        self.status = status


class Shell:
    """One command line's state: variables, the working folder, the last status.

    out(bytes) and err(bytes) receive the line's standard output and error. direct:
    where they are the cell's own streams ({"crlf", "merged"}: a pseudo-terminal's line
    ends, stderr merged into stdout), so a python child may write there itself as it
    runs; stdin: the line's standard input (bytes), for the first command that reads."""

    def __init__(self, out, err, env=None, cwd=None, depth=0, direct=None, stdin=None):
        self.out = out
        self.err = err
        self.direct = direct
        self.stdin = stdin
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd or os.getcwd()
        self.status = 0
        self.depth = depth
        self.line = 1

    # --- running -------------------------------------------------------------------

    def run(self, text):
        """Run the command line `text`; returns its exit status, as sh's $?."""
        try:
            lists = parse(text)
        except ShellSyntaxError as err:
            self.error(f"sh: {self.line}: {err}")
            self.status = 2
            return 2
        try:
            for and_or in lists:
                status = self._pipeline(and_or.first)
                for op, pipeline in and_or.rest:
                    if (op == "&&") == (status == 0):
                        status = self._pipeline(pipeline)
                self.status = status
        except ShellExit as done:
            self.status = done.status
        return self.status

    def error(self, text):
        self.err((text.rstrip("\n") + "\n").encode("utf-8", "replace"))

    def _pipeline(self, pipeline):
        if len(pipeline.commands) > MAX_PIPELINE:
            self.error(f"sh: {self.line}: a pipeline of {len(pipeline.commands)} commands is more than the "
                       f"{MAX_PIPELINE} this sandbox's shell runs")
            self.status = 2
            return 2
        boxes = []
        stream = None
        if self.stdin:
            stream, self.stdin = iter([self.stdin]), None
        try:
            for index, command in enumerate(pipeline.commands):
                box = _Status()
                boxes.append(box)
                stream = self._command(command, stream, box, last=index == len(pipeline.commands) - 1)
            if stream is not None:
                for chunk in stream:
                    self.out(chunk)
        except ShellSyntaxError as err:
            self.error(f"sh: {self.line}: {err}")
            boxes[-1:] = [_Status(2)]
        except _Refused as refused:
            if isinstance(refused, _Fatal) and self.depth:
                raise  # a $(...) nested too deeply fails the whole line, not just itself
            self.error(f"sh: {self.line}: {refused}")
            boxes[-1:] = [_Status(refused.status)]
        finally:
            if stream is not None and hasattr(stream, "close"):
                stream.close()  # a stage that stopped early closes the ones before it
        status = boxes[-1].status if boxes else 0
        if pipeline.negate:
            status = int(status == 0)
        self.status = status
        return status

    def _command(self, command, stdin, box, last=True):
        """A generator of the command's output (None when it writes elsewhere)."""
        env_updates = {name: self._join(self.expand(parts, split=False)) for name, parts in command.assignments}
        words = []
        for parts in command.words:
            words.extend(self.expand(parts))
        if not words:  # NAME=value alone sets a variable of this line
            self.env.update(env_updates)
            box.status = 0
            return _drain(stdin)
        name = words[0]
        impl = commands.lookup(name)
        if impl is None and "/" in name:
            import _wasm_kernel_python_child

            if _wasm_kernel_python_child.is_python(name):  # /usr/local/bin/python3, as sys.executable
                impl = commands.lookup("python")
        if impl is None:
            raise _Refused(f"{name}: not found in this sandbox (supported: {', '.join(commands.NAMES)})", 127)
        io = _Io(self, dict(self.env, **env_updates))
        io.name = name
        out_sink, err_target, stdin = self._redirects(command.redirects, io, stdin)
        if self.direct is not None and last and out_sink is None and err_target is None:
            # The command's output goes straight to the cell: a python child writes it there as it runs.
            io.direct = dict(self.direct, err=io.err_sink is self.err)
        generator = _run(impl, io, words, stdin, box)
        if err_target == "stdout":
            generator = _merged(generator, io)
        if out_sink is not None:
            for chunk in generator:
                out_sink(chunk)
            io.close()
            return None
        return _closing(generator, io)

    def _redirects(self, redirects, io, stdin):
        out_sink = None
        err_target = None
        for redirect in redirects:
            if redirect.op == ">&":
                if redirect.fd == 2 and redirect.dup == 1:
                    err_target = "stdout" if out_sink is None else "file"
                    if out_sink is not None:
                        io.err_sink = out_sink
                elif redirect.fd == 1 and redirect.dup == 2:
                    out_sink = io.err_sink
                continue
            target = self._join(self.expand(redirect.target, split=False))
            if redirect.op == "<":
                stdin = _read_file(self, target)
                continue
            sink = self._open_for_writing(target, append=redirect.op in (">>", "&>>"), io=io)
            if redirect.fd in (1, 3):
                out_sink = sink
            if redirect.fd in (2, 3):
                io.err_sink = sink
        return out_sink, err_target, stdin

    def _open_for_writing(self, target, append, io):
        if target == "/dev/null":
            return lambda chunk: None
        if target in ("/dev/stdout", "/dev/stderr"):
            return self.out if target == "/dev/stdout" else self.err
        path = self.path(target)
        try:
            f = open(path, "ab" if append else "wb")
        except OSError as err:
            raise _Refused(f"cannot create {target}: {commands.strerror(err)}", 2) from None
        io.files.append(f)

        def write(chunk, f=f):
            try:
                f.write(chunk)
            except OSError as err:
                raise _Refused(f"write error: {commands.strerror(err)}", 1) from None
        return write

    # --- expansion -----------------------------------------------------------------

    def path(self, name):
        return os.path.join(self.cwd, os.path.expanduser(name) if name.startswith("~") else name)

    def variable(self, name):
        if name == "?":
            return str(self.status)
        if name == "$":
            return str(os.getpid())
        if name == "0":
            return "sh"
        if name in ("#",):
            return "0"
        return self.env.get(name, "")

    def expand(self, parts, split=True):
        """The fields a word expands to: variables and $(...) split where unquoted,
        then globbed where the word has unquoted * ? or [."""
        fields = [[]]
        for kind, value, quoted in parts:
            if kind == "lit":
                fields[-1].append((value, quoted))
                continue
            text = self.variable(value) if kind == "var" else self._substitute(value)
            if quoted or not split:
                fields[-1].append((text, True))
                continue
            pieces = text.split()
            if text[:1].isspace() and fields[-1]:
                fields.append([])
            for i, piece in enumerate(pieces):
                if i:
                    fields.append([])
                fields[-1].append((piece, True))
            if text[-1:].isspace() and pieces:
                fields.append([])
        words = []
        for field in fields:
            if not field:
                continue
            if all(quoted and not text for text, quoted in field) and any(
                    kind != "lit" for kind, _, q in parts) and not any(q for _, _, q in parts):
                continue  # an unquoted expansion to nothing is no word at all
            words.extend(self._glob(field) if split else ["".join(text for text, _ in field)])
        return words

    def _glob(self, field):
        text = "".join(t for t, _ in field)
        if not any(not quoted and any(c in t for c in "*?[") for t, quoted in field):
            return [text]
        pattern = "".join(t if not quoted else glob.escape(t) for t, quoted in field)
        names = []
        absolute = pattern.startswith("/")
        for name in glob.iglob(pattern, root_dir=None if absolute else self.cwd):
            names.append(name)
            if len(names) > MAX_GLOB_NAMES:
                raise _Refused(f"{text}: matches more than {MAX_GLOB_NAMES:,} names; narrow the pattern", 2)
        return sorted(names) or [text]

    def _substitute(self, source):
        if self.depth >= MAX_SUBSTITUTION_DEPTH:
            raise _Fatal(f"$(...) nested more than {MAX_SUBSTITUTION_DEPTH} deep", 2)
        captured = []
        inner = Shell(captured.append, self.err, self.env, self.cwd, self.depth + 1)
        inner.status = self.status
        inner.run(source)
        self.status = inner.status
        return b"".join(captured).decode("utf-8", "replace").rstrip("\n")

    @staticmethod
    def _join(fields):
        return " ".join(fields)


class _Status:
    def __init__(self, status=0):
        self.status = status


class _Refused(Exception):
    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


class _Fatal(_Refused):
    """A refusal that ends the whole command line, from any depth."""


class _Io:
    """What a command sees: its arguments' folder and environment, where its errors
    go, and the files its redirections opened."""

    def __init__(self, shell, env):
        self.shell = shell
        self.env = env
        self.cwd = shell.cwd
        self.err_sink = shell.err
        self.pending_errors = []
        self.merge_errors = False
        self.files = []
        self.stdin = None
        self.name = ""
        self.direct = None  # see Shell.direct: this command's output is the cell's own

    def path(self, name):
        return self.shell.path(name)

    def error(self, text):
        data = (text.rstrip("\n") + "\n").encode("utf-8", "replace")
        if self.merge_errors:
            self.pending_errors.append(data)
        else:
            self.err_sink(data)

    def chdir(self, folder):
        self.shell.cwd = self.cwd = folder

    def close(self):
        for f in self.files:
            f.close()
        self.files = []


def _run(impl, io, words, stdin, box):
    io.stdin = stdin
    try:
        status = yield from impl(io, words[1:], stdin)
    except commands.UsageError as err:
        io.error(f"{words[0]}: {err}")
        status = err.status
    except ShellExit:
        raise
    box.status = 0 if status is None else status


def _merged(generator, io):
    io.merge_errors = True
    for chunk in generator:
        if io.pending_errors:
            yield b"".join(io.pending_errors)
            io.pending_errors.clear()
        yield chunk
    if io.pending_errors:
        yield b"".join(io.pending_errors)
        io.pending_errors.clear()


def _closing(generator, io):
    try:
        yield from generator
    finally:
        io.close()


def _drain(stdin):
    if stdin is not None:
        for _ in stdin:
            pass
    return None


def _read_file(shell, target):
    if target == "/dev/null":
        return iter(())
    try:
        f = open(shell.path(target), "rb")
    except OSError as err:
        raise _Refused(f"cannot open {target}: {commands.strerror(err)}", 2) from None
    return commands.chunks_of(f)


class TextSink:
    """Bytes in, text out to `write`, decoded across chunk edges; `crlf` writes line
    ends as a terminal does (ipykernel runs `!` commands on a pty)."""

    def __init__(self, write, crlf=False):
        self.write = write
        self.crlf = crlf
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def __call__(self, chunk):
        text = self.decoder.decode(chunk)
        if text:
            self.write(text.replace("\n", "\r\n") if self.crlf else text)

    def flush(self):
        text = self.decoder.decode(b"", final=True)
        if text:
            self.write(text)


def run_line(text, stdout, stderr=None, crlf=False, env=None, cwd=None, stdin=None, direct=None):
    """Run one command line, its output decoded and written to stdout(text) and its
    errors to stderr(text) (to stdout with it when stderr is None, as on a pty).
    stdin: the line's input (bytes); direct: stdout and stderr are the cell's streams
    (see Shell). Returns the exit status."""
    out = TextSink(stdout, crlf)
    err = out if stderr is None else TextSink(stderr, crlf)
    shell = Shell(out, err, env=env, cwd=cwd, direct=direct, stdin=stdin)
    try:
        return shell.run(text)
    finally:
        out.flush()
        if err is not out:
            err.flush()
