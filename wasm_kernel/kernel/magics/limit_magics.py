"""%limits and %config: the notebook's view of the kernel's configuration.

A notebook may lower a limit, or set it back, never past the operator's value.
%config reaches an allow-list (the limits and the display switches); every other
trait, the operator's and those inherited from ipykernel, is neither shown nor set,
so where data lives and who runs the kernel stay on the host.
"""

from __future__ import annotations

import ast
from typing import Any

from ..kernel_limits import LIMIT_TRAITS, LIMITS, LimitError, apply_limit, describe_limits, limits_in_use
from ..kernel_settings import KernelSettings
from ..limit_values import format_size
from ..session_protocol import SessionView
from .registry import MAGICS, MagicError, MagicOutput
from .tables import table_bundle


def _limits_table(session: SessionView) -> dict[str, str]:
    sandbox = session.sandbox
    used = sandbox.disk_usage() if sandbox is not None else None
    rows = describe_limits(session.policy, session.operator_limits, used, session.settings.metering)
    # %rewind's points: the operator's bounds, counted apart from the disk quota.
    settings = session.settings
    kept = sandbox.timeline(wait=False) if sandbox is not None else []  # never waits on the guest
    rows += [("points", f"{settings.history_max_points} ({len(kept)} kept)", "the operator's (c.WasmKernel.history_max_points)"),
             ("points disk", f"{format_size(settings.history_max_bytes)} "
              f"({format_size(sandbox.history_bytes if sandbox is not None else 0)} used)",
              "the operator's (c.WasmKernel.history_max_bytes)")]
    return table_bundle(["limit", "value", "at most"], rows)


@MAGICS.add("limits", "line", "%limits [NAME=VALUE ...]", f"""Show the per-cell limits, or change some: %limits cpu=30s memory=256MB deadline=30s
Names: {", ".join(LIMITS)} (cpu in time metering, the default; fuel in fuel metering: the first row says which). Sizes take B/KB/MB/GB/KiB/MiB/GiB, durations ms/s/m/h, counts k/M/G;
"none" removes a limit. Limits go downward only: lower one, or set it back, never past the operator's value.""")
def limits_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    words = line.split()
    if not words:
        return MagicOutput(bundles=[_limits_table(session)])
    trial = session.policy
    for word in words:  # all or nothing: every change is checked before any applies
        name, sep, value = word.partition("=")
        if not sep or not value:
            raise MagicError(f"%limits: expected NAME=VALUE, got {word!r}; for example %limits memory=256MB")
        metering = session.settings.metering
        if name in LIMITS and name not in limits_in_use(metering):
            other = "cpu" if name == "fuel" else "fuel"
            raise MagicError(f"%limits: {name} is not counted in this kernel (its metering is {metering}); "
                             f"its limit on work is {other}")
        try:
            trial = apply_limit(trial, name, value, session.operator_limits)
        except LimitError as err:
            raise MagicError(str(err)) from None
    session.set_policy(trial)
    return MagicOutput(bundles=[_limits_table(session)])


def _configurable(session: SessionView) -> dict[str, Any]:
    # The kernel's own settings only (KernelSettings), and of those the allow-list:
    # none of ipykernel's traits, whatever NOTEBOOK_TRAITS says.
    traits = KernelSettings.class_own_traits(config=True)
    return {name: traits[name] for name in sorted(session.settings.NOTEBOOK_TRAITS) if name in traits}


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text.strip().strip("'\"")  # a bare word such as 256MB


def _is_kernel_config(args: str) -> bool:
    # `%config InlineBackend.figure_format = "svg"` and the like belong to IPython
    # in the guest; the host answers for the kernel's own class and the bare %config.
    return args == "" or args.startswith("WasmKernel")


@MAGICS.add("config", "line", "%config [WasmKernel[.TRAIT = VALUE]]", """Show or change the kernel's configuration, as IPython's %config does.
%config WasmKernel lists what a notebook may set: the limits (downward only) and show_file_changes;
%config WasmKernel.fuel = 1e9 sets one. Every other trait is the operator's.
Classes inside the sandbox (InlineBackend, ...) are configured by IPython there:
%config InlineBackend.figure_format = 'svg'.""", claims=_is_kernel_config)
def config_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    text = line.strip()
    cls = type(session.settings).__name__  # WasmKernel, the section the operator configures
    if text in ("", cls):
        rows = [(f"{cls}.{name}", repr(_current(session, name)), trait.help.split("\n")[0])
                for name, trait in sorted(_configurable(session).items())]
        return MagicOutput(bundles=[table_bundle(["trait", "value", "help"], rows)])
    target, sep, value = text.partition("=")
    owner, dot, name = target.strip().partition(".")
    if not dot or owner != cls:
        raise MagicError(f"%config: only {cls} is configurable here; write %config {cls}.TRAIT = VALUE")
    if name not in _configurable(session):
        # Whether the trait exists or not, the answer is the same: an operator's
        # trait is not the notebook's to read either.
        raise MagicError(f"%config: {cls}.{name} is not configurable from a notebook (the operator sets "
                         f"the rest in jupyter_config); a notebook may set {', '.join(_configurable(session))}")
    if not sep:
        return MagicOutput(text=f"{cls}.{name} = {_current(session, name)!r}\n")
    parsed = _literal(value.strip())
    if name in LIMIT_TRAITS:
        try:
            session.set_limit(LIMIT_TRAITS[name], parsed)
        except LimitError as err:
            raise MagicError(str(err)) from None
    else:
        try:
            setattr(session.settings, name, parsed)
        except Exception as err:  # traitlets' TraitError: one line of it
            raise MagicError(f"%config: {cls}.{name}: {str(err).splitlines()[0]}") from None
    return MagicOutput(text=f"{cls}.{name} = {_current(session, name)!r}\n")


def _current(session: SessionView, name: str) -> Any:
    if name in LIMIT_TRAITS:
        return getattr(session.policy, LIMITS[LIMIT_TRAITS[name]].field)
    return getattr(session.settings, name)
