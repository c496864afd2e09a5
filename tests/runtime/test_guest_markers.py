"""The environment markers pip is told for the guest (host/guest_pip.py) are the
ones the guest itself reports: a package's `sys_platform != "wasi"` dependency is
left out for the guest exactly when the guest would leave it out."""

from __future__ import annotations

import json
from pathlib import Path

from support.sandboxes import fresh_guest
from wasm_kernel.host.guest_pip import guest_markers
from wasm_kernel.runtime.guest_config import TurnLimits


def test_pip_is_told_the_markers_the_guest_reports(tmp_path: Path) -> None:
    with fresh_guest(tmp_path) as guest:
        out = guest.run_cell("import json, packaging.markers\nprint(json.dumps(packaging.markers.default_environment()))",
                             limits=TurnLimits())
    assert out.status == "ok", out.error
    assert json.loads(out.stdout) == guest_markers()
