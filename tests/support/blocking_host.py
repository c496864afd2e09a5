"""`wasm-kernel host` with one route more, for tests: GET /test-block?seconds=S holds
the server's event loop (a synchronous sleep) for S seconds, as a burst of work on
that loop does while many kernels start at once. Run by path:
`python tests/support/blocking_host.py host --redis URL ...` (HostProcess(launcher=...))."""

from __future__ import annotations

import sys
import time
from typing import Any

from tornado import web

from wasm_kernel.cli import main
from wasm_kernel.cluster import sandbox_host


class Block(web.RequestHandler):
    def get(self) -> None:
        time.sleep(float(self.get_argument("seconds")))  # on the loop, on purpose
        self.finish({"blocked": True})


_init_webapp = sandbox_host.PoolServerApp.init_webapp


def _with_block(self: Any) -> None:
    _init_webapp(self)
    self.web_app.add_handlers(".*", [(r"/test-block", Block)])


sandbox_host.PoolServerApp.init_webapp = _with_block  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
