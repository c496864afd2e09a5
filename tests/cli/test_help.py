"""Every command explains itself: --help with examples, the cell separator shown as
typed, and usage errors on one line that say where help is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_runs import COMMAND
from wasm_kernel.cli.dispatch import _all_parsers, build_parser

PARSERS = {p.prog: p for p in [build_parser(), *_all_parsers(build_parser())]}


def wk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_command_help_shows_examples_that_use_the_command(prog: str) -> None:
    text = PARSERS[prog].format_help()
    assert "examples:" in text, text
    examples = text.split("examples:", 1)[1]
    assert prog in examples, examples


@pytest.mark.slow
def test_version_prints_the_version_and_exits_0() -> None:
    from wasm_kernel import __version__

    proc = wk("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"wasm-kernel {__version__}\n" and proc.stderr == ""


@pytest.mark.slow
def test_help_shows_the_script_cell_separator_as_it_is_typed() -> None:
    top = wk("--help")
    assert top.returncode == 0
    assert "('# %%' separates cells)" in " ".join(top.stdout.split())
    run = wk("run", "--help").stdout
    assert "'# %%' separates cells" in run and "# %%%%" not in run


@pytest.mark.parametrize("args", [["sessions", "lst"], ["run"], ["frobnicate"], ["sessions", "prune"],
                                  ["run", "x.ipynb", "--timeout", "soon"]])
@pytest.mark.slow
def test_usage_errors_are_one_line_that_points_at_help(args: list[str]) -> None:
    proc = wk(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("wasm-kernel") and "--help`)" in proc.stderr


@pytest.mark.slow
def test_a_cluster_command_without_the_cluster_extra_says_how_to_install_it(tmp_path: Path) -> None:
    # A Python that cannot import redis: a module shadowing it that fails to import.
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "__init__.py").write_text("raise ModuleNotFoundError('No module named redis', name='redis')\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "wasm_kernel.cli", "sandbox-manager", "--redis", "redis://127.0.0.1:1/0",
                           "--port", "1"], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == "wasm-kernel sandbox-manager: error: it needs the cluster extra: " \
                          "pip install 'wasm-kernel[cluster]'\n"
