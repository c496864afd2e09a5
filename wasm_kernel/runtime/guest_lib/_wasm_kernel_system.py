"""The guest's process backend for IPython: `!cmd`, `x = !cmd`, %sx, %system and
%%bash/%%sh cells run in the confined shell (`_wasm_kernel_sh`), never on the host.

IPython reaches processes through three functions of `IPython.utils.process`
(`system`, `getoutput`, `get_output_error_code`), with a backend per platform
(_process_posix, _process_win32). This module is the sandbox's backend: `install()`
puts its functions where `InteractiveShell.system_piped` and `getoutput` look them
up, so IPython's own code still does the rest (variable expansion, `_exit_code`,
SList, the `&` refusal), as it does under ipykernel. The operator can turn the shell
off (`c.WasmKernel.shell_commands = False`): then each of them refuses in one line.
"""

import sys

from IPython.core.error import UsageError

import _wasm_kernel_refusals as refusals
import _wasm_kernel_sh
from _wasm_kernel_sh import run_line


def system(cmd):
    """Run a command line with its output on the cell's stdout, as ipykernel's
    system_piped does on a pseudo-terminal: errors merged in, lines ending in
    \\r\\n, ls in columns. Returns the exit status."""
    _check()
    sys.stdout.flush()
    try:
        return run_line(cmd, sys.stdout.write, crlf=True, env=_env(tty=True), direct={"crlf": True, "merged": True})
    except KeyboardInterrupt:
        # As IPython's pexpect backend: the terminal echoes ^C, the command ends as
        # killed by SIGINT (-2), and the cell goes on.
        sys.stdout.write("^C\r\n")
        return -2


def getoutput(cmd):
    """The command line's output and errors, as one string (captured: no terminal)."""
    _check()
    out = []
    run_line(cmd, out.append, env=_env(tty=False))
    return "".join(out)


def get_output_error_code(cmd):
    """(stdout, stderr, status), for IPython's system_raise_on_error."""
    _check()
    out, err = [], []
    status = run_line(cmd, out.append, err.append, env=_env(tty=False))
    return "".join(out), "".join(err), status


def _env(tty):
    import os

    env = dict(os.environ)
    env.pop("_WASM_KERNEL_TTY", None)
    if tty:
        env["_WASM_KERNEL_TTY"] = "1"  # ls prints columns, as on ipykernel's pty
    return env


def _check():
    if not _wasm_kernel_sh.enabled():
        raise UsageError(refusals.SHELL)


def shell_cell(line, cell):
    """%%bash / %%sh: the cell as a command line; stdout and stderr kept apart, as
    IPython's script magics keep them."""
    _check()
    if line.strip():
        raise ValueError(f"%%bash options are not available in this sandbox ({line.strip()!r}); "
                         "write the commands in the cell")
    sys.stdout.flush()
    status = run_line(cell, sys.stdout.write, sys.stderr.write, env=_env(tty=False),
                      direct={"crlf": False, "merged": False})
    sys.stdout.flush()
    sys.stderr.flush()
    if status:
        # As IPython's script magics (IPython.core.magics.script.shebang) when a
        # script fails: CalledProcessError with the cell, as bytes, for its command.
        from subprocess import CalledProcessError

        raise CalledProcessError(status, cell.encode("utf8", "replace"))


def set_enabled(enabled):
    """The operator's choice (c.WasmKernel.shell_commands), per sandbox."""
    _wasm_kernel_sh.set_enabled(enabled)


def install(shell):
    """Make `shell` (an InteractiveShell) run its commands here (at the image's build;
    the commands' modules are imported then too, so the first `!` line is quick)."""
    import _wasm_kernel_sh_commands

    _wasm_kernel_sh_commands.supported()
    import IPython.core.interactiveshell as interactiveshell
    import IPython.utils.process as process

    for module in (interactiveshell, process):
        module.system = system
        module.getoutput = getoutput
        module.get_output_error_code = get_output_error_code
    for name in ("bash", "sh"):
        shell.register_magic_function(shell_cell, "cell", name)
