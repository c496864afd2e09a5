"""The shell's display publisher and display hook: display(), update_display(),
clear_output() and a cell's value, as messages to the host through the door
(ipykernel's ZMQDisplayPublisher and ZMQShellDisplayHook publish them on IOPub).

The host checks every message and publishes it with the request being served as
its parent; an output it refuses is an error in the cell, never one that silently
goes missing.
"""

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire


def send_output(message):
    """Send a display or a result; raise if the host refused it (nested too deep,
    malformed)."""
    answer = _guest.call(message)
    if answer.get("ok") is False and answer.get("error") == "bad_message":
        raise ValueError(f"this output cannot be shown: {answer.get('message') or 'the host refused it'}")


class HostDisplayPublisher(DisplayPublisher):
    """display(), update_display() and clear_output() as messages to the host."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        self._validate_data(data, metadata)
        _guest.flush_streams()  # what the cell printed first is shown first
        message = {"op": wire.OP_DISPLAY, "data": data, "metadata": metadata or {}, "update": bool(update)}
        if transient:
            message["transient"] = transient
        send_output(message)

    def clear_output(self, wait=False):
        _guest.flush_streams()
        _guest.call({"op": wire.OP_CLEAR_OUTPUT, "wait": bool(wait)})


class HostDisplayHook(DisplayHook):
    """The cell's value as an execute_result message. As ipykernel's
    ZMQShellDisplayHook (ipykernel.displayhook), `msg` is the message being built
    while the value is formatted: the shell's _showtraceback reads it to tell a
    failing _repr_*_ from a failing cell."""

    msg = None

    def start_displayhook(self):
        super().start_displayhook()
        self.msg = {"op": wire.OP_EXECUTE_RESULT, "data": {}, "metadata": {}, "execution_count": self.prompt_count}

    def write_output_prompt(self):
        pass  # the frontend draws Out[n] from execution_count

    def write_format_data(self, format_dict, md_dict=None):
        if self.msg is not None:
            self.msg["data"] = format_dict
            self.msg["metadata"] = md_dict or {}

    def finish_displayhook(self):
        _guest.flush_streams()
        msg, self.msg = self.msg, None
        try:
            if msg is not None and msg["data"]:
                send_output(msg)
        finally:
            super().finish_displayhook()
