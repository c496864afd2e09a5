# Limits for each submission's kernel while grading. Point Jupyter at this folder
# when grading, e.g. `JUPYTER_CONFIG_PATH=$PWD/grading nbgrader autograde ps1`;
# the kernel reads c.WasmKernel.* from jupyter_config.py on Jupyter's config path.
c = get_config()  # noqa: F821

c.WasmKernel.deadline = 10.0             # seconds per cell: an endless loop stops here
c.WasmKernel.fuel = 200_000_000_000      # instructions per cell, about 20 s of Python
c.WasmKernel.memory = 512 << 20          # a memory bomb gets MemoryError at 512 MiB
c.WasmKernel.disk_max_bytes = 32 << 20   # a submission's /app and /tmp: 32 MiB ...
c.WasmKernel.disk_max_files = 2_000      # ... and 2,000 names
c.WasmKernel.stdout_max_bytes = 1 << 20  # output kept and sent per cell: 1 MiB
c.WasmKernel.stderr_max_bytes = 1 << 20
c.WasmKernel.display_max_bytes = 4 << 20
c.WasmKernel.pip_enabled = False         # no %pip while grading
c.WasmKernel.show_file_changes = False   # no "Files created" displays in the feedback
# The same values as ceilings, so neither a notebook's %limits nor a kernel.json's
# argv can raise them.
c.WasmKernel.max_deadline = 10.0
c.WasmKernel.max_fuel = 200_000_000_000
c.WasmKernel.max_memory = 512 << 20
c.WasmKernel.max_disk_bytes = 32 << 20
c.WasmKernel.max_disk_files = 2_000
c.WasmKernel.max_output_bytes = 4 << 20
