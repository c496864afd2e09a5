"""structlog loggers that write through the standard library's logging.

A library must not print: structlog's default configuration writes to stdout,
which in a kernel would land in the notebook. Loggers from here go to
`logging.getLogger(name)` and stay silent unless the application configures it.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,  # first: a disabled level costs next to nothing
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
]


def get_logger(name: str) -> Any:
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )


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
