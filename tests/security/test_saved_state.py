"""Saved interpreter states as an attacker sees them: files to forge, swap, grow, plant links at, or cut short.

A state is memory that becomes a running interpreter, so a forged one would be
code execution with the host's view of the session. These pin down that only a
state this host saved, for this session, whole, under its key, is ever woken;
that its size counts against the session's quota before anything is written; and
that no link in its path is ever followed.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wasm_kernel.host.state_file import (
    MAGIC, STATE_FILE, TAG_BYTES, StateRefused, StateTooLarge, read_state, session_key, write_state,
)
from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions, TurnLimits
from wasm_kernel.runtime.hibernation import StateKeeping, load_saved_state, save_kept_state
from wasm_kernel.runtime.provisioning import new_guest
from wasm_kernel.sessions.saved_state import StateKeyError, state_key

SECRET = b"s" * 32
A = "11111111-1111-4111-8111-111111111111"
B = "22222222-2222-4222-8222-222222222222"


def workspace(parent: Path, name: str = "ws") -> Path:
    path = parent / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def memory(pages: int, fill: int = 7) -> ctypes.Array:  # type: ignore[type-arg]
    buf = (ctypes.c_char * (pages * 4096))()
    ctypes.memset(buf, fill, ctypes.sizeof(buf))
    return buf


def save(folder: Path, key: bytes, buf: ctypes.Array, **manifest: object) -> int:  # type: ignore[type-arg]
    size = ctypes.sizeof(buf)
    return write_state(folder, key=key, manifest={"size": size, **manifest}, address=ctypes.addressof(buf),
                       runs=[(0, size)])


def test_a_state_moved_to_another_session_is_refused(tmp_path: Path) -> None:
    folder_a, folder_b = tmp_path / "a", tmp_path / "b"
    save(folder_a, session_key(SECRET, A), memory(4))
    folder_b.mkdir(mode=0o700)
    os.replace(folder_a / STATE_FILE, folder_b / STATE_FILE)
    with pytest.raises(StateRefused, match="not this session's"):
        read_state(folder_b, key=session_key(SECRET, B))


@pytest.mark.parametrize("where", ["magic", "manifest", "data", "tag", "cut", "grown"])
def test_any_change_to_a_state_file_is_refused_before_it_is_parsed(tmp_path: Path, where: str) -> None:
    key = session_key(SECRET, A)
    save(tmp_path, key, memory(4), note="x")
    path = tmp_path / STATE_FILE
    raw = bytearray(path.read_bytes())
    offsets = {"magic": 0, "manifest": len(MAGIC) + 10, "data": len(raw) - TAG_BYTES - 100, "tag": len(raw) - 1}
    if where == "cut":
        raw = raw[:-4096]
    elif where == "grown":
        raw += b"\0" * 4096
    else:
        raw[offsets[where]] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(StateRefused, match="authentication check"):
        read_state(tmp_path, key=key)


def test_a_forged_state_with_a_stolen_key_still_cannot_aim_outside_memory(tmp_path: Path) -> None:
    """Defense in depth: even a correctly tagged file (as if the key leaked) with
    page runs past its memory, overlapping or unaligned is refused."""
    import hashlib
    import hmac

    key = session_key(SECRET, A)
    for runs in ([[0, 8192]], [[4096, 8192], [0, 4096]], [[100, 4196]]):
        manifest = json.dumps({"size": 4096, "runs": runs}).encode()
        body = MAGIC + struct.pack("<Q", len(manifest)) + manifest + b"\1" * 4096
        (tmp_path / STATE_FILE).write_bytes(body + hmac.new(key, body, hashlib.sha256).digest())
        with pytest.raises(StateRefused, match="page runs"):
            read_state(tmp_path, key=key)


def test_a_link_planted_at_the_state_file_is_never_followed(tmp_path: Path) -> None:
    key = session_key(SECRET, A)
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    target = tmp_path / "victim.txt"
    target.write_text("host file")
    (folder / STATE_FILE).symlink_to(target)
    with pytest.raises(StateRefused, match="cannot be opened safely"):
        read_state(folder, key=key)
    save(folder, key, memory(2))  # the save replaces the link itself
    assert target.read_text() == "host file"
    assert not (folder / STATE_FILE).is_symlink()
    assert read_state(folder, key=key) is not None


def test_a_link_planted_at_the_state_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(elsewhere)
    with pytest.raises(StateRefused, match="folder cannot be opened safely"):
        save(tmp_path / "state", session_key(SECRET, A), memory(2))
    with pytest.raises(StateRefused):
        read_state(tmp_path / "state", key=session_key(SECRET, A))
    assert list(elsewhere.iterdir()) == []


def test_a_state_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    with pytest.raises(StateRefused, match="not private"):
        save(folder, session_key(SECRET, A), memory(2))


def test_a_planted_key_file_link_or_a_readable_key_file_is_set_aside_never_used(tmp_path: Path) -> None:
    """A key someone else could know is no key: the link (never followed) and the
    readable file are set aside, with a line each, and a new key made."""
    private = tmp_path / ".wasm-kernel"
    private.mkdir()
    (private / "state.key").symlink_to(tmp_path / "attacker-key")
    (tmp_path / "attacker-key").write_bytes(b"a" * 32)
    attacker = session_key(b"a" * 32, A)
    notes: list[str] = []
    assert state_key(tmp_path, A, None, notes) != attacker
    assert "the state key file was a symbolic link: set aside as state.key.set-aside-" in notes[0]
    (private / "state.key").unlink()
    (private / "state.key").write_bytes(b"a" * 32)
    (private / "state.key").chmod(0o644)
    assert state_key(tmp_path, A, None, notes) != attacker
    assert "the state key file was not private to this user" in notes[1]
    assert len(list(private.glob("state.key.set-aside-*"))) == 2
    assert (private / "state.key").stat().st_mode & 0o777 == 0o600
    assert state_key(tmp_path, A, None, notes) == state_key(tmp_path, A, None) and len(notes) == 2  # kept from now on
    with pytest.raises(StateKeyError, match="shorter than 16"):
        state_key(tmp_path, A, "short")


def test_a_guest_that_makes_its_state_huge_is_not_saved_past_its_quota(tmp_path: Path) -> None:
    keep = StateKeeping(tmp_path / "state", session_key(SECRET, A), max_bytes=64 << 20)
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep))
    try:
        outcome = guest.run_cell("import os\nhuge = os.urandom(80 << 20)", limits=TurnLimits(),
                                 options=CellOptions(execution_count=1))
        assert outcome.status == "ok", outcome.error
        with pytest.raises(StateTooLarge, match="allowed"):
            guest.hibernate(1)
        # The disk quota counts too: a state may take only what /app and /tmp leave.
        guest.run_cell("del huge", limits=TurnLimits(disk_max_bytes=2 << 20), options=CellOptions(execution_count=2))
        with open(tmp_path / "ws" / "fill.bin", "wb") as f:
            f.write(b"\1" * (1 << 20))
        guest.measure_disk()
        with pytest.raises(StateTooLarge):
            guest.hibernate(2)
    finally:
        guest.close()
    # No state and no partial file: only the line the next start shows.
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["not-saved.txt"]


def test_the_guest_never_sees_its_saved_state(tmp_path: Path) -> None:
    root = tmp_path / "root"
    keep = StateKeeping(root / ".wasm-kernel" / "state" / A, session_key(SECRET, A))
    guest = new_guest(workspace(root, A), options=GuestOptions(keep_state=keep))
    try:
        guest.run_cell("x = 1", limits=TurnLimits(), options=CellOptions(execution_count=1))
        guest.hibernate(1)
        outcome = guest.run_cell(
            "import os\nfound = [os.path.join(d, n) for top in ('/', '/app', '/tmp') for d, _, names in os.walk(top) "
            "for n in names if n == 'state.bin' or n.startswith('.state-')]\nprint(found)",
            limits=TurnLimits(), options=CellOptions(execution_count=2))
        assert outcome.stdout == "[]\n", outcome.stderr
    finally:
        guest.close()


KILLER = """
import ctypes, sys
from pathlib import Path
from wasm_kernel.host.state_file import session_key
from wasm_kernel.runtime.hibernation import StateKeeping, save_kept_state
from wasm_kernel.sessions.saved_state import SessionGenerations, state_folder
root, session = Path(sys.argv[1]), sys.argv[2]
keep = StateKeeping(state_folder(root, session), session_key(b"s" * 32, session),
                    generations=SessionGenerations(root, session))
buf = ctypes.create_string_buffer(int(sys.argv[3]))
n = 0
print("ready", flush=True)
while True:
    n += 1
    ctypes.memset(buf, n % 250 + 1, ctypes.sizeof(buf))
    save_kept_state(keep, {"size": ctypes.sizeof(buf), "n": n}, ctypes.addressof(buf), [(0, ctypes.sizeof(buf))],
                    None)
"""


def kept_session(root: Path) -> StateKeeping:
    """Session A's kept state under `root`, its generations in its (real) metadata."""
    from wasm_kernel.core.logger import SandboxLogger
    from wasm_kernel.sessions.metadata import create_metadata
    from wasm_kernel.sessions.saved_state import SessionGenerations, state_folder

    create_metadata(root, A, SandboxLogger())
    return StateKeeping(state_folder(root, A), session_key(SECRET, A), generations=SessionGenerations(root, A))


@pytest.mark.slow  # ten saving processes killed
def test_a_save_killed_at_any_moment_leaves_the_old_state_or_the_new_never_a_broken_or_stale_one(
        tmp_path: Path) -> None:
    """Kills land in the state file's write (64 MiB saves) and, many times a second,
    in the metadata's two writes (64 KiB saves). After each: the metadata reads,
    the state on disk loads (never refused: it is the latest save that got its
    file in place), and the state the run before loaded, put back, is refused."""
    from wasm_kernel.sessions.metadata import read_metadata

    keep = kept_session(tmp_path)
    seen: set[tuple[int, int]] = set()
    previous: bytes | None = None
    for size, delay in ((64 << 20, 0.05), (64 << 20, 0.21), (64 << 20, 0.55), (64 << 20, 1.0), (64 << 20, 2.0),
                        (64 << 10, 0.3), (64 << 10, 0.43), (64 << 10, 0.57), (64 << 10, 0.71), (64 << 10, 1.3)):
        proc = subprocess.Popen([sys.executable, "-c", KILLER, str(tmp_path), A, str(size)], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert read_metadata(tmp_path, A) is not None  # raises if it were broken
        state, notice = load_saved_state(keep)
        if state is None:
            assert notice is None and not seen, notice  # only before any save got its file in place
            continue
        assert notice is None or "cut short" in notice, notice
        n, generation = state.manifest["n"], state.manifest["generation"]
        view = memoryview(state._map)
        first = view[state._data_at]
        assert first == n % 250 + 1 and view[state._data_at + size - 1] == first
        view.release()
        meta = read_metadata(tmp_path, A)
        assert meta is not None and meta.state_generation == generation <= meta.state_reserved
        state.close()
        path = keep.folder / STATE_FILE
        latest = path.read_bytes()
        if previous is not None and (size, generation) not in seen:
            path.write_bytes(previous)  # the state the run before left, put back
            refused, line = load_saved_state(keep)
            assert refused is None and line is not None and "not the session's latest" in line, line
            path.write_bytes(latest)
        seen.add((size, generation))
        previous = latest
    assert len({generation for _, generation in seen}) >= 3, f"too few saves completed to prove anything: {seen}"


KILLED_AT = """
import ctypes, os, signal, sys
from pathlib import Path
from wasm_kernel.host.state_file import session_key
from wasm_kernel.runtime.hibernation import StateKeeping, save_kept_state
from wasm_kernel.sessions.saved_state import SessionGenerations, state_folder
root, session, point = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
keep = StateKeeping(state_folder(root, session), session_key(b"s" * 32, session),
                    generations=SessionGenerations(root, session))
# The process dies (SIGKILL) just before or just after the rename that ends the
# given write: the metadata's first (the generation taken), the state file's, or
# the metadata's second (the generation recorded as the latest).
target, nth, when = point.split("-")
real, seen = os.replace, {"metadata": 0, "state": 0}
def replace(src, dst, *args, **kwargs):
    kind = "state" if str(dst) == "state.bin" else "metadata" if str(dst).endswith(".json") else None
    if kind:
        seen[kind] += 1
    hit = kind == target and seen[kind] == int(nth)
    if hit and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst, *args, **kwargs)
    if hit and when == "after":
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
buf = ctypes.create_string_buffer(1 << 20)
ctypes.memset(buf, 2, ctypes.sizeof(buf))
save_kept_state(keep, {"size": ctypes.sizeof(buf), "n": 2}, ctypes.addressof(buf), [(0, ctypes.sizeof(buf))], None)
"""


@pytest.mark.parametrize(("point", "wakes"), [
    ("metadata-1-before", 1), ("metadata-1-after", 1), ("state-1-before", 1),
    ("state-1-after", 2), ("metadata-2-before", 2), ("metadata-2-after", 2),
])
def test_a_save_killed_at_each_of_its_writes_leaves_a_resumable_latest_state(tmp_path: Path, point: str,
                                                                            wakes: int) -> None:
    """Save 1 completes; save 2 is killed at one of its renames. Its file not yet in
    place, save 1 wakes; in place, save 2 wakes, even before its generation was
    recorded (the load records it). Either way the other one, put back, is refused."""
    from wasm_kernel.sessions.metadata import read_metadata

    keep = kept_session(tmp_path)
    buf = memory(256, fill=1)
    save_kept_state(keep, {"size": ctypes.sizeof(buf), "n": 1}, ctypes.addressof(buf),
                    [(0, ctypes.sizeof(buf))], None)
    first = (keep.folder / STATE_FILE).read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILLED_AT, str(tmp_path), A, point])
    assert proc.returncode == -signal.SIGKILL
    assert read_metadata(tmp_path, A) is not None  # whole, old or new
    state, notice = load_saved_state(keep)
    assert state is not None and notice is None, notice
    assert state.manifest["n"] == wakes
    state.close()
    if wakes == 2:  # the state of save 1, put back, is an older one
        (keep.folder / STATE_FILE).write_bytes(first)
        refused, line = load_saved_state(keep)
        assert refused is None and line is not None and "not the session's latest" in line, line


def test_a_file_swapped_for_a_link_while_the_kernel_slept_is_not_reopened_through_it(tmp_path: Path) -> None:
    """Files open at shutdown are opened again by the path they were opened with,
    through WASI in their own preopen: a link planted there while the kernel slept
    leads nowhere outside, and the file object fails cleanly."""
    keep = StateKeeping(tmp_path / "state", session_key(SECRET, A))
    ws = workspace(tmp_path)
    guest = new_guest(ws, options=GuestOptions(keep_state=keep))
    try:
        assert guest.run_cell("f = open('notes.txt', 'w+'); f.write('mine'); f.flush()", limits=TurnLimits(),
                              options=CellOptions(execution_count=1)).status == "ok"
        guest.hibernate(1)
    finally:
        guest.close()
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    (ws / "notes.txt").unlink()
    (ws / "notes.txt").symlink_to(secret)
    state, _ = load_saved_state(keep)
    guest = new_guest(ws, options=GuestOptions(keep_state=keep, resume=state))
    try:
        assert guest.resumed is not None and guest.resumed.closed_files == 1
        outcome = guest.run_cell("f.seek(0)\nprint(f.read())", limits=TurnLimits(),
                                 options=CellOptions(execution_count=2))
        assert outcome.status == "error" and "host secret" not in outcome.stdout + outcome.stderr
    finally:
        guest.close()
    assert secret.read_text() == "host secret"
