"""Session ids: UUIDv4 generation and the strict validation every session entry
point applies before it touches the filesystem."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

from wasm_kernel import (
    delete_session_path,
    delete_session_workspace,
    get_session_sandbox,
    list_session_files,
    read_session_file,
    write_session_file,
)
from wasm_kernel.sessions import new_session_id, validate_session_id
from wasm_kernel.sessions.layout import lease_path, metadata_path, workspace_path

CANONICAL = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
GOOD = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"


def test_new_ids_are_random_canonical_lower_case_uuid4s() -> None:
    ids = [new_session_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for sid in ids[:200]:
        assert CANONICAL.match(sid), sid
        assert uuid.UUID(sid).version == 4
        assert set(sid) <= set("0123456789abcdef-") and "/" not in sid


def test_validation_accepts_canonical_ids_and_normalises_upper_case() -> None:
    assert validate_session_id(GOOD) == GOOD
    assert validate_session_id(GOOD.upper()) == GOOD
    assert validate_session_id("1B4E28BA-2fa1-41D2-883f-0016D3CCA427") == GOOD
    assert validate_session_id(uuid.UUID(GOOD)) == GOOD
    # Any canonical UUID is accepted, not only version 4 (ids may come from elsewhere).
    assert validate_session_id("00000000-0000-0000-0000-000000000000") == "00000000-0000-0000-0000-000000000000"


BAD_IDS = [
    ".", "..", "", " ", "\t", "\n", "\x00", "/", "\\", "a/b",
    "../../../tmp", "abc-123", "aaa-111",
    f" {GOOD}", f"{GOOD} ", f"{GOOD}\n", f"{GOOD}\x00", f"{GOOD}/", f"../{GOOD}", f"{GOOD}/..",
    "{" + GOOD + "}", f"urn:uuid:{GOOD}", GOOD.replace("-", ""), GOOD[:-1], GOOD + "0",
    GOOD.replace("-", "/"), GOOD.replace("b", "g"),
    GOOD[:-1] + "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit to Python, not to us
    GOOD[:-1] + "\u212a",  # KELVIN SIGN lower-cases to ASCII 'k' (not hex anyway)
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_everything_else_is_rejected_with_a_message_naming_value_and_expectation(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_session_id(bad)
    message = str(info.value)
    assert repr(bad)[:40] in message
    assert "expected a canonical UUID" in message


@pytest.mark.parametrize("bad", [None, 42, b"1b4e28ba-2fa1-41d2-883f-0016d3cca427", Path(GOOD)])
def test_non_strings_are_rejected_too(bad: object) -> None:
    with pytest.raises(ValueError, match="expected a canonical UUID"):
        validate_session_id(bad)


def test_layout_paths_validate_the_id_too(tmp_path: Path) -> None:
    for fn in (workspace_path, metadata_path, lease_path):
        with pytest.raises(ValueError):
            fn(tmp_path, "../x")
    assert workspace_path(tmp_path, GOOD.upper()) == tmp_path / GOOD


@pytest.fixture
def no_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any filesystem call fails the test: ids must be checked before the first one."""

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"filesystem touched with {args!r}")

    for name in ("open", "mkdir", "makedirs", "stat", "lstat", "scandir", "listdir", "unlink", "rmdir", "rename", "replace"):
        monkeypatch.setattr(os, name, boom)


@pytest.mark.parametrize("bad", [".", "..", "", " ", "\x00", "a/b", "../../../tmp", "abc-123"])
def test_every_session_entry_point_rejects_bad_ids_before_any_filesystem_call(
    tmp_path: Path, bad: str, no_filesystem: None
) -> None:
    root = tmp_path / "root"
    calls = [
        lambda: get_session_sandbox(bad, workspace_root=root),
        lambda: delete_session_workspace(bad, workspace_root=root),
        lambda: list_session_files(bad, root),
        lambda: read_session_file(bad, "f.txt", root),
        lambda: write_session_file(bad, "f.txt", b"x", root),
        lambda: delete_session_path(bad, "f.txt", root),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="invalid session id"):
            call()


def test_a_traversal_id_deletes_nothing_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "root"
    root.mkdir(parents=True)
    victim = tmp_path / "tmp"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    with pytest.raises(ValueError):
        delete_session_workspace("../../../tmp", workspace_root=root)
    assert (victim / "keep.txt").read_text() == "keep"
