"""Runs inside the WASI guest: the first thing every interpreter of the sandbox runs.

The host's boot code (runtime/python_guest.py) imports this module and calls setup():
the door and the streams (_wasm_kernel_guest), what the sandbox refuses
(_wasm_kernel_refusals), `python` as a program (_wasm_kernel_processes) and the
libraries' sources for tracebacks (_wasm_kernel_sources). It is the one module that
puts them together, so none of them needs to import another that imports it.
"""

import _wasm_kernel_guest
import _wasm_kernel_processes
import _wasm_kernel_sources


def setup(app_dir="/app"):
    _wasm_kernel_guest.setup(app_dir)
    _wasm_kernel_processes.install()
    _wasm_kernel_sources.install()
