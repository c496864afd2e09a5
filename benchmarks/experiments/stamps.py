"""Timers around methods, for the trace launchers (kernel_start_trace.py,
cell_steps_trace.py): `<label>: enter` and `<label>: exit` stamps through the
launcher's own `mark`, for plain and async methods, never changing what a method does."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


def wrapper(mark: Callable[[str], None]) -> Callable[..., None]:
    """wrap(owner, name, label, enter_only=False), stamping with `mark`."""

    def wrap(owner: Any, name: str, label: str, enter_only: bool = False) -> None:
        orig = getattr(owner, name)
        if inspect.iscoroutinefunction(orig):
            @functools.wraps(orig)
            async def awrapped(*a, **k):  # type: ignore[no-untyped-def]
                mark(f"{label}: enter")
                try:
                    return await orig(*a, **k)
                finally:
                    mark(f"{label}: exit")
            setattr(owner, name, awrapped)
            return

        @functools.wraps(orig)
        def wrapped(*a, **k):  # type: ignore[no-untyped-def]
            mark(f"{label}: enter")
            if enter_only:
                return orig(*a, **k)
            try:
                return orig(*a, **k)
            finally:
                mark(f"{label}: exit")
        setattr(owner, name, wrapped)

    return wrap
