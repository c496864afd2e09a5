"""Moments as people read them: `2026-11-25 14:02 UTC (3 min ago)`.

Metadata keeps UTC ISO 8601 with microseconds (sessions/metadata.py), exact for
machines; %session shows the minute and how long ago it was, the part a person
asks about. Always UTC: the kernel's host may sit in another zone than its user,
and a zone-less time would silently mean the host's.
"""

from __future__ import annotations

from datetime import datetime, timezone


def format_age(seconds: float) -> str:
    """How long ago, coarsely: `just now`, `3 min ago`, `5 h ago`, `2 days ago`.
    A moment ahead of now by more than a minute (another host's clock) says so."""
    if seconds < -60:
        return "in the future (the clocks disagree)"
    if seconds < 60:
        return "just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min ago"
    hours = minutes // 60
    if hours < 24:
        return f"{hours} h ago"
    days = hours // 24
    return f"{days} day{'s' if days != 1 else ''} ago"


def format_when(moment: datetime, now: datetime | None = None) -> str:
    """`2026-11-25 14:02 UTC (3 min ago)`; a naive `moment` is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    return f"{moment:%Y-%m-%d %H:%M} UTC ({format_age((now - moment).total_seconds())})"
