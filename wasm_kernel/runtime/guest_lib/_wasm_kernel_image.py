"""The shell's image: build() makes the state a warm image holds, shared by every
sandbox started from it; start() makes that state one sandbox's; setup() does both
in one boot, for a guest that starts without an image.

build() makes the shell and its kernel object, loads IPython's default extensions
as IPKernelApp does, imports the preloaded modules, warms the traceback machinery,
finds the seeded random generators and makes every object that exists then
immortal. start() takes the sandbox's environment, stream ring, host magics and
history, reseeds the generators and forgets the import finders of the mounts that
differ between sandboxes. Nothing build() does may depend on the sandbox.
"""

import os
import sys

os.environ.setdefault("IPYTHONDIR", "/tmp/.ipython")
os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")

from IPython.core.shellapp import InteractiveShellApp  # noqa: E402
from traitlets.config import LoggingConfigurable  # noqa: E402

import _wasm_kernel_comm  # noqa: E402
import _wasm_kernel_guest as _guest  # noqa: E402
import _wasm_kernel_reseed as reseed  # noqa: E402
import _wasm_kernel_system  # noqa: E402
import _wasm_kernel_wire as wire  # noqa: E402
import _wasm_kernel_zipped_libs  # noqa: E402
from _wasm_kernel_kernel import GuestKernel  # noqa: E402
from _wasm_kernel_magics import set_host_magics  # noqa: E402
from _wasm_kernel_shell import SandboxShell  # noqa: E402

shell = None  # the SandboxShell, once built
kernel = None  # its GuestKernel


class _ShellExtensions(LoggingConfigurable, InteractiveShellApp):
    """IPython's own extension loading (InteractiveShellApp.init_extensions, as
    IPKernelApp runs it): its default_extensions (storemagic), and any configured.
    The mixin expects its application's logger; a LoggingConfigurable has one."""


def setup(config):
    """Build the shell and start it for this sandbox, in one turn (a plain boot)."""
    build(())
    start(config)


def build(preload):
    """Build the shell and import `preload` (module names)."""
    global shell, kernel
    shell = SandboxShell.instance()
    kernel = shell.kernel = GuestKernel(shell)
    _wasm_kernel_comm.install(kernel)
    _wasm_kernel_system.install(shell)
    # tqdm starts a monitor thread for every bar and warns when it cannot; the guest
    # has no threads, and the bar works without it, as with monitor_interval = 0.
    import warnings

    warnings.filterwarnings("ignore", message="tqdm:disabling monitor support")
    # A broken site fails the build, loudly, as a failed import would.
    _ShellExtensions(shell=shell, reraise_ipython_extension_failures=True).init_extensions()
    _wasm_kernel_zipped_libs.install()
    _network()
    import importlib

    for name in preload:
        # Imported, not bound: a notebook's namespace starts empty, as on ipykernel.
        importlib.import_module(name)
    _warm_tracebacks()
    _warm_cell_path()
    reseed.find_seeded_generators()
    _settle_boot_objects()


def start(config):
    """Make the built shell this sandbox's. config: host_magics {name: kind},
    session_number, environment {name: value} (checked on the host) for os.environ,
    shell_commands (whether `!` lines run in the confined shell)."""
    os.environ.update(config.get("environment", {}))
    _wasm_kernel_system.set_enabled(config.get("shell_commands", True))
    _guest.register_stream_ring()
    set_host_magics(config.get("host_magics", {}))
    reseed.reseed()
    _forget_sandbox_finders()
    history = shell.history_manager
    history.session_number = int(config.get("session_number", 0) or 0)
    # In and _iN as the host's store has them: the interpreter may be new (exit(),
    # %reset, a failed rollback) while the kernel session goes on.
    count = history.restore_session()
    if count is not None:
        shell.execution_count = count


def resume(config):
    """Wake a saved state the host has put back (runtime/hibernation.py): the shell,
    its namespace, In/Out and the execution count are as they were. What belongs to
    the host it now runs on is taken afresh, as start() takes it: the environment,
    the stream ring, the host magics, this kernel's history session and the import
    finders of the mounts. The generators are not reseeded: the state is this
    session's own, not an image shared with others."""
    os.environ.update(config.get("environment", {}))
    _wasm_kernel_system.set_enabled(config.get("shell_commands", True))
    _network()  # a state saved by an older wasm-kernel may lack the door
    _guest.register_stream_ring()
    set_host_magics(config.get("host_magics", {}))
    _forget_sandbox_finders()
    shell.history_manager.session_number = int(config.get("session_number", 0) or 0)


def _network():
    """Every HTTP client through the host's network door, whatever the operator's
    list: the host decides each request, and refuses every one when the list is
    empty, in the one line that names the host and the setting (runtime/network_door.py)."""
    import _wasm_kernel_net_http

    _wasm_kernel_net_http.install()


def _warm_tracebacks():
    """Format one traceback now, so the first error a user meets does not pay for
    importing stack_data and for inspect's map of every loaded module to its file
    (~900 modules with pandas: 6,000 lstat calls, 0.4 s). No shell state changes:
    nothing is shown and sys.last_exc is not set."""
    try:
        raise RuntimeError("warm-up")
    except RuntimeError as err:
        shell.InteractiveTB.structured_traceback(type(err), err, err.__traceback__)


def _warm_cell_path():
    """Take once now the per-cell paths every first cell takes (the input
    transformers, parsing and compiling, the display formatters of a result), so
    what they make on first use is part of the image, not of each sandbox's first
    cell. No shell state changes: nothing runs in the namespace, nothing is shown,
    counted or stored."""
    code = shell.transform_cell("1+1\n")
    compile(code, "<warm-up>", "exec")
    shell.display_formatter.format(2)
    # What run_cell itself does first time: IPython's %logstart logger is built (its
    # module imported) on first use; the cell's code file is named in
    # tempfile.gettempdir(), which probes the temporary folder with a file of its own
    # the first time (TMPDIR is the sandbox's own /tmp in every sandbox,
    # guest_config.GUEST_ENV, so the folder it finds holds for all of them); run_code
    # imports bdb (from the stdlib's zip, after listing /app). Together ~10 ms of each
    # sandbox's first cell.
    shell.logger  # noqa: B018 (a property that builds it)
    shell.compile.get_code_name("1+1\n", code, 1)
    import bdb  # noqa: F401


# Mounts that are the same in every sandbox made from one image (the image key
# covers them): their import finders' caches stay valid.
_SHARED_MOUNTS = ("/usr/local/lib/", "/opt/wasm-kernel")


def _forget_sandbox_finders():
    """A warm image was made on another /app and another packages folder: the
    finders cached for those (and for '', the working directory) must look afresh.
    Not importlib.invalidate_caches(): that rereads the stdlib zip's directory too
    (~150M instructions)."""
    from importlib.metadata import MetadataPathFinder

    for entry in list(sys.path_importer_cache):
        if not entry.startswith(_SHARED_MOUNTS) or entry.endswith("/session-packages"):
            del sys.path_importer_cache[entry]
    MetadataPathFinder.invalidate_caches()


def _settle_boot_objects():
    """Make what exists now (IPython, the stdlib modules, their functions and
    classes) immortal and out of the collector's reach, as CPython does for its
    own static objects: then a cell's reference counting never writes to their
    pages, and a checkpoint copies only what the cell itself changed. The host
    writes the immortal reference count (the guest cannot write its own object
    headers); these objects live as long as the interpreter anyway."""
    import array
    import gc

    # Every object is held in `keep` until the host has written its header: an
    # address whose object was freed meanwhile (a temporary int of this loop)
    # would be reused memory, and a write there would corrupt the allocator.
    keep, seen = [], set()
    ours = {id(keep), id(seen)}
    for obj in gc.get_objects():
        for item in (obj, *gc.get_referents(obj)):
            address = id(item)
            if address not in seen and address not in ours:
                seen.add(address)
                keep.append(item)
    found = array.array("I", map(id, keep))
    address, count = found.buffer_info()
    _guest.call({"op": wire.OP_IMMORTALIZE, "address": address, "count": count})
    del found, keep, seen
    gc.freeze()
