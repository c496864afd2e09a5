"""%timeline and %rewind on a real kernel over jupyter_client: the interpreter back as it
was just after an earlier cell, In/Out/_ included, the numbering going on from the
highest, a rewind undone by rewinding forward, and one line for what cannot be done."""

from __future__ import annotations

from pathlib import Path

from support.kernel_client import RunningKernel


def _result(kernel: RunningKernel, code: str) -> str:
    run = kernel.execute(code, timeout=120)
    assert run.status == "ok", run.outputs
    return run.of_type("execute_result")[0]["data"]["text/plain"]


def _text(kernel: RunningKernel, code: str) -> str:
    run = kernel.execute(code, timeout=120)
    assert run.status == "ok", run.outputs
    return run.printed()


def test_rewind_puts_back_variables_in_out_and_underscore_and_numbering_goes_on(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        assert _result(kernel, "x = 1\nx * 10") == "10"  # [1]
        assert _result(kernel, "x = 2\ny = [x]\nx * 20") == "40"  # [2]
        assert _result(kernel, "x = 3\ny.append(3)\nx * 30") == "90"  # [3]
        line = _text(kernel, "%rewind 1")  # [4]
        assert line.startswith("Back to just after cell [1] (x = 1): 2 variables and 0 files changed."), line
        assert line.count("\n") == 1
        # [5]: as just after [1]: x, _, Out; y never was. The count goes on from the highest.
        run = kernel.execute("x, _, sorted(Out), 'y' in dir(), In[1].splitlines()[0]", timeout=120)
        assert run.reply["content"]["execution_count"] == 5
        assert run.of_type("execute_result")[0]["data"]["text/plain"] == "(1, 10, [1], False, 'x = 1')"
        assert "%rewind 1" in _text(kernel, "print(In[4])")  # [6]: In keeps every cell's number
        line = _text(kernel, "%rewind 3")  # [7]: forward again, to where it was
        assert line.startswith("Back to just after cell [3] (x = 3)"), line
        assert _result(kernel, "x, y") == "(3, [2, 3])"  # [8]
        assert _text(kernel, "%rewind").startswith("Back to just after cell [7] (%rewind 3, itself back to [3])")
    finally:
        kernel.shutdown()


def test_timeline_lists_each_cell_with_its_first_line_and_marks_now(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        kernel.execute("a = 1", timeout=120)
        kernel.execute("open('/app/made.txt', 'w').write('x')\nb = 2", timeout=120)
        run = kernel.execute("%timeline", timeout=120)
        table = run.of_type("display_data")[0]["data"]["text/plain"]
        lines = table.splitlines()
        assert lines[0].startswith("2 points,") and "at most 50 points, 1 GiB" in lines[0]
        assert lines[1].split() == ["cell", "ran", "at", "first", "line", "files", "changed", "kept"]
        assert lines[3].split()[0] == "[1]" and "a = 1" in lines[3]
        assert lines[4].split()[:2] == ["[2]", "<-"] and "open('/app/made.txt'" in lines[4]
        assert lines[4].split()[-3] == "1"  # the file it made
        limits = kernel.execute("%limits", timeout=120).of_type("display_data")[0]["data"]["text/plain"]
        assert any(row.split()[:2] == ["points", "50"] for row in limits.splitlines()), limits
    finally:
        kernel.shutdown()


def test_rewind_refusals_are_one_line_usage_errors(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        first = kernel.execute("%rewind", timeout=120)
        assert first.status == "error" and "no earlier point yet" in first.stream("stderr")
        kernel.execute("x = 1", timeout=120)
        kernel.execute("x = 2", timeout=120)
        for code, said in (("%rewind 99", "no point for cell [99]; the points kept are cells 2, 3"),
                           ("%rewind one", "expected a cell's number"), ("%rewind 1 2", "expected a cell's number")):
            run = kernel.execute(code, timeout=120)
            err = run.stream("stderr")
            assert run.status == "error" and said in err and err.count("\n") == 1, (code, err)
        assert _result(kernel, "x") == "2"
    finally:
        kernel.shutdown()


def test_rewind_puts_back_the_workspace_files_created_changed_deleted_renamed_and_folders(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        _text(kernel, "import os\nopen('/app/a.txt', 'w').write('one')\nos.makedirs('/app/sub')\n"
                      "open('/app/sub/b.txt', 'w').write('bee')")  # [1]
        _text(kernel, "open('/app/a.txt', 'w').write('two')\nos.remove('/app/sub/b.txt')\n"
                      "open('/app/c.txt', 'w').write('sea')\nf = open('/app/a.txt')")  # [2]
        _text(kernel, "os.rename('/app/c.txt', '/app/d.txt')\nos.makedirs('/app/more/deep')\n"
                      "open('/app/more/deep/e.txt', 'w').write('eee')")  # [3]
        run = kernel.execute("%rewind 1", timeout=120)  # [4]
        assert run.status == "ok"
        assert "1 variable and " in run.printed() and " files changed" in run.printed(), run.printed()
        changes = run.file_changes()[0]["data"]["application/vnd.wasm-kernel.file-changes+json"]
        assert sorted(c["path"] for c in changes.get("deleted", [])) == ["d.txt", "more", "more/deep", "more/deep/e.txt"] \
            or "d.txt" in str(changes), changes
        assert _text(kernel, "print(sorted(os.listdir('/app')), open('/app/a.txt').read(), "
                             "open('/app/sub/b.txt').read(), 'f' in dir())") == "['a.txt', 'sub'] one bee False\n"
        _text(kernel, "%rewind 3")  # [6]: forward, files and the open file object with them
        assert _text(kernel, "print(sorted(os.listdir('/app')), open('/app/a.txt').read(), f.read(), "
                             "open('/app/more/deep/e.txt').read())") == "['a.txt', 'd.txt', 'more', 'sub'] two two eee\n"
    finally:
        kernel.shutdown()


def test_a_host_magic_cell_that_changed_files_is_a_point_of_its_own(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        _text(kernel, "open('/app/notes.txt', 'w').write('cell one')")  # [1]
        _text(kernel, "x = 2")  # [2]
        assert kernel.execute("%%writefile notes.txt\nedited", timeout=120).status == "ok"  # [3]: host only
        table = kernel.execute("%timeline", timeout=120).of_type("display_data")[0]["data"]["text/plain"]  # [4]
        assert any(row.split()[:1] == ["[3]"] and "%%writefile notes.txt" in row for row in table.splitlines()), table
        _text(kernel, "%rewind 2")  # [5]
        assert _text(kernel, "print(open('/app/notes.txt').read(), x)") == "cell one 2\n"  # [6]
        _text(kernel, "%rewind 3")  # [7]: its files, the interpreter as [2] left it
        assert _text(kernel, "print(open('/app/notes.txt').read().strip(), x)") == "edited 2\n"
    finally:
        kernel.shutdown()


def test_a_file_the_host_wrote_between_cells_belongs_to_the_next_cells_point(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        _text(kernel, "open('/app/a.txt', 'w').write('one')")  # [1]
        workspace = kernel.sessions_root / kernel.session_id()  # [2] (%session)
        (workspace / "uploaded.csv").write_text("from the drive")  # as an upload between cells
        _text(kernel, "x = 3")  # [3]
        _text(kernel, "open('/app/uploaded.csv', 'w').write('changed by a cell')")  # [4]
        _text(kernel, "%rewind 3")  # [5]
        assert _text(kernel, "print(open('/app/uploaded.csv').read())") == "from the drive\n"
        _text(kernel, "%rewind 1")  # [7]: before the upload
        assert _text(kernel, "import os\nprint(sorted(os.listdir('/app')))") == "['a.txt']\n"
    finally:
        kernel.shutdown()


def test_the_notebooks_own_folder_is_never_touched_and_its_file_shows_through_again(tmp_path: Path) -> None:
    from support.kernel_client import blank_notebook, notebook_kernel

    notebook = blank_notebook(tmp_path / "course" / "lab.ipynb")
    (notebook.parent / "data.csv").write_text("a,b\n1,2\n")
    kernel = notebook_kernel(tmp_path / "data", notebook)
    try:
        _text(kernel, "x = 1")  # [1]
        _text(kernel, "open('/app/data.csv', 'a').write('3,4\\n')")  # [2]: a copy-up into the workspace
        assert _text(kernel, "print(open('/app/data.csv').read(), end='')") == "a,b\n1,2\n3,4\n"
        _text(kernel, "%rewind 1")
        assert _text(kernel, "print(open('/app/data.csv').read(), end='')") == "a,b\n1,2\n"  # the notebook's, again
        assert (notebook.parent / "data.csv").read_text() == "a,b\n1,2\n"
        _text(kernel, "%rewind 2")
        assert _text(kernel, "print(open('/app/data.csv').read(), end='')") == "a,b\n1,2\n3,4\n"
        assert (notebook.parent / "data.csv").read_text() == "a,b\n1,2\n"
    finally:
        kernel.shutdown()


def test_points_survive_a_kept_state_shutdown_and_a_rewind_after_the_resume_works(tmp_path: Path) -> None:
    from support.kernel_client import blank_notebook, notebook_kernel

    notebook = blank_notebook(tmp_path / "nb" / "kept.ipynb")
    kernel = notebook_kernel(tmp_path / "data", notebook)
    try:
        _text(kernel, "x = 1\ng = (i for i in range(10)); next(g)\nopen('/app/a.txt', 'w').write('one')")  # [1]
        _text(kernel, "x = 2\nnext(g)\nopen('/app/a.txt', 'w').write('two')")  # [2]
        _text(kernel, "x = 3\nnext(g)")  # [3]
    finally:
        kernel.shutdown()  # the interpreter is kept, and its points with it
    kernel = notebook_kernel(tmp_path / "data", notebook)
    try:
        assert _text(kernel, "print(x)") == "3\n"  # [4]: resumed
        _text(kernel, "%rewind 1")
        assert _text(kernel, "print(x, next(g), open('/app/a.txt').read())") == "1 1 one\n"
        assert _text(kernel, "for i in range(2):\n    print(i)") == "0\n1\n"  # this host's streams, after the rewind
        _text(kernel, "%rewind 3")
        assert _text(kernel, "print(x, next(g), open('/app/a.txt').read())") == "3 3 two\n"
    finally:
        kernel.shutdown()
