"""Data that crosses into the host, made safe to send on: every string encodable as
UTF-8, every structure shallow enough to serialise.

Python strings may hold lone surrogates (a guest's repr, a name, a client's
code): JSON escapes them happily on the way in, but jupyter_client encodes each
outgoing message as UTF-8 and fails on them, and that request then gets no reply.
So strings are cleaned once, where data enters: the guest's door (guest_messages)
and the kernel's client door (kernel/message_guard). A lone surrogate becomes its
`\\udXXX` escape, the way repr() shows it; everything else is left untouched.
"""

from __future__ import annotations

from typing import Any

# Deeper than this, a structure is refused: the host would overflow its own stack
# serialising it (json's C encoder recurses), and no real output nests so deep.
MAX_DEPTH = 200


class TooDeep(ValueError):
    pass


def clean_text(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def clean(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """`value` with every string (keys too) cleaned, rebuilt only where it changed.
    Iterative, so a deep structure cannot overflow the host's stack; TooDeep past
    max_depth."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)):
        return value
    # Post-order over containers with an explicit stack: (container, depth, visited?).
    done: dict[int, Any] = {}
    stack: list[tuple[Any, int, bool]] = [(value, 0, False)]
    while stack:
        node, depth, visited = stack.pop()
        if depth >= max_depth:  # depth counts from 0: this is container number depth + 1
            raise TooDeep(f"nested more than {max_depth} levels deep")
        children = node.values() if isinstance(node, dict) else node
        if not visited:
            stack.append((node, depth, True))
            for child in children:
                if isinstance(child, (dict, list)) and id(child) not in done:
                    stack.append((child, depth + 1, False))
            continue
        if isinstance(node, dict):
            new: Any = {}
            changed = False
            for key, item in node.items():
                new_key = clean_text(key) if isinstance(key, str) else key
                new_item = _cleaned(item, done)
                changed |= new_key is not key or new_item is not item
                new[new_key] = new_item
        else:
            new = [_cleaned(item, done) for item in node]
            changed = any(a is not b for a, b in zip(new, node))
        done[id(node)] = new if changed else node
    return done[id(value)]


def _cleaned(item: Any, done: dict[int, Any]) -> Any:
    if isinstance(item, str):
        return clean_text(item)
    if isinstance(item, (dict, list)):
        return done[id(item)]
    return item


__all__ = ["MAX_DEPTH", "TooDeep", "clean", "clean_text"]
