"""Host magics driven by a hostile notebook: traversal, links the guest planted,
huge and malformed arguments, and option injection into %pip.

The magics run on the host, so each is a way in for the notebook's text. Every
vector must be refused with one line (UsageError) or do only what it says inside
the workspace; the harness then checks that nothing outside changed or showed.
"""

from __future__ import annotations

import pytest

from support.security_harness import Target

pytestmark = pytest.mark.slow  # 50 vectors through a kernel (the fast tier keeps test_guest_escapes)

# Links a cell plants before the magic runs: into the host, and into the workspace.
PLANT = (
    "import os\n"
    "for name, to in (('out-link', '../../host-secret.txt'), ('up-dir', '..'), ('self-link', 'precious.bin')):\n"
    "    if not os.path.lexists(name):\n        os.symlink(to, name)\n"
    "os.makedirs('box', exist_ok=True)\n"
)

REFUSED = {
    "cat-traversal": "%cat ../host-secret.txt",
    "cat-absolute": "%cat /etc/passwd",
    "cat-link-out": "%cat out-link",
    "cat-link-in": "%cat self-link",
    "cat-through-dir-link": "%cat up-dir/host-secret.txt",
    "cat-workspace": "%cat .",
    "cat-empty": "%cat ''",
    "cat-nul": "%cat 'a\x00b'",
    "cat-huge-arg": "%cat " + "a/" * 50_000 + "x",
    "writefile-traversal": "%%writefile ../escape.txt\nx",
    "writefile-absolute": "%%writefile /tmp/escape.txt\nx",
    "writefile-onto-link": "%%writefile self-link\noverwritten",
    "writefile-through-dir-link": "%%writefile up-dir/escape.txt\nx",
    "writefile-append-link": "%%writefile -a out-link\nx",
    "writefile-no-path": "%%writefile\nx",
    "writefile-workspace": "%%writefile .\nx",
    "rm-traversal": "%rm ../host-secret.txt",
    "rm-workspace": "%rm -r .",
    "rm-dotdot": "%rm -r ..",
    "rm-through-dir-link": "%rm up-dir/host-secret.txt",
    "rm-absolute": "%rm -r /",
    "rm-option-injection": "%rm --no-preserve-root -rf /",
    "files-absolute": "%files /etc/**",
    "files-traversal": "%files ../**",
    "pip-index-url": "%pip install --index-url http://127.0.0.1:9/simple greet",
    "pip-extra-index": "%pip install --extra-index-url=http://127.0.0.1:9 greet",
    "pip-editable": "%pip install -e .",
    "pip-local-path": "%pip install /etc",
    "pip-relative-path": "%pip install ../host-secret.txt",
    "pip-url": "%pip install https://127.0.0.1:9/x.whl",
    "pip-vcs": "%pip install git+https://127.0.0.1:9/x.git",
    "pip-requirements": "%pip install -r requirements.txt",
    "pip-target": "%pip install --target / greet",
    "pip-prefix": "%pip install --prefix=/ greet",
    "pip-no-binary": "%pip install --no-binary :all: greet",
    "pip-shell-chars": "%pip install 'greet; touch /tmp/pwned'",
    "pip-download": "%pip download greet",
    "pip-config": "%pip config set global.index-url http://evil",
    "pip-bad-requirement": "%pip install '=== ;'",
    "prune-negative": "%prune --older-than -1",
    "prune-huge": "%prune --older-than 1e400",
    "prune-junk": "%prune --older-than '; rm -rf /'",
    "limits-junk": "%limits cpu=$(id)",
    "limits-nested": "%limits memory=memory=1",
    "session-args": "%session --all",
    "undo-args": "%undo 5",
    "reset-options": "%reset --hard",
    "config-other-class": "%config WasmKernelApp.connection_file = '/etc/passwd'",
    "config-private-attr": "%config WasmKernel._sandbox = None",
    "config-shell": "%config WasmKernel.shell = None",
}


@pytest.fixture(scope="module")
def planted(target: Target) -> Target:
    run = target.run(PLANT)
    assert run.status == "ok", target.shown_text(run)
    return target


@pytest.mark.parametrize("magic", REFUSED.values(), ids=REFUSED.keys())
def test_a_hostile_magic_is_refused_with_one_line(planted: Target, magic: str) -> None:
    run = planted.run(magic)
    assert run.status == "error", (magic[:80], planted.shown_text(run)[:500])
    assert run.reply["content"]["ename"] == "UsageError", planted.shown_text(run)[:500]
    workspace = planted.workspace()
    assert (workspace / "self-link").is_symlink() and (workspace / "up-dir").is_symlink()
    assert not (planted.base / "escape.txt").exists()
    planted.assert_safe(run)


def test_rm_of_a_link_removes_the_link_never_its_target(planted: Target) -> None:
    run = planted.run("%rm up-dir")
    assert run.status == "ok"
    assert not (planted.workspace() / "up-dir").exists() and planted.secret.exists()
    planted.assert_safe(run)
    planted.run("import os; os.symlink('..', 'up-dir')")


def test_files_lists_links_as_themselves(planted: Target) -> None:
    run = planted.run("%files")
    text = run.displays()[0]["data"]["text/plain"]
    assert "out-link (link)" in text and "up-dir (link)" in text and "host-secret" not in text
    planted.assert_safe(run)
