"""The wire between the host and the guest: the op of each message the guest sends
through the host.call door, the most one message may hold, the comm message types,
the guest functions a turn may call and the queries the host may run. The guest imports this file; the host reads the
same file (runtime/wire.py), so both sides share one list. Constants only: no imports.
"""

# The most the host reads in one message: past it the door faults, so the guest says
# so plainly before trying.
MAX_MESSAGE_BYTES = 64 << 20

# guest -> host
OP_DISPLAY = "display"
OP_EXECUTE_RESULT = "execute_result"
OP_CLEAR_OUTPUT = "clear_output"
OP_ERROR = "error"
OP_COMM = "comm"
OP_HISTORY = "history"
OP_INPUT = "input"
OP_IMMORTALIZE = "immortalize"
OP_STREAM_RING = "stream_ring"
OP_RESULT = "result"  # the end of a turn: ok, error or exit
OP_QUERY_RESULT = "query_result"  # a query's value, in a query turn only
OP_REQUEST = "request"  # the turn asks for its request: a guest function's name and arguments, once
# The network door (runtime/network_door.py): a request the host makes under the
# operator's rules, its body read in chunks (answered as raw bytes), its end.
OP_HTTP_OPEN = "http_open"
OP_HTTP_READ = "http_read"
OP_HTTP_CLOSE = "http_close"
# `python ...` as a command: a child interpreter of the same sandbox runs it to its end
# (runtime/child_python.py); its turn's code is CHILD_TURN, its request the one
# function CHILD_FUNCTION, and it may start children of its own, MAX_CHILD_DEPTH deep.
OP_PYTHON = "python"
CHILD_FUNCTION = "child"
CHILD_TURN = "import _wasm_kernel_child; _wasm_kernel_child.serve()"
MAX_CHILD_DEPTH = 4
# The source of a built-in library's file (host/library_sources.py): its path inside
# the stdlib zip; the answer is the file's bytes, or nothing.
OP_SOURCE = "source"
# The debugger (_wasm_kernel_debugger): the guest sends its Debug Adapter Protocol
# events and responses, and, stopped, asks for its next request (runtime/debug_door.py).
OP_DEBUG = "debug"
# Each cell's code is named as a file here, as ipykernel names it for its debugger:
# this prefix (WASI's getpid() is always 42, and /tmp the guest's temp folder), the
# murmur2 hash of the cell's code with this seed (ipykernel's get_tmp_hash_seed), .py.
# The host says both in debugInfo, and JupyterLab computes each cell's path from them.
CELL_FILE_PREFIX = "/tmp/ipykernel_42/"
CELL_HASH_SEED = 0xC70F6907
# The most requests a stopped debugger keeps queued, and the most breakpoints it holds.
MAX_DEBUG_QUEUE = 64
MAX_BREAKPOINTS = 1000
# A kernel subshell's work run inside the running cell (runtime/nested_work.py): the
# guest takes it at a safe point (the answer names a guest function and its
# arguments, or nothing), runs it, and says when it is done.
OP_WORK_TAKE = "work_take"
OP_WORK_DONE = "work_done"
# The first byte of an http_read answer: data follows, or a JSON error; no bytes at all is the end.
HTTP_DATA = b"D"
HTTP_ERROR = b"E"
# An exact read (the rest of a body, in one answer with no mark) is at least this long,
# so its answer is never mistaken for an error's JSON line; smaller bodies come in chunks.
EXACT_READ_MIN = 64 << 10
EXACT_READ_MAX = 1 << 30  # and at most this: no response may be larger
MAX_HTTP_BODY = 16 << 20  # a request body sent through the door (uploads are not the door's purpose)

# The comm messages a frontend sends and guest code publishes.
COMM_MSG_TYPES = ("comm_open", "comm_msg", "comm_close")

# The guest functions a turn may call by name (_wasm_kernel_serve.FUNCTIONS), the
# only thing the host ever asks of the guest: every turn's code is the same constant,
# and the host refuses any other name before a turn starts.
GUEST_FUNCTIONS = ("setup", "build", "start", "resume", "run", "query", "comm")
# The code of every such turn, always the same: it asks for the request (OP_REQUEST).
SERVE_TURN = "import _wasm_kernel_serve; _wasm_kernel_serve.serve()"

# The kernel's questions the host may ask as a query (_wasm_kernel_kernel.GuestKernel).
QUERY_OPS = ("complete", "inspect", "is_complete", "user_expressions", "comm_info", "debug", "names")
