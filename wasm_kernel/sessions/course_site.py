"""The course's environment: the packages an operator declares once
(WasmKernel.guest_requirements and guest_requirements_file), in one read-only site
that every session of that configuration shares.

    <cache>/course/<key>/            the site; the guest sees it read-only at guest_course_path()
    <cache>/course/.build-<random>/  a build under way (removed by the next build if killed)

It is %pip's pipeline (packages.install_into), run once for everyone: pip resolves
with the guest's markers against the built-in distributions, which count as
installed at their own versions (host/builtin_packages.py), with the operator's
constraints and overrides; each wheel is looked into before it is unpacked and
nothing compiled lands. A guest then compiles the site's bytecode, and the folder
is made read-only and renamed into place whole, so a crash or another kernel
building at the same time never leaves a half-built site that later runs trust.

The key digests everything the result depends on (the requests, constraints,
overrides, index settings, the guest's built-in and staged versions): another
configuration or a host upgrade builds another site beside it, and a built site is
never changed, since guests read it. It is the operator's, in the cache, and counts
against no session's quota.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ..host.artifacts import guest_artifacts
from ..host.builtin_packages import builtin_distributions
from ..host.cache_dir import private_dir
from ..host.guest_site import guest_course_path, make_read_only, remove_tree
from ..runtime.course_mount import COMPLETE_MARKER, course_folder
from ..runtime.guest_config import SiteMount
from .package_folder import locked_folder
from .packages import PackageError, dist_name_version, install_into, parse_requirements
from .pip_runner import PipRun, PipSettings, Scrubber

COURSE_VERSION = "1"  # bumped when a build's shape changes
COURSE_MAX_BYTES = 2 << 30  # what a course's site may take, unpacked
MAX_FILE_LINES = 500


class CourseError(Exception):
    """The course's environment cannot be built: one line, saying what to do."""


@dataclass(frozen=True)
class CourseRequest:
    """What the operator declared, checked: requirement specifiers only."""

    requirements: tuple[str, ...]
    pip: PipSettings

    @property
    def key(self) -> str:
        art = guest_artifacts()
        text = repr((
            COURSE_VERSION, art.python_version, art.stdlib_sha256, sorted(builtin_distributions().items()),
            self.requirements, self.pip.constraints, self.pip.overrides, self.pip.index_url, self.pip.find_links,
            self.pip.no_index,
        ))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class CourseSite:
    path: Path  # host folder, read-only
    guest_path: str
    key: str
    distributions: tuple[tuple[str, str], ...]  # (name, version) of what it holds

    @property
    def mount(self) -> SiteMount:
        return SiteMount(self.path, self.guest_path, writable=False, key=self.key)


def course_request(requirements: Iterable[str], requirements_file: str, pip: PipSettings) -> CourseRequest | None:
    """The operator's settings as a request, or None when they declare nothing.
    CourseError names the entry or the file's line that is not a requirement."""
    found = [r.strip() for r in requirements if r.strip()]
    if requirements_file:
        found += _read_requirements_file(Path(requirements_file).expanduser())
    if not found:
        return None
    try:
        parse_requirements(found)
    except PackageError as err:
        raise CourseError(str(err).replace("%pip install:", "guest_requirements:", 1)) from None
    return CourseRequest(tuple(found), replace(pip, max_bytes=COURSE_MAX_BYTES, provided=()))


def _read_requirements_file(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except OSError as err:
        raise CourseError(f"guest_requirements_file: cannot read {path.name} ({err.strerror}); "
                          "check WasmKernel.guest_requirements_file") from None
    found = []
    for number, raw in enumerate(text.splitlines()[:MAX_FILE_LINES + 1], 1):
        if number > MAX_FILE_LINES:
            raise CourseError(f"guest_requirements_file: {path.name} has more than {MAX_FILE_LINES} lines")
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("-"):
            raise CourseError(
                f"guest_requirements_file: {path.name} line {number}: {line[:60]!r} is an option; the file holds "
                "names and versions only (give constraints as WasmKernel.guest_constraints)"
            )
        found.append(line)
    return found


def is_course_built(request: CourseRequest) -> bool:
    return (course_folder(request.key) / COMPLETE_MARKER).is_file()


def course_site(request: CourseRequest, on_output: Callable[[str], None] | None = None) -> CourseSite:
    """The built site for `request`, built now if missing; `on_output` hears pip's
    progress lines (Collecting, Downloading...) as they come. CourseError if it
    cannot be built."""
    final = course_folder(request.key)
    if not (final / COMPLETE_MARKER).is_file():
        parent = private_dir(final.parent)
        told: list[bool] = []

        def waiting() -> None:  # another process builds this key: wait, said once
            if on_output is not None and not told:
                on_output("Waiting for another process building the course's environment...\n")
            told.append(True)

        # One build of a key at a time on this machine (the %pip installs' lock).
        with locked_folder(parent / f".lock-{request.key}", waiting=waiting):
            if not (final / COMPLETE_MARKER).is_file():
                _build(request, parent, final, on_output)
    return _read(final, request.key)


def _read(final: Path, key: str) -> CourseSite:
    found = []
    for entry in sorted(final.iterdir()):
        if entry.name.endswith(".dist-info") and entry.is_dir():
            found.append(dist_name_version(entry))
    return CourseSite(final, guest_course_path(), key, tuple(found))


def _build(request: CourseRequest, parent: Path, final: Path, on_output: Callable[[str], None] | None) -> None:
    from packaging.requirements import Requirement

    # A killed build of this key left its scratch (the key's lock is ours, so none of
    # them is live); another key's builds hold their own locks and are left alone.
    for stale in parent.glob(f".build-{request.key}-*"):
        remove_tree(stale)
    scratch = Path(tempfile.mkdtemp(prefix=f".build-{request.key}-", dir=parent))
    try:
        work, site = scratch / "work", scratch / "site"
        work.mkdir()
        site.mkdir()
        scrub = Scrubber.for_install(parent, site, request.pip, root_word="<course>")
        pip = PipRun(request.pip, None, scrub, on_output)
        wanted = [Requirement(r) for r in request.requirements]
        started = time.monotonic()
        try:
            installed = install_into(work, site, wanted, request.pip, pip, no_deps=False, quiet=False)
        except PackageError as err:
            raise CourseError(re.sub(r"^%pip install[^:]*: ", "", str(err))) from None
        if on_output is not None:
            on_output(f"Compiling the bytecode of {len(installed)} distributions for the guest\n")
        _compile_bytecode(site)
        (site / COMPLETE_MARKER).write_text(
            "".join(f"{r}\n" for r in request.requirements) + "# installed\n"
            + "".join(f"# {n}=={v}\n" for n, v in installed)
            + f"# built in {time.monotonic() - started:.1f} s\n"
        )
        make_read_only(site)
        if final.exists():  # a folder without the marker (a crashed rename): never mounted, replaced
            remove_tree(final)
        os.replace(site, final)
    finally:
        remove_tree(scratch)


def _compile_bytecode(site: Path) -> None:
    from ..runtime.guest_site_build import compile_bytecode

    compile_bytecode(site, guest_course_path())


__all__ = ["CourseError", "CourseRequest", "CourseSite", "course_request", "course_site", "is_course_built"]
