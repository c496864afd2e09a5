"""The Jupyter kernelspec: kernel.json, the logos, `wasm-kernel install|uninstall`,
and the wheel that ships them."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from wasm_kernel import kernelspec
from wasm_kernel.cli import main

from support.paths import REPO

SPEC_DIR = REPO / "kernelspec"
NAME = "wasm-python"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_kernel_json_has_the_required_fields() -> None:
    spec = json.loads((SPEC_DIR / "kernel.json").read_text())
    assert spec == {
        "argv": ["python", "-m", "wasm_kernel", "-f", "{connection_file}"],
        "display_name": "Python (WebAssembly sandbox)",
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {"debugger": True},
    }


def test_logos_are_a_32_and_a_64_pixel_png_and_an_svg() -> None:
    assert _png_size((SPEC_DIR / "logo-32x32.png").read_bytes()) == (32, 32)
    assert _png_size((SPEC_DIR / "logo-64x64.png").read_bytes()) == (64, 64)
    root = ET.fromstring((SPEC_DIR / "logo-svg.svg").read_text())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.slow
def test_committed_logos_are_what_make_logos_draws() -> None:
    done = subprocess.run([sys.executable, str(SPEC_DIR / "make_logos.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_checkout_reads_the_top_level_kernelspec_folder() -> None:
    assert kernelspec.spec_source_dir() == SPEC_DIR


def test_jupyter_client_runs_a_leading_python_with_its_own_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the shipped kernel.json can say "python": KernelManager swaps it for sys.executable."""
    from jupyter_client.manager import KernelManager

    target = tmp_path / "kernels" / NAME
    target.mkdir(parents=True)
    for name in kernelspec.SPEC_FILES:
        (target / name).write_bytes((SPEC_DIR / name).read_bytes())
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    km = KernelManager(kernel_name=NAME)
    km.connection_file = str(tmp_path / "conn.json")
    km._launch_args = {}
    cmd = km.format_kernel_cmd()
    assert cmd == [sys.executable, "-m", "wasm_kernel", "-f", os.path.realpath(tmp_path / "conn.json")]


def test_install_prefix_writes_the_spec_with_this_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    assert main(["install", "--prefix", str(tmp_path)]) == 0
    dest = tmp_path / "share" / "jupyter" / "kernels" / NAME
    assert str(dest) in capsys.readouterr().out
    spec = json.loads((dest / "kernel.json").read_text())
    assert spec["argv"] == [os.path.abspath(sys.executable), "-m", "wasm_kernel", "-f", "{connection_file}"]
    assert os.path.isabs(spec["argv"][0])
    assert spec["display_name"] == "Python (WebAssembly sandbox)"
    assert spec["interrupt_mode"] == "message" and spec["metadata"] == {"debugger": True}
    for logo in kernelspec.LOGOS:
        assert (dest / logo).read_bytes() == (SPEC_DIR / logo).read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == sorted(kernelspec.SPEC_FILES)
    assert dest.stat().st_mode & 0o755 == 0o755  # readable by everyone, not the temp dir's 0700

    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    found = KernelSpecManager().get_kernel_spec(NAME)
    assert Path(found.resource_dir) == dest
    assert found.argv[0] == os.path.abspath(sys.executable)
    assert found.interrupt_mode == "message"
    assert KernelSpecManager().find_kernel_specs()[NAME] == str(dest)


def test_install_again_replaces_and_takes_name_and_display_name(tmp_path: Path) -> None:
    assert main(["install", "--prefix", str(tmp_path)]) == 0
    assert main(["install", "--prefix", str(tmp_path), "--display-name", "Sandboxed"]) == 0
    spec = json.loads((tmp_path / "share/jupyter/kernels" / NAME / "kernel.json").read_text())
    assert spec["display_name"] == "Sandboxed"
    assert main(["install", "--prefix", str(tmp_path), "--name", "wasm-2"]) == 0
    assert (tmp_path / "share/jupyter/kernels/wasm-2/kernel.json").is_file()


def test_install_defaults_to_the_user_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert main(["install"]) == 0
    assert (tmp_path / "data" / "kernels" / NAME / "kernel.json").is_file()
    assert main(["uninstall", "--user"]) == 0
    assert not (tmp_path / "data" / "kernels" / NAME).exists()


def test_sys_prefix_is_this_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert main(["install", "--sys-prefix"]) == 0
    assert (tmp_path / "share/jupyter/kernels" / NAME / "kernel.json").is_file()


@pytest.mark.parametrize("argv", [
    ["install", "--name", "../escape"],
    ["install", "--name", "has space"],
    ["install", "--prefix", "/dev/null/below-a-file"],
    ["uninstall", "--prefix", "/nonexistent-wasm-kernel-prefix"],
])
def test_errors_are_one_line_and_exit_1(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"wasm-kernel {argv[0]}: error: ")
    assert err.count("\n") == 1, err


def test_locations_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["install", "--user", "--prefix", "/tmp"])
    assert stop.value.code == 2


def test_uninstall_leaves_a_folder_without_kernel_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "share/jupyter/kernels" / NAME
    other.mkdir(parents=True)
    (other / "notes.txt").write_text("not a kernelspec")
    assert main(["uninstall", "--prefix", str(tmp_path)]) == 1
    assert (other / "notes.txt").is_file()


def test_uninstall_does_not_follow_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "kernel.json").write_text("{}")
    kernels = tmp_path / "share/jupyter/kernels"
    kernels.mkdir(parents=True)
    (kernels / NAME).symlink_to(real)
    assert main(["uninstall", "--prefix", str(tmp_path)]) == 1
    assert (real / "kernel.json").is_file()


@pytest.mark.slow
def test_the_wheel_ships_the_spec_as_data_files_and_package_data(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("wasm_kernel-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for folder in ("wasm_kernel-0.1.0.data/data/share/jupyter/kernels/wasm-python", "wasm_kernel/_kernelspec"):
            for name in kernelspec.SPEC_FILES:
                assert zf.read(f"{folder}/{name}") == (SPEC_DIR / name).read_bytes()
    assert not any(n.endswith("make_logos.py") for n in names)
