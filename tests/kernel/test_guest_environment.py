"""The host environment variables an operator passes to the guest (pass_environment):
nbgrader's NBGRADER_EXECUTION by default, so a notebook can tell it is being graded,
and nothing else of the kernel's environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel

pytestmark = pytest.mark.slow  # a kernel of its own per case


def guest_environ(kernel: RunningKernel) -> dict[str, str]:
    run = kernel.execute("import os, json\nprint(json.dumps(dict(os.environ)))")
    assert run.status == "ok", run.stream("stderr")
    return json.loads(run.stream())


def test_nbgrader_execution_reaches_the_notebook_and_other_variables_do_not(tmp_path: Path) -> None:
    # nbgrader starts its grading kernels with NBGRADER_EXECUTION=autograde in their
    # environment; notebooks test it (`if os.environ.get("NBGRADER_EXECUTION")`).
    k = RunningKernel(tmp_path / "data", env={"NBGRADER_EXECUTION": "autograde", "COURSE_SECRET": "s3cret"})
    try:
        seen = guest_environ(k)
        assert seen["NBGRADER_EXECUTION"] == "autograde"
        assert "COURSE_SECRET" not in seen and "s3cret" not in json.dumps(seen)
        assert k.execute("exit()").status == "ok"  # a fresh interpreter gets it again
        assert guest_environ(k)["NBGRADER_EXECUTION"] == "autograde"
    finally:
        k.shutdown()


def test_an_operator_passes_more_names_and_a_name_the_sandbox_owns_is_left_out(tmp_path: Path) -> None:
    k = RunningKernel(tmp_path / "data", env={"COURSE_TERM": "2026-autumn", "HOME": "/home/grader"},
                      argv=["--WasmKernel.pass_environment=COURSE_TERM", "--WasmKernel.pass_environment=HOME"])
    try:
        seen = guest_environ(k)
        assert seen["COURSE_TERM"] == "2026-autumn"
        assert seen["HOME"] == "/tmp"  # the guest's own, never the host's
        assert "NBGRADER_EXECUTION" not in seen  # the list replaced the default
    finally:
        k.shutdown()
    assert "pass_environment: 'HOME' cannot be passed to the guest" in k.log_path.read_text()

