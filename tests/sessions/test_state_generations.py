"""Which saved state of a session is its latest: the generations in its metadata (saved_state.py).

Kept in the session's metadata file beside created_at and updated_at: a session
that never saved a state keeps the very file earlier versions wrote, metadata from
earlier versions reads, a state saved before generations resumes until the
session's first save under them, and a touch after a cell never writes back
counters a save changed meanwhile.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import struct
import subprocess
import sys
from pathlib import Path

from wasm_kernel.core.logger import SandboxLogger
from wasm_kernel.host.state_file import MAGIC, STATE_FILE, session_key
from wasm_kernel.runtime.hibernation import StateKeeping, load_saved_state, save_kept_state
from wasm_kernel.sessions.layout import metadata_path
from wasm_kernel.sessions.metadata import create_metadata, read_metadata, touch_metadata
from wasm_kernel.sessions.saved_state import SessionGenerations, state_folder

SID = "33333333-3333-4333-8333-333333333333"
KEY = session_key(b"g" * 32, SID)


def keeping(root: Path) -> StateKeeping:
    return StateKeeping(state_folder(root, SID), KEY, generations=SessionGenerations(root, SID))


def save(keep: StateKeeping, fill: int) -> None:
    buf = (ctypes.c_char * 8192)()
    ctypes.memset(buf, fill, 8192)
    save_kept_state(keep, {"size": 8192, "fill": fill}, ctypes.addressof(buf), [(0, 8192)], None)


def pre_generation_state(keep: StateKeeping) -> bytes:
    """A state file as a wasm-kernel before generations wrote it: no "generation" in its manifest."""
    manifest = json.dumps({"size": 4096, "fill": 0, "runs": [[0, 4096]]}, separators=(",", ":")).encode()
    body = MAGIC + struct.pack("<Q", len(manifest)) + manifest + b"\1" * 4096
    return body + hmac.new(KEY, body, hashlib.sha256).digest()


def test_metadata_that_never_kept_a_state_is_the_file_earlier_versions_wrote(tmp_path: Path) -> None:
    create_metadata(tmp_path, SID, SandboxLogger())
    touch_metadata(tmp_path, SID, SandboxLogger())
    assert set(json.loads(metadata_path(tmp_path, SID).read_bytes())) == {
        "session_id", "created_at", "updated_at", "version"}
    save(keeping(tmp_path), 1)
    raw = json.loads(metadata_path(tmp_path, SID).read_bytes())
    assert raw["state_generation"] == raw["state_reserved"] == 1 and raw["version"] == 1


def test_a_state_saved_before_generations_resumes_until_the_first_save_under_them(tmp_path: Path) -> None:
    create_metadata(tmp_path, SID, SandboxLogger())  # as an earlier version left it: no counters
    keep = keeping(tmp_path)
    keep.folder.mkdir(parents=True, mode=0o700)
    old = pre_generation_state(keep)
    (keep.folder / STATE_FILE).write_bytes(old)
    state, notice = load_saved_state(keep)
    assert state is not None and notice is None and "generation" not in state.manifest
    state.close()
    save(keep, 2)  # the session's first save under generations...
    (keep.folder / STATE_FILE).write_bytes(old)  # ...after which the old one put back is refused
    state, notice = load_saved_state(keep)
    assert state is None and notice is not None
    assert "not the session's latest saved state" in notice and "saved before states had generations" in notice


def test_a_legacy_session_without_metadata_records_no_generation(tmp_path: Path) -> None:
    keep = keeping(tmp_path)
    save(keep, 1)
    first = (keep.folder / STATE_FILE).read_bytes()
    save(keep, 2)
    (keep.folder / STATE_FILE).write_bytes(first)
    state, notice = load_saved_state(keep)  # nothing to tell them apart by: as before generations
    assert state is not None and notice is None and state.manifest["fill"] == 1
    state.close()
    assert read_metadata(tmp_path, SID) is None  # and none is written for it


TOUCHER = """
import sys, time
from pathlib import Path
from wasm_kernel.core.logger import SandboxLogger
from wasm_kernel.sessions.metadata import touch_metadata
logger, end = SandboxLogger(), time.monotonic() + float(sys.argv[3])
print("ready", flush=True)
while time.monotonic() < end:
    touch_metadata(Path(sys.argv[1]), sys.argv[2], logger)
"""


def test_touches_after_cells_never_write_back_generations_a_save_changed(tmp_path: Path) -> None:
    """Another kernel of the session touches its metadata after every cell while
    this one saves: each read-modify-write holds the metadata lock, so no touch
    puts back the counters it read before a save's step."""
    create_metadata(tmp_path, SID, SandboxLogger())
    keep = keeping(tmp_path)
    toucher = subprocess.Popen([sys.executable, "-c", TOUCHER, str(tmp_path), SID, "60"], stdout=subprocess.PIPE)
    try:
        assert toucher.stdout is not None and toucher.stdout.readline() == b"ready\n"
        for fill in range(1, 41):
            save(keep, fill)
            meta = read_metadata(tmp_path, SID)
            assert meta is not None and meta.state_generation == meta.state_reserved == fill, meta
    finally:
        toucher.kill()
        toucher.wait()
    state, notice = load_saved_state(keep)
    assert state is not None and notice is None and state.manifest["fill"] == 40
    state.close()
