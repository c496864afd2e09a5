"""The repository's folders, for tests at any depth of tests/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
BENCHMARKS = REPO / "benchmarks"
SUPPORT = Path(__file__).resolve().parent  # scripts the tests run by path live here too
