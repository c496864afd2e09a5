"""Rich results as IPython users expect: MIME bundles, display(), IPython.display."""

import base64

import pytest

from wasm_kernel import PythonSandbox

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
REPRS = {
    "_repr_html_": ("'<b>hi</b>'", "text/html", "<b>hi</b>"),
    "_repr_markdown_": ("'**hi**'", "text/markdown", "**hi**"),
    "_repr_svg_": ("'<svg></svg>'", "image/svg+xml", "<svg></svg>"),
    "_repr_png_": (f"__import__('base64').b64decode('{PNG}')", "image/png", PNG),
    "_repr_jpeg_": ("b'\\xff\\xd8jpeg'", "image/jpeg", base64.b64encode(b"\xff\xd8jpeg").decode()),
    "_repr_latex_": ("'$x^2$'", "text/latex", "$x^2$"),
    "_repr_json_": ("{'a': [1, 2]}", "application/json", {"a": [1, 2]}),
}


@pytest.mark.parametrize("method", sorted(REPRS))
def test_last_expression_carries_each_repr_method(sandbox: PythonSandbox, method: str) -> None:
    value, mime, expected = REPRS[method]
    r = sandbox.execute(f"class R:\n    def {method}(self):\n        return {value}\n    def __repr__(self):\n        return 'R()'\nR()")
    assert r.success, r.error
    (out,) = r.outputs
    assert out.kind == "execute_result"
    assert out.data[mime] == expected
    assert out.data["text/plain"] == "R()"


def test_repr_mimebundle_and_metadata(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        "class B:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
        "        return {'text/html': '<i>b</i>', 'application/vnd.custom+json': {'k': 1}}, {'text/html': {'isolated': True}}\nB()"
    )
    (out,) = r.outputs
    assert out.data["text/html"] == "<i>b</i>"
    assert out.data["application/vnd.custom+json"] == {"k": 1}
    assert out.metadata == {"text/html": {"isolated": True}}
    assert "text/plain" in out.data


def test_a_failing_repr_method_shows_its_traceback_and_fails_the_cell_as_in_ipykernel(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("class Bad:\n    def _repr_html_(self):\n        raise RuntimeError('nope')\n    def __repr__(self):\n        return 'Bad'\nBad()")
    assert [o.kind for o in r.outputs] == ["error", "execute_result"]
    assert r.outputs[0].ename == "RuntimeError"  # type: ignore[union-attr]
    assert r.outputs[1].data == {"text/plain": "Bad"}  # type: ignore[union-attr]
    assert not r.success


def test_display_is_a_builtin_and_supports_display_id_and_update(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("h = display('first', display_id='abc')\nh.update('second')\ndisplay('third', display_id=True)")
    kinds = [(o.kind, o.data["text/plain"], o.display_id) for o in r.outputs]
    assert kinds[0] == ("display_data", "'first'", "abc")
    assert kinds[1] == ("update_display_data", "'second'", "abc")
    assert kinds[2][0] == "display_data" and kinds[2][2] and kinds[2][2] != "abc"


def test_clear_output_is_forwarded_with_wait(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("from IPython.display import clear_output\ndisplay(1)\nclear_output(wait=True)\ndisplay(2)")
    assert [(o.kind, o.wait) for o in r.outputs] == [("display_data", False), ("clear_output", True), ("display_data", False)]


def test_ipython_display_module_works_as_notebooks_import_it(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        "from IPython.display import display, HTML, Markdown, Image, JSON, clear_output, SVG, Latex\n"
        f"display(HTML('<p>x</p>'), Markdown('# t'), JSON({{'a': 1}}), Latex('$y$'))\n"
        f"Image(data=__import__('base64').b64decode('{PNG}'))"
    )
    assert r.success, r.error
    mimes = [sorted(k for k in o.data if k != "text/plain") for o in r.outputs]
    assert mimes == [["text/html"], ["text/markdown"], ["application/json"], ["text/latex"], ["image/png"]]
    assert r.outputs[-1].kind == "execute_result"
    assert r.outputs[-1].data["image/png"] == PNG


def test_image_from_a_workspace_file(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        f"open('dot.png', 'wb').write(__import__('base64').b64decode('{PNG}'))\n"
        "from IPython.display import Image\nImage(filename='dot.png')"
    )
    assert r.outputs[-1].data["image/png"] == PNG


def test_dataframe_shows_as_an_html_table(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    (out,) = r.outputs
    assert "<table" in out.data["text/html"] and "<td>x</td>" in out.data["text/html"]
    assert "a  b" in out.data["text/plain"]


@pytest.mark.slow
def test_open_matplotlib_figures_are_shown_as_png_at_the_end_of_the_cell(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.figure()\nplt.bar([1], [2]);")
    pngs = [o for o in r.outputs if "image/png" in o.data]
    assert len(pngs) == 2
    assert base64.b64decode(pngs[0].data["image/png"]).startswith(b"\x89PNG")
    # figures were closed: the next cell shows nothing
    assert sandbox.execute("x = 1").outputs == []


def test_plt_show_displays_immediately(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nprint('after show')")
    assert [o.kind for o in r.outputs] == ["display_data"]
    assert r.stdout == "after show\n"
    assert "non-interactive" not in r.stderr


def test_classes_are_shown_by_repr_not_their_repr_methods(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("class H:\n    def _repr_html_(self):\n        return '<b>'\nH")
    assert list(r.outputs[0].data) == ["text/plain"]


@pytest.mark.slow
def test_matplotlib_imports_after_the_ipython_shim(sandbox: PythonSandbox) -> None:
    # matplotlib reads IPython.version_info once IPython is imported: notebooks do
    # `from IPython.display import ...` before plotting all the time.
    first = sandbox.execute("from IPython.display import HTML")
    assert first.success
    result = sandbox.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
    assert result.success, result.error
    assert [o.data.keys() >= {"image/png"} for o in result.outputs] == [True]
