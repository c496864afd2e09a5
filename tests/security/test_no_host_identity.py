"""Class 5: no host identity in anything the notebook sees.

No host path, host user name or sessions root in what a magic, an error or the
guest's own view of its process shows. Operators read those from
`wasm-kernel sessions` and the structlog log.
"""

from __future__ import annotations

import pytest

from wasm_kernel.runtime.guest_config import GuestOptions

from support.security_harness import HUB_USER, Target

pytestmark = pytest.mark.slow  # 35 vectors through a kernel (the fast tier keeps test_guest_escapes)

# Each shows something about the session, the process or an error; none may show the host.
PROBES = {
    "session": "%session",
    "config-list": "%config WasmKernel",
    "config-bare": "%config",
    "config-operator-trait": "%config WasmKernel.workspace_root",
    "config-agent": "%config WasmKernel.agent_key",
    "limits": "%limits",
    "files": "%files",
    "files-traversal": "%files ../*",
    "files-absolute": "%files /etc/*",
    "cat-missing": "%cat nothing-here.txt",
    "cat-absolute": "%cat /etc/passwd",
    "cat-traversal": "%cat ../../host-secret.txt",
    "cat-folder": "%cat .",
    "rm-missing": "%rm nothing-here.txt",
    "rm-workspace": "%rm -r .",
    "writefile-traversal": "%%writefile ../escape.txt\nx",
    "prune-dry-run": "%prune --dry-run --older-than 0",
    "prune-bad-age": "%prune --older-than yesterday",
    "pip-list": "%pip list",
    "pip-missing-package": "%pip install no-such-package-93ab",
    "pip-freeze": "%pip freeze",
    "guest-environ": "import os; print(dict(os.environ))",
    "guest-paths": "import sys, os; print(sys.path, sys.executable, sys.argv, sys.prefix, os.getcwd())",
    "guest-user": "import getpass, os; print(getpass.getuser(), os.path.expanduser('~'))",
    "guest-traceback": "def f():\n    raise ValueError('boom')\nf()",
    "guest-syntax-error": "def (:",
    "guest-import-error": "import no_such_module_93ab",
    "ipython-pwd": "%pwd",
    "ipython-env": "%env",
    "ipython-history": "%history -g -n",
    "ipython-who": "%whos",
    "ipython-config": "%config InlineBackend",
    "ipython-magic-unknown": "%no_such_magic",
    "kernel-info-in-guest": "get_ipython().kernel.get_parent()",
    "host-magic-help": "%files?",
}


@pytest.mark.parametrize("code", PROBES.values(), ids=PROBES.keys())
def test_what_the_notebook_sees_holds_no_host_path_or_user(target: Target, code: str) -> None:
    run = target.run(code)
    target.assert_no_host_path(target.shown_text(run))
    target.assert_safe(run)


def test_kernel_info_and_completion_hold_no_host_path(target: Target) -> None:
    replies = [target.kernel.request("kernel_info"),
               target.kernel.request("complete", "%cat ", 5),
               target.kernel.request("inspect", "open", 4, 1),
               target.kernel.request("history", hist_access_type="tail", n=20)]
    for reply in replies:
        target.assert_no_host_path(str(reply["content"]))
    assert HUB_USER not in str(replies)


@pytest.mark.parametrize("environment", [
    {"HOME": "/root"}, {"TMPDIR": "/"}, {"A B": "x"}, {"": "x"}, {"X": "line\nbreak"}, {"X": "x" * 4097},
    {"X": "nul\0"},
])
# pass_environment copies host variables into the guest: never over the guest's own
# (HOME, TMPDIR... name the guest's folders), never a name or value libc would misread.
def test_guest_options_refuse_what_cannot_be_a_guest_variable(environment: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="cannot be passed to the guest"):
        GuestOptions(environment=environment)
