"""The pool services' configuration: traitlets, as Jupyter's own components have it.

`wasm-kernel router` and `wasm-kernel sandbox-manager` run a traitlets Application
(router_app.RouterApp, manager_service.SandboxManagerApp). Every setting is a trait
tagged config=True, and is set by, from the weakest to the strongest:

1. its environment variable, where it has one: the trait's documented default, read
   by `@default` as jupyter_server's GatewayClient and Enterprise Gateway read theirs,
   so a deployment that sets the environment keeps working;
2. a config file: the one `--config FILE` names, or else `wasm_kernel_router_config`
   (`wasm_kernel_sandbox_manager_config`), `.py` or `.json`, in Jupyter's config path
   (`jupyter --paths`), e.g. `c.RouterApp.redis_url = "redis://:PASSWORD@..."`;
3. the command's flags (`--redis`, `--port`, ...), each the alias of one trait.

Secrets (the pool key, the tokens) have no flag: a command line is visible to every
user of the machine. They come from the config file or the environment, and a
service refuses to start without them (credentials.py), with one line naming the
trait and the variable. A config file that fails (Python that raises, a value of the
wrong type) stops the service the same way: a pool service never starts on half of
its configuration.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from traitlets import Bool, Float, Integer, TraitError, Unicode, default
from traitlets.config import Application, Config
from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

from ..host.log import configure_service_logging
from .session_store import SessionStore, connect
from .credentials import (
    HOST_TOKEN_ENV, HOST_TOKEN_WHAT, MANAGER_TOKEN_ENV, MANAGER_TOKEN_WHAT, MIN_POOL_KEY, POOL_KEY_ENV,
    POOL_KEY_WHAT, REDIS_URL_ENV, MissingCredential, ServiceSecrets, check_redis_url, check_secret, fail,
    warn_insecure_demo,
)


class ConfigProblem(MissingCredential):
    """The service's configuration is unusable (a config file that fails, a value of the
    wrong type): one line for the operator, and no start."""


class PoolServiceApp(Application):
    """What every pool service that holds the pool's secrets is configured with."""

    service = ""  # the command's name, for its one-line errors
    default_port = 0

    # -- where it listens, its Redis --------------------------------------------------

    redis_url = Unicode(help=f"""The pool's Redis, with its password: redis://:PASSWORD@HOST:6379/0, or
        rediss:// for TLS (${REDIS_URL_ENV} env var).""").tag(config=True)

    @default("redis_url")
    def _redis_url_default(self) -> str:
        return os.environ.get(REDIS_URL_ENV, "")

    ip = Unicode("127.0.0.1", help="The address to bind (loopback only by default).").tag(config=True)
    port = Integer(help="The port to serve on.", min=1, max=65535).tag(config=True)

    @default("port")
    def _port_default(self) -> int:
        return self.default_port

    insecure_demo = Bool(False, help="""Allow a Redis without a password, on a machine nothing else reaches
        (prints a warning). Never waives a token or the pool key.""").tag(config=True)
    session_ttl = Float(3600.0, help="Seconds a session lives without activity.").tag(config=True)

    # -- secrets: no flags, the config file or the environment ---------------------------

    pool_key = Unicode(help=f"""The pool's signing key, the same on every host, manager and router; at least
        {MIN_POOL_KEY} characters (${POOL_KEY_ENV} env var).""").tag(config=True)

    @default("pool_key")
    def _pool_key_default(self) -> str:
        return os.environ.get(POOL_KEY_ENV, "")

    host_token = Unicode(help=f"""The sandbox hosts' Jupyter Server token, which this service presents to them
        (${HOST_TOKEN_ENV} env var).""").tag(config=True)

    @default("host_token")
    def _host_token_default(self) -> str:
        return os.environ.get(HOST_TOKEN_ENV, "")

    manager_token = Unicode(help=f"""The sandbox manager's API token (${MANAGER_TOKEN_ENV} env var).""").tag(
        config=True)

    @default("manager_token")
    def _manager_token_default(self) -> str:
        return os.environ.get(MANAGER_TOKEN_ENV, "")

    SECRETS = ("pool_key", "host_token", "manager_token")

    # -- loading ----------------------------------------------------------------------------

    @property
    def config_file_name(self) -> str:
        return f"{self.name.replace('-', '_')}_config"

    def load_settings(self, flags: Mapping[str, Any], config_file: str | None = None) -> None:
        """The config file (`config_file`, or the one found in Jupyter's config path),
        then `flags` (trait name -> value, the command line's) over it. ConfigProblem
        if a file fails or a value does not fit its trait."""
        section = type(self).__name__
        secret_flags = sorted(set(flags) & set(self.SECRETS))
        if secret_flags:  # never offered as flags; refused if a caller passes them anyway
            raise ConfigProblem(f"{', '.join(secret_flags)} on the command line would show to every user of the "
                                f"machine: set c.{section}.{secret_flags[0]} in the config file or its variable")
        self.cli_config = Config({section: dict(flags)})
        merged = Config()
        for path in self._config_files(config_file):
            loader = JSONFileConfigLoader if path.suffix == ".json" else PyFileConfigLoader
            try:
                loaded = loader(path.name, path=str(path.parent), log=self.log).load_config()
            except Exception as err:  # whatever the file's Python raised
                raise ConfigProblem(f"the config file {path} failed: {type(err).__name__}: "
                                    f"{_first_line(err)}") from None
            self._warn_if_exposed(path, loaded)
            merged.merge(loaded)
            self._loaded_config_files.append(str(path))
        merged.merge(self.cli_config)
        try:
            self.update_config(merged)
        except TraitError as err:
            raise ConfigProblem(f"a setting does not fit: {_first_line(err)}") from None

    def _warn_if_exposed(self, path: Path, loaded: Config) -> None:
        """A config file that holds a secret and that other users can read: said once."""
        holds = any(name in loaded[cls.__name__] for cls in type(self).mro() if issubclass(cls, Application)
                    and cls.__name__ in loaded for name in self.SECRETS)
        if holds and path.stat().st_mode & 0o044:
            print(f"wasm-kernel {self.service}: WARNING: {path} holds secrets and other users can read it: "
                  f"chmod 600 {path}", file=sys.stderr)

    def _config_files(self, config_file: str | None) -> list[Path]:
        if config_file:
            path = Path(config_file).expanduser()
            if path.suffix not in (".py", ".json"):
                raise ConfigProblem(f"--config {config_file}: a config file is .py or .json")
            if not path.is_file():
                raise ConfigProblem(f"--config {config_file}: no such file")
            return [path.resolve()]
        from jupyter_core.paths import jupyter_config_path

        found = []
        for folder in reversed(jupyter_config_path()):  # the first of the path is the strongest: loaded last
            for suffix in (".py", ".json"):
                path = Path(folder) / f"{self.config_file_name}{suffix}"
                if path.is_file():
                    found.append(path)
        return found

    def configured(self, name: str) -> bool:
        """Whether the config file or a flag set trait `name` (rather than its default)."""
        return any(cls.__name__ in self.config and name in self.config[cls.__name__]
                   for cls in type(self).mro() if issubclass(cls, Application))

    def source(self, name: str, env: str | None = None) -> str:
        """Where an operator sets trait `name`: what a one-line error names."""
        trait = f"c.{type(self).__name__}.{name}"
        if self.configured(name) or env is None:
            return trait
        if os.environ.get(env):
            return f"${env}"
        return f"${env} (or {trait} in the config file)"

    # -- fail closed ------------------------------------------------------------------------

    def secrets(self) -> ServiceSecrets:
        """The service's secrets, or MissingCredential for the first that is missing
        (the Redis password included); warns once if --insecure-demo let a
        password-less Redis through."""
        check_redis_url(self.redis_url, insecure_demo=self.insecure_demo)
        if self.insecure_demo:
            warn_insecure_demo(self.service, self.redis_url)
        return ServiceSecrets(
            pool_key=check_secret(self.pool_key, POOL_KEY_WHAT, how=self.source("pool_key", POOL_KEY_ENV),
                                  minimum=MIN_POOL_KEY).encode(),
            host_token=check_secret(self.host_token, HOST_TOKEN_WHAT, how=self.source("host_token", HOST_TOKEN_ENV)),
            manager_token=check_secret(self.manager_token, MANAGER_TOKEN_WHAT,
                                       how=self.source("manager_token", MANAGER_TOKEN_ENV)),
        )

    def prepare(self) -> None:
        """Everything the service checks before it serves (the secrets at least, into
        self.pool_secrets); MissingCredential if one fails."""
        raise NotImplementedError

    pool_secrets: ServiceSecrets

    def start(self) -> None:
        configure_service_logging()
        asyncio.run(self.serve())

    async def serve(self) -> None:
        """Listen and serve until stopped."""
        raise NotImplementedError

    def session_store(self) -> SessionStore:
        """The pool's Redis, with the pool's signing key and the session TTL."""
        return SessionStore(connect(self.redis_url), key=self.pool_secrets.pool_key, ttl_s=self.session_ttl)

    @classmethod
    def run(cls, flags: Mapping[str, Any], config_file: str | None = None) -> int:
        """The command: settings loaded, credentials checked (one line and exit 2 if
        one is missing), then served until stopped."""
        app = cls()
        try:
            app.load_settings(flags, config_file)
            app.prepare()
        except MissingCredential as err:
            return fail(cls.service, err)
        app.start()
        return 0

    @classmethod
    def flags_from(cls, args: Any) -> dict[str, Any]:
        """The traits a parsed command line sets: its options are named after them,
        and only those given are there (argparse.SUPPRESS)."""
        traits = cls.class_trait_names(config=True)
        return {name: value for name, value in vars(args).items() if name in traits}


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


__all__ = ["ConfigProblem", "PoolServiceApp"]
