"""The sandbox's own magics in the guest's shell, as ipykernel's KernelMagics are
its kernel's: %less/%more and %autosave as ipykernel has them, one-line refusals for
what needs a shell, another package manager or a connection file, and %lsmagic and
the unknown-magic error naming the sandbox magics that run on the host.

The host tells the shell its magics' names when a sandbox starts (set_host_magics):
a cell that uses one where the host cannot see it (inside a block) is told where it
belongs, not that it does not exist.
"""

import difflib

from IPython.core import page
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

import _wasm_kernel_refusals as refusals

host_magics = {}  # name -> "line" | "cell" | "both", from the host as a sandbox starts


def set_host_magics(names):
    host_magics.clear()
    host_magics.update(names)


@magics_class
class SandboxMagics(Magics):
    """Magics that would start a process refuse in one line (replacing IPython's
    script magics and system access); ipykernel's %less, %more and %autosave."""

    def _refuse(self, line="", cell=None):
        raise UsageError(refusals.SHELL)

    # %%bash and %%sh run in the confined shell (_wasm_kernel_system), and %sx and
    # %system reach it through IPython's own getoutput; these would start programs.
    for _name in ("script", "perl", "ruby", "python2", "python3", "pypy", "killbgscripts", "clear", "man"):
        line_cell_magic(_name)(_refuse)
    del _name

    def _no_package_manager(self, line=""):
        raise UsageError(refusals.PACKAGE_MANAGERS)

    for _name in ("conda", "mamba", "micromamba", "uv"):
        line_magic(_name)(_no_package_manager)
    del _name

    def _no_connection(self, line=""):
        raise UsageError(refusals.CONNECTION)

    for _name in ("connect_info", "qtconsole", "subshell"):
        line_magic(_name)(_no_connection)
    del _name

    @line_magic
    def less(self, arg_s=""):
        """Show a file in the pager; .py files are highlighted."""
        # Copied from ipykernel.zmqshell.KernelMagics.less (ipykernel is not in the
        # guest: every ipykernel module imports pyzmq through its package).
        if not arg_s:
            raise UsageError("Missing filename.")
        if arg_s.endswith(".py"):
            from IPython.utils import openpy

            text = self.shell.pycolorize(openpy.read_py_file(arg_s, skip_encoding_cookie=False))
        else:
            with open(arg_s) as f:
                text = f.read()
        page.page(text)

    line_magic("more")(less)

    @line_magic
    def autosave(self, arg_s=""):
        """Set the notebook's autosave interval in seconds (0 disables it)."""
        # Copied from ipykernel.zmqshell.KernelMagics.autosave.
        from IPython.display import Javascript, display

        try:
            interval = int(arg_s)
        except ValueError:
            raise UsageError(f"%autosave requires an integer, got {arg_s!r}") from None
        display(Javascript("IPython.notebook.set_autosave_interval(%i)" % (1000 * interval)),
                include=["application/javascript"])
        print(f"Autosaving every {interval} seconds" if interval else "Autosave disabled")

    @line_magic
    def lsmagic(self, line=""):
        """List the magics: the sandbox's own (on the host) and IPython's (in the sandbox)."""
        return _MagicsList(_lsmagic_text(self.shell))


class _MagicsList:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _lsmagic_text(shell):
    found = shell.magics_manager.lsmagic()
    line = sorted(n for n in found["line"] if n not in host_magics)
    cell = sorted(n for n in found["cell"] if n not in host_magics)
    return "\n".join([
        "Sandbox magics (run on the host, on this notebook's session; each on a line of its own):",
        "  ".join(_host_magic_label(n) for n in sorted(host_magics)) or "(none)",
        "",
        "IPython magics (run in the sandbox):",
        "Available line magics:",
        "%" + "  %".join(line),
        "",
        "Available cell magics:",
        "%%" + "  %%".join(cell),
        "",
        shell.magics_manager.auto_status(),
    ])


def _host_magic_label(name):
    kind = host_magics.get(name, "line")
    return {"line": f"%{name}", "cell": f"%%{name}", "both": f"%{name} %%{name}"}[kind]


def unknown_magic(shell, type_, name):
    """The UsageError text for a magic the shell does not know: a host magic used
    where the host cannot run it, a line magic used as a cell magic (or the reverse),
    a near miss; then the magics there are."""
    mark = "%" if type_ == "line" else "%%"
    if name in host_magics:
        return (
            f"{mark}{name} runs on the host: put it on a line of its own at the top level of a cell, "
            "not inside a block or a call"
        )
    ipython = shell.magics_manager.lsmagic()
    other = ipython["cell" if type_ == "line" else "line"]
    hint = ""
    if name in other:
        hint = f" (but {'%%' if type_ == 'line' else '%'}{name} exists, did you mean that instead?)"
    else:
        close = difflib.get_close_matches(name, list(host_magics) + list(ipython[type_]), n=1)
        if close:
            hint = f" (did you mean {mark}{close[0]}?)"
    host = " ".join(_host_magic_label(n) for n in sorted(host_magics)) or "none"
    names = " ".join(mark + n for n in sorted(ipython[type_]))
    kind = "Line magic function" if type_ == "line" else "Cell magic"
    return f"{kind} `{mark}{name}` not found{hint}. Sandbox magics: {host}. IPython magics: {names}."
