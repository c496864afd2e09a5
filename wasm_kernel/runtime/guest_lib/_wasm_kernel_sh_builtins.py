"""The confined shell's small commands: echo, pwd, cd, true, false, exit, sleep,
which and python --version. Runs in the guest.
"""

import os
import re
import sys
import time

from _wasm_kernel_sh_commands import UsageError, command, quote


@command("echo")
def echo(io, args, stdin):
    """echo [-n] [-e] [-E] [text...]: as bash's echo (IPython runs `!` lines with the
    user's $SHELL, bash on most systems): backslash escapes only with -e."""
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        for flag in args[0][1:]:
            if flag == "n":
                newline = False
            else:
                escapes = flag == "e"
        args = args[1:]
    text = " ".join(args)
    stop = False
    if escapes:
        text, stop = _escapes(text)
    yield (text + ("" if stop or not newline else "\n")).encode()
    return 0


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def _escapes(text):
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "c":
                return "".join(out), True
            if nxt in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[nxt])
                i += 2
                continue
            if nxt == "0":
                digits = re.match(r"[0-7]{0,3}", text[i + 2:]).group()
                out.append(chr(int(digits or "0", 8)))
                i += 2 + len(digits)
                continue
        out.append(c)
        i += 1
    return "".join(out), False


@command("pwd")
def pwd(io, args, stdin):
    """pwd: the folder this line is in."""
    yield (io.cwd + "\n").encode()
    return 0


@command("cd")
def cd(io, args, stdin):
    """cd [folder]: changes folder for the rest of this line, as in a shell; use %cd
    (or cd without !) to change the notebook's folder."""
    target = args[0] if args else io.env.get("HOME", "/tmp")
    path = os.path.normpath(io.path(target))
    if not os.path.isdir(path):
        io.error(f"sh: 1: cd: can't cd to {target}")
        return 2
    io.chdir(path)
    return 0
    yield


@command("true", ":")
def true(io, args, stdin):
    """true: status 0."""
    return 0
    yield


@command("false")
def false(io, args, stdin):
    """false: status 1."""
    return 1
    yield


@command("exit")
def exit_(io, args, stdin):
    """exit [status]: ends the command line."""
    from _wasm_kernel_sh import ShellExit

    raise ShellExit(int(args[0]) if args and args[0].isdigit() else io.shell.status)
    yield


@command("sleep")
def sleep(io, args, stdin):
    """sleep SECONDS (s, m, h suffixes): on the guest's clock, under the cell's limits."""
    total = 0.0
    for arg in args:
        m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)", arg)
        if not m:
            raise UsageError(f"invalid time interval {quote(arg)}\nTry 'sleep --help' for more information.")
        total += float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if not args:
        raise UsageError("missing operand\nTry 'sleep --help' for more information.")
    time.sleep(total)
    return 0
    yield


@command("which")
def which(io, args, stdin):
    """which NAME...: where python and pip are; the sandbox's commands are built in."""
    status = 0
    for name in args:
        if name in ("python", "python3"):
            yield f"/usr/local/bin/{name}\n".encode()
        elif name in ("pip", "pip3"):
            yield f"/usr/local/bin/{name}\n".encode()
        else:
            status = 1
    return status


@command("python", "python3")
def python(io, args, stdin):
    """python ARGS...: a child interpreter of this sandbox runs them (the same files,
    the cell's limits); its output streams to the cell when the line's does."""
    import _wasm_kernel_python_child as processes

    if args[:1] in (["--version"], ["-V"]):  # no child needed to say it
        v = sys.version_info
        yield f"Python {v.major}.{v.minor}.{v.micro}\n".encode()
        return 0
    data = bytearray()
    for chunk in stdin if stdin is not None else ():
        data += chunk
        if len(data) > processes.MAX_STDIN:
            io.error(f"python: its standard input passed {processes.MAX_STDIN >> 20} MiB, more than a child takes")
            return 1
    direct = io.direct
    out_mode = "inherit" if direct else "capture"
    err_mode = ("stdout" if direct["merged"] else "inherit") if direct and direct["err"] else "capture"
    finished = processes.run_python([io.name or "python"] + list(args), bytes(data), out_mode, err_mode,
                                    cwd=io.cwd, env=io.env, crlf=bool(direct and direct["crlf"]))
    if finished.stderr:
        if io.merge_errors:
            io.pending_errors.append(finished.stderr)
        else:
            io.err_sink(finished.stderr)
    if finished.stdout:
        yield finished.stdout
    # A shell's $? for a program a signal ended is 128 + the signal.
    return 128 - finished.status if finished.status < 0 else finished.status