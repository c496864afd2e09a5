"""The kernel's options on its command line (kernel.json's argv) parse as traitlets
parses those of a class its application lists: `--WasmKernel.x=["a", "b"]` is a list
of two, as ipykernel's own classes take it, and so is `--WasmKernel.x=a --WasmKernel.x=b`."""

from __future__ import annotations

import pytest
from traitlets import Dict, List
from traitlets.config import Configurable

from support.kernel_client import RunningKernel
from wasm_kernel.kernel.kernel_app import WasmKernelApp
from wasm_kernel.kernel.kernel_settings import KernelSettings

CONTAINERS = sorted(name for name, trait in KernelSettings.class_traits(config=True).items()
                    if isinstance(trait, (List, Dict)))
VALUES = {  # two entries each, valid for the trait
    "guest_constraints": ["wrapt>=1.16,<3", "jsonschema<4.18"],  # a comma inside an entry stays in it
    "guest_overrides": ["wrapt>=1.16", "click>=8,<10"],
    "guest_requirements": ["datascience==0.18.1", "otter-grader==7.0.0"],
    "network_allow": ["a.example:80", "b.example"],
    "network_allow_addresses": ["10.0.0.0/8", "192.168.1.0/24"],
    "notebook_roots": ["/srv/course/a", "/srv/course/b"],
    "pass_environment": ["NBGRADER_EXECUTION", "COURSE_NAME"],
    "pip_find_links": ["/srv/wheels", "https://wheels.example/simple"],
    "preload_modules": ["json", "csv"],
}


def _seen(argv: list[str]) -> Configurable:
    """What a kernel of this app would read from its `WasmKernel` section."""
    app = WasmKernelApp()
    app.parse_command_line(argv)
    app.parse_kernel_options()
    reader = type("WasmKernel", (Configurable, KernelSettings), {})
    return reader(parent=app)


def test_every_list_trait_is_covered_here() -> None:
    assert CONTAINERS == sorted(VALUES), "a List or Dict trait was added: give it two values above"


@pytest.mark.parametrize("name", CONTAINERS)
def test_a_list_in_traitlets_list_syntax_is_the_list(name: str) -> None:
    values = VALUES[name]
    literal = "[" + ", ".join(f'"{v}"' for v in values) + "]"
    assert getattr(_seen([f"--WasmKernel.{name}={literal}"]), name) == values
    assert getattr(_seen([f"--WasmKernel.{name}={v}" for v in values]), name) == values


def test_other_options_keep_their_meaning() -> None:
    seen = _seen(["--WasmKernel.memory=123456789", "--WasmKernel.session_scope=run"])
    assert seen.memory == 123456789 and seen.session_scope == "run"


@pytest.mark.slow
def test_a_kernel_started_with_a_list_in_its_argv_allows_both_hosts(tmp_path) -> None:  # noqa: ANN001
    kernel = RunningKernel(tmp_path / "jupyter", argv=['--WasmKernel.network_allow=["a.example:80", "b.example"]'])
    try:
        run = kernel.execute("%network")
        shown = "".join(str(m["content"].get("data", {}).get("text/plain", "")) for m in run.outputs)
        assert "this notebook may fetch from  a.example:80, b.example" in shown, shown
    finally:
        kernel.shutdown()
