"""The course hub of docs/teaching.md, read from the page: its config blocks, the
culler's service and role, and opening the homework notebook on a student's server
(tests/e2e/ shares them, so the documented configuration is the tested one)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from support.hub import CULLER_SERVICE, PROXY_INSTALL, Hub, UserServer, proxy_command
from support.paths import REPO

TEACHING = REPO / "docs" / "teaching.md"
NOTEBOOK = "course/hw1.ipynb"


def require_proxy() -> None:
    if proxy_command() is None:
        if os.environ.get("CI"):
            pytest.fail(f"configurable-http-proxy is not installed: `{PROXY_INSTALL}` (.ci/run does)")
        pytest.skip(f"configurable-http-proxy is not installed: `{PROXY_INSTALL}` (.ci/run does)")


def doc_block(title: str) -> str:
    """The ```python block of docs/teaching.md whose first line is `# TITLE`."""
    blocks = re.findall(r"^```python\n(.*?)^```", TEACHING.read_text(), re.MULTILINE | re.DOTALL)
    found = [b for b in blocks if b.startswith(f"# {title}\n")]
    assert len(found) == 1, f"docs/teaching.md has {len(found)} python blocks titled {title!r}"
    return found[0]


def with_line(text: str, start: str, new: str) -> str:
    """`text` with its one line starting with `start` replaced by `new`."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(start)]
    assert len(hits) == 1, f"expected one line starting {start!r} in:\n{text}"
    lines[hits[0]] = new
    return "\n".join(lines) + "\n"


def _culling() -> tuple[dict, dict]:
    """The culler's service and role as the page configures them."""
    c = Config()
    exec(doc_block("jupyterhub_config.py: culling"), {"c": c})  # noqa: S102 - our own documentation
    (role,) = c.JupyterHub.load_roles
    (service,) = c.JupyterHub.services
    assert role["services"] == [service["name"]] == [CULLER_SERVICE]
    return service, role


def culler_role() -> dict:
    """The culler's role as the page configures it."""
    return _culling()[1]


def culler_command(timeout: int, cull_every: int) -> list[str]:
    """The page's command for the culler service, with `timeout` and `cull_every`
    (seconds) in place of its --timeout and --cull-every."""
    command = list(_culling()[0]["command"])
    for option, value in (("--timeout=", timeout), ("--cull-every=", cull_every)):
        hits = [i for i, arg in enumerate(command) if arg.startswith(option)]
        assert len(hits) == 1, f"the page's culler command has {len(hits)} {option} options: {command}"
        command[hits[0]] = f"{option}{value}"
    return command


def open_notebook(server: UserServer, path: str = NOTEBOOK) -> tuple[dict[str, Any], Any]:
    """A session on `path` on a student's server, its kernel's channels connected."""
    model = server.start_session(path)
    channels = server.connect(model["kernel"]["id"])
    info = channels.kernel_info()
    assert info["implementation"] == "wasm_kernel", info
    return model, channels


@contextmanager
def course_hub(base: Path) -> Iterator[dict[str, Any]]:
    """The hub of docs/teaching.md in `base`, with two students who share its OS
    account, alice and bob, each logged in (a token for their password) with their
    server started; both opened the homework, and alice's first cell wrote her answer
    to /app. Nothing of it runs on afterwards."""
    require_proxy()
    course_dir = base / "course"
    (course_dir / "jupyter").mkdir(parents=True)
    (course_dir / "jupyter" / "wasm_kernel_config.py").write_text(doc_block("/srv/course/jupyter/wasm_kernel_config.py"))
    config = with_line(doc_block("jupyterhub_config.py: the course's part"), "COURSE = ", f"COURSE = Path({str(course_dir)!r})")
    # SimpleLocalProcessSpawner makes each student's folder (their $HOME): the one the page's lines use.
    hub = Hub(base, ("alice", "bob"), config, culler_scopes=culler_role()["scopes"], homes=course_dir / "users")
    try:
        tokens = {user: hub.login(user) for user in ("alice", "bob")}
        servers = hub.start_servers(tokens)
        sessions = {}
        for user, server in servers.items():
            server.create_notebook(NOTEBOOK)
            model, ch = open_notebook(server)
            try:
                if user == "alice":
                    ch.run_ok("open('answer.txt', 'w').write('alice 42')")
                sessions[user] = {"model": model, "id": ch.session_id()}
            finally:
                ch.close()
        yield {"hub": hub, "tokens": tokens, "servers": servers, "sessions": sessions, "course_dir": course_dir}
    finally:
        killed = hub.stop()
    assert not killed, f"processes left running after the hub stopped: {killed}"
