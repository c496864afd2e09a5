"""The example notebooks, executed end to end through nbclient as Jupyter tools run
them, with their outputs asserted; one also through `jupyter nbconvert --execute`.
Plus persistence by notebook path: JPY_SESSION_NAME binds a run to the notebook's
own session, and without it every run gets a fresh one.

Each run's sessions live under a JUPYTER_DATA_DIR of its own (set in os.environ,
which the kernel inherits), so nothing touches a user's workspaces.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from support.kernel_client import RunningKernel, split_notices
from support.paths import EXAMPLES

NOTEBOOKS = ["01-getting-started", "02-data-science", "03-untrusted-code", "04-teaching", "05-widgets", "06-data-folder"]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
FILE_CHANGES = "application/vnd.wasm-kernel.file-changes+json"
KERNELSPEC = {"name": "wasm-python", "display_name": "Python (WebAssembly sandbox)", "language": "python"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CELL_TIMEOUT = 120


@dataclass
class Executed:
    nb: Any
    replies: dict[int, dict[str, Any]]  # cell index -> execute_reply content
    data_dir: Path

    def code_cells(self) -> list[tuple[int, Any]]:
        return [(i, c) for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]

    def find(self, needle: str) -> int:
        """The index of the one code cell whose source contains `needle`."""
        found = [i for i, c in self.code_cells() if needle in c.source]
        assert len(found) == 1, f"{len(found)} cells contain {needle!r}"
        return found[0]

    def exactly(self, source: str) -> Any:
        """The one code cell whose whole source is `source`."""
        [cell] = [c for _, c in self.code_cells() if c.source == source]
        return cell

    def outputs(self, needle: str, output_type: str | None = None) -> list[Any]:
        outs = self.nb.cells[self.find(needle)].outputs
        return [o for o in outs if output_type is None or o.output_type == output_type]

    def stdout(self, needle: str) -> str:
        """What the cell printed, without the kernel's informational notices."""
        return split_notices("".join(o.text for o in self.outputs(needle, "stream") if o.name == "stdout"))[1]

    def stderr(self, needle: str) -> str:
        return "".join(o.text for o in self.outputs(needle, "stream") if o.name == "stderr")

    def result(self, needle: str) -> dict[str, Any]:
        [out] = self.outputs(needle, "execute_result")
        return out.data

    def displays(self, needle: str) -> list[dict[str, Any]]:
        return [o.data for o in self.outputs(needle, "display_data")]

    def file_changes(self, needle: str) -> dict[str, Any]:
        [change] = [d[FILE_CHANGES] for d in self.displays(needle) if FILE_CHANGES in d]
        return change

    def error(self, needle: str) -> Any:
        [err] = self.outputs(needle, "error")
        return err

    def reply(self, needle: str) -> dict[str, Any]:
        return self.replies[self.find(needle)]

    @property
    def sessions_root(self) -> Path:
        return self.data_dir / "wasm-kernel" / "sessions"

    def workspace(self) -> Path:
        [ws] = [p for p in self.sessions_root.iterdir() if UUID.fullmatch(p.name)]
        return ws


def execute(nb: Any, data_dir: Path, workdir: Path, keep_session: bool = False, **start_kwargs: Any) -> Executed:
    """Run `nb` with nbclient, as `jupyter nbconvert --execute` does, keeping every execute_reply.
    keep_session: an unnamed run's session stays after the run (it is removed otherwise),
    for tests that look at the files the notebook wrote."""
    replies: dict[int, dict[str, Any]] = {}

    def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        replies[cell_index] = execute_reply["content"]

    client = NotebookClient(
        nb, kernel_name="wasm-python", timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(workdir)}}, on_cell_executed=on_cell_executed,
        extra_arguments=["--WasmKernel.keep_unnamed_sessions_hours=1"] if keep_session else [],
    )
    client.execute(**start_kwargs)
    return Executed(nb, replies, data_dir)


@pytest.fixture(scope="module")
def run_example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Executes each example once per module; tests share the executed notebook."""
    done: dict[str, Executed] = {}

    def run(name: str) -> Executed:
        if name not in done:
            data_dir = tmp_path_factory.mktemp(f"data-{name}")
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("JUPYTER_DATA_DIR", str(data_dir))
                mp.delenv("JPY_SESSION_NAME", raising=False)
                nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
                # As Jupyter does, the kernel starts in the notebook's folder, which it shows under /app.
                done[name] = execute(nb, data_dir, EXAMPLES, keep_session=True)
        return done[name]

    yield run


# --- the committed files -----------------------------------------------------------


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_example_is_committed_clean_for_the_wasm_kernel(name: str) -> None:
    nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert nb.metadata.kernelspec == KERNELSPEC
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 4  # teaching text between cells


# --- every example -------------------------------------------------------------------


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_only_the_cells_tagged_raises_exception_fail(run_example: Any, name: str) -> None:
    ran = run_example(name)
    for index, cell in ran.code_cells():
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        status = ran.replies[index]["status"]
        assert status == ("error" if tagged else "ok"), (cell.source, ran.replies[index])
        assert cell.execution_count is not None


# --- 01: cells, rich output, files, magics, file changes ----------------------------


def test_getting_started_cells_share_state_and_show_rich_output(run_example: Any) -> None:
    ran = run_example("01-getting-started")
    assert re.match(r"Python 3\.15\.\d+ on wasi\n", ran.stdout('print("Python"'))
    assert ran.outputs('print("Python"', "execute_result") == []  # an assignment shows nothing
    assert ran.exactly("answer").outputs[0].data["text/plain"] == "42"
    assert ran.result('greet("sandbox")')["text/plain"] == "'Hello, sandbox! The answer is still 42.'"
    html = ran.result("HTML(f")
    assert "<table>" in html["text/html"] and "<td>4</td><td>16</td>" in html["text/html"]
    [markdown] = ran.displays("display(Markdown(")
    assert markdown["text/markdown"].startswith("**Markdown**")
    swatch = ran.result('Swatch("teal")')
    assert "background:teal" in swatch["text/html"] and swatch["text/plain"] == "Swatch('teal')"


def test_getting_started_file_change_display_and_reply_metadata(run_example: Any) -> None:
    ran = run_example("01-getting-started")
    made = 'open("notes.txt", "w")'
    assert ran.stdout(made) == "working directory: /app\n"
    assert sorted(ran.reply(made)["metadata"]["files_created"]) == ["data/squares.csv", "notes.txt"]
    change = ran.file_changes(made)
    assert sorted((e["path"], e["size"]) for e in change["created"]) == [("data/squares.csv", 31), ("notes.txt", 11)]
    [display] = [d for d in ran.displays(made) if FILE_CHANGES in d]
    assert display["text/plain"] == "Files created: +data/squares.csv (31 B), +notes.txt (11 B)"
    assert "<table>" in display["text/html"]

    appended = 'open("notes.txt", "a")'
    assert ran.stdout(appended).startswith("first line\nsecond line\n")
    metadata = ran.reply(appended)["metadata"]
    assert {k: metadata[k] for k in ("files_created", "files_modified", "files_deleted")} == {
        "files_created": [], "files_modified": ["notes.txt"], "files_deleted": []}
    assert metadata["sandbox"]["cpu_ms"] > 0  # and what the cell cost
    assert ran.file_changes(appended)["modified"] == [{"path": "notes.txt", "size": 23}]

    removed = 'os.remove("notes.txt")'
    assert ran.reply(removed)["metadata"]["files_deleted"] == ["notes.txt"]
    assert [d["text/plain"] for d in ran.displays(removed)] == ["Files deleted: -notes.txt"]
    # A cell that changes no file gets no display, and empty lists in its reply.
    assert ran.displays("%cat data/squares.csv") == []
    assert ran.reply("%cat data/squares.csv")["metadata"]["files_created"] == []


def test_getting_started_magics(run_example: Any) -> None:
    ran = run_example("01-getting-started")
    [session] = ran.displays("%session")
    assert re.search(r"session id\s+" + UUID.pattern, session["text/plain"])
    assert "/app (in the sandbox)" in session["text/plain"]
    assert str(ran.data_dir) not in session["text/plain"]  # no host path
    assert ran.stdout("%%writefile greeting.py") == "Writing greeting.py\n"
    assert ran.reply("%%writefile greeting.py")["metadata"]["files_created"] == ["greeting.py"]
    assert ran.result("import greeting")["text/plain"] == "'hello from a module in /app, reader'"
    assert ran.stdout("%cat data/squares.csv") == "n,square\n1,1\n2,4\n3,9\n4,16\n5,25\n"
    [files] = ran.displays("%files")
    assert files["text/plain"].startswith("3 files, 121 B")
    assert "greeting.py" in files["text/plain"] and "<table>" in files["text/html"]
    [limits] = ran.displays("%limits")
    assert re.search(r"memory\s+2 GiB\s+2 GiB", limits["text/plain"])  # downward only: at most the operator's 2 GiB
    who = ran.stdout("%who").split()
    assert {"answer", "greet", "Swatch", "greeting"} <= set(who)
    # The files are in this run's session workspace on the host, and only there.
    workspace = ran.workspace()
    assert (workspace / "greeting.py").read_text().startswith("def hello(name):")
    assert not (workspace / "notes.txt").exists()
    assert (workspace / "data" / "squares.csv").is_file()


# --- 02: numpy, pandas, CSV, matplotlib ----------------------------------------------


def test_data_science_dataframes_csv_and_plots(run_example: Any) -> None:
    ran = run_example("02-data-science")
    assert re.match(r"numpy 2\.\S+ \| pandas \S+ \| matplotlib \S+\n", ran.stdout("%matplotlib inline"))
    assert ran.stdout("default_rng(seed=42)").startswith("365 days, mean ")
    head = ran.result("df.head()")
    assert '<table border="1" class="dataframe">' in head["text/html"]
    assert "<th>temp_c</th>" in head["text/html"] and "2024-01-01" in head["text/plain"]
    monthly = ran.result("monthly = (")
    assert "<th>mean_c</th>" in monthly["text/html"]
    assert [line.split()[0] for line in monthly["text/plain"].splitlines()[2:]] == [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    written = 'monthly.to_csv("monthly.csv")'
    assert ran.reply(written)["metadata"]["files_created"] == ["monthly.csv"]
    assert ran.file_changes(written)["created"][0]["path"] == "monthly.csv"
    assert (ran.workspace() / "monthly.csv").read_text().startswith("month,mean_c,max_c\nJan,")
    assert ran.stdout("pd.read_csv") == "identical after the round trip: True\n"
    assert "<table" in ran.result("pd.read_csv")["text/html"]

    for needle in ('fig.savefig("temperatures.png"', "plot.bar("):
        [png] = [d["image/png"] for d in ran.displays(needle) if "image/png" in d]
        assert base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n")
    assert ran.reply('fig.savefig("temperatures.png"')["metadata"]["files_created"] == ["temperatures.png"]
    assert (ran.workspace() / "temperatures.png").read_bytes().startswith(b"\x89PNG")


def test_nbconvert_executes_the_data_science_example(tmp_path: Path) -> None:
    jupyter = Path(sys.executable).parent / "jupyter"
    command = [str(jupyter)] if jupyter.exists() else [sys.executable, "-m", "jupyter"]
    out = tmp_path / "out.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.run(
        [*command, "nbconvert", "--to", "notebook", "--execute", str(EXAMPLES / "02-data-science.ipynb"),
         "--output", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = [o.data["image/png"] for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(pngs) == 2 and all(base64.b64decode(p).startswith(b"\x89PNG") for p in pngs)
    assert any("dataframe" in o.data.get("text/html", "") for o in outputs if o.output_type == "execute_result")
    assert nb.metadata.language_info["name"] == "python"
    assert nb.metadata.language_info["version"].startswith("3.15")


# --- 03: untrusted code --------------------------------------------------------------


def test_untrusted_code_cannot_see_host_files(run_example: Any) -> None:
    ran = run_example("03-untrusted-code")
    err = ran.error('open("/etc/passwd")')
    assert err.ename == "FileNotFoundError" and "/etc/passwd" in err.evalue
    listing = ran.stdout("os.listdir(path)")
    for path in ("/", "/etc", "/home", "/root", "/proc/self/environ"):
        assert re.search(rf"^{re.escape(path)}\s+-> FileNotFoundError", listing, re.M), listing
    assert re.search(r"^/app\s+-> \[.*'03-untrusted-code.ipynb'", listing, re.M)  # the notebook's own folder
    probes = ran.stdout("socket.socket()")
    assert "network:    network access is not available in this sandbox" in probes
    assert "processes:  subprocesses are not available in this sandbox" in probes
    assert "threads:    threads are not available in this sandbox" in probes
    assert "PATH" not in probes.split("environment variables:")[1].replace("'", " ").split()
    # UsageErrors are one line on stderr, as IPython shows them, and fail the cell.
    assert ran.reply("%cat ../../etc/passwd")["ename"] == "UsageError"
    assert ran.stderr("%cat ../../etc/passwd").startswith("UsageError: ")
    # `!` runs in the guest's confined shell, which has no /etc at all.
    assert ran.stdout("!cat /etc/passwd") == "cat: /etc/passwd: No such file or directory\r\n"


def test_untrusted_code_limits_stop_loops_memory_bombs_and_floods(run_example: Any) -> None:
    ran = run_example("03-untrusted-code")
    loop = ran.error("while True:")
    assert loop.ename == "DeadlineExceeded"
    assert loop.traceback == [f"DeadlineExceeded: {loop.evalue}"]  # one line
    assert "2 s deadline" in loop.evalue and "%limits deadline=" in loop.evalue
    assert ran.exactly("counter").outputs[0].data["text/plain"] == "1"  # the stopped cell's `counter += 1` was rolled back

    assert ran.error("bytearray(1024**3)").ename == "MemoryError"
    assert ran.stderr("bytearray(1024**3)").strip() == (
        "[the allocation failed against the sandbox's memory limit of 256 MiB; raise it with %limits memory=512MiB "
        "(at most 2 GiB)]")
    assert ran.result("small = bytearray")["text/plain"] == "'32 MB allocated'"

    flood = ran.stdout("range(20_000)")
    assert flood.startswith("line 0: all work and no play")
    assert "[wasm-kernel: stdout truncated after 10000 bytes" in flood
    assert len(flood.encode()) < 10_300
    assert "the loop finished" not in flood


def test_untrusted_code_state_survives(run_example: Any) -> None:
    ran = run_example("03-untrusted-code")
    assert ran.stdout("print(precious, counter)") == "{'experiment': 'untrusted', 'results': [1, 2, 3]} 1\n"
    [limits] = ran.displays("%limits deadline=none")
    assert re.search(r"deadline\s+none", limits["text/plain"])


# --- 04: teaching ---------------------------------------------------------------------


def test_teaching_grader_scores_and_deadline(run_example: Any) -> None:
    ran = run_example("04-teaching")
    graded = ran.stdout("score = grade(is_palindrome)")
    assert graded.count("PASS") == 6 and graded.endswith("Score: 6/6\n")
    naive = ran.stdout("naive_score = grade(naive_palindrome)")
    assert "FAIL  naive_palindrome('Racecar') -> False  (expected True)" in naive
    assert naive.endswith("Score: 3/6\n")
    assert ran.error("grade(stuck_palindrome)").ename == "DeadlineExceeded"
    assert ran.reply('open("grades.json", "w")')["metadata"]["files_created"] == ["grades.json"]
    grades = json.loads((ran.workspace() / "grades.json").read_text())
    assert grades == {"is_palindrome": 6, "naive_palindrome": 3, "out_of": 6}


def test_teaching_input_cell_runs_unattended(run_example: Any) -> None:
    ran = run_example("04-teaching")
    text = ran.stdout('input("What is your name? ")')
    assert text.startswith("EOFError: input() is not available here")
    assert text.endswith("Welcome, student!\n")
    assert ran.stdout("Quick check") == "(skipped: run this cell in JupyterLab to answer)\n"


def test_teaching_input_cell_prompts_when_a_frontend_can_answer(tmp_path: Path) -> None:
    """What JupyterLab does: allow_stdin, an input_request, the user's answer."""
    nb = nbformat.read(EXAMPLES / "04-teaching.ipynb", as_version=4)
    [source] = [c.source for c in nb.cells if 'input("What is your name? ")' in c.source]
    kernel = RunningKernel(tmp_path / "data")
    try:
        run = kernel.execute(source, stdin=["Ada"])
        [request] = [m for m in run.outputs if m["msg_type"] == "input_request"]
        assert request["content"]["prompt"] == "What is your name? "
        assert run.stream() == "Welcome, Ada!\n"
    finally:
        kernel.shutdown()


# --- persistence by notebook path ---------------------------------------------------


def _tiny_notebook(path: Path) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.cells = [
        nbformat.v4.new_code_cell("import os\nprint(sorted(os.listdir()))"),
        nbformat.v4.new_code_cell("with open('marker.txt', 'a') as f:\n    f.write('x')"),
        nbformat.v4.new_code_cell("%session"),
    ]
    nbformat.write(nb, path)
    return nb


def _run_tiny(path: Path, data_dir: Path, keep_session: bool = False, **start_kwargs: Any) -> Executed:
    return execute(nbformat.read(path, as_version=4), data_dir, path.parent, keep_session, **start_kwargs)


def test_jpy_session_name_gives_a_notebook_its_own_persistent_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir, path = tmp_path / "data", tmp_path / "analysis.ipynb"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data_dir))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    _tiny_notebook(path)

    # nbclient's way: env for the kernel, passed through to start_kernel.
    first = _run_tiny(path, data_dir, env={**os.environ, "JPY_SESSION_NAME": str(path)})
    assert first.stdout("listdir") == "[]\n"
    assert first.reply("marker.txt")["metadata"]["files_created"] == ["marker.txt"]
    [session] = first.displays("%session")
    assert re.search(r"found from\s+JPY_SESSION_NAME", session["text/plain"])
    assert re.search(r"notebook\s+analysis.ipynb", session["text/plain"])
    assert str(path) not in session["text/plain"]  # the name, never the host path

    # The same notebook again, JPY_SESSION_NAME inherited from os.environ this time.
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    second = _run_tiny(path, data_dir)
    assert second.stdout("listdir") == "['marker.txt']\n"
    assert second.reply("marker.txt")["metadata"]["files_modified"] == ["marker.txt"]
    assert (second.workspace() / "marker.txt").read_text() == "xx"
    first_id = UUID.search(session["text/plain"]).group(0)
    assert UUID.search(second.displays("%session")[0]["text/plain"]).group(0) == first_id


def test_without_jpy_session_name_every_run_gets_a_fresh_session_removed_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir, path = tmp_path / "data", tmp_path / "analysis.ipynb"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data_dir))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    _tiny_notebook(path)
    runs = [_run_tiny(path, data_dir, keep_session=True) for _ in range(2)]
    for run in runs:
        assert run.stdout("listdir") == "[]\n"
        assert run.reply("marker.txt")["metadata"]["files_created"] == ["marker.txt"]
        assert re.search(r"found from\s+none", run.displays("%session")[0]["text/plain"])
    sessions = [p for p in (data_dir / "wasm-kernel" / "sessions").iterdir() if UUID.fullmatch(p.name)]
    assert len(sessions) == 2
    assert all((s / "marker.txt").read_text() == "x" for s in sessions)
    # Without the operator's keep_unnamed_sessions_hours, a run leaves nothing behind.
    _run_tiny(path, data_dir)
    assert sorted(p for p in (data_dir / "wasm-kernel" / "sessions").iterdir() if UUID.fullmatch(p.name)) == sorted(sessions)


def test_data_folder_example_reads_beside_the_notebook_and_writes_to_the_workspace(run_example: Any) -> None:
    before = {p: p.read_bytes() for p in (EXAMPLES / "data").iterdir()}
    ran = run_example("06-data-folder")
    assert ran.stdout("survey = pd.read_csv(survey_file)") == "16 students\n"
    assert "favourite_subject" in ran.result("summarize(survey, unit)")["text/plain"]
    assert ran.result("tallest =")["text/plain"] == "'Jonah is the tallest: 182.0 cm'"
    assert any("image/png" in d for d in ran.displays("survey.plot.scatter"))
    assert ran.stdout("summary.to_csv") == "17 rows in the workspace's copy\n"
    assert sorted(ran.file_changes("summary.to_csv")["created"], key=lambda f: f["path"]) == [
        {"path": "data/class-survey.csv", "size": 383}, {"path": "summary.csv", "size": 138}]
    listing = ran.result('sorted(os.listdir("."))')["text/plain"]
    assert "'06-data-folder.ipynb'" in listing and "'summary.csv'" in listing and "'survey_tools.py'" in listing
    assert {p: p.read_bytes() for p in (EXAMPLES / "data").iterdir()} == before  # the folder never changes


def test_widgets_example_saves_its_widget_state_in_the_notebook(run_example: Any) -> None:
    done = run_example("05-widgets")
    models = done.nb.metadata.widgets[WIDGET_STATE]["state"]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for model in models.values():
        by_name.setdefault(model["model_name"], []).append(model["state"])
    # interact's slider at its default, the observer's label, the finished bar.
    assert any(s.get("value") == 4 and s.get("description") == "n" for s in by_name["IntSliderModel"])
    assert any(s.get("value") == "x squared is 25" for s in by_name["LabelModel"])
    assert any(s.get("value") == 200 for s in by_name["FloatProgressModel"])
    views = [d for d in done.displays("@interact") if "application/vnd.jupyter.widget-view+json" in d]
    assert views and views[0]["application/vnd.jupyter.widget-view+json"]["model_id"] in models
    assert done.result("for i in tqdm")["text/plain"] == "19900"
    # The Output widget holds what was printed inside it, not the cell.
    output_models = [s for s in by_name["OutputModel"] if s.get("outputs")]
    printed = [o.get("text", "") for s in output_models for o in s["outputs"]]
    assert "written into the Output widget\n" in printed and "[0, 1, 4, 9]\n" in printed, printed
    assert done.stdout("out = widgets.Output()") == ""
