"""A web request the operator's list does not allow is refused in one line, through
every HTTP client a notebook uses and for both schemes, in a real kernel: with no
list at all (the default) and with a list that does not name the host. The error's
last traceback line is the message, which names the host and the setting that
would allow it, and the traceback around it is the cell's line and one folded line
for the library's frames: no chained "During handling" block, no 87 lines of
requests' frames, no "unknown url type: https"."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from support.kernel_client import Execution, RunningKernel

pytestmark = pytest.mark.slow  # kernels of their own

ANSI = re.compile(r"\x1b\[[0-9;]*m")
HOST = "data.example.org"
SETTING = "c.WasmKernel.network_allow"
MAX_LINES = 10  # the header, the cell's few lines, one folded line, the message

# Each client as a notebook calls it; {scheme} is http or https.
CLIENTS = {
    "urllib": "import urllib.request\nurllib.request.urlopen('{scheme}://%s/data.csv')" % HOST,
    "http.client": "import http.client\nc = http.client.{connection}('%s')\nc.request('GET', '/')\nc.getresponse()" % HOST,
    "urllib3": "import urllib3\nurllib3.PoolManager().request('GET', '{scheme}://%s/')" % HOST,
    "requests": "import requests\nrequests.get('{scheme}://%s/')" % HOST,
    "pandas": "import pandas as pd\npd.read_csv('{scheme}://%s/data.csv')" % HOST,
}
LISTS = {"no list": [], "another host listed": ["--WasmKernel.network_allow=other.example.org"]}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RunningKernel]]:
    started: dict[str, RunningKernel] = {}
    try:
        for name, argv in LISTS.items():
            started[name] = RunningKernel(tmp_path_factory.mktemp("refusals") / "jupyter", argv=argv)
        yield started
    finally:
        for k in started.values():
            k.shutdown()


def traceback_lines(run: Execution) -> list[str]:
    assert run.error is not None, run.outputs
    return [line for line in ANSI.sub("", "\n".join(run.error["traceback"])).splitlines() if line.strip()]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("allow_list", sorted(LISTS))
def test_a_request_to_a_host_not_allowed_is_refused_in_one_line(
    kernels: dict[str, RunningKernel], allow_list: str, client: str, scheme: str,
) -> None:
    code = CLIENTS[client].format(scheme=scheme, connection="HTTPSConnection" if scheme == "https" else "HTTPConnection")
    run = kernels[allow_list].execute(code, timeout=120)
    lines = traceback_lines(run)
    message = f"network access to {HOST} is not allowed in this sandbox; the operator can allow it with {SETTING}"
    assert lines[-1].endswith(": " + message), lines
    assert run.error is not None and run.error["evalue"] == message
    text = "\n".join(lines)
    assert "During handling" not in text and "direct cause" not in text, text
    assert len(lines) <= MAX_LINES, text
    assert run.stream("stderr") == "" and run.stream() == ""  # nothing else is printed


def test_a_notebook_that_turned_its_list_off_is_told_how_to_turn_it_on(kernels: dict[str, RunningKernel]) -> None:
    k = kernels["another host listed"]
    assert k.execute("%network off").status == "ok"
    try:
        run = k.execute("import requests\nrequests.get('https://other.example.org/')", timeout=120)
        lines = traceback_lines(run)
        assert lines[-1] == ("PermissionError: network access to other.example.org is not allowed in this sandbox; "
                             "this notebook turned it off with %network off; %network reset turns it back on"), lines
        assert len(lines) <= MAX_LINES, lines
    finally:
        assert k.execute("%network reset").status == "ok"
