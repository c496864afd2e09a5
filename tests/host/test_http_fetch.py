"""The host's HTTP client for the network door (host/http_fetch.py), against local servers.

Every request goes to a server these tests start on 127.0.0.1, which the policy
allows explicitly. What a refused request would have reached is checked by what
the local server saw (nothing) or by a resolver override standing in for DNS.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.http_servers import CSV, LocalWeb
from wasm_kernel.host.http_fetch import CHUNK_BYTES, check_url, fetch
from wasm_kernel.host.network_policy import NetworkPolicy, NetworkRefused, parse_allow, parse_networks


@pytest.fixture(scope="module")
def tls_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWeb]:
    server = LocalWeb(tmp_path_factory.mktemp("certs"), tls=True)
    yield server
    server.close()


def policy_for(*servers: LocalWeb, **kw: object) -> NetworkPolicy:
    entries = [f"127.0.0.1:{s.port}" for s in servers] + [f"localhost:{s.port}" for s in servers]
    ca = next((s.ca_file for s in servers if s.ca_file), None)
    return NetworkPolicy(allow=parse_allow(entries), private_ok=parse_networks(["127.0.0.1/32"]), ca_file=ca,
                         **kw)  # type: ignore[arg-type]


def body(fetched) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(fetched.chunks())


def test_a_listed_host_is_fetched_with_the_right_bytes(web: LocalWeb) -> None:
    got = fetch("GET", web.url("/data.csv"), policy=policy_for(web))
    assert got.status == 200 and body(got) == CSV
    api = fetch("GET", web.url("/api"), policy=policy_for(web))
    assert json.loads(body(api)) == {"ok": True, "items": [1, 2, 3]}


def test_https_is_verified_against_the_ca_and_by_name(tls_web: LocalWeb) -> None:
    got = fetch("GET", tls_web.url("/data.csv", host="localhost"), policy=policy_for(tls_web))
    assert body(got) == CSV
    # Without the run's CA, the host's store does not know the certificate: refused, not fetched insecurely.
    with pytest.raises(NetworkRefused, match="TLS verification failed"):
        fetch("GET", tls_web.url("/data.csv", host="localhost"),
              policy=NetworkPolicy(allow=parse_allow([f"localhost:{tls_web.port}"]),
                                   private_ok=parse_networks(["127.0.0.1/32"])))


def test_a_large_body_streams_in_chunks_under_the_cap(web: LocalWeb) -> None:
    n = 50 << 20
    got = fetch("GET", web.url(f"/bytes?n={n}"), policy=policy_for(web))
    total, biggest = 0, 0
    for piece in got.chunks():
        total += len(piece)
        biggest = max(biggest, len(piece))
    assert total == n and biggest <= CHUNK_BYTES
    with pytest.raises(NetworkRefused, match="larger than the 1,048,576 bytes"):
        body(fetch("GET", web.url(f"/bytes?n={n}"), policy=policy_for(web, max_response_bytes=1 << 20)))


def test_a_redirect_within_the_list_is_followed_and_one_outside_is_refused(web: LocalWeb) -> None:
    inside = web.url("/redirect?to=" + web.url("/data.csv"))
    assert body(fetch("GET", inside, policy=policy_for(web))) == CSV
    before = len(web.requests)
    outside = web.url("/redirect?to=http://example.com/x")
    with pytest.raises(NetworkRefused, match="network access to example.com is not allowed"):
        fetch("GET", outside, policy=policy_for(web))
    metadata = web.url("/redirect?to=http://169.254.169.254/latest/meta-data/")
    with pytest.raises(NetworkRefused, match="169.254.169.254 is not allowed"):
        fetch("GET", metadata, policy=policy_for(web))
    assert len(web.requests) == before + 2  # the two redirects, and nothing after them


def test_redirect_chains_end_after_five_hops(web: LocalWeb) -> None:
    chain = web.url("/redirect?to=/redirect%3Fto%3D/data.csv")
    assert body(fetch("GET", chain, policy=policy_for(web))) == CSV  # two hops: fine
    before = len(web.requests)
    with pytest.raises(NetworkRefused, match="more than 5 redirects"):
        fetch("GET", web.url("/loop"), policy=policy_for(web))
    assert len(web.requests) == before + 6


def test_the_list_matches_names_wildcards_and_ports() -> None:
    policy = NetworkPolicy(allow=parse_allow(["data.example.org", "*.data.gov", "files.example.com:8443"]))
    assert check_url("https://data.example.org/a.csv", policy).host == "data.example.org"
    assert check_url("http://www.data.gov/x", policy).port == 80
    assert check_url("https://files.example.com:8443/f", policy).port == 8443
    for url in ("https://data.gov/x", "https://data.example.org:8080/", "https://files.example.com/f",
                "https://example.org/", "http://data.example.org.evil.com/"):
        with pytest.raises(NetworkRefused, match="is not allowed in this sandbox"):
            check_url(url, policy)
    # A wildcard names domains, never addresses.
    assert not NetworkPolicy(allow=parse_allow(["*.0.0.1"])).allowed("127.0.0.1", 80, "http")


@pytest.mark.parametrize("entry", ["", "exa mple.org", "*.com", "*.org:0", "host:70000", "[::1]", "*.", "a..b"])
def test_a_bad_list_entry_is_one_line(entry: str) -> None:
    with pytest.raises(ValueError, match="network_allow entry"):
        parse_allow([entry])


def test_a_notebook_may_narrow_the_list_never_widen_it() -> None:
    policy = NetworkPolicy(allow=parse_allow(["*.example.org", "data.gov"]))
    narrowed = policy.narrowed(["files.example.org"])
    assert narrowed.allowed("files.example.org", 443, "https")
    assert not narrowed.allowed("data.gov", 443, "https")
    for wider in (["example.org"], ["evil.com"], ["data.gov:8080"], ["*.other.org"], ["*.data.gov"]):
        with pytest.raises(ValueError, match="only narrow"):
            policy.narrowed(wider)


def test_with_no_list_nothing_is_fetched(web: LocalWeb) -> None:
    before = len(web.requests)
    with pytest.raises(NetworkRefused, match="^network access is not available in this sandbox$"):
        fetch("GET", web.url("/data.csv"), policy=NetworkPolicy())
    assert len(web.requests) == before


HANG_S = 30  # how long /hang keeps a client waiting for its answer


def test_an_interrupt_stops_a_transfer_at_once_even_while_waiting_for_an_answer(web: LocalWeb) -> None:
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with pytest.raises(NetworkRefused, match="interrupted"):
        fetch("GET", web.url(f"/hang?s={HANG_S}"), policy=policy_for(web), stopped=stop.is_set)
    assert time.monotonic() - started < HANG_S / 3  # cut short, long before the answer


def test_an_interrupt_stops_a_transfer_at_once(web: LocalWeb) -> None:
    # The server sends a byte every 0.05 s for ever: counted in its bytes, the
    # transfer ends within a few of them after the interrupt, not at its end.
    stop = threading.Event()
    got = fetch("GET", web.url("/slow?every=0.05"), policy=policy_for(web), stopped=stop.is_set)
    pieces = got.chunks()
    next(pieces)
    threading.Timer(0.3, stop.set).start()
    late = 0
    with pytest.raises(NetworkRefused, match="interrupted"):
        for piece in pieces:
            late += len(piece) if stop.is_set() else 0
    assert late < 20, f"{late} bytes came after the interrupt"


def test_a_slow_server_is_cut_off_by_the_deadline(web: LocalWeb) -> None:
    started = time.monotonic()
    with pytest.raises(NetworkRefused, match="took longer|no answer"):
        body(fetch("GET", web.url("/slow?every=0.2"), policy=policy_for(web), deadline=time.monotonic() + 1.0))
    with pytest.raises(NetworkRefused, match="took longer|no answer"):
        fetch("GET", web.url(f"/hang?s={HANG_S}"), policy=policy_for(web), deadline=time.monotonic() + 1.0)
    assert time.monotonic() - started < HANG_S / 3  # the deadlines', not the server's end


def test_post_bodies_and_headers_go_through(web: LocalWeb) -> None:
    got = fetch("POST", web.url("/post"), policy=policy_for(web), body=b"a=1",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert json.loads(body(got)) == {"method": "POST", "body": "a=1"}
    echoed = json.loads(body(fetch("GET", web.url("/headers"), policy=policy_for(web),
                                   headers={"X-Course": "ds-101", "Host": "evil.com"})))
    assert echoed["X-Course"] == "ds-101"
    assert echoed["Host"] == f"127.0.0.1:{web.port}"  # the client's, from the checked target


def test_non_http_schemes_are_refused(tmp_path: Path) -> None:
    policy = NetworkPolicy(allow=parse_allow(["example.org"]))
    for url in ("file:///etc/passwd", "ftp://example.org/x", "gopher://example.org/", "data:text/plain,hi"):
        with pytest.raises(NetworkRefused, match="only http and https"):
            check_url(url, policy)
