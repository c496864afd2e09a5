"""The course's environment as a way in: a wheel of the course is looked into before
it is unpacked, as %pip's are (a compiled or hostile wheel never lands, and no
half-built site is left for a kernel to trust); the warm-up process takes only a
key naming a complete site in the cache; the guest can change nothing of the site."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.wheelhouse import build_wheel, course_wheelhouse, declare_size
from wasm_kernel.host.cache_dir import CACHE_ENV, cache_root
from wasm_kernel.runtime.course_mount import mount_for_key
from wasm_kernel.sessions.course_site import CourseError, course_request, course_site
from wasm_kernel.sessions.pip_runner import PipSettings


@pytest.fixture(autouse=True)
def own_cache(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(private_cache))


def built_keys() -> set[str]:
    folder = cache_root() / "course"
    return {p.name for p in folder.iterdir() if not p.name.startswith(".")} if folder.is_dir() else set()


@pytest.mark.parametrize("package", ["sneaky", "bomb"])
def test_a_hostile_wheel_in_the_course_is_refused_before_it_lands(tmp_path: Path, package: str) -> None:
    wheels = course_wheelhouse(tmp_path / "wheels")
    # Claims 3 GiB unpacked (past a course's 2 GiB) in its central directory.
    declare_size(build_wheel(wheels, "bomb", "1.0", {"bomb/__init__.py": "", "bomb/zeros.bin": b"0" * 64}),
                 "bomb/zeros.bin", 3 << 30)
    request = course_request([package], "", PipSettings(find_links=(str(wheels),), no_index=True))
    assert request is not None
    before = built_keys()
    with pytest.raises(CourseError) as refused:
        course_site(request)
    assert "\n" not in str(refused.value) and str(tmp_path) not in str(refused.value)
    assert built_keys() == before
    assert not list((cache_root() / "course").glob(".build-*"))


@pytest.mark.parametrize("key", ["../../etc", "0" * 31, "0" * 32 + "/..", "A" * 32, ""])
def test_the_warm_up_takes_only_a_key_of_a_complete_site(key: str) -> None:
    with pytest.raises(ValueError):
        mount_for_key(key)


def test_a_half_built_site_is_not_a_site(tmp_path: Path) -> None:
    folder = cache_root() / "course" / ("ab" * 16)
    folder.mkdir(parents=True)
    (folder / "pkg").mkdir()
    with pytest.raises(ValueError):
        mount_for_key("ab" * 16)


def test_a_build_removes_only_its_own_keys_leftovers(tmp_path: Path) -> None:
    # Another course's build under way (its key's lock held, its scratch folder there)
    # is not this build's leftover, whatever a killed build of this key left.
    from wasm_kernel.sessions.package_folder import locked_folder

    wheels = course_wheelhouse(tmp_path / "wheels")
    request = course_request(["pkg-b"], "", PipSettings(find_links=(str(wheels),), no_index=True))
    assert request is not None
    parent = cache_root() / "course"
    parent.mkdir(exist_ok=True)
    other = "cd" * 16
    live = parent / f".build-{other}-live"
    (live / "work").mkdir(parents=True)
    killed = parent / f".build-{request.key}-killed"
    killed.mkdir()
    with locked_folder(parent / f".lock-{other}"):
        site = course_site(request)
    assert (live / "work").is_dir() and not killed.exists()
    assert [name for name, _ in site.distributions] == ["pkg-b"]
