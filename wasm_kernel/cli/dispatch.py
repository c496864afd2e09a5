"""`wasm-kernel`: the parser and dispatch. Each command lives in its own module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

DESCRIPTION = "A Jupyter kernel that runs every cell in a WebAssembly sandbox."
EXAMPLES = """\
examples:
  wasm-kernel run examples/01-getting-started.ipynb    run a notebook in the sandbox, print its outputs
  wasm-kernel doctor                                   check the installation, say what to fix
  wasm-kernel precompile                               do the one-time compile now (50-130 s on 2 cores)
  wasm-kernel sessions list                            the sessions the kernel keeps
  wasm-kernel grade autograder.zip submissions/        grade otter-grader submissions, without Docker
  jupyter lab                                          then pick "Python (WebAssembly sandbox)"

`wasm-kernel COMMAND --help` shows each command's options and examples.
"""
# The extras a command needs, and the modules that tell they are missing.
_EXTRA_MODULES = {"otter": "otter", "redis": "cluster", "prometheus_client": "cluster", "jupyter_server": "cluster", "tornado": "cluster"}


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions wrapped to the terminal; texts laid out by hand (the examples) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class CommandLineParser(argparse.ArgumentParser):
    """argparse, with usage errors on one line that say where help is (subcommands inherit it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import (cluster_commands, doctor_command, grade_command, kernelspec_commands, precompile_command,
                   run_command, sessions_command)

    from .. import __version__

    parser = CommandLineParser(prog="wasm-kernel", description=DESCRIPTION, epilog=EXAMPLES,
                               formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"wasm-kernel {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (run_command, grade_command, doctor_command, precompile_command, sessions_command,
                   kernelspec_commands):
        module.add_parser(sub)
    cluster_commands.add_cluster_parsers(sub)
    for child in _all_parsers(parser):
        child.formatter_class = HelpFormatter
    return parser


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += [child, *_all_parsers(child)]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("wasm-kernel: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `wasm-kernel sessions list | head`: the reader has all it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ModuleNotFoundError as err:
        extra = _EXTRA_MODULES.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"wasm-kernel {args.command}: error: it needs the {extra} extra: pip install 'wasm-kernel[{extra}]'",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
