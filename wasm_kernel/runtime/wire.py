"""The wire's constants on the host: read from the very file the guest imports
(guest_lib/_wasm_kernel_wire.py), so the two sides cannot drift apart. The file is
run here as plain Python (it holds constants only); it is not imported, so the host
writes no bytecode into the folder the guest mounts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_SOURCE = Path(__file__).parent / "guest_lib" / "_wasm_kernel_wire.py"
_shared: dict[str, Any] = {"__name__": "_wasm_kernel_wire"}
exec(compile(_SOURCE.read_text(), str(_SOURCE), "exec"), _shared)  # noqa: S102 - our own shipped file

MAX_MESSAGE_BYTES: int = _shared["MAX_MESSAGE_BYTES"]
OP_DISPLAY: str = _shared["OP_DISPLAY"]
OP_EXECUTE_RESULT: str = _shared["OP_EXECUTE_RESULT"]
OP_CLEAR_OUTPUT: str = _shared["OP_CLEAR_OUTPUT"]
OP_ERROR: str = _shared["OP_ERROR"]
OP_COMM: str = _shared["OP_COMM"]
OP_HISTORY: str = _shared["OP_HISTORY"]
OP_INPUT: str = _shared["OP_INPUT"]
OP_IMMORTALIZE: str = _shared["OP_IMMORTALIZE"]
OP_STREAM_RING: str = _shared["OP_STREAM_RING"]
OP_RESULT: str = _shared["OP_RESULT"]
OP_QUERY_RESULT: str = _shared["OP_QUERY_RESULT"]
OP_REQUEST: str = _shared["OP_REQUEST"]
OP_HTTP_OPEN: str = _shared["OP_HTTP_OPEN"]
OP_HTTP_READ: str = _shared["OP_HTTP_READ"]
OP_HTTP_CLOSE: str = _shared["OP_HTTP_CLOSE"]
OP_PYTHON: str = _shared["OP_PYTHON"]
OP_SOURCE: str = _shared["OP_SOURCE"]
OP_DEBUG: str = _shared["OP_DEBUG"]
OP_WORK_TAKE: str = _shared["OP_WORK_TAKE"]
OP_WORK_DONE: str = _shared["OP_WORK_DONE"]
CELL_FILE_PREFIX: str = _shared["CELL_FILE_PREFIX"]
CELL_HASH_SEED: int = _shared["CELL_HASH_SEED"]
MAX_DEBUG_QUEUE: int = _shared["MAX_DEBUG_QUEUE"]
MAX_BREAKPOINTS: int = _shared["MAX_BREAKPOINTS"]
CHILD_FUNCTION: str = _shared["CHILD_FUNCTION"]
CHILD_TURN: str = _shared["CHILD_TURN"]
MAX_CHILD_DEPTH: int = _shared["MAX_CHILD_DEPTH"]
HTTP_DATA: bytes = _shared["HTTP_DATA"]
HTTP_ERROR: bytes = _shared["HTTP_ERROR"]
EXACT_READ_MIN: int = _shared["EXACT_READ_MIN"]
EXACT_READ_MAX: int = _shared["EXACT_READ_MAX"]
MAX_HTTP_BODY: int = _shared["MAX_HTTP_BODY"]
COMM_MSG_TYPES: tuple[str, ...] = tuple(_shared["COMM_MSG_TYPES"])
GUEST_FUNCTIONS: frozenset[str] = frozenset(_shared["GUEST_FUNCTIONS"])
SERVE_TURN: str = _shared["SERVE_TURN"]
QUERY_OPS: frozenset[str] = frozenset(_shared["QUERY_OPS"])

__all__ = [name for name in _shared if name.isupper()]
