"""%pip: pure-Python wheels for this session (sessions/packages.py), on the host.

Only requirement specifiers and -q/-U/--no-deps reach pip: no file, no -r, no -e,
no index or config option, so a notebook cannot point pip at the host's files or
its configuration. The operator chooses the index (WasmKernel.pip_*).
"""

from __future__ import annotations

import shlex

from ..session_protocol import SessionView
from .registry import MAGICS, MagicError, MagicOutput
from .tables import table_bundle

USAGE = "%pip install [-q] [-U] [--no-deps] PACKAGE ...  |  %pip list  |  %pip uninstall [-y] PACKAGE ..."
INSTALL_FLAGS = {"-q": "quiet", "--quiet": "quiet", "-U": "upgrade", "--upgrade": "upgrade", "--no-deps": "no_deps"}
RESTART_NOTE = "Note: you may need to restart the kernel to use updated packages.\n"


@MAGICS.add("pip", "line", USAGE, """Install pure-Python wheels (py3-none-any) into this session, as pip would:
they stay with the session across restarts and reopenings, and the sandbox can read but not
change them. Packages that need compiled code cannot be installed; numpy, pandas, scipy,
scikit-learn, matplotlib and the rest are built in. Only package names with versions and
-q, -U and --no-deps are accepted.""")
def pip_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    if not session.settings.pip_enabled:
        raise MagicError("%pip is turned off on this server by the operator (WasmKernel.pip_enabled)")
    try:
        words = shlex.split(line)
    except ValueError as err:
        raise MagicError(f"%pip: {err}") from None
    if not words:
        raise MagicError(f"usage: {USAGE}")
    command, args = words[0], words[1:]
    # The installer (pip's runner, wheel checks, packaging) is %pip's alone: imported
    # by the first %pip, not by every kernel's start.
    from ...sessions.packages import PackageError

    try:
        if command == "install":
            return _install(session, args)
        if command == "list":
            return _list(session, args)
        if command == "uninstall":
            return _uninstall(session, args)
    except PackageError as err:
        raise MagicError(str(err)) from None
    raise MagicError(f"%pip {command}: only install, list and uninstall are available in the sandbox; usage: {USAGE}")


def _install(session: SessionView, args: list[str]) -> MagicOutput:
    flags = {"quiet": False, "upgrade": False, "no_deps": False}
    names = []
    for word in args:
        if word.startswith("-"):
            if word not in INSTALL_FLAGS:
                raise MagicError(f"%pip install: {word} is not allowed here; the options are -q, -U and --no-deps")
            flags[INSTALL_FLAGS[word]] = True
        else:
            names.append(word)
    from ...sessions.packages import install_packages, parse_requirements

    requirements = parse_requirements(names)
    result = install_packages(
        session.workspace_root, session.session_id, requirements, session.pip_settings(),
        on_output=session.say, stop=session.interrupted, **flags,
    )
    lines = list(result.notes)
    if result.installed:
        session.packages_changed()
        lines.append("Successfully installed " + " ".join(f"{name}-{version}" for name, version in result.installed))
        lines.append(RESTART_NOTE.rstrip("\n"))
    return MagicOutput(text="".join(f"{line}\n" for line in lines))


def _list(session: SessionView, args: list[str]) -> MagicOutput:
    if args:
        raise MagicError("%pip list takes no options")
    from ...sessions.packages import list_packages

    found = list_packages(session.workspace_root, session.session_id)
    if not found:
        return MagicOutput(text="No packages installed in this session (%pip install NAME adds one).\n")
    return MagicOutput(bundles=[table_bundle(["Package", "Version"], found, "Installed in this session")])


def _uninstall(session: SessionView, args: list[str]) -> MagicOutput:
    names = [w for w in args if w not in ("-y", "--yes")]
    if any(w.startswith("-") for w in names) or not names:
        raise MagicError("usage: %pip uninstall [-y] PACKAGE ...")
    from ...sessions.packages import uninstall_packages

    removed = uninstall_packages(session.workspace_root, session.session_id, names)
    if not removed:
        raise MagicError(f"%pip uninstall: {' '.join(names)}: not installed in this session (%pip list shows what is)")
    session.packages_changed()
    return MagicOutput(text="".join(f"Successfully uninstalled {name}\n" for name in removed) + RESTART_NOTE)
