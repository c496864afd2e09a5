"""Runs inside a child guest: `python ARGS...` as CPython's own main() would run it.

The host starts a bare interpreter of the same sandbox for a `python` command
(runtime/child_python.py) and serves it one request: the program's argv, its folder,
environment and standard input. This module reads the command line as CPython does
(-c, -m, a script, `-` or nothing for a program on stdin, and the flags notebooks
pass), runs the program as `__main__`, and ends the turn with the exit status a
process would have: SystemExit's code, 1 for an uncaught exception (its traceback on
stderr, as the interpreter prints it), -2 for KeyboardInterrupt (Python then ends by
SIGINT). Our own frames never show in a traceback.
"""

import builtins
import io
import os
import sys

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire

# Flags that take no argument and change nothing a notebook's program can see here
# (buffering, bytecode files, user site, hash seeds, verbosity).
_QUIET_FLAGS = set("bBdEhiIOPqsSuvVx")
_USAGE = (
    "usage: {prog} [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
    "Try `python -h' for more information.\n"
)
_HELP = (
    "usage: {prog} [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
    "-c cmd : program passed in as string (terminates option list)\n"
    "-m mod : run library module as a script (terminates option list)\n"
    "-u     : unbuffered binary stdout and stderr (the sandbox's streams are line-buffered)\n"
    "-W arg : warning control\n"
    "-X opt : implementation-specific option (accepted, ignored)\n"
    "-V     : print the Python version number and exit (also --version)\n"
    "file   : program read from script file\n"
    "-      : program read from stdin (default)\n"
    "This is a child interpreter of a wasm-kernel sandbox: the same files, no processes of its own "
    "but python.\n"
)


class _Usage(Exception):
    pass


def serve():
    answer = _guest.call({"op": wire.OP_REQUEST})
    if not answer.get("ok") or answer.get("name") != wire.CHILD_FUNCTION:
        raise RuntimeError("this turn has no program to run")
    status = main(**answer["args"])
    _guest.call({"op": wire.OP_RESULT, "status": "ok", "exit_code": status})


def main(args, cwd, env, stdin, shell=True):
    """Run the program; returns its exit status. shell: whether command lines
    (os.system, shell=True) run in the confined shell, as in the parent."""
    import base64

    if not shell:
        import _wasm_kernel_sh

        _wasm_kernel_sh.set_enabled(False)
    prog = os.path.basename(args[0]) if args else "python"
    sys.stdin = io.TextIOWrapper(io.BytesIO(base64.b64decode(stdin)), encoding="utf-8")
    sys.__stdin__ = sys.stdin
    builtins.input = _stdin_input
    os.environ.clear()
    os.environ.update(env)
    try:
        os.chdir(cwd)
    except OSError as err:
        sys.stderr.write(f"{prog}: can't change to {cwd!r}: [Errno {err.errno}] {os.strerror(err.errno)}\n")
        return 2
    try:
        kind, target, argv, warnings = _parse(args[1:], prog)
    except _Usage as usage:
        sys.stderr.write(str(usage))
        return 2
    except SystemExit as done:  # -V, -h
        sys.stdout.flush()
        return done.code or 0
    if warnings:
        import warnings as warnings_module

        for option in warnings:
            try:
                warnings_module._setoption(option)
            except warnings_module._OptionError as err:
                sys.stderr.write(f"Invalid -W option ignored: {err}\n")
    sys.orig_argv = list(args)
    try:
        status = _run(kind, target, argv, prog)
    finally:
        _at_exit()
    return status


def _parse(words, prog):
    """(kind, target, sys.argv, -W options) for CPython's command line."""
    warnings = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            break
        if word in ("--version",):
            _version(1)
        if word == "--help":
            sys.stdout.write(_HELP.format(prog=prog))
            raise SystemExit(0)
        if word.startswith("--"):
            raise _Usage(f"unknown option {word}\n" + _USAGE.format(prog=prog))
        if not word.startswith("-") or word == "-":
            break
        j = 1
        while j < len(word):
            flag = word[j]
            rest = word[j + 1:]
            if flag in "cmWX":
                if rest:
                    value = rest
                elif i + 1 < len(words):
                    i += 1
                    value = words[i]
                else:
                    raise _Usage(f"Argument expected for the -{flag} option\n" + _USAGE.format(prog=prog))
                if flag == "c":
                    return "code", value, ["-c"] + words[i + 1:], warnings
                if flag == "m":
                    return "module", value, [value] + words[i + 1:], warnings
                if flag == "W":
                    warnings.append(value)
                break  # -X: accepted and ignored
            if flag == "V":
                _version(word.count("V"))
            if flag == "h" or flag == "?":
                sys.stdout.write(_HELP.format(prog=prog))
                raise SystemExit(0)
            if flag not in _QUIET_FLAGS and flag != "O":
                raise _Usage(f"Unknown option: -{flag}\n" + _USAGE.format(prog=prog))
            j += 1
        i += 1
    if i >= len(words) or words[i] == "-":
        return "stdin", None, [""] if i >= len(words) else ["-"] + words[i + 1:], warnings
    return "script", words[i], words[i:], warnings


def _version(level):
    if level > 1:
        sys.stdout.write(f"Python {sys.version}\n")
    else:
        v = sys.version_info
        sys.stdout.write(f"Python {v.major}.{v.minor}.{v.micro}\n")
    raise SystemExit(0)


def _run(kind, target, argv, prog):
    # The program's own code is where the host may raise a soft interrupt (as the
    # shell's run_code opens it for a cell): a store, not a call, so no safe point.
    words = _guest._interrupt_words
    try:
        words[0] = 1
        return _run_program(kind, target, argv, prog)
    except KeyboardInterrupt as err:  # taken between the window's opening and the program
        _print_uncaught(err)
        return -2
    finally:
        words[0] = 0


def _run_program(kind, target, argv, prog):
    sys.argv = argv
    main_module = sys.modules["__main__"]
    namespace = main_module.__dict__
    namespace.clear()
    namespace.update(__name__="__main__", __doc__=None, __package__=None, __loader__=None, __spec__=None,
                     __builtins__=builtins)
    try:
        if kind == "module":
            sys.path[0] = os.getcwd()
            import runpy

            try:
                runpy._run_module_as_main(target, alter_argv=True)
            except ImportError as err:
                if not _failed_to_find(err, target):
                    raise
                sys.stderr.write(f"{sys.executable}: {err}\n")
                return 1
            return 0
        if kind == "script":
            path = os.path.abspath(target)
            try:
                with open(path, "rb") as f:
                    source = f.read()
            except OSError as err:
                sys.stderr.write(f"{prog}: can't open file {path!r}: [Errno {err.errno}] {os.strerror(err.errno)}\n")
                return 2
            sys.path[0] = os.path.dirname(path)
            namespace.update(__file__=path, __cached__=None)
            code = compile(source, path, "exec")
        elif kind == "code":
            sys.path[0] = ""
            code = compile(target, "<string>", "exec")
        else:
            sys.path[0] = ""
            code = compile(sys.stdin.buffer.read(), "<stdin>", "exec")
        exec(code, namespace)
        return 0
    except SystemExit as done:
        return _exit_status(done.code)
    except KeyboardInterrupt as err:
        _print_uncaught(err)
        return -2  # CPython ends by SIGINT after printing it: its caller sees -2
    except BaseException as err:
        _print_uncaught(err)
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass


def _failed_to_find(err, target):
    """runpy's own "No module named ..." (or "... is a package and cannot be directly
    executed"), not an ImportError raised by the module as it ran."""
    return getattr(err, "__traceback__", None) is not None and _only_runpy(err.__traceback__) and (
        str(err).startswith(("No module named", "Error while finding module specification"))
        or "cannot be directly executed" in str(err))


def _only_runpy(tb):
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if "runpy" not in name and name != __file__:
            return False
        tb = tb.tb_next
    return True


def _exit_status(code):
    """SystemExit's code as the exit status a process has (0-255), its text on stderr."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def _print_uncaught(err):
    _guest.without_support_frames(err)
    try:
        sys.excepthook(type(err), err, err.__traceback__)
    except Exception:
        import traceback

        traceback.print_exception(err)


def _at_exit():
    import atexit

    try:
        atexit._run_exitfuncs()
    except Exception:
        pass


def _stdin_input(prompt=""):
    """input() as it reads a pipe: the prompt on stdout, a line from stdin, EOFError at its end."""
    if prompt:
        sys.stdout.write(str(prompt))
        sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line
