"""Sphinx configuration for the wasm-kernel documentation site.

Build it with:

    .venv/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

The pages are MyST Markdown (they read on GitHub as well). The example notebooks in
../examples are rendered with their outputs: myst-nb executes them during the build
with their own kernel, wasm-python. They are copied into the build (see
_stage_examples) rather than kept twice in the repository, and the kernel keeps its
sessions in a temporary Jupyter data folder (see _sessions_in_a_temp_folder), never
in the user's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
EXAMPLES = REPO / "examples"
# Where the build finds the example notebooks: a folder of the source tree that only
# the build fills (from ../examples) and empties again; its index.md is committed.
STAGED_EXAMPLES = DOCS / "examples"
# What a notebook in examples/ reads beside itself (06-data-folder.ipynb), staged too.
EXAMPLE_EXTRAS = ("data", "survey_tools.py")

# -- Project -------------------------------------------------------------------

project = "wasm-kernel"
author = "the wasm-kernel developers"
copyright = "the wasm-kernel developers"
release = version = "0.1.0"

extensions = [
    "myst_nb",  # Markdown pages (it brings myst_parser) and executed notebooks
    "sphinx.ext.autodoc",
    "sphinxcontrib.mermaid",
]

exclude_patterns = ["_build", "examples/data", "**/.ipynb_checkpoints"]
suppress_warnings: list[str] = []  # keep empty: every warning fails the -W build

# -- MyST ----------------------------------------------------------------------

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # [x](page.md#a-heading) links, as on GitHub
# A fenced ```mermaid block is the diagram (GitHub draws the same block).
myst_fence_as_directive = ["mermaid"]

# -- Notebooks (myst-nb) ---------------------------------------------------------

# Always run the notebooks: the pages show what this kernel does now.
nb_execution_mode = "force"
nb_execution_timeout = 300  # seconds per cell: a first start may compile the guest
# Cells tagged raises-exception may fail (nbclient lets them); any other error fails the build.
nb_execution_allow_errors = False
nb_execution_raise_on_error = True
nb_execution_show_tb = True

# The kernel's per-cell file-change table comes as its own MIME type (drawn by the
# JupyterLab extension) beside text/html and text/plain. myst-nb renders every MIME
# type of a bundle before it picks one, and warns on a type it has no renderer for; a
# MIME render plugin is its way to take one on. Plugins register through an entry
# point, which this repository's package does not define for its docs, so the plugin
# is added to the list myst-nb loads. It renders nothing: the bundle's HTML table,
# from the same kernel, is what the page shows.
FILE_CHANGES_MIME = "application/vnd.wasm-kernel.file-changes+json"
nb_mime_priority_overrides = [("*", FILE_CHANGES_MIME, None)]


class FileChangesMimePlugin:
    """myst-nb's MimeRenderPlugin protocol, for the file-change MIME type."""

    mime_priority_overrides = [("*", FILE_CHANGES_MIME, None)]

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> list[nodes.Element] | None:
        return [] if data.mime_type == FILE_CHANGES_MIME else None


def _register_mime_plugin() -> None:
    import myst_nb.core.render as nb_render

    entry_point_plugins = nb_render.load_mime_renders
    if getattr(entry_point_plugins, "wasm_kernel_docs", False):
        return  # conf.py read again in the same process (a second build)

    def load_mime_renders() -> list[Any]:
        return [*entry_point_plugins(), FileChangesMimePlugin]

    load_mime_renders.wasm_kernel_docs = True  # type: ignore[attr-defined]
    nb_render.load_mime_renders = load_mime_renders


_register_mime_plugin()

# -- autodoc -------------------------------------------------------------------

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

# -- HTML ----------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = "wasm-kernel"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_sidebars = {"changelog": [], "benchmarks": []}


# -- The example notebooks, staged from ../examples --------------------------------

def _staged_paths() -> list[Path]:
    notebooks = [STAGED_EXAMPLES / p.name for p in sorted(EXAMPLES.glob("*.ipynb"))]
    return notebooks + [STAGED_EXAMPLES / name for name in EXAMPLE_EXTRAS]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _stage_examples(app: Any) -> None:
    """Copy examples/*.ipynb and what they read into docs/examples/ for this build.

    copy2 keeps the modification times, so an unchanged notebook is not re-read by
    an incremental build. The copies are removed when the build finishes
    (_unstage_examples) and are git-ignored meanwhile: the one committed copy of
    each notebook stays in examples/."""
    for path in _staged_paths():
        _remove(path)
    for notebook in sorted(EXAMPLES.glob("*.ipynb")):
        shutil.copy2(notebook, STAGED_EXAMPLES / notebook.name)
    for name in EXAMPLE_EXTRAS:
        source = EXAMPLES / name
        if source.is_dir():
            shutil.copytree(source, STAGED_EXAMPLES / name, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        else:
            shutil.copy2(source, STAGED_EXAMPLES / name)


def _unstage_examples(app: Any, exception: BaseException | None) -> None:
    for path in _staged_paths():
        _remove(path)


# -- The kernel's sessions, in a temporary Jupyter data folder ----------------------

# WasmKernel.workspace_root defaults to <jupyter_data_dir()>/wasm-kernel/sessions, and
# the kernel inherits this process's environment: pointing JUPYTER_DATA_DIR at a
# temporary folder keeps the build's sessions out of the user's. Kernel specs are
# still found in the environment's share/jupyter/kernels (jupyter_path() lists the
# data dir first, then sys.prefix's). The compile cache (WASM_KERNEL_CACHE_DIR or
# the user cache dir) is shared on purpose: it is what makes a start fast.
_previous_data_dir = os.environ.get("JUPYTER_DATA_DIR")
_build_data_dir = tempfile.mkdtemp(prefix="wasm-kernel-docs-")
os.environ["JUPYTER_DATA_DIR"] = _build_data_dir


def _sessions_back(app: Any, exception: BaseException | None) -> None:
    if _previous_data_dir is None:
        os.environ.pop("JUPYTER_DATA_DIR", None)
    else:
        os.environ["JUPYTER_DATA_DIR"] = _previous_data_dir
    shutil.rmtree(_build_data_dir, ignore_errors=True)


# -- The configuration reference, generated from WasmKernel's traits ----------------

# A default computed at start depends on the machine (the user's Jupyter data folder):
# it is computed here with these variables standing for what they hold, so the page
# shows the rule rather than the build machine's paths.
# Absolute, as the kernel makes a relative data folder absolute; shown without the slash.
_DYNAMIC_PLACEHOLDERS = {"JUPYTER_DATA_DIR": "/<jupyter data dir>"}


def _default_value(name: str, trait: Any, cls: Any) -> tuple[Any, bool]:
    """(the trait's default, whether it is computed at start). A container trait's
    default_value is traitlets' Undefined: default() makes the real one."""
    handler = getattr(cls, "_trait_default_generators", {}).get(name)
    if handler is None:
        return trait.default(), False
    saved = {key: os.environ.get(key) for key in _DYNAMIC_PLACEHOLDERS}
    os.environ.update(_DYNAMIC_PLACEHOLDERS)
    try:
        value = getattr(handler, "func", handler)(None)
        for placeholder in _DYNAMIC_PLACEHOLDERS.values():
            value = value.replace(placeholder, placeholder.lstrip("/")) if isinstance(value, str) else value
        return value, True
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _fmt_default(name: str, trait: Any, cls: Any) -> str:
    value, computed = _default_value(name, trait, cls)
    if computed:
        return f"`{value}`, computed at start (below)"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 20 and value % (1 << 20) == 0:
        units = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")]
        size = next(f"{value // unit} {label}" for unit, label in units if value % unit == 0)
        return f"`{value}` ({size})" if name.endswith("bytes") or "memory" in name else f"`{value:_}`"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"`{value:_}`"
    return f"`{value!r}`"


def _one_line(text: str) -> str:
    """A help text as one Markdown line. A line that starts with % is a comment in
    MyST, so a leading % (`%pip ...`) is escaped: the help must show, not vanish."""
    line = " ".join((text or "").split())
    return "\\" + line if line.startswith("%") else line


def _notebook_may(name: str, cls: Any) -> str:
    from wasm_kernel.kernel.kernel_limits import LIMIT_TRAITS

    if name in LIMIT_TRAITS:
        return f"lower only: `%limits {LIMIT_TRAITS[name]}=...`"
    if name in getattr(cls, "NOTEBOOK_TRAITS", ()):
        return f"yes: `%config WasmKernel.{name} = ...`"
    return "no"


def _entry(name: str, trait: Any, cls: Any, notebook: str | None) -> list[str]:
    """One trait as a MyST definition-list item: name, type, default (and what a
    notebook may do with it), then its help."""
    facts = f"`{type(trait).__name__}`, default {_fmt_default(name, trait, cls)}"
    if notebook is not None:
        facts += f"; notebook: {notebook}"
    return [f"`c.WasmKernel.{name}` ({facts})", f": {_one_line(trait.help) or '(no help)'}", ""]


def trait_reference() -> list[str]:
    """The configuration reference as MyST lines: the traits wasm-kernel defines,
    then those it inherits from ipykernel's Kernel (underscored ones left out: they
    are internals, not configuration). tests/project/test_docs.py checks what it makes."""
    from wasm_kernel.kernel.kernel_settings import KernelSettings
    from wasm_kernel.kernel.sandbox_kernel import WasmKernel

    # Ours are KernelSettings' own (WasmKernel inherits them, configured as
    # c.WasmKernel.<name>); every other configurable trait comes from ipykernel.
    traits = WasmKernel.class_traits(config=True)
    own = KernelSettings.class_own_traits(config=True)
    text: list[str] = []
    for name, trait in own.items():
        text += _entry(name, trait, KernelSettings, _notebook_may(name, KernelSettings))
    text += ["Inherited from ipykernel's `Kernel`, and configurable the same way:", ""]
    for name, trait in sorted(traits.items()):
        if name not in own and not name.startswith("_"):
            text += _entry(name, trait, WasmKernel, None)
    return text


class WasmKernelTraits(SphinxDirective):
    """```{wasm-kernel-traits}``` : every configurable trait of WasmKernel, read from the code."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        import wasm_kernel.kernel.kernel_settings as settings
        import wasm_kernel.kernel.sandbox_kernel as kernel

        for module in (settings, kernel):
            self.env.note_dependency(module.__file__)
        container = nodes.container(classes=["wasm-kernel-traits"])
        self.state.nested_parse(StringList(trait_reference(), source="wasm-kernel-traits"), self.content_offset,
                                container)
        return [container]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("wasm-kernel-traits", WasmKernelTraits)
    app.connect("builder-inited", _stage_examples)
    app.connect("build-finished", _unstage_examples)
    app.connect("build-finished", _sessions_back)
    return {"parallel_read_safe": True}
