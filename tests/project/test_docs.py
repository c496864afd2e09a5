"""The documentation site (docs/) builds with Sphinx, warnings as errors, and renders
the example notebooks with outputs the wasm-python kernel produced during the build.

Each build runs on a copy of docs/ (with BENCHMARKS.md and examples/ beside it, as in
the repository) in a temporary folder, so a test never writes into the working tree.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO

DOCS = REPO / "docs"
EXAMPLES = REPO / "examples"
# Printed by a cell of 01-getting-started.ipynb: in no cell's source, so only an
# execution can put it in the page. "on wasi" is the guest's sys.platform.
PRODUCED_BY_THE_KERNEL = ["Hello, sandbox! The answer is still 42.", " on wasi"]
# Sphinx's warnings ("path:line: WARNING: ..."), not the kernels' own log lines
# ("[WasmKernelApp] WARNING | ..."), which pass through the build's stderr.
SPHINX_WARNING = re.compile(r"(^|: )WARNING: ")


def _copy_tree(dest: Path) -> Path:
    """docs/, BENCHMARKS.md and examples/ as the repository has them (no build output,
    no copies a build in progress staged), under `dest`; returns the docs folder."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skipped = {n for n in names if n in ("_build", "__pycache__", ".ipynb_checkpoints")}
        if here == DOCS / "examples":
            skipped |= {n for n in names if n != "index.md"}
        return skipped

    shutil.copytree(DOCS, dest / "docs", ignore=ignore)
    shutil.copy2(REPO / "BENCHMARKS.md", dest / "BENCHMARKS.md")
    shutil.copytree(EXAMPLES, dest / "examples", ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return dest / "docs"


def _sphinx_build(docs: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", *extra, str(docs), str(out)],
        capture_output=True, text=True, env=env, timeout=540,
    )


def _env(tmp_path: Path) -> dict[str, str]:
    # The caller's Jupyter data folder, a fresh one here: the build must leave no
    # session in it (conf.py gives the kernel a temporary one of its own).
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME",)}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "user-data")
    return env


@pytest.mark.slow
def test_docs_build_without_warnings_and_render_examples_with_outputs(tmp_path: Path) -> None:
    docs = _copy_tree(tmp_path / "src")
    out = tmp_path / "html"
    env = _env(tmp_path)

    done = _sphinx_build(docs, out, env)

    assert done.returncode == 0, f"sphinx-build failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    assert not [line for line in done.stderr.splitlines() if SPHINX_WARNING.search(line)], done.stderr[-8000:]
    pages = [p.stem for p in DOCS.glob("*.md")]
    assert {"index", "user-guide", "operator-guide", "security", "architecture", "api", "benchmarks",
            "changelog", "scale-out"} <= set(pages)
    for page in pages:
        assert (out / f"{page}.html").is_file(), page
    notebooks = sorted(p.stem for p in EXAMPLES.glob("*.ipynb"))
    assert len(notebooks) == 6
    for page in ["examples/index", *(f"examples/{nb}" for nb in notebooks)]:
        assert (out / f"{page}.html").is_file(), page

    getting_started = (out / "examples/01-getting-started.html").read_text()
    source = (EXAMPLES / "01-getting-started.ipynb").read_text()
    for text in PRODUCED_BY_THE_KERNEL:
        assert text not in source
        assert text in getting_started, f"{text!r} is not in the rendered notebook"

    # The configuration reference is generated from the code: every trait is there.
    from wasm_kernel.kernel.kernel_settings import KernelSettings

    reference = (out / "operator-guide.html").read_text()
    for name in KernelSettings.class_own_traits(config=True):
        assert f"c.WasmKernel.{name}" in reference, name
    # The API reference comes from the docstrings.
    assert 'id="wasm_kernel.create_sandbox"' in (out / "api.html").read_text()

    # The build's sessions went to a temporary data folder, and its copies of the
    # notebooks were removed again.
    assert not (tmp_path / "user-data" / "wasm-kernel").exists()
    assert sorted(p.name for p in (docs / "examples").iterdir()) == ["index.md"]


@pytest.mark.slow
def test_docs_build_fails_on_a_link_to_a_missing_page(tmp_path: Path) -> None:
    docs = _copy_tree(tmp_path / "src")
    with (docs / "user-guide.md").open("a") as f:
        f.write("\nMore in [the missing page](no-such-page.md).\n")

    # The notebooks need not run to check links.
    done = _sphinx_build(docs, tmp_path / "html", _env(tmp_path), "-D", "nb_execution_mode=off")

    assert done.returncode != 0
    warnings = [line for line in done.stderr.splitlines() if SPHINX_WARNING.search(line)]
    assert len(warnings) == 1, done.stderr[-4000:]
    assert "user-guide.md" in warnings[0] and "no-such-page.md" in warnings[0]


def _docs_conf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> object:
    """docs/conf.py as Sphinx loads it. It points JUPYTER_DATA_DIR at a folder of its
    own: monkeypatch puts the variable back, _sessions_back removes the folder."""
    import importlib.util

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user-data"))
    spec = importlib.util.spec_from_file_location("wasm_kernel_docs_conf", DOCS / "conf.py")
    assert spec is not None and spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


@pytest.mark.slow
def test_the_configuration_reference_shows_real_defaults_every_help_and_no_private_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.deflist import deflist_plugin
    from mdit_py_plugins.myst_blocks import myst_block_plugin

    from wasm_kernel.kernel.kernel_settings import KernelSettings

    conf: Any = _docs_conf(monkeypatch, tmp_path)
    try:
        text = "\n".join(conf.trait_reference())
    finally:
        conf._sessions_back(None, None)
    assert "Undefined" not in text  # a container trait's default, computed
    assert "`['numpy', 'pandas', 'matplotlib.pyplot']`" in text and "pip_find_links` (`List`, default `[]`" in text
    assert "default `<jupyter data dir>/wasm-kernel/sessions`, computed at start" in text
    private = re.findall(r"(?<![\w.`])_[A-Za-z]\w*", text)  # e.g. a method the help points at
    assert not private, private
    # Rendered as MyST renders it (a line starting with % is a comment there): every
    # trait has its help, none is empty.
    html = MarkdownIt("commonmark").use(deflist_plugin).use(myst_block_plugin).render(text)
    items = re.findall(r"<dt>(.*?)</dt>\s*<dd>(.*?)</dd>", html, re.S)
    own = KernelSettings.class_own_traits(config=True)
    assert len(items) >= len(own)
    for term, definition in items:
        assert definition.strip() and "<!--" not in definition and "(no help)" not in definition, term


def _other_value(trait: Any) -> Any:
    """A valid value of `trait` that is not its default."""
    from traitlets import Bool, Enum, Float, Int, List, Unicode

    value = trait.default()
    if isinstance(trait, Bool):
        return not value
    if isinstance(trait, Enum):
        return next(v for v in trait.values if v != value)
    if isinstance(trait, (Int, Float)):
        return 7 if value is None else value + 1
    if isinstance(trait, Unicode):
        return "/elsewhere" if value != "/elsewhere" else "/other"
    if isinstance(trait, List):
        return ["json"] if value != ["json"] else []
    raise AssertionError(f"no test value for a {type(trait).__name__}")


def test_every_documented_trait_is_set_as_c_wasmkernel_in_a_jupyter_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The reference says `c.WasmKernel.<name>`; the traits are KernelSettings' own,
    which WasmKernel inherits. A real jupyter_config.py, read as the kernel reads its
    files, sets each of them on a WasmKernel through traitlets' own loading; the
    mixin's name is no section of its own."""
    from traitlets.config import Configurable

    from wasm_kernel.kernel.config_files import read_jupyter_config_files
    from wasm_kernel.kernel.kernel_settings import KernelSettings
    from wasm_kernel.kernel.sandbox_kernel import WasmKernel

    wanted = {name: _other_value(trait) for name, trait in KernelSettings.class_own_traits(config=True).items()}
    lines = [f"c.WasmKernel.{name} = {value!r}" for name, value in wanted.items()]
    lines.append("c.KernelSettings.fuel = 123")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "jupyter_config.py").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)

    config = read_jupyter_config_files()
    # Only the configuration is loaded: the kernel's own __init__ (sockets, the
    # sandbox) is not run.
    kernel = WasmKernel.__new__(WasmKernel)
    Configurable.__init__(kernel, config=config)
    assert {name: getattr(kernel, name) for name in wanted} == wanted
    assert "KernelSettings" not in WasmKernel.section_names()
