"""A table as a MIME bundle: aligned text/plain for consoles, text/html for notebooks."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any


def table_bundle(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> dict[str, str]:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [caption] if caption else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in cells)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return {"text/plain": "\n".join(lines), "text/html": f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"}
