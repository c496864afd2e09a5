"""The guest's HTTP clients through the host's network door, on the real guest, against
local servers: urllib, http.client, urllib3 and requests, and the libraries on top
(pandas, seaborn, sklearn's fetch_openml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.http_servers import CSV, LocalWeb
from support.openml import serve_openml
from wasm_kernel.host.network_policy import NetworkPolicy, parse_allow, parse_networks
from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions, TurnLimits
from wasm_kernel.runtime.provisioning import new_guest


@pytest.fixture(scope="module")
def guest(web: LocalWeb, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    workspace = tmp_path_factory.mktemp("ws")
    policy = NetworkPolicy(allow=parse_allow([f"127.0.0.1:{web.port}", f"localhost:{web.port}"]),
                           private_ok=parse_networks(["127.0.0.1/32"]), max_requests_per_cell=5)
    g = new_guest(workspace, options=GuestOptions(network=policy))
    yield g
    g.close()


def run(guest, code: str, **limits: object):  # type: ignore[no-untyped-def]
    return guest.run_cell(code, limits=TurnLimits(**limits), options=CellOptions())  # type: ignore[arg-type]


def test_urlopen_and_urlretrieve_fetch_the_right_bytes(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, f"import urllib.request\nr = urllib.request.urlopen({web.url('/data.csv')!r})\n"
                     "print(r.status, r.headers['Content-Type'], r.read())")
    assert out.status == "ok", out.error
    assert out.stdout == f"200 text/csv {CSV!r}\n"
    assert out.network_requests == 1 and out.network_bytes == len(CSV)
    out = run(guest, f"path, _ = urllib.request.urlretrieve({web.url('/data.csv')!r}, '/app/data.csv')\n"
                     "print(open(path, 'rb').read() == " + repr(CSV) + ")")
    assert out.stdout == "True\n", out.error


def test_pandas_reads_a_csv_from_a_url(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, f"import pandas as pd\ndf = pd.read_csv({web.url('/data.csv')!r})\nprint(df.total.sum())")
    assert out.status == "ok", out.error
    assert out.stdout == "8\n"


def test_a_large_download_streams_with_the_right_bytes(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    n = 50 << 20
    out = run(guest, f"import urllib.request, hashlib\nh = hashlib.sha256()\n"
                     f"with urllib.request.urlopen({web.url(f'/bytes?n={n}')!r}) as r:\n"
                     "    while chunk := r.read(1 << 20):\n        h.update(chunk)\nprint(h.hexdigest())")
    import hashlib

    block = bytes(range(256)) * 256
    expected = hashlib.sha256((block * (n // len(block)))).hexdigest()
    assert out.status == "ok", out.error
    assert out.stdout == expected + "\n"
    assert out.network_bytes == n


def test_refusals_are_one_permission_error_line(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, "import urllib.request\nurllib.request.urlopen('http://example.com/')")
    assert out.status == "error" and out.error is not None
    assert out.error["ename"] == "PermissionError"
    assert out.error["evalue"] == ("network access to example.com is not allowed in this sandbox; "
                                   "the operator can allow it with c.WasmKernel.network_allow")


def test_a_cell_may_make_only_so_many_requests(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, "import urllib.request\nfor _ in range(6):\n"
                     f"    urllib.request.urlopen({web.url('/api')!r}).read()")
    assert out.status == "error" and out.error is not None
    assert "this cell made 5 requests, the most a cell may make" in out.error["evalue"]
    assert run(guest, f"urllib.request.urlopen({web.url('/api')!r}).read()").status == "ok"  # the next cell may


def test_without_a_list_a_request_is_refused_naming_its_host_and_the_setting(tmp_path: Path, web: LocalWeb) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    g = new_guest(workspace, options=GuestOptions())
    served = len(web.server.requests)  # type: ignore[attr-defined]
    try:
        out = run(g, f"import urllib.request\nurllib.request.urlopen({web.url('/data.csv')!r})")
        assert out.status == "error" and out.error is not None and out.error["ename"] == "PermissionError"
        assert out.error["evalue"] == (f"network access to 127.0.0.1:{web.port} is not allowed in this sandbox; "
                                       "the operator can allow it with c.WasmKernel.network_allow")
        assert len(web.server.requests) == served  # type: ignore[attr-defined]  # refused on the host, never sent
    finally:
        g.close()


def test_requests_is_importable_and_goes_through_the_door(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, f"import requests\nr = requests.get({web.url('/api')!r})\nprint(r.status_code, r.json())\n"
                     f"s = requests.Session()\nprint(s.post({web.url('/post')!r}, data={{'a': 1}}).json())\n"
                     f"print(len(requests.get({web.url('/bytes?n=1000000')!r}, stream=True).content))")
    assert out.status == "ok", out.error
    assert out.stdout.splitlines() == ["200 {'ok': True, 'items': [1, 2, 3]}", "{'method': 'POST', 'body': 'a=1'}",
                                       "1000000"]
    refused = run(guest, "requests.get('http://example.com/')")
    assert refused.error is not None and refused.error["ename"] == "PermissionError"


def test_a_whole_body_read_at_once_has_the_right_bytes_for_every_client(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    n = 3_000_000
    expected = hashlib.sha256((bytes(range(256)) * (n // 256 + 1))[:n]).hexdigest()
    url = web.url(f"/bytes?n={n}")
    out = run(guest, "import hashlib, urllib.request, requests, urllib3, http.client\n"
                     "bodies = [urllib.request.urlopen(URL).read(), requests.get(URL).content,\n"
                     "          urllib3.PoolManager().request('GET', URL).data]\n"
                     f"c = http.client.HTTPConnection('127.0.0.1', {web.port}); c.request('GET', URL)\n"
                     "bodies.append(c.getresponse().read())\n"
                     "print([hashlib.sha256(b).hexdigest() for b in bodies])\n"
                     "print(all(hash(b) == hash(bytes(bytearray(b))) and b == bytes(bytearray(b)) for b in bodies))"
              .replace("URL", repr(url)))
    assert out.status == "ok", out.error
    assert out.stdout.splitlines() == [str([expected] * 4), "True"]
    assert out.network_bytes == 4 * n


def test_a_response_of_an_earlier_cell_collected_later_leaves_the_new_transfer_alone(  # type: ignore[no-untyped-def]
        guest, web: LocalWeb) -> None:
    out = run(guest, f"import urllib.request, gc\nold = urllib.request.urlopen({web.url('/data.csv')!r})")
    assert out.status == "ok", out.error
    out = run(guest, f"new = urllib.request.urlopen({web.url('/bytes?n=200000')!r})\n"
                     "del old\ngc.collect()\nprint(len(new.read()))")
    assert out.status == "ok", out.error
    assert out.stdout == "200000\n"


def test_a_body_cut_short_fails_in_one_line(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, f"import urllib.request\nurllib.request.urlopen({web.url('/short?n=500000&send=100000')!r}).read()")
    assert out.error is not None and out.error["ename"] == "DoorTransferError", out.error
    assert out.error["evalue"] == (f"{web.url('/short?n=500000&send=100000')}: the server ended the body after "
                                   "100,000 bytes, short of the length it announced")
    out = run(guest, f"import requests\nrequests.get({web.url('/short?n=500000&send=100000')!r})")
    assert out.error is not None and out.error["ename"] == "ChunkedEncodingError", out.error


def test_http_client_speaks_through_the_door_and_leaves_redirects_to_its_caller(  # type: ignore[no-untyped-def]
        guest, web: LocalWeb) -> None:
    out = run(guest, "import http.client\n"
                     f"c = http.client.HTTPConnection('127.0.0.1', {web.port})\n"
                     "c.request('GET', '/api'); r = c.getresponse(); print(r.status, r.getheader('Content-Type'), r.read())\n"
                     "c.request('POST', '/post', body=b'x=1'); print(c.getresponse().read())\n"
                     "c.putrequest('GET', '/chunked?text=ab,cd'); c.endheaders(); print(c.getresponse().read())\n"
                     "c.request('HEAD', '/data.csv'); r = c.getresponse(); print(r.getheader('Content-Length'), r.read())\n"
                     "c.request('GET', '/redirect?to=/api'); r = c.getresponse(); print(r.status, r.getheader('Location'))\n"
                     "print(http.client.HTTPSConnection.default_port)")
    assert out.status == "ok", out.error
    assert out.stdout.splitlines() == [
        "200 application/json b'{\"ok\": true, \"items\": [1, 2, 3]}'", "b'{\"method\": \"POST\", \"body\": \"x=1\"}'",
        "b'abcd'", f"{len(CSV)} b''", "302 /api", "443"]
    assert out.network_requests == 5
    refused = run(guest, "c = http.client.HTTPSConnection('example.com')\nc.request('GET', '/')\nc.getresponse()")
    assert refused.error is not None and refused.error["ename"] == "PermissionError"
    assert refused.error["evalue"].startswith("network access to example.com is not allowed in this sandbox")


def test_urllib3_follows_redirects_itself_and_never_retries_a_refusal(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, "import urllib3\npool = urllib3.PoolManager()\n"
                     f"r = pool.request('GET', {web.url('/redirect?to=/api')!r})\n"
                     "print(r.status, r.json(), [h.status for h in r.retries.history])\n"
                     f"r = pool.request('GET', {web.url('/bytes?n=300000')!r}, preload_content=False)\n"
                     "print(sum(len(piece) for piece in r.stream(65536)))")
    assert out.status == "ok", out.error
    assert out.stdout.splitlines() == ["200 {'ok': True, 'items': [1, 2, 3]} [302]", "300000"]
    assert out.network_requests == 3, "each hop is a request of its own, checked by the host"
    refused = run(guest, "pool.request('GET', 'http://example.com/')")
    assert refused.error is not None and refused.error["ename"] == "NetworkDoorError", refused.error
    assert "example.com is not allowed" in refused.error["evalue"]
    assert refused.network_requests == 1, "urllib3's retries would have asked again"


def test_requests_keeps_cookies_follows_redirects_and_decodes_gzip(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    import gzip
    import json

    data = json.dumps({"rows": list(range(2000))}).encode()
    url = web.serve("/rows.json", data)
    out = run(guest, "import requests\ns = requests.Session()\n"
                     f"s.get({web.url('/set-cookie?name=team&value=blue')!r})\n"
                     f"print(s.get({web.url('/headers')!r}).json()['Cookie'])\n"
                     f"r = s.get({url!r})\nprint(r.headers['Content-Encoding'], len(r.json()['rows']))\n"
                     f"r = s.get({web.url('/redirect?to=/api')!r})\nprint([h.status_code for h in r.history], r.url)")
    assert out.status == "ok", out.error
    assert out.stdout.splitlines() == ["team=blue", "gzip 2000", f"[302] {web.url('/api')}"]
    # What crossed the door is what the server sent: the compressed body.
    assert out.network_bytes < len(data) and len(gzip.compress(data, mtime=0)) <= out.network_bytes


def test_sklearn_fetch_openml_downloads_a_dataset(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, serve_openml(web) + "from sklearn.datasets import fetch_openml\n"
                     "bunch = fetch_openml('tiny', version=1, data_home='/app/openml')\n"
                     "print(bunch.frame.shape, bunch.target.tolist(), list(bunch.feature_names))")
    assert out.status == "ok", out.error
    assert out.stdout == "(3, 3) ['small', 'large', 'small'] ['width', 'height']\n"
    assert out.network_requests == 5  # search, description, features, qualities, the ARFF file (gzip)


def test_seaborn_load_dataset_downloads_into_its_data_home(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    source = web.url("/seaborn-data")
    out = run(guest, f"import seaborn, seaborn.utils as u\nu.DATASET_SOURCE = {source!r}\n"
                     f"u.DATASET_NAMES_URL = {source + '/dataset_names.txt'!r}\n"
                     "tips = seaborn.load_dataset('tips', data_home='/app/seaborn-data')\n"
                     "import os\nprint(len(tips), list(tips.day.cat.categories), os.listdir('/app/seaborn-data'))")
    assert out.status == "ok", out.error
    assert out.stdout == "3 ['Thur', 'Fri', 'Sat', 'Sun'] ['tips.csv']\n"


def test_https_through_the_door_is_verified(tmp_path: Path) -> None:
    tls = LocalWeb(tmp_path / "certs", tls=True)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = NetworkPolicy(allow=parse_allow([f"localhost:{tls.port}"]), private_ok=parse_networks(["127.0.0.1/32"]),
                           ca_file=tls.ca_file)
    g = new_guest(workspace, options=GuestOptions(network=policy))
    try:
        url = tls.url('/data.csv', host='localhost')
        out = run(g, f"import urllib.request, requests, http.client\nprint(urllib.request.urlopen({url!r}).read())\n"
                     f"print(requests.get({url!r}).content)\n"
                     f"c = http.client.HTTPSConnection('localhost', {tls.port})\nc.request('GET', '/data.csv')\n"
                     "print(c.getresponse().read())")
        assert out.status == "ok", out.error
        assert out.stdout == f"{CSV!r}\n" * 3
    finally:
        g.close()
        tls.close()


def test_an_interrupt_ends_a_download_that_would_run_for_hours(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    import threading

    threading.Timer(1.0, guest.interrupt).start()
    # The server sends a byte every 0.1 s for ever: returning at all is the interrupt's.
    out = guest.run_cell(f"import urllib.request\nurllib.request.urlopen({web.url('/slow?every=0.1')!r}).read()",
                         limits=TurnLimits(interrupt_grace_seconds=0.5), options=CellOptions())
    assert out.status == "error" or out.trap == "interrupted", (out.status, out.trap, out.error)


def test_a_slow_server_is_cut_off_by_the_cells_deadline(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, f"import urllib.request\nurllib.request.urlopen({web.url('/slow?every=0.2')!r}).read()",
              deadline_seconds=2.0)
    assert out.status != "ok", out.status  # the body never ends by itself: the deadline ended it


def test_every_request_is_logged_with_its_session_host_status_bytes_and_time(
        tmp_path: Path, web: LocalWeb, caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import re

    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = NetworkPolicy(allow=parse_allow([f"127.0.0.1:{web.port}"]))
    g = new_guest(workspace, options=GuestOptions(network=policy, log_context={"session": "s-1"}))
    caplog.set_level(logging.INFO, logger="wasm_kernel.runtime")
    try:
        out = run(g, f"import urllib.request\nurllib.request.urlopen({web.url('/data.csv')!r}).read()\n"
                     "try:\n    urllib.request.urlopen('http://example.com/')\nexcept PermissionError:\n    pass")
        assert out.status == "ok", out.error
    finally:
        g.close()
    lines = [r.getMessage() for r in caplog.records]
    [request] = [line for line in lines if "event='network.request'" in line]
    for field in (f"host='127.0.0.1:{web.port}'", "session='s-1'", "status=200", f"bytes={len(CSV)}"):
        assert field in request, request
    assert re.search(r"seconds=[0-9.]+", request)
    [refused] = [line for line in lines if "event='network.refused'" in line]
    assert "session='s-1'" in refused and "example.com is not allowed" in refused
