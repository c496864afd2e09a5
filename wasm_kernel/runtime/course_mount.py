"""The course's environment as this process's shell guests see it: one read-only
site (sessions/course_site.py builds it) on sys.path after the staged IPython site
and before the session's %pip packages, so a notebook can add packages but never
replace the course's.

It is the process's, set once by the kernel before its first guest (as the
metering is): every shell guest of the process then shares one layout, which the
warm image is made for and keyed by. The background warm-up process is handed the
site's key and finds the site in the cache, refusing anything but a complete one.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..host.cache_dir import cache_root
from ..host.guest_site import guest_course_path
from .guest_config import SiteMount

COMPLETE_MARKER = ".course"  # written last by the build (sessions/course_site.py)
_KEY = re.compile(r"[0-9a-f]{32}")
_mount: SiteMount | None = None


def set_course_mount(mount: SiteMount | None) -> None:
    global _mount
    _mount = mount


def course_mount() -> SiteMount | None:
    return _mount


def course_argv() -> list[str]:
    """The warm-up process's argument naming this process's course, if any."""
    return [] if _mount is None or _mount.key is None else [f"--course={_mount.key}"]


def course_folder(key: str) -> Path:
    """Where the site of `key` is built, in the cache."""
    if not _KEY.fullmatch(key):
        raise ValueError("not a course key")
    return cache_root() / "course" / key


def mount_for_key(key: str) -> SiteMount:
    """The built site of `key` in the cache; ValueError if it is not one."""
    folder = course_folder(key)
    if not (folder / COMPLETE_MARKER).is_file():
        raise ValueError("no course site is built under that key")
    return SiteMount(folder, guest_course_path(), writable=False, key=key)


__all__ = ["COMPLETE_MARKER", "course_argv", "course_folder", "course_mount", "mount_for_key", "set_course_mount"]
