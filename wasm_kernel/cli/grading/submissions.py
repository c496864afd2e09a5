"""The submissions to grade, found and staged.

Each argument is a notebook, an otter submission zip (grader.export()'s: the notebook,
otter's log, the files the student added), a folder (its *.ipynb and *.zip) or a glob.
Each is staged in a folder of its own, as otter's runner lays out its submission
folder: the student's files, then the autograder's support files over them, then a
tests/ folder of the public cases only (test_specs.py). The hidden cases are never
written anywhere a submission can read.
"""

from __future__ import annotations

import glob
import shutil
from dataclasses import dataclass
from pathlib import Path

from .autograder import Autograder
from .safe_zip import BoundedZip, ZipError, ZipLimits, write_new_file

SUBMISSION_SUFFIXES = (".ipynb", ".zip")
NOTEBOOK_MAX_BYTES = 64 << 20
SUBMISSION_LIMITS = ZipLimits(max_members=2_000, max_member_bytes=64 << 20, max_total_bytes=128 << 20)


class SubmissionError(ValueError):
    """A submission that cannot be graded; the message is one line, and it is a zero with that reason."""


@dataclass(frozen=True)
class Submission:
    path: Path
    label: str  # unique among this run's: the name of its results and executed notebook

    @property
    def file(self) -> str:
        return self.path.name


def find_submissions(arguments: list[str]) -> tuple[list[Submission], list[str]]:
    """The submissions the arguments name, in order, once each; and one line per argument
    that names none."""
    found: list[Path] = []
    problems: list[str] = []
    for arg in arguments:
        path = Path(arg)
        if path.is_dir():
            matches = sorted(p for p in path.iterdir() if p.suffix in SUBMISSION_SUFFIXES and p.is_file())
        elif path.is_file():
            matches = [path]
        else:
            matches = sorted(Path(p) for p in glob.glob(arg) if Path(p).is_file()) if glob.has_magic(arg) else []
        matches = [p for p in matches if p.suffix in SUBMISSION_SUFFIXES]
        if not matches:
            problems.append(f"{arg}: no notebook (.ipynb) or submission zip (.zip) there")
        found += matches
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path.resolve(), None)
    subs: list[Submission] = []
    taken: set[str] = set()
    for path in unique:
        label, n = path.stem, 1
        while label in taken:
            n += 1
            label = f"{path.stem}-{n}"
        taken.add(label)
        subs.append(Submission(path, label))
    return subs, problems


def stage(sub: Submission, grader: Autograder, folder: Path) -> Path:
    """The submission laid out in `folder` (new, empty, this process's); its notebook's path."""
    if sub.path.suffix == ".zip":
        try:
            with BoundedZip(sub.path, SUBMISSION_LIMITS, what=f"the submission zip {sub.file}") as zf:
                zf.extract(folder)
        except ZipError as err:
            raise SubmissionError(str(err)) from None
    else:
        try:
            size = sub.path.stat().st_size
            if size > NOTEBOOK_MAX_BYTES:
                raise SubmissionError(f"the notebook is {size:,} bytes, more than {NOTEBOOK_MAX_BYTES:,}")
            write_new_file(folder, (sub.file,), sub.path.read_bytes())
        except OSError as err:
            raise SubmissionError(f"the notebook cannot be read ({err.strerror or type(err).__name__})") from None
    notebooks = sorted(p for p in folder.iterdir() if p.suffix == ".ipynb" and p.is_file())
    if len(notebooks) != 1:
        raise SubmissionError("more than one notebook in the submission" if notebooks
                              else "no notebook in the submission")
    # Otter's runner copies the autograder's files over the student's, and its tests folder replaces theirs.
    with BoundedZip(grader.path, what="the autograder zip") as zf:
        for member, target in grader.files.items():
            _clear(folder, target)
            zf.extract(folder, {member: target})
    _clear(folder, ("tests",))
    (folder / "tests").mkdir(mode=0o700)
    for name, spec in grader.tests.items():
        write_new_file(folder, ("tests", f"{name}.py"), spec.public_source().encode())
    return notebooks[0]


def _clear(folder: Path, parts: tuple[str, ...]) -> None:
    """What the student put at parts, removed (their files only: the folder is ours)."""
    path = folder.joinpath(*parts)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    for i in range(1, len(parts)):  # a file where a support file's folder goes
        parent = folder.joinpath(*parts[:i])
        if parent.is_file() and not parent.is_symlink():
            parent.unlink()
            break
