"""jupyter_kernel_test's protocol conformance suite against the installed kernel:
every message is validated against the Jupyter messaging spec (v5)."""

from __future__ import annotations

import os
import tempfile
import unittest

import jupyter_kernel_test
import pytest

pytestmark = pytest.mark.slow  # a kernel of its own; every message checked against the spec's schemas


class WasmKernelConformance(jupyter_kernel_test.KernelTests):
    kernel_name = "wasm-python"
    language_name = "python"
    file_extension = ".py"

    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"

    completion_samples = [
        {"text": "zi", "matches": {"zip"}},
        {"text": "import js", "matches": {"json"}},
        {"text": "str.upp", "matches": {"upper"}},
    ]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2", "for i in range(3):"]
    invalid_code_samples = ["import = 7q", "1 +* 2"]

    code_page_something = "print?"
    code_generate_error = "raise ValueError('boom')"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "[n*n for n in range(3)]", "result": "[0, 1, 4]"}]
    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))", "mime": "text/html"},
        {"code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))", "mime": "text/latex"},
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    _data_dir: tempfile.TemporaryDirectory[str] | None = None
    _saved: str | None = None

    @classmethod
    def setUpClass(cls) -> None:
        # The kernel inherits this: its sessions go to a scratch folder, not the user's.
        cls._data_dir = tempfile.TemporaryDirectory(prefix="wk-conformance-")
        cls._saved = os.environ.get("JUPYTER_DATA_DIR")
        os.environ["JUPYTER_DATA_DIR"] = cls._data_dir.name
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        if cls._saved is None:
            os.environ.pop("JUPYTER_DATA_DIR", None)
        else:
            os.environ["JUPYTER_DATA_DIR"] = cls._saved
        assert cls._data_dir is not None
        cls._data_dir.cleanup()


if __name__ == "__main__":
    unittest.main()
