"""The Jupyter Server extension: the sandbox drive's REST API and the listener that
keeps a notebook's session when the notebook is renamed.

It runs in the user's Jupyter Server, next to the kernels it starts, and reaches
the sessions root those kernels use, through the sessions layer's safe file
operations only. `wasm_kernel._jupyter_server_extension_points` names
`extension.py`; the wheel enables it (jupyter-config/), so `pip install` is enough.
"""
