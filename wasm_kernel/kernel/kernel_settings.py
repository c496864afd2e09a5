"""The kernel's configuration: every `c.WasmKernel.<trait>`, and what the kernel derives from it.

`KernelSettings` is a traitlets mixin, not a Configurable of its own: WasmKernel
inherits it, and traitlets configures a trait defined on a base class through the
subclass's section, so an operator writes `c.WasmKernel.fuel` (jupyter_config, the
kernel.json argv, %config) and never `c.KernelSettings...`, which is no section
(only Configurable subclasses are). The operator guide's reference is generated
from `KernelSettings.class_own_traits(config=True)` (docs/conf.py).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Enum, Float, HasTraits, Int, List, Unicode, default

from ..core.policy import GIB, MIB, ExecutionPolicy
from ..host.engine import DEFAULT_METERING, METERINGS
from ..host.network_policy import NetworkPolicy, parse_allow, parse_networks
from ..runtime.guest_config import guest_environment
from ..runtime.warm_image import DEFAULT_PRELOAD
from ..sessions.layout import default_workspace_root
from .kernel_limits import LIMIT_TRAITS, LIMITS, LimitError, apply_limit

if TYPE_CHECKING:
    from ..sessions.course_site import CourseRequest
    from ..sessions.pip_runner import PipSettings

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class KernelSettings(HasTraits):
    """WasmKernel's configuration (jupyter_config files, kernel.json argv, %config)."""

    # The kernel's log: WasmKernel brings it (ipykernel's Kernel is a LoggingConfigurable).
    log: logging.Logger

    metering = Enum(
        list(METERINGS), DEFAULT_METERING,
        help="What bounds a cell's work. time: CPU time (cpu_time) and the deadline; the guest runs without fuel "
             "instrumentation, about 1.4x faster on pure Python. fuel: a deterministic instruction budget (fuel), "
             "the same count on any machine, for graders that need identical budgets. Each is its own compiled "
             "module: `wasm-kernel precompile` compiles the configured one.",
    ).tag(config=True)
    fuel = Int(500_000_000_000, allow_none=True,
               help="Wasm instructions a cell may run, in fuel metering (None: no limit).").tag(config=True)
    cpu_time = Float(60.0, allow_none=True,
                     help="CPU seconds a cell may use, in time metering (None: no limit).").tag(config=True)
    memory = Int(2 * GIB, help="Guest memory cap in bytes (64 MiB - 4 GiB).").tag(config=True)
    deadline = Float(None, allow_none=True, help="Wall-clock seconds a cell may take (None: no deadline).").tag(config=True)
    stdout_max_bytes = Int(10 * MIB, allow_none=True, help="stdout kept and streamed per cell.").tag(config=True)
    stderr_max_bytes = Int(10 * MIB, allow_none=True, help="stderr kept and streamed per cell.").tag(config=True)
    display_max_bytes = Int(32 * MIB, allow_none=True, help="Rich outputs (displays, results) sent per cell.").tag(config=True)
    disk_max_bytes = Int(2 * GIB, allow_none=True, help="The session's disk quota: bytes in /app and /tmp.").tag(config=True)
    disk_max_files = Int(100_000, allow_none=True, help="The session's disk quota: files and folders in /app and /tmp.").tag(config=True)
    max_disk_bytes = Int(1 << 40, allow_none=True, help="Hard ceiling for disk_max_bytes, above any kernel's configuration.").tag(config=True)
    max_disk_files = Int(10_000_000, allow_none=True, help="Hard ceiling for disk_max_files, above any kernel's configuration.").tag(config=True)
    max_fuel = Int(5_000_000_000_000, allow_none=True, help="Hard ceiling for fuel, above any kernel's configuration (None: none).").tag(config=True)
    max_cpu_time = Float(3600.0, allow_none=True, help="Hard ceiling for cpu_time, above any kernel's configuration (None: none).").tag(config=True)
    max_memory = Int(4 * GIB, help="Hard ceiling for memory, above any kernel's configuration.").tag(config=True)
    max_deadline = Float(None, allow_none=True, help="Hard ceiling for deadline, above any kernel's configuration (None: none).").tag(config=True)
    max_output_bytes = Int(100 * MIB, allow_none=True, help="Hard ceiling for the output caps, above any kernel's configuration.").tag(config=True)
    session_scope = Enum(
        ["notebook", "run", "day"], "notebook",
        help="notebook: one workspace per notebook and user, across restarts; run: one per kernel; day: one per notebook per UTC day.",
    ).tag(config=True)
    workspace_root = Unicode(help="Folder holding every session's workspace (default: wasm-kernel/sessions in "
                             "Jupyter's data folder, which `jupyter --data-dir` shows).").tag(config=True)
    show_file_changes = Bool(True, help="Show the files each cell created, modified or deleted.").tag(config=True)
    interrupt_keeps_state = Bool(
        True, help="An interrupt raises KeyboardInterrupt in the cell and keeps what it did so far, as ipykernel "
        "does; a cell that does not stop within interrupt_grace_seconds (a long call into compiled code) is "
        "rolled back. False: every interrupt rolls the cell back, all or nothing.",
    ).tag(config=True)
    interrupt_grace_seconds = Float(
        0.5, help="How long an interrupted cell may take to stop at a safe point before it is rolled back.",
    ).tag(config=True)
    agent_key = Unicode(None, allow_none=True, help="Who owns the sessions (default: $JUPYTERHUB_USER, then the OS user).").tag(config=True)
    prune_all_users = Bool(False, help="Let %prune consider every user's sessions, not only this user's.").tag(config=True)
    registry_ttl_hours = Float(24.0 * 30, help="How long an unused notebook identity keeps its session in the registry.").tag(config=True)
    keep_unnamed_sessions_hours = Float(
        0.0, min=0.0,
        help="Hours to keep the session of a kernel that no notebook names (nbconvert, nbclient, papermill runs "
        "without JPY_SESSION_NAME) after its last cell, for inspection. 0: removed when the kernel shuts down. "
        "A kept one, or a killed kernel's, goes at the next prune once idle that long; every kernel's start runs one.",
    ).tag(config=True)
    notebook_files = Enum(
        ["read", "off"], "read",
        help="read: the notebook's folder shows read-only under /app, beneath the workspace; off: only the workspace.",
    ).tag(config=True)
    notebook_roots = List(
        Unicode(),
        help="Folders whose notebooks may show their folder read-only under /app, beside the contents root of the "
        "Jupyter Server that started the kernel (which wasm-kernel's server extension hands to every kernel it "
        "starts). A folder is shown only when it lies in one of these, reached without a link or a hidden folder on "
        "the way. A kernel started by a local program (nbclient, nbconvert, papermill, wasm-kernel run, VS Code) "
        "with none listed shows the folder its launcher names.",
    ).tag(config=True)
    notebook_files_max = Int(10_000, help="A notebook folder with more visible files than this is not shown.").tag(config=True)
    notebook_files_depth = Int(6, help="How many folders deep the notebook's folder shows under /app.").tag(config=True)
    pip_enabled = Bool(True, help="Let notebooks install pure-Python wheels into their session with %pip.").tag(config=True)
    pip_index_url = Unicode(None, allow_none=True, help="The index %pip installs from (None: pip's default, PyPI).").tag(config=True)
    pip_find_links = List(Unicode(), help="Extra wheel folders or pages for %pip (pip's --find-links).").tag(config=True)
    pip_no_index = Bool(False, help="Install with %pip only from pip_find_links, never from an index.").tag(config=True)
    pip_max_bytes = Int(200 * MIB, help="The most a session's %pip packages may take, installed.").tag(config=True)
    guest_requirements = List(Unicode(), help="The course's packages, in every kernel's guest: requirement "
                              "specifiers (e.g. 'datascience==0.18.1'), resolved once against the guest's built-in "
                              "packages into a read-only site shared by every session (docs/teaching.md).").tag(config=True)
    guest_requirements_file = Unicode("", help="A requirements file of the course's packages (names and versions, "
                                      "one per line), added to guest_requirements.").tag(config=True)
    guest_constraints = List(Unicode(), help="pip constraints for every install into the guest (name and version "
                             "range each, e.g. 'pandas<3'): they narrow what a dependency may resolve to.").tag(config=True)
    guest_overrides = List(Unicode(), help="Requirements that replace what any package asks of that name (as uv's "
                           "overrides), for a dependency over-pinned against a built-in: 'wrapt>=1.16' lets "
                           "otter-grader's wrapt<2 resolve to the guest's wrapt 2.").tag(config=True)
    warm_image = Bool(
        True, help="Start each sandbox from a warm image (IPython and preload_modules imported once, saved, and "
        "mapped copy-on-write), built once per machine and version. Off: every sandbox boots the interpreter.",
    ).tag(config=True)
    preload_modules = List(
        Unicode(), default_value=list(DEFAULT_PRELOAD),
        help="Modules the warm image imports, so that a notebook's first import of them costs nothing. "
        "They are imported, not bound: a notebook's namespace starts empty.",
    ).tag(config=True)

    shell_commands = Bool(
        True,
        help="Run `!cmd`, `x = !cmd`, %sx and %%bash/%%sh cells in the guest's confined shell: cat, ls, head, grep, "
        "cp, rm, unzip, tar... as Python on the guest's own files, never a program on the host (docs/shell.md). "
        "False: they fail with one line saying shell commands are not available.",
    ).tag(config=True)

    pass_environment = List(
        Unicode(), default_value=["NBGRADER_EXECUTION"],
        help="Names of the kernel's environment variables copied into the guest's os.environ when set (nothing else "
        "of the host's environment reaches it). nbgrader sets NBGRADER_EXECUTION for the kernels it grades with, "
        "and notebooks test it to skip slow work. Values must be printable text of up to 4,096 characters.",
    ).tag(config=True)

    keep_state = Bool(
        True,
        help="Save the interpreter (variables, imports, functions, figures, the execution count) when the kernel "
        "shuts down (Shut Down Kernel, the server stopping, culling, SIGTERM) and resume it at the notebook's next "
        "start. Restart Kernel clears it, as on ipykernel. Kernels that no notebook names (nbclient, nbconvert, "
        "nbgrader runs) never keep state, so they run exactly as on ipykernel.",
    ).tag(config=True)
    state_max_bytes = Int(
        1 * GIB, allow_none=True,
        help="The most one saved state may take on disk; the session's disk quota (disk_max_bytes, counting /app and "
        "/tmp) may allow less. A state that does not fit is not saved, and the older one is dropped.",
    ).tag(config=True)
    history_max_points = Int(
        50, min=1,
        help="How many cells back %rewind can go: the points kept per interpreter line; the oldest is dropped first.",
    ).tag(config=True)
    history_max_bytes = Int(
        1 * GIB, min=0,
        help="The most a session's points (%timeline) keep on disk, counted apart from the workspace's quota "
        "(disk_max_bytes); the oldest point is dropped first.",
    ).tag(config=True)
    state_max_age_hours = Float(
        24.0 * 14, allow_none=True, min=0.0,
        help="A saved state older than this is not resumed (None: any age).",
    ).tag(config=True)
    state_secret = Unicode(
        help="The secret that authenticates saved states (HMAC-SHA256, with a key bound to each session): at least "
        "16 characters. Default: $WASM_KERNEL_STATE_SECRET, else a random key kept in the workspace root's private "
        "folder. Hosts of a pool that move states between them must share it.",
    ).tag(config=True)
    state_portable = Bool(
        help="Save every page of the interpreter, not only what differs from this machine's warm image, so the "
        "state wakes on another machine with the same wasm-kernel (pool hosts on a shared root). Larger and a "
        "little slower. Default: $WASM_KERNEL_STATE_PORTABLE (which `wasm-kernel host --shared-root` sets).",
    ).tag(config=True)
    state_save_every = Int(
        0, min=0,
        help="Also save the state after every N cells, so that a kernel killed with -9 resumes from its last save "
        "(0: only at shutdown). Each save writes the whole state (0.05 s fresh, 0.4 s after a 50 MB DataFrame: "
        "BENCHMARKS.md) and the next cell waits for it.",
    ).tag(config=True)

    network_allow = List(
        Unicode(),
        help="Hosts a notebook may fetch from over HTTP(S) through the host (urllib, pandas.read_csv(url), requests): "
        "exact names (data.example.org), or *.example.org for the names under it, each with :PORT for another port "
        "than the scheme's. Empty (the default): no network at all. The host resolves each name and refuses "
        "non-global addresses unless network_allow_addresses lists them (docs/security.md).",
    ).tag(config=True)
    network_allow_addresses = List(
        Unicode(),
        help="Networks (CIDR) a listed name may resolve to although they are not global (an intranet data server: "
        "10.1.0.0/16). Empty: only global addresses. An address written in network_allow is allowed as it is.",
    ).tag(config=True)
    network_max_response_bytes = Int(100 * MIB, min=1, help="The most one response's body may hold.").tag(config=True)
    network_max_cell_bytes = Int(1 * GIB, min=1, help="The most a cell may fetch, all its responses together.").tag(
        config=True)
    network_max_requests = Int(100, min=1, help="The most requests one cell may make.").tag(config=True)
    network_timeout = Float(
        30.0, min=0.1,
        help="Seconds one request may take in all, from its connect to its body's last byte, however slowly the "
        "server sends (within the cell's deadline); then it fails in one line and its connection is closed.",
    ).tag(config=True)
    network_ca_file = Unicode(None, allow_none=True,
                              help="A PEM file of CAs to verify HTTPS with (default: the host's CA store).").tag(
        config=True)

    cli_run = Bool(
        False,
        help="Set by `wasm-kernel run` for the kernel it starts: a limit's line names the run's flag that raises "
        "it (--memory 4GiB) instead of %limits, and %session says that a run keeps no state.",
    ).tag(config=True)

    iopub_subscriber_wait = Float(
        1.0, min=0.0,
        help="Seconds the first request after a start or restart waits for a client to subscribe to iopub, so that "
        "\"restart and run all\" loses none of the first cell's outputs (a Jupyter server reconnects its iopub "
        "subscription after its shell socket); 0 answers at once.",
    ).tag(config=True)

    @default("state_portable")
    def _default_state_portable(self) -> bool:
        return os.environ.get("WASM_KERNEL_STATE_PORTABLE", "") not in ("", "0", "false", "False")

    @default("state_secret")
    def _default_state_secret(self) -> str:
        return os.environ.get("WASM_KERNEL_STATE_SECRET", "")

    @default("workspace_root")
    def _default_workspace_root(self) -> str:
        return str(default_workspace_root())

    LIMIT_TRAITS = LIMIT_TRAITS
    # What %config reaches: an allow-list, so a trait added later (or inherited from
    # ipykernel's Kernel) stays the operator's until it is listed here.
    NOTEBOOK_TRAITS = frozenset(LIMIT_TRAITS) | {"show_file_changes"}

    def __init__(self, **kwargs: Any) -> None:
        self._warned: set[str] = set()  # settings already said to be left out, in the log once each
        super().__init__(**kwargs)

    # --- what the kernel derives from them ------------------------------------------------

    @property
    def workspace_root_path(self) -> Path:
        # Absolute from here on (a relative setting is read against the kernel's folder):
        # pip and the guest's mounts run in folders of their own.
        return Path(os.path.abspath(self.workspace_root))

    @property
    def pip_settings(self) -> PipSettings:
        from ..sessions.pip_runner import PipSettings  # %pip's: its runner is not every start's import

        return PipSettings(self.pip_index_url, tuple(self.pip_find_links), self.pip_no_index, self.pip_max_bytes,
                           constraints=tuple(self.guest_constraints), overrides=tuple(self.guest_overrides))

    @property
    def declares_course(self) -> bool:
        return bool(self.guest_requirements or self.guest_requirements_file)

    def course_request(self) -> CourseRequest | None:
        """The course's environment the operator declared, or None; CourseError names
        an entry that is not a requirement."""
        if not self.declares_course:
            return None  # the installer's modules are not every start's imports
        from ..sessions.course_site import course_request

        return course_request(self.guest_requirements, self.guest_requirements_file, self.pip_settings)

    def startup_policy(self) -> ExecutionPolicy:
        """The operator's limits, each clamped to its hard ceiling with a warning: a
        kernel that refused to start over a config slip would help no one."""
        defaults = ExecutionPolicy()
        ceiling = replace(defaults, fuel_budget=self.max_fuel, cpu_seconds=self.max_cpu_time,
                          deadline_seconds=self.max_deadline,
                          stdout_max_bytes=self.max_output_bytes, stderr_max_bytes=self.max_output_bytes,
                          display_max_bytes=self.max_output_bytes, disk_max_bytes=self.max_disk_bytes,
                          disk_max_files=self.max_disk_files)
        try:
            ceiling = replace(ceiling, memory_bytes=self.max_memory)
        except ValueError as err:
            self.log.warning("wasm-kernel: max_memory: %s", err)
        grace = self.interrupt_grace_seconds if self.interrupt_keeps_state else None
        try:
            policy = replace(defaults, interrupt_grace_seconds=grace)
        except ValueError as err:
            self.log.warning("wasm-kernel: interrupt_grace_seconds: %s; using %s", err, defaults.interrupt_grace_seconds)
            policy = defaults
        for trait, limit in self.LIMIT_TRAITS.items():
            try:
                policy = apply_limit(policy, limit, getattr(self, trait), ceiling)
            except LimitError as err:
                policy = replace(policy, **{LIMITS[limit].field: getattr(ceiling, LIMITS[limit].field)})
                self.log.warning("wasm-kernel: %s; using %s", err, getattr(policy, LIMITS[limit].field))
        return policy

    def passed_environment(self) -> dict[str, str]:
        """pass_environment's variables that are set here and may reach the guest; the
        others are left out and said once in the log."""
        passed: dict[str, str] = {}
        for name in self.pass_environment:
            value = os.environ.get(name)
            if value is None:
                continue
            try:
                passed.update(guest_environment({name: value}))
            except ValueError as err:
                if f"environment:{name}" not in self._warned:
                    self._warned.add(f"environment:{name}")
                    self.log.warning("wasm-kernel: pass_environment: %s; left out", err)
        return passed

    def network_policy(self) -> tuple[NetworkPolicy | None, str | None]:
        """The network door's rules, or None: off (an empty list), or refused (a bad
        entry: fail closed, with the line the first cell shows)."""
        if not self.network_allow:
            return None, None
        try:
            return NetworkPolicy(
                allow=parse_allow(self.network_allow), private_ok=parse_networks(self.network_allow_addresses),
                max_response_bytes=self.network_max_response_bytes, max_bytes_per_cell=self.network_max_cell_bytes,
                max_requests_per_cell=self.network_max_requests, timeout_s=self.network_timeout,
                ca_file=self.network_ca_file or None,
            ), None
        except ValueError as err:
            self.log.warning("wasm-kernel: the network door is off: %s", err)
            return None, f"wasm-kernel: the network door is off: {err}"

    def preload(self) -> tuple[str, ...]:
        """preload_modules without the names that cannot be modules (said once, in the log)."""
        kept = tuple(name for name in self.preload_modules if _MODULE_NAME.fullmatch(name))
        if len(kept) != len(self.preload_modules) and "preload" not in self._warned:
            self._warned.add("preload")
            bad = [name for name in self.preload_modules if name not in kept]
            self.log.warning("wasm-kernel: preload_modules: %s are not module names; left out", bad)
        return kept


__all__ = ["KernelSettings"]
