import re

from wasm_kernel import PythonSandbox


def test_variables_imports_functions_and_classes_survive_between_cells(sandbox: PythonSandbox) -> None:
    assert sandbox.execute("import math\nx = 21\ndef double(v):\n    return v * 2\nclass P:\n    k = 'kept'").success
    r = sandbox.execute("print(double(x), math.pi > 3, P.k)")
    assert r.success, r
    assert r.stdout == "42 True kept\n"


def test_final_expression_is_echoed_as_execute_result(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("a = 40\na + 2")
    assert [o.kind for o in r.outputs] == ["execute_result"]
    assert r.outputs[0].data["text/plain"] == "42"


def test_trailing_semicolon_and_none_suppress_the_echo(sandbox: PythonSandbox) -> None:
    assert sandbox.execute("1 + 1;").outputs == []
    assert sandbox.execute("None").outputs == []


def test_underscore_holds_the_last_result(sandbox: PythonSandbox) -> None:
    sandbox.execute("7 * 6")
    assert sandbox.execute("_ + 0").outputs[0].data["text/plain"] == "42"


def test_exception_gives_guest_only_traceback_and_state_is_kept(sandbox: PythonSandbox) -> None:
    sandbox.execute("kept = 1")
    r = sandbox.execute("def f():\n    raise ValueError('boom')\nf()")
    assert not r.success
    assert r.error is not None
    assert (r.error.ename, r.error.evalue) == ("ValueError", "boom")
    text = re.sub(r"\x1b\[[0-9;]*m", "", "".join(r.error.traceback))
    assert "raise ValueError('boom')" in text and "Cell In[2], line 3" in text
    for leak in ("_wasm_kernel", "site-packages", "wasmtime", "/work", "wasm backtrace"):
        assert leak not in text
    assert sandbox.execute("kept").outputs[0].data["text/plain"] == "1"


def test_syntax_error_is_reported_as_error(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("def f(:")
    assert r.error is not None and r.error.ename == "SyntaxError"
    assert "ast.py" not in "".join(r.error.traceback)


def test_guest_reports_its_own_python_version(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import sys; print(sys.version_info[:2], sys.platform)")
    assert r.stdout.strip() == "(3, 15) wasi"
    assert r.metadata["python_version"].startswith("3.15")
    assert "session_id" not in r.metadata


def test_modules_in_the_workspace_are_importable(sandbox: PythonSandbox) -> None:
    (sandbox.workspace / "helpers.py").write_text("def greet():\n    return 'hello from the workspace'\n")
    assert sandbox.execute("import helpers\nprint(helpers.greet())").stdout == "hello from the workspace\n"
