"""Where a notebook's folder may lie: the roots a kernel trusts, and a folder placed in them.

Jupyter Server hands a kernel two paths a client chose: the session's `name`
(JPY_SESSION_NAME is `os.path.join(cwd, name)`, and an absolute name replaces the
cwd) and the kernel's `path` (its cwd, joined to the server's root without any check
for `..`). Shown read-only under /app, either would be any folder the server's
account can read. So the rule is positive: a folder is shown only when it lies in a
root this kernel trusts,

- the contents root of the Jupyter Server that started it, which the package's
  server extension hands to every kernel it starts (SERVER_ROOT_ENV), and
- the folders the operator lists (`c.WasmKernel.notebook_roots`),

and is reached from that root one component at a time, with no link and no hidden
name on the way (`openat(O_NOFOLLOW)`, as the contents API hides hidden names). A
kernel that no server started (nbclient, nbconvert, papermill, `wasm-kernel run`,
VS Code) and no root was named for trusts the folder its launcher named: that
launcher is the machine's user. A kernel started by a Jupyter Server that handed no
root (the extension disabled, or not installed in the server's environment) trusts
nothing but the operator's roots: it fails closed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..host.safe_fs import UnsafePathError, open_dir, open_root
from ..runtime.notebook_folder_fs import is_hidden

SERVER_ROOT_ENV = "WASM_KERNEL_SERVER_ROOT"

# Programs that serve notebooks to remote clients and start kernels for them: a kernel
# whose parent is one of these and that was handed no root is a server's, not a
# local launcher's. (`jupyter lab` execs jupyter-lab; `python -m X` shows as X.)
SERVER_PROGRAMS = frozenset({
    "jupyter-lab", "jupyter-server", "jupyter-notebook", "jupyter-nbclassic", "jupyter-labhub",
    "jupyterhub-singleuser", "jupyter-kernelgateway", "jupyter-enterprisegateway", "voila",
})
SERVER_MODULES = frozenset({
    "jupyter_server", "jupyterlab", "notebook", "nbclassic", "jupyterhub.singleuser", "kernel_gateway",
    "enterprise_gateway", "voila",
})


@dataclass(frozen=True)
class Placement:
    """A folder placed in the kernel's roots: its link-free real path and the root
    that admitted it, or why it is refused (never a host path in that)."""

    path: Path | None
    root: Path | None = None
    refused: str | None = None


@dataclass(frozen=True)
class NotebookRoots:
    """The roots a kernel's notebook folder may lie in."""

    roots: tuple[Path, ...]  # absolute and normalised, as given (a root may itself be a link)
    confined: bool  # False: a local launcher's kernel, no root named: its folder is trusted
    server_handed: bool = False  # a Jupyter Server handed its root

    @classmethod
    def for_kernel(cls, environ: Mapping[str, str], operator_roots: Iterable[str],
                   parent_command: list[str] | None = None) -> NotebookRoots:
        """The roots of a kernel started with `environ`, whose parent ran `parent_command`
        (read from /proc when None)."""
        roots = [_absolute(r) for r in operator_roots if r and os.path.isabs(os.path.expanduser(r))]
        handed = SERVER_ROOT_ENV in environ
        served = environ.get(SERVER_ROOT_ENV, "")
        if handed and os.path.isabs(served):
            roots.insert(0, _absolute(served))
        # An empty or relative value is a server that has no folder of notebooks to
        # hand (a contents manager without a root): nothing of its is trusted.
        if handed or roots:
            return cls(tuple(roots), True, server_handed=handed and os.path.isabs(served))
        command = _parent_command() if parent_command is None else parent_command
        return cls((), launched_by_server(command))

    def place(self, folder: str | os.PathLike[str]) -> Placement:
        """Where `folder` lies: a link-free path inside a root, or why it is refused."""
        if not self.confined:
            return Placement(Path(os.path.realpath(folder)))
        lexical = _absolute(os.fspath(folder))
        refused: str | None = None
        for root in sorted(self.roots, key=lambda r: len(r.parts), reverse=True):  # the nearest root first
            parts = _below(lexical, root)
            if parts is None:
                continue
            placed = _walk(root, parts)
            if placed.path is not None:
                return placed
            refused = refused or placed.refused
        return Placement(None, None, refused or self._outside())

    def _outside(self) -> str:
        if not self.roots:
            return ("the Jupyter server that started this kernel did not hand it its notebooks' root (enable "
                    "wasm-kernel's server extension there, or list the folder in c.WasmKernel.notebook_roots)")
        if self.server_handed:
            return "it lies outside this server's notebooks"
        return "it lies outside the folders the operator lists (c.WasmKernel.notebook_roots)"


def hand_root_to_kernels(root: str | None) -> None:
    """Called by a Jupyter Server extension as it loads: every kernel the server
    starts inherits the server's environment (jupyter_client copies os.environ, and
    so does jupyter_server's session environment), so each is handed the server's
    contents root. None (a contents manager with no folder on this machine) hands an
    empty root, which trusts no folder of the server's."""
    os.environ[SERVER_ROOT_ENV] = os.path.abspath(root) if root else ""


def _absolute(path: str) -> Path:
    return Path(os.path.normpath(os.path.abspath(os.path.expanduser(path))))


def _below(lexical: Path, root: Path) -> list[str] | None:
    """The components of `lexical` below `root`, read against the root as given and
    against its real path (a server hands its root as configured, maybe through a
    link, and a name may have been made from either)."""
    for base in (root, Path(os.path.realpath(root))):
        if lexical == base or lexical.is_relative_to(base):
            return list(lexical.relative_to(base).parts)
    return None


def _walk(root: Path, parts: list[str]) -> Placement:
    """Down from the root's descriptor one component at a time, never through a link."""
    if any(is_hidden(part) for part in parts):
        return Placement(None, None, "it is or lies in a hidden folder")
    real_root = Path(os.path.realpath(root))
    try:
        fd = open_root(real_root)
    except OSError:
        return Placement(None, None, "its root cannot be read")
    try:
        for i, part in enumerate(parts):
            try:
                nxt = open_dir(fd, part, "/".join(parts[: i + 1]))
            except UnsafePathError:
                return Placement(None, None, "a link lies on the way to it")
            except OSError:
                return Placement(None, None, "it cannot be read")
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return Placement(real_root.joinpath(*parts), real_root)


def _parent_command() -> list[str]:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            raw = f.read(65536)
    except OSError:
        return []
    return [os.fsdecode(arg) for arg in raw.split(b"\0") if arg]


def launched_by_server(command: list[str]) -> bool:
    """Whether a parent that ran `command` is a notebook server (see SERVER_PROGRAMS)."""
    for i, arg in enumerate(command[:4]):
        if os.path.basename(arg) in SERVER_PROGRAMS:
            return True
        if arg == "-m" and i + 1 < len(command) and command[i + 1] in SERVER_MODULES:
            return True
    return False


__all__ = ["NotebookRoots", "Placement", "SERVER_PROGRAMS", "SERVER_ROOT_ENV", "hand_root_to_kernels",
           "launched_by_server"]
