"""The adversarial suite's harness.

Each vector runs through a real kernel over jupyter_client (or, for the host
APIs, against a real session) and then asserts four things (`Target.assert_safe`):
1. no escape: the host's secret files are neither changed nor shown, and the
   notebook's folder is as it was;
2. the kernel and the session still answer: `1+1` gives 2;
3. the workspace and the session's metadata are intact: the precious file has
   its bytes, the metadata parses;
4. an error is one clear line with no host path in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.kernel_client import Execution, RunningKernel
from wasm_kernel.host.cache_dir import cache_root
from wasm_kernel.sessions.metadata import read_metadata

SECRET = "host-secret-6f1d2c"
HUB_USER = "hub-user-93ab"  # the JupyterHub user a target runs as: a host identity the notebook never sees
PRECIOUS = b"precious bytes the attack must not change\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def examples(n: int) -> int:
    """A property test's example count: n in the suite, 40 n in a long fuzzing run
    (`HYPOTHESIS_PROFILE=explore`), which also draws fresh random examples."""
    return n * (40 if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else 1)


def tree_hash(root: Path) -> str:
    """Names, kinds, links and bytes of every entry under root, links not followed."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            digest.update(str(path.relative_to(root)).encode("utf-8", "surrogateescape"))
            if path.is_symlink():
                digest.update(b"L" + os.readlink(path).encode("utf-8", "surrogateescape"))
            elif path.is_file():
                digest.update(b"F" + path.read_bytes())
    return digest.hexdigest()


@dataclass
class Target:
    kernel: RunningKernel
    base: Path  # everything of this target: host files, the notebook's folder, Jupyter's data
    notebook_dir: Path
    secret: Path
    host_paths: list[str] = field(default_factory=list)  # and the host user: nothing the notebook may see
    _folder_hash: str = ""

    @property
    def root(self) -> Path:
        return self.kernel.sessions_root

    def workspace(self) -> Path:
        return self.root / self.kernel.session_id()

    def setup(self) -> None:
        self.kernel.execute(f"open('precious.bin', 'wb').write({PRECIOUS!r})")
        self._folder_hash = tree_hash(self.notebook_dir)

    def run(self, code: str, timeout: float = 120, **kwargs: Any) -> Execution:
        return self.kernel.execute(code, timeout=timeout, **kwargs)

    def shown_text(self, run: Execution) -> str:
        """Everything a frontend would show of the execution, and its reply."""
        parts = [json.dumps(m["content"], ensure_ascii=False) for m in run.outputs]
        parts.append(json.dumps(run.reply["content"], ensure_ascii=False))
        return ANSI.sub("", "\n".join(parts))

    def assert_no_host_path(self, text: str) -> None:
        for path in self.host_paths:
            assert path not in text, f"host path {path!r} shown"
        assert SECRET not in text, "the host's secret was shown"

    def assert_one_line_error(self, run: Execution) -> None:
        """An error reply's evalue is one line; one the kernel or the sandbox made
        (not a traceback of the user's code) is one line in its traceback too."""
        content = run.reply["content"]
        if content["status"] != "error":
            return
        assert "\n" not in content["evalue"].strip(), content["evalue"][:300]
        if content["ename"] in ("UsageError", "KernelError", "BadRequest", "SandboxError") or content["ename"].endswith(
            ("Exhausted", "Exceeded", "Limit")
        ):
            said = "".join(ANSI.sub("", "".join(e["traceback"])) for e in run.of_type("error"))
            said += ANSI.sub("", "".join(content.get("traceback", [])))
            assert said.strip().count("\n") == 0, said[:300]

    def assert_safe(self, run: Execution | None = None) -> None:
        # 1. no escape
        assert self.secret.read_text() == SECRET
        assert tree_hash(self.notebook_dir) == self._folder_hash, "the notebook's folder changed"
        # 2. the kernel still answers
        check = self.kernel.execute("1+1", timeout=60)
        assert check.status == "ok" and check.of_type("execute_result")[0]["data"]["text/plain"] == "2"
        # 3. the workspace and the metadata are intact
        workspace = self.workspace()
        assert (workspace / "precious.bin").read_bytes() == PRECIOUS
        assert read_metadata(self.root, workspace.name) is not None
        # 4. one clear line, no host path
        if run is not None:
            self.assert_no_host_path(self.shown_text(run))
            self.assert_one_line_error(run)


def make_target(base: Path, argv: list[str] | None = None, env: dict[str, str] | None = None) -> Target:
    notebook_dir = base / "course"
    (notebook_dir / "data").mkdir(parents=True)
    (notebook_dir / "data" / "scores.csv").write_text("name,score\nada,3\n")
    (notebook_dir / ".env").write_text(f"TOKEN={SECRET}\n")
    secret = base / "host-secret.txt"
    secret.write_text(SECRET)
    kernel = RunningKernel(base / "jupyter", cwd=notebook_dir, argv=argv,
                           env={"JPY_SESSION_NAME": str(notebook_dir / "lesson.ipynb"), "JUPYTERHUB_USER": HUB_USER,
                                **(env or {})})
    host_paths = [str(base), str(cache_root()), str(Path(sys.prefix)), str(Path(__file__).resolve().parents[2]),
                  str(Path.home()) + "/", HUB_USER]
    target = Target(kernel, base, notebook_dir, secret, host_paths)
    target.setup()
    return target


def assert_kernel_answers(run: Execution) -> None:
    """`1+1` ran and gave 2."""
    assert run.status == "ok" and run.of_type("execute_result")[0]["data"]["text/plain"] == "2", run.reply


# --- requests sent as a hostile client sends them ------------------------------------

class RawContent(dict):  # type: ignore[type-arg]
    """Content sent as these exact bytes."""

    def __init__(self, raw: bytes) -> None:
        super().__init__()
        self.raw = raw


def ascii_packer(obj: Any) -> bytes:
    # A client whose JSON escapes lone surrogates (as json.dumps does by default),
    # so they reach the kernel; jupyter_client's own packer would refuse to send them.
    if isinstance(obj, RawContent):
        return obj.raw
    return json.dumps(obj, ensure_ascii=True, default=str).encode()


def raw_request(target: Target, msg_type: str, content: Any, timeout: float = 60) -> dict[str, Any]:
    kc = target.kernel.kc
    packer = kc.session.pack
    kc.session.pack = ascii_packer
    try:
        msg = kc.session.msg(msg_type, content)
        kc.shell_channel.send(msg)
    finally:
        kc.session.pack = packer
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply
    raise TimeoutError(msg_type)
