"""Property-based vectors (hypothesis): path validation, magic argument parsing,
session ids and message content, over inputs no list of examples would reach."""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from wasm_kernel.kernel.magics.registry import MAGICS, MagicArgs, MagicError, split_cell
from wasm_kernel.runtime.wire_text import MAX_DEPTH, TooDeep, clean
from wasm_kernel.sessions.file_ops import list_session_files, read_session_file, split_relative_path
from wasm_kernel.sessions.identity import escape_part
from wasm_kernel.sessions.session_ids import validate_session_id

from support.security_harness import Target, examples

pytestmark = pytest.mark.slow  # hypothesis draws hundreds of examples per property

# Path-like text: the pieces attacks are made of, mixed with anything at all.
PIECES = st.sampled_from(["..", ".", "", "/", "//", "a", "secret.txt", "link", "\x00", "~", "%2e%2e", "\\", "..."])
PATHS = st.one_of(st.lists(PIECES, max_size=12).map("/".join), st.text(max_size=60))


@given(PATHS)
@settings(max_examples=examples(500))
def test_a_validated_path_never_leaves_the_workspace(text: str) -> None:
    try:
        parts = split_relative_path(text)
    except ValueError as err:
        assert "\n" not in str(err)
        return
    assert all(p not in ("", ".", "..") and "/" not in p and "\x00" not in p for p in parts)
    joined = posixpath.normpath(posixpath.join("/workspace", *parts))
    assert joined == "/workspace" or joined.startswith("/workspace/")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A sessions root with one session holding a file and a link out, beside a secret."""
    base = tmp_path_factory.mktemp("props")
    (base / "secret.txt").write_text("SECRET")
    root = base / "root"
    sid = str(uuid.uuid4())
    (root / sid / "a").mkdir(parents=True)
    (root / sid / "a" / "secret.txt").write_text("mine")
    os.symlink("../../../secret.txt", root / sid / "link")
    return root, sid


@given(PATHS)
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_file_operations_read_only_the_sessions_own_files(files: tuple[Path, str], text: str) -> None:
    root, sid = files
    try:
        data = read_session_file(sid, text, root)
    except (ValueError, OSError) as err:
        assert "\n" not in str(err) and str(root.parent) not in str(err).replace(str(root), "")
        return
    assert data == b"mine"


@given(st.text(alphabet=st.sampled_from("*?[]!/.a-z\\"), max_size=40))
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_glob_lists_only_the_sessions_own_files(files: tuple[Path, str], pattern: str) -> None:
    root, sid = files
    try:
        found = list_session_files(sid, root, pattern)
    except ValueError as err:
        assert "\n" not in str(err)
        return
    assert set(found) <= {"a/secret.txt", "link"}


@given(st.text(max_size=300))
@settings(max_examples=examples(500))
def test_magic_arguments_parse_or_fail_with_one_line(line: str) -> None:
    args = MagicArgs("%probe")
    args.add_argument("-r", action="store_true")
    args.add_argument("path")
    try:
        parsed = args.parse_line(line)
    except MagicError as err:
        assert "\n" not in str(err).strip()
        return
    assert isinstance(parsed.path, str)


LINES = st.one_of(st.sampled_from(["%files", "%%writefile x", "%cat a", "%rm -r b", "x = 1", "if x:", "    %files",
                                   "'''", "(", ")", "\\", "%pip install y", "%config WasmKernel", "%time 1"]),
                  st.text(max_size=30))


@given(st.lists(LINES, max_size=12).map("\n".join))
@settings(max_examples=examples(500))
def test_splitting_a_cell_never_fails_and_loses_nothing(code: str) -> None:
    steps = split_cell(code, MAGICS)
    assert steps
    text = "\n".join(s.text if s.kind == "code" else "" for s in steps)
    for line in code.split("\n"):
        # A blank or whitespace-only line carries nothing to lose, and the splitter
        # drops chunks made only of them (a "\r" alone, for one).
        if line.strip() and not line.startswith("%"):
            assert line in text or any(s.body is not None and line in s.body for s in steps)


@given(st.one_of(st.text(max_size=50), st.uuids().map(str), st.uuids().map(lambda u: str(u).upper()),
                 st.uuids().map(lambda u: f"../{u}"), st.uuids().map(lambda u: f"{u}/..")))
@settings(max_examples=examples(500))
def test_a_session_id_is_a_canonical_uuid_or_refused(value: str) -> None:
    try:
        canonical = validate_session_id(value)
    except ValueError as err:
        assert "\n" not in str(err)
        return
    assert str(uuid.UUID(canonical)) == canonical and "/" not in canonical and ".." not in canonical


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=40,
)


@given(JSON)
@settings(max_examples=examples(500))
def test_cleaned_message_content_always_encodes(value: object) -> None:
    cleaned = clean(value)
    json.dumps(cleaned, ensure_ascii=False).encode("utf-8")


@given(st.integers(min_value=MAX_DEPTH + 1, max_value=5 * MAX_DEPTH))
@settings(max_examples=examples(20))
def test_content_nested_too_deep_is_refused_not_recursed(depth: int) -> None:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    with pytest.raises(TooDeep):
        clean(value)


@given(st.text(max_size=40), st.text(max_size=40))
@settings(max_examples=examples(1000))
def test_escaped_identity_parts_never_meet(a: str, b: str) -> None:
    assume(a != b)
    assert escape_part(a) != escape_part(b) or len(escape_part(a)) > 1024


@given(st.text(max_size=200))
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_execute_request_gets_a_reply_whatever_its_code(target: Target, code: str) -> None:
    run = target.run(code, timeout=60)
    assert run.reply["content"]["status"] in ("ok", "error", "aborted")
    target.assert_no_host_path(target.shown_text(run))


@given(st.text(max_size=100), st.integers(min_value=-5, max_value=300))
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_completion_and_inspection_gets_a_reply(target: Target, code: str, cursor: int) -> None:
    for method in ("complete", "inspect"):
        reply = target.kernel.request(method, code, cursor)
        assert reply["content"]["status"] in ("ok", "error")
