"""The kernel spec manager of a server that must run only the sandboxed kernel: a
course's single-user servers and the pool's sandbox hosts."""

from __future__ import annotations

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel

from ...kernelspec import KERNEL_NAME


class WasmOnlyKernelSpecManager(KernelSpecManager):
    """Only the sandboxed kernel: jupyter_client's allowed_kernelspecs hides the others
    from listings but still starts them by name, and a native python3 on such a server
    would run untrusted code outside the sandbox."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if kernel_name != KERNEL_NAME:
            raise NoSuchKernel(kernel_name)
        return super().get_kernel_spec(kernel_name)


__all__ = ["WasmOnlyKernelSpecManager"]
