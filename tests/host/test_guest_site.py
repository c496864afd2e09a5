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


def test_staged_versions_are_those_importlib_metadata_reads() -> None:
    """The versions (the site's key) come from the dist-info folders' names, not from
    parsing each METADATA file; they must be what importlib.metadata says."""
    import importlib.metadata as md

    found = guest_site.staged_versions()
    assert {name for name, _ in found} == {
        n for n in guest_site.STAGED_DISTRIBUTIONS if n not in guest_site.OPTIONAL_DISTRIBUTIONS
    } | {n for n in guest_site.OPTIONAL_DISTRIBUTIONS if n in dict(found)}
    for name, version in found:
        assert version == md.version(name), name


def test_a_distribution_not_installed_from_a_wheel_is_asked_of_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    # An .egg-info install (no dist-info folder to read), first on sys.path.
    egg = tmp_path / "comm-0.0.1.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: comm\nVersion: 0.0.1\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert guest_site._dist_info_versions()["comm"] is None  # the listing leaves it to importlib.metadata
    guest_site.staged_versions.cache_clear()
    try:
        assert dict(guest_site.staged_versions())["comm"] == "0.0.1"  # importlib.metadata does, first on the path
    finally:
        guest_site.staged_versions.cache_clear()


def test_staging_says_how_many_of_its_files_are_copied_as_it_goes(empty_cache: Path) -> None:
    # "Preparing IPython ... 0%" stood still for 7 s on a loaded machine: the copy now
    # counts its files, so the figure moves with it.
    seen: list[object] = []
    stage_guest_site(progress=seen.append)
    percents = [r.percent for r in seen]  # type: ignore[attr-defined]
    assert percents[0] == 0 and percents[-1] == 100 and seen[-1].done  # type: ignore[attr-defined]
    assert percents == sorted(percents), percents  # (the pace of the moving figure: test_work_meter.py)
