"""What a guest is configured with and what a turn gives back: the guest's fixed
layout and environment, GuestOptions (what a guest is made of), CellOptions (how one
cell runs), TurnLimits and TurnOutcome, the guest's errors, and what provisioning
hands a guest (GuestEngine, SiteMount, ImageSource). Shared by the runtime's modules
and the core."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import wasmtime

from ..host.memory_image import MemoryImage
from .guest_messages import HistoryRequest, Output, QueryResult
from .notebook_overlay import NotebookFolder
from .warm_image import DEFAULT_PRELOAD

GUEST_APP = "/app"
GUEST_TMP = "/tmp"
GUEST_SUPPORT = "/opt/wasm-kernel"
# The notebook's folder: a preopen libc never sees (notebook_overlay.py), so this
# name is never a path the guest can use; its files appear under /app.
GUEST_NOTEBOOK = "/.wasm-kernel-notebook"
GUEST_LIB_DIR = Path(__file__).parent / "guest_lib"
# The guest's environment: the same for every sandbox (a warm image holds os.environ).
GUEST_ENV = (
    ("HOME", GUEST_TMP),
    ("TMPDIR", GUEST_TMP),
    ("MPLCONFIGDIR", f"{GUEST_TMP}/.matplotlib"),
    ("MPLBACKEND", "module://matplotlib_inline.backend_inline"),
    ("PYTHONTZPATH", ""),
    ("PYTHONIOENCODING", "utf-8"),
)

@dataclass(frozen=True)
class GuestEngine:
    """The compiled guest a PythonGuest runs: the optimized module of its metering
    (host/engine.py), or on a machine's first start the baseline one, until the
    optimized one is compiled (see background_warmup.choose_engine)."""

    module: wasmtime.Module
    engine: wasmtime.Engine
    optimized: bool
    metering: str  # "time" or "fuel": what the optimized engine counts, now or once moved to it


@dataclass(frozen=True)
class SiteMount:
    """A packages folder on the guest's sys.path. With a key, it is the staged IPython
    site, read-only: the uniform layout every shell guest shares, so a warm image made
    in one serves all (its libc holds the preopens' table)."""

    host: Path
    guest_path: str
    writable: bool = False
    key: str | None = None


# The warm image a guest boots from, given whether it runs the optimized module; None
# to boot plain. May raise warm_image.ImageBusy (only slower this once) or
# ImageUnavailable (said in the guest's boot_notice).
ImageSource = Callable[[bool], MemoryImage | None]
TrapReason = Literal["out_of_fuel", "cpu_time", "deadline", "interrupted", "memory", "stack_overflow", "crash"]
OnDisplay = Callable[[Output], None]
OnInput = Callable[[str, bool], str]
# Answers the shell's history reads: (session, line, input) or (session, line, (input, output)) rows.
HistoryProvider = Callable[[HistoryRequest], list[tuple[int, int, Any]]]


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
ENV_VALUE_MAX = 4096


def guest_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """`extra` as the guest may receive it: names that are variable names and not the
    guest's own (HOME, TMPDIR... stay ours), values of printable text up to
    ENV_VALUE_MAX characters. Raises ValueError naming the first that is not."""
    own = {name for name, _ in GUEST_ENV}
    for name, value in extra.items():
        if not _ENV_NAME.fullmatch(name) or name in own:
            raise ValueError(f"{name!r} cannot be passed to the guest: not a variable name, or one the sandbox sets")
        if len(value) > ENV_VALUE_MAX or not value.isprintable():
            raise ValueError(f"the value of {name} cannot be passed to the guest: over {ENV_VALUE_MAX} characters "
                             "or not printable text")
    return dict(extra)


@dataclass(frozen=True)
class PointLimits:
    """The operator's bounds on a session's points (history_max_points and
    history_max_bytes), and the private folder their deltas go to."""

    folder: Path
    max_points: int = 50
    max_bytes: int = 1 << 30


@dataclass(frozen=True)
class GuestOptions:
    """What a guest is made of beyond its workspace: its shell's view of the host."""

    # The host magics (name -> "line" | "cell" | "both"), for %lsmagic and for the
    # error a guest-side use of one gets; the guest can only name them, never run them.
    host_magics: Mapping[str, str] = field(default_factory=dict)
    history: HistoryProvider | None = None
    session_number: int = 0  # the history store's number for this kernel session
    # A folder shown read-only under /app beneath the workspace (the notebook's own).
    notebook: NotebookFolder | None = None
    # The session's %pip packages: read-only, on sys.path after the staged site.
    packages: Path | None = None
    # Start from a warm image (warm_image.py) holding the shell and these modules.
    warm_image: bool = True
    preload: tuple[str, ...] = DEFAULT_PRELOAD
    # Variables added to the guest's os.environ at start (after a warm image's restore,
    # which holds GUEST_ENV): what the operator passes through, e.g. nbgrader's
    # NBGRADER_EXECUTION. Checked by guest_environment().
    environment: Mapping[str, str] = field(default_factory=dict)
    # `!cmd`, %sx and %%bash run in the guest's confined shell (guest_lib/_wasm_kernel_sh);
    # False: they refuse in one line, as before there was one.
    shell_commands: bool = True
    # Where the session's interpreter state is saved at shutdown (hibernation.py's
    # StateKeeping; None: no state is kept), and the verified state this start wakes
    # (hibernation.load_saved_state; the guest closes it).
    keep_state: Any = None
    resume: Any = None
    # The network door's rules (host/network_policy.NetworkPolicy); None or an empty list:
    # the guest has no network at all, as before the door.
    network: Any = None
    # "time" (no fuel: CPU time and the deadline bound a cell) or "fuel" (a
    # deterministic instruction budget as well): host/engine.py. None: this process's.
    metering: str | None = None
    # Fields added to the guest's own log events (the kernel's session id).
    log_context: Mapping[str, str] = field(default_factory=dict)
    # The session's disk ledger (host/disk_ledger.py), shared with every other writer
    # of the session; None: the guest's quota counts its own trees alone.
    disk_ledger: Any = None
    # Where every cell's point is kept, and how many (points.py); None: no points.
    points: PointLimits | None = None
    # A `python` child's depth below the cell's guest (0: the cell's own), and the
    # count of children its cell started, shared by the tree (child_python.py).
    child_depth: int = 0
    child_tally: Any = None

    def __post_init__(self) -> None:
        guest_environment(self.environment)


@dataclass(frozen=True)
class CellOptions:
    """How one cell runs: what an execute_request asks of the guest's shell, and two
    choices of whoever runs it (a kernel makes both: it has sent every output as it
    came, and answers its client before the sandbox's bookkeeping)."""

    silent: bool = False
    store_history: bool = True
    execution_count: int | None = None  # None: the shell's own count
    parent: Mapping[str, Any] | None = None
    cell_id: str | None = None
    # A cell split around host magics runs in parts; In[n] holds the whole cell.
    history_cell: str | None = None
    first_part: bool = True
    # Earlier cells that never reached the shell (host magics only): (n, source) for In.
    backfill: tuple[tuple[int, str], ...] = ()
    # Packages changed on disk since the last cell (%pip): the import system must look again.
    packages_changed: bool = False
    # False: what the output callbacks were handed is not also kept in the result.
    keep_output: bool = True
    # True: the cell's checkpoint and the session's activity record wait for the
    # sandbox's checkpoint_soon() and touch(), or the next cell.
    settle_later: bool = False

    def request(self, code: str) -> dict[str, Any]:
        """The guest shell's request for `code` (its run() reads these fields)."""
        fields: dict[str, Any] = {
            "code": code,
            "silent": self.silent,
            "store_history": self.store_history,
            "execution_count": self.execution_count,
            "parent": dict(self.parent) if self.parent else {},
            "cell_id": self.cell_id,
        }
        if self.history_cell is not None:
            fields["history_cell"] = self.history_cell
            fields["first_part"] = self.first_part
        if self.backfill:
            fields["backfill"] = [list(item) for item in self.backfill]
        if self.packages_changed:
            fields["packages_changed"] = True
        return fields


@dataclass(frozen=True)
class TurnLimits:
    fuel: int | None = None
    # The CPU time the turn's thread may use (time metering's budget: what the guest
    # computes, not what it waits for), checked at every epoch tick.
    cpu_seconds: float | None = None
    deadline_seconds: float | None = None
    memory_bytes: int | None = None
    stdout_max_bytes: int | None = None
    stderr_max_bytes: int | None = None
    display_max_bytes: int | None = None
    disk_max_bytes: int | None = None
    disk_max_files: int | None = None
    # Seconds an interrupt may take to be raised in the guest at a safe point (soft,
    # the turn's work kept) before the turn is stopped and rolled back; None: at once.
    interrupt_grace_seconds: float | None = None


@dataclass
class TurnOutcome:
    status: Literal["ok", "error", "exit", "trap"]
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    display_truncated: bool = False  # rich outputs past display_max_bytes were dropped
    disk_full: bool = False  # a write was refused by the disk quota (the guest saw ENOSPC)
    error: dict[str, Any] | None = None
    exit_code: int | None = 0
    trap: TrapReason | None = None
    rolled_back: bool = False
    restarted: bool = False
    # The guest called proc_exit (os._exit): the process ended mid-cell, not an exit()
    # the shell asked for, so the cell failed whatever the code (ipykernel's kernel dies).
    process_exited: bool = False
    # An interrupt the guest did not take within its grace: stopped and rolled back.
    interrupt_grace_expired: bool = False
    fuel_consumed: int = 0  # 0 where no fuel is counted (time metering, the baseline engine)
    cpu_ms: float = 0.0  # the CPU time of the turn's thread
    memory_used_bytes: int = 0
    memory_growth_bytes: int = 0  # how much this turn grew linear memory (memory_used_bytes is the total)
    duration_ms: float = 0.0
    network_requests: int = 0  # requests made through the network door
    network_bytes: int = 0  # response bytes the guest read through it
    outputs: list[Output] = field(default_factory=list)
    payload: list[dict[str, Any]] = field(default_factory=list)
    query_result: QueryResult | None = None  # a query turn's value, unchecked (query_value checks it)


class GuestUnavailable(RuntimeError):
    """The guest is closed, or could not be started."""


class UndoFailed(RuntimeError):
    """Undo broke off half way; the interpreter was restarted (files kept)."""
