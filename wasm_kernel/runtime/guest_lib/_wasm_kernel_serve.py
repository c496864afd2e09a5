"""The one entry of every turn the host starts: ask the host for the turn's request
and call the function it names.

The host never sends code for a turn: every turn's code is the same constant
(_wasm_kernel_wire.SERVE_TURN), and the request comes back through the door
(OP_REQUEST) as a name from the fixed table below with JSON arguments. The host
answers that question once per turn, so a cell that asks again, or calls serve()
itself, gets a refusal, never another request.
"""

import _wasm_kernel_comm
import _wasm_kernel_guest as _guest
import _wasm_kernel_image as _image
import _wasm_kernel_wire as wire


def _run(request):
    _image.kernel.run(request)


def _query(op, args):
    _image.kernel.query(op, args)


FUNCTIONS = {
    "setup": _image.setup,  # a plain boot: build, then start
    "build": _image.build,  # a warm image's build
    "start": _image.start,  # a sandbox started from a warm image
    "resume": _image.resume,  # a sandbox woken from its session's saved state
    "run": _run,  # a cell
    "query": _query,  # a kernel's question
    "comm": _wasm_kernel_comm.deliver,  # a frontend's comm message
}
assert set(FUNCTIONS) == set(wire.GUEST_FUNCTIONS), "the guest's table and the wire's list differ"


def serve():
    answer = _guest.call({"op": wire.OP_REQUEST})
    if not answer.get("ok"):
        raise RuntimeError(f"this turn has no request to serve: {answer.get('message') or answer.get('error')}")
    FUNCTIONS[answer["name"]](**answer["args"])
