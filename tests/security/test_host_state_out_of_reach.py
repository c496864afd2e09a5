"""Class 2: the guest owns its workspace, and no name it makes there breaks the host.

Host state (metadata, leases, history, packages) lives in `<root>/.wasm-kernel/`,
beside the workspaces, where no guest can write. Whatever a guest creates in its
own `/app`, names that match host folders included, the session must open again.
"""

from __future__ import annotations

import pytest

from support.security_harness import Target

pytestmark = pytest.mark.slow  # each vector reopens its session in a new kernel

# What a hostile cell leaves in /app before the notebook is reopened.
PLANTS = {
    "private-folder-name": "import os; os.makedirs('/app/.wasm-kernel/sessions', exist_ok=True)",
    "private-folder-as-file": "open('/app/.wasm-kernel', 'w').write('x')",
    "private-folder-as-link": "import os; os.symlink('..', '/app/.wasm-kernel')",
    "lease-lookalike": "import os; os.makedirs('/app/.wasm-kernel/leases', exist_ok=True); "
                       "open('/app/.wasm-kernel/leases/x.lock', 'w').write('held')",
    "writefile-temp-name": "open('/app/.wasm-kernel-tmp-0000000000000000', 'w').write('x')",
    "notebook-mount-name": "open('/app/.wasm-kernel-notebook', 'w').write('x')",
    "history-lookalike": "import os; os.makedirs('/app/.wasm-kernel/history', exist_ok=True); "
                         "open('/app/.wasm-kernel/history/x.sqlite3', 'wb').write(b'not sqlite')",
    "packages-lookalike": "import os; os.makedirs('/app/.wasm-kernel/packages', exist_ok=True)",
}


def _remove_plant(target: Target) -> None:
    target.run("import os, shutil\n"
               "for name in os.listdir('/app'):\n"
               "    if name.startswith('.wasm-kernel'):\n"
               "        p = '/app/' + name\n"
               "        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)")


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_a_name_the_guest_makes_never_stops_its_session_from_opening(target: Target, plant: str) -> None:
    before = target.kernel.session_id()
    run = target.run(plant)
    assert run.status == "ok", run.error
    target.kernel.restart()
    try:
        reopened = target.run("%session")
        assert reopened.status == "ok", target.shown_text(reopened)
        assert target.kernel.session_id() == before, "the reopened notebook found another session"
        target.assert_safe(reopened)
        # Writing, %%writefile and history still work with the plant in place.
        wrote = target.run("%%writefile notes.txt\nhello")
        assert wrote.status == "ok", target.shown_text(wrote)
        assert (target.workspace() / "notes.txt").read_text() == "hello\n"
        assert target.kernel.request("history", hist_access_type="tail", n=3)["content"]["status"] == "ok"
    finally:
        _remove_plant(target)
