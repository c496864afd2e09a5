"""A notebook that runs on ipykernel runs here with the same outputs.

Every idiom below runs, in order, in native ipykernel and in wasm-python, started
side by side in this test run on the same notebook folder, and the two kernels'
messages are compared after normalising what legitimately differs: ANSI colours,
object addresses, timings, the host's and the guest's file paths, and the file
changes display wasm-python adds. "shape" idioms compare message types, streams
and MIME types only (a PNG's bytes, an HTML table's styling); the rest compare
content exactly. What the sandbox forbids on purpose, and the differences the
README lists, are tested at the end on their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.kernel_client import Execution, RunningKernel
from support.parity import ANSI, normalise

pytestmark = pytest.mark.slow  # native ipykernel and wasm-python side by side, every idiom on both

@dataclass(frozen=True)
class Idiom:
    code: str
    compare: str = "exact"  # "exact" or "shape"


IDIOMS = [
    Idiom("x = 40 + 2\nx"),
    Idiom("print('hello')\nprint('world', end='')"),
    Idiom("_"),
    Idiom("In[1], Out[1], _i1, _1"),
    Idiom("y = 7;"),
    Idiom("y * 6;"),
    Idiom("import numpy as np\nprint(np.arange(5))"),
    Idiom("np.arange(6).reshape(2, 3).tolist()"),
    Idiom("from IPython import get_ipython\nfrom IPython.core.interactiveshell import InteractiveShell\n"
          "isinstance(get_ipython(), InteractiveShell), get_ipython() is InteractiveShell.instance()"),
    Idiom("get_ipython().kernel is not None, get_ipython().kernel.get_parent()['header']['msg_type']"),
    Idiom("%%capture captured\nprint('inside capture')\ndisplay('also captured')"),
    Idiom("captured.stdout, len(captured.outputs)"),
    Idiom("import asyncio\nawait asyncio.sleep(0.01)\n'awaited'"),
    Idiom("async def twice(v):\n    await asyncio.sleep(0)\n    return 2 * v\nawait asyncio.gather(twice(1), twice(2))"),
    Idiom("%precision 3\nimport math\nmath.pi"),
    Idiom("%precision\nmath.pi"),
    Idiom("%xmode Minimal"),
    Idiom("1 / 0"),
    Idiom("%xmode Context"),
    Idiom("def inner():\n    return {}['missing']\ndef outer():\n    return inner()\nouter()"),
    Idiom("undefined_name"),
    Idiom("%env WK_PARITY=1"),
    Idiom("%env WK_PARITY"),
    Idiom("%%html\n<b>bold</b>"),
    Idiom("%%markdown\n# A title"),
    Idiom("%%latex\n$x^2$"),
    Idiom("%%javascript\nconsole.log(1)"),
    Idiom('%%svg\n<svg width="10" height="10"></svg>'),
    Idiom("from IPython.display import display, HTML, Markdown, JSON\ndisplay(HTML('<i>x</i>'), Markdown('**y**'))"),
    Idiom("JSON({'a': [1, 2]})"),
    Idiom("handle = display('first', display_id='parity-id')\nhandle.update('second')"),
    Idiom("from IPython.display import clear_output\nprint('a')\nclear_output(wait=True)\nprint('b')"),
    Idiom("class Rich:\n    def _repr_html_(self):\n        return '<b>rich</b>'\n    def _repr_markdown_(self):\n"
          "        return '**rich**'\nRich()"),
    Idiom("{'b': 2, 'a': 1}"),
    Idiom("list(range(40))"),
    Idiom("int, str"),
    Idiom("def f(a, b=2):\n    '''Doc.'''\nf"),
    Idiom("import pandas as pd\ndf = pd.read_csv('data/heights.csv')\nprint(df.shape)\ndf", "shape"),
    Idiom("df.height.mean().round(2), list(df.columns)"),
    Idiom("from helper import double\ndouble(21)"),
    Idiom("%run script.py"),
    Idiom("ran_value"),
    Idiom("import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
          "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()", "shape"),
    Idiom("fig, ax = plt.subplots()\nax.plot([3, 1])\nplt.close(fig)\nfig", "shape"),
    Idiom("plt.plot([2, 2])\nraise ValueError('after a plot')", "shape"),
    Idiom("%config InlineBackend.figure_format = 'svg'\nplt.plot([1, 0])\nplt.show()", "shape"),
    Idiom("%load_ext autoreload\n%autoreload 2"),
    Idiom("%who"),
    Idiom("%time total = sum(range(1000))"),
    Idiom("%timeit -n 5 -r 2 sum(range(100))"),
    Idiom("%%timeit -n 3 -r 2\nsorted(range(50))"),
    Idiom("%history -n 1-3"),
    Idiom("%prun -q sum(range(10))"),
    Idiom("%%writefile written.txt\nwritten by a cell magic"),
    Idiom("open('written.txt').read()"),
    Idiom("import sys\nprint('to stderr', file=sys.stderr)\nsys.stdout.isatty()"),
    Idiom("raise KeyError('k')"),
    Idiom("%lsmagic", "shape"),
    Idiom("%who_ls"),
    Idiom("%reset_selective -f ^y$\n'y' in dir()"),
    Idiom("%%capture --no-stderr c2\nimport warnings\nwarnings.warn('careful')"),
    Idiom("%store x\n%store -r x\nx"),
    Idiom("%load script.py"),
    Idiom("import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.05)"),
    # Shell lines: bash on a pty under ipykernel, the confined shell in the guest.
    Idiom("!cat data/heights.csv"),
    Idiom("!ls"),
    Idiom("!ls data helper.py"),
    Idiom("files = !ls data\nfiles"),
    Idiom("!head -n 2 data/heights.csv | cut -d, -f1"),
    Idiom("!wc -l data/heights.csv && grep -c a data/heights.csv"),
    Idiom("!cat nofile\n_exit_code"),
    Idiom("folder = 'data'\n!ls {folder} && echo $folder"),
    Idiom("%sx sort -r data/heights.csv"),
    Idiom("%%bash\necho out\necho err >&2"),
    Idiom("!mkdir -p out && echo hi > out/h.txt && cat out/h.txt && rm -r out\n_exit_code"),
    # `python` as a command: a child interpreter of the sandbox, a real process on ipykernel.
    Idiom("!python -c 'print(6 * 7)'"),
    Idiom("!python script.py"),
    Idiom("!python -c 'import sys; print(\"to stderr\", file=sys.stderr); sys.exit(3)'\n_exit_code"),
    Idiom("import subprocess, sys\nr = subprocess.run([sys.executable, '-c', 'import sys; print(sys.argv[1:]); "
          "sys.exit(3)', 'a'], capture_output=True, text=True)\nr.returncode, r.stdout, r.stderr"),
    Idiom("subprocess.check_output([sys.executable, '-c', 'print(input().upper())'], input=b'hi')"),
    Idiom("r = subprocess.run([sys.executable, '-c', 'def f():\\n    1/0\\nf()'], capture_output=True, text=True)\n"
          "r.returncode, r.stderr.splitlines()[-3:]"),
    Idiom("import os\nos.system('python -c \"raise SystemExit(2)\"')"),
    Idiom("out = !python -c 'print(1); print(2)'\nout"),
    Idiom("len?"),
    Idiom("%less script.py"),
    Idiom("get_ipython().set_next_input('z = 3')"),
    Idiom("%autosave 90"),
    Idiom("exit(keep_kernel=True)"),
]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    base = tmp_path_factory.mktemp("parity")
    folder = base / "course"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "heights.csv").write_text("name,height\nada,1.70\nbob,1.82\ncy,1.65\n")
    (folder / "helper.py").write_text("def double(v):\n    return 2 * v\n")
    (folder / "script.py").write_text("print('script ran')\nran_value = 'from the script'\n")
    env = {"JPY_SESSION_NAME": str(folder / "lesson.ipynb"), "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "SHELL": "/bin/bash"}  # IPython runs `!` lines with $SHELL: bash, as on most machines
    native = RunningKernel(base / "native", cwd=folder, env=env, kernel_name="python3")
    wasm = RunningKernel(base / "wasm", cwd=folder, env=env)
    try:
        yield native, wasm
    finally:
        for k in (native, wasm):
            k.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def ran(kernels: tuple[RunningKernel, RunningKernel]) -> list[tuple[Idiom, Execution, Execution]]:
    native, wasm = kernels
    return [(idiom, native.execute(idiom.code, timeout=120), wasm.execute(idiom.code, timeout=120)) for idiom in IDIOMS]


def test_there_are_at_least_forty_idioms() -> None:
    assert len(IDIOMS) >= 40


@pytest.mark.parametrize("index", range(len(IDIOMS)), ids=[i.code.splitlines()[0][:40] for i in IDIOMS])
def test_each_idiom_shows_what_ipykernel_shows(ran: list[tuple[Idiom, Execution, Execution]], index: int) -> None:
    idiom, native, wasm = ran[index]
    assert normalise(wasm, idiom.compare) == normalise(native, idiom.compare), idiom.code


def test_execution_counts_match(ran: list[tuple[Idiom, Execution, Execution]]) -> None:
    counts = [(n.reply["content"]["execution_count"], w.reply["content"]["execution_count"]) for _, n, w in ran]
    assert all(a == b for a, b in counts), counts


def test_completion_and_inspection_answer_like_ipykernel(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    native, wasm = kernels
    for kernel in kernels:
        kernel.execute("import os\nparity_dict = {'alpha': 1}")
    for code in ("parity_dict['al", "os.pa", "pri"):
        got = [k.request("complete", code, len(code))["content"] for k in (native, wasm)]
        assert set(got[1]["matches"]) & set(got[0]["matches"]), (code, got)
        assert got[1]["cursor_start"] == got[0]["cursor_start"], (code, got)
    for code in ("double", "parity_dict"):
        got = [k.request("inspect", code, len(code), 0)["content"] for k in (native, wasm)]
        assert got[1]["found"] == got[0]["found"] is True
        first = [ANSI.sub("", g["data"]["text/plain"]).splitlines()[0] for g in got]
        assert first[1] == first[0], first


# --- what differs on purpose ------------------------------------------------------


def test_what_the_sandbox_forbids_fails_with_one_line(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    _, wasm = kernels
    for code in ("%%script bash\necho hi", "%%perl\nprint 1", "import subprocess\nsubprocess.run(['ls'])"):
        run = wasm.execute(code)
        assert run.reply["content"]["status"] == "error", code
        said = run.stream("stderr") or run.reply["content"]["evalue"]
        assert said.strip().count("\n") == 0 and "not available" in said, (code, said)
    run = wasm.execute("!curl https://example.com")  # a command the shell has not: 127, one line
    assert run.stream().startswith("sh: 1: curl: not found in this sandbox (supported: ") and run.stream().count("\n") == 1


def test_the_operator_can_turn_the_shell_off(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "jupyter", argv=["--WasmKernel.shell_commands=False"])
    try:
        for code in ("!echo hi", "%%bash\necho hi", "%sx echo hi", "%system echo hi", "x = !ls"):
            run = kernel.execute(code)
            assert run.reply["content"]["ename"] == "UsageError", code
            assert run.stream("stderr").count("\n") == 1 and "no shell" in run.stream("stderr"), code
    finally:
        kernel.km.shutdown_kernel(now=True)


def test_numpys_default_integer_is_32_bit_in_the_guest(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    # wasm32: numpy's default integer is intp, 32 bits (README, differences).
    native, wasm = kernels
    code = "np.arange(3).dtype.name, np.array([1]).itemsize, np.int64(7).dtype.name"
    assert normalise(native.execute(code), "exact")[0][1] == "('int64', 8, 'int64')"
    assert normalise(wasm.execute(code), "exact")[0][1] == "('int32', 4, 'int64')"
