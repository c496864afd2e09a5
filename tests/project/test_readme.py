"""The README works as written: every command and code block in it, run in order
from a fresh copy of the repository in a temporary folder, the way doctest runs a
docstring. Commands are run by bash, Python blocks by the copy's own venv; a
`# TEXT` comment after a print() is the output it must show. A server command
(`jupyter lab`) is started, must come up, and is stopped. The README's test
command is the one thing not run here: it is this suite, and CI runs it
(.ci/run), which the first test pins."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.paths import REPO

ROOT = REPO
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
_SERVERS = ("jupyter lab", "jupyter notebook")


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(README.read_text())]


def commands(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def readme_test_command(lines: list[str]) -> str:
    (line,) = [c for c in lines if "pytest" in c]
    return line




def test_readme_test_command_is_the_one_ci_runs() -> None:
    lang, first = blocks()[0]
    assert lang == "bash"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert readme_test_command(commands(first)) == ci


def test_readme_links_to_local_files_resolve() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into docs/"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def fresh_copy(dest: Path) -> Path:
    """What a clone of the current tree holds: tracked files and new ones not ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run_server(line: str, cwd: Path, env: dict[str, str]) -> None:
    """Start a Jupyter server as written; it must say where it runs within 2 minutes."""
    if os.geteuid() == 0:  # Jupyter refuses root without it, as the README says
        line += " --allow-root"
    proc = subprocess.Popen(["bash", "-c", line], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    seen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            out = proc.stdout.readline()
            if not out and proc.poll() is not None:
                break
            seen.append(out)
            if "is running at" in out or re.search(r"http://(127\.0\.0\.1|localhost):\d+/lab", out):
                return
        pytest.fail(f"{line!r} did not come up:\n{''.join(seen[-30:])}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_readme_command_and_code_block_works_from_a_fresh_copy(tmp_path: Path) -> None:
    repo = fresh_copy(tmp_path / "wasm-kernel")
    home = tmp_path / "jupyter"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env |= {"JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "BROWSER": "true", "NO_COLOR": "1"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p)
    found = blocks()
    assert [lang for lang, _ in found].count("bash") >= 2 and "python" in [lang for lang, _ in found]
    ran = 0
    for lang, code in found:
        if lang == "bash":
            lines = commands(code)
            for line in lines:
                if found[0][1] == code and line == readme_test_command(lines):
                    continue  # the test command: this suite itself (pinned above)
                if any(server in line for server in _SERVERS):
                    run_server(line, repo, env)
                else:
                    proc = subprocess.run(["bash", "-c", line], cwd=repo, env=env, capture_output=True, text=True,
                                          timeout=1200)
                    assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                    if "wasm-kernel run examples/01" in line:
                        assert "In [1]:" in proc.stdout and "code cells in" in proc.stdout, proc.stdout
                ran += 1
        elif lang == "python":
            script = tmp_path / f"block{ran}.py"
            script.write_text(code)
            proc = subprocess.run([str(repo / ".venv" / "bin" / "python"), str(script)], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"{code}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            for expected in re.findall(r"^\s*print\(.*\)\s+# (.+)$", code, re.M):
                assert expected.strip() in proc.stdout, (expected, proc.stdout)
            ran += 1
    assert ran >= 8
    assert (repo / "executed.ipynb").is_file()


def test_readme_configuration_table_names_only_real_kernel_traits() -> None:
    from wasm_kernel.kernel.sandbox_kernel import WasmKernel

    text = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    traits = set(WasmKernel.class_traits(config=True))
    assert len(named) >= 12 and named <= traits, sorted(named - traits)


README_MAX_BYTES = 15_000  # a newcomer's read; the internals live in docs/
_FIGURE = re.compile(r"\b\d+\.\d+(?:-\d+\.\d+)?(?=x| s| ms)|\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x\b")


def test_the_readme_is_short_enough_to_read_first() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/"


def test_every_timing_figure_in_the_readme_is_one_benchmarks_md_records() -> None:
    # A figure the README states is one BENCHMARKS.md measured, with its command and
    # conditions there; not a number that drifted from it.
    benchmarks = (ROOT / "BENCHMARKS.md").read_text()
    figures = _FIGURE.findall(README.read_text())
    assert len(figures) >= 10, figures
    missing = [f for f in figures if f not in benchmarks]
    assert not missing, f"README figures not in BENCHMARKS.md: {missing}"
