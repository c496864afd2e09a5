"""A graded submission's result is hostile data (issue 43): the host reads a test
cell's RESULT_MIME value only if it is exactly what the guest's driver sends, checked
against the host's own copy of the test; anything else gives that question no points
with the reason, never a crash, and never lets the guest say what a question is worth.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wasm_kernel.cli.grading import results as results_module
from wasm_kernel.cli.grading.results import MESSAGE_MAX_CHARS, RESULT_MAX_BYTES, Graded, ResultError, Verdict, read_result
from wasm_kernel.cli.grading.test_specs import check_spec

pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")

TOKEN = "ab" * 16
SPEC = check_spec({"name": "q1", "points": 3, "suites": [{"cases": [
    {"code": ">>> f(3)\n9", "hidden": False}, {"code": ">>> f(-4)\n16", "hidden": True},
    {"code": ">>> f(0)\n0", "hidden": True}]}]}, "tests/q1.py")


def good(**changes: object) -> dict:
    value = {"token": TOKEN, "test": "q1", "tampered": [],
             "cases": [{"passed": True, "message": "ok"}, {"passed": False, "message": "no"},
                       {"passed": True, "message": ""}]}
    value.update(changes)
    return value


def test_the_drivers_result_is_read() -> None:
    verdict = read_result(good(), token=TOKEN, spec=SPEC)
    assert verdict.cases == ((True, "ok"), (False, "no"), (True, "")) and verdict.problem is None


@pytest.mark.parametrize("data, why", [
    (None, "not an object"),
    ([], "not an object"),
    ("q1 passed", "not an object"),
    (good(extra=1), "exactly the fields"),
    ({k: v for k, v in good().items() if k != "tampered"}, "exactly the fields"),
    (good(token="cd" * 16), "token"),
    (good(token=None), "token"),
    (good(token=["ab" * 16]), "token"),
    (good(test="q2"), "another test"),
    (good(test=["q1"]), "another test"),
    (good(cases=[{"passed": True, "message": ""}] * 2), "3 cases"),
    (good(cases=[{"passed": True, "message": ""}] * 4), "3 cases"),
    (good(cases={"passed": True}), "3 cases"),
    (good(cases=[{"passed": 1, "message": ""}] * 3), "true or false"),
    (good(cases=[{"passed": "yes", "message": ""}] * 3), "true or false"),
    (good(cases=[{"passed": True, "message": 5}] * 3), "true or false"),
    (good(cases=[{"passed": True, "message": "", "points": 99}] * 3), "passed and message"),
    (good(cases=[{"passed": True}] * 3), "passed and message"),
    (good(cases=[[True, ""]] * 3), "passed and message"),
    (good(cases=[{"passed": True, "message": "x" * (MESSAGE_MAX_CHARS + 1)}] * 3), "characters"),
    (good(tampered="otter"), "tampered"),
    (good(tampered=[{}]), "tampered"),
    (good(tampered=["x\n\x1b[2Jrm -rf /"]), "tampered"),
    (good(tampered=["a"] * 51), "tampered"),
])
def test_a_result_that_is_not_the_drivers_is_refused_in_one_line(data: object, why: str) -> None:
    with pytest.raises(ResultError, match=why) as caught:
        read_result(data, token=TOKEN, spec=SPEC)
    assert "\n" not in str(caught.value)


def test_a_result_too_large_is_refused_before_it_is_walked() -> None:
    data = good(cases=[{"passed": True, "message": "x" * (RESULT_MAX_BYTES // 2)}] * 3)
    with pytest.raises(ResultError, match="bytes of JSON"):
        read_result(data, token=TOKEN, spec=SPEC)


def test_deeply_nested_or_cyclic_data_is_refused_not_a_crash() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ResultError, match="not JSON data"):
        read_result(good(tampered=deep), token=TOKEN, spec=SPEC)
    cyclic: dict = good()
    cyclic["cases"][0]["message"] = cyclic  # type: ignore[index]
    with pytest.raises(ResultError, match="not JSON data"):
        read_result(cyclic, token=TOKEN, spec=SPEC)


def test_what_a_question_is_worth_comes_from_the_hosts_tests_only() -> None:
    graded = Graded("s.ipynb", verdicts={"q1": Verdict(cases=((True, ""), (True, ""), (True, "")))})
    results = graded.grading_results({"q1": SPEC})
    assert results.total == 3 and results.possible == 3  # the spec's points, whatever the guest says
    partial = Graded("s.ipynb", verdicts={"q1": Verdict(cases=((True, ""), (False, ""), (True, "")))})
    assert partial.grading_results({"q1": SPEC}).total == 2


def test_a_refused_result_is_that_questions_zero_with_its_reason() -> None:
    graded = Graded("s.ipynb", verdicts={"q1": Verdict(problem="its result was refused: no token")})
    results = graded.grading_results({"q1": SPEC})
    assert results.total == 0 and results.possible == 3
    assert "its result was refused: no token" in results.get_result("q1").summary()


def test_a_submission_that_could_not_be_graded_is_otters_catastrophic_zero() -> None:
    results = Graded("s.ipynb", failure="no notebook in the submission").grading_results({"q1": SPEC})
    assert results.has_catastrophic_failure() and results.total == 0
    assert str(results.catastrophic_error) == "no notebook in the submission"


def test_the_host_and_the_guest_agree_on_the_results_format() -> None:
    import wasm_kernel

    driver = Path(wasm_kernel.__file__).parent / "runtime" / "guest_lib" / "_wasm_kernel_otter_grading.py"
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(driver.read_text()).body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and node.targets[0].id in ("RESULT_MIME", "MESSAGE_MAX_CHARS")}
    assert constants == {"RESULT_MIME": results_module.RESULT_MIME, "MESSAGE_MAX_CHARS": MESSAGE_MAX_CHARS}
