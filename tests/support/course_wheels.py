"""The course fixture's wheels (tests/e2e/test_course.py), downloaded once by .ci/run
into .ci/course-wheels/ (gitignored), before the tests: what a course build on this
configuration fetches, resolved as the guest resolves it (its built-in numpy, pandas,
scipy, matplotlib, IPython and the rest as stand-ins, so only the pure-Python rest is
saved). The test then builds the course's environment from that folder alone
(pip_no_index), talking to no registry.

    .venv/bin/python tests/support/course_wheels.py    # what .ci/run does
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEELS = REPO / ".ci" / "course-wheels"
DONE = WHEELS / ".complete"  # written last: a folder without it is a download cut short
# The course's environment, as docs/teaching.md declares it for a data-science course.
COURSE_REQUIREMENTS = ("datascience==0.18.1", "otter-grader==7.0.0")
COURSE_OVERRIDES = ("wrapt>=1.16",)  # otter pins wrapt<2; the guest's wrapt 2 is built in
DOWNLOAD = ".venv/bin/python tests/support/course_wheels.py"


def download(dest: Path = WHEELS) -> int:
    from packaging.requirements import Requirement

    from wasm_kernel.kernel.kernel_settings import KernelSettings
    from wasm_kernel.sessions.pip_runner import PipRun, Scrubber, download_command, installed_distributions
    from wasm_kernel.sessions.wheel_checks import wheel_name

    settings = KernelSettings(guest_requirements=list(COURSE_REQUIREMENTS), guest_overrides=list(COURSE_OVERRIDES))
    request = settings.course_request()
    assert request is not None
    dest.mkdir(parents=True, exist_ok=True)
    wanted = [Requirement(r) for r in request.requirements]
    with tempfile.TemporaryDirectory(prefix="course-wheels-") as scratch:
        folder = Path(scratch)
        wheels = folder / "wheels"
        wheels.mkdir()
        (folder / "tmp").mkdir()
        pip = PipRun(request.pip, None, Scrubber.for_install(folder, wheels, request.pip, root_word="<course>"),
                     lambda line: print(line, end="", flush=True))
        pip.run(download_command(wheels, wanted, request.pip, no_deps=False, quiet=False), folder, wanted,
                cap=4 << 30, show=True)
        builtins = installed_distributions(request.pip)
        kept = 0
        for wheel in sorted(wheels.iterdir()):
            if wheel_name(wheel) in builtins:
                continue  # a stand-in for the guest's own: the course build makes its own
            wheel.replace(dest / wheel.name)
            kept += 1
    DONE.write_text("\n".join(COURSE_REQUIREMENTS) + "\n")
    print(f"{kept} wheels in {dest}")
    return 0


def ready() -> bool:
    return DONE.is_file() and DONE.read_text().split() == list(COURSE_REQUIREMENTS)


if __name__ == "__main__":
    sys.exit(download())


def require_wheels() -> None:
    """For a test that builds a course from these wheels: fail, saying how to get them."""
    if not ready():
        raise RuntimeError(f"the course fixture's wheels are not downloaded: `{DOWNLOAD}` (.ci/run does)")
