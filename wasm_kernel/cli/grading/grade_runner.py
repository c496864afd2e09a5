"""One submission graded: its notebook in a fresh wasm-python kernel through nbclient,
then otter's tests, one cell each, then its verdicts read back as data.

The notebook the kernel runs is the submission's, prepared by otter's own
GradingPreprocessor steps (cells tagged otter_ignore dropped, the checks otter adds,
its seeding), with a first cell of ours (the driver's begin(): otter's grading mode)
and, after the submission's last cell, one cell per test that brings the whole test
(hidden cases included) with a token made for that cell. The kernel is started as
`wasm-kernel run` starts one: a session of its own in a temporary sessions root
removed afterwards, the staged folder as its notebook folder (read-only; /app is a
fresh workspace over it), the grading limits on its command line.

The executed notebook written out is the submission's cells with their outputs:
the cells of ours are taken out again.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...kernel.notebook_roots import SERVER_ROOT_ENV
from ...kernelspec import KERNEL_NAME
from ..notebook_runner import error_line
from ..terminal_text import terminal_text
from .autograder import Autograder
from .results import RESULT_MIME, Graded, ResultError, Verdict, read_result
from .submissions import Submission, SubmissionError, stage

DRIVER = "_wasm_kernel_otter_grading"  # the guest's side: runtime/guest_lib/_wasm_kernel_otter_grading.py
_MARK = "wasm_kernel_grade"
RESTARTED = "begin() never ran"  # the driver's word for an interpreter restarted since its first cell  # metadata key of the cells this grader adds


@dataclass
class GradeSettings:
    kernel_arguments: list[str] = field(default_factory=list)
    timeout: float | None = None  # the whole submission (--timeout)
    cell_timeout: float | None = None  # nbclient's own per-cell backstop, past the kernel's deadline
    output_dir: Path | None = None  # results/ and notebooks/ go here
    stops: KernelStops = field(default_factory=lambda: KernelStops())  # defined below


def _cell(source: str, role: str) -> Any:
    import nbformat

    cell = nbformat.v4.new_code_cell(source)
    cell.metadata[_MARK] = role
    return cell


def grading_notebook(nb: Any, grader: Autograder) -> tuple[Any, dict[int, tuple[str, str]]]:
    """The notebook to run, and {cell index: (test name, token)} for its test cells."""
    from otter.execute.preprocessor import GradingPreprocessor
    from otter.utils import id_generator
    from traitlets.config import Config

    config = Config()
    ag = grader.ag_config()
    config.GradingPreprocessor.seed = ag.seed
    config.GradingPreprocessor.seed_variable = ag.seed_variable
    steps = GradingPreprocessor(config=config)
    steps._notebook_name = f"notebook_{id_generator()}"
    steps.filter_ignored_cells(nb)
    steps.add_checks(nb)
    steps.add_seeds(nb)
    begin = (f"from otter import Notebook as {steps._notebook_name}\n"
             f"import {DRIVER}\n{DRIVER}.begin('tests')")
    nb.cells.insert(0, _cell(begin, "begin"))
    tokens: dict[int, tuple[str, str]] = {}
    for name, spec in grader.tests.items():
        token = secrets.token_hex(16)
        tokens[len(nb.cells)] = (name, token)
        nb.cells.append(_cell(f"__import__({DRIVER!r}).run_test({token!r}, {json.dumps(spec.spec)!r})", "test"))
    return nb, tokens


def _verdict(cell: Any, name: str, token: str, grader: Autograder) -> Verdict:
    outputs = cell.get("outputs") or []
    results = [o for o in outputs if o.get("output_type") == "display_data" and RESULT_MIME in (o.get("data") or {})]
    if len(results) > 1:
        return Verdict(problem=f"its test cell gave {len(results)} results, where the grader sends one: "
                       "the submission sent results of its own")
    if not results:
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors:
            return Verdict(problem=f"the test stopped: {error_line(errors[-1])}")
        return Verdict(problem="the test gave no result")
    try:
        return read_result(results[0]["data"][RESULT_MIME], token=token, spec=grader.tests[name])
    except ResultError as err:
        return Verdict(problem=f"its result was refused: {err}")


class KernelStops:
    """The running submissions' kernels, so that a --timeout or a Ctrl-C can kill them:
    nbclient then ends that run at once (DeadKernelError), and its thread returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[int, Any] = {}
        self.stopping = False

    @staticmethod
    def kill(client: Any) -> None:
        process = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
        if process is not None:
            process.kill()

    def add(self, client: Any) -> None:
        with self._lock:
            self._clients[id(client)] = client
        if self.stopping:
            self.kill(client)

    def remove(self, client: Any) -> None:
        with self._lock:
            self._clients.pop(id(client), None)

    def stop_all(self) -> None:
        self.stopping = True
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            self.kill(client)


class _Watchdog:
    """Kills the submission's kernel at --timeout: nbclient then ends the run."""

    def __init__(self, timeout: float | None, client: Any) -> None:
        self.fired, self.client = False, client
        self._timer = threading.Timer(timeout, self._fire) if timeout else None

    def __enter__(self) -> _Watchdog:
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _fire(self) -> None:
        self.fired = True
        KernelStops.kill(self.client)


def grade_submission(sub: Submission, grader: Autograder, settings: GradeSettings) -> Graded:
    """The submission graded; a Graded whose failure says why when it could not be."""
    import nbformat
    from nbclient import NotebookClient
    from otter.nbmeta_config import NBMetadataConfig

    graded = Graded(sub.file)
    with tempfile.TemporaryDirectory(prefix="wasm-kernel-grade-") as scratch:
        folder = Path(scratch) / "submission"
        folder.mkdir(mode=0o700)
        try:
            nb_path = stage(sub, grader, folder)
            nb = nbformat.read(nb_path, as_version=4)
        except SubmissionError as err:
            graded.failure = str(err)
            return graded
        except Exception as err:  # nbformat's JSON and schema errors
            graded.failure = f"the notebook is not readable: {(str(err).strip().splitlines() or [type(err).__name__])[0]}"
            return graded
        try:
            got = NBMetadataConfig.from_notebook(nb).assignment_name
        except Exception as err:  # otter's own metadata, written by the student's copy of otter
            graded.failure = f"the notebook's otter metadata is not readable ({type(err).__name__})"
            return graded
        if grader.name and got != grader.name:
            graded.failure = f"Received submission for assignment '{got}' (this is assignment '{grader.name}')"
            return graded
        nb, tokens = grading_notebook(nb, grader)
        env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", SERVER_ROOT_ENV)}
        sessions = Path(scratch) / "sessions"
        client = NotebookClient(
            nb, kernel_name=KERNEL_NAME, timeout=settings.cell_timeout, allow_errors=True,
            extra_arguments=[*settings.kernel_arguments, f"--WasmKernel.workspace_root={sessions}"],
            resources={"metadata": {"path": str(folder)}},
        )
        stopped: str | None = None
        with tempfile.TemporaryFile(prefix="wasm-kernel-grade-", suffix=".log") as log, \
                _Watchdog(settings.timeout, client) as watchdog:
            settings.stops.add(client)
            try:
                client.execute(env=env, stdout=log, stderr=log)
            except Exception as exc:  # the kernel died, or would not start, or a cell passed nbclient's timeout
                if settings.stops.stopping:
                    stopped = "the grading was interrupted"
                elif watchdog.fired:
                    stopped = f"the submission ran past --timeout {settings.timeout:g} s"
                else:
                    first = (str(exc).strip().splitlines() or [""])[0]
                    stopped = f"{type(exc).__name__}{': ' + first if first else ''}"
            finally:
                settings.stops.remove(client)
        for index, (name, token) in tokens.items():
            cell = nb.cells[index]
            ran = bool(cell.get("outputs")) or cell.get("execution_count") is not None
            if stopped is not None and not ran:
                graded.verdicts[name] = Verdict(problem=f"not run: {stopped}")
            else:
                graded.verdicts[name] = _verdict(cell, name, token, grader)
        if stopped is not None and not any(v.problem is None for v in graded.verdicts.values()):
            graded.failure = stopped
        tampered = sorted({t for v in graded.verdicts.values() for t in v.tampered} - {RESTARTED})
        if any(RESTARTED in v.tampered for v in graded.verdicts.values()):
            graded.notes.append("its interpreter was restarted before its tests ran (exit() or os._exit()): "
                                "they ran without its answers")
        if tampered:
            graded.notes.append(f"replaced otter's {', '.join(tampered[:5])}{' ...' if len(tampered) > 5 else ''}; "
                                "put back before its tests ran")
        nb.cells = [c for c in nb.cells if _MARK not in c.get("metadata", {})]
        if settings.output_dir is not None:
            (settings.output_dir / "notebooks").mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, settings.output_dir / "notebooks" / f"{sub.label}.ipynb")
    return graded


def one_line(text: str) -> str:
    """A reason made safe for a terminal line and a CSV cell."""
    return " ".join(terminal_text(text).split())[:500]
