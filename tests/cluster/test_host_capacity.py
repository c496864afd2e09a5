"""A sandbox host's capacity counts each kernel once: a kernel that has started but
whose create has not answered yet (its session row being saved) is not also counted
as still starting. The host's own session manager, with a kernel manager whose
kernels start at once and whose model answers slowly (a loaded host)."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path
from typing import Any

from jupyter_server.services.contents.filemanager import AsyncFileContentsManager
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

from wasm_kernel.cluster.host_client import HOST_FULL
from wasm_kernel.cluster.sandbox_host import PoolSessionManager


class _InstantKernels(AsyncMappingKernelManager):
    """Kernels that are listed as soon as they start; kernel_model() waits for
    `answer`, which holds a create between its kernel's start and its reply."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.listed = asyncio.Event()
        self.answer = asyncio.Event()
        self.fake: dict[str, dict[str, Any]] = {}

    async def start_kernel(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        kernel_id = str(uuid.uuid4())
        self.fake[kernel_id] = {"id": kernel_id, "name": "wasm-python", "last_activity": None,
                                "execution_state": "idle", "connections": 0}
        self.listed.set()
        return kernel_id

    def list_kernel_ids(self) -> list[str]:
        return list(self.fake)

    def __contains__(self, kernel_id: object) -> bool:
        return kernel_id in self.fake

    async def kernel_model(self, kernel_id: str) -> dict[str, Any]:  # type: ignore[override]
        await self.answer.wait()
        return self.fake[kernel_id]


def _path(n: int) -> str:
    return f"pool/course/{hashlib.sha256(str(n).encode()).hexdigest()}/notebook.ipynb"


def test_a_started_kernel_whose_create_has_not_answered_counts_once_against_capacity(tmp_path: Path) -> None:
    async def main() -> None:
        kernels = _InstantKernels(root_dir=str(tmp_path))
        sessions = PoolSessionManager(kernel_manager=kernels,
                                      contents_manager=AsyncFileContentsManager(root_dir=str(tmp_path)),
                                      database_filepath=":memory:")
        sessions.capacity = 2
        first = asyncio.create_task(sessions.create_session(path=_path(1), name="notebook.ipynb", type="notebook",
                                                            kernel_name="wasm-python"))
        await kernels.listed.wait()  # the first kernel runs; its create waits for its model
        second = asyncio.create_task(sessions.create_session(path=_path(2), name="notebook.ipynb", type="notebook",
                                                             kernel_name="wasm-python"))
        await asyncio.sleep(0.1)
        kernels.answer.set()
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert [r if isinstance(r, BaseException) else "ok" for r in results] == ["ok", "ok"], results
        assert len(kernels.list_kernel_ids()) == 2
        # And the third is refused: the host holds two.
        try:
            await sessions.create_session(path=_path(3), name="notebook.ipynb", type="notebook",
                                          kernel_name="wasm-python")
        except RuntimeError as err:
            assert str(err) == HOST_FULL
        else:
            raise AssertionError("a third kernel was admitted on a host of capacity 2")
        assert sessions._starting == 0

    asyncio.run(main())
