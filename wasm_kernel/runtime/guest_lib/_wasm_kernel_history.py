"""The shell's history: this interpreter's own cells in memory, everything older
read from the host's store, which outlives the guest (another kernel session, a
restarted interpreter).

The kernel session counts its cells on the host; an interpreter may be new (exit(),
%reset, a failed rollback) or may never have seen a cell (rolled back, undone, a
host magic). In[n] stays the cell numbered n all the same: missing lines are padded
and the host's rows fill them in.
"""

from IPython.core.history import HistoryManager, HistoryOutput

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire


class HostHistoryManager(HistoryManager):
    """In-memory history for this interpreter; older rows from the host's store."""

    def __init__(self, shell=None, **kwargs):
        kwargs.setdefault("enabled", False)  # no SQLite file, no saving thread
        super().__init__(shell=shell, **kwargs)

    def _ask(self, request):
        answer = _guest.call({"op": wire.OP_HISTORY, **request})
        rows = answer.get("history") if answer.get("ok") else None
        return [_history_row(row) for row in rows or ()]

    def get_tail(self, n=10, raw=True, output=False, include_latest=False):
        # As IPython: the newest n (plus the latest, dropped unless include_latest,
        # as it is usually the cell asking), the current session's from memory, where
        # the host has not stored them yet, older ones from the host.
        n = 10 if n is None else n
        want = n if include_latest else n + 1
        number = self.session_number
        rows = [(number, line, entry) for _, line, entry in self._get_range_session(1, None, raw, output)][-want:]
        if len(rows) < want and number:
            older = self._ask({"kind": "tail", "n": want + len(rows), "raw": raw, "output": output})
            rows = [row for row in older if row[0] != number][len(rows) - want:] + rows
        return rows if include_latest else rows[:-1]

    def search(self, pattern="*", raw=True, search_raw=True, output=False, n=None, unique=False):
        return self._ask({"kind": "search", "pattern": pattern, "raw": raw, "output": output, "n": n, "unique": unique})

    def get_range(self, session=0, start=1, stop=None, raw=True, output=False):
        if session <= 0:
            session += self.session_number
        if session == self.session_number:
            return self._get_range_session(start, stop, raw, output)
        return self._ask({"kind": "range", "session": session, "start": start, "stop": stop, "raw": raw, "output": output})

    def get_last_session_id(self):
        return self.session_number

    # --- In[n] as the kernel session numbers its cells ----------------------------

    def pad_to(self, line):
        """A cell the host counted but this interpreter never kept (rolled back by an
        interrupt or a limit, or undone) leaves its In[n] empty, so In[n] stays the
        cell numbered n."""
        while len(self.input_hist_parsed) < line:
            self.input_hist_parsed.append("")
            self.input_hist_raw.append("")

    def backfill(self, rows):
        """(n, source) of cells that never reached this shell (host magics only)."""
        for line, source in rows:
            self.pad_to(line)
            if len(self.input_hist_parsed) == line:
                self.store_inputs(line, source, source)

    def restore_session(self):
        """In and _iN as the host's store has them for this kernel session; returns
        the next execution count, or None if the store has no cell of it yet."""
        if not self.session_number:
            return None
        rows = self._ask({"kind": "range", "session": self.session_number, "start": 1, "stop": None,
                          "raw": True, "output": False})
        for _session, line, source in rows:
            self.pad_to(line)
            self.store_inputs(line, source, source)
        return rows[-1][1] + 1 if rows else None

    def keep_streams(self, count, captured):
        """What IPython's _tee keeps in `outputs` (each cell's stream text, for
        %notebook), from the (fd, bytes) writes the guest's ring writer collected:
        consecutive writes of one stream merge, as IPython merges them."""
        runs = []
        for fd, data in captured:
            if runs and runs[-1][0] == fd:
                runs[-1][1].append(data)
            else:
                runs.append((fd, [data]))
        for fd, parts in runs:
            text = b"".join(parts).decode("utf-8", "replace")
            if not text:
                continue
            output_type = "out_stream" if fd == 1 else "err_stream"
            kept = self.outputs[count]  # a defaultdict: a cell without output gets no entry
            if kept and kept[-1].output_type == output_type:
                kept[-1].bundle["stream"].append(text)
            else:
                kept.append(HistoryOutput(output_type=output_type, bundle={"stream": [text]}))


def _history_row(row):
    session, line, entry = row
    return (session, line, tuple(entry) if isinstance(entry, list) else entry)
