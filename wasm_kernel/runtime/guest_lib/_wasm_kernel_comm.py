"""Jupyter comms inside the guest: the `comm` package's API over the host door.

ipykernel makes `comm.create_comm` return a comm that publishes on its IOPub
socket; here a comm's messages go to the host (`op: comm`), which checks them and
publishes them with the request being served as their parent. Messages from the
frontend reach `deliver()` as a turn of their own (the kernel runs it when no cell
runs), and the `comm` package's CommManager dispatches them to targets and comms,
as in ipykernel. Binary buffers travel base64-encoded both ways.
"""

import base64

import comm
from comm.base_comm import BaseComm

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire


class GuestComm(BaseComm):
    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        _guest.flush_streams()
        content = {"data": {} if data is None else data, "comm_id": self.comm_id, **keys}
        message = {
            "op": wire.OP_COMM,
            "msg_type": msg_type,
            "content": content,
            "metadata": metadata or {},
            "buffers": [base64.b64encode(bytes(b)).decode("ascii") for b in (buffers or ())],
        }
        answer = _guest.call(message)
        if answer.get("ok") is False and answer.get("error") == "bad_message":
            raise ValueError(f"this comm message cannot be sent: {answer.get('message') or 'the host refused it'}")


def _create_comm(*args, **kwargs):
    return GuestComm(*args, **kwargs)


_kernel = None  # the shell's kernel object (install), the parent's keeper


def install(kernel):
    """Make the `comm` package (and so ipywidgets) use the host door; the shell's
    kernel object gets the manager where older libraries look for it."""
    global _kernel
    _kernel = kernel
    comm.create_comm = _create_comm
    kernel.comm_manager = comm.get_comm_manager()


def deliver(msg_type, msg):
    """Hand one comm_open / comm_msg / comm_close from the frontend to the manager,
    with the message as the parent of whatever its handlers send (an Output widget
    captures by it), then report the turn's end to the host (a turn of its own:
    the host calls it by name, _wasm_kernel_serve)."""
    msg["buffers"] = [memoryview(base64.b64decode(b)) for b in msg.get("buffers") or ()]
    _kernel.set_parent({"header": msg.get("header", {}), "metadata": msg.get("metadata", {})})
    manager = comm.get_comm_manager()
    handler = {"comm_open": manager.comm_open, "comm_msg": manager.comm_msg, "comm_close": manager.comm_close}
    try:
        handler[msg_type](None, None, msg)
    except Exception as err:  # the manager logs its handlers' errors; this is a malformed message
        _guest.flush_streams()
        error = {"ename": type(err).__name__, "evalue": str(err), "traceback": []}
        _guest.call({"op": wire.OP_RESULT, "status": "error", "exit_code": 1, "error": error})
        return
    _guest.flush_streams()
    _guest.call({"op": wire.OP_RESULT, "status": "ok", "exit_code": 0})


def comm_info(target_name=None):
    """The open comms, as comm_info_reply lists them (a query)."""
    manager = comm.get_comm_manager()
    return {
        "comms": {
            comm_id: {"target_name": c.target_name}
            for comm_id, c in manager.comms.items()
            if target_name is None or c.target_name == target_name
        }
    }
