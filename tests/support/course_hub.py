"""The course hub of docs/teaching.md, read from the page: its config blocks, the
culler's service and role, and opening the homework notebook on a student's server
(tests/e2e/ shares them, so the documented configuration is the tested one)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from traitlets.config import Config

from support.hub import CULLER_SERVICE, PROXY_INSTALL, UserServer, proxy_command
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
