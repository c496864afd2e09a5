"""A small IPython-compatible surface for notebooks that run in the wasm-kernel sandbox.

Only the display API is provided; there is no interactive shell in the guest.
"""

__version__ = "8.0.0+wasm-kernel"


def get_ipython():
    return None


from . import display  # noqa: E402,F401
