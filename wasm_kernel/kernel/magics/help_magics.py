"""%lsmagic and per-magic help (`%name?` is handled by the kernel's help path)."""

from __future__ import annotations

from typing import Any

from .registry import MAGICS, MagicError, MagicOutput


@MAGICS.add("lsmagic", "line", "%lsmagic", "List the available magics. `%name?` shows help on one.")
def lsmagic_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    text = (
        "Available line magics:\n" + "  ".join("%" + n for n in MAGICS.line_names()) + "\n\n"
        "Available cell magics:\n" + "  ".join("%%" + n for n in MAGICS.cell_names()) + "\n\n"
        "Magics run on the host, on this session's workspace only. `%name?` shows help on one;\n"
        "`!cmd` shell commands are not available: the sandbox has no shell.\n"
    )
    return MagicOutput(text=text)


@MAGICS.add("magic", "line", "%magic", "Show help on every magic.")
def magic_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    if line.strip():
        raise MagicError("%magic takes no arguments; use %NAME? for one magic")
    parts = []
    for name in sorted(set(MAGICS.line_names()) | set(MAGICS.cell_names())):
        magic = MAGICS.lookup(name)
        assert magic is not None
        parts.append(f"{magic.usage}\n    " + magic.help.replace("\n", "\n    "))
    return MagicOutput(text="\n\n".join(parts) + "\n")
