"""What a graded submission's guest says, checked, and otter's results built from it.

A test cell's result is data the submission's interpreter produced, so it is read as
hostile input: one display of RESULT_MIME, a JSON object of exactly these fields,

    {"token": "<this cell's>", "test": "q1", "tampered": ["otter.x.y", ...],
     "cases": [{"passed": true, "message": "..."}, ...]}

with as many cases as the host's own copy of the test has, booleans as booleans and
strings within their caps. Everything else about a question (its cases' names,
points, hidden flags, all-or-nothing) comes from the host's copy of the autograder
zip, never from the guest, so a result can say only which cases passed and why. One
that fails any check gives the question no points, with the reason, and grading goes
on. Grades, results.json and final_grades.csv are then otter's own objects and
formats (GradingResults, to_gradescope_dict, merge_scores_to_df).
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .test_specs import QuestionSpec

RESULT_MIME = "application/vnd.wasm-kernel.otter-result+json"  # the guest driver's, _wasm_kernel_otter_grading.py
MESSAGE_MAX_CHARS = 8_000  # as the guest driver cuts them
RESULT_MAX_BYTES = 4 << 20  # one test's result as JSON
_MAX_TAMPERED = 50
_TAMPERED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,199}|begin\(\) never ran")
_FIELDS = {"token", "test", "cases", "tampered"}


class ResultError(ValueError):
    """A result that is not what the driver sends; the message is one line."""


@dataclass(frozen=True)
class Verdict:
    """One test's outcome: each case's (passed, message), or the reason there is none."""

    cases: tuple[tuple[bool, str], ...] = ()
    tampered: tuple[str, ...] = ()
    problem: str | None = None  # set: the question gets no points, this is why


def read_result(data: Any, *, token: str, spec: QuestionSpec) -> Verdict:
    """A test cell's RESULT_MIME value, checked against the host's spec of that test."""
    try:
        size = len(json.dumps(data))
    except (TypeError, ValueError, RecursionError):
        raise ResultError("the result is not JSON data") from None
    if size > RESULT_MAX_BYTES:
        raise ResultError(f"the result is {size:,} bytes of JSON, more than {RESULT_MAX_BYTES:,}")
    if not isinstance(data, dict) or set(data) != _FIELDS:
        raise ResultError(f"the result is not an object of exactly the fields {sorted(_FIELDS)}")
    if not isinstance(data["token"], str) or not hmac.compare_digest(data["token"].encode(), token.encode()):
        raise ResultError("the result does not carry this test cell's token")
    if data["test"] != spec.name:
        raise ResultError(f"the result is for another test than {spec.name}")
    cases = data["cases"]
    if not isinstance(cases, list) or len(cases) != spec.case_count:
        raise ResultError(f"the result does not have {spec.case_count} cases")
    read: list[tuple[bool, str]] = []
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or set(case) != {"passed", "message"}:
            raise ResultError(f"case {i + 1} of the result is not an object of passed and message")
        if not isinstance(case["passed"], bool) or not isinstance(case["message"], str):
            raise ResultError(f"case {i + 1} of the result has a passed that is not true or false, or a "
                              "message that is not a string")
        if len(case["message"]) > MESSAGE_MAX_CHARS:
            raise ResultError(f"case {i + 1} of the result has a message of more than {MESSAGE_MAX_CHARS:,} characters")
        read.append((case["passed"], case["message"]))
    tampered = data["tampered"]
    if (not isinstance(tampered, list) or len(tampered) > _MAX_TAMPERED
            or not all(isinstance(t, str) and _TAMPERED_NAME.fullmatch(t) for t in tampered)):
        raise ResultError("the result's tampered list is not a short list of attribute names")
    return Verdict(tuple(read), tuple(tampered))


@dataclass
class Graded:
    """A submission's grading: each test's verdict, or a failure that left it ungraded."""

    file: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    failure: str | None = None  # the whole submission is a zero: why (otter's "catastrophic" error)
    notes: list[str] = field(default_factory=list)  # one line each: what was noticed (tampering)

    def grading_results(self, tests: dict[str, QuestionSpec]) -> Any:
        """otter's GradingResults, built from the host's specs and these verdicts."""
        from otter.test_files import GradingResults
        from otter.test_files.abstract_test import TestCaseResult
        from otter.test_files.ok_test import OKTestFile

        if self.failure is not None:
            results = GradingResults.without_results(GradingFailure(self.failure))
            results.file = self.file
            return results
        files = []
        for name, spec in tests.items():
            test = OKTestFile.from_spec(spec.spec, path=f"tests/{name}.py")
            verdict = self.verdicts.get(name) or Verdict(problem="the test did not run")
            if verdict.problem is not None:
                outcomes = [(False, f"❌ Test case not graded: {verdict.problem}")] * spec.case_count
            else:
                outcomes = list(verdict.cases)
            test.test_case_results = [TestCaseResult(test_case=case, message=message, passed=passed)
                                      for case, (passed, message) in zip(test.test_cases, outcomes)]
            files.append(test)
        results = GradingResults(files)
        results.file = self.file
        return results


class GradingFailure(Exception):
    """Why a submission has no results (its str is otter's grading_status)."""
