"""One disk ledger for every writer of a session, in every process (host/disk_ledger.py).

Real processes write real files into one folder, each counting its writes in the
ledger first, the way a guest (a slot with reservations) and the host's doors (one
charge per write) do; what lands on disk never passes the quota.
"""

from __future__ import annotations

import multiprocessing
import os
import random
from pathlib import Path

import pytest

from support.folders import usage_counter
from wasm_kernel.host.disk_ledger import DiskLedger

MAX_BYTES = 4 << 20
MAX_NAMES = 300


def ledger(base: Path) -> DiskLedger:
    return DiskLedger(base, ["private", "ledger"], usage_counter(base / "ws"))


def _slot_writer(base: str, seed: int, rounds: int) -> None:
    """A guest's way: write within a reservation, ask for more past it."""
    rng = random.Random(seed)
    slot = ledger(Path(base)).join()
    spent = [0, 0]
    for i in range(rounds):
        size = rng.randrange(1, 64 << 10)
        if spent[0] + size > slot.reserved[0] or spent[1] + 1 > slot.reserved[1]:
            ok = slot.sync((spent[0], spent[1]), (size, 1), (MAX_BYTES, MAX_NAMES))
            spent = [0, 0]
            if not ok:
                continue
        Path(base, "ws", f"s{seed}-{i}").write_bytes(b"x" * size)
        spent[0] += size
        spent[1] += 1
        if rng.random() < 0.2:  # a turn's end: commit, hand the reservation back
            slot.sync((spent[0], spent[1]), (0, 0), (MAX_BYTES, MAX_NAMES))
            spent = [0, 0]
    slot.close((spent[0], spent[1]))


def _charge_writer(base: str, seed: int, rounds: int) -> None:
    """The host's way: charge, then write; delete and refund now and then."""
    rng = random.Random(seed)
    book = ledger(Path(base))
    mine: list[Path] = []
    for i in range(rounds):
        size = rng.randrange(1, 64 << 10)
        if book.charge(size, 1, MAX_BYTES, MAX_NAMES):
            path = Path(base, "ws", f"c{seed}-{i}")
            path.write_bytes(b"y" * size)
            mine.append(path)
        if mine and rng.random() < 0.1:
            gone = mine.pop(rng.randrange(len(mine)))
            freed = gone.stat().st_size
            gone.unlink()
            book.refund(freed, 1)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "private").mkdir()
    return tmp_path


def test_writers_in_four_processes_never_pass_the_quota_together(base: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_slot_writer, args=(str(base), 1, 300)),
             ctx.Process(target=_slot_writer, args=(str(base), 2, 300)),
             ctx.Process(target=_charge_writer, args=(str(base), 3, 300)),
             ctx.Process(target=_charge_writer, args=(str(base), 4, 300))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    on_disk = usage_counter(base / "ws")()
    assert on_disk[0] <= MAX_BYTES and on_disk[1] <= MAX_NAMES, on_disk
    assert on_disk[0] > MAX_BYTES * 0.8 or on_disk[1] > MAX_NAMES * 0.8, f"the writers hardly wrote: {on_disk}"
    assert ledger(base).usage() == on_disk  # every writer left: the ledger is the disk, exactly


def _die_holding(base: str) -> None:
    slot = ledger(Path(base)).join()
    assert slot.sync((0, 0), (1 << 20, 10), (MAX_BYTES, MAX_NAMES))
    Path(base, "ws", "half").write_bytes(b"z" * 1000)
    os._exit(0)  # killed mid-turn: its slot is never closed


def test_a_dead_writers_reservation_counts_until_the_workspace_is_counted_again(base: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    alive = ledger(base).join()
    p = ctx.Process(target=_die_holding, args=(str(base),))
    p.start()
    p.join(60)
    # Another writer is alive: the dead one's whole reservation is taken as written.
    assert ledger(base).usage()[0] >= 1 << 20
    assert not ledger(base).charge(MAX_BYTES - (1 << 20) + 1, 0, MAX_BYTES, MAX_NAMES)
    alive.close((0, 0))
    # No writer left: the next one counts the workspace again, exactly.
    again = ledger(base).join()
    assert ledger(base).usage() == (1000, 1)
    again.close((0, 0))


def test_a_torn_record_is_counted_again_from_the_workspace(base: Path) -> None:
    (base / "ws" / "f").write_bytes(b"a" * 123)
    book = ledger(base)
    assert book.usage() == (123, 1)
    record = base / "private" / "ledger" / "ledger"
    record.write_bytes(record.read_bytes()[:10])
    assert ledger(base).usage() == (123, 1)


@pytest.mark.parametrize("planted", ["folder", "link", "fifo"])
def test_a_planted_record_is_set_aside_never_followed(base: Path, planted: str) -> None:
    folder = base / "private" / "ledger"
    folder.mkdir(parents=True)
    target = base / "elsewhere"
    target.write_bytes(b"keep")
    (base / "ws" / "f").write_bytes(b"a" * 10)
    if planted == "folder":
        (folder / "ledger").mkdir()
    elif planted == "link":
        (folder / "ledger").symlink_to(target)
    else:
        os.mkfifo(folder / "ledger")
    book = ledger(base)
    assert book.charge(1, 1, MAX_BYTES, MAX_NAMES)
    assert book.usage() == (11, 2)  # counted from the workspace, then the charge
    assert target.read_bytes() == b"keep"
    assert [p.name for p in folder.iterdir() if p.name.startswith("ledger.set-aside-")]


@pytest.mark.parametrize("planted", ["file", "link"])
def test_a_planted_ledger_folder_is_set_aside_never_followed(base: Path, planted: str) -> None:
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    if planted == "file":
        (base / "private" / "ledger").write_text("not a folder")
    else:
        (base / "private" / "ledger").symlink_to(elsewhere, target_is_directory=True)
    book = ledger(base)
    assert book.charge(1, 1, MAX_BYTES, MAX_NAMES)
    assert (base / "private" / "ledger").is_dir() and not (base / "private" / "ledger").is_symlink()
    assert not list(elsewhere.iterdir())
    assert [p.name for p in (base / "private").iterdir() if p.name.startswith("ledger.set-aside-")]
