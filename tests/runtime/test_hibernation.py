"""A guest saved between turns and woken in a new guest: runtime/hibernation.py on the real guest."""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_kernel.host.state_file import STATE_FILE, read_state
from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions, TurnLimits
from wasm_kernel.runtime.hibernation import StateKeeping, load_saved_state
from wasm_kernel.runtime.provisioning import new_guest

LIMITS = TurnLimits()
KEY = b"k" * 32


def workspace(parent: Path, name: str = "ws") -> Path:
    path = parent / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def keeping(tmp_path: Path, **kw: object) -> StateKeeping:
    return StateKeeping(tmp_path / "private" / "state", KEY, **kw)  # type: ignore[arg-type]


def run(guest, code: str, count: int | None = None) -> str:  # type: ignore[no-untyped-def]
    outcome = guest.run_cell(code, limits=LIMITS, options=CellOptions(execution_count=count))
    assert outcome.status == "ok", (outcome.stderr, outcome.error)
    return outcome.stdout


def woken(workspace: Path, keep: StateKeeping, **options: object):  # type: ignore[no-untyped-def]
    state, notice = load_saved_state(keep)
    assert notice is None
    return new_guest(workspace, options=GuestOptions(keep_state=keep, resume=state, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("warm_image", [True, False], ids=["over-the-warm-image", "plain-boot"])
def test_a_woken_guest_has_the_saved_namespace_and_runs_on(tmp_path: Path, warm_image: bool) -> None:
    keep = keeping(tmp_path)
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep, warm_image=warm_image))
    try:
        run(guest, "import json\nrows = [dict(n=i, sq=i * i) for i in range(1000)]\n"
                   "def total(): return sum(r['sq'] for r in rows)\nclass Tag(str): pass\nt = Tag('kept')", 1)
        run(guest, "rows.append({'n': -1, 'sq': 1})", 2)
        saved = guest.hibernate(2)
    finally:
        guest.close()
    assert saved.cells == 2 and saved.full is not warm_image
    assert saved.size_on_disk == (keep.folder / STATE_FILE).stat().st_size

    again = woken(workspace(tmp_path), keep, warm_image=warm_image)
    try:
        assert again.resumed is not None and again.resumed.cells == 2
        assert run(again, "print(total(), len(rows), type(t).__name__, t, json.dumps(rows[-1]))", 3) == \
            '332833501 1001 Tag kept {"n": -1, "sq": 1}\n'
        assert run(again, "print(In[1].split()[1], get_ipython().execution_count)", 4) == "json 5\n"  # the next cell's number, as IPython keeps it
        # A restart of the woken guest is a fresh interpreter, never the saved one again.
        again.restart()
        assert again.resumed is not None  # what it woke from stays said
        assert run(again, "print('rows' in dir())") == "False\n"
    finally:
        again.close()


def test_a_state_over_the_warm_image_holds_only_what_differs(tmp_path: Path) -> None:
    keep = keeping(tmp_path)
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep))
    try:
        assert guest.started_from_image
        run(guest, "x = 1", 1)
        small = guest.hibernate(1)
        run(guest, "blob = bytes(range(256)) * (40 * 4096)", 2)  # 40 MiB that no image holds
        large = guest.hibernate(2)
        full = guest.hibernate(2, full=True)
    finally:
        guest.close()
    assert small.size_on_disk < 32 << 20
    assert large.size_on_disk - small.size_on_disk >= 40 << 20
    assert full.full and full.size_on_disk > large.size_on_disk
    # A full state wakes over no image at all.
    again = woken(workspace(tmp_path), keep)
    try:
        assert run(again, "print(len(blob), blob[-1])", 3) == f"{40 << 20} 255\n"
    finally:
        again.close()


def test_the_age_limit_and_a_missing_state_give_a_fresh_start(tmp_path: Path) -> None:
    keep = keeping(tmp_path, max_age_s=0.0)
    assert load_saved_state(keep) == (None, None)  # nothing saved: nothing said
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep))
    try:
        run(guest, "x = 1", 1)
        guest.hibernate(1)
    finally:
        guest.close()
    state, notice = load_saved_state(keep)
    assert state is None
    assert notice is not None and "older than the 0 hours a state is kept" in notice
    assert not (keep.folder / STATE_FILE).exists()  # refused once, removed


def test_a_guest_started_again_without_its_state_folder_keeps_nothing(tmp_path: Path) -> None:
    guest = new_guest(workspace(tmp_path), options=GuestOptions())
    try:
        with pytest.raises(Exception, match="keeps no state"):
            guest.hibernate(1)
        assert guest.discard_state() is False
    finally:
        guest.close()


def test_discard_removes_the_saved_state(tmp_path: Path) -> None:
    keep = keeping(tmp_path)
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep))
    try:
        run(guest, "x = 1", 1)
        guest.hibernate(1)
        assert read_state(keep.folder, key=KEY) is not None
        assert guest.discard_state() is True
        assert read_state(keep.folder, key=KEY) is None
    finally:
        guest.close()


def test_a_save_cut_short_is_said_and_the_state_before_it_wakes(tmp_path: Path) -> None:
    import os

    keep = keeping(tmp_path)
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep))
    try:
        run(guest, "x = 'before'", 1)
        guest.hibernate(1)
    finally:
        guest.close()
    cut = keep.folder / ".state-12345-0123456789ab"  # what a save killed half way leaves
    cut.write_bytes(b"WKSTATE1" + b"\0" * 4096)
    os.utime(cut, (0, 0))
    state, notice = load_saved_state(keep)
    assert state is not None and notice is not None
    assert "last save was cut short" in notice and "resuming the state saved before it" in notice
    assert "shutdown_wait_time" in notice
    assert not cut.exists()
    state.close()
    assert load_saved_state(keep)[1] is None  # said once


def test_a_state_too_large_to_save_is_said_at_the_next_start(tmp_path: Path) -> None:
    keep = keeping(tmp_path, max_bytes=8 << 20)
    guest = new_guest(workspace(tmp_path), options=GuestOptions(keep_state=keep))
    try:
        run(guest, "x = 1", 1)
        guest.hibernate(1)  # small: saved
        run(guest, "import os\nblob = os.urandom(16 << 20)", 2)
        with pytest.raises(Exception, match="allowed"):
            guest.hibernate(2)
    finally:
        guest.close()
    state, notice = load_saved_state(keep)
    assert state is None  # the older state went with the failed save
    assert notice is not None and notice.startswith("the interpreter was not saved at the last shutdown: its ")
    assert "allowed by state_max_bytes" in notice and "fresh start" in notice
    assert load_saved_state(keep) == (None, None)  # said once
