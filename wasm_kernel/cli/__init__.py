"""The `wasm-kernel` command line: one module per command, argparse only until a command runs.

- dispatch.py           the parser, its one-line errors, and dispatch
- progress.py           progress bars for the first compile, IPython's staging and the warm image
- precompile_command.py `wasm-kernel precompile`
- run_command.py        `wasm-kernel run` (a script cell by cell; notebooks go to notebook_runner.py)
- notebook_runner.py    `wasm-kernel run NOTEBOOK.ipynb` through nbclient
- sessions_command.py   `wasm-kernel sessions list|show|prune|rm`
- kernelspec_commands.py `wasm-kernel install|uninstall`
- doctor_command.py     `wasm-kernel doctor`
- cluster_commands.py   `wasm-kernel host|sandbox-manager|router`
- kernel_config.py      the kernel's own configuration, for the commands' defaults
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from .dispatch import main as run

    return run(argv)


__all__ = ["main"]
