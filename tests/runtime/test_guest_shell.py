"""The guest's IPython shell has what ipykernel's adds to IPython: storemagic loaded,
%less/%more paging a file, %autosave, and one-line refusals for what needs a shell,
another package manager or a connection file."""

from wasm_kernel import PythonSandbox


def test_store_is_loaded_as_in_ipykernel(sandbox: PythonSandbox) -> None:
    assert sandbox.execute("x = 5\n%store x").stdout == "Stored 'x' (int)\n"
    assert sandbox.execute("del x\n%store -r x\nx").outputs[0].data["text/plain"] == "5"  # type: ignore[union-attr]


def test_less_and_more_page_a_workspace_file(sandbox: PythonSandbox) -> None:
    (sandbox.workspace / "notes.txt").write_text("hello\n")
    for magic in ("%less notes.txt", "%more notes.txt"):
        r = sandbox.execute(magic)
        assert r.success and r.payload == [{"source": "page", "data": {"text/plain": "hello\n"}, "start": 0}]


def test_autosave_sets_the_interval_as_ipykernel_does(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("%autosave 60")
    assert r.stdout == "Autosaving every 60 seconds\n"
    assert r.outputs[0].data == {"application/javascript": "IPython.notebook.set_autosave_interval(60000)"}  # type: ignore[union-attr]


def test_what_needs_a_program_or_another_tool_refuses_in_one_line(sandbox: PythonSandbox) -> None:
    # `!ls`, %sx, %system and %%bash run in the confined shell (test_confined_shell.py).
    for magic, words in (
        ("%%script bash\nls", "no shell"), ("%%perl\nprint 1", "no shell"), ("%clear", "no shell"),
        ("%man ls", "no shell"),
        ("%conda install x", "only %pip"), ("%mamba install x", "only %pip"), ("%uv pip install x", "only %pip"),
        ("%connect_info", "cannot connect"), ("%qtconsole", "cannot connect"),
        ("%matplotlib qt", "GUI event loops"), ("import subprocess\nsubprocess.run(['ls'])", None),
    ):
        r = sandbox.execute(magic)
        assert not r.success, magic
        if words is None:
            continue
        assert r.error is not None and r.error.ename == "UsageError", magic
        assert words in r.error.evalue and r.stderr.count("\n") == 1, (magic, r.stderr)


def test_gui_loops_are_refused_as_ipython_reports_them(sandbox: PythonSandbox) -> None:
    # IPython's %gui logs a failure to start a loop instead of raising.
    r = sandbox.execute("%gui qt")
    assert "GUI event loops are not available in this sandbox" in r.stderr and r.stderr.count("\n") == 1


def test_the_output_history_keeps_each_cells_streams_in_order_without_wrapping_write(sandbox: PythonSandbox) -> None:
    from wasm_kernel.runtime.guest_config import CellOptions

    first = sandbox.execute(
        "import sys\nprint('a')\nprint('e', file=sys.stderr)\nprint('b', end='')\nprint('write' in vars(sys.stdout))",
        cell=CellOptions(execution_count=1, store_history=True),
    )
    # IPython's own _tee would put a Python function on sys.stdout.write for the cell.
    assert first.stdout == "a\nbFalse\n" and first.stderr == "e\n"
    kept = sandbox.execute(
        "h = get_ipython().history_manager.outputs[1]\n"
        "print([(o.output_type, ''.join(o.bundle['stream'])) for o in h])",
        cell=CellOptions(execution_count=2, store_history=True),
    )
    assert kept.stdout == "[('out_stream', 'a\\n'), ('err_stream', 'e\\n'), ('out_stream', 'bFalse\\n')]\n"


def test_the_output_history_keeps_at_most_its_cap_of_a_flooding_cell(sandbox: PythonSandbox) -> None:
    # Kept whole, a cell printing in a loop until its CPU time ran out filled the
    # guest's memory with copies of what it printed (tests/security: stderr-flood).
    from wasm_kernel.runtime.guest_config import CellOptions

    flood = sandbox.execute(
        "import sys, _wasm_kernel_guest as g\n"
        "for _ in range(3 * (g.CAPTURE_MAX_BYTES >> 16)):\n"
        "    sys.stderr.write('y' * 32768)\n"
        "    sys.stdout.write('x' * 32768)",
        cell=CellOptions(execution_count=1, store_history=True),
    )
    assert flood.success
    kept = sandbox.execute(
        "import _wasm_kernel_guest as g\n"
        "h = get_ipython().history_manager.outputs[1]\n"
        "n = sum(len(s) for o in h for s in o.bundle['stream'])\n"
        "print(n == g.CAPTURE_MAX_BYTES, {o.output_type for o in h} == {'out_stream', 'err_stream'})",
        cell=CellOptions(execution_count=2, store_history=True),
    )
    assert kept.stdout == "True True\n", kept.stdout


def test_the_pager_and_next_input_are_payloads_as_in_ipykernel(sandbox: PythonSandbox) -> None:
    # `obj?` pages through IPython's own payloadpage.page, the show_in_pager hook.
    r = sandbox.execute("len?")
    assert r.success and len(r.payload) == 1
    page = r.payload[0]
    assert page["source"] == "page" and page["start"] == 0 and "Signature" in page["data"]["text/plain"]
    r = sandbox.execute("get_ipython().set_next_input('y = 2', replace=True)")
    assert r.payload == [{"source": "set_next_input", "text": "y = 2", "replace": True}]


def test_the_default_extensions_are_loaded_by_ipythons_own_loader(sandbox: PythonSandbox) -> None:
    # IPython 9 loads `storemagic` as IPython.extensions.storemagic.
    r = sandbox.execute("from IPython.core.shellapp import InteractiveShellApp\n"
                        "loaded = {m.rsplit('.', 1)[-1] for m in get_ipython().extension_manager.loaded}\n"
                        "wanted = InteractiveShellApp().default_extensions\n"
                        "print(wanted, set(wanted) <= loaded)")
    assert r.stdout == "['storemagic'] True\n"
