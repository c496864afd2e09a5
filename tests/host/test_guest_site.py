"""host/guest_site.py staging: a staged site lands whole, by one rename, and a site
another process staged is never replaced while its guests may be reading it (two
first starts on one empty cache stage at once: a fresh JupyterHub node does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wasm_kernel.host import guest_site
from wasm_kernel.host.guest_site import COMPLETE_MARKER, stage_guest_site


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))
    guest_site._site_for.cache_clear()  # the path is memoised per key, under the cache root of its time
    yield tmp_path / "cache"
    guest_site._site_for.cache_clear()


def test_a_site_another_process_finished_meanwhile_is_kept_not_replaced(empty_cache: Path) -> None:
    final = guest_site._site_for(guest_site.site_key(guest_site.staged_versions()))

    def the_other_process_wins(scratch: Path) -> None:
        # While we copy, another kernel's staging lands first, and its guest opens it.
        final.mkdir(parents=True)
        (final / "in-use-by-a-guest.py").write_text("x = 1\n")
        (final / COMPLETE_MARKER).write_text("staged\n")

    site = stage_guest_site(prepare=the_other_process_wins)
    assert site.path == final
    assert (final / "in-use-by-a-guest.py").read_text() == "x = 1\n"  # theirs, untouched
    assert not [p.name for p in final.parent.iterdir() if p.name.startswith(".")]  # our scratch is gone


def test_a_half_built_site_from_a_crashed_run_is_replaced_by_a_whole_one(empty_cache: Path) -> None:
    final = guest_site._site_for(guest_site.site_key(guest_site.staged_versions()))
    final.mkdir(parents=True)
    (final / "leftover.py").write_text("")  # no marker: a crash before it was whole
    site = stage_guest_site()
    assert site.path == final and (final / COMPLETE_MARKER).is_file()
    assert not (final / "leftover.py").exists()
    assert (final / "comm").is_dir()
