"""Fixtures of the adversarial suite; the harness itself is tests/support/security_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.security_harness import Target, make_target


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    t = make_target(tmp_path_factory.mktemp("target"))
    yield t
    t.kernel.shutdown()
