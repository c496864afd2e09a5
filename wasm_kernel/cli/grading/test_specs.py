"""An otter test file read as data: the host never runs a test file.

`otter assign` writes each question's tests as an OK-format Python file,

    OK_FORMAT = True
    test = {"name": "q1", "points": 2, "suites": [{"cases": [{"code": ">>> f(3)\\n9", "hidden": False}, ...]}]}

and otter itself exec()s it to read the dict. Here it is parsed (ast) and only
literal assignments are taken, so an autograder zip is data on the host as well; its
tests run in the guest only. The spec's shape is checked against what otter's
OKTestFile.from_spec accepts, and otter resolves the points (host-side, from the
literal), so a question is worth here what otter says it is worth.

The public rendering is a test file of only the cases a student sees (hidden: false),
the folder a submission's own `grader.check` calls run during grading.
"""

from __future__ import annotations

import ast
import pprint
import re
from dataclasses import dataclass
from typing import Any

TEST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}")
MAX_CASES = 200  # per test file
MAX_CODE_CHARS = 200_000  # per case


class SpecError(ValueError):
    """A test file otter would not read, or one that is not plain data; the message is one line."""


@dataclass(frozen=True)
class QuestionSpec:
    """One question's tests: the literal spec, and what otter resolves from it."""

    name: str
    spec: dict[str, Any]  # the OK-format dict, as otter's from_spec takes it
    points: tuple[float, ...]  # each case's points, resolved by otter
    hidden: tuple[bool, ...]

    @property
    def case_count(self) -> int:
        return len(self.hidden)

    def public_source(self) -> str:
        """The test file a student has: the public cases only (points as resolved)."""
        suite = dict(self.spec["suites"][0])
        cases = [dict(c, points=p) for c, p, h in zip(suite["cases"], self.points, self.hidden) if not h]
        public = {key: value for key, value in self.spec.items() if key not in ("suites", "points")}
        public["suites"] = [dict(suite, cases=cases)]
        return f"OK_FORMAT = True\n\ntest = {pprint.pformat(public, indent=4, width=100)}\n"


def _literal(node: ast.AST, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
        raise SpecError(f"{where}: `test` is not a plain literal ({type(err).__name__}); "
                            "wasm-kernel grade reads OK-format test files as data") from None


def parse_test_file(source: str, filename: str) -> QuestionSpec:
    """The spec in an OK-format test file's source; SpecError says what is wrong."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise SpecError(f"{filename}: not Python ({type(err).__name__})") from None
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            if target in ("OK_FORMAT", "test"):
                values[target] = _literal(node.value, filename)
    if values.get("OK_FORMAT") is not True:
        raise SpecError(f"{filename}: not an OK-format test file (OK_FORMAT = True); exception-based "
                            "test files are not supported by wasm-kernel grade yet")
    if "test" not in values:
        raise SpecError(f"{filename}: defines no `test` dict")
    return check_spec(values["test"], filename)


def check_spec(spec: Any, filename: str) -> QuestionSpec:
    """The spec, checked as otter's OKTestFile.from_spec checks it, with bounds."""
    from otter.test_files.ok_test import OKTestFile

    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not TEST_NAME.fullmatch(spec["name"]):
        raise SpecError(f"{filename}: `test` needs a name of letters, digits, _ . - (up to 100)")
    suites = spec.get("suites")
    if not isinstance(suites, list) or len(suites) != 1 or not isinstance(suites[0], dict):
        raise SpecError(f"{filename}: `test` needs exactly one suite, as otter requires")
    suite = suites[0]
    if suite.get("type", "doctest") != "doctest" or suite.get("setup") or suite.get("teardown"):
        raise SpecError(f"{filename}: only doctest suites without setup or teardown are supported, as in otter")
    cases = suite.get("cases")
    if not isinstance(cases, list) or not 0 < len(cases) <= MAX_CASES:
        raise SpecError(f"{filename}: the suite needs 1 to {MAX_CASES} cases")
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or not isinstance(case.get("code"), str) or len(case["code"]) > MAX_CODE_CHARS:
            raise SpecError(f"{filename}: case {i + 1} needs its code as a string (up to {MAX_CODE_CHARS:,})")
        for key in ("hidden", "locked"):
            if key in case and not isinstance(case[key], bool):
                raise SpecError(f"{filename}: case {i + 1}: {key} must be true or false")
        for key in ("name", "success_message", "failure_message"):
            if case.get(key) is not None and not isinstance(case[key], str):
                raise SpecError(f"{filename}: case {i + 1}: {key} must be a string")
        points = case.get("points")
        if points is not None and (isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0):
            raise SpecError(f"{filename}: case {i + 1}: points must be a number of 0 or more")
    if not isinstance(spec.get("all_or_nothing", False), bool):
        raise SpecError(f"{filename}: all_or_nothing must be true or false")
    try:
        test = OKTestFile.from_spec(spec, path=filename)
    except (AssertionError, ValueError, TypeError, KeyError) as err:
        raise SpecError(f"{filename}: otter cannot read this test: {err or type(err).__name__}") from None
    return QuestionSpec(spec["name"], spec, tuple(float(c.points) for c in test.test_cases),
                    tuple(bool(c.hidden) for c in test.test_cases))
