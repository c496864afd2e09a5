"""`python -m wasm_kernel -f {connection_file}`: start the Jupyter kernel."""

from .kernel.kernel_app import main

main()
