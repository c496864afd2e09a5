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


# A kernel subshell's work, run inside the running cell at its next safe point
# (runtime/nested_work.py): the host asks with the interrupt's signal marked as host
# work, and this takes the work, runs its function as a turn would, and says when it
# is done. What the running cell keeps of the shell is put back afterwards: its
# parent, execution count, payloads and tracebacks, the interrupt window, the capture.
NESTED = ("run", "comm")


def take_nested_work():
    while True:
        answer = _guest.call({"op": wire.OP_WORK_TAKE})
        name = answer.get("name") if isinstance(answer, dict) else None
        if name not in NESTED:
            return
        kernel = _image.kernel
        shell = kernel.shell
        kept = (kernel._parent, shell.execution_count, shell.payload_manager.read_payload(),
                shell._last_traceback, getattr(shell, "_last_traceback_during_displayhook", False),
                _guest._interrupt_words[0], _guest.swap_capture(None))
        try:
            FUNCTIONS[name](**answer["args"])
        except BaseException as err:  # reported in its result; the running cell goes on
            _guest.call({"op": wire.OP_RESULT, "status": "error", "exit_code": 1,
                         "error": {"ename": type(err).__name__, "evalue": str(err), "traceback": []}})
        finally:
            (kernel._parent, shell.execution_count, payload, shell._last_traceback,
             shell._last_traceback_during_displayhook, _guest._interrupt_words[0], capture) = kept
            shell.payload_manager.clear_payload()
            for item in payload:
                shell.payload_manager.write_payload(item)
            _guest.swap_capture(capture)
            _guest.call({"op": wire.OP_WORK_DONE})


_guest.host_work.append(take_nested_work)
