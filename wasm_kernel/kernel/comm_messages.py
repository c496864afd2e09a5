"""Comm messages from clients, checked before they reach the guest.

A frontend's comm_open / comm_msg / comm_close carries JSON content (already
cleaned by the session's unpacker, message_guard.py) and binary buffers. What goes
into the guest is the header, the metadata, the content and the buffers
base64-encoded, as one JSON document (runtime/python_guest.run_comm); a message
too big to hand over is dropped and logged, never half-delivered.
"""

from __future__ import annotations

import base64
import json
from typing import Any
# A widget's state or a file upload fits easily; beyond this a message is refused
# rather than copied into the guest (its memory limit would be the only bound).
MAX_COMM_BYTES = 16 << 20
MAX_ID_CHARS = 256


def comm_for_guest(parent: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(the message for the guest, None) or ({}, why it is refused)."""
    content = parent.get("content")
    if not isinstance(content, dict):
        return {}, "its content is not an object"
    comm_id = content.get("comm_id")
    if not isinstance(comm_id, str) or not comm_id or len(comm_id) > MAX_ID_CHARS:
        return {}, "comm_id is missing, not a string or longer than 256 characters"
    buffers = [bytes(b) for b in parent.get("buffers") or ()]
    size = sum(len(b) for b in buffers)
    if size > MAX_COMM_BYTES:
        return {}, f"its buffers hold {size} bytes, more than {MAX_COMM_BYTES}"
    try:
        size += len(json.dumps(content, default=str))
    except (TypeError, ValueError) as err:
        return {}, f"its content cannot be encoded: {err}"
    if size > MAX_COMM_BYTES:
        return {}, f"it is {size} bytes, more than {MAX_COMM_BYTES}"
    header = parent.get("header") or {}
    return {
        "header": {k: header.get(k) for k in ("msg_id", "msg_type", "session", "username", "date", "version")},
        "metadata": dict(parent.get("metadata") or {}),
        "content": content,
        "buffers": [base64.b64encode(b).decode("ascii") for b in buffers],
    }, None


def comm_info_target(content: Any) -> tuple[str | None, str | None]:
    """(the target_name asked about or None for all, None) or (None, why the request is bad)."""
    target = content.get("target_name") if isinstance(content, dict) else None
    if target is not None and (not isinstance(target, str) or len(target) > MAX_ID_CHARS):
        return None, "comm_info_request: target_name must be a string of at most 256 characters"
    return target, None
