"""The lab extension's own unit tests (jest, labextension/test/) and its lint (ESLint
with typescript-eslint, labextension/eslint.config.mjs), run with the suite so that
the README's test command covers the TypeScript too. `pip install -e .` has
installed labextension/node_modules (the build hook runs jlpm install)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.paths import REPO

LABEXTENSION = REPO / "labextension"


def _jlpm() -> Path:
    jlpm = Path(sys.prefix) / "bin" / "jlpm"
    assert jlpm.exists(), "jlpm is missing: pip install -e '.[test]' installs it (jupyter-builder)"
    assert (LABEXTENSION / "node_modules").is_dir(), "run pip install -e . first: it installs the extension's node_modules"
    return jlpm


def test_the_extensions_sources_pass_its_lint() -> None:
    run = subprocess.run([str(_jlpm()), "lint:check"], cwd=LABEXTENSION, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]


def test_the_extensions_jest_suite_passes() -> None:
    run = subprocess.run([str(_jlpm()), "test", "--ci"], cwd=LABEXTENSION, capture_output=True, text=True, timeout=600)
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-3000:]
    assert "failed" not in report.split("Tests:")[-1].splitlines()[0], report[-1000:]
