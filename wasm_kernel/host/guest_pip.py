"""pip on the host, resolving for the guest: `python -m wasm_kernel.host.guest_pip ARGS`
is `python -m pip ARGS` with environment markers read as the guest reads them.

pip's `--platform`, `--python-version` and `--abi` choose wheels for another
interpreter, but pip still evaluates a package's markers against the interpreter it
runs on. otter-grader asks for `nbconvert[webpdf]; sys_platform != "wasi"`, which
the host's Linux would install (and fail on playwright, which is compiled), while a
package may need something only on WASI. The guest's values (measured in the guest,
and compared with it by tests/runtime/test_guest_markers.py) replace pip's for every marker
it evaluates: its vendored `packaging` reads them from one function.

The operator's overrides (WasmKernel.guest_overrides, handed over in
OVERRIDES_ENV) replace what any package says about a name, as uv's
override-dependencies do: otter-grader pins `wrapt<2`, the guest has wrapt 2.5.1
built in and otter runs on it, so `wrapt>=1.16` given as an override lets the
resolution through, while pip itself still checks that the built-in satisfies the
override. A constraint can only narrow a range, never widen one. pip reads a
distribution's Requires-Dist in one method of its metadata backends; each is
wrapped, and a pip whose backends lack it is refused (fail closed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from .artifacts import guest_artifacts

OVERRIDES_ENV = "WASM_KERNEL_GUEST_OVERRIDES"  # one requirement per line: a name and a version range


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
    overrides = [line for line in os.environ.get(OVERRIDES_ENV, "").splitlines() if line.strip()]
    if overrides and not _apply_overrides(overrides):
        print("ERROR: this pip's metadata backends cannot be given guest_overrides; install another pip", file=sys.stderr)
        return 2
    from pip._internal.cli.main import main as pip_main

    return int(pip_main(argv) or 0)


def _apply_overrides(lines: list[str]) -> bool:
    """Wrap each of pip's metadata backends so that a requirement on an overridden
    name is the override's (keeping its marker). False if there was none to wrap."""
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

    overrides = {}
    for line in lines:
        req = Requirement(line)
        if req.url or req.marker is not None:
            raise SystemExit(f"ERROR: the override {line!r} is not a name with a version range")
        overrides[canonicalize_name(req.name)] = req

    def replaced(found: Iterable[Any]) -> Iterator[Any]:
        for req in found:
            override = overrides.get(canonicalize_name(req.name))
            if override is None:
                yield req
                continue
            new = Requirement(str(override))
            new.extras, new.marker = set(req.extras), req.marker
            yield new

    wrapped = 0
    for module in ("pip._internal.metadata.importlib._dists", "pip._internal.metadata.pkg_resources"):
        try:
            cls = __import__(module, fromlist=["Distribution"]).Distribution
        except ImportError:  # a backend this Python or pip does not have
            continue
        original = cls.__dict__.get("iter_dependencies")
        if original is None:
            continue
        cls.iter_dependencies = lambda self, extras=(), _original=original: replaced(_original(self, extras))
        wrapped += 1
    return wrapped > 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
