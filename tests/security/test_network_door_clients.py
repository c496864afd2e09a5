"""The network door as a notebook's own HTTP clients see it: http.client, urllib3 and
requests speak through a socket-less connection whose bytes the guest controls
entirely. Nothing they write can reach what the operator did not allow: the host
checks the whole URL of every request (each redirect hop is a request of its own),
and the guest's bytes become one request at most.

Loopback only: the local server stands for every host and records what reached it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.http_servers import LocalWeb
from wasm_kernel.host.network_policy import NetworkPolicy, parse_allow, parse_networks
from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions, TurnLimits
from wasm_kernel.runtime.guest_messages import BadMessage, parse
from wasm_kernel.runtime.provisioning import new_guest


@pytest.fixture(scope="module")
def guest(web: LocalWeb, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    policy = NetworkPolicy(allow=parse_allow([f"127.0.0.1:{web.port}"]), private_ok=parse_networks(["127.0.0.1/32"]))
    g = new_guest(tmp_path_factory.mktemp("ws"), options=GuestOptions(network=policy))
    yield g
    g.close()


def run(guest, code: str):  # type: ignore[no-untyped-def]
    return guest.run_cell(code, limits=TurnLimits(), options=CellOptions())


def test_a_redirect_followed_by_requests_to_a_refused_host_is_refused_at_that_hop(  # type: ignore[no-untyped-def]
        guest, web: LocalWeb) -> None:
    before = len(web.requests)
    out = run(guest, "import requests\n"
                     f"requests.get({web.url('/redirect?to=http://169.254.169.254/latest/meta-data/')!r})")
    assert out.error is not None and out.error["ename"] == "PermissionError", out.error
    assert out.error["evalue"].startswith("network access to 169.254.169.254 is not allowed")
    assert web.requests[before:] == ["/redirect?to=http://169.254.169.254/latest/meta-data/"]


@pytest.mark.parametrize("request_bytes,reached,refusal", [
    # A second request smuggled after the first: one request is made, the rest is no body.
    (b"GET /api HTTP/1.1\r\nHost: x\r\n\r\nGET /headers HTTP/1.1\r\nHost: x\r\n\r\n", ["/api"], ""),
    # The absolute form, naming another host: the host checks that URL.
    (b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", [],
     "network access to example.com is not allowed"),
    # A target that would make the connection's host a URL's user name.
    (b"GET @example.com/ HTTP/1.1\r\n\r\n", [], "URLs with a user name or password are not fetched"),
    # A Host header for another host: the host sets Host from the checked URL.
    (b"GET /headers HTTP/1.1\r\nHost: example.com\r\n\r\n", ["/headers"], ""),
])
def test_bytes_written_straight_to_the_connection_make_one_checked_request_at_most(  # type: ignore[no-untyped-def]
        guest, web: LocalWeb, request_bytes: bytes, reached: list[str], refusal: str) -> None:
    before = len(web.requests)
    out = run(guest, "import http.client\n"
                     f"c = http.client.HTTPConnection('127.0.0.1', {web.port})\nc.connect()\n"
                     f"c.sock.sendall({request_bytes!r})\n"
                     "r = http.client.HTTPResponse(c.sock, method='GET')\n"
                     "try:\n    r.begin()\n    print(r.status, r.read())\n"
                     "except PermissionError as err:\n    print('refused', err)")
    assert out.status == "ok", out.error
    assert web.requests[before:] == reached
    if refusal:
        assert out.stdout.startswith(f"refused {refusal}"), out.stdout
    if reached == ["/headers"]:
        assert f"127.0.0.1:{web.port}" in out.stdout and "example.com" not in out.stdout


def test_a_connection_carries_one_request(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, "import http.client\n"
                     f"c = http.client.HTTPConnection('127.0.0.1', {web.port})\nc.connect()\n"
                     "c.sock.sendall(b'GET /api HTTP/1.1\\r\\n\\r\\n')\nc.sock.makefile('rb')\n"
                     "c.sock.sendall(b'GET /api HTTP/1.1\\r\\n\\r\\n')")
    assert out.error is not None and out.error["ename"] == "OSError"
    assert "already sent" in out.error["evalue"]


def test_a_request_larger_than_the_doors_cap_is_refused_before_it_is_sent(  # type: ignore[no-untyped-def]
        guest, web: LocalWeb) -> None:
    before = len(web.requests)
    out = run(guest, "import http.client\n"
                     f"c = http.client.HTTPConnection('127.0.0.1', {web.port})\n"
                     "c.request('POST', '/post', body=bytes(17 << 20))")
    assert out.error is not None and "at most 16 MiB" in out.error["evalue"]
    assert web.requests[before:] == []


@pytest.mark.parametrize("follow", ["no", 0, None, [True]])
def test_a_forged_follow_flag_is_a_bad_message(follow: object) -> None:
    import json

    with pytest.raises(BadMessage, match="follow must be true or false"):
        parse(json.dumps({"op": "http_open", "method": "GET", "url": "http://x/", "follow": follow}).encode())


def test_a_refused_request_is_not_retried_by_urllib3(guest) -> None:  # type: ignore[no-untyped-def]
    out = run(guest, "import urllib3\n"
                     "try:\n    urllib3.PoolManager(retries=urllib3.Retry(10)).request('GET', 'http://example.com/')\n"
                     "except urllib3.exceptions.HTTPError as err:\n    print(type(err).__name__, err)")
    assert out.status == "ok", out.error
    assert out.stdout.startswith("NetworkDoorError network access to example.com is not allowed")
    assert out.network_requests == 1


def forged_read(guest, web: LocalWeb, n: int, read: str) -> str:  # type: ignore[no-untyped-def]
    """Open a transfer of an n-byte body, then send the forged http_read `read` (a
    dict literal naming `t`, the transfer); what the host answered, as text."""
    out = run(guest, "import _wasm_kernel_net as net, _wasm_kernel_guest as g\n"
                     f"body = net.open_url('GET', {web.url(f'/bytes?n={n}')!r}, [], None)[4]\nt = body._transfer\n"
                     f"answer = g.call_raw({read})\nprint(answer[:300].decode('latin-1'))")
    assert out.status == "ok", out.error
    return out.stdout


def test_a_forged_exact_read_longer_than_the_body_ends_in_one_line(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    answer = forged_read(guest, web, 100_000, "{'op': 'http_read', 'transfer': t, 'size': 300_000, 'exact': True}")
    assert answer.strip() == '{"message": "the body ended after 100,000 of the 300,000 bytes it announced"}'


def test_a_forged_exact_read_into_an_address_outside_guest_memory_is_refused(guest, web: LocalWeb) -> None:  # type: ignore[no-untyped-def]
    answer = forged_read(guest, web, 100_000, "{'op': 'http_read', 'transfer': t, 'size': 100_000, 'exact': True, "
                                              "'into': (1 << 32) - 200_000}")
    assert answer.strip() == '{"message": "the buffer for the body is outside guest memory"}'


@pytest.mark.parametrize("read,error", [
    ({"size": 100, "exact": True}, "an exact read is of"),
    ({"size": (1 << 30) + 1, "exact": True}, "an exact read is of"),
    ({"size": 1 << 20, "exact": "yes"}, "exact must be true or false"),
    ({"size": 1 << 20, "exact": True, "into": (1 << 32) - 10}, "into is an address in guest memory"),
    ({"size": 1 << 20, "exact": True, "into": -5}, "into must be a whole number"),
])
def test_forged_exact_reads_are_bad_messages(read: dict[str, object], error: str) -> None:
    import json

    with pytest.raises(BadMessage, match=error):
        parse(json.dumps({"op": "http_read", "transfer": 1, **read}).encode())


FIVE_GB = 5_000_000_000


@pytest.mark.parametrize("code,ename", [
    pytest.param("import requests\nrequests.get(URL).content", "ChunkedEncodingError", id="requests"),
    pytest.param("import urllib3\nurllib3.request('GET', URL).data", "NetworkDoorError", id="urllib3"),
    pytest.param("import urllib.request\nurllib.request.urlopen(URL).read()", "DoorTransferError", id="urllib"),
    pytest.param("import http.client, urllib.parse\nparts = urllib.parse.urlsplit(URL)\n"
                 "c = http.client.HTTPConnection(parts.hostname, parts.port)\n"
                 "c.request('GET', parts.path + '?' + parts.query)\nc.getresponse().read()", "DoorTransferError",
                 id="http.client"),
])
def test_a_response_announcing_five_gigabytes_fails_with_the_caps_line(  # type: ignore[no-untyped-def]
        guest, web: LocalWeb, code: str, ename: str) -> None:
    """The whole body is asked for at once: never an allocation of the announced size
    (OverflowError in a 32-bit guest), the cap's line before a byte of it is read."""
    url = web.url(f"/bytes?n={FIVE_GB}")
    out = run(guest, f"URL = {url!r}\n{code}")
    assert out.error is not None and out.error["ename"] == ename, out.error
    assert out.error["evalue"] == (f"{url}: the response is larger than the 104,857,600 bytes a request may fetch "
                                   f"(it announces {FIVE_GB:,})")
    assert out.network_bytes == 0
