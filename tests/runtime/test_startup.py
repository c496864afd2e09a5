"""The one start-up path (runtime/startup.py): one reporter for the kernel, the CLI and
precompile, a step shown only when it has work to do, and no start-up work called from
anywhere else."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from wasm_kernel.host.work_meter import WorkProgress
from wasm_kernel.runtime.startup import IMAGE, StartupProgress, is_start_prepared, prepare_start
from wasm_kernel.runtime.warm_image import DEFAULT_PRELOAD

PACKAGE = Path(__file__).resolve().parents[2] / "wasm_kernel"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def started(self, what: str) -> None:
        self.events.append(("started", what))

    def reading(self, reading: Any) -> None:
        self.events.append(("reading", reading.percent))

    def finished(self, ok: bool) -> None:
        self.events.append(("finished", ok))


def test_a_step_that_reports_is_shown_and_one_that_does_not_never_is() -> None:
    view = Recorder()
    progress = StartupProgress(view)
    with progress.step("cached already"):
        pass
    with progress.step("compiling") as report:
        report(WorkProgress(1.0, 0.25, 3.0))
        assert progress.current() is not None and progress.current().what == "compiling"
        report(WorkProgress(2.0, 1.0, 0.0, done=True))
        assert progress.current() is None  # done: nothing left to show
    assert view.events == [("started", "compiling"), ("reading", 25), ("finished", True)]
    assert progress.current() is None


def test_a_step_that_fails_is_finished_as_stopped_and_the_error_goes_on() -> None:
    view = Recorder()
    progress = StartupProgress(view)
    with pytest.raises(OSError):
        with progress.step("building") as report:
            report()
            raise OSError("disk full")
    assert view.events == [("started", "building"), ("finished", False)]


def test_a_prepared_machine_starts_with_nothing_to_show() -> None:
    # CI precompiles before the tests: every step has been done on this machine.
    assert is_start_prepared(DEFAULT_PRELOAD)
    view = Recorder()
    image = prepare_start(DEFAULT_PRELOAD, StartupProgress(view))
    assert image is not None and image.memory_file.is_file()
    assert view.events == []
    # Without the image step, no image; with precompile, the same image, waited for.
    assert prepare_start(DEFAULT_PRELOAD, StartupProgress(view), warm_image=False) is None
    assert prepare_start(DEFAULT_PRELOAD, StartupProgress(view), precompile=True).key == image.key
    assert view.events == []


def test_the_callers_own_steps_run_between_the_site_and_the_image() -> None:
    order: list[str] = []
    progress = StartupProgress()

    def course(report: Any) -> None:
        order.append("course")
        report(WorkProgress(0.5, 0.5, 0.5))

    real_step = progress.step

    def step(what: str) -> Any:
        order.append(what.split(":")[0])
        return real_step(what)

    progress.step = step  # type: ignore[method-assign]
    prepare_start(DEFAULT_PRELOAD, progress, more=[("the course", course)])
    assert order[-3:] == ["the course", "course", IMAGE.split(":")[0]]


START_UP_WORK = re.compile(r"\b(load_guest_module|guest_site|add_bytecode|prepare_warm_image|read_cached_guest|"
                           r"start_probe)\(")


def test_the_kernel_and_the_cli_do_start_up_work_only_through_prepare_start() -> None:
    offenders = []
    for folder in ("kernel", "cli", "sessions", "core", "cluster"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if START_UP_WORK.search(line) and not line.lstrip().startswith(("def ", "#")):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    assert offenders == []


def test_the_preflight_never_stages_the_site_nor_compiles_the_guest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight thread runs before anyone can show progress: a site that is not
    staged, or a guest not compiled yet, is left to prepare_start, which shows its
    progress. (The warm image's key stages the site if it is missing.)"""
    from wasm_kernel.runtime import startup as ns

    called: list[str] = []
    monkeypatch.setattr(ns, "start_probe", lambda: None)
    monkeypatch.setattr(ns, "is_site_staged", lambda: False)
    monkeypatch.setattr(ns, "read_cached_guest", lambda: called.append("load") or True)
    monkeypatch.setattr(ns, "shim_module", lambda engine: called.append("shim"))
    monkeypatch.setattr(ns, "get_engine", lambda: None)
    monkeypatch.setattr(ns, "is_warm_image_ready", lambda preload: called.append("image") or True)
    preflight = ns.Preflight(("numpy",))
    preflight.join(10)
    assert called == ["load", "shim"] and not preflight.image_ready

    called.clear()
    monkeypatch.setattr(ns, "read_cached_guest", lambda: False)  # none (or refused): the compile is the sandbox's
    preflight = ns.Preflight(("numpy",))
    preflight.join(10)
    assert called == [] and not preflight.image_ready
