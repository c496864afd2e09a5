"""A small IPython-compatible surface for notebooks that run in the wasm-kernel sandbox.

Only the display API is provided; there is no interactive shell in the guest.
"""

__version__ = "8.0.0+wasm-kernel"
# Libraries gate IPython integration on this (matplotlib reads it once IPython is
# imported); with get_ipython() returning None they then leave the shell alone.
version_info = (8, 0, 0, "")


def get_ipython():
    return None


from . import display  # noqa: E402,F401
