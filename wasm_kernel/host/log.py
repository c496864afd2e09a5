"""structlog loggers that write through the standard library's logging.

A library must not print: structlog's default configuration writes to stdout,
which in a kernel would land in the notebook. Loggers from here go to
`logging.getLogger(name)` and stay silent unless the application configures it.
"""

from __future__ import annotations

import logging
from typing import Any

# The standard library's number for each of a structlog logger's level methods
# (structlog's filter_by_level uses the same table).
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL}


def _processors() -> list[Any]:
    import structlog

    return [
        structlog.stdlib.filter_by_level,  # first: a disabled level costs next to nothing
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
    ]


class _DeferredLogger:
    """A structlog BoundLogger made with the first event its level lets through.

    A kernel logs nothing at its default level (WARNING, and the package's
    NullHandler), yet importing structlog took ~6 ms of every start; the level is
    asked first, as filter_by_level would, and structlog comes with the first event
    that is written. Every other attribute is the BoundLogger's."""

    __slots__ = ("_stdlib", "_bound")

    def __init__(self, name: str) -> None:
        self._stdlib = logging.getLogger(name)
        self._bound: Any = None

    def _logger(self) -> Any:
        if self._bound is None:
            import structlog

            self._bound = structlog.wrap_logger(
                self._stdlib, processors=_processors(), wrapper_class=structlog.stdlib.BoundLogger)
        return self._bound

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in self.__slots__:
            raise AttributeError(name)  # not yet set (a copy being made), or a dunder: never structlog's
        level = _LEVELS.get(name)
        if level is not None and not self._stdlib.isEnabledFor(level):
            return _dropped
        return getattr(self._logger(), name)


def _dropped(*_args: Any, **_kwargs: Any) -> None:
    return None


def get_logger(name: str) -> Any:
    """A structlog logger writing to `logging.getLogger(name)`, silent unless the
    application configures that logger."""
    return _DeferredLogger(name)


def configure_service_logging(level: int = logging.INFO) -> None:
    """For a service process (the pool's manager and router): events as one line each
    on stderr, where an operator's process manager collects them. Never for the kernel,
    whose stderr a notebook may see."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("wasm_kernel",):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        # The package's NullHandler (a library's default) does not count as a destination.
        if not any(isinstance(h, logging.StreamHandler) for h in logger.handlers):
            logger.addHandler(handler)
        logger.propagate = False
