"""Glob patterns over a workspace's "/"-separated paths: `*`, `?` and `[...]` match
within one component, `**` any number of components. So "*.csv" is the top level
only, "**/*.csv" any depth, and "**" everything. Matching is linear in the pattern
and the path: a pattern a notebook sends cannot cost more than their product."""

from __future__ import annotations

import fnmatch
from functools import lru_cache

MAX_PATTERN_CHARS = 4096


def compile_pattern(components: list[str]) -> tuple[str, ...]:
    """A pattern's components, checked as paths are (workspace_fs.split_relative_path),
    as glob_match takes them: none is everything, and repeated `**` are one."""
    parts: list[str] = []
    for part in components or ["**"]:
        if not (part == "**" and parts and parts[-1] == "**"):  # a/**/**/b is a/**/b
            parts.append(part)
    return tuple(parts)


def glob_match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether the path's components match: one pass over them, carrying the set of
    pattern positions still possible, so no pattern can cost more than
    len(pattern) * len(parts) component matches."""
    states = _skip_globstars({0}, pattern)
    for part in parts:
        moved = set()
        for i in states:
            if i == len(pattern):
                continue
            if pattern[i] == "**":
                moved.add(i)  # ** takes this component too
            elif _component_match(part, pattern[i]):
                moved.add(i + 1)
        states = _skip_globstars(moved, pattern)
        if not states:
            return False
    return len(pattern) in states


def _skip_globstars(states: set[int], pattern: tuple[str, ...]) -> set[int]:
    """A ** may also match no component: wherever one stands, the next position is reachable."""
    out = set(states)
    for i in states:
        while i < len(pattern) and pattern[i] == "**":
            i += 1
            out.add(i)
    return out


@lru_cache(maxsize=4096)
def _component_match(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)
