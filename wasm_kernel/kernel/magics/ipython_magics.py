"""IPython's everyday magics, for notebooks written against IPython: %time,
%timeit and %matplotlib. Timing runs in the guest, on the guest's clock."""

from __future__ import annotations

import re
from typing import Any

from .registry import MAGICS, MagicError, MagicOutput


@MAGICS.add("time", "both", "%time STATEMENT  |  %%time", "Run the statement (or the cell) once and print CPU and wall time, as IPython does.")
def time_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    code = body if body is not None else line
    if not code.strip():
        raise MagicError("%time needs a statement, e.g. %time sum(range(10**6))")
    return MagicOutput(guest_code=code, timed=True)


@MAGICS.add("timeit", "both", "%timeit [-n N] [-r R] STATEMENT  |  %%timeit [-n N] [-r R] [SETUP]", """Time a statement over many loops, as IPython's %timeit: mean ± std. dev. of R runs.
-n: loops per run (default: chosen so a run takes at least 0.2 s); -r: runs (default 7).
%%timeit times the cell's body; the rest of its first line is setup code run once per run.""")
def timeit_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    number, repeat, quiet, code = _timeit_options(line)
    stmt, setup = (body, code or "pass") if body is not None else (code, "pass")
    if not stmt.strip():
        raise MagicError("%timeit needs a statement, e.g. %timeit sum(range(1000))")
    call = f"__import__('_wasm_kernel_guest').introspect().timeit({stmt!r}, {setup!r}, {number}, {repeat}, {quiet!r})"
    return MagicOutput(guest_code=call)


_OPTION = re.compile(r"\s*-(?:([nr])\s*(\S+)|(q))(?=\s|$)")


def _timeit_options(line: str) -> tuple[int, int, bool, str]:
    """IPython's leading -n N / -r R / -q options, then the statement, spacing kept."""
    number, repeat, quiet = 0, 7, False
    while (m := _OPTION.match(line)) is not None:
        if m.group(3):
            quiet = True
        else:
            try:
                value = int(m.group(2))
            except ValueError:
                raise MagicError(f"%timeit: -{m.group(1)} needs a whole number, got {m.group(2)!r}") from None
            if value < 1:
                raise MagicError(f"%timeit: -{m.group(1)} must be at least 1")
            number, repeat = (value, repeat) if m.group(1) == "n" else (number, value)
        line = line[m.end():]
    return number, repeat, quiet, line.strip()


@MAGICS.add("matplotlib", "line", "%matplotlib [inline]", "Figures are always shown inline as PNG; `inline` is the only backend in the sandbox.")
def matplotlib_magic(kernel: Any, line: str, body: str | None) -> MagicOutput:
    backend = line.strip() or "inline"
    if backend != "inline":
        raise MagicError(f"%matplotlib {backend}: only the inline backend is available in the sandbox (figures appear as PNG)")
    return MagicOutput()
