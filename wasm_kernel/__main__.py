"""`python -m wasm_kernel -f {connection_file}`: start the Jupyter kernel."""

import gc

# No collections while the kernel starts: every object made until its sandbox is
# open lives as long as the process, and the full collections the imports trigger
# cost ~25 ms of a ~300 ms start. WasmKernel turns collection back on, with those
# objects frozen out of it, once the sandbox is open.
gc.disable()

from .kernel.kernel_app import main  # noqa: E402

main()
