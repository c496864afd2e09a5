"""The library's loggers (host/log.py): structlog events through the standard library's
logging, with structlog imported only once a level lets an event through."""

from __future__ import annotations

import subprocess
import sys


def _run(probe: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.splitlines() + out.stderr.splitlines()


def test_events_at_a_disabled_level_are_dropped_without_importing_structlog() -> None:
    """A kernel's start logs only at levels its logging leaves off, and importing
    structlog was ~6 ms of every start."""
    lines = _run(
        "import sys\n"
        "from wasm_kernel.host.log import get_logger\n"
        "log = get_logger('wasm_kernel.runtime')\n"
        "log.debug('a'); log.info('b', x=1)\n"
        "print('structlog' in sys.modules)\n"
        "log.warning('d')  # WARNING is the root logger's default level: this one is made\n"
        "print('structlog' in sys.modules)\n"
    )
    assert lines == ["False", "True"], lines


def test_an_enabled_level_writes_one_structlog_line_and_a_disabled_one_still_drops() -> None:
    lines = _run(
        "import logging, sys\n"
        "from wasm_kernel.host.log import configure_service_logging, get_logger\n"
        "configure_service_logging(logging.INFO)\n"
        "log = get_logger('wasm_kernel.pool')\n"
        "log.debug('hidden', x=1)\n"
        "log.info('pool.joined', host='h1', slots=2)\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    log.exception('pool.failed')\n"
        "print('structlog' in sys.modules, file=sys.stdout)\n"
    )
    assert lines[0] == "True"
    joined = next(line for line in lines if "pool.joined" in line)
    assert joined.startswith("event='pool.joined' host='h1' level='info' slots=2 timestamp='"), joined
    failed = next(line for line in lines if "pool.failed" in line)
    assert "level='error'" in failed and any("ZeroDivisionError" in line for line in lines)
    assert not any("hidden" in line for line in lines)


def test_a_level_enabled_later_is_honoured_by_a_logger_made_before() -> None:
    """Loggers are made at import, before an application configures logging: the level
    is asked at each event, as structlog's filter_by_level does."""
    lines = _run(
        "import logging\n"
        "from wasm_kernel.host.log import get_logger\n"
        "log = get_logger('wasm_kernel.late')\n"
        "log.info('before')\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "log.info('after', n=2)\n"
    )
    assert len(lines) == 1 and lines[0].startswith("event='after' level='info' n=2 timestamp="), lines
