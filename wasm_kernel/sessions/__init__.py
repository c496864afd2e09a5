"""Sessions: one UUID-named workspace per session, safe host-side file operations,
metadata kept out of the guest's reach, leases, pruning, the stable identity
registry (one session per notebook, run or day), which follows a renamed
notebook (moves.py), and each session's input/output history (history_store.py,
for Jupyter's history_request).

Layer rule: imports wasm_kernel.core, .runtime and .host only.
"""

import lazy_loader as _lazy

# Imported when first named, from the one list in __init__.pyi: `from
# wasm_kernel.sessions.registry import ...` (what the kernel does) then costs the
# kernel's start only the modules it uses, not the moves, pruning and file operations
# every start paid for before.
__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
