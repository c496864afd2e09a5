"""The `wasm-kernel` command line: one module per command, argparse only until a command runs.

- dispatch.py           the parser, its one-line errors, and dispatch
- progress.py           the first run's one-time work, each step drawn while it runs
- precompile_command.py `wasm-kernel precompile`
- run_command.py        `wasm-kernel run`: its options and exit statuses
- run_options.py        its limit flags (and the limit lines naming them), --stdin answers
- script_runner.py      `wasm-kernel run SCRIPT.py`, cell by cell in one sandbox
- notebook_runner.py    `wasm-kernel run NOTEBOOK.ipynb` through nbclient
- terminal_printer.py   colours, lines updated in place, the summary line
- terminal_text.py      untrusted text made safe for the terminal
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
