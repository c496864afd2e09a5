"""The scale-out pool's commands: `wasm-kernel host`, `sandbox-manager` and `router` (cluster/).

Only argparse here: what they run (jupyter_server, redis, prometheus-client) is
imported when a command runs, so `wasm-kernel --help` works without the cluster
extra.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REDIS_ENV = "WASM_KERNEL_REDIS_URL"


def add_cluster_parsers(sub: Any) -> None:
    _add_host(sub)
    _add_manager(sub)
    _add_router(sub)


def _service_args(p: Any, *, session_ttl: bool) -> None:
    """What every pool service takes: its Redis, where it listens, how long sessions live."""
    url = os.environ.get(REDIS_ENV, "")
    p.add_argument("--redis", required=not url, default=url or None, metavar="URL",
                   help=f"the pool's Redis with its password, e.g. redis://:PASSWORD@127.0.0.1:6379/0 (rediss:// "
                   f"for TLS; default: ${REDIS_ENV}, which keeps the password off the command line)")
    p.add_argument("--port", type=int, required=True, help="the port to serve on")
    p.add_argument("--ip", default="127.0.0.1", help="the address to bind (default: loopback only)")
    p.add_argument("--insecure-demo", action="store_true",
                   help="allow a Redis without a password, on a machine nothing else reaches (prints a warning)")
    if session_ttl:
        p.add_argument("--session-ttl", type=float, default=3600.0,
                       help="seconds a session lives without activity (default: 3600)")


def _add_router(sub: Any) -> None:
    p = sub.add_parser(
        "router", help="a Jupyter gateway in front of the pool: kernels on sandbox hosts, by notebook",
        description="Serve the Jupyter gateway API (kernelspecs, kernels, channels) for the pool. A Jupyter "
        "Server uses it with --GatewayClient.url=http://IP:PORT --GatewayClient.auth_token=TOKEN "
        "--GatewayClient.allowed_envs=JPY_SESSION_NAME. Each token names a tenant and a user "
        "(WASM_KERNEL_ROUTER_TOKENS=TENANT/USER:TOKEN, or TENANT/*:KEY for tokens made per user). Example: "
        "WASM_KERNEL_ROUTER_TOKENS=course-a/alice:TOKEN WASM_KERNEL_POOL_KEY=... WASM_KERNEL_HOST_TOKEN=... "
        "WASM_KERNEL_MANAGER_TOKEN=... wasm-kernel router --redis redis://:PASSWORD@127.0.0.1:6379/0 "
        "--sandbox-manager http://127.0.0.1:8900 --port 8888",
        epilog="examples:\n  WASM_KERNEL_ROUTER_TOKENS=course-a/alice:s3cret-0123456789 wasm-kernel router --redis "
        "redis://:PASSWORD@127.0.0.1:6379/0 --sandbox-manager http://127.0.0.1:8900 --port 8888\n"
        "  jupyter lab --GatewayClient.url=http://127.0.0.1:8888 --GatewayClient.auth_token=s3cret-0123456789\n"
        "\nsee docs/scale-out.md for the whole pool",
    )
    _service_args(p, session_ttl=True)
    p.add_argument("--sandbox-manager", required=True, metavar="URL", help="the sandbox manager's URL")
    p.add_argument("--share-group", action="append", metavar="TENANT/GROUP=USER,USER",
                   help="let these users of a tenant share sessions (the same notebook reaches the same kernel "
                   "and files); repeatable; without it no two users share anything")
    p.set_defaults(func=_run_router)


def _add_host(sub: Any) -> None:
    host = sub.add_parser(
        "host", help="serve wasm-python kernels as one sandbox host of a pool, registered in Redis",
        description="Run a Jupyter Server that serves wasm-python kernels and registers itself in the pool's "
        "Redis (heartbeat with a TTL).",
        epilog="examples:\n  wasm-kernel host --redis redis://:PASSWORD@127.0.0.1:6379/0 --port 8901\n"
        "  wasm-kernel host --redis rediss://:PASSWORD@10.0.0.5:6380/0 --ip 0.0.0.0 --port 8901 --root /srv/pool "
        "--shared-root --advertise-url http://host-a:8901\n\nsee docs/scale-out.md for the whole pool",
    )
    _service_args(host, session_ttl=False)
    host.add_argument("--root", type=Path, default=None,
                      help="this host's folder: kernels keep their sessions here "
                      "(default: <jupyter data dir>/wasm-kernel/hosts/PORT)")
    host.add_argument("--id", default="", help="this host's id in the pool (default: hostname:port)")
    host.add_argument("--capacity", type=int, default=50, help="how many kernels this host takes (default: 50)")
    host.add_argument("--heartbeat", type=float, default=2.0, help="seconds between heartbeats (default: 2)")
    host.add_argument("--shared-root", action="store_true",
                      help="--root is shared by every host (a network filesystem): sessions keep their files "
                      "when they move to another host")
    host.add_argument("--advertise-url", default="", help="the URL the pool reaches this host at "
                      "(default: http://IP:PORT)")
    host.add_argument("--allow-root", action="store_true", help="run as root (containers); Jupyter Server "
                      "refuses to otherwise")
    host.set_defaults(func=_run_host)


def _add_manager(sub: Any) -> None:
    p = sub.add_parser(
        "sandbox-manager", help="create sandboxes on the pool's hosts and map sessions to them in Redis",
        description="Serve seed 004's sandbox manager: POST /v1/sandboxes, DELETE /v1/sandboxes/ID, /healthz, "
        "/metrics.",
        epilog="examples:\n  WASM_KERNEL_HOST_TOKEN=... WASM_KERNEL_MANAGER_TOKEN=... wasm-kernel sandbox-manager "
        "--redis redis://:PASSWORD@127.0.0.1:6379/0 --port 8900\n\nsee docs/scale-out.md for the whole pool",
    )
    _service_args(p, session_ttl=True)
    p.add_argument("--reap-every", type=float, default=1.0, help="seconds between checks for lost hosts")
    p.add_argument("--sweep-every", type=float, default=30.0,
                   help="seconds between sweeps for expired sessions and orphaned kernels (default: 30)")
    p.add_argument("--orphan-grace", type=float, default=120.0,
                   help="seconds a kernel no session maps to may run before it is stopped (default: 120)")
    p.set_defaults(func=_run_manager)


def _run_host(args: Any) -> int:
    from ..cluster.sandbox_host import run_host

    return run_host(args)


def _run_manager(args: Any) -> int:
    from ..cluster.manager_service import run_manager

    return run_manager(args)


def _run_router(args: Any) -> int:
    from ..cluster.router import run_router

    return run_router(args)
