"""%network: the hosts this notebook may fetch from, as the operator allows them, narrowed if it asks.

The operator's list (c.WasmKernel.network_allow) is the most a notebook gets; a
notebook may narrow it for itself (only some of those hosts, or none) and set it
back, never widen it: the same rule as %limits.
"""

from __future__ import annotations

from ..session_protocol import SessionView
from .registry import MAGICS, MagicError, MagicOutput
from .tables import table_bundle


@MAGICS.add("network", "line", "%network [allow HOST ... | off | reset]", """Show the hosts this notebook may fetch
from over HTTP(S) (urllib, pandas.read_csv(url), requests), as the operator allows them. "allow HOST ..." narrows
them to those hosts (each must be on the operator's list); "off" allows none; "reset" gives the operator's list back.""")
def network_magic(session: SessionView, line: str, body: str | None) -> MagicOutput:
    words = line.split()
    operator = session.operator_network
    if words:
        command, hosts = words[0], words[1:]
        if operator is None and command != "reset":
            raise MagicError("%network: this sandbox has no network; the operator can allow hosts with "
                             "c.WasmKernel.network_allow")
        if command == "allow":
            if not hosts:
                raise MagicError("%network allow: name the hosts, e.g. %network allow data.example.org")
            try:
                session.set_network(operator.narrowed(hosts) if operator is not None else None)
            except ValueError as err:
                raise MagicError(f"%network: {err}") from None
        elif command == "off" and not hosts and operator is not None:
            session.set_network(operator.narrowed([]))
        elif command == "reset" and not hosts:
            session.set_network(operator)
        else:
            raise MagicError("%network: expected allow HOST ..., off or reset")
    current = session.network
    rows = [
        ("this notebook may fetch from", ", ".join(map(str, current.allow)) if current and current.allow else "nothing"),
        ("the operator allows", ", ".join(map(str, operator.allow)) if operator is not None else "nothing"),
    ]
    if operator is not None:
        rows += [
            ("per response", f"{operator.max_response_bytes:,} bytes"),
            ("per cell", f"{operator.max_requests_per_cell} requests, {operator.max_bytes_per_cell:,} bytes"),
            ("per request", f"{operator.timeout_s:g} s, within the cell's deadline"),
        ]
    return MagicOutput(bundles=[table_bundle(["", "value"], rows)])
