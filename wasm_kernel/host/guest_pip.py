"""pip on the host, resolving for the guest: `python -m wasm_kernel.host.guest_pip ARGS`
is `python -m pip ARGS` with environment markers read as the guest reads them.

pip's `--platform`, `--python-version` and `--abi` choose wheels for another
interpreter, but pip still evaluates a package's markers against the interpreter it
runs on. otter-grader asks for `nbconvert[webpdf]; sys_platform != "wasi"`, which
the host's Linux would install (and fail on playwright, which is compiled), while a
package may need something only on WASI. The guest's values (measured in the guest,
and compared with it by tests/runtime/test_guest_markers.py) replace pip's for every marker
it evaluates: its vendored `packaging` reads them from one function.
"""

from __future__ import annotations

import sys

from .artifacts import guest_artifacts


def guest_markers() -> dict[str, str]:
    """The guest's `packaging.markers.default_environment()`."""
    full = guest_artifacts().python_version
    major, minor = full.split(".")[:2]
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": "wasm32",
        "platform_release": "0.0.0",
        "platform_system": "wasi",
        "platform_version": "0.0.0",
        "python_full_version": full,
        "platform_python_implementation": "CPython",
        "python_version": f"{major}.{minor}",
        "sys_platform": "wasi",
    }


def main(argv: list[str]) -> int:
    from pip._vendor.packaging import markers  # pip's own copy, which its resolver reads

    if not callable(getattr(markers, "default_environment", None)):
        # Fail closed: resolving with the host's markers installs what the guest cannot run.
        print("ERROR: this pip cannot be told the guest's environment markers; install pip>=21", file=sys.stderr)
        return 2
    values = guest_markers()
    markers.default_environment = lambda: dict(values)  # type: ignore[assignment]
    from pip._internal.cli.main import main as pip_main

    return int(pip_main(argv) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
