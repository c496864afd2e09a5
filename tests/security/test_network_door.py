"""The network door as an attacker sees it: every way a notebook could reach what the
operator did not allow, against the host's HTTP client (host/http_fetch.py).

Loopback only: a local server stands for every host, allowed or not, and what it
saw (nothing, for a refused request) is checked; a resolver override stands for
DNS answers (private addresses, rebinding).
"""

from __future__ import annotations


import pytest

from support.http_servers import CSV, LocalWeb
from wasm_kernel.host.http_fetch import fetch
from wasm_kernel.host.network_policy import NetworkPolicy, NetworkRefused, parse_allow, parse_networks


def allow(*entries: str, private: tuple[str, ...] = ()) -> NetworkPolicy:
    return NetworkPolicy(allow=parse_allow(entries), private_ok=parse_networks(private))


def refused(web: LocalWeb, url: str, policy: NetworkPolicy, match: str, **kw: object) -> None:
    before = len(web.requests)
    with pytest.raises(NetworkRefused, match=match) as caught:
        fetch("GET", url, policy=policy, **kw)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    assert len(web.requests) == before, "a refused request reached the server"


@pytest.mark.parametrize("url,host", [
    ("http://example.com/", "example.com"),
    ("http://93.184.216.34/", "93.184.216.34"),  # an address literal, not on the list
    ("http://localhost/", "localhost"),
    ("http://127.0.0.1/", "127.0.0.1"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ("http://[::1]/", "::1"),
    ("http://0x7f000001/", "0x7f000001"),  # an address in another spelling is a name not on the list
])
def test_hosts_not_on_the_list_are_refused_in_one_line(web: LocalWeb, url: str, host: str) -> None:
    refused(web, url, allow("data.example.org"),
            rf"^network access to {host} is not allowed in this sandbox; the operator can allow it with "
            r"c\.WasmKernel\.network_allow$")


def test_the_port_is_part_of_the_rule(web: LocalWeb) -> None:
    refused(web, web.url("/data.csv"), allow("127.0.0.1"), "not allowed")  # port 80 only
    assert b"".join(fetch("GET", web.url("/data.csv"), policy=allow(f"127.0.0.1:{web.port}")).chunks()) == CSV


@pytest.mark.parametrize("address,kind", [
    ("127.0.0.1", "a loopback"), ("10.1.2.3", "a private"), ("192.168.0.5", "a private"), ("172.16.9.9", "a private"),
    ("169.254.169.254", "a link-local"), ("::1", "a loopback"), ("fd00::1", "a private"), ("224.0.0.1", "a multicast"),
    ("0.0.0.0", "an unspecified"), ("::ffff:127.0.0.1", "a loopback"), ("100.64.0.1", "a non-global"),
])
def test_a_listed_name_that_resolves_to_a_non_global_address_is_refused(web: LocalWeb, address: str,
                                                                        kind: str) -> None:
    refused(web, "http://data.example.org/x", allow("data.example.org"), rf"resolves to {kind} address",
            resolver=lambda host, port: [address])


def test_one_private_address_among_public_ones_is_enough_to_refuse(web: LocalWeb) -> None:
    refused(web, "http://data.example.org/x", allow("data.example.org"), "resolves to a private address",
            resolver=lambda host, port: ["93.184.216.34", "10.0.0.7"])


def test_the_connection_goes_to_the_address_that_was_checked_dns_rebinding(web: LocalWeb) -> None:
    """The name is resolved once per hop, and the connection goes to that address: a
    second answer (rebinding to an address the check would refuse) is never asked for."""
    answers = iter([["127.0.0.1"], ["10.255.255.1"]])
    calls = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    policy = allow(f"data.example.org:{web.port}", private=("127.0.0.1/32",))
    got = fetch("GET", f"http://data.example.org:{web.port}/headers", policy=policy, resolver=resolver)
    assert b'"Host": "data.example.org:' in b"".join(got.chunks())
    assert calls == ["data.example.org"]


def test_a_redirect_to_a_refused_host_or_address_is_refused_after_the_hop(web: LocalWeb) -> None:
    policy = allow(f"127.0.0.1:{web.port}")
    for to, match in (("http://example.com/", "example.com is not allowed"),
                      ("http://169.254.169.254/", "169.254.169.254 is not allowed"),
                      ("file:///etc/passwd", "only http and https"),
                      (f"http://localhost:{web.port}/data.csv", f"localhost:{web.port} is not allowed")):
        before = len(web.requests)
        with pytest.raises(NetworkRefused, match=match):
            fetch("GET", web.url(f"/redirect?to={to}"), policy=policy)
        assert len(web.requests) == before + 1  # the redirect itself, nothing after


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://data.example.org/x", "gopher://data.example.org/",
                                 "dict://data.example.org:11211/", "jar:http://data.example.org/x"])
def test_other_schemes_are_refused(web: LocalWeb, url: str) -> None:
    refused(web, url, allow("data.example.org"), "only http and https")


@pytest.mark.parametrize("url", ["http://data.example.org/a\r\nX-Injected: 1", "http://data.example.org/a b",
                                 "http://data.example.org/\x00", "http://user:pw@data.example.org/"])
def test_urls_that_would_inject_or_hide_something_are_refused(web: LocalWeb, url: str) -> None:
    refused(web, url, allow("data.example.org"), "line break|space|user name")


@pytest.mark.parametrize("headers", [{"X-A": "1\r\nX-Injected: 2"}, {"X-A\r\nX-B": "1"}, {"X-A": "a\nb"},
                                     {"Bad Name": "1"}, {"X-A": "\x00"}])
def test_header_injection_is_refused(web: LocalWeb, headers: dict[str, str]) -> None:
    before = len(web.requests)
    with pytest.raises(NetworkRefused, match="header"):
        fetch("GET", web.url("/headers"), policy=allow(f"127.0.0.1:{web.port}"), headers=headers)
    assert len(web.requests) == before


def test_an_oversized_response_stops_at_the_cap(web: LocalWeb) -> None:
    policy = allow(f"127.0.0.1:{web.port}")
    got = fetch("GET", web.url(f"/bytes?n={8 << 20}"), policy=policy, limit=1 << 20)
    received = 0
    with pytest.raises(NetworkRefused, match="larger than the 1,048,576 bytes"):
        for piece in got.chunks():
            received += len(piece)
    assert received <= 1 << 20


def test_a_response_announcing_more_than_the_cap_is_refused_before_its_body_is_read(web: LocalWeb) -> None:
    policy = allow(f"127.0.0.1:{web.port}")
    got = fetch("GET", web.url("/bytes?n=5000000000"), policy=policy)
    with pytest.raises(NetworkRefused) as caught:
        next(got.chunks())
    assert str(caught.value) == (f"{web.url('/bytes?n=5000000000')}: the response is larger than the 104,857,600 "
                                 "bytes a request may fetch (it announces 5,000,000,000)")
    assert got.received == 0
