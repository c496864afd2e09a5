"""The CLI meets a newcomer as the kernel does: `wasm-kernel sessions` finds the
kernel's sessions without being told where, a run without --persist leaves no
session behind, a persisted one is listed under its notebook, and a script run
gets the kernel's configured limits. Real commands in subprocesses, real kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_runs import env_for, notebook
from support.cli_runs import wk_as_user as wk

pytestmark = pytest.mark.slow  # real commands starting real kernels, 5-30 s each


def leftovers(tmp: Path) -> list[Path]:
    """What a run left in its temporary folder: anything but the per-user scratch
    parent (runtime/guest_scratch.py), which stays, empty, for the next kernel."""
    return [p for p in tmp.rglob("*") if not (p.is_dir() and p.parent == tmp and p.name == f"wasm-kernel-{os.getuid()}")]


def listed(env: dict[str, str], cwd: Path) -> list[dict[str, object]]:
    proc = wk(env, "sessions", "list", "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_sessions_list_before_any_kernel_ran_says_there_are_none_yet(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    proc = wk(env, "sessions", "list", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    root = tmp_path / "data" / "wasm-kernel" / "sessions"
    assert proc.stdout == f"no sessions under {root} (it does not exist yet: the first kernel creates it)\n"


def test_sessions_list_finds_what_a_persisted_run_kept_under_its_notebook(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    nb = notebook(tmp_path / "lab.ipynb", "open('result.txt', 'w').write('42')")
    run = wk(env, "run", nb, "--persist", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (session,) = listed(env, tmp_path)
    assert session["notebook"] == str(nb.resolve()) and session["mode"] == "notebook"
    workspace = tmp_path / "data" / "wasm-kernel" / "sessions" / str(session["session_id"])
    assert (workspace / "result.txt").read_text() == "42"


def test_sessions_default_root_is_the_root_configured_for_the_kernel(tmp_path: Path) -> None:
    root = tmp_path / "course-sessions"
    env = env_for(tmp_path, f"c.WasmKernel.workspace_root = {str(root)!r}\n")
    nb = notebook(tmp_path / "hw.ipynb", "print('ok')")
    assert wk(env, "run", nb, "--persist", cwd=tmp_path).returncode == 0
    (session,) = listed(env, tmp_path)
    assert (root / str(session["session_id"])).is_dir()
    assert not (tmp_path / "data" / "wasm-kernel" / "sessions").exists()
    help_text = wk(env, "sessions", "list", "--help", cwd=tmp_path).stdout
    assert "WasmKernel.workspace_root" in help_text


def test_run_without_persist_leaves_no_session_and_no_temporary_folder(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    nb = notebook(tmp_path / "once.ipynb", "open('scratch.txt', 'w').write('x')\nprint('wrote it')")
    proc = wk(env, "run", nb, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote it" in proc.stdout and "+scratch.txt" in proc.stdout
    assert listed(env, tmp_path) == []
    assert not (tmp_path / "data" / "wasm-kernel" / "sessions").exists()
    assert leftovers(tmp_path / "tmp") == []


def test_sessions_list_names_a_kernels_own_session_as_percent_session_does(tmp_path: Path) -> None:
    """A kernel without a notebook name (plain nbclient) has a session of its own:
    %session says "(none: ...)", and so does the list, not the folder it ran in (kept
    for the list: an unnamed run's session is removed when it ends, by default)."""
    env = env_for(tmp_path, "c.WasmKernel.keep_unnamed_sessions_hours = 1\n")
    folder = tmp_path / "class"
    folder.mkdir()
    nb = notebook(folder / "plain.ipynb", "%session")
    code = ("import nbformat, nbclient\n"
            f"nb = nbformat.read({str(nb)!r}, as_version=4)\n"
            f"nbclient.NotebookClient(nb, resources={{'metadata': {{'path': {str(folder)!r}}}}}).execute()\n"
            "print(''.join(o.get('text') or o.get('data', {}).get('text/plain', '') for o in nb.cells[0].outputs))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert "(none: a session for this kernel only)" in proc.stdout
    (session,) = listed(env, tmp_path)
    assert session["notebook"] is None and session["mode"] == "run"
    assert session["started_in"] == str(folder.resolve())
    table = wk(env, "sessions", "list", cwd=tmp_path).stdout
    assert "(none: one kernel's)" in table and str(folder) not in table


def test_script_run_gets_the_kernels_configured_limits_and_a_temporary_app(tmp_path: Path) -> None:
    env = env_for(tmp_path, "c.WasmKernel.cpu_time = 0.5\n")
    script = tmp_path / "spin.py"
    script.write_text("open('left.txt', 'w').write('x')\n# %%\nwhile True:\n    pass\n")
    proc = wk(env, "run", script, "--strict", cwd=tmp_path)
    assert proc.returncode == 1
    assert "0.5 s of cpu time" in proc.stderr.lower() and "+left.txt" in proc.stdout
    assert leftovers(tmp_path / "tmp") == []  # the temporary /app is gone
    assert not (tmp_path / "workspace").exists()
