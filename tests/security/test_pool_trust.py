"""The pool trusts nothing it has not verified, on real processes and a real Redis.

- Each service refuses to start without its credentials (one line, exit 2), set in
  the environment or in the router's config file, and --insecure-demo is the only
  way to a password-less Redis, with a warning.
- Redis is untrusted input: a forged host record (unsigned, wrongly signed, stale,
  malformed, huge, deeply nested) is skipped and logged, never fatal, and the host
  token never reaches its endpoint; a session or router-kernel record changed in
  Redis is "not found", not another tenant's kernel and never a 500.
- Expired sessions and orphaned kernels are stopped on their hosts.
- What a tenant is told of a Redis failure names no address.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cluster_procs import (MANAGER_TOKEN, POOL_KEY, ROUTER_TOKEN_ENTRIES, TOKEN, USER_TOKENS, pool_store, router_config,
                                   running_pool)
from support.redis_server import free_port
from wasm_kernel.cluster.records import HostInfo, now_ms, sign

from support.security_pool import host_kernels, start_kernel, wait_until

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]  # the pool's processes on a real Redis

ENV = {"WASM_KERNEL_POOL_KEY": POOL_KEY, "WASM_KERNEL_HOST_TOKEN": TOKEN, "WASM_KERNEL_MANAGER_TOKEN": MANAGER_TOKEN,
       "WASM_KERNEL_ROUTER_TOKENS": f"course-a/alice:{USER_TOKENS[('course-a', 'alice')]}"}


def _start(args: list[str], env: dict[str, str], timeout: float = 20) -> subprocess.CompletedProcess[str] | None:
    """A service's exit (it refused), or None if it was still serving after `timeout` (then stopped)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("WASM_KERNEL_")}
    proc = subprocess.Popen([sys.executable, "-m", "wasm_kernel.cli", *args], env={**full, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        print(err)
        return None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _service_args(service: str, redis_url: str, tmp: Path) -> list[str]:
    port = str(free_port())
    if service == "host":
        return ["host", "--redis", redis_url, "--port", port, "--root", str(tmp / "host"),
                *(["--allow-root"] if os.geteuid() == 0 else [])]
    if service == "sandbox-manager":
        return ["sandbox-manager", "--redis", redis_url, "--port", port]
    return ["router", "--redis", redis_url, "--port", port, "--sandbox-manager", "http://127.0.0.1:9"]


@pytest.mark.parametrize("service", ["host", "sandbox-manager", "router"])
@pytest.mark.parametrize("missing", ["WASM_KERNEL_POOL_KEY", "WASM_KERNEL_HOST_TOKEN", "WASM_KERNEL_MANAGER_TOKEN",
                                     "WASM_KERNEL_ROUTER_TOKENS", "redis password", "short pool key",
                                     "tenant-wide token"])
def test_a_service_without_its_credentials_refuses_to_start(redis_server, tmp_path: Path, service: str,  # noqa: ANN001
                                                            missing: str) -> None:
    needs = {"host": {"WASM_KERNEL_POOL_KEY", "WASM_KERNEL_HOST_TOKEN"},
             "sandbox-manager": {"WASM_KERNEL_POOL_KEY", "WASM_KERNEL_HOST_TOKEN", "WASM_KERNEL_MANAGER_TOKEN"},
             "router": {"WASM_KERNEL_POOL_KEY", "WASM_KERNEL_HOST_TOKEN", "WASM_KERNEL_MANAGER_TOKEN",
                        "WASM_KERNEL_ROUTER_TOKENS"}}[service]
    env, url = dict(ENV), redis_server.url
    if missing == "redis password":
        url = redis_server.url_without_password
    elif missing == "short pool key":
        env["WASM_KERNEL_POOL_KEY"] = "too-short"
    elif missing == "tenant-wide token":
        if service != "router":
            pytest.skip("router tokens are the router's")
        env["WASM_KERNEL_ROUTER_TOKENS"] = "course-a:one-token-for-every-student"
    elif missing not in needs:
        pytest.skip(f"{service} does not use {missing}")
    else:
        env.pop(missing)
    done = _start(_service_args(service, url, tmp_path), env)
    assert done is not None, f"{service} started without {missing}"
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"wasm-kernel {service}: "), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tokens", ["absent", "empty", "tenant-wide"])
def test_a_router_whose_config_file_lacks_its_users_refuses_to_start(redis_server, tmp_path: Path,  # noqa: ANN001
                                                                     tokens: str) -> None:
    """Fail closed with a config file too: without users in it (and none in the
    environment) the router does not serve, and its one line names the trait and the
    variable that would set them."""
    settings: dict[str, object] = {"redis_url": redis_server.url, "sandbox_manager_url": "http://127.0.0.1:9",
                                   "pool_key": POOL_KEY, "host_token": TOKEN, "manager_token": MANAGER_TOKEN}
    if tokens == "empty":
        settings["tokens"] = []
    elif tokens == "tenant-wide":
        settings["tokens"] = ["course-a:one-token-for-every-student"]
    config = router_config(tmp_path / "router_config.py", free_port(), **settings)
    done = _start(["router", "--config", str(config)], {})  # no WASM_KERNEL_* variable at all
    assert done is not None, "the router started without users"
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("wasm-kernel router: c.RouterApp.tokens" if tokens != "absent"
                                                   else "wasm-kernel router: $WASM_KERNEL_ROUTER_TOKENS (or "
                                                   "c.RouterApp.tokens in the config file) is not set"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("secret", ["pool_key", "host_token", "manager_token"])
def test_a_router_config_file_without_a_secret_refuses_to_start_even_with_the_rest(redis_server, tmp_path: Path,  # noqa: ANN001
                                                                                   secret: str) -> None:
    settings: dict[str, object] = {"redis_url": redis_server.url, "sandbox_manager_url": "http://127.0.0.1:9",
                                   "tokens": ROUTER_TOKEN_ENTRIES, "pool_key": POOL_KEY, "host_token": TOKEN,
                                   "manager_token": MANAGER_TOKEN}
    settings[secret] = ""
    done = _start(["router", "--config", str(router_config(tmp_path / "router_config.py", free_port(), **settings))],
                  {})
    assert done is not None and done.returncode == 2, done
    assert done.stderr.startswith(f"wasm-kernel router: c.RouterApp.{secret} is not set: ") \
        and done.stderr.count("\n") == 1, done.stderr


def test_a_router_config_file_others_can_read_is_named_when_it_holds_secrets(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from wasm_kernel.cluster.router_app import RouterApp

    config = router_config(tmp_path / "router_config.py", 1, host_token=TOKEN)
    RouterApp().load_settings({}, str(config))
    assert capsys.readouterr().err == ""  # 0600
    config.chmod(0o644)
    RouterApp().load_settings({}, str(config))
    config = config.resolve()
    assert capsys.readouterr().err == (f"wasm-kernel router: WARNING: {config} holds secrets and other users can "
                                       f"read it: chmod 600 {config}\n")


def test_insecure_demo_is_the_only_way_to_a_redis_without_a_password_and_it_warns(redis_server, tmp_path: Path) -> None:  # noqa: ANN001
    # A password-less Redis of its own (the suite's requires one).
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        args = _service_args("sandbox-manager", url, tmp_path)
        refused = _start(args, ENV)
        assert refused is not None and refused.returncode == 2 and "--insecure-demo" in refused.stderr
        demo = subprocess.Popen([sys.executable, "-m", "wasm_kernel.cli", *args, "--insecure-demo"],
                                env={**os.environ, **ENV}, stderr=subprocess.PIPE, text=True)
        try:
            first = demo.stderr.readline()  # type: ignore[union-attr]
            assert "WARNING: --insecure-demo" in first, first
            time.sleep(2)
            assert demo.poll() is None  # serving
        finally:
            demo.terminate()
            demo.wait(30)
    finally:
        proc.terminate()
        proc.wait(10)


class TokenTrap:
    """A listener that records every request sent to it: a forged host's endpoint."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.seen: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                self.seen.append(conn.recv(65536))
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            except OSError:
                pass
            finally:
                conn.close()


@pytest.fixture(scope="module")
def pool(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:  # noqa: ANN001
    with running_pool(redis_server, tmp_path_factory.mktemp("trust"), hosts={"host": {"host_id": "trust-h1", "capacity": 8}},
                      manager={"session_ttl": 3.0, "extra": ("--sweep-every", "0.5", "--orphan-grace", "2")},
                      routers={"router": {"session_ttl": 3.0}}) as pool:
        yield pool


def _forged_records(port: int) -> dict[str, str]:
    endpoint = f"http://127.0.0.1:{port}"
    fields = {"id": "", "endpoint": endpoint, "capacity": 1000, "load": 0, "shared_root": False, "beat_at": now_ms()}

    def record(host_id: str, key: bytes | None, **changes: object) -> str:
        data = {**fields, "id": host_id, **changes}
        sig = sign(key, "host", data) if key is not None else "0" * 64
        return json.dumps({**data, "sig": sig})

    return {
        "forged-unsigned": record("forged-unsigned", None),
        "forged-wrong-key": record("forged-wrong-key", b"an attacker's key, not the pool's 0123"),
        "forged-stale": record("forged-stale", POOL_KEY.encode(), beat_at=now_ms() - 3_600_000),
        "forged-extra": json.dumps({**json.loads(record("forged-extra", POOL_KEY.encode())), "admin": True}),
        "forged-junk": "{not json",
        "forged-deep": "[" * 3000 + "]" * 3000,
        "forged-huge": json.dumps({"id": "x" * 100_000}),
        "forged-types": json.dumps({**fields, "id": "forged-types", "capacity": "many", "sig": "x"}),
    }


def test_forged_host_records_are_skipped_never_fatal_and_never_get_the_token(pool: dict) -> None:
    trap = TokenTrap()

    async def plant() -> None:
        store = pool_store(pool["redis"].url)
        for host_id, raw in _forged_records(trap.port).items():
            await store.redis.set(store.key("host", host_id), raw, px=120_000)
            await store.redis.zadd(store.key("hosts"), {host_id: now_ms()})
        # A signed record copied under another host's key is a forgery too.
        genuine = await store.redis.get(store.key("host", "trust-h1"))
        await store.redis.set(store.key("host", "forged-copy"), genuine, px=120_000)
        await store.redis.zadd(store.key("hosts"), {"forged-copy": now_ms()})

    asyncio.run(plant())
    try:
        manager, router = pool["manager"], pool["router"]
        for i in range(6):
            kernel_id = start_kernel(router, "course-a", "alice", f"/forged/{i}.ipynb")
            router.call("DELETE", f"/api/kernels/{kernel_id}")
        status, health = manager.call("GET", "/healthz", token=None)
        assert status == 200 and health["live_hosts"] == 1, health  # type: ignore[index]
        assert trap.seen == [], trap.seen[:1]
        assert "record.invalid" in manager.log_path.read_text()
    finally:
        async def clean() -> None:
            store = pool_store(pool["redis"].url)
            for host_id in [*_forged_records(0), "forged-copy"]:
                await store.redis.delete(store.key("host", host_id))
                await store.redis.zrem(store.key("hosts"), host_id)
        asyncio.run(clean())


def test_a_session_or_kernel_record_changed_in_redis_is_not_found_not_another_tenants(pool: dict) -> None:
    router = pool["router"]
    victim = start_kernel(router, "course-a", "alice", "/victim.ipynb")

    async def tamper() -> None:
        store = pool_store(pool["redis"].url)
        raw = json.loads(await store.redis.get(store.key("rkernel", victim)))
        # Hand alice's kernel to bob: same signature, another principal.
        await store.redis.set(store.key("rkernel", victim), json.dumps({**raw, "principal": "user:bob"}))
        await store.redis.sadd(store.key("rkernels", "course-a", "user:bob"), victim)
        session = json.loads(await store.redis.get(store.key("session", raw["session_id"])))
        await store.redis.set(store.key("session", raw["session_id"]), json.dumps({**session, "tenant": "course-b"}))

    asyncio.run(tamper())
    for user in ("alice", "bob"):
        status, answer = router.call("GET", f"/api/kernels/{victim}", user=user)
        assert status == 404, (user, answer)
    listed = router.call("GET", "/api/kernels", user="bob")[1]
    assert victim not in [k["id"] for k in listed]  # type: ignore[union-attr]
    assert router.proc.poll() is None


def test_expired_sessions_and_orphaned_kernels_are_stopped_on_their_host(pool: dict) -> None:
    router, host = pool["router"], pool["host"]
    before = host_kernels(host)
    idle = start_kernel(router, "course-a", "alice", "/idle.ipynb")
    started = wait_until(lambda: host_kernels(host) - before, what="the idle kernel")
    # No activity: after the 3 s TTL the sweep stops its kernel and the router says why.
    wait_until(lambda: not (host_kernels(host) & started), timeout=30, what="the expired kernel to stop")
    status, answer = router.call("GET", f"/api/kernels/{idle}")
    assert status == 410 and "expired" in answer["message"], answer  # type: ignore[index]
    # A kernel started on the host behind the manager's back (no session maps it).
    orphan = host.request("POST", "/api/sessions", {"path": "pool/course-a/" + "b" * 64 + "/notebook.ipynb",
                                                    "type": "notebook", "name": "notebook.ipynb",
                                                    "kernel": {"name": "wasm-python"}})["kernel"]["id"]  # type: ignore[index]
    wait_until(lambda: orphan not in host_kernels(host), timeout=30, what="the orphan to stop")


def test_a_redis_failure_tells_a_tenant_nothing_of_the_address(pool: dict) -> None:
    router, redis = pool["router"], pool["redis"]
    kernel_id = start_kernel(router, "course-a", "alice", "/addr.ipynb")
    redis.stop()
    try:
        status, answer = router.call("GET", f"/api/kernels/{kernel_id}")
        created = router.call("POST", "/api/kernels", {"env": {"JPY_SESSION_NAME": "/addr2.ipynb"}})
    finally:
        redis.start()
    assert status == 500 and created[0] in (500, 503)
    for body in (answer, created[1]):
        text = json.dumps(body)
        assert str(redis.port) not in text and "127.0.0.1" not in text and "localhost" not in text, text
        assert "Redis" in text or "unavailable" in text


def test_a_host_record_signed_by_the_pool_key_round_trips_and_any_change_breaks_it() -> None:
    key = POOL_KEY.encode()
    host = HostInfo("h", "http://127.0.0.1:1", 4, 0, False, now_ms())
    raw = host.signed_json(key)
    assert HostInfo.verified(raw, key) == host
    data = json.loads(raw)
    for field, value in (("endpoint", "http://127.0.0.1:2"), ("capacity", 5), ("load", 1), ("shared_root", True),
                         ("id", "other")):
        from wasm_kernel.cluster.records import InvalidRecord

        with pytest.raises(InvalidRecord):
            HostInfo.verified(json.dumps({**data, field: value}), key)
    for endpoint in ("http://user:pw@127.0.0.1:1", "http://127.0.0.1:1/path", "file:///etc/passwd",
                     "http://127.0.0.1", "http://127.0.0.1:1?x=1", "http://127.0.0.1:1#f", "gopher://h:1",
                     "http://exa mple:1", "http://h:1\\@evil:2"):
        fields = {**data, "endpoint": endpoint}
        fields.pop("sig")
        with pytest.raises(InvalidRecord):
            HostInfo.verified(json.dumps({**fields, "sig": sign(key, "host", fields)}), key)
