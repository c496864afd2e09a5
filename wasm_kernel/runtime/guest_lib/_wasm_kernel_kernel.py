"""The guest-side kernel object, as pyodide-kernel's kernel.py: it runs a cell the way
ipykernel's do_execute does and answers the kernel's questions about the live
namespace (complete, inspect, is_complete, user_expressions, comm_info), each
reported to the host through the door. It is also what libraries find on
get_ipython().kernel: the request being served (get_parent) and the comm manager.

ipykernel itself cannot be imported in the guest (its package imports pyzmq, which
is compiled code), so what must match it is copied; each copy names its source.
"""

import sys

import _wasm_kernel_comm
import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire


NAMES_MAX = 20000  # names a fingerprint covers (a namespace with more: the first ones)
_CHEAP_BYTES = 16 << 20  # contents read for a fingerprint only up to this size


def _fingerprint(value):
    kind = type(value)
    head = f"{kind.__module__}.{kind.__qualname__}:{id(value):x}"
    try:
        import zlib

        if kind.__module__ == "numpy" and kind.__name__ == "ndarray" and value.nbytes <= _CHEAP_BYTES:
            import numpy

            return f"{head}:{value.shape}:{zlib.crc32(numpy.ascontiguousarray(value).view('u1'))}"
        if kind.__module__.startswith("pandas.") and kind.__name__ in ("DataFrame", "Series") \
                and value.size <= _CHEAP_BYTES // 8:
            import pandas

            return f"{head}:{value.shape}:{int(pandas.util.hash_pandas_object(value, index=True).sum())}"
        if kind.__name__ == "generator" and kind.__module__ == "builtins":  # where it is in its body
            frame, inner = value.gi_frame, value.gi_yieldfrom
            if frame is None:
                return f"{head}:done"
            inner_at = repr(inner.__reduce__())[:4096] if inner is not None else ""
            return f"{head}:{frame.f_lasti}:{zlib.crc32(repr(frame.f_locals)[:1 << 16].encode('utf-8', 'replace'))}:{inner_at}"
        if kind in (int, float, complex, bool, str, bytes, tuple, list, dict, set, frozenset) \
                and (not hasattr(value, "__len__") or len(value) <= 10000):
            return f"{head}:{zlib.crc32(repr(value)[:1 << 20].encode('utf-8', 'replace'))}"
    except Exception:
        pass
    return head


class GuestKernel:
    def __init__(self, shell):
        self.shell = shell
        self.comm_manager = None  # set by _wasm_kernel_comm.install
        self._parent = {}
        self._taking_debug = False
        self._queries = {
            "complete": self.complete,
            "inspect": self.inspect,
            "is_complete": self.is_complete,
            "user_expressions": self.user_expressions,
            "comm_info": self.comm_info,
            "debug": self.debug,
            "names": self.names,
        }
        _guest.host_work.append(self.take_debug_requests)

    # --- the request being served --------------------------------------------------

    def get_parent(self, channel=None):
        return self._parent

    @property
    def parent_header(self):
        return self._parent.get("header", {})

    def set_parent(self, parent):
        self._parent = parent or {}

    # --- execute_request -----------------------------------------------------------

    def run(self, request):
        """Run one cell as ipykernel's IPythonKernel.do_execute does, and report its
        end to the host: ok, error (with the traceback shown) or exit, and the
        cell's payloads. request: CellOptions.request's fields."""
        sh = self.shell
        if request.get("packages_changed"):
            import importlib

            importlib.invalidate_caches()
        silent = bool(request.get("silent", False))
        store_history = bool(request.get("store_history", True))
        self.set_parent(request.get("parent"))
        count = request.get("execution_count")
        if count is not None:
            sh.execution_count = int(count)
        hm = sh.history_manager
        hm.backfill(request.get("backfill", ()))
        if store_history and not silent:
            hm.pad_to(sh.execution_count)
            history_cell = request.get("history_cell")
            if history_cell is not None:
                # One cell split around host magics: In[n] is the whole cell, stored once.
                if request.get("first_part", True):
                    hm.store_inputs(sh.execution_count, history_cell, history_cell)
                store_history = False
        sh.payload_manager.clear_payload()
        sh.exit_now = False
        kwargs = {"store_history": store_history, "silent": silent}
        if request.get("cell_id"):
            kwargs["cell_id"] = request["cell_id"]
        result = sh.run_cell(request["code"], **kwargs)
        debugger = sys.modules.get("_wasm_kernel_debugger")
        if debugger is not None:  # loaded once a frontend debugged: its step ends with the cell
            debugger.debugger(sh).cell_ended()
        # From here as do_execute builds its reply.
        err = result.error_before_exec if result.error_before_exec is not None else result.error_in_exec
        message = {"op": wire.OP_RESULT, "status": "ok", "exit_code": 0, "payload": sh.payload_manager.read_payload()}
        sh.payload_manager.clear_payload()
        if sh.exit_now:
            message["status"] = "exit"
        elif not result.success or sh._last_traceback_during_displayhook:
            message["status"] = "error"
            message["error"] = {
                "ename": type(err).__name__,
                "evalue": str(err),
                "traceback": list(sh._last_traceback or []),
            }
        _guest.flush_streams()
        _guest.call(message)

    # --- queries -------------------------------------------------------------------

    def query(self, op, args):
        """Answer one of the kernel's queries; the value goes back in a query_result
        message, never into the user's namespace or history."""
        try:
            value = self._queries[op](**args)
        except BaseException as err:  # user code (a __repr__, a __dir__) may raise anything
            error = {"ename": type(err).__name__, "evalue": str(err), "traceback": []}
            _guest.call({"op": wire.OP_RESULT, "status": "error", "exit_code": 1, "error": error})
            return
        _guest.call({"op": wire.OP_QUERY_RESULT, "value": value})
        _guest.call({"op": wire.OP_RESULT, "status": "ok", "exit_code": 0})

    def complete(self, code, cursor_pos):
        # ipykernel.ipkernel.IPythonKernel._experimental_do_complete, without jedi.
        from IPython.core.completer import Completion, provisionalcompleter, rectify_completions

        with provisionalcompleter():
            found = list(rectify_completions(code, self.shell.Completer.completions(code, cursor_pos)))
            if found and all(c.text.startswith(".") and code[c.start:c.start + 1] == "." for c in found):
                # Without jedi, IPython 9 completes `str.upp` as `.upper` from the dot;
                # ipykernel (with jedi) answers `upper` after it, which frontends expect.
                found = [Completion(c.start + 1, c.end, c.text[1:], type=c.type, signature=c.signature)
                         for c in found]
        comps = [
            {"start": c.start, "end": c.end, "text": c.text, "type": c.type, "signature": c.signature}
            for c in found
        ]
        start, end = (found[0].start, found[0].end) if found else (cursor_pos, cursor_pos)
        return {
            "matches": [c.text for c in found],
            "cursor_start": start,
            "cursor_end": end,
            "metadata": {"_jupyter_types_experimental": comps},
        }

    def inspect(self, code, cursor_pos, detail_level=0):
        # ipykernel.ipkernel.IPythonKernel.do_inspect.
        from IPython.utils.tokenutil import token_at_cursor

        name = token_at_cursor(code, cursor_pos)
        try:
            bundle = self.shell.object_inspect_mime(name, detail_level=detail_level)
        except KeyError:
            return {"found": False, "data": {}, "metadata": {}}
        if not self.shell.enable_html_pager:
            bundle.pop("text/html", None)
        return {"found": True, "data": bundle, "metadata": {}}

    def is_complete(self, code):
        # ipykernel.ipkernel.IPythonKernel.do_is_complete.
        status, indent = self.shell.input_transformer_manager.check_complete(code)
        reply = {"status": status}
        if status == "incomplete":
            reply["indent"] = " " * (indent or 0)
        return reply

    def user_expressions(self, expressions):
        return self.shell.user_expressions(expressions)

    def comm_info(self, target_name=None):
        return _wasm_kernel_comm.comm_info(target_name)

    def names(self):
        """The user's variables, each as a fingerprint (its type, identity and, for
        what is cheap to read, its contents): the host compares two to say how many
        variables a %rewind changed."""
        ns, hidden = self.shell.user_ns, self.shell.user_ns_hidden
        out = {}
        for name, value in list(ns.items())[:NAMES_MAX]:
            if name.startswith("_") or (name in hidden and hidden[name] is value):
                continue
            out[name] = _fingerprint(value)
        return out

    def debug(self, request):
        import _wasm_kernel_debugger

        return _wasm_kernel_debugger.request(self.shell, request)

    def take_debug_requests(self):
        """Host work (_wasm_kernel_guest.host_work): the debugger's requests queued
        for a running cell, taken at its safe point. The signal for it may come again
        while they are answered (the handler runs at any safe point, this code's
        too): the loop already taking them takes those as well."""
        if self._taking_debug:
            return
        self._taking_debug = True
        try:
            answer = _guest.call({"op": wire.OP_DEBUG, "events": [], "responses": [], "take": True})
            requests = answer.get("requests") if isinstance(answer, dict) else None
            if requests:  # the debugger is imported only once there is something for it
                import _wasm_kernel_debugger

                _wasm_kernel_debugger.answer_taken(self.shell, requests)
        finally:
            self._taking_debug = False
