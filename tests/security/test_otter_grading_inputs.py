"""What `wasm-kernel grade` reads on the host is data from elsewhere (issue 43): an
autograder zip (its tests are never run on the host), and students' submission zips.
Each is refused in one line when it is not what it should be, and nothing in it
writes outside the folder made for it.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from wasm_kernel.cli.grading.autograder import Autograder, AutograderError
from wasm_kernel.cli.grading.safe_zip import BoundedZip, ZipError, ZipLimits
from wasm_kernel.cli.grading.submissions import Submission, SubmissionError, stage
from wasm_kernel.cli.grading.test_specs import SpecError, parse_test_file

pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")

GOOD_TEST = ("OK_FORMAT = True\n\ntest = {'name': 'q1', 'points': 2, 'suites': [{'cases': ["
             "{'code': '>>> f(3)\\n9', 'hidden': False}, {'code': '>>> f(-4)\\n16', 'hidden': True}]}]}\n")


def autograder_zip(path: Path, members: dict[str, str | bytes], *, links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def test_a_test_file_is_read_as_data_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for source in (f"OK_FORMAT = True\ntest = __import__('os').system('touch {marker}')\n",
                   f"OK_FORMAT = True\ntest = {{'name': 'q1', 'suites': [open({str(marker)!r}, 'w')]}}\n",
                   f"OK_FORMAT = __import__('pathlib').Path({str(marker)!r}).touch() or True\ntest = {{}}\n"):
        with pytest.raises(SpecError) as caught:
            parse_test_file(source, "tests/q1.py")
        assert "\n" not in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize("source, why", [
    ("test = {'name': 'q1', 'suites': []}\n", "OK-format"),
    ("OK_FORMAT = False\nfrom otter.test_files import test_case\n", "exception-based"),
    ("OK_FORMAT = True\n", "no `test`"),
    ("OK_FORMAT = True\ntest = {'name': '../../etc/q1', 'suites': [{'cases': [{'code': '>>> 1\\n1'}]}]}\n", "name"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': []}]}\n", "1 to 200 cases"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': [{'code': 1}]}]}\n", "code as a string"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': [{'code': '', 'points': -1}]}]}\n", "points"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': [{'code': '', 'points': True}]}]}\n", "points"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': [{'code': '', 'hidden': 'no'}]}]}\n", "hidden"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': [{'code': ''}]}, {'cases': []}]}\n", "one suite"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'setup': 'import os', 'cases': [{'code': ''}]}]}\n",
     "setup"),
    ("OK_FORMAT = True\ntest = {'name': 'q1', 'points': 1, 'suites': [{'cases': [{'code': '', 'points': 5}]}]}\n",
     "otter cannot read"),
    ("OK_FORMAT = True\ntest = " + "[" * 100_000 + "]" * 100_000 + "\n", "not"),
    ("this is not python (", "not Python"),
])
def test_a_test_file_otter_would_not_read_is_refused_in_one_line(source: str, why: str) -> None:
    with pytest.raises(SpecError, match=why) as caught:
        parse_test_file(source, "tests/q1.py")
    assert "\n" not in str(caught.value)


def test_public_tests_hold_no_hidden_case() -> None:
    spec = parse_test_file(GOOD_TEST, "tests/q1.py")
    public = spec.public_source()
    assert "f(3)" in public and "f(-4)" not in public
    assert parse_test_file(public, "tests/q1.py").hidden == (False,)


@pytest.mark.parametrize("config, why", [
    ('{"plugins": ["otter.plugins.builtin.GoogleSheetsGradeOverride"]}', "otter plugins"),
    ('{"grade_from_log": true}', "grading from otter's log"),
    ('{"token": "secret"}', "Gradescope"),
    ('{"lang": "r"}', "Python assignments"),
    ('[1, 2]', "not a JSON object"),
    ('{"assignment_name": ', "not JSON"),
    ('{"points_possible": "lots"}', "otter_config.json"),
])
def test_an_autograder_setting_this_grader_cannot_honour_is_refused(tmp_path: Path, config: str, why: str) -> None:
    path = autograder_zip(tmp_path / "ag.zip", {"otter_config.json": config, "tests/q1.py": GOOD_TEST})
    with pytest.raises(AutograderError, match=why) as caught:
        Autograder.open(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("line", ["--index-url http://evil.example/simple", "-r other.txt",
                                  "git+https://evil.example/pkg.git", "./local_wheel.whl", "pkg @ file:///etc/passwd"])
def test_a_requirement_that_is_not_a_name_and_version_is_refused(tmp_path: Path, line: str) -> None:
    path = autograder_zip(tmp_path / "ag.zip", {"requirements.txt": f"numpy\n{line}\n", "tests/q1.py": GOOD_TEST})
    with pytest.raises(AutograderError, match="names and versions only"):
        Autograder.open(path)


def test_the_environment_yml_gives_the_guests_requirements_without_otters_extras(tmp_path: Path) -> None:
    env = ("name: otter-env\ndependencies:\n  - python=3.13\n  - pip\n  - pip:\n"
           "      - otter-grader[grading,plugins]==7.0.0\n      - datascience\n")
    grader = Autograder.open(autograder_zip(tmp_path / "ag.zip", {"environment.yml": env, "tests/q1.py": GOOD_TEST}))
    assert grader.requirements == ["otter-grader==7.0.0", "datascience"]


@pytest.mark.parametrize("members, links, why", [
    ({"../evil.py": "x"}, None, "not a path inside"),
    ({"tests/../../evil.py": "x"}, None, "not a path inside"),
    ({"/etc/cron.d/evil": "x"}, None, "not a relative path"),
    ({"tests\\..\\evil.py": "x"}, None, "not a relative path"),
    ({"C:/evil": "x"}, None, "not a relative path"),
    ({}, {"files/data.csv": "/etc/shadow"}, "link"),
    ({"files/a": "x", "files/a/b": "y"}, None, "twice, or under a file"),
    ({"/".join(["d"] * 40) + "/f": "x"}, None, "folders deep"),
])
def test_a_zip_member_that_would_leave_its_folder_is_refused(tmp_path: Path, members: dict, links: dict | None,
                                                              why: str) -> None:
    path = autograder_zip(tmp_path / "ag.zip", {"tests/q1.py": GOOD_TEST, **members}, links=links)
    with pytest.raises(AutograderError, match=why):
        Autograder.open(path)
    sub = Submission(path, "s")
    folder = tmp_path / "stage"
    folder.mkdir()
    grader = Autograder.open(autograder_zip(tmp_path / "ok.zip", {"tests/q1.py": GOOD_TEST}))
    with pytest.raises(SubmissionError, match=why):
        stage(sub, grader, folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ag.zip", "ok.zip", "stage"]


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.bin", b"\0" * (3 << 20))
    with pytest.raises(ZipError, match="inflates to"):
        BoundedZip(path, ZipLimits(max_member_bytes=1 << 20))
    with pytest.raises(ZipError, match="inflates to more than"):
        BoundedZip(path, ZipLimits(max_total_bytes=1 << 20))
    with pytest.raises(ZipError, match="members"):
        with zipfile.ZipFile(tmp_path / "many.zip", "w") as zf:
            for i in range(20):
                zf.writestr(f"f{i}", "x")
        BoundedZip(tmp_path / "many.zip", ZipLimits(max_members=10))


def test_a_member_whose_header_lies_about_its_size_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("tests/q1.py", b"#" * (2 << 20))
    raw = bytearray(path.read_bytes())
    # Rewrite the declared size (local header and central directory) to 10 bytes.
    size = (2 << 20).to_bytes(4, "little")
    for at in [i for i in range(len(raw) - 4) if raw[i:i + 4] == size]:
        raw[at:at + 4] = (10).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    with BoundedZip(path) as zf, pytest.raises(ZipError):
        zf.read(("tests", "q1.py"), max_bytes=1 << 20)


def test_a_submission_cannot_bring_its_own_tests_or_replace_the_support_files(tmp_path: Path) -> None:
    grader = Autograder.open(autograder_zip(tmp_path / "ag.zip", {"tests/q1.py": GOOD_TEST,
                                                                  "files/data.csv": "real\n"}))
    sub = tmp_path / "s.zip"
    with zipfile.ZipFile(sub, "w") as zf:
        zf.writestr("hw.ipynb", "{}")
        zf.writestr("tests/q1.py", "OK_FORMAT = True\ntest = {'name': 'q1', 'suites': [{'cases': []}]}")
        zf.writestr("tests/extra.py", "planted")
        zf.writestr("data.csv", "fake\n")
    folder = tmp_path / "stage"
    folder.mkdir()
    assert stage(Submission(sub, "s"), grader, folder).name == "hw.ipynb"
    assert (folder / "data.csv").read_text() == "real\n"
    assert sorted(p.name for p in (folder / "tests").iterdir()) == ["q1.py"]
    assert "f(3)" in (folder / "tests" / "q1.py").read_text() and "f(-4)" not in (folder / "tests" / "q1.py").read_text()


@pytest.mark.parametrize("names, why", [((), "no notebook"), (("a.ipynb", "b.ipynb"), "more than one notebook")])
def test_a_submission_zip_needs_exactly_one_notebook(tmp_path: Path, names: tuple[str, ...], why: str) -> None:
    grader = Autograder.open(autograder_zip(tmp_path / "ag.zip", {"tests/q1.py": GOOD_TEST}))
    sub = tmp_path / "s.zip"
    with zipfile.ZipFile(sub, "w") as zf:
        zf.writestr("notes.txt", "x")
        for name in names:
            zf.writestr(name, "{}")
    folder = tmp_path / "stage"
    folder.mkdir()
    with pytest.raises(SubmissionError, match=why):
        stage(Submission(sub, "s"), grader, folder)
