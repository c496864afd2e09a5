"""The pool over Redis with TLS and an ACL user, as docs/scale-out.md tells operators
to run it: a real redis-server serving TLS only, with a user limited to the pool's
keys. The store works through it; a wrong password or a plain-TCP client fails fast
with a line that names no address; a pool service starts with the rediss:// URL."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cluster_procs import MANAGER_TOKEN, POOL_KEY, STORE_TIMEOUT_S, TOKEN, ServiceProcess
from support.redis_server import REQUIRE_ENV, free_port
from wasm_kernel.cluster.errors import RedisInternal
from wasm_kernel.cluster.records import HostInfo, Sandbox, SessionRecord, now_ms, session_identity
from wasm_kernel.cluster.session_store import SessionStore, connect

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # the pool's processes on a real Redis

ACL_USER, ACL_PASSWORD = "pool", "pool-acl-password-0123456789"


def _certificates(folder: Path) -> dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1, made with openssl."""
    files = {name: folder / f"{name}.pem" for name in ("ca", "ca-key", "server", "server-key")}
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
        "-keyout", str(files["ca-key"]), "-out", str(files["ca"]))
    csr = folder / "server.csr"
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(files["server-key"]),
        "-out", str(csr))
    ext = folder / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(files["ca"]), "-CAkey", str(files["ca-key"]), "-CAcreateserial",
        "-days", "1", "-extfile", str(ext), "-out", str(files["server"]))
    return files


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    import os

    if (shutil.which("redis-server") is None or shutil.which("openssl") is None) and os.environ.get(REQUIRE_ENV) != "1":
        pytest.skip("redis-server or openssl is not installed")
    folder = tmp_path_factory.mktemp("tls-redis")
    certs = _certificates(folder)
    port = free_port()
    acl = folder / "users.acl"
    # The pool's user: its keys only, no administration (docs/scale-out.md).
    acl.write_text(f"user default on >admin-password-0123456789 ~* &* +@all\n"
                   f"user {ACL_USER} on >{ACL_PASSWORD} ~wk:* &* +@all -@dangerous\n")
    proc = subprocess.Popen([
        "redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--dir", str(folder), "--tls-cert-file", str(certs["server"]), "--tls-key-file", str(certs["server-key"]),
        "--tls-ca-cert-file", str(certs["ca"]), "--tls-auth-clients", "no",
        "--aclfile", str(acl),
    ], stdout=open(folder / "redis.log", "wb"), stderr=subprocess.STDOUT)
    url = f"rediss://{ACL_USER}:{ACL_PASSWORD}@127.0.0.1:{port}/0?ssl_ca_certs={certs['ca']}"
    deadline = time.monotonic() + 10
    while True:
        try:
            asyncio.run(connect(url).ping())
            break
        except Exception:
            assert time.monotonic() < deadline, (folder / "redis.log").read_text()
            time.sleep(0.1)
    yield {"url": url, "port": port, "ca": certs["ca"], "folder": folder}
    proc.terminate()
    proc.wait(10)


def test_the_store_works_over_tls_as_an_acl_user_limited_to_the_pools_keys(tls_redis: dict) -> None:
    async def go() -> None:
        store = SessionStore(connect(tls_redis["url"]), key=POOL_KEY.encode())
        await store.register_host(HostInfo("tls-h1", "http://127.0.0.1:1", 4, 0, beat_at=now_ms()), 60_000)
        sid = str(uuid.uuid4())
        record = SessionRecord(sid, Sandbox(f"sb-{uuid.uuid4().hex}", "tls-h1", str(uuid.uuid4())), "t", "user:u",
                               session_identity("t", "user:u", "n", sid), now_ms(), now_ms() + 60_000)
        await store.bind_session_with_sandbox(record)
        assert await store.get_sandbox_by_session_id(sid, "t", "user:u") == record
        assert await store.touch(sid)
        assert [h.id for h in (await store.hosts())[0]] == ["tls-h1"]
        assert await store.delete_host_tx("tls-h1") == 1
        # The ACL keeps the pool's user to the pool's keys.
        with pytest.raises(Exception, match="no permissions"):
            await store.redis.set("someone-elses-key", "x")
    asyncio.run(go())


@pytest.mark.parametrize("how", ["wrong password", "plain TCP to the TLS port", "an untrusted CA"])
def test_a_client_without_the_right_credentials_fails_fast_and_names_no_address(tls_redis: dict, how: str) -> None:
    port = tls_redis["port"]
    url = {
        "wrong password": f"rediss://{ACL_USER}:wrong-password@127.0.0.1:{port}/0?ssl_ca_certs={tls_redis['ca']}",
        "plain TCP to the TLS port": f"redis://{ACL_USER}:{ACL_PASSWORD}@127.0.0.1:{port}/0",
        "an untrusted CA": f"rediss://{ACL_USER}:{ACL_PASSWORD}@127.0.0.1:{port}/0",
    }[how]

    async def go() -> None:
        store = SessionStore(connect(url), key=POOL_KEY.encode())
        started = time.monotonic()
        with pytest.raises(RedisInternal) as err:
            await store.get_sandbox_by_session_id(str(uuid.uuid4()), "t", "user:u")
        assert time.monotonic() - started < 3 * STORE_TIMEOUT_S  # the store's fail-fast timeout, no retries
        assert str(port) not in err.value.message and "127.0.0.1" not in err.value.message, err.value.message
    asyncio.run(go())


def test_a_pool_service_starts_with_a_rediss_url(tls_redis: dict, tmp_path: Path) -> None:
    class Manager(ServiceProcess):
        name = "sandbox-manager"

    manager = Manager(["--redis", tls_redis["url"]], tmp_path, {
        "WASM_KERNEL_POOL_KEY": POOL_KEY, "WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN})
    try:
        with urllib.request.urlopen(f"{manager.url}/healthz", timeout=10) as resp:
            assert resp.status == 200
    finally:
        manager.stop()
