"""The lab extension's own unit tests (jest, labextension/test/), run with the suite
so that the README's test command covers the TypeScript too. `pip install -e .`
has installed labextension/node_modules (the build hook runs jlpm install)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.paths import REPO

LABEXTENSION = REPO / "labextension"


def test_the_extensions_jest_suite_passes() -> None:
    jlpm = Path(sys.prefix) / "bin" / "jlpm"
    assert jlpm.exists(), "jlpm is missing: pip install -e '.[test]' installs it (jupyter-builder)"
    assert (LABEXTENSION / "node_modules").is_dir(), "run pip install -e . first: it installs the extension's node_modules"
    run = subprocess.run([str(jlpm), "test", "--ci"], cwd=LABEXTENSION, capture_output=True, text=True, timeout=600)
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-3000:]
    assert "failed" not in report.split("Tests:")[-1].splitlines()[0], report[-1000:]
