"""The kernel's side of the course's environment (sessions/course_site.py): the
operator's declaration read once, the site mounted for every guest of this process,
and, when it cannot be built, one line on the first cell.

A site already built (by `wasm-kernel precompile`, or another kernel) is mounted at
once, before the kernel's first check of its warm image, whose key holds it. One not
built yet is built by the sandbox's start, which shows pip's progress in the
notebook as it shows a first compile's. A kernel whose course cannot be built still
starts, without it, and says why: its notebooks' imports then fail as they would on
a machine without the packages, instead of the kernel dying."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..runtime.course_mount import set_course_mount
from .kernel_settings import KernelSettings

if TYPE_CHECKING:  # the installer (pip's runner, packaging) is imported only by a kernel with a course
    from ..sessions.course_site import CourseRequest, CourseSite

COURSE_PROGRESS = "Building the course's environment (once per machine and course)"


@dataclass(frozen=True)
class PipLine:
    """A reading of the course's build for the start's progress display: the build's
    latest line (pip's, then the bytecode step's) and how long the build has taken,
    read when shown (pip says no fraction of its work)."""

    line: str
    began: float
    done: bool = False

    def text(self) -> str:
        return f"{self.line} ({time.monotonic() - self.began:.0f} s)"


class CourseEnvironment:
    def __init__(self, settings: KernelSettings, log: logging.Logger) -> None:
        self.log = log
        self.site: CourseSite | None = None
        self.notice: str | None = None
        self.request: CourseRequest | None = None
        if not settings.declares_course:
            return
        from ..sessions.course_site import CourseError, course_site, is_course_built

        try:
            self.request = settings.course_request()
        except CourseError as err:
            self._refused(str(err))
        if self.request is not None and is_course_built(self.request):
            self._use(course_site(self.request))

    @property
    def pending(self) -> bool:
        """Declared, not built yet, not refused: the sandbox's start builds it."""
        return self.request is not None and self.site is None and self.notice is None

    @property
    def provided(self) -> tuple[tuple[str, str], ...]:
        """(name, version) of what the site holds: installed, as far as %pip can tell."""
        return () if self.site is None else self.site.distributions

    def build(self, progress: Callable[[PipLine], None]) -> None:
        """Called by the sandbox's start, before its first guest."""
        if not self.pending:
            return
        from ..sessions.course_site import CourseError, course_site

        assert self.request is not None
        began = time.monotonic()

        def said(line: str) -> None:
            progress(PipLine(line.strip()[:200], began))

        try:
            self._use(course_site(self.request, said))
            self.log.info("wasm-kernel: the course's environment was built in %.1f s", time.monotonic() - began)
        except CourseError as err:
            self._refused(str(err))

    def _use(self, site: CourseSite) -> None:
        self.site = site
        set_course_mount(site.mount)

    def _refused(self, line: str) -> None:
        self.notice = f"wasm-kernel: the course's packages are not available in this kernel: {line}"
        self.log.warning("%s", self.notice)


__all__ = ["COURSE_PROGRESS", "CourseEnvironment", "PipLine"]
