"""The scale-out pool's commands: `wasm-kernel host`, `sandbox-manager` and `router` (cluster/).

Only argparse here: what they run (jupyter_server, redis, prometheus-client) is
imported when a command runs, so `wasm-kernel --help` works without the cluster
extra. The router's and the manager's options are aliases of their traits
(cluster/service_app.py): each is named after its trait and present only when given
(argparse.SUPPRESS), so a flag overrides the config file, which overrides the
environment.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

REDIS_ENV = "WASM_KERNEL_REDIS_URL"
_GIVEN_ONLY = argparse.SUPPRESS


def add_cluster_parsers(sub: Any) -> None:
    _add_host(sub)
    _add_manager(sub)
    _add_router(sub)


def _host_args(p: Any) -> None:
    """A host's Redis and where it listens (its ServerApp has the rest of its configuration)."""
    url = os.environ.get(REDIS_ENV, "")
    p.add_argument("--redis", required=not url, default=url or None, metavar="URL",
                   help=f"the pool's Redis with its password, e.g. redis://:PASSWORD@127.0.0.1:6379/0 (rediss:// "
                   f"for TLS; default: ${REDIS_ENV}, which keeps the password off the command line)")
    p.add_argument("--port", type=int, required=True, help="the port to serve on")
    p.add_argument("--ip", default="127.0.0.1", help="the address to bind (default: loopback only)")
    p.add_argument("--insecure-demo", action="store_true",
                   help="allow a Redis without a password, on a machine nothing else reaches (prints a warning)")


def _app_args(p: Any, *, app: str, config_name: str, port: int) -> None:
    """A configurable service's options: each sets the trait its `dest` names."""
    p.add_argument("--config", dest="config_file", metavar="FILE", default=None,
                   help=f"a traitlets config file, .py or .json: c.{app}.NAME = VALUE for any setting, the secrets "
                   f"included (default: {config_name}.py or .json in Jupyter's config path, if there is one)")
    p.add_argument("--redis", dest="redis_url", default=_GIVEN_ONLY, metavar="URL",
                   help=f"the pool's Redis with its password, e.g. redis://:PASSWORD@127.0.0.1:6379/0 (rediss:// "
                   f"for TLS; default: c.{app}.redis_url, else ${REDIS_ENV}, which keep the password off the "
                   "command line)")
    p.add_argument("--port", type=int, default=_GIVEN_ONLY, help=f"the port to serve on (default: {port})")
    p.add_argument("--ip", default=_GIVEN_ONLY, help="the address to bind (default: 127.0.0.1, loopback only)")
    p.add_argument("--insecure-demo", dest="insecure_demo", action="store_true", default=_GIVEN_ONLY,
                   help="allow a Redis without a password, on a machine nothing else reaches (prints a warning)")
    p.add_argument("--session-ttl", dest="session_ttl", type=float, default=_GIVEN_ONLY, metavar="SECONDS",
                   help="seconds a session lives without activity (default: 3600)")


def _add_router(sub: Any) -> None:
    p = sub.add_parser(
        "router", help="a Jupyter gateway in front of the pool: kernels on sandbox hosts, by notebook",
        description="Serve the Jupyter gateway API (kernelspecs, kernels, channels) for the pool. A Jupyter "
        "Server uses it with --GatewayClient.url=http://IP:PORT --GatewayClient.auth_token=TOKEN "
        "--GatewayClient.allowed_envs=JPY_SESSION_NAME. Each token names a tenant and a user "
        "(c.RouterApp.tokens = ['TENANT/USER:TOKEN'], or TENANT/*:KEY for tokens made per user). Every "
        "setting is a trait of RouterApp, set by a flag, else the config file (--config), else its "
        "environment variable: WASM_KERNEL_REDIS_URL, WASM_KERNEL_ROUTER_TOKENS (comma-separated), "
        "WASM_KERNEL_POOL_KEY, WASM_KERNEL_HOST_TOKEN, WASM_KERNEL_MANAGER_TOKEN. Secrets have no flag; "
        "the router refuses to start without them.",
        epilog="examples:\n  wasm-kernel router --config /etc/wasm-kernel/router_config.py\n"
        "      where router_config.py holds c.RouterApp.redis_url, .sandbox_manager_url, .port, .tokens,\n"
        "      .pool_key, .host_token and .manager_token (readable by the router's user only)\n"
        "  WASM_KERNEL_ROUTER_TOKENS=course-a/alice:s3cret-0123456789 wasm-kernel router --redis "
        "redis://:PASSWORD@127.0.0.1:6379/0 --sandbox-manager http://127.0.0.1:8900 --port 8888\n"
        "  jupyter lab --GatewayClient.url=http://127.0.0.1:8888 --GatewayClient.auth_token=s3cret-0123456789\n"
        "\nsee docs/scale-out.md for the whole pool",
    )
    _app_args(p, app="RouterApp", config_name="wasm_kernel_router_config", port=8888)
    p.add_argument("--sandbox-manager", dest="sandbox_manager_url", default=_GIVEN_ONLY, metavar="URL",
                   help="the sandbox manager's URL (c.RouterApp.sandbox_manager_url)")
    p.add_argument("--share-group", dest="share_groups", action="append", default=_GIVEN_ONLY,
                   metavar="TENANT/GROUP=USER,USER",
                   help="let these users of a tenant share sessions (the same notebook reaches the same kernel "
                   "and files); repeatable, and replaces c.RouterApp.share_groups; without it no two users "
                   "share anything")
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
    _host_args(host)
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
        "/metrics. Every setting is a trait of SandboxManagerApp, set by a flag, else the config file "
        "(--config), else its environment variable: WASM_KERNEL_REDIS_URL, WASM_KERNEL_POOL_KEY, "
        "WASM_KERNEL_HOST_TOKEN, WASM_KERNEL_MANAGER_TOKEN. Secrets have no flag; the manager refuses to "
        "start without them.",
        epilog="examples:\n  WASM_KERNEL_HOST_TOKEN=... WASM_KERNEL_MANAGER_TOKEN=... wasm-kernel sandbox-manager "
        "--redis redis://:PASSWORD@127.0.0.1:6379/0 --port 8900\n"
        "  wasm-kernel sandbox-manager --config /etc/wasm-kernel/manager_config.py\n"
        "\nsee docs/scale-out.md for the whole pool",
    )
    _app_args(p, app="SandboxManagerApp", config_name="wasm_kernel_sandbox_manager_config", port=8900)
    p.add_argument("--reap-every", dest="reap_every", type=float, default=_GIVEN_ONLY,
                   help="seconds between checks for lost hosts (default: 1)")
    p.add_argument("--sweep-every", dest="sweep_every", type=float, default=_GIVEN_ONLY,
                   help="seconds between sweeps for expired sessions and orphaned kernels (default: 30)")
    p.add_argument("--orphan-grace", dest="orphan_grace", type=float, default=_GIVEN_ONLY,
                   help="seconds a kernel no session maps to may run before it is stopped (default: 120)")
    p.set_defaults(func=_run_manager)


def _run_host(args: Any) -> int:
    from ..cluster.sandbox_host import run_host

    return run_host(args)


def _run_manager(args: Any) -> int:
    from ..cluster.manager_service import SandboxManagerApp

    return SandboxManagerApp.run(SandboxManagerApp.flags_from(args), args.config_file)


def _run_router(args: Any) -> int:
    from ..cluster.router_app import RouterApp

    return RouterApp.run(RouterApp.flags_from(args), args.config_file)
